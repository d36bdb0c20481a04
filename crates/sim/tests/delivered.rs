//! What the congestion controller is told an ACK acknowledged: the segments it newly delivered
//! (Linux's `acked_sacked`), not the cumulative jump over data already SACKed (issue 12).

use coupling::Instant;
use sim::net::NodeId;
use sim::packet::{Packet, PacketKind, SackBlock};
use sim::transport::cc::{AckSample, CongestionControl, TcpCc};
use sim::transport::coupled::CouplingGroups;
use sim::transport::tcp::{Endpoints, Outbox, TcpConfig, TcpSender};
use std::sync::{Arc, Mutex};

const MSS: u64 = 1448;

/// NewReno's rules, recording every `acked` its `cong_avoid` sees.
#[derive(Debug)]
struct Recorder(Arc<Mutex<Vec<u32>>>);

impl CongestionControl for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (tp.in_flight / 2.0).max(2.0)
    }
    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        self.0.lock().unwrap().push(ack.acked);
        tp.cwnd += 1.0;
    }
}

fn ack(segs: u64, sacked: &[(u64, u64)]) -> Packet {
    let mut p = Packet::new(0, PacketKind::TcpAck, NodeId(1), NodeId(0), 52);
    p.ack = segs * MSS;
    for (i, &(a, b)) in sacked.iter().enumerate() {
        p.sack[i] = SackBlock {
            start: a * MSS,
            end: b * MSS,
        };
    }
    p.n_sack = sacked.len() as u8;
    p
}

#[test]
fn a_cumulative_ack_over_sacked_segments_delivers_only_the_new_ones() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ep = Endpoints {
        flow: 0,
        src: NodeId(0),
        dst: NodeId(1),
        dscp: 0,
        hash: 0,
    };
    // Uncoupled: the groups its hooks are given stay empty.
    let mut groups = CouplingGroups::default();
    let mut s = TcpSender::new(
        TcpConfig::default(),
        Box::new(Recorder(seen.clone())),
        ep,
        None,
    );
    let mut out = Outbox::default();
    let t = Instant::from_millis(1);
    s.start(Instant::ZERO, &mut out);
    // Segment 0 is late (reordered); 1 and 2 arrive first: two duplicate ACKs with SACK (fewer
    // than the three that would start recovery).
    assert!(!s.on_ack(&ack(0, &[(1, 2)]), t, &mut out, &mut groups));
    assert!(!s.on_ack(&ack(0, &[(1, 3)]), t, &mut out, &mut groups));
    // Segment 0 arrives: the ACK jumps to 3, but only segment 0 is new.
    assert!(s.on_ack(&ack(3, &[]), t, &mut out, &mut groups));
    // The next ACK covers 3 and 4 (delayed ACK) and SACKs 6: 3 new segments.
    assert!(s.on_ack(&ack(5, &[(6, 7)]), t, &mut out, &mut groups));
    // And the ACK for 5 jumps over the SACKed 6: one new segment.
    assert!(s.on_ack(&ack(7, &[]), t, &mut out, &mut groups));
    assert_eq!(*seen.lock().unwrap(), vec![1, 3, 1]);
}
