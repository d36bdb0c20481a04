//! Bindings of `coupling::fse`: [`FseGroup`] (one flow group) and [`Fse`] (many groups with flow
//! grouping). Conversion only: every decision is the crate's.

use crate::convert::{
    fmt_f64, fmt_opt, fmt_opt_f64, grouping, instant, opt_secs, secs, unknown_name, Guarded,
    PyResultExt,
};
use coupling::fse::{self, Algorithm, Assignment, FseConfig, FseUpdate};
use coupling::{FlowId, GroupId};
use pyo3::prelude::*;

fn parse_algorithm(name: &str) -> PyResult<Algorithm> {
    Algorithm::from_name(name)
        .ok_or_else(|| unknown_name("algorithm", name, Algorithm::ALL.map(Algorithm::name)))
}

fn pairs(out: &[Assignment]) -> Vec<(u64, f64)> {
    out.iter().map(|a| (a.flow.0, a.rate_bps)).collect()
}

fn update_input(
    cc_rate_bps: f64,
    now_ns: u64,
    desired_rate_bps: f64,
    rtt_s: Option<f64>,
) -> PyResult<FseUpdate> {
    Ok(FseUpdate {
        cc_rate_bps,
        desired_rate_bps,
        rtt: opt_secs("rtt_s", rtt_s)?,
        now: instant(now_ns),
    })
}

/// A registered flow as the FSE stores it.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct FlowView {
    pub flow: u64,
    pub priority: f64,
    pub fse_rate_bps: f64,
    pub desired_rate_bps: f64,
}

impl From<fse::FlowView> for FlowView {
    fn from(v: fse::FlowView) -> Self {
        FlowView {
            flow: v.flow.0,
            priority: v.priority,
            fse_rate_bps: v.fse_rate_bps,
            desired_rate_bps: v.desired_rate_bps,
        }
    }
}

#[pymethods]
impl FlowView {
    fn __repr__(&self) -> String {
        format!(
            "FlowView(flow={}, priority={}, fse_rate_bps={}, desired_rate_bps={})",
            self.flow,
            fmt_f64(self.priority),
            fmt_f64(self.fse_rate_bps),
            fmt_f64(self.desired_rate_bps)
        )
    }
}

/// What UPDATE returns: the updating flow's rate and, for the active algorithms, every flow's rate.
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub rate_bps: f64,
    pub assignments: Vec<(u64, f64)>,
}

#[pymethods]
impl Outcome {
    fn __repr__(&self) -> String {
        let a: Vec<String> = self
            .assignments
            .iter()
            .map(|(f, r)| format!("({f}, {})", fmt_f64(*r)))
            .collect();
        format!(
            "Outcome(rate_bps={}, assignments=[{}])",
            fmt_f64(self.rate_bps),
            a.join(", ")
        )
    }
}

fn group_repr(name: &str, gid: Option<u64>, g: &fse::FseGroup) -> String {
    let gid = gid.map_or(String::new(), |g| format!("gid={g}, "));
    format!(
        "{name}({gid}algorithm='{}', flows={}, sum_calculated_rate={}, sum_priority={}, leftover={})",
        g.algorithm().name(),
        g.len(),
        fmt_f64(g.sum_calculated_rate()),
        fmt_f64(g.sum_priority()),
        fmt_f64(g.leftover())
    )
}

/// One FSE flow group running one algorithm (`coupling::fse::FseGroup`).
#[pyclass(module = "macroflow", name = "FseGroup")]
pub struct PyFseGroup {
    inner: Guarded<fse::FseGroup>,
}

#[pymethods]
impl PyFseGroup {
    #[new]
    fn new(algorithm: &str) -> PyResult<Self> {
        let g = fse::FseGroup::new(parse_algorithm(algorithm)?);
        Ok(PyFseGroup {
            inner: Guarded::new("FseGroup", g),
        })
    }

    #[pyo3(signature = (flow, priority, initial_rate_bps, now_ns=0))]
    fn register(
        &mut self,
        flow: u64,
        priority: f64,
        initial_rate_bps: f64,
        now_ns: u64,
    ) -> PyResult<f64> {
        self.inner.write(|g| {
            g.register(FlowId(flow), priority, initial_rate_bps, instant(now_ns))
                .py()
        })
    }

    #[pyo3(signature = (flow, cc_rate_bps, now_ns=0, desired_rate_bps=f64::INFINITY, rtt_s=None))]
    fn update(
        &mut self,
        flow: u64,
        cc_rate_bps: f64,
        now_ns: u64,
        desired_rate_bps: f64,
        rtt_s: Option<f64>,
    ) -> PyResult<Outcome> {
        let input = update_input(cc_rate_bps, now_ns, desired_rate_bps, rtt_s)?;
        self.inner.write(|g| {
            let out = g.update(FlowId(flow), input).py()?;
            Ok(Outcome {
                rate_bps: out.rate_bps,
                assignments: pairs(out.assignments),
            })
        })
    }

    #[pyo3(signature = (flow, priority, now_ns=0))]
    fn set_priority(&mut self, flow: u64, priority: f64, now_ns: u64) -> PyResult<Vec<(u64, f64)>> {
        self.inner.write(|g| {
            g.set_priority(FlowId(flow), priority, instant(now_ns))
                .py()
                .map(pairs)
        })
    }

    fn leave(&mut self, flow: u64) -> PyResult<Vec<(u64, f64)>> {
        self.inner.write(|g| g.leave(FlowId(flow)).py().map(pairs))
    }

    /// Returns the removed flows and, for the active algorithms, the remaining flows' new rates.
    #[allow(clippy::type_complexity)]
    fn expire(&mut self, now_ns: u64, timeout_s: f64) -> PyResult<(Vec<u64>, Vec<(u64, f64)>)> {
        let timeout = secs("timeout_s", timeout_s)?;
        self.inner.write(|g| {
            let flows = g.expire(instant(now_ns), timeout);
            Ok((
                flows.into_iter().map(|f| f.0).collect(),
                pairs(g.assignments()),
            ))
        })
    }

    #[getter]
    fn algorithm(&self) -> PyResult<&'static str> {
        self.inner.read(|g| Ok(g.algorithm().name()))
    }

    #[getter]
    fn sum_calculated_rate(&self) -> PyResult<f64> {
        self.inner.read(|g| Ok(g.sum_calculated_rate()))
    }

    #[getter]
    fn sum_priority(&self) -> PyResult<f64> {
        self.inner.read(|g| Ok(g.sum_priority()))
    }

    #[getter]
    fn leftover(&self) -> PyResult<f64> {
        self.inner.read(|g| Ok(g.leftover()))
    }

    #[getter]
    fn timer_ns(&self) -> PyResult<Option<u64>> {
        self.inner.read(|g| Ok(g.timer().map(|t| t.as_nanos())))
    }

    fn flows(&self) -> PyResult<Vec<FlowView>> {
        self.inner
            .read(|g| Ok(g.flows().into_iter().map(Into::into).collect()))
    }

    fn flow(&self, flow: u64) -> PyResult<FlowView> {
        self.inner
            .read(|g| g.flow(FlowId(flow)).py().map(Into::into))
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.read(|g| Ok(g.len()))
    }

    fn __contains__(&self, flow: &Bound<'_, PyAny>) -> PyResult<bool> {
        let flow = flow.extract::<u64>().ok();
        self.inner
            .read(|g| Ok(flow.is_some_and(|f| g.contains(FlowId(f)))))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|g| group_repr("FseGroup", None, g))
    }

    /// For tests only: panics inside the crate's object, as a bug would, to show that the call
    /// raises CouplingInternalError and closes this group.
    fn _panic_for_test(&mut self) -> PyResult<()> {
        self.inner.write(|_| panic!("a deliberate panic"))
    }
}

/// A read-only snapshot of one group of an [`Fse`].
#[pyclass(frozen, eq, get_all, module = "macroflow")]
#[derive(Clone, Debug, PartialEq)]
pub struct FseGroupView {
    pub gid: u64,
    pub algorithm: &'static str,
    pub sum_calculated_rate: f64,
    pub sum_priority: f64,
    pub leftover: f64,
    pub timer_ns: Option<u64>,
    pub flows: Vec<FlowView>,
}

#[pymethods]
impl FseGroupView {
    fn __len__(&self) -> usize {
        self.flows.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "FseGroupView(gid={}, algorithm='{}', flows={}, sum_calculated_rate={}, sum_priority={}, leftover={}, timer_ns={})",
            self.gid,
            self.algorithm,
            self.flows.len(),
            fmt_f64(self.sum_calculated_rate),
            fmt_f64(self.sum_priority),
            fmt_f64(self.leftover),
            fmt_opt(self.timer_ns)
        )
    }
}

/// A Flow State Exchange: many groups, each with its own algorithm (`coupling::fse::Fse`).
#[pyclass(module = "macroflow", name = "Fse")]
pub struct PyFse {
    inner: Guarded<fse::Fse>,
}

#[pymethods]
impl PyFse {
    #[new]
    #[pyo3(signature = (default_algorithm="conservative_active", soft_state_timeout_s=None))]
    fn new(default_algorithm: &str, soft_state_timeout_s: Option<f64>) -> PyResult<Self> {
        let f = fse::Fse::new(FseConfig {
            default_algorithm: parse_algorithm(default_algorithm)?,
            soft_state_timeout: opt_secs("soft_state_timeout_s", soft_state_timeout_s)?,
        });
        Ok(PyFse {
            inner: Guarded::new("Fse", f),
        })
    }

    #[getter]
    fn default_algorithm(&self) -> PyResult<&'static str> {
        self.inner.read(|f| Ok(f.config().default_algorithm.name()))
    }

    #[getter]
    fn soft_state_timeout_s(&self) -> PyResult<Option<f64>> {
        self.inner
            .read(|f| Ok(f.config().soft_state_timeout.map(|d| d.as_secs_f64())))
    }

    fn configure_group(&mut self, gid: u64, algorithm: &str) -> PyResult<()> {
        let a = parse_algorithm(algorithm)?;
        self.inner
            .write(|f| f.configure_group(GroupId(gid), a).py())
    }

    #[pyo3(signature = (flow, priority, initial_rate_bps, now_ns=0, group=None, five_tuple=None, dscp=0, label=None))]
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        flow: u64,
        priority: f64,
        initial_rate_bps: f64,
        now_ns: u64,
        group: Option<u64>,
        five_tuple: Option<&Bound<'_, PyAny>>,
        dscp: i64,
        label: Option<String>,
    ) -> PyResult<(u64, f64)> {
        let g = grouping(group, five_tuple, dscp, label)?;
        self.inner.write(|f| {
            let (gid, rate) = f
                .register(
                    FlowId(flow),
                    &g,
                    priority,
                    initial_rate_bps,
                    instant(now_ns),
                )
                .py()?;
            Ok((gid.0, rate))
        })
    }

    #[pyo3(signature = (flow, cc_rate_bps, now_ns=0, desired_rate_bps=f64::INFINITY, rtt_s=None))]
    fn update(
        &mut self,
        flow: u64,
        cc_rate_bps: f64,
        now_ns: u64,
        desired_rate_bps: f64,
        rtt_s: Option<f64>,
    ) -> PyResult<Outcome> {
        let input = update_input(cc_rate_bps, now_ns, desired_rate_bps, rtt_s)?;
        self.inner.write(|f| {
            let out = f.update(FlowId(flow), input).py()?;
            Ok(Outcome {
                rate_bps: out.rate_bps,
                assignments: pairs(out.assignments),
            })
        })
    }

    #[pyo3(signature = (flow, priority, now_ns=0))]
    fn set_priority(&mut self, flow: u64, priority: f64, now_ns: u64) -> PyResult<Vec<(u64, f64)>> {
        self.inner.write(|f| {
            f.set_priority(FlowId(flow), priority, instant(now_ns))
                .py()
                .map(pairs)
        })
    }

    fn leave(&mut self, flow: u64) -> PyResult<Vec<(u64, f64)>> {
        self.inner
            .write(|f| f.leave(FlowId(flow)).py().map(|v| pairs(&v)))
    }

    /// Per group that lost flows: (gid, removed flows, remaining flows' new rates).
    #[allow(clippy::type_complexity)]
    fn expire(&mut self, now_ns: u64) -> PyResult<Vec<(u64, Vec<u64>, Vec<(u64, f64)>)>> {
        self.inner.write(|f| {
            Ok(f.expire(instant(now_ns))
                .into_iter()
                .map(|e| {
                    (
                        e.group.0,
                        e.flows.into_iter().map(|f| f.0).collect(),
                        pairs(&e.assignments),
                    )
                })
                .collect())
        })
    }

    /// Removes an empty group, configured or not.
    fn remove_group(&mut self, gid: u64) -> PyResult<()> {
        self.inner.write(|f| f.remove_group(GroupId(gid)).py())
    }

    fn group_of(&self, flow: u64) -> PyResult<u64> {
        self.inner
            .read(|f| f.group_of(FlowId(flow)).py().map(|g| g.0))
    }

    fn group_ids(&self) -> PyResult<Vec<u64>> {
        self.inner
            .read(|f| Ok(f.group_ids().into_iter().map(|g| g.0).collect()))
    }

    fn group(&self, gid: u64) -> PyResult<FseGroupView> {
        self.inner.read(|f| {
            let g = f.group(GroupId(gid)).py()?;
            Ok(FseGroupView {
                gid,
                algorithm: g.algorithm().name(),
                sum_calculated_rate: g.sum_calculated_rate(),
                sum_priority: g.sum_priority(),
                leftover: g.leftover(),
                timer_ns: g.timer().map(|t| t.as_nanos()),
                flows: g.flows().into_iter().map(Into::into).collect(),
            })
        })
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner.read(|f| Ok(f.flow_count()))
    }

    fn __contains__(&self, flow: &Bound<'_, PyAny>) -> PyResult<bool> {
        let flow = flow.extract::<u64>().ok();
        self.inner
            .read(|f| Ok(flow.is_some_and(|x| f.group_of(FlowId(x)).is_ok())))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|f| {
            format!(
                "Fse(default_algorithm='{}', soft_state_timeout_s={}, groups={}, flows={})",
                f.config().default_algorithm.name(),
                fmt_opt_f64(f.config().soft_state_timeout.map(|d| d.as_secs_f64())),
                f.group_ids().len(),
                f.flow_count()
            )
        })
    }

    /// For tests only: panics inside the crate's object, as a bug would, to show that the call
    /// raises CouplingInternalError and closes this FSE.
    fn _panic_for_test(&mut self) -> PyResult<()> {
        self.inner.write(|_| panic!("a deliberate panic"))
    }
}

/// The names of the FSE algorithms, for `FseGroup(...)` and `Fse(...)`.
pub fn algorithm_names() -> Vec<&'static str> {
    Algorithm::ALL.iter().map(|a| a.name()).collect()
}
