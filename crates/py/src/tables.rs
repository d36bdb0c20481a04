//! The simulator's results as Arrow record batches, each with a fixed schema defined once here.
//!
//! A table is a list of columns; a column is its name and how it is read from a row, and that
//! reading fixes its Arrow type and nullability ([`Col`]). The schema and the arrays both come
//! from the list, so a table has the same schema whatever it holds: empty, all nulls, or full
//! (`pa.table` on Python lists inferred the types instead: an empty table was all null-typed,
//! and a run whose flows never finished had a null-typed `fct_s`). The batches reach pyarrow
//! without a copy, through the Arrow PyCapsule interface ([`to_pyarrow`]).
//!
//! The export uses arrow-rs's own `ffi` structs. pyo3-arrow (0.20, on arrow 59 and pyo3 0.30,
//! abi3-compatible without its `buffer_protocol` feature) was tried first: its exporter
//! (`to_array_pycapsules`) casts to a schema the consumer requests, which links arrow-cast's
//! kernels: the extension grew from 17 MB to 95 MB (machine code from 1.4 MB to 7.5 MB), against
//! 29 MB (1.6 MB) this way (release builds without LTO).

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{
    Array, ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use sim::stats::{
    DetectionRow, DetectorSample, FlowSample, FlowSummary, LinkSummary, MeasuredSummary,
    MediaSample, MediaSummary, QueueSample, Results, TimeSeries, UdpSummary,
};
use std::sync::Arc;

/// A column of a table whose rows are `R`: its name, and how a row gives its value, which
/// decides its Arrow type and whether it may be null.
pub enum Col<R> {
    /// `int64`, never null: ids, counts, bytes, rates in whole bit/s. (A `u64` above
    /// `i64::MAX`, which no run reaches, would saturate.)
    Int(&'static str, fn(&R) -> u64),
    /// `float64`, never null (a NaN stays a NaN).
    Float(&'static str, fn(&R) -> f64),
    /// `float64`, null where the row has no value.
    NullableFloat(&'static str, fn(&R) -> Option<f64>),
    /// `string` (UTF-8), never null.
    Str(&'static str, fn(&R) -> &str),
    /// `list<item: int64>`, never null (nor are its items): a list of counts.
    Counts(&'static str, fn(&R) -> &[u64]),
}

/// No measurement yet (NaN in the simulator) is a null.
fn nan_null(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

fn seconds(t_ns: u64) -> f64 {
    t_ns as f64 / 1e9
}

/// The item of a list of counts: `item: int64`, nullable as in pyarrow's `pa.list_(pa.int64())`
/// (the type the column always had; no item is ever null).
fn counts_item() -> FieldRef {
    Arc::new(Field::new_list_field(DataType::Int64, true))
}

impl<R> Col<R> {
    pub fn field(&self) -> Field {
        match self {
            Col::Int(name, _) => Field::new(*name, DataType::Int64, false),
            Col::Float(name, _) => Field::new(*name, DataType::Float64, false),
            Col::NullableFloat(name, _) => Field::new(*name, DataType::Float64, true),
            Col::Str(name, _) => Field::new(*name, DataType::Utf8, false),
            Col::Counts(name, _) => Field::new(*name, DataType::List(counts_item()), false),
        }
    }

    fn array(&self, rows: &[R]) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            Col::Int(_, f) => Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| i64::try_from(f(r)).unwrap_or(i64::MAX)),
            )),
            Col::Float(_, f) => Arc::new(Float64Array::from_iter_values(rows.iter().map(f))),
            Col::NullableFloat(_, f) => Arc::new(rows.iter().map(f).collect::<Float64Array>()),
            Col::Str(_, f) => Arc::new(StringArray::from_iter_values(rows.iter().map(f))),
            Col::Counts(_, f) => {
                let values = Int64Array::from_iter_values(
                    rows.iter()
                        .flat_map(|r| f(r).iter())
                        .map(|&x| i64::try_from(x).unwrap_or(i64::MAX)),
                );
                let offsets = OffsetBuffer::from_lengths(rows.iter().map(|r| f(r).len()));
                Arc::new(ListArray::try_new(
                    counts_item(),
                    offsets,
                    Arc::new(values),
                    None,
                )?)
            }
        })
    }
}

/// The schema of a table.
pub fn schema<R>(cols: &[Col<R>]) -> SchemaRef {
    Arc::new(Schema::new(cols.iter().map(Col::field).collect::<Vec<_>>()))
}

/// A table's rows as one record batch with the table's schema.
pub fn batch<R>(cols: &[Col<R>], rows: &[R]) -> Result<RecordBatch, ArrowError> {
    let arrays = cols
        .iter()
        .map(|c| c.array(rows))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema(cols), arrays)
}

/// `flows`: one row per TCP flow.
pub const FLOWS: &[Col<FlowSummary>] = &[
    Col::Int("flow", |f| f.flow.into()),
    Col::Str("src", |f| &f.src),
    Col::Str("dst", |f| &f.dst),
    Col::Str("cc", |f| f.cc),
    Col::Float("start_s", |f| f.start_s),
    // Only a finite flow that completed has one.
    Col::NullableFloat("fct_s", |f| f.fct_s),
    Col::Int("delivered_bytes", |f| f.delivered_bytes),
    Col::Float("goodput_bps", |f| f.goodput_bps),
    Col::Int("data_pkts_sent", |f| f.data_pkts_sent),
    Col::Int("retransmits", |f| f.retransmits),
    // Data segments the network dropped (simulator; the linux engine has no such count).
    Col::Int("lost_pkts", |f| f.lost_pkts),
    Col::Int("timeouts", |f| f.timeouts),
    Col::Int("max_burst_pkts", |f| f.max_burst_pkts),
    // A count per bucket (sim::stats::burst_bucket).
    Col::Counts("burst_hist", |f| &f.burst_hist),
    Col::Int("fast_recoveries", |f| f.fast_recoveries),
    Col::NullableFloat("mean_rtt_s", |f| nan_null(f.mean_rtt_s)),
];

/// `udp_flows`: one row per UDP flow.
pub const UDP_FLOWS: &[Col<UdpSummary>] = &[
    Col::Int("flow", |f| f.flow.into()),
    Col::Str("src", |f| &f.src),
    Col::Str("dst", |f| &f.dst),
    Col::Int("sent_pkts", |f| f.sent_pkts),
    Col::Int("sent_bytes", |f| f.sent_bytes),
    Col::Int("received_pkts", |f| f.received_pkts),
    Col::Int("received_bytes", |f| f.received_bytes),
    Col::Float("throughput_bps", |f| f.throughput_bps),
];

/// `media_flows`: one row per media flow.
pub const MEDIA_FLOWS: &[Col<MediaSummary>] = &[
    Col::Int("flow", |f| f.flow.into()),
    Col::Str("controller", |f| f.controller),
    Col::Str("src", |f| &f.src),
    Col::Str("dst", |f| &f.dst),
    Col::Int("sent_bytes", |f| f.sent_bytes),
    Col::Int("received_bytes", |f| f.received_bytes),
    Col::Float("goodput_bps", |f| f.goodput_bps),
    Col::NullableFloat("mean_owd_s", |f| nan_null(f.mean_owd_s)),
];

/// `links`: one row per link, in id order.
pub const LINKS: &[Col<LinkSummary>] = &[
    Col::Int("link", |l| l.link.into()),
    Col::Str("src", |l| &l.from),
    Col::Str("dst", |l| &l.to),
    Col::Int("rate_bps", |l| l.rate_bps),
    Col::Int("offered_pkts", |l| l.offered_pkts),
    Col::Int("dropped_pkts", |l| l.dropped_pkts),
    Col::Int("tx_pkts", |l| l.tx_pkts),
    Col::Int("tx_bytes", |l| l.tx_bytes),
    Col::Float("utilization", |l| l.utilization),
    Col::Float("loss_ratio", |l| l.loss_ratio),
    Col::Float("mean_queue_pkts", |l| l.mean_queue_pkts),
    Col::Int("max_queue_pkts", |l| l.max_queue_pkts as u64),
];

/// `flow_samples`: a TCP flow at a sampling instant.
pub const FLOW_SAMPLES: &[Col<FlowSample>] = &[
    Col::Float("t_s", |s| seconds(s.t_ns)),
    Col::Int("flow", |s| s.flow.into()),
    Col::Float("cwnd_pkts", |s| s.cwnd_pkts),
    Col::Float("ssthresh_pkts", |s| s.ssthresh_pkts),
    Col::Str("state", |s| s.state.name()),
    Col::Int("delivered_bytes", |s| s.delivered_bytes),
    Col::NullableFloat("srtt_s", |s| nan_null(s.srtt_s)),
];

/// `queue_samples`: a measured link's queue at a sampling instant.
pub const QUEUE_SAMPLES: &[Col<QueueSample>] = &[
    Col::Float("t_s", |s| seconds(s.t_ns)),
    Col::Int("link", |s| s.link.into()),
    Col::Int("pkts", |s| s.pkts.into()),
    Col::Int("bytes", |s| s.bytes),
];

/// `media_samples`: a media flow at a sampling instant.
pub const MEDIA_SAMPLES: &[Col<MediaSample>] = &[
    Col::Float("t_s", |s| seconds(s.t_ns)),
    Col::Int("flow", |s| s.flow.into()),
    Col::Float("rate_bps", |s| s.rate_bps),
    Col::Float("cc_rate_bps", |s| s.cc_rate_bps),
    Col::Int("received_bytes", |s| s.received_bytes),
];

/// `detections`: every change of a false-sharing test's answer in a measured group (seed 000
/// sec. 4.1); a detection time is `t_s - start_s`. `flow_a`/`flow_b` number TCP flows, or media
/// flows where the group's `measured_groups.members` is "media" (as in `detector_samples`).
pub const DETECTIONS: &[Col<DetectionRow>] = &[
    Col::Int("group", |r| r.group.into()),
    Col::Float("t_s", |r| r.t_s),
    Col::Int("flow_a", |r| r.flow_a.into()),
    Col::Int("flow_b", |r| r.flow_b.into()),
    Col::Str("test", |r| r.test),
    Col::Str("decision", |r| r.decision),
    Col::Float("start_s", |r| r.start_s),
];

/// `detector_samples`: each pair's metrics per test at a sampling instant (seed 000 Fig. 5); null
/// while a metric is undefined. The out-of-order test's `cross` is its occasions in the horizon.
pub const DETECTOR_SAMPLES: &[Col<DetectorSample>] = &[
    Col::Float("t_s", |s| seconds(s.t_ns)),
    Col::Int("group", |s| s.group.into()),
    Col::Int("flow_a", |s| s.flow_a.into()),
    Col::Int("flow_b", |s| s.flow_b.into()),
    Col::Str("test", |s| s.test),
    Col::NullableFloat("auto", |s| nan_null(s.auto)),
    Col::NullableFloat("auto_lo", |s| nan_null(s.auto_lo)),
    Col::NullableFloat("auto_hi", |s| nan_null(s.auto_hi)),
    Col::NullableFloat("cross", |s| nan_null(s.cross)),
    Col::NullableFloat("cross_lo", |s| nan_null(s.cross_lo)),
    Col::NullableFloat("cross_hi", |s| nan_null(s.cross_hi)),
    Col::Int("samples", |s| s.samples),
    Col::Str("decision", |s| s.decision),
];

/// `measured_groups`: one row per measured group: what its detectors saw and its response did.
pub const MEASURED_GROUPS: &[Col<MeasuredSummary>] = &[
    Col::Int("group", |m| m.group.into()),
    Col::Str("members", |m| m.members),
    Col::Int("sent_pkts", |m| m.sent_pkts),
    Col::Int("arrived_pkts", |m| m.arrived_pkts),
    Col::Int("dropped_pkts", |m| m.dropped_pkts),
    Col::Int("splits", |m| m.splits),
    Col::Int("merges", |m| m.merges),
    Col::Int("deferred", |m| m.deferred),
    Col::Int("detector_errors", |m| m.detector_errors),
    Col::Int("action_errors", |m| m.action_errors),
    Col::Int("events_dropped", |m| m.events_dropped),
    Col::Int("unreported_pkts", |m| m.unreported_pkts),
    Col::Int("after_finalized", |m| m.after_finalized),
    Col::Int("beyond_record", |m| m.beyond_record),
];

/// Every table by name, in `macroflow.sim.TABLES` order: the summaries from `r`, the time series
/// from `ts` (read in place).
pub fn batches(
    r: &Results,
    ts: TimeSeries<'_>,
) -> Result<Vec<(&'static str, RecordBatch)>, ArrowError> {
    Ok(vec![
        ("flows", batch(FLOWS, &r.flows)?),
        ("udp_flows", batch(UDP_FLOWS, &r.udp_flows)?),
        ("media_flows", batch(MEDIA_FLOWS, &r.media_flows)?),
        ("links", batch(LINKS, &r.links)?),
        ("flow_samples", batch(FLOW_SAMPLES, ts.flow_samples)?),
        ("queue_samples", batch(QUEUE_SAMPLES, ts.queue_samples)?),
        ("media_samples", batch(MEDIA_SAMPLES, ts.media_samples)?),
        ("detections", batch(DETECTIONS, &r.detections)?),
        (
            "detector_samples",
            batch(DETECTOR_SAMPLES, ts.detector_samples)?,
        ),
        (
            "measured_groups",
            batch(MEASURED_GROUPS, &r.measured_groups)?,
        ),
    ])
}

/// A record batch on its way to pyarrow, which takes it through the Arrow PyCapsule interface
/// (`__arrow_c_array__`: an `ArrowSchema` and an `ArrowArray` exported by arrow-rs's `ffi`)
/// without a copy: pyarrow's arrays keep the Rust buffers alive until it releases them.
#[pyclass(frozen, module = "macroflow._native")]
struct ArrowBatch(RecordBatch);

#[pymethods]
impl ArrowBatch {
    /// The interface lets a producer ignore `requested_schema` (a consumer's wish); the schema
    /// here is fixed.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let field = Field::new_struct("", self.0.schema().fields().clone(), false);
        let schema =
            FFI_ArrowSchema::try_from(&field).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let array = FFI_ArrowArray::new(&StructArray::from(self.0.clone()).to_data());
        PyTuple::new(
            py,
            [
                PyCapsule::new_with_value(py, schema, c"arrow_schema")?,
                PyCapsule::new_with_value(py, array, c"arrow_array")?,
            ],
        )
    }
}

/// `batch` as a `pyarrow.RecordBatch` sharing its buffers.
pub fn to_pyarrow(py: Python<'_>, batch: RecordBatch) -> PyResult<Bound<'_, PyAny>> {
    py.import("pyarrow")?
        .getattr("record_batch")?
        .call1((ArrowBatch(batch),))
}
