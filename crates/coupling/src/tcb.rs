//! TCB interdependence: RFC 2140bis (seed 003 ch. 12), published as RFC 9040.
//!
//! A cache of per-peer TCP state, read to initialize a new connection and written when better
//! state is known. Two kinds of sharing (sec. 5):
//! - **temporal**: a new connection starts from what earlier, now closed connections to the same
//!   peer learned. Written at CLOSE with `merge(curr, old)` (sec. 6, "TEMPORAL SHARING - Cache
//!   Updates"); the draft leaves the merge functions open ("THESE MERGE FUNCTIONS NEED TO BE
//!   SPECIFIED"), so we use the arithmetic mean of old and current, as FreeBSD's host cache does for
//!   ssthresh (sec. 10's table) and for RTT and RTTVAR; with no old value, the current one.
//! - **ensemble**: concurrent connections share RTT state as if all samples were measured by one
//!   connection (sec. 7, `rtt_update`): every sample updates the shared SRTT and RTTVAR with the
//!   RFC 6298 filter (alpha = 1/8, beta = 1/4).
//!
//! MSS and PMTU are "safe" and cached as most recently reported. cwnd and ssthresh are marked TBD in
//! the draft and are shared only when [`TcbConfig::share_congestion`] is set (opt-in): temporally as
//! merged values, and for an ensemble as the fair share of the open connections' windows ("give each
//! pending connection its 'fair share' of the available congestion window", sec. 7).
//!
//! Values are validated against minimum defaults before use (an invalid one is not used: the
//! connection keeps its own default): MSS >= `min_mss` (536, RFC 9293), PMTU >= `min_mss` + 40,
//! SRTT above zero with RTO = max(`min_rto`, SRTT + 4 RTTVAR) (RFC 6298), ssthresh >= 2 segments
//! (RFC 5681), cwnd >= the initial window. Entries not written for longer than `expiry` are forgotten
//! (sec. 8: cached information "could also become invalid over time").

use crate::error::Error;
use crate::group::FlowId;
use crate::units::{check_window, Duration, Instant};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// Whose state is shared: a peer host, optionally narrowed to one destination port (sec. 8: sharing
/// "only within connections to the same SYN destination port" limits the effect of ECMP and LAG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerKey {
    pub addr: IpAddr,
    pub port: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcbConfig {
    /// Opt in to sharing cwnd and ssthresh.
    pub share_congestion: bool,
    pub expiry: Duration,
    pub min_mss: u32,
    pub min_rto: Duration,
    pub min_ssthresh_pkts: f64,
    pub initial_window_pkts: f64,
}

impl Default for TcbConfig {
    fn default() -> Self {
        TcbConfig {
            share_congestion: false,
            expiry: Duration::from_secs(600),
            min_mss: 536,
            min_rto: Duration::from_secs(1),
            min_ssthresh_pkts: 2.0,
            initial_window_pkts: 10.0,
        }
    }
}

/// Values to initialize a new TCB with; `None`: nothing valid is cached, use the default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TcbInit {
    pub mss: Option<u32>,
    pub pmtu: Option<u32>,
    pub srtt: Option<Duration>,
    pub rttvar: Option<Duration>,
    pub rto: Option<Duration>,
    pub cwnd_pkts: Option<f64>,
    pub ssthresh_pkts: Option<f64>,
}

/// A closing connection's state, merged into the cache (temporal sharing).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TcbSnapshot {
    pub srtt: Option<Duration>,
    pub rttvar: Option<Duration>,
    pub cwnd_pkts: Option<f64>,
    pub ssthresh_pkts: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Entry {
    mss: Option<u32>,
    pmtu: Option<u32>,
    /// Shared SRTT and RTTVAR in nanoseconds (f64 so the RFC 6298 filter does not round).
    srtt_ns: Option<f64>,
    rttvar_ns: Option<f64>,
    cwnd: Option<f64>,
    ssthresh: Option<f64>,
    /// Open connections and their current windows (ensemble sharing).
    open: BTreeMap<FlowId, f64>,
    updated: Instant,
}

/// The TCB cache.
#[derive(Clone, Debug, Default)]
pub struct TcbCache {
    config: TcbConfig,
    entries: HashMap<PeerKey, Entry>,
}

fn mean(old: Option<f64>, curr: f64) -> f64 {
    match old {
        Some(o) => (o + curr) / 2.0,
        None => curr,
    }
}

impl TcbCache {
    pub fn new(config: TcbConfig) -> Self {
        TcbCache {
            config,
            entries: HashMap::new(),
        }
    }

    pub fn config(&self) -> TcbConfig {
        self.config
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn is_expired(&self, e: &Entry, now: Instant) -> bool {
        e.open.is_empty() && now.saturating_since(e.updated) > self.config.expiry
    }

    /// Drops every entry that has expired; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let before = self.entries.len();
        let expiry = self.config.expiry;
        self.entries
            .retain(|_, e| !(e.open.is_empty() && now.saturating_since(e.updated) > expiry));
        before - self.entries.len()
    }

    fn entry(&mut self, key: PeerKey, now: Instant) -> &mut Entry {
        if self
            .entries
            .get(&key)
            .is_some_and(|e| self.is_expired(e, now))
        {
            self.entries.remove(&key);
        }
        self.entries.entry(key).or_default()
    }

    /// What a new connection to `key` would be initialized with, without opening it.
    pub fn lookup(&self, key: PeerKey, now: Instant) -> TcbInit {
        let Some(e) = self.entries.get(&key).filter(|e| !self.is_expired(e, now)) else {
            return TcbInit::default();
        };
        let c = &self.config;
        let mss = e.mss.filter(|m| *m >= c.min_mss);
        let pmtu = e.pmtu.filter(|p| *p >= c.min_mss + 40);
        let (srtt, rttvar, rto) = match (e.srtt_ns, e.rttvar_ns) {
            (Some(s), Some(v)) if s > 0.0 => {
                let rto = Duration::from_nanos((s + 4.0 * v) as u64).max(c.min_rto);
                (
                    Some(Duration::from_nanos(s as u64)),
                    Some(Duration::from_nanos(v as u64)),
                    Some(rto),
                )
            }
            _ => (None, None, None),
        };
        let (mut cwnd, mut ssthresh) = (None, None);
        if c.share_congestion {
            cwnd = if e.open.is_empty() {
                e.cwnd
            } else {
                Some(e.open.values().sum::<f64>() / (e.open.len() + 1) as f64)
            }
            .filter(|w| *w >= c.initial_window_pkts);
            ssthresh = e.ssthresh.filter(|s| *s >= c.min_ssthresh_pkts);
        }
        TcbInit {
            mss,
            pmtu,
            srtt,
            rttvar,
            rto,
            cwnd_pkts: cwnd,
            ssthresh_pkts: ssthresh,
        }
    }

    /// Opens a connection: returns its initial values and counts it in the ensemble.
    pub fn open(&mut self, key: PeerKey, conn: FlowId, now: Instant) -> Result<TcbInit, Error> {
        if self
            .entries
            .get(&key)
            .is_some_and(|e| e.open.contains_key(&conn))
        {
            return Err(Error::DuplicateFlow(conn));
        }
        let init = self.lookup(key, now);
        let start = init.cwnd_pkts.unwrap_or(self.config.initial_window_pkts);
        let e = self.entry(key, now);
        e.open.insert(conn, start);
        e.updated = now;
        Ok(init)
    }

    /// The current window of an open connection (ensemble sharing of cwnd).
    pub fn on_cwnd(
        &mut self,
        key: PeerKey,
        conn: FlowId,
        cwnd_pkts: f64,
        now: Instant,
    ) -> Result<(), Error> {
        check_window("cwnd_pkts", cwnd_pkts)?;
        let e = self.entries.get_mut(&key).ok_or(Error::UnknownFlow(conn))?;
        let w = e.open.get_mut(&conn).ok_or(Error::UnknownFlow(conn))?;
        *w = cwnd_pkts;
        e.updated = now;
        Ok(())
    }

    /// An RTT sample from any connection to `key` (ensemble `rtt_update`, RFC 6298 sec. 2).
    pub fn on_rtt_sample(
        &mut self,
        key: PeerKey,
        sample: Duration,
        now: Instant,
    ) -> Result<(), Error> {
        if sample == Duration::ZERO {
            return Err(Error::InvalidValue {
                field: "rtt sample",
                value: 0.0,
                expected: "an RTT > 0",
            });
        }
        let r = sample.as_nanos() as f64;
        let e = self.entry(key, now);
        match (e.srtt_ns, e.rttvar_ns) {
            (Some(s), Some(v)) => {
                e.rttvar_ns = Some(0.75 * v + 0.25 * (s - r).abs());
                e.srtt_ns = Some(0.875 * s + 0.125 * r);
            }
            _ => {
                e.srtt_ns = Some(r);
                e.rttvar_ns = Some(r / 2.0);
            }
        }
        e.updated = now;
        Ok(())
    }

    /// An MSS option received in a SYN: cached as the most recent value.
    pub fn on_mss_option(&mut self, key: PeerKey, mss: u32, now: Instant) -> Result<(), Error> {
        if mss == 0 {
            return Err(Error::InvalidValue {
                field: "mss",
                value: 0.0,
                expected: "an MSS > 0",
            });
        }
        let e = self.entry(key, now);
        e.mss = Some(mss);
        e.updated = now;
        Ok(())
    }

    /// A path MTU learned by PMTUD or PLPMTUD: cached as the most recent value.
    pub fn on_pmtu(&mut self, key: PeerKey, pmtu: u32, now: Instant) -> Result<(), Error> {
        if pmtu == 0 {
            return Err(Error::InvalidValue {
                field: "pmtu",
                value: 0.0,
                expected: "a PMTU > 0",
            });
        }
        let e = self.entry(key, now);
        e.pmtu = Some(pmtu);
        e.updated = now;
        Ok(())
    }

    /// Closes a connection and merges its state into the cache (temporal sharing).
    pub fn close(
        &mut self,
        key: PeerKey,
        conn: FlowId,
        snap: TcbSnapshot,
        now: Instant,
    ) -> Result<(), Error> {
        if let Some(w) = snap.cwnd_pkts {
            check_window("cwnd_pkts", w)?;
        }
        if let Some(s) = snap.ssthresh_pkts {
            check_window("ssthresh_pkts", s)?;
        }
        let share = self.config.share_congestion;
        let e = self.entries.get_mut(&key).ok_or(Error::UnknownFlow(conn))?;
        if e.open.remove(&conn).is_none() {
            return Err(Error::UnknownFlow(conn));
        }
        if let Some(s) = snap.srtt {
            e.srtt_ns = Some(mean(e.srtt_ns, s.as_nanos() as f64));
        }
        if let Some(v) = snap.rttvar {
            e.rttvar_ns = Some(mean(e.rttvar_ns, v.as_nanos() as f64));
        }
        if share {
            if let Some(w) = snap.cwnd_pkts {
                e.cwnd = Some(mean(e.cwnd, w));
            }
            if let Some(s) = snap.ssthresh_pkts {
                e.ssthresh = Some(mean(e.ssthresh, s));
            }
        }
        e.updated = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const PEER: PeerKey = PeerKey {
        addr: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        port: None,
    };

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn temporal_sharing_merges_rtt_by_mean_and_hides_congestion_state_by_default() {
        let mut c = TcbCache::new(TcbConfig::default());
        let t0 = Instant::ZERO;
        c.open(PEER, FlowId(1), t0).unwrap();
        let snap = TcbSnapshot {
            srtt: Some(ms(100)),
            rttvar: Some(ms(20)),
            cwnd_pkts: Some(40.0),
            ssthresh_pkts: Some(30.0),
        };
        c.close(PEER, FlowId(1), snap, t0).unwrap();
        c.open(PEER, FlowId(2), t0).unwrap();
        c.close(
            PEER,
            FlowId(2),
            TcbSnapshot {
                srtt: Some(ms(200)),
                rttvar: Some(ms(40)),
                ..snap
            },
            t0,
        )
        .unwrap();
        let init = c.lookup(PEER, t0);
        assert_eq!(init.srtt, Some(ms(150)));
        assert_eq!(init.rttvar, Some(ms(30)));
        assert_eq!(
            init.rto,
            Some(Duration::from_secs(1)),
            "150 + 4*30 ms is below the 1 s minimum"
        );
        assert_eq!(
            (init.cwnd_pkts, init.ssthresh_pkts),
            (None, None),
            "cwnd/ssthresh are opt-in"
        );
    }

    #[test]
    fn opt_in_congestion_sharing_temporal_and_ensemble() {
        let mut c = TcbCache::new(TcbConfig {
            share_congestion: true,
            ..TcbConfig::default()
        });
        let t0 = Instant::ZERO;
        c.open(PEER, FlowId(1), t0).unwrap();
        let snap = TcbSnapshot {
            cwnd_pkts: Some(40.0),
            ssthresh_pkts: Some(30.0),
            ..Default::default()
        };
        c.close(PEER, FlowId(1), snap, t0).unwrap();
        let init = c.open(PEER, FlowId(2), t0).unwrap();
        assert_eq!(
            (init.cwnd_pkts, init.ssthresh_pkts),
            (Some(40.0), Some(30.0))
        );
        c.on_cwnd(PEER, FlowId(2), 60.0, t0).unwrap();
        // Ensemble: a second concurrent connection gets the fair share 60 / 2.
        assert_eq!(c.open(PEER, FlowId(3), t0).unwrap().cwnd_pkts, Some(30.0));
        c.on_cwnd(PEER, FlowId(3), 4.0, t0).unwrap();
        c.on_cwnd(PEER, FlowId(2), 4.0, t0).unwrap();
        // (4 + 4) / 3 < IW = 10: not used, the connection keeps its default.
        assert_eq!(c.open(PEER, FlowId(4), t0).unwrap().cwnd_pkts, None);
    }

    #[test]
    fn ensemble_rtt_follows_rfc6298() {
        let mut c = TcbCache::new(TcbConfig::default());
        let t0 = Instant::ZERO;
        c.on_rtt_sample(PEER, ms(100), t0).unwrap();
        c.on_rtt_sample(PEER, ms(200), t0).unwrap();
        let init = c.lookup(PEER, t0);
        // SRTT = 7/8*100 + 1/8*200 = 112.5; RTTVAR = 3/4*50 + 1/4*100 = 62.5.
        assert_eq!(init.srtt, Some(Duration::from_micros(112_500)));
        assert_eq!(init.rttvar, Some(Duration::from_micros(62_500)));
        assert_eq!(init.rto, Some(Duration::from_secs(1)));
    }

    #[test]
    fn values_below_minimum_defaults_are_not_used() {
        let mut c = TcbCache::new(TcbConfig {
            share_congestion: true,
            ..TcbConfig::default()
        });
        let t0 = Instant::ZERO;
        c.on_mss_option(PEER, 200, t0).unwrap();
        c.on_pmtu(PEER, 300, t0).unwrap();
        c.open(PEER, FlowId(1), t0).unwrap();
        let snap = TcbSnapshot {
            cwnd_pkts: Some(3.0),
            ssthresh_pkts: Some(1.0),
            ..Default::default()
        };
        c.close(PEER, FlowId(1), snap, t0).unwrap();
        assert_eq!(c.lookup(PEER, t0), TcbInit::default());
        c.on_mss_option(PEER, 1460, t0).unwrap();
        assert_eq!(c.lookup(PEER, t0).mss, Some(1460));
    }

    #[test]
    fn entries_expire_unless_connections_are_open() {
        let mut c = TcbCache::new(TcbConfig {
            expiry: Duration::from_secs(10),
            ..TcbConfig::default()
        });
        c.on_mss_option(PEER, 1460, Instant::ZERO).unwrap();
        assert_eq!(c.lookup(PEER, Instant::from_secs(10)).mss, Some(1460));
        assert_eq!(c.lookup(PEER, Instant::from_secs(11)).mss, None);
        c.open(PEER, FlowId(1), Instant::from_secs(11)).unwrap();
        assert_eq!(
            c.expire(Instant::from_secs(100)),
            0,
            "an entry with an open connection stays"
        );
        c.close(
            PEER,
            FlowId(1),
            TcbSnapshot::default(),
            Instant::from_secs(100),
        )
        .unwrap();
        assert_eq!(c.expire(Instant::from_secs(111)), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn bad_input_is_rejected() {
        let mut c = TcbCache::new(TcbConfig::default());
        let t0 = Instant::ZERO;
        assert!(c.on_rtt_sample(PEER, Duration::ZERO, t0).is_err());
        assert!(c.on_mss_option(PEER, 0, t0).is_err());
        assert!(c
            .close(PEER, FlowId(1), TcbSnapshot::default(), t0)
            .is_err());
        c.open(PEER, FlowId(1), t0).unwrap();
        assert!(c.open(PEER, FlowId(1), t0).is_err());
        assert!(c.on_cwnd(PEER, FlowId(1), f64::NAN, t0).is_err());
        let bad = TcbSnapshot {
            cwnd_pkts: Some(-1.0),
            ..Default::default()
        };
        assert!(c.close(PEER, FlowId(1), bad, t0).is_err());
        assert!(
            c.close(PEER, FlowId(1), TcbSnapshot::default(), t0).is_ok(),
            "still open after the bad close"
        );
    }
}
