//! The sampler (issue 15): at every instant k * interval since the epoch (k = 1, 2, ... while
//! before the end), TCP_INFO of this agent's open connections and the root qdisc statistics of
//! the sampled devices, so the testbed's time series line up with the simulator's.

use super::clock::{now_ns, set_timer_slack, Run};
use super::plan::QdiscTarget;
use super::qdisc::Netlink;
use super::tcp::{self, Registry};
use super::{QdiscSamples, TcpSamples};

pub(crate) struct Samples {
    pub tcp: TcpSamples,
    pub qdisc: QdiscSamples,
    pub late: u64,
}

/// The instants of a run: k * interval for k = 1, 2, ... while k * interval < duration.
pub(crate) fn instant_ns(epoch_ns: u64, interval_ns: u64, k: u64) -> u64 {
    epoch_ns + k * interval_ns
}

pub(crate) fn run(
    interval_ns: u64,
    registry: Registry,
    qdiscs: Vec<QdiscTarget>,
    mut netlink: Option<Netlink>,
    run: Run,
) -> (Samples, Option<Netlink>) {
    set_timer_slack();
    let mut out = Samples {
        tcp: TcpSamples::default(),
        qdisc: QdiscSamples::default(),
        late: 0,
    };
    let sampled: Vec<&QdiscTarget> = qdiscs.iter().filter(|q| q.sample).collect();
    let mut k = 1u64;
    loop {
        let t = instant_ns(run.epoch_ns, interval_ns, k);
        if t >= run.end_ns || !run.sleep_until(t) {
            break;
        }
        if now_ns().saturating_sub(t) > interval_ns / 2 {
            out.late += 1;
        }
        let t_s = run.t_s(t);
        for (i, info) in tcp::sample(&registry) {
            match info {
                Ok(x) => {
                    let s = &mut out.tcp;
                    s.t_s.push(t_s);
                    s.conn.push(i);
                    s.cwnd_pkts.push(x.tcpi_snd_cwnd);
                    s.ssthresh_pkts.push(x.tcpi_snd_ssthresh);
                    s.ca_state.push(x.tcpi_ca_state);
                    s.bytes_acked.push(x.tcpi_bytes_acked);
                    s.srtt_us.push(x.tcpi_rtt);
                    s.total_retrans.push(x.tcpi_total_retrans);
                    s.rttvar_us.push(x.tcpi_rttvar);
                    s.unacked_pkts.push(x.tcpi_unacked);
                    s.bytes_retrans.push(x.tcpi_bytes_retrans);
                    s.delivery_rate_bytes_per_s.push(x.tcpi_delivery_rate);
                    s.pacing_rate_bytes_per_s.push(x.tcpi_pacing_rate);
                }
                Err(e) => run.error(format!("sampler: TCP_INFO of tcp report {i}: {e}")),
            }
        }
        if let (Some(nl), false) = (netlink.as_mut(), sampled.is_empty()) {
            match nl.root_qdiscs() {
                Ok(found) => {
                    for q in &sampled {
                        let Some(x) = found.get(&q.ifindex) else {
                            run.error(format!(
                                "sampler: {} ({}) had no root qdisc at some instants",
                                q.name, q.dev
                            ));
                            continue;
                        };
                        let s = &mut out.qdisc;
                        s.t_s.push(t_s);
                        s.link.push(q.link);
                        s.qlen_pkts.push(x.qlen_pkts);
                        s.backlog_bytes.push(x.backlog_bytes);
                        s.drops.push(x.drops);
                        s.sent_pkts.push(x.sent_pkts);
                        s.sent_bytes.push(x.sent_bytes);
                        s.overlimits.push(x.overlimits);
                        s.requeues.push(x.requeues);
                    }
                }
                Err(e) => run.error(format!("sampler: {e}")),
            }
        }
        // Instants already more than half an interval behind are missed: counted, skipped.
        k += 1;
        let now = now_ns();
        loop {
            let next = instant_ns(run.epoch_ns, interval_ns, k);
            if next >= run.end_ns || now <= next + interval_ns / 2 {
                break;
            }
            out.late += 1;
            k += 1;
        }
    }
    (out, netlink)
}
