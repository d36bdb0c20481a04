//! `_linux_main(args)`: the Linux engine's namespace programs (crates/linux), run by the engine as
//! `python -c BOOT` inside a namespace so they are always the build the orchestrator imported.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Private (`_linux_main`): the engine's own entry point, not part of the API.
#[pyfunction(name = "_linux_main")]
fn linux_main(py: Python<'_>, args: Vec<String>) -> PyResult<()> {
    py.detach(|| ::linux::main(&args))
        .map_err(PyRuntimeError::new_err)
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(linux_main, m)?)
}
