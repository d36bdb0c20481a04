//! Bindings of the packet-level simulator (`crates/sim`): build a topology, add TCP flows and
//! coupling groups, run (the GIL is released), and read results as Arrow record batches (fixed
//! schemas, in `tables.rs`) that `macroflow.sim` turns into tables.

use crate::convert::{panic_message, unknown_name};
use crate::tables;
use coupling::tcp::CouplerKind;
use coupling::{Duration, Instant};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sim::engine::{FseCoupling, MediaFlowConfig, UdpFlowConfig};
use sim::media::{synthetic_video, MediaSource, VideoTrace};
use sim::net::queue::{Limit, QueueConfig, QueueSpec};
use sim::net::topology::{dumbbell, parking_lot, DumbbellConfig};
use sim::net::{LinkConfig, LinkId, Network, NodeId};
use sim::traffic::{CbrConfig, SelfSimilarConfig, SourceConfig, SourceKind, WebWorkload};
use sim::transport::cc::CcKind;
use sim::transport::measured::{DetectorTest, MeasuredConfig};
use sim::transport::tcp::TcpConfig;
use sim::{Sim, SimError, TcpFlowConfig};
use std::sync::Mutex;

pyo3::create_exception!(
    macroflow,
    SimulationError,
    pyo3::exceptions::PyValueError,
    "A simulation was built or run with an invalid parameter; the message names it."
);
pyo3::create_exception!(
    macroflow,
    SimulationInternalError,
    SimulationError,
    "A bug in the simulator (a panic inside the engine, caught): the simulation is closed. Please report it."
);

/// A congestion control by its registry name.
fn parse_cc(cc: &str) -> PyResult<CcKind> {
    CcKind::from_name(cc).ok_or_else(|| unknown_name("cc", cc, CcKind::names()))
}

/// A flow's place in an FSE group, its signalling delays checked as durations.
fn fse_coupling(
    group: usize,
    priority: f64,
    delay_min_s: f64,
    delay_max_s: f64,
) -> PyResult<FseCoupling> {
    Ok(FseCoupling {
        group,
        priority,
        delay_min: secs("delay_min_s", delay_min_s)?,
        delay_max: secs("delay_max_s", delay_max_s)?,
    })
}

fn sim_err(e: SimError) -> PyErr {
    SimulationError::new_err(e.to_string())
}

/// A group's burst limit, checked before the group exists, so a bad limit leaves no group behind
/// (the coupler's own check, `set_max_burst_pkts`, would refuse it after).
fn check_max_burst(pkts: f64) -> Result<(), SimError> {
    if pkts.is_finite() && pkts >= 0.0 {
        Ok(())
    } else {
        Err(SimError::invalid(
            "max_burst_pkts",
            pkts,
            "a finite number of segments >= 0",
        ))
    }
}

fn secs(name: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64("time", s).map_err(|_| {
        SimulationError::new_err(format!("invalid {name}: got {s}, expected seconds >= 0"))
    })
}

fn rate(name: &str, bps: f64) -> PyResult<u64> {
    if (1.0..=1e15).contains(&bps) {
        Ok(bps.round() as u64)
    } else {
        Err(SimulationError::new_err(format!(
            "invalid {name}: got {bps}, expected a rate in bit/s in 1..=1e15"
        )))
    }
}

fn queue(
    name: &str,
    pkts: Option<usize>,
    bytes: Option<u64>,
    random_drop: f64,
) -> PyResult<QueueConfig> {
    let limit = match (pkts, bytes) {
        (Some(p), None) => Limit::Packets(p),
        (None, Some(b)) => Limit::Bytes(b),
        (None, None) => Limit::Packets(1000),
        (Some(_), Some(_)) => {
            return Err(SimulationError::new_err(format!(
                "{name}: give queue_pkts or queue_bytes, not both"
            )))
        }
    };
    let q = QueueConfig::DropTail(limit);
    Ok(if random_drop != 0.0 {
        QueueConfig::RandomDrop {
            p: random_drop,
            inner: Box::new(q),
        }
    } else {
        q
    })
}

/// A link's queue: a `queue` spec, or else the drop-tail (with optional random loss) the plain
/// keywords describe; both at once is an error rather than one silently winning.
fn link_queue(
    name: &str,
    pkts: Option<usize>,
    bytes: Option<u64>,
    random_drop: f64,
    spec: Option<&Bound<'_, PyDict>>,
    link_rate_bps: u64,
) -> PyResult<QueueConfig> {
    match spec {
        None => queue(name, pkts, bytes, random_drop),
        Some(s) if pkts.is_none() && bytes.is_none() && random_drop == 0.0 => {
            queue_spec(name, s, link_rate_bps)
        }
        Some(_) => Err(SimulationError::new_err(format!(
            "{name}: give a queue spec or queue_pkts/queue_bytes/random_drop, not both"
        ))),
    }
}

/// A queue discipline from its Python spec, a dict with `kind` and that kind's keys: read by the
/// simulator's `QueueSpec` (its serde type, with its own errors naming `path`, nesting bound and
/// ns-2 defaults; see `crates/sim/src/net/queue/spec.rs`) and made into the link's queue config.
fn queue_spec(path: &str, spec: &Bound<'_, PyDict>, link_rate_bps: u64) -> PyResult<QueueConfig> {
    QueueSpec::read(path, crate::de::Value::new(spec.as_any()))
        .and_then(|s| s.to_config(path, link_rate_bps))
        .map_err(sim_err)
}

/// A topology change that succeeded, kept so the network can be rebuilt after one that failed.
type NetOp = Box<dyn Fn(&mut Network) -> Result<(), SimError> + Send>;

struct Builder {
    net: Network,
    ops: Vec<NetOp>,
}

enum State {
    Building(Builder),
    Running(Box<Sim>),
    Poisoned,
}

/// Runs a method's work outside the engine's lock (converting arguments, building configurations,
/// converting results): a panic there (a bug) changed nothing, so it becomes a
/// SimulationInternalError and the simulation stays usable; one inside the lock closes it
/// ([`closed_on_panic`]).
fn outside_the_engine<R>(f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    crate::convert::catch_panic(
        |m| {
            SimulationInternalError::new_err(format!(
                "internal error in the simulator ({m}; a bug: please report it); the simulation \
                 is unchanged"
            ))
        },
        f,
    )
}

/// A panic inside the engine is a bug, and its state is not trusted after one: the simulation is
/// closed and the caller gets a SimulationError saying so, never a PanicException (a
/// BaseException that `except Exception` lets through, issue 13).
fn closed_on_panic<T>(st: &mut State, r: std::thread::Result<T>) -> PyResult<T> {
    r.map_err(|payload| {
        *st = State::Poisoned;
        let what = panic_message(&*payload);
        SimulationInternalError::new_err(format!(
            "internal error in the simulator ({what}; a bug: please report it); this simulation \
             is closed, create a new one"
        ))
    })
}

/// A simulation. Build the topology first (nodes, links, or `dumbbell`); adding the first flow
/// fixes it and computes routes.
#[pyclass(name = "Simulation", module = "macroflow._native")]
pub struct PySimulation {
    seed: u64,
    state: Mutex<State>,
}

/// The largest video trace file read (a frame size per line: millions of frames).
const MAX_TRACE_FILE_BYTES: u64 = 64 << 20;

/// Events run between two checks for Ctrl-C (a few milliseconds of work).
const EVENTS_PER_CHUNK: u64 = 1 << 20;

impl PySimulation {
    /// The simulation's state, or a clear error: while another thread is inside `run` the state
    /// is busy (waiting for it here would hold the GIL and freeze every Python thread, issue 13),
    /// and after a panic inside the engine (a bug) the state is not trusted again.
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(std::sync::TryLockError::WouldBlock) => Err(SimulationError::new_err(
                "the simulation is in use by another thread (one call at a time per Simulation)",
            )),
            Err(std::sync::TryLockError::Poisoned(_)) => Err(SimulationError::new_err(
                "the simulation is unusable after an internal error (a panic in the engine, a bug: \
                 please report it); create a new Simulation",
            )),
        }
    }

    /// Applies a topology change. A builder such as `dumbbell` may fail halfway (a node name in
    /// use, a bad queue on its third link); the network is then rebuilt from the changes that
    /// succeeded, so a failed call leaves it as it was (same nodes, links and ids).
    fn with_net<T>(
        &self,
        f: impl Fn(&mut Network) -> Result<T, SimError> + Send + 'static,
    ) -> PyResult<T> {
        let mut st = self.lock()?;
        match &mut *st {
            State::Building(b) => {
                let r =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                        || match f(&mut b.net) {
                            Ok(v) => {
                                b.ops.push(Box::new(move |n| f(n).map(|_| ())));
                                Ok(v)
                            }
                            Err(e) => {
                                let mut net = Network::default();
                                for op in &b.ops {
                                    op(&mut net).expect("a change that succeeded succeeds again");
                                }
                                b.net = net;
                                Err(sim_err(e))
                            }
                        },
                    ));
                closed_on_panic(&mut st, r)?
            }
            State::Poisoned => Err(SimulationError::new_err(
                "the simulation is unusable after an earlier failure",
            )),
            State::Running(_) => Err(SimulationError::new_err(
                "the topology is fixed once flows are added or the simulation has run",
            )),
        }
    }

    fn with_sim<T>(&self, f: impl FnOnce(&mut Sim) -> Result<T, SimError>) -> PyResult<T> {
        let mut st = self.lock()?;
        if let State::Building(_) = &*st {
            let State::Building(b) = std::mem::replace(&mut *st, State::Poisoned) else {
                unreachable!()
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut net = b.net;
                net.compute_routes();
                Sim::new(net, self.seed)
            }));
            *st = State::Running(Box::new(closed_on_panic(&mut st, r)?.map_err(sim_err)?));
        }
        match &mut *st {
            State::Running(sim) => {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(sim)));
                closed_on_panic(&mut st, r)?.map_err(sim_err)
            }
            _ => Err(SimulationError::new_err(
                "the simulation is unusable after an earlier failure",
            )),
        }
    }
}

#[pymethods]
impl PySimulation {
    #[new]
    #[pyo3(signature = (seed=1))]
    fn new(seed: u64) -> Self {
        PySimulation {
            seed,
            state: Mutex::new(State::Building(Builder {
                net: Network::default(),
                ops: Vec::new(),
            })),
        }
    }

    fn add_node(&self, name: &str) -> PyResult<u32> {
        let name = name.to_string();
        self.with_net(move |n| n.add_node(&name).map(|id| id.0))
    }

    /// A one-way link; returns its id. The queue is a drop-tail of `queue_pkts` (or
    /// `queue_bytes`, default 1000 packets) with optional random loss, or any discipline given
    /// as a `queue` spec (read by `sim::net::queue::QueueSpec`; not both). `jitter_s`: each
    /// packet's propagation is longer by a uniform draw in [0, jitter_s], order kept (at most 1 s).
    #[pyo3(signature = (src, dst, rate_bps, delay_s, queue_pkts=None, queue_bytes=None, random_drop=0.0, queue=None, jitter_s=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn add_link(
        &self,
        src: u32,
        dst: u32,
        rate_bps: f64,
        delay_s: f64,
        queue_pkts: Option<usize>,
        queue_bytes: Option<u64>,
        random_drop: f64,
        queue: Option<Bound<'_, PyDict>>,
        jitter_s: f64,
    ) -> PyResult<u32> {
        outside_the_engine(|| {
            let rate_bps = rate("rate_bps", rate_bps)?;
            let cfg = LinkConfig {
                rate_bps,
                delay: secs("delay_s", delay_s)?,
                queue: link_queue(
                    "queue",
                    queue_pkts,
                    queue_bytes,
                    random_drop,
                    queue.as_ref(),
                    rate_bps,
                )?,
                jitter: secs("jitter_s", jitter_s)?,
            };
            self.with_net(move |n| n.add_link(NodeId(src), NodeId(dst), &cfg).map(|l| l.0))
        })
    }

    /// The dissertation's dumbbell by default (10 Mbit/s, 48 ms, 83-packet queue; 1 Gbit/s, 1 ms
    /// access). Returns {"senders", "receivers", "bottleneck", "reverse"}.
    /// `queue` (a spec, see `add_link`) replaces the bottleneck's drop-tail of `queue_pkts`.
    /// `access_jitter_s`: the hosts' sending jitter (see `add_link`'s `jitter_s`), on each host's
    /// link to its router.
    #[pyo3(signature = (pairs, bottleneck_rate_bps=10e6, bottleneck_delay_s=0.048, queue_pkts=None, access_rate_bps=1e9, access_delays_s=None, random_drop=0.0, queue=None, access_jitter_s=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn dumbbell<'py>(
        &self,
        py: Python<'py>,
        pairs: usize,
        bottleneck_rate_bps: f64,
        bottleneck_delay_s: f64,
        queue_pkts: Option<usize>,
        access_rate_bps: f64,
        access_delays_s: Option<Vec<f64>>,
        random_drop: f64,
        queue: Option<Bound<'py, PyDict>>,
        access_jitter_s: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        outside_the_engine(|| {
            sim::net::topology::check_pairs(pairs).map_err(sim_err)?;
            let bottleneck_rate = rate("bottleneck_rate_bps", bottleneck_rate_bps)?;
            let queue_pkts = if queue.is_none() {
                Some(queue_pkts.unwrap_or(83))
            } else {
                queue_pkts
            };
            let bottleneck_queue = link_queue(
                "queue",
                queue_pkts,
                None,
                random_drop,
                queue.as_ref(),
                bottleneck_rate,
            )?;
            let delays = access_delays_s
                .unwrap_or_else(|| vec![0.001; pairs])
                .into_iter()
                .map(|d| secs("access_delays_s", d))
                .collect::<PyResult<Vec<_>>>()?;
            let cfg = DumbbellConfig {
                pairs,
                bottleneck: LinkConfig {
                    rate_bps: bottleneck_rate,
                    delay: secs("bottleneck_delay_s", bottleneck_delay_s)?,
                    queue: bottleneck_queue,
                    jitter: Duration::ZERO,
                },
                access_rate_bps: rate("access_rate_bps", access_rate_bps)?,
                access_delays: delays,
                access_queue: QueueConfig::drop_tail_pkts(10_000),
                access_jitter: secs("access_jitter_s", access_jitter_s)?,
            };
            let d = self.with_net(move |n| dumbbell(n, &cfg))?;
            let out = PyDict::new(py);
            out.set_item("senders", d.senders.iter().map(|n| n.0).collect::<Vec<_>>())?;
            out.set_item(
                "receivers",
                d.receivers.iter().map(|n| n.0).collect::<Vec<_>>(),
            )?;
            out.set_item("bottleneck", d.bottleneck.0)?;
            out.set_item("reverse", d.reverse.0)?;
            Ok(out)
        })
    }

    /// A parking lot: routers R0..R{hops} in a chain of `hops` links (each direction) with host
    /// H{i} on router R{i}. Returns {"routers", "hosts", "hops"} (`hops`: the forward links
    /// R{i} -> R{i+1}). `queue` (a spec, see `add_link`) replaces the hops' drop-tail.
    /// `access_jitter_s`: the hosts' sending jitter, on each host's link to its router.
    #[pyo3(signature = (hops, rate_bps=10e6, delay_s=0.01, queue_pkts=None, access_rate_bps=1e9, access_delay_s=0.001, queue=None, access_jitter_s=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn parking_lot<'py>(
        &self,
        py: Python<'py>,
        hops: usize,
        rate_bps: f64,
        delay_s: f64,
        queue_pkts: Option<usize>,
        access_rate_bps: f64,
        access_delay_s: f64,
        queue: Option<Bound<'py, PyDict>>,
        access_jitter_s: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        outside_the_engine(|| {
            let rate_bps = rate("rate_bps", rate_bps)?;
            let link = LinkConfig {
                rate_bps,
                delay: secs("delay_s", delay_s)?,
                queue: link_queue("queue", queue_pkts, None, 0.0, queue.as_ref(), rate_bps)?,
                jitter: Duration::ZERO,
            };
            let access = LinkConfig {
                rate_bps: rate("access_rate_bps", access_rate_bps)?,
                delay: secs("access_delay_s", access_delay_s)?,
                queue: QueueConfig::drop_tail_pkts(10_000),
                jitter: secs("access_jitter_s", access_jitter_s)?,
            };
            let p = self.with_net(move |n| parking_lot(n, hops, &link, &access))?;
            let out = PyDict::new(py);
            out.set_item("routers", p.routers.iter().map(|n| n.0).collect::<Vec<_>>())?;
            out.set_item("hosts", p.hosts.iter().map(|n| n.0).collect::<Vec<_>>())?;
            out.set_item("hops", p.hops.iter().map(|l| l.0).collect::<Vec<_>>())?;
            Ok(out)
        })
    }

    /// Adds a TCP flow from node `src` to node `dst`; returns its id.
    #[pyo3(signature = (src, dst, start_s=0.0, size_bytes=None, cc="newreno", mss=1448, initial_cwnd_pkts=10.0, delayed_ack=true, sack=true, min_rto_s=0.2, dscp=0))]
    #[allow(clippy::too_many_arguments)]
    fn add_tcp_flow(
        &self,
        src: u32,
        dst: u32,
        start_s: f64,
        size_bytes: Option<u64>,
        cc: &str,
        mss: u32,
        initial_cwnd_pkts: f64,
        delayed_ack: bool,
        sack: bool,
        min_rto_s: f64,
        dscp: u8,
    ) -> PyResult<u32> {
        outside_the_engine(|| {
            let kind = parse_cc(cc)?;
            let tcp = TcpConfig {
                mss,
                initial_cwnd_pkts,
                delayed_ack,
                sack,
                min_rto: secs("min_rto_s", min_rto_s)?,
                ..TcpConfig::default()
            };
            let start = Instant::from_nanos(secs("start_s", start_s)?.as_nanos());
            let cfg = TcpFlowConfig {
                src: NodeId(src),
                dst: NodeId(dst),
                start,
                size_bytes,
                cc: kind,
                tcp,
                dscp,
            };
            self.with_sim(|s| s.add_tcp_flow(cfg))
        })
    }

    /// A UDP flow: `kind` "cbr" (rate_bps, pkt_bytes) or "self_similar" (the cross traffic of
    /// seed 003 sec. 9.3, scaled to `load_bps` if given), sending from `start_s` until `end_s`
    /// (none: the end of the run); returns its id among UDP flows.
    #[pyo3(signature = (src, dst, kind="cbr", rate_bps=None, pkt_bytes=1000, load_bps=None, start_s=0.0, dscp=0, end_s=None))]
    #[allow(clippy::too_many_arguments)]
    fn add_udp_flow(
        &self,
        src: u32,
        dst: u32,
        kind: &str,
        rate_bps: Option<f64>,
        pkt_bytes: u32,
        load_bps: Option<f64>,
        start_s: f64,
        dscp: u8,
        end_s: Option<f64>,
    ) -> PyResult<u32> {
        outside_the_engine(|| {
            let source = match kind {
                "cbr" => {
                    let rate_bps = rate_bps
                        .ok_or_else(|| SimulationError::new_err("a cbr flow needs rate_bps"))?;
                    SourceKind::Cbr(CbrConfig {
                        rate_bps,
                        pkt_bytes,
                    })
                }
                "self_similar" => SourceKind::SelfSimilar(match load_bps {
                    Some(l) => SelfSimilarConfig::with_load(l),
                    None => SelfSimilarConfig::default(),
                }),
                other => return Err(unknown_name("kind", other, ["cbr", "self_similar"])),
            };
            let start = Instant::from_nanos(secs("start_s", start_s)?.as_nanos());
            let end = match end_s {
                Some(e) => Some(Instant::from_nanos(secs("end_s", e)?.as_nanos())),
                None => None,
            };
            let cfg = UdpFlowConfig {
                src: NodeId(src),
                dst: NodeId(dst),
                start,
                end,
                source: SourceConfig::new(source),
                dscp,
            };
            self.with_sim(|s| s.add_udp_flow(cfg))
        })
    }

    /// Short TCP flows with Poisson arrivals and Pareto sizes between the given (src, dst) node
    /// pairs (standing in for TMIX traffic); returns the flows' ids.
    #[pyo3(signature = (pairs, load_bps, mean_size_bytes=50e3, start_s=0.0, end_s=60.0, pareto_shape=1.2, cc="newreno"))]
    #[allow(clippy::too_many_arguments)]
    fn add_web_workload(
        &self,
        pairs: Vec<(u32, u32)>,
        load_bps: f64,
        mean_size_bytes: f64,
        start_s: f64,
        end_s: f64,
        pareto_shape: f64,
        cc: &str,
    ) -> PyResult<Vec<u32>> {
        outside_the_engine(|| {
            let kind = parse_cc(cc)?;
            let web = WebWorkload {
                load_bps,
                mean_size_bytes,
                pareto_shape,
                pairs: pairs.len(),
                ..WebWorkload::default()
            };
            let start = Instant::from_nanos(secs("start_s", start_s)?.as_nanos());
            let end = Instant::from_nanos(secs("end_s", end_s)?.as_nanos());
            let node_pairs: Vec<(NodeId, NodeId)> =
                pairs.iter().map(|&(a, b)| (NodeId(a), NodeId(b))).collect();
            let Some(&(a, b)) = node_pairs.first() else {
                return Err(SimulationError::new_err(
                    "add_web_workload needs at least one (src, dst) pair",
                ));
            };
            let mut tcp = TcpFlowConfig::bulk(a, b);
            tcp.cc = kind;
            self.with_sim(|s| s.add_web_workload(&web, &node_pairs, start, end, tcp))
        })
    }

    /// A rate-controlled media flow: `controller` by name (see `RATE_CONTROLLERS`), `source`
    /// "greedy", "app_limited" (at `rate_bps`) or "video" (frames of `trace_file`, one size in
    /// bytes per line, or a synthetic trace of `rate_bps` with a 30-frame GOP), at `fps`; `pauses`
    /// are (start_s, end_s) intervals without data. Returns its id among media flows.
    #[pyo3(signature = (src, dst, controller="nada", source="greedy", rate_bps=None, trace_file=None, fps=30.0, pauses=Vec::new(), packet_bytes=1200, start_s=0.0, dscp=0))]
    #[allow(clippy::too_many_arguments)]
    fn add_media_flow(
        &self,
        src: u32,
        dst: u32,
        controller: &str,
        source: &str,
        rate_bps: Option<f64>,
        trace_file: Option<std::path::PathBuf>,
        fps: f64,
        pauses: Vec<(f64, f64)>,
        packet_bytes: u32,
        start_s: f64,
        dscp: u8,
    ) -> PyResult<u32> {
        outside_the_engine(|| {
            let (snd, rcv) =
                sim::transport::controllers::build(controller, packet_bytes, "media_flow")
                    .map_err(sim_err)?;
            let src_kind = match (source, rate_bps, trace_file) {
                ("greedy", _, _) => MediaSource::Greedy,
                ("app_limited", Some(r), _) => MediaSource::AppLimited { rate_bps: r },
                ("app_limited", None, _) => {
                    return Err(SimulationError::new_err(
                        "an app_limited source needs rate_bps",
                    ))
                }
                ("video", _, Some(path)) => {
                    // A regular file of bounded size: /dev/zero read until memory ran out, a FIFO
                    // blocked with the GIL held (issue 13).
                    let meta = std::fs::metadata(&path).map_err(|e| {
                        SimulationError::new_err(format!("trace_file {}: {e}", path.display()))
                    })?;
                    if !meta.is_file() || meta.len() > MAX_TRACE_FILE_BYTES {
                        return Err(SimulationError::new_err(format!(
                            "trace_file {}: not a regular file of at most {MAX_TRACE_FILE_BYTES} bytes",
                            path.display()
                        )));
                    }
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        SimulationError::new_err(format!("trace_file {}: {e}", path.display()))
                    })?;
                    MediaSource::Video(
                        VideoTrace::parse(&text, fps, "trace_file").map_err(sim_err)?,
                    )
                }
                ("video", Some(r), None) => {
                    sim::media::check_fps("fps", fps).map_err(sim_err)?;
                    let trace = self.with_sim(|s| {
                        synthetic_video(r, fps, 30, 5.0, 0.2, (fps * 60.0) as usize, s.rng())
                    })?;
                    MediaSource::Video(trace)
                }
                ("video", None, None) => {
                    return Err(SimulationError::new_err(
                        "a video source needs trace_file or rate_bps",
                    ))
                }
                (other, _, _) => {
                    return Err(unknown_name(
                        "source",
                        other,
                        ["greedy", "app_limited", "video"],
                    ))
                }
            };
            let at = |t: f64, what: &str| -> PyResult<Instant> {
                Ok(Instant::from_nanos(secs(what, t)?.as_nanos()))
            };
            let pauses = pauses
                .into_iter()
                .map(|(a, b)| Ok((at(a, "pauses")?, at(b, "pauses")?)))
                .collect::<PyResult<Vec<_>>>()?;
            let cfg = MediaFlowConfig {
                src: NodeId(src),
                dst: NodeId(dst),
                start: at(start_s, "start_s")?,
                packet_bytes,
                source: src_kind,
                pauses,
                dscp,
            };
            self.with_sim(|s| s.add_media_flow(cfg, snd, rcv))
        })
    }

    /// An FSE flow group running `algorithm` (see `FSE_ALGORITHMS`); returns its id.
    fn add_fse_group(&self, algorithm: &str) -> PyResult<usize> {
        let a = coupling::fse::Algorithm::from_name(algorithm).ok_or_else(|| {
            unknown_name(
                "algorithm",
                algorithm,
                coupling::fse::Algorithm::ALL.map(|a| a.name()),
            )
        })?;
        self.with_sim(|s| Ok(s.add_fse_group(a)))
    }

    /// Couples media flow `flow` to FSE group `group` with `priority`; its signalling with the FSE
    /// takes a delay uniform in [delay_min_s, delay_max_s] (seed 003 Fig. 6.11).
    #[pyo3(signature = (flow, group, priority, delay_min_s=0.0, delay_max_s=0.0))]
    fn couple_media(
        &self,
        flow: u32,
        group: usize,
        priority: f64,
        delay_min_s: f64,
        delay_max_s: f64,
    ) -> PyResult<()> {
        let c = fse_coupling(group, priority, delay_min_s, delay_max_s)?;
        self.with_sim(|s| s.couple_media(flow, c))
    }

    /// Observes media flow `flow` (not started yet) with measured group `group`'s detectors:
    /// detection only, so the group must have `respond=False`; a group measures TCP flows or
    /// media flows, not both (issue 20: RFC 8382 was evaluated on RTP media flows).
    fn measure_media(&self, flow: u32, group: usize) -> PyResult<()> {
        self.with_sim(|s| s.measure_media(flow, group))
    }

    /// Couples TCP flow `flow` (not started yet) to FSE group `group` with `priority` (seed 003
    /// sec. 6.3.1, Fig. 6.3): once per round trip it reports cwnd * MSS / SRTT and sets its
    /// window from the rate the FSE answers; its signalling with the FSE takes a delay uniform in
    /// [delay_min_s, delay_max_s]. A group couples TCP flows or media flows, not both.
    #[pyo3(signature = (flow, group, priority, delay_min_s=0.0, delay_max_s=0.0))]
    fn couple_tcp_fse(
        &self,
        flow: u32,
        group: usize,
        priority: f64,
        delay_min_s: f64,
        delay_max_s: f64,
    ) -> PyResult<()> {
        let c = fse_coupling(group, priority, delay_min_s, delay_max_s)?;
        self.with_sim(|s| s.couple_tcp_fse(flow, c))
    }

    /// A TCP coupling group running `kind` (one of `TCP_COUPLER_KINDS`); returns its id.
    /// `max_burst_pkts` is how many segments beyond its flight
    /// an answer may let a connection send at once (0: never more than its own controller would;
    /// seed 003's ctrlTCP without ack-clocking handed a joiner its share as one burst).
    #[pyo3(signature = (kind, max_burst_pkts=0.0))]
    fn add_coupling_group(&self, kind: &str, max_burst_pkts: f64) -> PyResult<usize> {
        let k = CouplerKind::from_name(kind)
            .ok_or_else(|| unknown_name("kind", kind, CouplerKind::names()))?;
        self.with_sim(|s| {
            check_max_burst(max_burst_pkts)?;
            let g = s.add_coupling_group(k);
            s.set_max_burst_pkts(g, max_burst_pkts)?;
            Ok(g)
        })
    }

    /// A measured TCP coupling group (issue 20): its flows start in one macroflow running
    /// `coupler`, false-sharing detectors (seed 000 sec. 4.1) watch every pair, and unless
    /// `respond` is false the response (sec. 5) splits a pair on `test`'s "no share" and merges it
    /// on "share". `confidence`: the correlation tests' interval level (Fig. 11);
    /// `memory_expiry_s`: how long a detection keeps new flows unshared. Returns its id.
    #[pyo3(signature = (coupler="ccc", test="out_of_order", confidence=0.9, respond=true, memory_expiry_s=600.0, max_burst_pkts=0.0))]
    fn add_measured_group(
        &self,
        coupler: &str,
        test: &str,
        confidence: f64,
        respond: bool,
        memory_expiry_s: f64,
        max_burst_pkts: f64,
    ) -> PyResult<usize> {
        let k = CouplerKind::from_name(coupler)
            .ok_or_else(|| unknown_name("coupler", coupler, CouplerKind::names()))?;
        let t = DetectorTest::from_name(test).ok_or_else(|| {
            unknown_name(
                "test",
                test,
                DetectorTest::ALL.into_iter().map(DetectorTest::name),
            )
        })?;
        let expiry = secs("memory_expiry_s", memory_expiry_s)?;
        let mut cfg = MeasuredConfig::new(k);
        cfg.detector = cfg.detector.with_confidence(confidence);
        cfg.test = t;
        cfg.respond = respond;
        cfg.sharing.memory_expiry = expiry;
        self.with_sim(|s| {
            check_max_burst(max_burst_pkts)?;
            let g = s.add_measured_group(cfg)?;
            s.set_max_burst_pkts(g, max_burst_pkts)?;
            Ok(g)
        })
    }

    fn couple(&self, flow: u32, group: usize, priority: f64) -> PyResult<()> {
        self.with_sim(|s| s.couple(flow, group, priority))
    }

    fn set_priority_at(&self, t_s: f64, flow: u32, priority: f64) -> PyResult<()> {
        let at = Instant::from_nanos(secs("t_s", t_s)?.as_nanos());
        self.with_sim(|s| s.schedule_priority(at, flow, priority))
    }

    /// Changes media flow `flow`'s priority in its FSE group at `t_s` (seed 003 Fig. 5.13):
    /// active algorithms redistribute at once, passive ones at the flow's next UPDATE.
    fn set_media_priority_at(&self, t_s: f64, flow: u32, priority: f64) -> PyResult<()> {
        let at = Instant::from_nanos(secs("t_s", t_s)?.as_nanos());
        self.with_sim(|s| s.schedule_media_priority(at, flow, priority))
    }

    /// Records every flow's window and the given links' queues every `interval_s`.
    #[pyo3(signature = (interval_s, links=Vec::new()))]
    fn sample_every(&self, interval_s: f64, links: Vec<u32>) -> PyResult<()> {
        let iv = secs("interval_s", interval_s)?;
        let links: Vec<LinkId> = links.into_iter().map(LinkId).collect();
        self.with_sim(|s| s.sample_every(iv, &links))
    }

    /// Captures every packet `link` transmits into the pcap file at `path` (headers only,
    /// nanosecond timestamps, raw IPv4). The file is complete after `flush_captures()`.
    fn capture(&self, link: u32, path: std::path::PathBuf) -> PyResult<()> {
        outside_the_engine(|| {
            let file = std::fs::File::create(&path).map_err(|e| {
                SimulationError::new_err(format!("capture: cannot create {}: {e}", path.display()))
            })?;
            self.with_sim(|s| s.capture(LinkId(link), Box::new(std::io::BufWriter::new(file))))
        })
    }

    fn flush_captures(&self) -> PyResult<()> {
        self.with_sim(|s| s.flush_captures())
    }

    /// Runs until `until_s` simulated seconds, without holding the GIL, in chunks of events
    /// between which Ctrl-C (KeyboardInterrupt) stops it; the simulation stays usable, at the
    /// time it had reached.
    fn run(&self, py: Python<'_>, until_s: f64) -> PyResult<()> {
        let end = Instant::from_nanos(secs("until_s", until_s)?.as_nanos());
        self.with_sim(|_| Ok(()))?;
        loop {
            let done = py.detach(|| -> PyResult<bool> {
                // Blocking is safe here (the GIL is released): a thread that polled between two
                // chunks must not make this run fail.
                let mut st = self.state.lock().map_err(|_| {
                    SimulationError::new_err("the simulation is unusable after an internal error (a panic in the engine)")
                })?;
                match &mut *st {
                    State::Running(sim) => {
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            sim.run_some(end, EVENTS_PER_CHUNK)
                        }));
                        closed_on_panic(&mut st, r)
                    }
                    _ => Ok(true),
                }
            })?;
            if done {
                return Ok(());
            }
            if let Some(t) = self.with_sim(|s| Ok(s.spinning_at()))? {
                // A bug: handlers scheduling each other at one instant. Closed, as after a panic.
                *self.lock()? = State::Poisoned;
                return Err(SimulationInternalError::new_err(format!(
                    "internal error in the simulator (the clock stood still at {} s for {} events: \
                     a spin, a bug: please report it); this simulation is closed, create a new one",
                    t.as_secs_f64(),
                    sim::engine::MAX_EVENTS_AT_ONE_INSTANT
                )));
            }
            py.check_signals()?;
        }
    }

    /// For tests only: panics inside the engine's lock (or, `building`, inside a topology
    /// change), as a bug would, to show that it becomes a SimulationInternalError and closes this
    /// simulation; `outside`: in a method's work outside the lock, which leaves it usable.
    #[pyo3(signature = (building=false, outside=false))]
    fn _panic_for_test(&self, building: bool, outside: bool) -> PyResult<()> {
        if outside {
            outside_the_engine(|| panic!("a deliberate panic"))
        } else if building {
            self.with_net(|_| -> Result<(), SimError> { panic!("a deliberate panic") })
        } else {
            self.with_sim(|_| -> Result<(), SimError> { panic!("a deliberate panic") })
        }
    }

    #[getter]
    fn now_s(&self) -> PyResult<f64> {
        let st = self.lock()?;
        match &*st {
            State::Running(s) => Ok(s.now().as_secs_f64()),
            State::Building(_) => Ok(0.0),
            State::Poisoned => Err(SimulationError::new_err(
                "the simulation is unusable after an earlier failure",
            )),
        }
    }

    /// Results: {"flows", "udp_flows", "media_flows", "links", "flow_samples", "queue_samples",
    /// "media_samples"}, each a `pyarrow.RecordBatch` with its table's fixed schema
    /// (`tables.rs`), handed over without a copy; and {"packets", "events", "duration_s",
    /// "sampling_stopped_at_s", "coupling_errors"}.
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        outside_the_engine(|| {
            // The time series are read in place, not copied first (a big result was held twice),
            // with the GIL released: millions of rows take a while.
            let (r, batches) = py.detach(|| {
                self.with_sim(|s| {
                    let r = s.summaries();
                    let batches = tables::batches(&r, s.time_series());
                    Ok((r, batches))
                })
            })?;
            // The schemas are fixed, so this is a bug if it happens.
            let batches = batches.map_err(|e| {
                SimulationInternalError::new_err(format!(
                    "internal error building the result tables ({e}; a bug: please report it)"
                ))
            })?;
            let out = PyDict::new(py);
            for (name, batch) in batches {
                out.set_item(name, tables::to_pyarrow(py, batch)?)?;
            }
            let pk = PyDict::new(py);
            pk.set_item("created", r.packets.created)?;
            pk.set_item("delivered", r.packets.delivered)?;
            pk.set_item("dropped", r.packets.dropped)?;
            pk.set_item("in_flight", r.packets.in_flight)?;
            out.set_item("packets", pk)?;
            out.set_item("events", r.events)?;
            out.set_item("sampling_stopped_at_s", r.sampling_stopped_at_s)?;
            let ce = PyDict::new(py);
            let e = r.coupling_errors;
            for (k, v) in [
                ("register", e.register),
                ("update", e.update),
                ("on_ack", e.on_ack),
                ("leave", e.leave),
                ("set_priority", e.set_priority),
                ("fse", e.fse),
            ] {
                ce.set_item(k, v)?;
            }
            out.set_item("coupling_errors", ce)?;
            out.set_item("duration_s", r.duration_s)?;
            Ok(out)
        })
    }
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add(
        "SimulationInternalError",
        m.py().get_type::<SimulationInternalError>(),
    )?;
    m.add_class::<PySimulation>()
}
