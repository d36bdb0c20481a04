//! Congestion controllers behind a small table of hooks shaped like Linux `tcp_congestion_ops`
//! (ssthresh, cong_avoid, set_state, cwnd_event, pkts_acked, undo_cwnd, init), so a controller
//! here maps one-to-one onto an eBPF struct_ops program. Per-connection state a controller reads
//! and writes is [`TcpCc`]; measurements arrive as an [`AckSample`].

use coupling::{Duration, Instant};

/// Linux's congestion-avoidance states (`TCP_CA_*`), reduced to the ones the simulator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    Open,
    /// Fast recovery after duplicate ACKs.
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Events a controller may react to (Linux `tcp_ca_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwndEvent {
    /// First transmission after the connection was idle.
    TxStart,
    /// A retransmission timeout.
    Loss,
}

/// The connection state a controller sees (Linux `struct tcp_sock` fields it uses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpCc {
    /// Congestion window in segments (fractional, as ns-2 keeps it).
    pub cwnd: f64,
    pub ssthresh: f64,
    pub ca_state: CaState,
    /// Segments in flight when the hook is called.
    pub in_flight: f64,
    pub srtt: Option<Duration>,
    pub min_rtt: Option<Duration>,
    /// The sequence number (bytes) after the highest byte sent (Linux `tp->snd_nxt`; Vegas
    /// marks the end of a window with it).
    pub snd_nxt: u64,
}

/// One acknowledgement, as the controller's per-ACK hooks see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckSample {
    /// Segments this ACK newly delivered: cumulatively acknowledged and not SACKed before, plus
    /// newly SACKed (Linux's `acked_sacked`, the `acked` its `cong_avoid` is given).
    pub acked: u32,
    pub rtt: Option<Duration>,
    /// One-way delay of the data packet that triggered this ACK, measured by the receiver from the
    /// sender's timestamp (LEDBAT, RFC 6817 sec. 2.2).
    pub one_way_delay: Option<Duration>,
    pub now: Instant,
    /// The cumulative acknowledgement (bytes): Linux's `ack` argument of `.cong_avoid`.
    pub ack_seq: u64,
}

pub trait CongestionControl: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    fn init(&mut self, _tp: &mut TcpCc) {}
    /// The slow-start threshold after a loss (Linux `.ssthresh`).
    fn ssthresh(&mut self, tp: &TcpCc) -> f64;
    /// Window growth on an ACK outside recovery (Linux `.cong_avoid`).
    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample);
    fn set_state(&mut self, _tp: &mut TcpCc, _new: CaState) {}
    fn cwnd_event(&mut self, _tp: &mut TcpCc, _ev: CwndEvent) {}
    fn pkts_acked(&mut self, _tp: &mut TcpCc, _ack: &AckSample) {}
    /// The window to restore when a reduction turns out spurious (Linux `.undo_cwnd`).
    fn undo_cwnd(&mut self, tp: &TcpCc) -> f64 {
        tp.cwnd
    }
}

/// A boxed controller is a controller (the registry builds boxes; tests drive them generically).
impl<C: CongestionControl + ?Sized> CongestionControl for Box<C> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn init(&mut self, tp: &mut TcpCc) {
        (**self).init(tp)
    }
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (**self).ssthresh(tp)
    }
    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        (**self).cong_avoid(tp, ack)
    }
    fn set_state(&mut self, tp: &mut TcpCc, new: CaState) {
        (**self).set_state(tp, new)
    }
    fn cwnd_event(&mut self, tp: &mut TcpCc, ev: CwndEvent) {
        (**self).cwnd_event(tp, ev)
    }
    fn pkts_acked(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        (**self).pkts_acked(tp, ack)
    }
    fn undo_cwnd(&mut self, tp: &TcpCc) -> f64 {
        (**self).undo_cwnd(tp)
    }
}

/// NewReno's window rules (RFC 5681): slow start adds one segment per ACK, congestion avoidance
/// 1/cwnd per ACK, with no byte counting, so with delayed ACKs (a = 2 segments per ACK) the window
/// grows by 1/a segment per RTT, exactly as seed 001 sec. 2.3 models it. Loss halves the flight.
#[derive(Clone, Debug, Default)]
pub struct NewReno;

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    /// RFC 5681 eq. (4): max(FlightSize / 2, 2 * SMSS).
    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (tp.in_flight / 2.0).max(2.0)
    }

    fn cong_avoid(&mut self, tp: &mut TcpCc, _ack: &AckSample) {
        if tp.cwnd < tp.ssthresh {
            tp.cwnd += 1.0;
        } else {
            tp.cwnd += 1.0 / tp.cwnd;
        }
    }
}

/// NewReno with appropriate byte counting (RFC 3465), counted in segments as Linux's
/// `tcp_reno_cong_avoid` does (the kernel function the BPF port calls): slow start adds every
/// segment an ACK covers up to ssthresh (`tcp_slow_start`; RFC 3465 sec. 2.2 caps it at L = 2
/// segments per ACK, Linux does not, and with 2-segment delayed ACKs the two agree), the rest goes
/// to congestion avoidance at `acked / cwnd` (`tcp_cong_avoid_ai`: one segment per window of
/// segments acknowledged, RFC 3465 sec. 2.1). So the window grows one segment per RTT with or
/// without delayed ACKs, where [`NewReno`] (ns-2's and ns-3's default) grows 1/a. Its ssthresh
/// is NewReno's RFC 5681 `FlightSize / 2` (Linux's `tcp_reno_ssthresh` halves cwnd; the two agree
/// when the window is full, as it is when a loss is found).
#[derive(Clone, Debug, Default)]
pub struct NewRenoAbc;

/// Linux `tcp_slow_start`: `cwnd = min(cwnd + acked, ssthresh)`; returns the segments left over
/// for congestion avoidance.
pub fn slow_start(tp: &mut TcpCc, acked: f64) -> f64 {
    let next = (tp.cwnd + acked).min(tp.ssthresh.max(tp.cwnd));
    let left = acked - (next - tp.cwnd);
    tp.cwnd = next;
    left
}

impl CongestionControl for NewRenoAbc {
    fn name(&self) -> &'static str {
        "newreno_abc"
    }

    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        (tp.in_flight / 2.0).max(2.0)
    }

    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        let mut acked = f64::from(ack.acked);
        if tp.cwnd < tp.ssthresh {
            acked = slow_start(tp, acked);
            if acked <= 0.0 {
                return;
            }
        }
        tp.cwnd += acked / tp.cwnd;
    }
}

/// Linux's Reno as the kernel keeps its window (issue 14's integer window mode): `snd_cwnd` is a
/// whole number of packets, grown in slow start by the packets acknowledged up to ssthresh
/// (`tcp_slow_start`) and in congestion avoidance by one packet per window of packets
/// acknowledged, counted in `snd_cwnd_cnt` (`tcp_cong_avoid_ai`, both called by
/// `tcp_reno_cong_avoid`, the kfunc a BPF controller calls); ssthresh is `max(cwnd / 2, 2)`
/// (`tcp_reno_ssthresh`). With a coupler in the integer mode (`ccc_int`) every window a
/// connection holds is whole, as in the kernel port. (Linux also skips growth while the
/// connection is not cwnd-limited; like the other controllers here, this one does not.)
#[derive(Clone, Debug, Default)]
pub struct RenoInt {
    /// `snd_cwnd_cnt`: packets acknowledged towards the next congestion-avoidance increase.
    cnt: u32,
}

impl CongestionControl for RenoInt {
    fn name(&self) -> &'static str {
        "reno_int"
    }

    fn ssthresh(&mut self, tp: &TcpCc) -> f64 {
        ((whole(tp.cwnd) >> 1).max(2)) as f64
    }

    /// Linux zeroes `snd_cwnd_cnt` on entering recovery (`tcp_init_cwnd_reduction`): credit
    /// earned before a loss does not count after it.
    fn set_state(&mut self, _tp: &mut TcpCc, new: CaState) {
        if new == CaState::Recovery {
            self.cnt = 0;
        }
    }

    /// ... and on every retransmission timeout (`tcp_enter_loss`).
    fn cwnd_event(&mut self, _tp: &mut TcpCc, ev: CwndEvent) {
        if ev == CwndEvent::Loss {
            self.cnt = 0;
        }
    }

    fn cong_avoid(&mut self, tp: &mut TcpCc, ack: &AckSample) {
        let mut cwnd = whole(tp.cwnd);
        let ssthresh = whole(tp.ssthresh);
        let mut acked = ack.acked;
        if cwnd < ssthresh {
            // tcp_slow_start.
            let next = cwnd.saturating_add(acked).min(ssthresh);
            acked -= next - cwnd;
            cwnd = next;
            if acked == 0 {
                tp.cwnd = f64::from(cwnd);
                return;
            }
        }
        // tcp_cong_avoid_ai(tp, cwnd, acked).
        let w = cwnd.max(1);
        if self.cnt >= w {
            // Credits accumulated at a larger window: applied gently.
            self.cnt = 0;
            cwnd += 1;
        }
        self.cnt += acked;
        if self.cnt >= w {
            let delta = self.cnt / w;
            self.cnt -= delta * w;
            cwnd += delta;
        }
        tp.cwnd = f64::from(cwnd);
    }
}

/// A window as the kernel's `u32` count of packets (a fraction, which only a coupler in the float
/// mode or the sender's NewReno inflation can give, is dropped).
fn whole(pkts: f64) -> u32 {
    pkts.clamp(0.0, f64::from(u32::MAX)) as u32
}

/// A congestion control the simulator can build: its name (scenario files, Python, the CLI) and
/// how to build one.
#[derive(Debug)]
pub struct CcEntry {
    pub name: &'static str,
    /// One line for listings and docs.
    pub about: &'static str,
    /// Keeps its window a whole number of packets (as the kernel does): the only kind a coupling
    /// group in the integer window mode (`ccc_int`) accepts, since that group's answers drop a
    /// fraction and a controller growing by fractions would never grow.
    pub whole_packets: bool,
    build: fn() -> Box<dyn CongestionControl>,
}

/// Every congestion control, by name: the one list the bindings, scenario validation, the CLI and
/// the docs read. A new controller is its file plus one line here.
#[rustfmt::skip]
pub static CONGESTION_CONTROLS: &[CcEntry] = &[
    CcEntry { name: "newreno", about: "RFC 5681/6582 NewReno, a/cwnd per ACK (ns-2's and ns-3's rule)", whole_packets: false, build: || Box::new(NewReno) },
    CcEntry { name: "newreno_abc", about: "NewReno counting acknowledged segments (RFC 3465, Linux tcp_reno_cong_avoid)", whole_packets: false, build: || Box::new(NewRenoAbc) },
    CcEntry { name: "cubic", about: "CUBIC (RFC 9438, Linux bic_tcp without HyStart)", whole_packets: false, build: || Box::new(crate::transport::cubic::Cubic::default()) },
    CcEntry { name: "ledbat", about: "LEDBAT (RFC 6817) with its default parameters", whole_packets: false, build: || Box::new(crate::transport::ledbat::Ledbat::default()) },
    CcEntry { name: "vegas", about: "TCP Vegas (Brakmo and Peterson 1995), as Linux tcp_vegas", whole_packets: false, build: || Box::new(crate::transport::vegas::Vegas::default()) },
    CcEntry { name: "reno_int", about: "Linux Reno with whole-packet windows and snd_cwnd_cnt (tcp_reno_cong_avoid), for ccc_int", whole_packets: true, build: || Box::new(RenoInt::default()) },
];

/// Which congestion control a flow runs: an entry of [`CONGESTION_CONTROLS`].
#[derive(Clone, Copy)]
pub struct CcKind(&'static CcEntry);

impl std::fmt::Debug for CcKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CcKind({:?})", self.0.name)
    }
}

impl PartialEq for CcKind {
    /// By name (names are unique): a `const` table's entries need not have one address.
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for CcKind {}

impl Default for CcKind {
    /// NewReno.
    fn default() -> Self {
        CcKind(&CONGESTION_CONTROLS[0])
    }
}

impl CcKind {
    pub fn build(self) -> Box<dyn CongestionControl> {
        (self.0.build)()
    }

    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// See [`CcEntry::whole_packets`].
    pub fn whole_packets(self) -> bool {
        self.0.whole_packets
    }

    pub fn from_name(name: &str) -> Option<CcKind> {
        // "reno" is what Linux and ns-3 call it.
        let name = if name == "reno" { "newreno" } else { name };
        CONGESTION_CONTROLS
            .iter()
            .find(|e| e.name == name)
            .map(CcKind)
    }

    /// The controller called `name`, for names written in code; panics if there is none (input
    /// goes through [`CcKind::from_name`]).
    pub fn named(name: &str) -> CcKind {
        CcKind::from_name(name).unwrap_or_else(|| panic!("no congestion control {name:?}"))
    }

    /// Every name, in the registry's order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        CONGESTION_CONTROLS.iter().map(|e| e.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_controller_builds_under_its_own_name() {
        let names: Vec<_> = CcKind::names().collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "names are unique");
        for n in names {
            assert_eq!(CcKind::named(n).build().name(), n);
            assert_eq!(CcKind::named(n).name(), n);
        }
        assert_eq!(CcKind::from_name("reno"), Some(CcKind::default()));
        assert_eq!(CcKind::from_name("bbr"), None);
    }

    /// An ACK of `acked` segments, without delay samples.
    fn ack(acked: u32) -> AckSample {
        AckSample {
            ack_seq: 0,
            acked,
            rtt: None,
            one_way_delay: None,
            now: Instant::ZERO,
        }
    }

    fn tp(cwnd: f64, ssthresh: f64) -> TcpCc {
        TcpCc {
            snd_nxt: 0,
            cwnd,
            ssthresh,
            ca_state: CaState::Open,
            in_flight: cwnd,
            srtt: None,
            min_rtt: None,
        }
    }

    /// Seed 001 sec. 2.3 and RFC 3465 on the shared test sender: in congestion avoidance with
    /// delayed ACKs (2 segments per ACK), NewReno grows 1/2 segment per RTT; counting the acked
    /// segments (newreno_abc, reno_int) grows one per RTT, with or without delayed ACKs.
    #[test]
    fn growth_per_rtt_in_congestion_avoidance() {
        use crate::transport::test_sender::TestSender;
        let rtt = Duration::from_millis(100);
        for (name, per_ack, want) in [
            ("newreno", 2, 0.5),
            ("newreno", 1, 1.0),
            ("newreno_abc", 2, 1.0),
            ("reno_int", 2, 1.0),
            ("reno_int", 1, 1.0),
        ] {
            let mut s = TestSender::new(CcKind::named(name).build(), 100.0, 100.0, rtt);
            s.per_ack = per_ack;
            s.run_for(10.0);
            let per_rtt = (s.tp.cwnd - 100.0) / 100.0;
            assert!(
                (per_rtt - want).abs() < 0.1,
                "{name}, {per_ack} per ACK: {per_rtt}"
            );
        }
    }

    /// Linux's arithmetic: slow start stops at ssthresh and the rest of the ACK counts towards
    /// congestion avoidance; there a window of w packets adds one packet per w acknowledged,
    /// whatever the ACK size; credit earned at a larger window is applied as one packet.
    #[test]
    fn reno_int_keeps_whole_packets_as_linux_does() {
        let mut cc = RenoInt::default();
        let mut t = tp(8.0, 10.0);
        cc.cong_avoid(&mut t, &ack(3));
        assert_eq!(
            (t.cwnd, cc.cnt),
            (10.0, 1),
            "2 to reach ssthresh, 1 counted"
        );
        for _ in 0..9 {
            cc.cong_avoid(&mut t, &ack(1));
        }
        assert_eq!((t.cwnd, cc.cnt), (11.0, 0), "10 acknowledged at w = 10: +1");
        cc.cong_avoid(&mut t, &ack(25));
        assert_eq!((t.cwnd, cc.cnt), (13.0, 3), "25 = 2 * 11 + 3");
        t.cwnd = 2.0; // a coupler's answer shrank it
        t.ssthresh = 2.0;
        cc.cong_avoid(&mut t, &ack(1));
        assert_eq!(
            (t.cwnd, cc.cnt),
            (3.0, 1),
            "the credit of 3 >= 2 applied gently as one"
        );
        // A loss zeroes the credit, as tcp_enter_loss and tcp_init_cwnd_reduction do.
        cc.cong_avoid(&mut t, &ack(1));
        assert_eq!(cc.cnt, 2);
        cc.cwnd_event(&mut t, CwndEvent::Loss);
        assert_eq!(cc.cnt, 0);
        cc.cnt = 2;
        cc.set_state(&mut t, CaState::Recovery);
        assert_eq!(cc.cnt, 0);
        assert_eq!(cc.ssthresh(&tp(13.0, 1e9)), 6.0);
        assert_eq!(cc.ssthresh(&tp(3.0, 1e9)), 2.0);
        assert!(t.cwnd.fract() == 0.0);
    }

    #[test]
    fn newreno_grows_one_per_ack_in_slow_start_and_one_per_window_in_ca() {
        let ack = AckSample {
            ack_seq: 0,
            acked: 2,
            rtt: None,
            one_way_delay: None,
            now: Instant::ZERO,
        };
        let mut cc = NewReno;
        let mut t = tp(10.0, 100.0);
        cc.cong_avoid(&mut t, &ack);
        assert_eq!(
            t.cwnd, 11.0,
            "one segment per ACK, not per acked segment (no ABC)"
        );
        let mut t = tp(10.0, 5.0);
        for _ in 0..10 {
            cc.cong_avoid(&mut t, &ack);
        }
        assert!((t.cwnd - 11.0).abs() < 0.05, "{}", t.cwnd);
    }

    #[test]
    fn newreno_halves_the_flight() {
        let mut cc = NewReno;
        assert_eq!(cc.ssthresh(&tp(40.0, 100.0)), 20.0);
        assert_eq!(cc.ssthresh(&tp(3.0, 100.0)), 2.0);
    }

    /// RFC 3465 / Linux: one window of segments acknowledged adds one segment, whether they come
    /// one or two per ACK; slow start doubles per RTT either way and stops at ssthresh, the rest
    /// of the ACK going to congestion avoidance.
    #[test]
    fn newreno_abc_counts_acknowledged_segments() {
        for per_ack in [1u32, 2] {
            // One RTT of congestion avoidance at cwnd 20: 20 segments acknowledged.
            let mut t = tp(20.0, 5.0);
            for _ in 0..20 / per_ack {
                NewRenoAbc.cong_avoid(&mut t, &ack(per_ack));
            }
            assert!(
                (t.cwnd - 21.0).abs() < 0.03,
                "{per_ack} per ACK: {}",
                t.cwnd
            );
            // One RTT of slow start from 10: doubles.
            let mut t = tp(10.0, 100.0);
            for _ in 0..10 / per_ack {
                NewRenoAbc.cong_avoid(&mut t, &ack(per_ack));
            }
            assert_eq!(t.cwnd, 20.0, "{per_ack} per ACK");
        }
        // At ssthresh 11 an ACK of 2 takes one segment to 11 and gives 1/11 to avoidance.
        let mut t = tp(10.0, 11.0);
        NewRenoAbc.cong_avoid(&mut t, &ack(2));
        assert!((t.cwnd - (11.0 + 1.0 / 11.0)).abs() < 1e-12, "{}", t.cwnd);
        // Plain NewReno under delayed ACKs: half a segment per RTT (seed 001's a = 2).
        let mut t = tp(20.0, 5.0);
        for _ in 0..10 {
            NewReno.cong_avoid(&mut t, &ack(2));
        }
        assert!((t.cwnd - 20.5).abs() < 0.02, "{}", t.cwnd);
    }
}
