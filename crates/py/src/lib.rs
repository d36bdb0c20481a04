//! `macroflow._native`: thin PyO3 bindings of the `coupling`, `sim` and `flowsim` crates. No logic of their own: each
//! method converts its arguments, calls the crate, and converts the result or the error.
//!
//! Conventions (see `python/macroflow/_native.pyi`): flow, connection and group ids are `int`
//! (u64); points in time are `now_ns: int` nanoseconds on a clock the caller chooses; spans (RTT,
//! timeouts) are float seconds with an `_s` suffix; rates are float bit/s (`_bps`), windows float
//! packets (`_pkts`). A call that raises leaves the object unchanged. The shared-bottleneck and
//! false-sharing detectors (`detect.rs`) take points in time as float seconds (`now_s`), as the
//! simulator's bindings do, and one-way delays as `owd_ns: int`.

mod ccc;
mod convert;
mod de;
mod detect;
mod flowmodel;
mod fse;
mod fse_client;
mod linux;
mod sim;
mod tables;
mod tcb;
mod tcp;
mod tiu;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    convert::add_exceptions(m)?;
    m.add_class::<fse::PyFseGroup>()?;
    m.add_class::<fse::PyFse>()?;
    m.add_class::<fse::FlowView>()?;
    m.add_class::<fse::Outcome>()?;
    m.add_class::<fse::FseGroupView>()?;
    m.add_class::<tcp::PyTcpCoupler>()?;
    m.add_class::<tcp::PyTcpGroups>()?;
    m.add_class::<tcp::Response>()?;
    m.add_class::<tcp::Release>()?;
    m.add_class::<tcp::ConnView>()?;
    m.add_class::<tcp::TcpGroupView>()?;
    m.add_class::<tcb::PyTcbCache>()?;
    m.add_function(wrap_pyfunction!(tcp::ccc_vectors, m)?)?;
    m.add_class::<tcb::TcbInit>()?;
    sim::add(m)?;
    flowmodel::add(m)?;
    linux::add(m)?;
    ccc::add(m)?;
    tiu::add(m)?;
    detect::add(m)?;
    fse_client::add(m)?;
    m.add(
        "FSE_ALGORITHMS",
        PyTuple::new(m.py(), fse::algorithm_names())?,
    )?;
    m.add(
        "TCP_COUPLER_KINDS",
        PyTuple::new(m.py(), tcp::kind_names())?,
    )?;
    m.add("TCP_STATES", PyTuple::new(m.py(), ["SS", "CA", "FR"])?)?;
    // The simulator's registries (the one list of each kind of name, in crates/sim).
    m.add(
        "CONGESTION_CONTROLS",
        PyTuple::new(
            m.py(),
            ::sim::transport::cc::CcKind::names().collect::<Vec<_>>(),
        )?,
    )?;
    m.add(
        "RATE_CONTROLLERS",
        PyTuple::new(
            m.py(),
            ::sim::transport::controllers::names().collect::<Vec<_>>(),
        )?,
    )?;
    m.add(
        "QUEUE_KINDS",
        PyTuple::new(m.py(), ::sim::net::queue::QueueSpec::KINDS)?,
    )?;
    // The queue spec's JSON Schema, generated from the Rust type (JSON text).
    m.add(
        "QUEUE_SPEC_SCHEMA",
        ::sim::net::queue::QueueSpec::json_schema().to_string(),
    )?;
    Ok(())
}
