//! Bindings of the two detectors of shared bottlenecks: `coupling::sbd` (RFC 8382 shared
//! bottleneck detection: [`PySbdConfig`], [`PySbdFlowStats`] per flow, [`PySbdGrouper`]) and
//! `coupling::falseshare` (seed 000's four false-sharing tests for a pair of flows:
//! [`PyFalseSharingDetector`]). Conversion only: every statistic and decision is the crate's.
//!
//! Units at the Python boundary: points in time are `now_s` / `start_s`, float seconds since an
//! epoch the caller chooses (`macroflow.detect` uses the capture's first packet), converted by
//! `convert::secs` to integer nanoseconds as `sim.rs` converts its `start_s` (a float has
//! nanosecond resolution for about 100 days from the epoch, so choose a recent one rather than
//! the Unix epoch). One-way delays are `owd_ns`, integer nanoseconds, relative (any constant offset
//! per flow, even a negative delay): exact, as the crates take them. Results are plain dicts and
//! lists; decisions are the strings "share", "no_share" and "inconclusive".

use crate::convert::{fmt_f64, invalid, secs, Guarded, PyResultExt};
use coupling::falseshare::stats::Estimate;
use coupling::falseshare::{
    Decision, DecisionHistory, DelayEvidence, FalseSharingConfig, FalseSharingDetector,
    LossEvidence, LossReport, LossTestKind, OutOfOrderEvidence, Packet,
};
use coupling::sbd::{
    CongestionReason, FlowStats, FlowSummary, SbdConfig, SbdGrouper, SbdGrouping, SplitStep,
};
use coupling::{Error, FlowId, Instant};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Float seconds since the caller's epoch to an [`Instant`], as `sim.rs` converts `start_s`.
fn at(field: &'static str, s: f64) -> PyResult<Instant> {
    Ok(Instant::from_nanos(secs(field, s)?.as_nanos()))
}

/// The crate names a config field by its Rust name; report it by the keyword the caller used.
fn renamed(e: Error, names: &[(&'static str, &'static str)]) -> Error {
    match e {
        Error::InvalidValue {
            field,
            value,
            expected,
        } => Error::InvalidValue {
            field: names
                .iter()
                .find(|(rust, _)| *rust == field)
                .map_or(field, |(_, py)| py),
            value,
            expected,
        },
        other => other,
    }
}

// ---------------------------------------------------------------------------------------------
// SBD (RFC 8382)

/// The parameters of RFC 8382 sec. 2.1 with the recommended values of sec. 2.2 as defaults
/// (`coupling::sbd::SbdConfig`), validated on construction.
#[pyclass(frozen, eq, module = "macroflow", name = "SbdConfig")]
#[derive(Clone, Debug, PartialEq)]
pub struct PySbdConfig {
    inner: SbdConfig,
}

#[pymethods]
impl PySbdConfig {
    #[new]
    #[pyo3(signature = (*, t_s=0.35, n=50, m=30, c_s=-0.01, c_h=0.3, p_l=0.1, p_f=0.1, p_mad=0.1, p_d=0.1, p_s=0.15, p_v=0.7))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        t_s: f64,
        n: usize,
        m: usize,
        c_s: f64,
        c_h: f64,
        p_l: f64,
        p_f: f64,
        p_mad: f64,
        p_d: f64,
        p_s: f64,
        p_v: f64,
    ) -> PyResult<Self> {
        let inner = SbdConfig {
            t: secs("t_s", t_s)?,
            n,
            m,
            c_s,
            c_h,
            p_l,
            p_f,
            p_mad,
            p_d,
            p_s,
            p_v,
        };
        inner
            .check()
            .map_err(|e| renamed(e, &[("t", "t_s")]))
            .py()?;
        Ok(PySbdConfig { inner })
    }

    #[getter]
    fn t_s(&self) -> f64 {
        self.inner.t.as_secs_f64()
    }
    #[getter]
    fn n(&self) -> usize {
        self.inner.n
    }
    #[getter]
    fn m(&self) -> usize {
        self.inner.m
    }
    #[getter]
    fn c_s(&self) -> f64 {
        self.inner.c_s
    }
    #[getter]
    fn c_h(&self) -> f64 {
        self.inner.c_h
    }
    #[getter]
    fn p_l(&self) -> f64 {
        self.inner.p_l
    }
    #[getter]
    fn p_f(&self) -> f64 {
        self.inner.p_f
    }
    #[getter]
    fn p_mad(&self) -> f64 {
        self.inner.p_mad
    }
    #[getter]
    fn p_d(&self) -> f64 {
        self.inner.p_d
    }
    #[getter]
    fn p_s(&self) -> f64 {
        self.inner.p_s
    }
    #[getter]
    fn p_v(&self) -> f64 {
        self.inner.p_v
    }
    /// max(2*M, N): the T intervals with data a flow needs before it is grouped.
    #[getter]
    fn warmup_intervals(&self) -> u64 {
        self.inner.warmup_intervals()
    }

    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "SbdConfig(t_s={}, n={}, m={}, c_s={}, c_h={}, p_l={}, p_f={}, p_mad={}, p_d={}, \
             p_s={}, p_v={})",
            fmt_f64(c.t.as_secs_f64()),
            c.n,
            c.m,
            fmt_f64(c.c_s),
            fmt_f64(c.c_h),
            fmt_f64(c.p_l),
            fmt_f64(c.p_f),
            fmt_f64(c.p_mad),
            fmt_f64(c.p_d),
            fmt_f64(c.p_s),
            fmt_f64(c.p_v)
        )
    }
}

fn config_or_default(config: Option<PyRef<'_, PySbdConfig>>) -> SbdConfig {
    config.map_or_else(SbdConfig::default, |c| c.inner)
}

fn summary_dict<'py>(py: Python<'py>, s: &FlowSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("skew_est", s.skew_est)?;
    d.set_item("var_est_ns", s.var_est_ns)?;
    d.set_item("freq_est", s.freq_est)?;
    d.set_item("pkt_loss", s.pkt_loss)?;
    d.set_item("mean_delay_ns", s.mean_delay_ns)?;
    d.set_item("intervals_closed", s.intervals_closed)?;
    d.set_item("data_intervals", s.data_intervals)?;
    d.set_item("skew_samples", s.skew_samples)?;
    Ok(d)
}

const SUMMARY_KEYS: [&str; 8] = [
    "skew_est",
    "var_est_ns",
    "freq_est",
    "pkt_loss",
    "mean_delay_ns",
    "intervals_closed",
    "data_intervals",
    "skew_samples",
];

/// A summary given as the dict `SbdFlowStats.summary()` returns (e.g. reported by a receiver,
/// RFC 8382 sec. 3.1.2). `mean_delay_ns` and `intervals_closed` may be left out; the grouper
/// validates the values.
fn summary_from_dict(flow: u64, d: &Bound<'_, PyDict>) -> PyResult<FlowSummary> {
    for k in d.keys() {
        let k: String = k.extract().map_err(|_| {
            invalid(format!(
                "invalid summary of flow {flow}: keys are str, one of {}",
                SUMMARY_KEYS.join(", ")
            ))
        })?;
        if !SUMMARY_KEYS.contains(&k.as_str()) {
            return Err(invalid(format!(
                "invalid summary of flow {flow}: unknown key '{k}', expected {}",
                SUMMARY_KEYS.join(", ")
            )));
        }
    }
    fn get<'py, T: for<'a> FromPyObject<'a, 'py>>(
        flow: u64,
        d: &Bound<'py, PyDict>,
        key: &str,
        required: bool,
        what: &str,
    ) -> PyResult<Option<T>> {
        match d.get_item(key)? {
            None if required => Err(invalid(format!(
                "invalid summary of flow {flow}: '{key}' is missing ({what})"
            ))),
            None => Ok(None),
            Some(v) if v.is_none() && !required => Ok(None),
            Some(v) => v.extract::<T>().map(Some).map_err(|_| {
                invalid(format!(
                    "invalid summary of flow {flow}: '{key}' must be {what}"
                ))
            }),
        }
    }
    let float = "a float";
    let count = "an int >= 0";
    Ok(FlowSummary {
        skew_est: get(flow, d, "skew_est", true, float)?.unwrap_or_default(),
        var_est_ns: get(flow, d, "var_est_ns", true, float)?.unwrap_or_default(),
        freq_est: get(flow, d, "freq_est", true, float)?.unwrap_or_default(),
        pkt_loss: get(flow, d, "pkt_loss", true, float)?.unwrap_or_default(),
        mean_delay_ns: get(flow, d, "mean_delay_ns", false, "a float or None")?,
        intervals_closed: get(flow, d, "intervals_closed", false, count)?.unwrap_or_default(),
        data_intervals: get(flow, d, "data_intervals", true, count)?.unwrap_or_default(),
        skew_samples: get(flow, d, "skew_samples", true, count)?.unwrap_or_default(),
    })
}

/// One flow's statistics of RFC 8382 sec. 3.2 (`coupling::sbd::FlowStats`), fed every received
/// packet's relative one-way delay and every loss, in fixed memory.
#[pyclass(module = "macroflow", name = "SbdFlowStats")]
pub struct PySbdFlowStats {
    inner: Guarded<FlowStats>,
}

#[pymethods]
impl PySbdFlowStats {
    #[new]
    #[pyo3(signature = (config=None, start_s=0.0))]
    fn new(config: Option<PyRef<'_, PySbdConfig>>, start_s: f64) -> PyResult<Self> {
        let start = at("start_s", start_s)?;
        let stats = FlowStats::new(config_or_default(config), start).py()?;
        Ok(PySbdFlowStats {
            inner: Guarded::new("SbdFlowStats", stats),
        })
    }

    #[getter]
    fn config(&self) -> PyResult<PySbdConfig> {
        self.inner.read(|s| Ok(PySbdConfig { inner: *s.config() }))
    }

    /// A packet received at `now_s` with relative one-way delay `owd_ns`.
    fn on_packet(&mut self, now_s: f64, owd_ns: i64) -> PyResult<()> {
        let now = at("now_s", now_s)?;
        self.inner.write(|s| s.on_packet(now, owd_ns).py())
    }

    /// `lost_pkts` packets found lost at `now_s`.
    #[pyo3(signature = (now_s, lost_pkts=1))]
    fn on_loss(&mut self, now_s: f64, lost_pkts: u64) -> PyResult<()> {
        let now = at("now_s", now_s)?;
        self.inner.write(|s| s.on_loss(now, lost_pkts).py())
    }

    /// Closes the T intervals that ended at or before `now_s`; returns how many.
    fn advance(&mut self, now_s: f64) -> PyResult<u64> {
        let now = at("now_s", now_s)?;
        self.inner.write(|s| s.advance(now).py())
    }

    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.inner.read(|s| summary_dict(py, &s.summary()))
    }

    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.inner.read(|s| {
            let c = s.counters();
            let d = PyDict::new(py);
            d.set_item("received_pkts", c.received_pkts)?;
            d.set_item("lost_pkts", c.lost_pkts)?;
            d.set_item("intervals_closed", c.intervals_closed)?;
            d.set_item("empty_intervals", c.empty_intervals)?;
            d.set_item("samples_without_mean_delay", c.samples_without_mean_delay)?;
            d.set_item(
                "samples_without_previous_mean",
                c.samples_without_previous_mean,
            )?;
            Ok(d)
        })
    }

    fn last_interval<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner.read(|s| {
            s.last_interval()
                .map(|r| {
                    let d = PyDict::new(py);
                    d.set_item("received_pkts", r.received_pkts)?;
                    d.set_item("lost_pkts", r.lost_pkts)?;
                    d.set_item("mean_owd_ns", r.mean_owd_ns)?;
                    d.set_item("skew_base", r.skew_base)?;
                    d.set_item("skew_samples", r.skew_samples)?;
                    d.set_item("var_base_ns", r.var_base_ns)?;
                    d.set_item("var_samples", r.var_samples)?;
                    d.set_item("crossing", r.crossing)?;
                    Ok(d)
                })
                .transpose()
        })
    }

    #[getter]
    fn current_interval_end_s(&self) -> PyResult<f64> {
        self.inner
            .read(|s| Ok(s.current_interval_end().as_secs_f64()))
    }

    #[getter]
    fn history_len(&self) -> PyResult<usize> {
        self.inner.read(|s| Ok(s.history_len()))
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|s| {
            let c = s.counters();
            format!(
                "SbdFlowStats(t_s={}, intervals_closed={}, received_pkts={}, lost_pkts={})",
                fmt_f64(s.config().t.as_secs_f64()),
                c.intervals_closed,
                c.received_pkts,
                c.lost_pkts
            )
        })
    }
}

fn reason_name(r: CongestionReason) -> &'static str {
    match r {
        CongestionReason::Skew => "skew",
        CongestionReason::Hysteresis => "hysteresis",
        CongestionReason::Loss => "loss",
    }
}

fn step_name(s: SplitStep) -> &'static str {
    match s {
        SplitStep::FreqEst => "freq_est",
        SplitStep::VarEst => "var_est",
        SplitStep::SkewEst => "skew_est",
        SplitStep::PktLoss => "pkt_loss",
    }
}

fn ids(v: &[FlowId]) -> Vec<u64> {
    v.iter().map(|f| f.0).collect()
}

fn grouping_dict<'py>(py: Python<'py>, g: &SbdGrouping) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let groups: Vec<Vec<u64>> = g.groups.iter().map(|x| ids(x)).collect();
    d.set_item("groups", groups)?;
    d.set_item("not_congested", ids(&g.not_congested))?;
    d.set_item("insufficient_data", ids(&g.insufficient_data))?;
    let congested = PyDict::new(py);
    for (id, why) in &g.congested {
        congested.set_item(id.0, reason_name(*why))?;
    }
    d.set_item("congested", congested)?;
    let splits = PyList::empty(py);
    for s in &g.splits {
        let sd = PyDict::new(py);
        sd.set_item("step", step_name(s.step))?;
        sd.set_item("below", s.below.0)?;
        sd.set_item("above", s.above.0)?;
        sd.set_item("below_value", s.below_value)?;
        sd.set_item("above_value", s.above_value)?;
        sd.set_item("threshold", s.threshold)?;
        splits.append(sd)?;
    }
    d.set_item("splits", splits)?;
    Ok(d)
}

/// The grouping algorithm of RFC 8382 sec. 3.3.1 with its per-flow hysteresis
/// (`coupling::sbd::SbdGrouper`).
#[pyclass(module = "macroflow", name = "SbdGrouper")]
pub struct PySbdGrouper {
    inner: Guarded<SbdGrouper>,
}

#[pymethods]
impl PySbdGrouper {
    #[new]
    #[pyo3(signature = (config=None))]
    fn new(config: Option<PyRef<'_, PySbdConfig>>) -> PyResult<Self> {
        let g = SbdGrouper::new(config_or_default(config)).py()?;
        Ok(PySbdGrouper {
            inner: Guarded::new("SbdGrouper", g),
        })
    }

    #[getter]
    fn config(&self) -> PyResult<PySbdConfig> {
        self.inner.read(|g| Ok(PySbdConfig { inner: *g.config() }))
    }

    /// Groups the flows of `flows`, a dict {flow id: SbdFlowStats or summary dict}, from their
    /// summaries now.
    fn group<'py>(
        &mut self,
        py: Python<'py>,
        flows: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let expected = "invalid flows: expected a dict {flow id (int >= 0): SbdFlowStats or a \
                        summary dict}";
        let flows = flows
            .cast::<PyDict>()
            .map_err(|_| invalid(expected.to_string()))?;
        let mut entries = Vec::with_capacity(flows.len());
        for (k, v) in flows.iter() {
            let id: u64 = k.extract().map_err(|_| invalid(expected.to_string()))?;
            let summary = if let Ok(stats) = v.extract::<PyRef<'_, PySbdFlowStats>>() {
                stats.inner.read(|s| Ok(s.summary()))?
            } else if let Ok(d) = v.cast::<PyDict>() {
                summary_from_dict(id, d)?
            } else {
                return Err(invalid(format!(
                    "invalid flows[{id}]: expected an SbdFlowStats or a summary dict"
                )));
            };
            entries.push((FlowId(id), summary));
        }
        let grouping = self.inner.write(|g| g.group(&entries).py())?;
        grouping_dict(py, &grouping)
    }

    /// Whether the flow was found congested at its last decision (the hysteresis state).
    fn was_congested(&self, flow: u64) -> PyResult<bool> {
        self.inner.read(|g| Ok(g.was_congested(FlowId(flow))))
    }

    /// Drops the flow's hysteresis state; returns whether it had any.
    fn forget(&mut self, flow: u64) -> PyResult<bool> {
        self.inner.write(|g| Ok(g.forget(FlowId(flow))))
    }

    fn __repr__(&self) -> String {
        self.inner
            .repr(|g| format!("SbdGrouper(t_s={})", fmt_f64(g.config().t.as_secs_f64())))
    }
}

// ---------------------------------------------------------------------------------------------
// False sharing (seed 000 sec. 4.1)

fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::Share => "share",
        Decision::NoShare => "no_share",
        Decision::Inconclusive => "inconclusive",
    }
}

fn estimate_dict<'py>(
    py: Python<'py>,
    e: Option<Estimate>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    e.map(|e| {
        let d = PyDict::new(py);
        d.set_item("value", e.value)?;
        d.set_item("lo", e.lo)?;
        d.set_item("hi", e.hi)?;
        d.set_item("samples", e.samples)?;
        Ok(d)
    })
    .transpose()
}

fn history_dict<'py>(py: Python<'py>, h: &DecisionHistory) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("decision", decision_name(h.decision))?;
    d.set_item("since_s", h.since.as_secs_f64())?;
    d.set_item(
        "first_share_at_s",
        h.first_share_at.map(|t| t.as_secs_f64()),
    )?;
    d.set_item(
        "first_no_share_at_s",
        h.first_no_share_at.map(|t| t.as_secs_f64()),
    )?;
    d.set_item(
        "share_detection_time_s",
        h.detection_time(Decision::Share).map(|t| t.as_secs_f64()),
    )?;
    d.set_item(
        "no_share_detection_time_s",
        h.detection_time(Decision::NoShare).map(|t| t.as_secs_f64()),
    )?;
    d.set_item("changes", h.changes)?;
    d.set_item("start_s", h.start.as_secs_f64())?;
    Ok(d)
}

fn loss_dict<'py>(py: Python<'py>, e: &LossEvidence) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "kind",
        match e.kind {
            LossTestKind::Asymmetric => "asymmetric",
            LossTestKind::Symmetric => "symmetric",
        },
    )?;
    d.set_item("decision", decision_name(e.decision))?;
    d.set_item("auto", estimate_dict(py, e.auto)?)?;
    d.set_item("cross", estimate_dict(py, e.cross)?)?;
    d.set_item("trials", e.trials)?;
    d.set_item("auto_lost", e.auto_lost)?;
    d.set_item("cross_lost", e.cross_lost)?;
    let c = PyDict::new(py);
    c.set_item("conditions", e.counters.conditions)?;
    c.set_item("not_interleaved", e.counters.not_interleaved)?;
    c.set_item("broken_by_gap", e.counters.broken_by_gap)?;
    c.set_item("trials", e.counters.trials)?;
    d.set_item("counters", c)?;
    d.set_item("history", history_dict(py, &e.history)?)?;
    Ok(d)
}

fn delay_dict<'py>(py: Python<'py>, e: &DelayEvidence) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("decision", decision_name(e.decision))?;
    d.set_item("auto", estimate_dict(py, e.auto)?)?;
    d.set_item("cross", estimate_dict(py, e.cross)?)?;
    let dirs = PyList::empty(py);
    for x in &e.directions {
        let xd = PyDict::new(py);
        xd.set_item("samples", x.samples)?;
        xd.set_item("auto_r", x.auto_r)?;
        xd.set_item("cross_r", x.cross_r)?;
        dirs.append(xd)?;
    }
    d.set_item("directions", dirs)?;
    d.set_item("samples", e.samples)?;
    let c = PyDict::new(py);
    c.set_item("positions", e.counters.positions)?;
    c.set_item("interleaved", e.counters.interleaved)?;
    c.set_item("samples", e.counters.samples)?;
    c.set_item("missing_delay", e.counters.missing_delay)?;
    c.set_item("gaps", e.counters.gaps)?;
    d.set_item("counters", c)?;
    d.set_item("history", history_dict(py, &e.history)?)?;
    Ok(d)
}

fn out_of_order_dict<'py>(py: Python<'py>, e: &OutOfOrderEvidence) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("decision", decision_name(e.decision))?;
    d.set_item("arrivals", e.arrivals)?;
    d.set_item("reordered_pkts", e.reordered_pkts)?;
    d.set_item("occasions", e.occasions)?;
    d.set_item("recent_occasions", e.recent_occasions)?;
    d.set_item(
        "last_occasion_at_s",
        e.last_occasion_at.map(|t| t.as_secs_f64()),
    )?;
    d.set_item("max_extent_pkts", e.max_extent_pkts)?;
    d.set_item("within_flow_late_pkts", e.within_flow_late_pkts)?;
    d.set_item("history", history_dict(py, &e.history)?)?;
    Ok(d)
}

/// The crate's config field names, as the keyword arguments of `FalseSharingDetector` say them.
const FALSE_SHARING_NAMES: [(&str, &str); 11] = [
    ("asymmetric_loss.confidence", "confidence"),
    ("symmetric_loss.confidence", "confidence"),
    ("delay.confidence", "confidence"),
    ("asymmetric_loss.min_samples", "loss_min_samples"),
    ("symmetric_loss.min_samples", "loss_min_samples"),
    ("asymmetric_loss.window_samples", "loss_window_samples"),
    ("symmetric_loss.window_samples", "loss_window_samples"),
    ("delay.min_samples", "delay_min_samples"),
    ("delay.window_samples", "delay_window_samples"),
    ("out_of_order.min_occasions", "min_occasions"),
    ("out_of_order.horizon", "horizon_s"),
];

/// Seed 000's four false-sharing tests for the pair (a, b)
/// (`coupling::falseshare::FalseSharingDetector`).
#[pyclass(module = "macroflow", name = "FalseSharingDetector")]
pub struct PyFalseSharingDetector {
    inner: Guarded<FalseSharingDetector>,
}

#[pymethods]
impl PyFalseSharingDetector {
    #[new]
    #[pyo3(signature = (a, b, start_s=0.0, *, confidence=0.9, reorder_window_pkts=256, loss_min_samples=10, loss_window_samples=1024, delay_min_samples=10, delay_window_samples=2048, extent_pkts=3, min_occasions=10, occasion_gap_s=0.5, horizon_s=10.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: u64,
        b: u64,
        start_s: f64,
        confidence: f64,
        reorder_window_pkts: usize,
        loss_min_samples: u64,
        loss_window_samples: usize,
        delay_min_samples: u64,
        delay_window_samples: usize,
        extent_pkts: u64,
        min_occasions: u64,
        occasion_gap_s: f64,
        horizon_s: f64,
    ) -> PyResult<Self> {
        let start = at("start_s", start_s)?;
        let mut c = FalseSharingConfig::default().with_confidence(confidence);
        c.reorder_window_pkts = reorder_window_pkts;
        for loss in [&mut c.asymmetric_loss, &mut c.symmetric_loss] {
            loss.min_samples = loss_min_samples;
            loss.window_samples = loss_window_samples;
        }
        c.delay.min_samples = delay_min_samples;
        c.delay.window_samples = delay_window_samples;
        c.out_of_order.extent_pkts = extent_pkts;
        c.out_of_order.min_occasions = min_occasions;
        c.out_of_order.occasion_gap = secs("occasion_gap_s", occasion_gap_s)?;
        c.out_of_order.horizon = secs("horizon_s", horizon_s)?;
        c.check()
            .map_err(|e| renamed(e, &FALSE_SHARING_NAMES))
            .py()?;
        let d = FalseSharingDetector::new(c, FlowId(a), FlowId(b), start).py()?;
        Ok(PyFalseSharingDetector {
            inner: Guarded::new("FalseSharingDetector", d),
        })
    }

    /// The pair (a, b); a is the asymmetric loss test's comparison flow.
    #[getter]
    fn flows(&self) -> PyResult<(u64, u64)> {
        self.inner.read(|d| {
            let (a, b) = d.flows();
            Ok((a.0, b.0))
        })
    }

    /// A packet of `flow` with the pair's shared sequence number `seq` arrived at `now_s` with
    /// relative one-way delay `owd_ns`.
    fn on_packet(&mut self, now_s: f64, flow: u64, seq: u64, owd_ns: i64) -> PyResult<()> {
        let now = at("now_s", now_s)?;
        self.inner.write(|d| {
            d.on_packet(now, Packet::new(FlowId(flow), seq, owd_ns))
                .py()
        })
    }

    /// The packet of `flow` with shared sequence number `seq` was found lost, reported at `now_s`.
    fn on_loss(&mut self, now_s: f64, flow: u64, seq: u64) -> PyResult<()> {
        let now = at("now_s", now_s)?;
        self.inner
            .write(|d| d.on_loss(now, LossReport::new(FlowId(flow), seq)).py())
    }

    /// Finalizes every sequence number up to the highest reported (the end of a trace); returns
    /// how many were finalized.
    fn flush(&mut self, now_s: f64) -> PyResult<u64> {
        let now = at("now_s", now_s)?;
        self.inner.write(|d| d.flush(now).py())
    }

    /// Every test's answer, evidence and decision times now.
    fn decisions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.inner.read(|det| {
            let e = det.decisions();
            let d = PyDict::new(py);
            d.set_item("asymmetric_loss", loss_dict(py, &e.asymmetric_loss)?)?;
            d.set_item("symmetric_loss", loss_dict(py, &e.symmetric_loss)?)?;
            d.set_item("delay", delay_dict(py, &e.delay)?)?;
            d.set_item("out_of_order", out_of_order_dict(py, &e.out_of_order)?)?;
            Ok(d)
        })
    }

    /// Running totals of the inputs (duplicates, late and unreported sequence numbers, ...).
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.inner.read(|det| {
            let c = det.counters();
            let d = PyDict::new(py);
            d.set_item("packets", c.packets)?;
            d.set_item("loss_reports", c.loss_reports)?;
            d.set_item("duplicate_packets", c.duplicate_packets)?;
            d.set_item("duplicate_loss_reports", c.duplicate_loss_reports)?;
            d.set_item("lost_then_received", c.lost_then_received)?;
            d.set_item("loss_reports_for_received", c.loss_reports_for_received)?;
            d.set_item("after_finalized", c.after_finalized)?;
            d.set_item("finalized_duplicates", c.finalized_duplicates)?;
            d.set_item("beyond_record", c.beyond_record)?;
            d.set_item("finalized_pkts", c.finalized_pkts)?;
            d.set_item("unreported_pkts", c.unreported_pkts)?;
            d.set_item("pending_pkts", c.pending_pkts)?;
            Ok(d)
        })
    }

    fn __repr__(&self) -> String {
        self.inner.repr(|d| {
            let (a, b) = d.flows();
            let e = d.decisions();
            format!(
                "FalseSharingDetector(a={}, b={}, asymmetric_loss={}, symmetric_loss={}, delay={}, \
                 out_of_order={})",
                a.0,
                b.0,
                decision_name(e.asymmetric_loss.decision),
                decision_name(e.symmetric_loss.decision),
                decision_name(e.delay.decision),
                decision_name(e.out_of_order.decision)
            )
        })
    }
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySbdConfig>()?;
    m.add_class::<PySbdFlowStats>()?;
    m.add_class::<PySbdGrouper>()?;
    m.add_class::<PyFalseSharingDetector>()?;
    Ok(())
}
