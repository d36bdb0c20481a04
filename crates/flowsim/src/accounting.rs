//! Dead and zombie flow (seed 002 §4.1.1), per edge and per flow, of a flow state against the
//! max-min fair rates `MMF(i)` that [`crate::clamp`] computes.
//!
//! With `f_i(u,v)` the rate of flow `i` that edge `(u,v)` carries and `L_i(u,v)` what the router
//! at `u` drops of it:
//!
//! - `Under(u,v) = { i ∈ F(u,v) | f_i(u,v) <= MMF(i) }`;
//! - `D(u,v) = Σ_{i ∈ F(u,v) \ Under(u,v), s_i ≠ u} (f_i(u,v) − MMF(i))`: flow in excess of the
//!   ideal that crosses the edge beyond its source, to be dropped further on (dead);
//! - `Z(u,v)`: the drops at `(u,v)` of flows in `Under(u,v)` — counting, of `L_i(u,v)`, only what
//!   takes the flow below `MMF(i)`, i.e. `min(L_i, MMF(i) − f_i)`. The paper's formula sums all of
//!   `L_i`; its own operational rule (§4.3: "for each dropped packet ... whether it causes the flow
//!   to decrease below its ideal allocation") and its worked examples need the minimum: in Fig. 1
//!   flow 2 at R2 is dropped from 10 to exactly its MMF of 2 (no zombies in Fig. 1), and in Fig. 2
//!   flow 1 is dropped at R1 from 20 to 10 with MMF 18, which is 8 zombies, not 10;
//! - `Z_i(u,v) = (f_i(u,v) − MMF(i)) / D(u,v) · Z(u,v)` for the over-served flows: zombies assigned
//!   to the flows whose dead packets cause them. Where `D(u,v) = 0` but `Z(u,v) > 0` (only on a
//!   sender's own access link, whose over-served flows the formula leaves out of `D`), the zombies
//!   are assigned in the same proportion to those flows.

use crate::brickwall::FlowState;
use crate::network::{Flows, Network};

/// Dead, zombie and dropped flow of one state, per link, per flow, and in total.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// Per link: everything its router dropped, `Σ_i L_i(u,v)`.
    pub link_dropped: Vec<f64>,
    /// Per link: `D(u,v)`.
    pub link_dead: Vec<f64>,
    /// Per link: `Z(u,v)`.
    pub link_zombie: Vec<f64>,
    /// Per link: carried rate over capacity.
    pub link_utilization: Vec<f64>,
    /// Per flow: `Σ_(u,v) D_i(u,v)`, its terms of `D` over its path.
    pub flow_dead: Vec<f64>,
    /// Per flow: zombies it causes, `Σ_(u,v) Z_i(u,v)`.
    pub flow_zombie: Vec<f64>,
    /// Per flow: zombies it suffers (its drops below its MMF).
    pub flow_zombie_suffered: Vec<f64>,
    pub goodput: f64,
    pub dead: f64,
    pub zombie: f64,
    pub dropped: f64,
    /// Jain's index of the flows' goodputs.
    pub jain: f64,
}

/// Accounts `state` of `flows` on `net` against the max-min fair rates `mmf`.
pub fn account(net: &Network, flows: &Flows, state: &FlowState, mmf: &[f64]) -> Accounting {
    let nl = net.link_count();
    let (starts, hops) = flows.hops_by_link(nl);
    let flow_of = flows.flow_of_hop();
    let mut a = Accounting {
        link_dropped: vec![0.0; nl],
        link_dead: vec![0.0; nl],
        link_zombie: vec![0.0; nl],
        link_utilization: vec![0.0; nl],
        flow_dead: vec![0.0; flows.len()],
        flow_zombie: vec![0.0; flows.len()],
        flow_zombie_suffered: vec![0.0; flows.len()],
        goodput: state.goodput.iter().sum(),
        dead: 0.0,
        zombie: 0.0,
        dropped: 0.0,
        jain: crate::maxmin::jain(&state.goodput),
    };
    for (l, link) in net.links().iter().enumerate() {
        let hs = &hops[starts[l]..starts[l + 1]];
        let (mut dropped, mut dead, mut zombie, mut carried, mut excess_src) =
            (0.0, 0.0, 0.0, 0.0, 0.0);
        for &h in hs {
            let i = flow_of[h] as usize;
            let f = state.carried[h];
            let lost = state.dropped(h);
            carried += f;
            dropped += lost;
            if f <= mmf[i] {
                zombie += lost.min(mmf[i] - f).max(0.0);
                a.flow_zombie_suffered[i] += lost.min(mmf[i] - f).max(0.0);
            } else if flows.src[i] != link.from {
                dead += f - mmf[i];
                a.flow_dead[i] += f - mmf[i];
            } else {
                excess_src += f - mmf[i];
            }
        }
        // Assign Z(u,v) to the over-served flows in proportion to their excess.
        let (base, include_src) = if dead > 0.0 {
            (dead, false)
        } else {
            (excess_src, true)
        };
        if zombie > 0.0 && base > 0.0 {
            for &h in hs {
                let i = flow_of[h] as usize;
                let f = state.carried[h];
                if f > mmf[i] && (flows.src[i] != link.from || include_src) {
                    a.flow_zombie[i] += (f - mmf[i]) / base * zombie;
                }
            }
        }
        a.link_dropped[l] = dropped;
        a.link_dead[l] = dead;
        a.link_zombie[l] = zombie;
        a.link_utilization[l] = if link.capacity > 0.0 {
            carried / link.capacity
        } else {
            0.0
        };
        a.dead += dead;
        a.zombie += zombie;
        a.dropped += dropped;
    }
    a
}
