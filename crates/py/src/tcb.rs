//! Bindings of `coupling::tcb`: the TCB interdependence cache (RFC 9040). Peers are an IP address
//! (`str`) and an optional destination port; times are integer nanoseconds, spans float seconds.

use crate::convert::{
    fmt_f64, fmt_opt, fmt_opt_f64, instant, invalid, ip, opt_secs, secs, Guarded, PyResultExt,
};
use coupling::tcb::{self, PeerKey, TcbConfig, TcbSnapshot};
use coupling::units::check_window;
use coupling::FlowId;
use pyo3::prelude::*;

fn key(addr: &Bound<'_, PyAny>, port: Option<i64>) -> PyResult<PeerKey> {
    let port = port
        .map(|p| {
            u16::try_from(p).map_err(|_| {
                invalid(format!(
                    "invalid port: got {p}, expected a port in 0..=65535"
                ))
            })
        })
        .transpose()?;
    Ok(PeerKey {
        addr: ip("addr", addr)?,
        port,
    })
}

/// Values to initialize a new connection with; None: nothing valid is cached, use the default.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct TcbInit {
    pub mss: Option<u32>,
    pub pmtu: Option<u32>,
    pub srtt_s: Option<f64>,
    pub rttvar_s: Option<f64>,
    pub rto_s: Option<f64>,
    pub cwnd_pkts: Option<f64>,
    pub ssthresh_pkts: Option<f64>,
}

impl From<tcb::TcbInit> for TcbInit {
    fn from(i: tcb::TcbInit) -> Self {
        TcbInit {
            mss: i.mss,
            pmtu: i.pmtu,
            srtt_s: i.srtt.map(|d| d.as_secs_f64()),
            rttvar_s: i.rttvar.map(|d| d.as_secs_f64()),
            rto_s: i.rto.map(|d| d.as_secs_f64()),
            cwnd_pkts: i.cwnd_pkts,
            ssthresh_pkts: i.ssthresh_pkts,
        }
    }
}

#[pymethods]
impl TcbInit {
    fn __repr__(&self) -> String {
        format!(
            "TcbInit(mss={}, pmtu={}, srtt_s={}, rttvar_s={}, rto_s={}, cwnd_pkts={}, ssthresh_pkts={})",
            fmt_opt(self.mss),
            fmt_opt(self.pmtu),
            fmt_opt_f64(self.srtt_s),
            fmt_opt_f64(self.rttvar_s),
            fmt_opt_f64(self.rto_s),
            fmt_opt_f64(self.cwnd_pkts),
            fmt_opt_f64(self.ssthresh_pkts)
        )
    }
}

/// The TCB interdependence cache (`coupling::tcb::TcbCache`).
#[pyclass(module = "macroflow", name = "TcbCache")]
pub struct PyTcbCache {
    inner: Guarded<tcb::TcbCache>,
}

#[pymethods]
impl PyTcbCache {
    #[new]
    #[pyo3(signature = (share_congestion=false, expiry_s=600.0, min_mss=536, min_rto_s=1.0, min_ssthresh_pkts=2.0, initial_window_pkts=10.0))]
    fn new(
        share_congestion: bool,
        expiry_s: f64,
        min_mss: u32,
        min_rto_s: f64,
        min_ssthresh_pkts: f64,
        initial_window_pkts: f64,
    ) -> PyResult<Self> {
        let config = TcbConfig {
            share_congestion,
            expiry: secs("expiry_s", expiry_s)?,
            min_mss,
            min_rto: secs("min_rto_s", min_rto_s)?,
            min_ssthresh_pkts: check_window("min_ssthresh_pkts", min_ssthresh_pkts).py()?,
            initial_window_pkts: check_window("initial_window_pkts", initial_window_pkts).py()?,
        };
        Ok(PyTcbCache {
            inner: Guarded::new("TcbCache", tcb::TcbCache::new(config)),
        })
    }

    #[getter]
    fn share_congestion(&self) -> PyResult<bool> {
        self.inner.read(|c| Ok(c.config().share_congestion))
    }
    #[getter]
    fn expiry_s(&self) -> PyResult<f64> {
        self.inner.read(|c| Ok(c.config().expiry.as_secs_f64()))
    }
    #[getter]
    fn min_mss(&self) -> PyResult<u32> {
        self.inner.read(|c| Ok(c.config().min_mss))
    }
    #[getter]
    fn min_rto_s(&self) -> PyResult<f64> {
        self.inner.read(|c| Ok(c.config().min_rto.as_secs_f64()))
    }
    #[getter]
    fn min_ssthresh_pkts(&self) -> PyResult<f64> {
        self.inner.read(|c| Ok(c.config().min_ssthresh_pkts))
    }
    #[getter]
    fn initial_window_pkts(&self) -> PyResult<f64> {
        self.inner.read(|c| Ok(c.config().initial_window_pkts))
    }

    #[pyo3(signature = (addr, conn, now_ns, port=None))]
    fn open(
        &mut self,
        addr: &Bound<'_, PyAny>,
        conn: u64,
        now_ns: u64,
        port: Option<i64>,
    ) -> PyResult<TcbInit> {
        let k = key(addr, port)?;
        self.inner.write(|c| {
            c.open(k, FlowId(conn), instant(now_ns))
                .py()
                .map(Into::into)
        })
    }

    #[pyo3(signature = (addr, now_ns, port=None))]
    fn lookup(&self, addr: &Bound<'_, PyAny>, now_ns: u64, port: Option<i64>) -> PyResult<TcbInit> {
        let k = key(addr, port)?;
        self.inner.read(|c| Ok(c.lookup(k, instant(now_ns)).into()))
    }

    #[pyo3(signature = (addr, conn, cwnd_pkts, now_ns, port=None))]
    fn on_cwnd(
        &mut self,
        addr: &Bound<'_, PyAny>,
        conn: u64,
        cwnd_pkts: f64,
        now_ns: u64,
        port: Option<i64>,
    ) -> PyResult<()> {
        let k = key(addr, port)?;
        self.inner
            .write(|c| c.on_cwnd(k, FlowId(conn), cwnd_pkts, instant(now_ns)).py())
    }

    #[pyo3(signature = (addr, rtt_s, now_ns, port=None))]
    fn on_rtt_sample(
        &mut self,
        addr: &Bound<'_, PyAny>,
        rtt_s: f64,
        now_ns: u64,
        port: Option<i64>,
    ) -> PyResult<()> {
        let k = key(addr, port)?;
        let sample = secs("rtt_s", rtt_s)?;
        self.inner
            .write(|c| c.on_rtt_sample(k, sample, instant(now_ns)).py())
    }

    #[pyo3(signature = (addr, mss, now_ns, port=None))]
    fn on_mss_option(
        &mut self,
        addr: &Bound<'_, PyAny>,
        mss: u32,
        now_ns: u64,
        port: Option<i64>,
    ) -> PyResult<()> {
        let k = key(addr, port)?;
        self.inner
            .write(|c| c.on_mss_option(k, mss, instant(now_ns)).py())
    }

    #[pyo3(signature = (addr, pmtu, now_ns, port=None))]
    fn on_pmtu(
        &mut self,
        addr: &Bound<'_, PyAny>,
        pmtu: u32,
        now_ns: u64,
        port: Option<i64>,
    ) -> PyResult<()> {
        let k = key(addr, port)?;
        self.inner
            .write(|c| c.on_pmtu(k, pmtu, instant(now_ns)).py())
    }

    #[pyo3(signature = (addr, conn, now_ns, port=None, srtt_s=None, rttvar_s=None, cwnd_pkts=None, ssthresh_pkts=None))]
    #[allow(clippy::too_many_arguments)]
    fn close(
        &mut self,
        addr: &Bound<'_, PyAny>,
        conn: u64,
        now_ns: u64,
        port: Option<i64>,
        srtt_s: Option<f64>,
        rttvar_s: Option<f64>,
        cwnd_pkts: Option<f64>,
        ssthresh_pkts: Option<f64>,
    ) -> PyResult<()> {
        let k = key(addr, port)?;
        let snap = TcbSnapshot {
            srtt: opt_secs("srtt_s", srtt_s)?,
            rttvar: opt_secs("rttvar_s", rttvar_s)?,
            cwnd_pkts,
            ssthresh_pkts,
        };
        self.inner
            .write(|c| c.close(k, FlowId(conn), snap, instant(now_ns)).py())
    }

    fn expire(&mut self, now_ns: u64) -> PyResult<usize> {
        self.inner.write(|c| Ok(c.expire(instant(now_ns))))
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.read(|c| Ok(c.len()))
    }

    /// For tests only: panics inside the crate's object, as a bug would, to show that the call
    /// raises CouplingInternalError and closes this cache.
    fn _panic_for_test(&mut self) -> PyResult<()> {
        self.inner.write(|_| panic!("a deliberate panic"))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|t| {
            let c = t.config();
            format!(
                "TcbCache(share_congestion={}, expiry_s={}, min_mss={}, min_rto_s={}, \
                 min_ssthresh_pkts={}, initial_window_pkts={}, entries={})",
                if c.share_congestion { "True" } else { "False" },
                fmt_f64(c.expiry.as_secs_f64()),
                c.min_mss,
                fmt_f64(c.min_rto.as_secs_f64()),
                fmt_f64(c.min_ssthresh_pkts),
                fmt_f64(c.initial_window_pkts),
                t.len()
            )
        })
    }
}
