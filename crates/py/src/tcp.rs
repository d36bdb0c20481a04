//! Bindings of `coupling::tcp`: one coupled group ([`PyTcpCoupler`]) and many groups with flow
//! grouping ([`PyTcpGroups`]). Conversion only: every decision is the crate's.

use crate::convert::{fmt_f64, fmt_opt, grouping, unknown_name, Guarded, PyResultExt};
use coupling::tcp::{self, CouplerKind, ETcp, Efcm, TcpCcc, TcpCccInt, TcpState, TcpUpdate};
use coupling::{Error, FlowId, GroupId};
use pyo3::prelude::*;
use std::sync::{Mutex, MutexGuard};

fn parse_kind(name: &str) -> PyResult<CouplerKind> {
    CouplerKind::from_name(name).ok_or_else(|| unknown_name("kind", name, CouplerKind::names()))
}

fn parse_state(name: &str) -> PyResult<TcpState> {
    TcpState::from_name(name).ok_or_else(|| unknown_name("state", name, ["SS", "CA", "FR"]))
}

fn update_input(
    cwnd_pkts: f64,
    ssthresh_pkts: f64,
    state: &str,
    timeout: bool,
    in_flight_pkts: f64,
) -> PyResult<TcpUpdate> {
    Ok(TcpUpdate {
        cwnd_pkts,
        ssthresh_pkts,
        state: parse_state(state)?,
        timeout,
        in_flight_pkts,
    })
}

/// The cwnd and ssthresh a coupler assigns to a connection.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
}

impl From<tcp::Response> for Response {
    fn from(r: tcp::Response) -> Self {
        Response {
            cwnd_pkts: r.cwnd_pkts,
            ssthresh_pkts: r.ssthresh_pkts,
        }
    }
}

#[pymethods]
impl Response {
    fn __repr__(&self) -> String {
        format!(
            "Response(cwnd_pkts={}, ssthresh_pkts={})",
            fmt_f64(self.cwnd_pkts),
            fmt_f64(self.ssthresh_pkts)
        )
    }
}

/// Segments released to a connection in ack-clocked handover.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub conn: u64,
    pub cwnd_pkts: f64,
    pub done: bool,
}

impl From<tcp::Release> for Release {
    fn from(r: tcp::Release) -> Self {
        Release {
            conn: r.conn.0,
            cwnd_pkts: r.cwnd_pkts,
            done: r.done,
        }
    }
}

#[pymethods]
impl Release {
    fn __repr__(&self) -> String {
        format!(
            "Release(conn={}, cwnd_pkts={}, done={})",
            self.conn,
            fmt_f64(self.cwnd_pkts),
            if self.done { "True" } else { "False" }
        )
    }
}

/// A connection's coupled state.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct ConnView {
    pub conn: u64,
    pub priority: f64,
    pub cwnd_pkts: f64,
    pub ssthresh_pkts: f64,
    pub state: &'static str,
    pub coordinating: bool,
    pub handover: Option<(u64, f64)>,
    pub timed_out: bool,
}

impl From<tcp::ConnView> for ConnView {
    fn from(v: tcp::ConnView) -> Self {
        ConnView {
            conn: v.conn.0,
            priority: v.priority,
            cwnd_pkts: v.cwnd_pkts,
            ssthresh_pkts: v.ssthresh_pkts,
            state: v.state.name(),
            coordinating: v.coordinating,
            handover: v.handover,
            timed_out: v.timed_out,
        }
    }
}

#[pymethods]
impl ConnView {
    fn __repr__(&self) -> String {
        format!(
            "ConnView(conn={}, priority={}, cwnd_pkts={}, ssthresh_pkts={}, state='{}', coordinating={}, handover={}, timed_out={})",
            self.conn,
            fmt_f64(self.priority),
            fmt_f64(self.cwnd_pkts),
            fmt_f64(self.ssthresh_pkts),
            self.state,
            if self.coordinating { "True" } else { "False" },
            self.handover
                .map_or_else(|| "None".to_string(), |(r, t)| format!("({r}, {})", fmt_f64(t))),
            if self.timed_out { "True" } else { "False" },
        )
    }
}

/// The concrete coupler, so the CCC-only accessors (`coco`, ...) are reachable.
#[derive(Debug)]
enum Coupler {
    Ccc(TcpCcc),
    CccInt(TcpCccInt),
    ETcp(ETcp),
    Efcm(Efcm),
}

impl Coupler {
    fn new(kind: CouplerKind) -> Self {
        match kind {
            CouplerKind::Ccc {
                handover,
                int: false,
            } => Coupler::Ccc(TcpCcc::new(handover)),
            CouplerKind::Ccc {
                handover,
                int: true,
            } => Coupler::CccInt(TcpCccInt::new(handover)),
            CouplerKind::ETcp => Coupler::ETcp(ETcp::default()),
            CouplerKind::Efcm => Coupler::Efcm(Efcm::default()),
        }
    }

    fn get(&self) -> &dyn tcp::TcpCoupler {
        match self {
            Coupler::Ccc(c) => c,
            Coupler::CccInt(c) => c,
            Coupler::ETcp(c) => c,
            Coupler::Efcm(c) => c,
        }
    }

    fn get_mut(&mut self) -> &mut dyn tcp::TcpCoupler {
        match self {
            Coupler::Ccc(c) => c,
            Coupler::CccInt(c) => c,
            Coupler::ETcp(c) => c,
            Coupler::Efcm(c) => c,
        }
    }
}

/// One coupled group of TCP connections: a kind of `TCP_COUPLER_KINDS` ("ccc", "ccc_handover",
/// their integer window modes "ccc_int" and "ccc_handover_int", "etcp", "efcm").
#[pyclass(module = "macroflow", name = "TcpCoupler")]
pub struct PyTcpCoupler {
    inner: Guarded<Coupler>,
}

fn coco(c: &Coupler) -> Option<u64> {
    match c {
        Coupler::Ccc(c) => c.coco().map(|f| f.0),
        Coupler::CccInt(c) => c.coco().map(|f| f.0),
        Coupler::ETcp(_) | Coupler::Efcm(_) => None,
    }
}

#[pymethods]
impl PyTcpCoupler {
    #[new]
    #[pyo3(signature = (kind="ccc", max_burst_pkts=0.0))]
    fn new(kind: &str, max_burst_pkts: f64) -> PyResult<Self> {
        let mut inner = Coupler::new(parse_kind(kind)?);
        inner.get_mut().set_max_burst_pkts(max_burst_pkts).py()?;
        Ok(PyTcpCoupler {
            inner: Guarded::new("TcpCoupler", inner),
        })
    }

    fn register(
        &mut self,
        conn: u64,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
    ) -> PyResult<Response> {
        self.inner.write(|c| {
            c.get_mut()
                .register(FlowId(conn), priority, cwnd_pkts, ssthresh_pkts)
                .py()
                .map(Into::into)
        })
    }

    #[pyo3(signature = (conn, cwnd_pkts, ssthresh_pkts, state, timeout=false, in_flight_pkts=0.0))]
    fn update(
        &mut self,
        conn: u64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: &str,
        timeout: bool,
        in_flight_pkts: f64,
    ) -> PyResult<Option<Response>> {
        let u = update_input(cwnd_pkts, ssthresh_pkts, state, timeout, in_flight_pkts)?;
        self.inner.write(|c| {
            c.get_mut()
                .update(FlowId(conn), u)
                .py()
                .map(|r| r.map(Into::into))
        })
    }

    fn leave(&mut self, conn: u64) -> PyResult<()> {
        self.inner.write(|c| c.get_mut().leave(FlowId(conn)).py())
    }

    fn set_priority(&mut self, conn: u64, priority: f64) -> PyResult<()> {
        self.inner
            .write(|c| c.get_mut().set_priority(FlowId(conn), priority).py())
    }

    fn on_ack(&mut self, conn: u64) -> PyResult<Vec<Release>> {
        self.inner.write(|c| {
            let mut released = Vec::new();
            c.get_mut().on_ack(FlowId(conn), &mut released).py()?;
            Ok(released.into_iter().map(Into::into).collect())
        })
    }

    #[getter]
    fn name(&self) -> PyResult<&'static str> {
        self.inner.read(|c| Ok(c.get().name()))
    }

    #[getter]
    fn sum_cwnd(&self) -> PyResult<f64> {
        self.inner.read(|c| Ok(c.get().sum_cwnd()))
    }

    #[getter]
    fn sum_ssthresh(&self) -> PyResult<f64> {
        self.inner.read(|c| {
            Ok(match c {
                Coupler::Ccc(c) => c.sum_ssthresh(),
                Coupler::CccInt(c) => c.sum_ssthresh(),
                Coupler::ETcp(c) => c.sum_ssthresh(),
                Coupler::Efcm(c) => c.sum_ssthresh(),
            })
        })
    }

    /// The coordinating connection; always None for the baselines, which have none.
    #[getter]
    fn coco(&self) -> PyResult<Option<u64>> {
        self.inner.read(|c| Ok(coco(c)))
    }

    #[getter]
    fn all_in_slow_start(&self) -> PyResult<bool> {
        self.inner.read(|c| match c {
            Coupler::Ccc(c) => Ok(c.all_in_slow_start()),
            Coupler::CccInt(c) => Ok(c.all_in_slow_start()),
            other => Err(Error::Unsupported {
                operation: "all_in_slow_start",
                coupler: other.get().name(),
            })
            .py(),
        })
    }

    #[getter]
    fn handovers_running(&self) -> PyResult<usize> {
        self.inner.read(|c| {
            Ok(match c {
                Coupler::Ccc(c) => c.handovers_running(),
                Coupler::CccInt(c) => c.handovers_running(),
                Coupler::ETcp(_) | Coupler::Efcm(_) => 0,
            })
        })
    }

    fn conn(&self, conn: u64) -> PyResult<ConnView> {
        self.inner
            .read(|c| c.get().conn(FlowId(conn)).py().map(Into::into))
    }

    fn conns(&self) -> PyResult<Vec<ConnView>> {
        self.inner
            .read(|c| Ok(c.get().conns().into_iter().map(Into::into).collect()))
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.read(|c| Ok(c.get().len()))
    }

    fn __contains__(&self, conn: &Bound<'_, PyAny>) -> PyResult<bool> {
        let conn = conn.extract::<u64>().ok();
        self.inner
            .read(|c| Ok(conn.is_some_and(|x| c.get().conn(FlowId(x)).is_ok())))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|c| {
            let coco = match c {
                Coupler::Ccc(_) | Coupler::CccInt(_) => format!(", coco={}", fmt_opt(coco(c))),
                _ => String::new(),
            };
            let c = c.get();
            format!(
                "TcpCoupler(kind='{}', conns={}, sum_cwnd={}{coco})",
                c.name(),
                c.len(),
                fmt_f64(c.sum_cwnd())
            )
        })
    }

    /// For tests only: panics inside the crate's object, as a bug would, to show that the call
    /// raises CouplingInternalError and closes this coupler.
    fn _panic_for_test(&mut self) -> PyResult<()> {
        self.inner.write(|_| panic!("a deliberate panic"))
    }
}

/// A read-only snapshot of one group of a [`PyTcpGroups`].
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct TcpGroupView {
    pub gid: u64,
    pub kind: &'static str,
    pub sum_cwnd: f64,
    pub conns: Vec<ConnView>,
}

#[pymethods]
impl TcpGroupView {
    fn __len__(&self) -> usize {
        self.conns.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "TcpGroupView(gid={}, kind='{}', conns={}, sum_cwnd={})",
            self.gid,
            self.kind,
            self.conns.len(),
            fmt_f64(self.sum_cwnd)
        )
    }
}

/// Many coupled TCP groups with flow grouping (`coupling::tcp::TcpGroups`). The crate's groups hold
/// `Box<dyn TcpCoupler>` (Send, not Sync), so a Mutex makes the class shareable between threads.
#[pyclass(module = "macroflow", name = "TcpGroups")]
pub struct PyTcpGroups {
    inner: Guarded<Mutex<tcp::TcpGroups>>,
    default_kind: &'static str,
}

/// The groups, for a read. Only `&self` calls lock (one at a time under the GIL); a panic inside
/// one poisons the lock but also closes the object (`Guarded`), so no call reaches it again.
fn lock(m: &Mutex<tcp::TcpGroups>) -> MutexGuard<'_, tcp::TcpGroups> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The groups, for a change (`&mut self`: no lock needed).
fn groups(m: &mut Mutex<tcp::TcpGroups>) -> &mut tcp::TcpGroups {
    m.get_mut().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl PyTcpGroups {
    #[new]
    #[pyo3(signature = (default_kind="ccc", max_burst_pkts=0.0))]
    fn new(default_kind: &str, max_burst_pkts: f64) -> PyResult<Self> {
        let kind = parse_kind(default_kind)?;
        let mut inner = tcp::TcpGroups::new(kind);
        inner.set_max_burst_pkts(max_burst_pkts).py()?;
        Ok(PyTcpGroups {
            inner: Guarded::new("TcpGroups", Mutex::new(inner)),
            default_kind: kind.name(),
        })
    }

    #[getter]
    fn default_kind(&self) -> PyResult<&'static str> {
        self.inner.read(|_| Ok(self.default_kind))
    }

    #[getter]
    fn max_burst_pkts(&self) -> PyResult<f64> {
        self.inner.read(|m| Ok(lock(m).max_burst_pkts()))
    }

    /// Sets the burst limit of every group, now and for groups created later.
    fn set_max_burst_pkts(&mut self, pkts: f64) -> PyResult<()> {
        self.inner
            .write(|m| groups(m).set_max_burst_pkts(pkts).py())
    }

    fn configure_group(&mut self, gid: u64, kind: &str) -> PyResult<()> {
        let kind = parse_kind(kind)?;
        self.inner
            .write(|m| groups(m).configure_group(GroupId(gid), kind).py())
    }

    /// Removes an empty group, configured or not.
    fn remove_group(&mut self, gid: u64) -> PyResult<()> {
        self.inner
            .write(|m| groups(m).remove_group(GroupId(gid)).py())
    }

    #[pyo3(signature = (conn, priority, cwnd_pkts, ssthresh_pkts, group=None, five_tuple=None, dscp=0, label=None))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        conn: u64,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        group: Option<u64>,
        five_tuple: Option<&Bound<'_, PyAny>>,
        dscp: i64,
        label: Option<String>,
    ) -> PyResult<(u64, Response)> {
        let g = grouping(group, five_tuple, dscp, label)?;
        self.inner.write(|m| {
            let (gid, r) = groups(m)
                .register(FlowId(conn), &g, priority, cwnd_pkts, ssthresh_pkts)
                .py()?;
            Ok((gid.0, r.into()))
        })
    }

    #[pyo3(signature = (conn, cwnd_pkts, ssthresh_pkts, state, timeout=false, in_flight_pkts=0.0))]
    fn update(
        &mut self,
        conn: u64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: &str,
        timeout: bool,
        in_flight_pkts: f64,
    ) -> PyResult<Option<Response>> {
        let u = update_input(cwnd_pkts, ssthresh_pkts, state, timeout, in_flight_pkts)?;
        self.inner.write(|m| {
            groups(m)
                .update(FlowId(conn), u)
                .py()
                .map(|r| r.map(Into::into))
        })
    }

    fn on_ack(&mut self, conn: u64) -> PyResult<Vec<Release>> {
        self.inner.write(|m| {
            let mut released = Vec::new();
            groups(m).on_ack(FlowId(conn), &mut released).py()?;
            Ok(released.into_iter().map(Into::into).collect())
        })
    }

    fn set_priority(&mut self, conn: u64, priority: f64) -> PyResult<()> {
        self.inner
            .write(|m| groups(m).set_priority(FlowId(conn), priority).py())
    }

    fn leave(&mut self, conn: u64) -> PyResult<()> {
        self.inner.write(|m| groups(m).leave(FlowId(conn)).py())
    }

    fn group_of(&self, conn: u64) -> PyResult<u64> {
        self.inner
            .read(|m| lock(m).group_of(FlowId(conn)).py().map(|g| g.0))
    }

    fn group_ids(&self) -> PyResult<Vec<u64>> {
        self.inner
            .read(|m| Ok(lock(m).group_ids().into_iter().map(|g| g.0).collect()))
    }

    fn group(&self, gid: u64) -> PyResult<TcpGroupView> {
        self.inner.read(|m| {
            let groups = lock(m);
            let g = groups.group(GroupId(gid)).py()?;
            Ok(TcpGroupView {
                gid,
                kind: g.name(),
                sum_cwnd: g.sum_cwnd(),
                conns: g.conns().into_iter().map(Into::into).collect(),
            })
        })
    }

    fn __contains__(&self, conn: &Bound<'_, PyAny>) -> PyResult<bool> {
        let conn = conn.extract::<u64>().ok();
        self.inner
            .read(|m| Ok(conn.is_some_and(|c| lock(m).group_of(FlowId(c)).is_ok())))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|m| {
            format!(
                "TcpGroups(default_kind='{}', groups={})",
                self.default_kind,
                lock(m).group_ids().len()
            )
        })
    }

    /// For tests only: panics inside the crate's object, as a bug would, to show that the call
    /// raises CouplingInternalError and closes these groups.
    fn _panic_for_test(&mut self) -> PyResult<()> {
        self.inner.write(|_| panic!("a deliberate panic"))
    }
}

/// The names of the TCP couplers, for `TcpCoupler(...)` and `TcpGroups(...)`.
pub fn kind_names() -> Vec<&'static str> {
    CouplerKind::names().collect()
}

/// Test vectors of ctrlTCP's integer window mode for the kernel port (`coupling::tcp::vectors`):
/// `count` random sequences of `ops` operations each from `seed`, as text. Private
/// (`_ccc_vectors`): the kernel port's test tool (tests/test_bpf_core.py), not part of the API.
#[pyfunction(name = "_ccc_vectors")]
#[pyo3(signature = (seed, count, ops))]
pub fn ccc_vectors(seed: u64, count: usize, ops: usize) -> PyResult<String> {
    if count > 100_000 || ops > 100_000 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "ccc_vectors: at most 100000 vectors of 100000 ops",
        ));
    }
    Ok(coupling::tcp::vectors::ccc_vectors(seed, count, ops))
}
