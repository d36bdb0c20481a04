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
        let (next, missed) = next_instant(run.epoch_ns, interval_ns, run.end_ns, k, now_ns());
        k = next;
        out.late += missed;
    }
    (out, netlink)
}

/// The instant to sample after instant `k`, taken by `now_ns`: the next one, unless it is
/// already more than half an interval behind, then the first that is not (the ones skipped are
/// missed, counted as late). Returns (that k, instants missed).
pub(crate) fn next_instant(
    epoch_ns: u64,
    interval_ns: u64,
    end_ns: u64,
    k: u64,
    now_ns: u64,
) -> (u64, u64) {
    let mut k = k + 1;
    let mut missed = 0;
    loop {
        let t = instant_ns(epoch_ns, interval_ns, k);
        if t >= end_ns || now_ns <= t + interval_ns / 2 {
            return (k, missed);
        }
        missed += 1;
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_instants_are_skipped_and_counted() {
        // Epoch 1000, interval 100, end 1000 + 1000: instants 1100, 1200, ..., 1900.
        let next = |k, now| next_instant(1000, 100, 2000, k, now);
        assert_eq!(next(1, 1110), (2, 0));
        // Instant 2 (1200) is still within half an interval at 1250.
        assert_eq!(next(1, 1250), (2, 0));
        assert_eq!(next(1, 1251), (3, 1));
        assert_eq!(next(1, 1480), (5, 3));
        // Past the last instant: k points after it; only the instants before the end count.
        assert_eq!(next(8, 5000), (10, 1));
    }
}
