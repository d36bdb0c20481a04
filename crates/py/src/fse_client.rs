//! `FseClient`: the blocking client of `macroflowd` (`crates/fsed`, `fsed::client::Client`) for
//! Python, wrapped by `python/macroflow/fse_client.py`. Conversion only: arguments are checked and
//! converted here (a group as an `int`, a `str` or a five-tuple `dict`; algorithm and window
//! state names), every other decision is the daemon's. The GIL is released during socket I/O.
//!
//! Errors: a daemon refusal (nothing changed there) is `FseError` with `.field` and `.message`;
//! an argument that cannot be put on the wire raises `InvalidValueError` (a `ValueError`) naming
//! it, before anything is sent; socket errors are `OSError` subclasses (`FileNotFoundError`,
//! `ConnectionRefusedError`, `BrokenPipeError`, ...; `ConnectionResetError` when the daemon
//! closed the connection, `ConnectionError` when it sent something this client does not
//! understand).

use crate::convert::{invalid, ip, panic_message, unknown_name, CouplingError};
use fsed::client::{Client, ClientError};
use fsed::proto::{FlowInfo, GroupInfo, GroupSpec, Push, RateAlgorithm, WindowState};
use pyo3::exceptions::{PyConnectionError, PyConnectionResetError, PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};
use std::io;
use std::net::IpAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pyo3::create_exception!(
    macroflow,
    FseError,
    CouplingError,
    "macroflowd refused a request and changed nothing: `.field` names what it refused \
     (e.g. 'register_rate.priority', 'update_rate.flow', 'register_rate.group'), `.message` \
     says why."
);

const ALGORITHMS: [RateAlgorithm; 4] = [
    RateAlgorithm::Active,
    RateAlgorithm::ConservativeActive,
    RateAlgorithm::SimplePassive,
    RateAlgorithm::Passive,
];

/// The window states by name: the protocol's, and the package's short `TCP_STATES` names.
const STATES: [(&str, &str, WindowState); 3] = [
    ("slow_start", "SS", WindowState::SlowStart),
    (
        "congestion_avoidance",
        "CA",
        WindowState::CongestionAvoidance,
    ),
    ("fast_recovery", "FR", WindowState::FastRecovery),
];

fn fse_error(py: Python<'_>, field: String, message: String) -> PyErr {
    let err = FseError::new_err(format!("{field}: {message}"));
    let v = err.value(py);
    // Setting attributes on a fresh exception instance does not fail.
    let _ = v.setattr("field", field);
    let _ = v.setattr("message", message);
    err
}

/// A socket error as Python's own: `OSError(errno, strerror, socket path)`, which Python turns
/// into its subclass (FileNotFoundError, ConnectionRefusedError, BrokenPipeError, ...).
fn io_error(e: io::Error, path: &Path) -> PyErr {
    if let Some(n) = e.raw_os_error() {
        let text = e.to_string();
        let strerror = text
            .strip_suffix(&format!(" (os error {n})"))
            .unwrap_or(&text)
            .to_string();
        return PyOSError::new_err((n, strerror, path.display().to_string()));
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof => PyConnectionResetError::new_err(format!(
            "macroflowd at {} closed the connection",
            path.display()
        )),
        _ => PyErr::from(e),
    }
}

fn client_error(py: Python<'_>, e: ClientError, path: &Path) -> PyErr {
    match e {
        ClientError::Daemon { field, message } => fse_error(py, field, message),
        ClientError::Io(e) => io_error(e, path),
        ClientError::Protocol(m) => {
            PyConnectionError::new_err(format!("macroflowd at {}: protocol: {m}", path.display()))
        }
        // A request too large for a frame: refused before anything was sent.
        ClientError::Argument(m) => invalid(format!("invalid request: {m}")),
    }
}

fn repr_of(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A non-negative `int` up to `max` (not a bool, not a float).
fn uint(field: &str, obj: &Bound<'_, PyAny>, max: u64, expected: &str) -> PyResult<u64> {
    let v = if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        obj.extract::<u64>().ok().filter(|v| *v <= max)
    } else {
        None
    };
    v.ok_or_else(|| {
        invalid(format!(
            "invalid {field}: got {}, expected {expected}",
            repr_of(obj)
        ))
    })
}

fn flow_id(field: &str, obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    uint(field, obj, u64::MAX, "an int id in 0..=2**64-1")
}

fn opt_uint(
    field: &str,
    obj: Option<&Bound<'_, PyAny>>,
    max: u64,
    expected: &str,
) -> PyResult<Option<u64>> {
    obj.filter(|o| !o.is_none())
        .map(|o| uint(field, o, max, expected))
        .transpose()
}

fn timeout_ms(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u32>> {
    Ok(opt_uint(
        "timeout_ms",
        obj,
        u32::MAX as u64,
        "None or milliseconds in 0..=2**32-1",
    )?
    .map(|v| v as u32))
}

fn address(field: &str, obj: &Bound<'_, PyAny>) -> PyResult<[u8; 16]> {
    Ok(match ip(field, obj)? {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    })
}

const GROUP_EXPECTED: &str = "an int (an explicit flow group id), a str (a configured label) or \
     a dict {src, dst, protocol, src_port, dst_port, dscp}";

/// A group as Python gives it: `int` (explicit FGI), `str` (configured label), or a five-tuple
/// and DSCP as a dict (addresses as `str` or `ipaddress` objects; IPv4 as IPv4-mapped IPv6).
fn group_spec(obj: &Bound<'_, PyAny>) -> PyResult<GroupSpec> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(GroupSpec::Configured(s.to_cow()?.into_owned()));
    }
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return Ok(GroupSpec::Explicit(uint(
            "group",
            obj,
            u64::MAX,
            "an explicit flow group id in 0..=2**64-1",
        )?));
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return Err(invalid(format!(
            "invalid group: got {}, expected {GROUP_EXPECTED}",
            repr_of(obj)
        )));
    };
    const KEYS: [&str; 6] = ["src", "dst", "protocol", "src_port", "dst_port", "dscp"];
    for k in d.keys() {
        let known = k
            .cast::<PyString>()
            .ok()
            .and_then(|s| s.to_cow().ok().map(|s| KEYS.contains(&s.as_ref())))
            .unwrap_or(false);
        if !known {
            return Err(invalid(format!(
                "invalid group: unknown key {}, expected the keys {} (dscp optional, 0)",
                repr_of(&k),
                KEYS.join(", ")
            )));
        }
    }
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?.ok_or_else(|| {
            invalid(format!(
                "invalid group: the key '{k}' is missing, expected {GROUP_EXPECTED}"
            ))
        })
    };
    let src = address("group['src']", &get("src")?)?;
    let dst = address("group['dst']", &get("dst")?)?;
    let protocol = uint(
        "group['protocol']",
        &get("protocol")?,
        255,
        "an IP protocol number in 0..=255",
    )? as u8;
    let src_port = uint(
        "group['src_port']",
        &get("src_port")?,
        65535,
        "a port in 0..=65535",
    )? as u16;
    let dst_port = uint(
        "group['dst_port']",
        &get("dst_port")?,
        65535,
        "a port in 0..=65535",
    )? as u16;
    let dscp = match d.get_item("dscp")? {
        None => 0,
        Some(v) => uint("group['dscp']", &v, 63, "a DSCP in 0..=63")? as u8,
    };
    Ok(GroupSpec::Multiplexed {
        src,
        dst,
        protocol,
        src_port,
        dst_port,
        dscp,
    })
}

fn algorithm(name: Option<&str>) -> PyResult<Option<RateAlgorithm>> {
    name.map(|n| {
        RateAlgorithm::from_name(n)
            .ok_or_else(|| unknown_name("algorithm", n, ALGORITHMS.map(RateAlgorithm::name)))
    })
    .transpose()
}

fn window_state(name: &str) -> PyResult<WindowState> {
    STATES
        .iter()
        .find(|(long, short, _)| *long == name || *short == name)
        .map(|(_, _, s)| *s)
        .ok_or_else(|| {
            unknown_name(
                "state",
                name,
                STATES
                    .iter()
                    .map(|(l, _, _)| *l)
                    .chain(STATES.iter().map(|(_, s, _)| *s)),
            )
        })
}

fn flow_dict<'py>(py: Python<'py>, f: &FlowInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("flow", f.flow)?;
    d.set_item("group", f.group)?;
    d.set_item("priority", f.priority)?;
    d.set_item("effective_priority", f.effective_priority)?;
    d.set_item("rate_or_cwnd", f.rate_or_cwnd)?;
    d.set_item("desired_rate_bps", f.desired_rate_bps)?;
    Ok(d)
}

fn group_dict<'py>(py: Python<'py>, g: &GroupInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("group", g.group)?;
    d.set_item("coupler", &g.coupler)?;
    let flows = PyList::empty(py);
    for f in &g.flows {
        flows.append(flow_dict(py, f)?)?;
    }
    d.set_item("flows", flows)?;
    d.set_item("flow_count", g.flow_count)?;
    d.set_item("sum_calculated", g.sum_calculated)?;
    d.set_item("leftover", g.leftover)?;
    Ok(d)
}

fn push_dict<'py>(py: Python<'py>, p: &Push) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("flow", p.flow)?;
    d.set_item("rate_bps", p.rate_bps)?;
    Ok(d)
}

/// Why a call did not reach the daemon or came back without an answer.
enum CallError {
    Closed,
    Panic(String),
    Client(ClientError),
}

/// A connection to `macroflowd` (see `macroflow.fse_client`).
#[pyclass(name = "FseClient", module = "macroflow", frozen)]
pub struct PyFseClient {
    /// None once closed. A mutex: calls from several threads take turns, each with the GIL
    /// released while it waits for the daemon.
    inner: Mutex<Option<Client>>,
    path: PathBuf,
    peer: (u32, i32),
}

impl PyFseClient {
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let r = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| Client::connect(&path)))
                .map_err(|p| CallError::Panic(panic_message(&*p)))?
                .map_err(CallError::Client)
        });
        let client = r.map_err(|e| self_error(py, e, &path))?;
        Ok(PyFseClient {
            peer: client.peer(),
            inner: Mutex::new(Some(client)),
            path,
        })
    }

    /// Runs `f` on the client with the GIL released.
    fn call<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Client) -> fsed::client::Result<R> + Send,
    ) -> PyResult<R> {
        let r = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let Some(c) = guard.as_mut() else {
                return Err(CallError::Closed);
            };
            match catch_unwind(AssertUnwindSafe(|| f(c))) {
                Ok(r) => r.map_err(CallError::Client),
                Err(p) => {
                    // Its stream may be mid-frame: not trusted after a panic.
                    *guard = None;
                    Err(CallError::Panic(panic_message(&*p)))
                }
            }
        });
        r.map_err(|e| self_error(py, e, &self.path))
    }
}

fn self_error(py: Python<'_>, e: CallError, path: &Path) -> PyErr {
    match e {
        CallError::Closed => PyOSError::new_err((
            9, // EBADF, as a closed socket's
            "the FseClient is closed".to_string(),
            path.display().to_string(),
        )),
        CallError::Panic(m) => PyRuntimeError::new_err(format!(
            "internal error in the macroflowd client ({m}; a bug: please report it); this \
             FseClient is closed"
        )),
        CallError::Client(e) => client_error(py, e, path),
    }
}

#[pymethods]
impl PyFseClient {
    /// Connects to the daemon listening on the Unix socket `path` and says Hello.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Self::open(py, path)
    }

    /// The same as ``FseClient(path)``.
    #[staticmethod]
    fn connect(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Self::open(py, path)
    }

    /// The socket path this client connected to.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Whether :meth:`close` was called (or an internal error closed it).
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| {
            self.inner
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
        })
    }

    /// ``(uid, pid)``: who the daemon sees this process as (the kernel's SO_PEERCRED).
    fn peer(&self) -> (u32, i32) {
        self.peer
    }

    /// Registers a rate-based flow; returns ``{"flow", "group", "rate_bps"}``.
    #[pyo3(signature = (group, priority, initial_rate_bps, algorithm=None, timeout_ms=None, desired_rate_bps=None))]
    #[allow(clippy::too_many_arguments)]
    fn register_rate<'py>(
        &self,
        py: Python<'py>,
        group: &Bound<'py, PyAny>,
        priority: f64,
        initial_rate_bps: f64,
        algorithm: Option<&str>,
        timeout_ms: Option<&Bound<'py, PyAny>>,
        desired_rate_bps: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let group = group_spec(group)?;
        let algorithm = self::algorithm(algorithm)?;
        let timeout_ms = self::timeout_ms(timeout_ms)?;
        let r = self.call(py, |c| {
            c.register_rate(
                group,
                priority,
                initial_rate_bps,
                desired_rate_bps,
                algorithm,
                timeout_ms,
            )
        })?;
        let d = PyDict::new(py);
        d.set_item("flow", r.flow)?;
        d.set_item("group", r.group)?;
        d.set_item("rate_bps", r.rate_bps)?;
        Ok(d)
    }

    /// Registers a window-based flow; returns ``{"flow", "group", "cwnd_pkts", "ssthresh_pkts"}``.
    #[pyo3(signature = (group, priority, cwnd_pkts, ssthresh_pkts, timeout_ms=None))]
    fn register_window<'py>(
        &self,
        py: Python<'py>,
        group: &Bound<'py, PyAny>,
        priority: f64,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        timeout_ms: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let group = group_spec(group)?;
        let timeout_ms = self::timeout_ms(timeout_ms)?;
        let r = self.call(py, |c| {
            c.register_window(group, priority, cwnd_pkts, ssthresh_pkts, timeout_ms)
        })?;
        let d = PyDict::new(py);
        d.set_item("flow", r.flow)?;
        d.set_item("group", r.group)?;
        d.set_item("cwnd_pkts", r.cwnd_pkts)?;
        d.set_item("ssthresh_pkts", r.ssthresh_pkts)?;
        Ok(d)
    }

    /// UPDATE of a rate flow: its controller's rate, what the application wants (None:
    /// unlimited), its RTT in microseconds; returns the rate to use now.
    #[pyo3(signature = (flow, cc_rate_bps, desired_rate_bps=None, rtt_us=None))]
    fn update_rate(
        &self,
        py: Python<'_>,
        flow: &Bound<'_, PyAny>,
        cc_rate_bps: f64,
        desired_rate_bps: Option<f64>,
        rtt_us: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<f64> {
        let flow = flow_id("flow", flow)?;
        let rtt_us = opt_uint(
            "rtt_us",
            rtt_us,
            u64::MAX,
            "None or microseconds in 0..=2**64-1",
        )?;
        self.call(py, |c| {
            c.update_rate(flow, cc_rate_bps, desired_rate_bps, rtt_us)
        })
    }

    /// UPDATE of a window flow; returns ``(cwnd_pkts, ssthresh_pkts)`` to use, or None to keep
    /// its own.
    #[pyo3(signature = (flow, cwnd_pkts, ssthresh_pkts, state, timeout=false, in_flight_pkts=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn update_window(
        &self,
        py: Python<'_>,
        flow: &Bound<'_, PyAny>,
        cwnd_pkts: f64,
        ssthresh_pkts: f64,
        state: &str,
        timeout: bool,
        in_flight_pkts: f64,
    ) -> PyResult<Option<(f64, f64)>> {
        let flow = flow_id("flow", flow)?;
        let state = window_state(state)?;
        self.call(py, |c| {
            c.update_window(
                flow,
                cwnd_pkts,
                ssthresh_pkts,
                state,
                timeout,
                in_flight_pkts,
            )
        })
    }

    /// Changes a flow's priority.
    fn set_priority(&self, py: Python<'_>, flow: &Bound<'_, PyAny>, priority: f64) -> PyResult<()> {
        let flow = flow_id("flow", flow)?;
        self.call(py, |c| c.set_priority(flow, priority))
    }

    /// Keeps a flow's soft state alive without an update.
    fn refresh(&self, py: Python<'_>, flow: &Bound<'_, PyAny>) -> PyResult<()> {
        let flow = flow_id("flow", flow)?;
        self.call(py, |c| c.refresh(flow))
    }

    /// The flow leaves its group.
    fn leave(&self, py: Python<'_>, flow: &Bound<'_, PyAny>) -> PyResult<()> {
        let flow = flow_id("flow", flow)?;
        self.call(py, |c| c.leave(flow))
    }

    /// Asks for a push of this flow's new rate whenever its group recomputes it.
    fn subscribe(&self, py: Python<'_>, flow: &Bound<'_, PyAny>) -> PyResult<()> {
        let flow = flow_id("flow", flow)?;
        self.call(py, |c| c.subscribe(flow))
    }

    /// One of this connection's flows as the daemon holds it.
    fn query_flow<'py>(
        &self,
        py: Python<'py>,
        flow: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let flow = flow_id("flow", flow)?;
        let f = self.call(py, |c| c.query_flow(flow))?;
        flow_dict(py, &f)
    }

    /// A group this connection has a flow in.
    fn query_group<'py>(
        &self,
        py: Python<'py>,
        group: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let group = flow_id("group", group)?;
        let g = self.call(py, |c| c.query_group(group))?;
        group_dict(py, &g)
    }

    /// The pushes received so far, oldest first (``{"flow", "rate_bps"}`` each).
    fn take_pushes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ps = self.call(py, |c| Ok(c.take_pushes()))?;
        let l = PyList::empty(py);
        for p in &ps {
            l.append(push_dict(py, p)?)?;
        }
        Ok(l)
    }

    /// The next push, waiting up to ``timeout_s`` seconds for one; None if none came.
    fn wait_push<'py>(
        &self,
        py: Python<'py>,
        timeout_s: f64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let timeout = Duration::try_from_secs_f64(timeout_s).map_err(|_| {
            invalid(format!(
                "invalid timeout_s: got {timeout_s}, expected finite seconds >= 0"
            ))
        })?;
        self.call(py, |c| c.wait_push(timeout))?
            .map(|p| push_dict(py, &p))
            .transpose()
    }

    /// Closes the connection: the daemon removes this connection's flows at once. Later calls
    /// raise OSError; closing again does nothing.
    fn close(&self, py: Python<'_>) {
        let old = py.detach(|| self.inner.lock().unwrap_or_else(|e| e.into_inner()).take());
        drop(old);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let closed = match self.inner.try_lock() {
            Ok(g) => g.is_none(),
            Err(_) => false, // in use by another thread: open
        };
        format!(
            "FseClient({:?}, uid={}, pid={}{})",
            self.path.display().to_string(),
            self.peer.0,
            self.peer.1,
            if closed { ", closed" } else { "" }
        )
    }
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let ty = py.get_type::<FseError>();
    // Defaults for an FseError built by hand (a raised one carries the daemon's).
    ty.setattr("field", "")?;
    ty.setattr("message", "")?;
    m.add("FseError", ty)?;
    m.add_class::<PyFseClient>()?;
    Ok(())
}
