//! Private `_tiu_*` functions: TiU's administration (crates/tiu-bpf `admin`), wrapped by
//! python/macroflow/tiu.py (the public API) and the `macroflow tiu` commands.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use tiu_bpf::admin;

fn rt(e: tiu_bpf::Error) -> PyErr {
    PyRuntimeError::new_err(e.0)
}

fn dir(pin_dir: Option<PathBuf>) -> PathBuf {
    pin_dir.unwrap_or_else(|| PathBuf::from(admin::PIN_DIR))
}

/// Why TiU cannot be enabled in this build (None: it can).
#[pyfunction(name = "_tiu_missing")]
fn missing() -> Option<&'static str> {
    tiu_bpf::missing()
}

fn dev_list<'py>(py: Python<'py>, ds: &[admin::Device]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for d in ds {
        let x = PyDict::new(py);
        x.set_item("dev", &d.dev)?;
        x.set_item("netns", &d.netns)?;
        l.append(x)?;
    }
    Ok(l)
}

/// `devices`: (netns or None, device) pairs.
#[pyfunction(name = "_tiu_enable")]
#[pyo3(signature = (devices, port=admin::DEFAULT_PORT, cgroup=None, pin_dir=None))]
fn enable<'py>(
    py: Python<'py>,
    devices: Vec<(Option<String>, String)>,
    port: u16,
    cgroup: Option<PathBuf>,
    pin_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyList>> {
    let o = admin::EnableOptions {
        devices: devices
            .into_iter()
            .map(|(netns, dev)| admin::Device { netns, dev })
            .collect(),
        port,
        cgroup,
        pin_dir: dir(pin_dir),
    };
    let ds = py.detach(|| admin::enable(&o)).map_err(rt)?;
    dev_list(py, &ds)
}

#[pyfunction(name = "_tiu_disable")]
#[pyo3(signature = (pin_dir=None))]
fn disable<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| admin::disable(&dir(pin_dir))).map_err(rt)?;
    let d = PyDict::new(py);
    d.set_item("devices", dev_list(py, &r.devices)?)?;
    d.set_item("connections", r.connections)?;
    d.set_item("gone", dev_list(py, &r.gone)?)?;
    d.set_item("restored", dev_list(py, &r.restored)?)?;
    d.set_item("not_restored", r.not_restored.clone())?;
    d.set_item("rules", rule_list(py, &r.rules)?)?;
    d.set_item("cgroups", paths(&r.cgroups))?;
    Ok(d)
}

#[pyfunction(name = "_tiu_is_enabled")]
#[pyo3(signature = (pin_dir=None))]
fn is_enabled(pin_dir: Option<PathBuf>) -> bool {
    admin::is_enabled(&dir(pin_dir))
}

fn rule_list<'py>(py: Python<'py>, rs: &[tiu_bpf::Rule]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for r in rs {
        l.append(rule_dict(py, r)?)?;
    }
    Ok(l)
}

fn paths(ps: &[PathBuf]) -> Vec<String> {
    ps.iter().map(|p| p.display().to_string()).collect()
}

fn rule_dict<'py>(py: Python<'py>, r: &tiu_bpf::Rule) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("prefix", format!("{}/{}", r.addr, r.prefix_len))?;
    d.set_item("ports", r.ports)?;
    d.set_item("mark", r.mark)?;
    d.set_item("tiu", r.tiu)?;
    Ok(d)
}

#[pyfunction(name = "_tiu_status")]
#[pyo3(signature = (pin_dir=None))]
fn status<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let s = py.detach(|| admin::status(&dir(pin_dir))).map_err(rt)?;
    let d = PyDict::new(py);
    d.set_item("port", s.port)?;
    d.set_item("devices", dev_list(py, &s.devices)?)?;
    d.set_item("cgroups", paths(&s.cgroups))?;
    d.set_item("rules", rule_list(py, &s.rules)?)?;
    let pairs = PyList::empty(py);
    for p in &s.pairs {
        let pd = PyDict::new(py);
        pd.set_item("netns", p.netns.clone())?;
        pd.set_item("local", p.local.to_string())?;
        pd.set_item("peer", p.peer.to_string())?;
        pd.set_item("udp_ports", p.udp_ports)?;
        pd.set_item("ids_held", p.ids_held)?;
        let cs = PyList::empty(py);
        for c in &p.conns {
            let cd = PyDict::new(py);
            cd.set_item("local_port", c.local_port)?;
            cd.set_item("peer_port", c.peer_port)?;
            cd.set_item("conn_id", c.conn_id)?;
            cd.set_item("state", c.state)?;
            cs.append(cd)?;
        }
        pd.set_item("connections", cs)?;
        pairs.append(pd)?;
    }
    d.set_item("host_pairs", pairs)?;
    let c = PyDict::new(py);
    for (n, v) in &s.counters {
        c.set_item(n, v)?;
    }
    d.set_item("counters", c)?;
    Ok(d)
}

#[pyfunction(name = "_tiu_rule_add")]
#[pyo3(signature = (prefix, ports=None, mark=0, tiu=true, pin_dir=None))]
fn rule_add(
    prefix: &str,
    ports: Option<(u16, u16)>,
    mark: u32,
    tiu: bool,
    pin_dir: Option<PathBuf>,
) -> PyResult<()> {
    let (addr, prefix_len) = admin::parse_prefix(prefix).map_err(|e| PyValueError::new_err(e.0))?;
    let r = tiu_bpf::Rule {
        addr,
        prefix_len,
        ports,
        mark,
        tiu,
    };
    r.to_entry().map_err(|e| PyValueError::new_err(e.0))?;
    admin::rule_add(&dir(pin_dir), &r).map_err(rt)
}

#[pyfunction(name = "_tiu_rule_del")]
#[pyo3(signature = (prefix, pin_dir=None))]
fn rule_del(prefix: &str, pin_dir: Option<PathBuf>) -> PyResult<()> {
    let (addr, len) = admin::parse_prefix(prefix).map_err(|e| PyValueError::new_err(e.0))?;
    admin::rule_del(&dir(pin_dir), addr, len).map_err(rt)
}

#[pyfunction(name = "_tiu_rules")]
#[pyo3(signature = (pin_dir=None))]
fn rules<'py>(py: Python<'py>, pin_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyList>> {
    rule_list(py, &admin::rules(&dir(pin_dir)).map_err(rt)?)
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(missing, m)?)?;
    m.add_function(wrap_pyfunction!(enable, m)?)?;
    m.add_function(wrap_pyfunction!(disable, m)?)?;
    m.add_function(wrap_pyfunction!(is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(status, m)?)?;
    m.add_function(wrap_pyfunction!(rule_add, m)?)?;
    m.add_function(wrap_pyfunction!(rule_del, m)?)?;
    m.add_function(wrap_pyfunction!(rules, m)?)?;
    Ok(())
}
