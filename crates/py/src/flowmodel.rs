//! Bindings of the flow-level model (`crates/flowsim`): a `FlowModel` holds a network and its
//! routed flows; its methods run clamp, the brick-wall flow, the sender models and loss-load, and
//! return plain lists and dicts that `macroflow.flowsim` turns into arrays and tables.

use crate::convert::catch_panic;
use flowsim::brickwall::Brickwall;
use flowsim::senders::{self, SenderModel};
use flowsim::{account, Accounting, Error, FixedPoint, Flows, LinkId, Network};
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::create_exception!(
    macroflow,
    FlowModelError,
    pyo3::exceptions::PyValueError,
    "A flow-level model was built or run with invalid input (bad capacity, self-loop, no path, disconnected graph, ...); the message names it."
);

pyo3::create_exception!(
    macroflow,
    FlowModelInternalError,
    FlowModelError,
    "A bug in the flow-level model (a panic inside the crate, caught). The model is immutable, so it is unchanged and still usable. Please report it."
);

/// Runs a method's body; a panic in it (a bug) is a FlowModelInternalError, never a
/// PanicException (issue 13). A `FlowModel` never changes after construction, so it stays usable.
fn internal<R>(f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    catch_panic(
        |m| {
            FlowModelInternalError::new_err(format!(
                "internal error in the flow model ({m}; a bug: please report it); a model is \
                 never changed by a call, so it is still usable"
            ))
        },
        f,
    )
}

fn err(e: Error) -> PyErr {
    FlowModelError::new_err(e.to_string())
}

/// A network with routed flows. Immutable once built: a failed construction raises and builds
/// nothing.
#[pyclass(name = "FlowModel", module = "macroflow._native", frozen)]
pub struct PyFlowModel {
    net: Network,
    flows: Flows,
}

fn demands_or_inf(n: usize, demands: Option<Vec<f64>>) -> Vec<f64> {
    demands.unwrap_or_else(|| vec![f64::INFINITY; n])
}

fn model_from(name: &str, alpha: f64) -> PyResult<SenderModel> {
    Ok(match name {
        "naive" => SenderModel::NaiveFireHose,
        "full_balanced" => SenderModel::FullBalanced,
        "full_share" => SenderModel::FullShare,
        "naive_ratio" => SenderModel::NaiveRatio { alpha },
        "limited_ratio" => SenderModel::LimitedRatio { alpha },
        other => {
            return Err(FlowModelError::new_err(format!(
                "unknown sender model {other:?}: expected one of {}",
                SENDER_MODELS.join(", ")
            )))
        }
    })
}

pub const SENDER_MODELS: [&str; 5] = [
    "naive",
    "full_balanced",
    "full_share",
    "naive_ratio",
    "limited_ratio",
];

impl PyFlowModel {
    fn result<'py>(
        &self,
        py: Python<'py>,
        fp: &FixedPoint,
        acc: &Accounting,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("demand", fp.demands.clone())?;
        d.set_item("goodput", fp.state.goodput.clone())?;
        d.set_item("flow_dead", acc.flow_dead.clone())?;
        d.set_item("flow_zombie", acc.flow_zombie.clone())?;
        d.set_item("flow_zombie_suffered", acc.flow_zombie_suffered.clone())?;
        d.set_item("link_dropped", acc.link_dropped.clone())?;
        d.set_item("link_dead", acc.link_dead.clone())?;
        d.set_item("link_zombie", acc.link_zombie.clone())?;
        d.set_item("link_utilization", acc.link_utilization.clone())?;
        d.set_item("total_goodput", acc.goodput)?;
        d.set_item("total_dead", acc.dead)?;
        d.set_item("total_zombie", acc.zombie)?;
        d.set_item("total_dropped", acc.dropped)?;
        d.set_item("jain", acc.jain)?;
        d.set_item("iterations", fp.iterations)?;
        d.set_item("converged", fp.converged)?;
        d.set_item("delta", fp.delta)?;
        Ok(d)
    }

    /// Runs `f` on the model's brick-wall structure without the GIL, accounts its state against
    /// `mmf` (clamp's rates when not given) and returns the result dict.
    fn run<'py>(
        &self,
        py: Python<'py>,
        mmf: Option<Vec<f64>>,
        f: impl FnOnce(&Brickwall<'_>) -> Result<FixedPoint, Error> + Send,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mmf = self.mmf_or_clamp(mmf)?;
        let (fp, acc) = py
            .detach(|| {
                let bw = Brickwall::new(&self.net, &self.flows);
                let fp = f(&bw)?;
                let acc = account(&self.net, &self.flows, &fp.state, &mmf);
                Ok((fp, acc))
            })
            .map_err(err)?;
        self.result(py, &fp, &acc)
    }

    fn mmf_or_clamp(&self, mmf: Option<Vec<f64>>) -> PyResult<Vec<f64>> {
        match mmf {
            Some(m) if m.len() != self.flows.len() => Err(err(Error::Length {
                what: "mmf",
                expected: self.flows.len(),
                got: m.len(),
            })),
            // A reference rate is finite and >= 0 (NaN or negative made every ratio meaningless).
            Some(m) => match m.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                Some(&bad) => Err(err(Error::BadParameter {
                    name: "mmf",
                    value: bad,
                    expected: "finite rates >= 0",
                })),
                None => Ok(m),
            },
            None => flowsim::clamp(
                &self.net,
                &self.flows,
                &vec![f64::INFINITY; self.flows.len()],
            )
            .map_err(err),
        }
    }
}

#[pymethods]
impl PyFlowModel {
    /// `links`: `(from, to, capacity)`; nodes are created by name as they appear (and `nodes` adds
    /// any without links, in order first). `flows`: `(source, sink)` routed on shortest-hop paths,
    /// or on `routes` (one list of node names per flow, source first) when given.
    /// `require_connected` refuses a graph that is not one weakly connected piece.
    #[new]
    #[pyo3(signature = (links, flows, routes=None, nodes=None, require_connected=true))]
    fn new(
        py: Python<'_>,
        links: Vec<(String, String, f64)>,
        flows: Vec<(String, String)>,
        routes: Option<Vec<Vec<String>>>,
        nodes: Option<Vec<String>>,
        require_connected: bool,
    ) -> PyResult<Self> {
        internal(|| {
            py.detach(|| {
                let mut net = Network::new();
                for n in nodes.iter().flatten() {
                    net.add_node(n).map_err(err)?;
                }
                let node = |net: &mut Network, name: &str| match net.node(name) {
                    Ok(id) => Ok(id),
                    Err(_) => net.add_node(name),
                };
                for (a, b, c) in &links {
                    let a = node(&mut net, a).map_err(err)?;
                    let b = node(&mut net, b).map_err(err)?;
                    net.add_link(a, b, *c).map_err(err)?;
                }
                if require_connected {
                    net.check_connected().map_err(err)?;
                }
                let flows = match routes {
                    None => {
                        let pairs = flows
                            .iter()
                            .map(|(s, t)| Ok((net.node(s)?, net.node(t)?)))
                            .collect::<Result<Vec<_>, Error>>()
                            .map_err(err)?;
                        Flows::shortest(&net, &pairs).map_err(err)?
                    }
                    Some(routes) => {
                        if routes.len() != flows.len() {
                            return Err(err(Error::Length {
                                what: "routes",
                                expected: flows.len(),
                                got: routes.len(),
                            }));
                        }
                        let mut rs = Vec::with_capacity(routes.len());
                        for (i, ((s, t), path)) in flows.iter().zip(&routes).enumerate() {
                            let bad = |why: String| err(Error::BadRoute { flow: i, why });
                            if path.first() != Some(s) {
                                return Err(bad(format!("does not start at the source {s:?}")));
                            }
                            let mut ls: Vec<LinkId> = Vec::with_capacity(path.len());
                            for w in path.windows(2) {
                                let (a, b) =
                                    (net.node(&w[0]).map_err(err)?, net.node(&w[1]).map_err(err)?);
                                ls.push(net.link_between(a, b).ok_or_else(|| {
                                    bad(format!("no link {:?} -> {:?}", w[0], w[1]))
                                })?);
                            }
                            rs.push((net.node(s).map_err(err)?, net.node(t).map_err(err)?, ls));
                        }
                        Flows::with_routes(&net, &rs).map_err(err)?
                    }
                };
                Ok(PyFlowModel { net, flows })
            })
        })
    }

    #[getter]
    fn n_flows(&self) -> usize {
        self.flows.len()
    }

    #[getter]
    fn n_links(&self) -> usize {
        self.net.link_count()
    }

    #[getter]
    fn n_nodes(&self) -> usize {
        self.net.node_count()
    }

    /// `(from, to, capacity)` of every link, in link order.
    fn links(&self) -> PyResult<Vec<(String, String, f64)>> {
        internal(|| {
            Ok(self
                .net
                .links()
                .iter()
                .map(|l| {
                    (
                        self.net.name(l.from).to_string(),
                        self.net.name(l.to).to_string(),
                        l.capacity,
                    )
                })
                .collect())
        })
    }

    /// Node names, in index order.
    fn nodes(&self) -> PyResult<Vec<String>> {
        internal(|| {
            Ok((0..self.net.node_count() as u32)
                .map(|n| self.net.name(n).to_string())
                .collect())
        })
    }

    /// The link indices of flow `i`'s route.
    fn route(&self, i: usize) -> PyResult<Vec<u32>> {
        internal(|| {
            if i >= self.flows.len() {
                return Err(FlowModelError::new_err(format!(
                    "no flow {i}: there are {}",
                    self.flows.len()
                )));
            }
            Ok(self.flows.route(i).to_vec())
        })
    }

    /// Hop counts of every flow.
    fn hop_counts(&self) -> PyResult<Vec<usize>> {
        internal(|| {
            Ok((0..self.flows.len())
                .map(|i| self.flows.hops(i).len())
                .collect())
        })
    }

    /// Eq. 1 demands: each sender's link capacity split equally among the flows that start on it.
    fn initial_demands(&self) -> PyResult<Vec<f64>> {
        internal(|| Ok(senders::initial_demands(&self.net, &self.flows)))
    }

    /// The max-min fair rates (Fig. 5's clamp, by progressive filling); `demands` default to
    /// infinity (fire-hose). The GIL is released.
    #[pyo3(signature = (demands=None))]
    fn clamp(&self, py: Python<'_>, demands: Option<Vec<f64>>) -> PyResult<Vec<f64>> {
        internal(|| {
            let d = demands_or_inf(self.flows.len(), demands);
            py.detach(|| flowsim::clamp(&self.net, &self.flows, &d))
                .map_err(err)
        })
    }

    /// Fig. 5 as written (one network computation per flow): a slow reference for `clamp`.
    #[pyo3(signature = (demands=None))]
    fn clamp_oracle(&self, py: Python<'_>, demands: Option<Vec<f64>>) -> PyResult<Vec<f64>> {
        internal(|| {
            let d = demands_or_inf(self.flows.len(), demands);
            py.detach(|| flowsim::clamp_oracle(&self.net, &self.flows, &d))
                .map_err(err)
        })
    }

    /// Raises `FlowModelError` saying why `rates` are not the max-min fair assignment.
    #[pyo3(signature = (rates, demands=None, tol=1e-9))]
    fn check_max_min(&self, rates: Vec<f64>, demands: Option<Vec<f64>>, tol: f64) -> PyResult<()> {
        internal(|| {
            let d = demands_or_inf(self.flows.len(), demands);
            if rates.len() != self.flows.len() {
                return Err(err(Error::Length {
                    what: "rates",
                    expected: self.flows.len(),
                    got: rates.len(),
                }));
            }
            flowsim::check_max_min(&self.net, &self.flows, &d, &rates, tol)
                .map_err(|e| FlowModelError::new_err(format!("not max-min fair: {e:?}")))
        })
    }

    /// The steady state of a sender model (`naive`, `full_balanced`, `full_share`, `naive_ratio`,
    /// `limited_ratio`) iterated to a fixed point, accounted against `mmf` (clamp's rates,
    /// computed when not given). Returns per-flow, per-link and total figures. `epsilon` is
    /// relative to each flow's first-link capacity (`senders::demand_scales`).
    #[pyo3(signature = (model, alpha=0.2, epsilon=1e-6, max_iterations=10_000, mmf=None))]
    fn senders<'py>(
        &self,
        py: Python<'py>,
        model: &str,
        alpha: f64,
        epsilon: f64,
        max_iterations: usize,
        mmf: Option<Vec<f64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        internal(|| {
            let m = model_from(model, alpha)?;
            self.run(py, mmf, |bw| {
                senders::fixed_point(bw, m, epsilon, max_iterations)
            })
        })
    }

    /// Loss-load routers and senders with penalty `k` (seed 002 §9), iterated to a fixed point.
    #[pyo3(signature = (k, epsilon=1e-4, max_iterations=10_000, mmf=None))]
    fn loss_load<'py>(
        &self,
        py: Python<'py>,
        k: f64,
        epsilon: f64,
        max_iterations: usize,
        mmf: Option<Vec<f64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        internal(|| {
            self.run(py, mmf, |bw| {
                flowsim::lossload::fixed_point(bw, k, epsilon, max_iterations)
            })
        })
    }

    /// For tests only: panics inside a method, as a bug would, to show that the call raises
    /// FlowModelInternalError and the model stays usable.
    fn _panic_for_test(&self) -> PyResult<()> {
        internal(|| panic!("a deliberate panic"))
    }

    /// The flow through the brick-wall network for fixed `demands` (one computation, no sender
    /// reaction), accounted against `mmf`.
    #[pyo3(signature = (demands, mmf=None))]
    fn solve<'py>(
        &self,
        py: Python<'py>,
        demands: Vec<f64>,
        mmf: Option<Vec<f64>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        internal(|| {
            self.run(py, mmf, |bw| {
                let state = bw.solve(&demands)?;
                Ok(FixedPoint {
                    demands,
                    state,
                    iterations: 1,
                    converged: true,
                    delta: 0.0,
                })
            })
        })
    }
}

pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FlowModelError", m.py().get_type::<FlowModelError>())?;
    m.add(
        "FlowModelInternalError",
        m.py().get_type::<FlowModelInternalError>(),
    )?;
    m.add(
        "SENDER_MODELS",
        pyo3::types::PyTuple::new(m.py(), SENDER_MODELS)?,
    )?;
    m.add_class::<PyFlowModel>()
}
