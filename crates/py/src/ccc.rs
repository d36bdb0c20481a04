//! Private `_ccc_*` functions: the loader of ctrlTCP's BPF congestion control (crates/ccc-bpf),
//! wrapped by python/macroflow/ccc.py (the public API) and the `macroflow linux` commands.

use ccc_bpf as cb;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;

fn rt(e: cb::Error) -> PyErr {
    PyRuntimeError::new_err(e.0)
}

fn dir(pin_dir: Option<PathBuf>) -> PathBuf {
    pin_dir.unwrap_or_else(|| PathBuf::from(cb::PIN_DIR))
}

/// What this machine lacks to load the program (empty list: nothing).
#[pyfunction(name = "_ccc_missing")]
fn missing() -> Vec<String> {
    cb::missing()
}

#[pyfunction(name = "_ccc_load")]
#[pyo3(signature = (handover=true, max_burst_pkts=0, stale_s=cb::DEFAULT_STALE_S, pin_dir=None))]
fn load<'py>(
    py: Python<'py>,
    handover: bool,
    max_burst_pkts: u64,
    stale_s: u32,
    pin_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = cb::LoadOptions {
        handover,
        max_burst_pkts,
        stale_s,
        pin_dir: dir(pin_dir),
    };
    let l = py.detach(|| cb::load(&opts)).map_err(rt)?;
    let d = PyDict::new(py);
    d.set_item("pin_dir", l.pin_dir)?;
    d.set_item("programs", l.programs)?;
    Ok(d)
}

#[pyfunction(name = "_ccc_unload")]
#[pyo3(signature = (pin_dir=None))]
fn unload<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let u = cb::unload(&dir(pin_dir)).map_err(rt)?;
    let d = PyDict::new(py);
    d.set_item("coupled_connections", u.coupled_connections)?;
    d.set_item("removed", u.removed)?;
    Ok(d)
}

#[pyfunction(name = "_ccc_is_loaded")]
#[pyo3(signature = (pin_dir=None))]
fn is_loaded(pin_dir: Option<PathBuf>) -> bool {
    cb::is_loaded(&dir(pin_dir))
}

fn rule_dict<'py>(py: Python<'py>, i: usize, r: &cb::Rule) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", i)?;
    d.set_item("prefix", r.prefix.map(|(a, l)| format!("{a}/{l}")))?;
    d.set_item("ports", r.ports)?;
    d.set_item("cgroup_id", r.cgroup_id)?;
    d.set_item("group", r.group)?;
    d.set_item("priority", r.priority)?;
    d.set_item("uncoupled", r.uncoupled)?;
    Ok(d)
}

#[pyfunction(name = "_ccc_status")]
#[pyo3(signature = (pin_dir=None))]
fn status<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let s = py.detach(|| cb::status(&dir(pin_dir))).map_err(rt)?;
    let d = PyDict::new(py);
    match s.config {
        Some(c) => {
            let cd = PyDict::new(py);
            cd.set_item("handover", c.handover)?;
            cd.set_item("stale_s", c.stale_s)?;
            cd.set_item("max_burst_pkts", c.max_burst_pkts)?;
            d.set_item("config", cd)?;
        }
        None => d.set_item("config", py.None())?,
    }
    let groups = PyList::empty(py);
    for g in &s.groups {
        let gd = PyDict::new(py);
        gd.set_item("name", &g.name)?;
        gd.set_item("sum_cwnd_pkts", g.sum_cwnd_pkts)?;
        gd.set_item("sum_ssthresh_pkts", g.sum_ssthresh_pkts)?;
        gd.set_item(
            "sum_priority",
            g.sum_priority_units as f64 / cb::PRIORITY_SCALE,
        )?;
        gd.set_item("coco", g.coco)?;
        gd.set_item("loss_event", g.loss_event)?;
        gd.set_item("reductions", g.reductions)?;
        gd.set_item("handovers", g.handovers)?;
        gd.set_item("inconsistencies", g.inconsistencies.clone())?;
        gd.set_item("empty_for_s", g.empty_for_s)?;
        gd.set_item("netns", g.key.netns)?;
        let ms = PyList::empty(py);
        for m in &g.members {
            let md = PyDict::new(py);
            md.set_item("conn", m.conn)?;
            md.set_item("priority", m.priority)?;
            md.set_item("cwnd_pkts", m.cwnd_pkts)?;
            md.set_item("ssthresh_pkts", m.ssthresh_pkts)?;
            md.set_item("state", m.state)?;
            md.set_item("coordinating", m.coordinating)?;
            md.set_item("in_handover", m.in_handover)?;
            md.set_item("timed_out", m.timed_out)?;
            md.set_item("idle_s", m.idle_s)?;
            ms.append(md)?;
        }
        gd.set_item("members", ms)?;
        groups.append(gd)?;
    }
    d.set_item("groups", groups)?;
    let stats = PyDict::new(py);
    for (k, v) in &s.stats {
        stats.set_item(*k, *v)?;
    }
    d.set_item("stats", stats)?;
    let rules = PyList::empty(py);
    for (i, r) in s.rules.iter().enumerate() {
        rules.append(rule_dict(py, i, r)?)?;
    }
    d.set_item("rules", rules)?;
    Ok(d)
}

#[allow(clippy::too_many_arguments)]
#[pyfunction(name = "_ccc_rule_add")]
#[pyo3(signature = (prefix=None, ports=None, cgroup_id=None, group=None, priority=1.0, uncoupled=false, pin_dir=None))]
fn rule_add(
    prefix: Option<String>,
    ports: Option<(u16, u16)>,
    cgroup_id: Option<u64>,
    group: Option<u32>,
    priority: f64,
    uncoupled: bool,
    pin_dir: Option<PathBuf>,
) -> PyResult<usize> {
    let prefix = match prefix {
        None => None,
        Some(p) => {
            let (a, l) = match p.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (p.as_str(), None),
            };
            let a: std::net::IpAddr = a
                .parse()
                .map_err(|_| PyValueError::new_err(format!("not an address: {a:?}")))?;
            let full = if a.is_ipv4() { 32 } else { 128 };
            let l: u8 = match l {
                None => full,
                Some(l) => l
                    .parse()
                    .map_err(|_| PyValueError::new_err(format!("not a prefix length: {l:?}")))?,
            };
            Some((a, l))
        }
    };
    let r = cb::Rule {
        prefix,
        ports,
        cgroup_id,
        group,
        priority,
        uncoupled,
    };
    cb::rule_add(&dir(pin_dir), &r).map_err(|e| PyValueError::new_err(e.0))
}

#[pyfunction(name = "_ccc_rules")]
#[pyo3(signature = (pin_dir=None))]
fn rules<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for (i, r) in cb::rules(&dir(pin_dir)).map_err(rt)?.iter().enumerate() {
        l.append(rule_dict(py, i, r)?)?;
    }
    Ok(l)
}

#[pyfunction(name = "_ccc_rule_del")]
#[pyo3(signature = (index, pin_dir=None))]
fn rule_del<'py>(
    py: Python<'py>,
    index: usize,
    pin_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let r = cb::rule_del(&dir(pin_dir), index).map_err(|e| PyValueError::new_err(e.0))?;
    rule_dict(py, index, &r)
}

#[pyfunction(name = "_ccc_set_socket")]
#[pyo3(signature = (fd, priority, group=None, handover=None, pin_dir=None))]
fn set_socket(
    fd: i32,
    priority: f64,
    group: Option<u32>,
    handover: Option<bool>,
    pin_dir: Option<PathBuf>,
) -> PyResult<()> {
    let s = cb::SocketSetting {
        priority,
        group,
        handover,
    };
    cb::set_socket(&dir(pin_dir), fd, s).map_err(|e| PyValueError::new_err(e.0))
}

/// Deletes groups empty for at least `min_idle_s` seconds; returns how many.
#[pyfunction(name = "_ccc_gc")]
#[pyo3(signature = (min_idle_s=10.0, pin_dir=None))]
fn gc(min_idle_s: f64, pin_dir: Option<PathBuf>) -> PyResult<usize> {
    cb::gc(&dir(pin_dir), min_idle_s).map_err(|e| PyValueError::new_err(e.0))
}

/// The id of the loaded program's sock_prio map (for the Linux engine's agents).
#[pyfunction(name = "_ccc_socket_map_id")]
#[pyo3(signature = (pin_dir=None))]
fn socket_map_id(pin_dir: Option<PathBuf>) -> PyResult<u32> {
    cb::SocketMap::id(&dir(pin_dir)).map_err(rt)
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(missing, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(unload, m)?)?;
    m.add_function(wrap_pyfunction!(is_loaded, m)?)?;
    m.add_function(wrap_pyfunction!(status, m)?)?;
    m.add_function(wrap_pyfunction!(rule_add, m)?)?;
    m.add_function(wrap_pyfunction!(rules, m)?)?;
    m.add_function(wrap_pyfunction!(rule_del, m)?)?;
    m.add_function(wrap_pyfunction!(set_socket, m)?)?;
    m.add_function(wrap_pyfunction!(socket_map_id, m)?)?;
    m.add_function(wrap_pyfunction!(gc, m)?)?;
    Ok(())
}
