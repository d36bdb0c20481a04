//! Exceptions and conversions shared by the bindings: every `coupling::Error` becomes the matching
//! Python exception carrying the error's `Display` text, and Python arguments (integer nanoseconds,
//! float seconds, addresses, grouping keywords) become the crate's types. No coupling logic here.

use coupling::{Duration, Error, FiveTuple, GroupId, Grouping, Instant};
use pyo3::exceptions::{PyBaseException, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::net::IpAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

pyo3::create_exception!(
    macroflow,
    CouplingError,
    PyValueError,
    "Base class of every error raised by the coupling layer. A call that raises leaves the object unchanged."
);
pyo3::create_exception!(
    macroflow,
    InvalidValueError,
    CouplingError,
    "A number or name outside its domain (NaN, infinite, negative, zero priority, unknown algorithm, bad address, ...)."
);
pyo3::create_exception!(
    macroflow,
    DuplicateFlowError,
    CouplingError,
    "The flow (or connection) id is already registered."
);
pyo3::create_exception!(
    macroflow,
    GroupNotEmptyError,
    CouplingError,
    "A group's algorithm can only be changed while no flow is registered in it."
);
pyo3::create_exception!(
    macroflow,
    MissingInputError,
    CouplingError,
    "An input the chosen algorithm needs was not given (e.g. rtt_s for the conservative active FSE)."
);
pyo3::create_exception!(
    macroflow,
    TimeWentBackwardsError,
    CouplingError,
    "now_ns is earlier than a time the object has already seen."
);
pyo3::create_exception!(
    macroflow,
    UnsupportedError,
    CouplingError,
    "The operation is not meaningful for this coupler."
);

pyo3::create_exception!(
    macroflow,
    CouplingInternalError,
    CouplingError,
    "A bug in the coupling layer (a panic inside the crate, caught): the object it happened in is closed, and every later call that reaches it (its arguments valid) raises this too, with the panic's message. Please report it."
);

/// `UnknownFlowError` and `UnknownGroupError` derive from both `CouplingError` and `KeyError`, which
/// `create_exception!` (one base) cannot express; they are built once with `type(...)`.
static UNKNOWN_FLOW: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static UNKNOWN_GROUP: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn key_error_subclass(py: Python<'_>, name: &str, doc: &str) -> PyResult<Py<PyType>> {
    let bases = PyTuple::new(
        py,
        [py.get_type::<CouplingError>(), py.get_type::<PyKeyError>()],
    )?;
    let dict = PyDict::new(py);
    dict.set_item("__module__", "macroflow")?;
    dict.set_item("__doc__", doc)?;
    // KeyError's __str__ shows repr(message); keep the plain message like the other errors.
    dict.set_item(
        "__str__",
        py.get_type::<PyBaseException>().getattr("__str__")?,
    )?;
    let ty = py.get_type::<PyType>().call1((name, bases, dict))?;
    Ok(ty.cast_into::<PyType>()?.unbind())
}

pub fn unknown_flow_type(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    UNKNOWN_FLOW
        .get_or_try_init(py, || {
            key_error_subclass(
                py,
                "UnknownFlowError",
                "The flow (or connection) id is not registered. Also a KeyError.",
            )
        })
        .map(|t| t.bind(py).clone())
}

pub fn unknown_group_type(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    UNKNOWN_GROUP
        .get_or_try_init(py, || {
            key_error_subclass(
                py,
                "UnknownGroupError",
                "The flow group id does not exist. Also a KeyError.",
            )
        })
        .map(|t| t.bind(py).clone())
}

/// Adds the exception classes to the module.
pub fn add_exceptions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CouplingError", py.get_type::<CouplingError>())?;
    m.add("InvalidValueError", py.get_type::<InvalidValueError>())?;
    m.add("UnknownFlowError", unknown_flow_type(py)?)?;
    m.add("DuplicateFlowError", py.get_type::<DuplicateFlowError>())?;
    m.add("UnknownGroupError", unknown_group_type(py)?)?;
    m.add("GroupNotEmptyError", py.get_type::<GroupNotEmptyError>())?;
    m.add("MissingInputError", py.get_type::<MissingInputError>())?;
    m.add(
        "TimeWentBackwardsError",
        py.get_type::<TimeWentBackwardsError>(),
    )?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add(
        "CouplingInternalError",
        py.get_type::<CouplingInternalError>(),
    )?;
    Ok(())
}

/// The Python exception for a crate error; the message is the error's `Display` text.
pub fn to_py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::InvalidValue { .. } => InvalidValueError::new_err(msg),
        Error::DuplicateFlow(_) => DuplicateFlowError::new_err(msg),
        Error::GroupNotEmpty(_) => GroupNotEmptyError::new_err(msg),
        Error::MissingInput { .. } => MissingInputError::new_err(msg),
        Error::TimeWentBackwards { .. } => TimeWentBackwardsError::new_err(msg),
        Error::Unsupported { .. } => UnsupportedError::new_err(msg),
        Error::UnknownFlow(_) | Error::UnknownGroup(_) => Python::attach(|py| {
            let ty = if matches!(e, Error::UnknownFlow(_)) {
                unknown_flow_type(py)
            } else {
                unknown_group_type(py)
            };
            match ty {
                Ok(ty) => PyErr::from_type(ty, msg),
                Err(err) => err,
            }
        }),
    }
}

/// `result.py()?` converts a crate error into its Python exception.
pub trait PyResultExt<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> PyResultExt<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

/// An `InvalidValueError` for inputs that are not numbers (names, addresses, argument combinations).
pub fn invalid(msg: String) -> PyErr {
    InvalidValueError::new_err(msg)
}

/// Explains a bad name, listing the valid ones.
pub fn unknown_name<'a>(field: &str, got: &str, valid: impl IntoIterator<Item = &'a str>) -> PyErr {
    let valid: Vec<String> = valid.into_iter().map(|v| format!("'{v}'")).collect();
    invalid(format!(
        "invalid {field}: got '{got}', expected one of {}",
        valid.join(", ")
    ))
}

pub fn instant(now_ns: u64) -> Instant {
    Instant::from_nanos(now_ns)
}

/// Seconds as a float to a [`Duration`]; NaN, infinite and negative values are rejected.
pub fn secs(field: &'static str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(field, s).py()
}

pub fn opt_secs(field: &'static str, s: Option<f64>) -> PyResult<Option<Duration>> {
    s.map(|s| secs(field, s)).transpose()
}

/// An IP address given as a `str` (or an `ipaddress.IPv4Address` / `IPv6Address`).
pub fn ip(field: &str, obj: &Bound<'_, PyAny>) -> PyResult<IpAddr> {
    if let Ok(s) = obj.extract::<String>() {
        return s.trim().parse().map_err(|_| {
            invalid(format!(
                "invalid {field}: got '{s}', expected an IPv4 or IPv6 address"
            ))
        });
    }
    obj.extract::<IpAddr>().map_err(|_| {
        let got = obj
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "?".into());
        invalid(format!(
            "invalid {field}: got {got}, expected an IPv4 or IPv6 address (str or ipaddress object)"
        ))
    })
}

fn int_in(field: &str, v: i64, max: i64, expected: &str) -> PyResult<i64> {
    if (0..=max).contains(&v) {
        Ok(v)
    } else {
        Err(invalid(format!(
            "invalid {field}: got {v}, expected {expected}"
        )))
    }
}

/// A five-tuple `(src_ip, dst_ip, protocol, src_port, dst_port)`.
pub fn five_tuple(t: &Bound<'_, PyAny>) -> PyResult<FiveTuple> {
    let (src, dst, protocol, src_port, dst_port): (
        Bound<'_, PyAny>,
        Bound<'_, PyAny>,
        i64,
        i64,
        i64,
    ) = t.extract().map_err(|_| {
        invalid(
            "invalid five_tuple: expected (src_ip: str, dst_ip: str, protocol: int, src_port: int, dst_port: int)"
                .to_string(),
        )
    })?;
    Ok(FiveTuple {
        src: ip("five_tuple src_ip", &src)?,
        dst: ip("five_tuple dst_ip", &dst)?,
        protocol: int_in(
            "five_tuple protocol",
            protocol,
            255,
            "an IP protocol number in 0..=255",
        )? as u8,
        src_port: int_in(
            "five_tuple src_port",
            src_port,
            65535,
            "a port in 0..=65535",
        )? as u16,
        dst_port: int_in(
            "five_tuple dst_port",
            dst_port,
            65535,
            "a port in 0..=65535",
        )? as u16,
    })
}

/// The grouping keywords of `register`: exactly one of `group`, `five_tuple` and `label`; `dscp`
/// only with `five_tuple` (RFC 8699 sec. 5.1: same five-tuple and DSCP share a group).
pub fn grouping(
    group: Option<u64>,
    five_tuple_arg: Option<&Bound<'_, PyAny>>,
    dscp: i64,
    label: Option<String>,
) -> PyResult<Grouping> {
    let given = [group.is_some(), five_tuple_arg.is_some(), label.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given != 1 {
        return Err(invalid(format!(
            "invalid grouping: got {given} of group, five_tuple, label; expected exactly one"
        )));
    }
    if dscp != 0 && five_tuple_arg.is_none() {
        return Err(invalid(format!(
            "invalid dscp: got {dscp}, expected dscp only together with five_tuple"
        )));
    }
    if let Some(gid) = group {
        return Ok(Grouping::Explicit(GroupId(gid)));
    }
    if let Some(label) = label {
        return Ok(Grouping::Configured(label));
    }
    let tuple = five_tuple(five_tuple_arg.expect("exactly one grouping is given"))?;
    // The crate checks 0..=63; out-of-u8 values are reported here with the value as given.
    let dscp = u8::try_from(dscp).map_err(|_| {
        to_py_err(Error::InvalidValue {
            field: "dscp",
            value: dscp as f64,
            expected: "a DSCP in 0..=63",
        })
    })?;
    Ok(Grouping::Multiplexed { tuple, dscp })
}

/// Python's `repr` of a float (`inf`, `1000000.0`, ...), for `__repr__`.
pub fn fmt_f64(x: f64) -> String {
    if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if x.is_nan() {
        "nan".to_string()
    } else if x != 0.0 && (x.abs() >= 1e16 || x.abs() < 1e-4) {
        format!("{x:e}")
    } else if x == x.trunc() {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

pub fn fmt_opt<T: std::fmt::Display>(x: Option<T>) -> String {
    x.map_or_else(|| "None".to_string(), |v| v.to_string())
}

pub fn fmt_opt_f64(x: Option<f64>) -> String {
    x.map_or_else(|| "None".to_string(), fmt_f64)
}

/// What a caught panic said (its `&str` or `String` payload).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Runs `f`, turning a panic into `internal(message)`: no panic crosses into Python, where it
/// would be a PanicException, a BaseException that `except Exception` lets through (issue 13).
/// For objects a panic cannot leave half-changed (an immutable `FlowModel`); mutable ones use
/// [`Guarded`], which also closes the object.
pub fn catch_panic<R>(
    internal: impl FnOnce(String) -> PyErr,
    f: impl FnOnce() -> PyResult<R>,
) -> PyResult<R> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(internal(panic_message(&*p))))
}

/// A coupling-crate object behind a binding class (`FseGroup`, `Fse`, `TcpCoupler`, `TcpGroups`,
/// `TcbCache`). Every call goes through [`Guarded::read`] or [`Guarded::write`]. Inputs are
/// validated before the crate acts on them; a panic that is still possible is a bug that may
/// have left the object half-changed, so the call raises `CouplingInternalError` and the object is
/// closed: every later call that reaches it (arguments are converted and checked first) raises
/// it too, naming the class and the panic, instead of answering from state nobody can trust
/// (issue 13, as `Simulation` does). A panic in `__repr__` closes the object as well; the repr
/// then says so.
pub struct Guarded<T> {
    class: &'static str,
    inner: T,
    /// The message of the panic that closed it.
    closed: OnceLock<String>,
}

impl<T> Guarded<T> {
    pub fn new(class: &'static str, inner: T) -> Self {
        Guarded {
            class,
            inner,
            closed: OnceLock::new(),
        }
    }

    fn check_open(&self) -> PyResult<()> {
        if let Some(what) = self.closed.get() {
            return Err(CouplingInternalError::new_err(format!(
                "this {} is closed after an internal error ({what}; a bug: please report it); \
                 create a new one",
                self.class
            )));
        }
        Ok(())
    }

    fn closed_on_panic<R>(&self, r: std::thread::Result<PyResult<R>>) -> PyResult<R> {
        r.unwrap_or_else(|p| {
            let what = panic_message(&*p);
            let _ = self.closed.set(what.clone()); // the first panic is the one reported
            Err(CouplingInternalError::new_err(format!(
                "internal error in the coupling layer ({what}; a bug: please report it); this {} \
                 is closed, create a new one",
                self.class
            )))
        })
    }

    /// A call that reads the object.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> PyResult<R>) -> PyResult<R> {
        self.check_open()?;
        self.closed_on_panic(catch_unwind(AssertUnwindSafe(|| f(&self.inner))))
    }

    /// A call that may change the object.
    pub fn write<R>(&mut self, f: impl FnOnce(&mut T) -> PyResult<R>) -> PyResult<R> {
        self.check_open()?;
        let inner = &mut self.inner;
        let r = catch_unwind(AssertUnwindSafe(|| f(inner)));
        self.closed_on_panic(r)
    }

    /// `__repr__`: the object's, or `Class(closed after an internal error: ...)`.
    pub fn repr(&self, f: impl FnOnce(&T) -> String) -> String {
        self.read(|t| Ok(f(t))).unwrap_or_else(|_| {
            format!(
                "{}(closed after an internal error: {})",
                self.class,
                self.closed.get().map_or("?", String::as_str)
            )
        })
    }
}
