//! Builds a rate-based controller pair by name, for the engine's callers (Python, scenario files).

use super::gcc::{GccConfig, GccReceiver, GccSender};
use super::nada::{NadaConfig, NadaReceiver, NadaSender};
use super::rap::{RapConfig, RapReceiver, RapSender};
use super::rate::{RateReceiver, RateSender};
use super::tfrc::{TfrcConfig, TfrcReceiver, TfrcSender};
use crate::error::SimError;

/// A controller's two halves.
pub type Pair = (Box<dyn RateSender>, Box<dyn RateReceiver>);

/// A rate-based controller the simulator can build: its name and how to build a pair for packets
/// of `packet_bytes` (`name` is the parameter path errors use).
#[derive(Debug)]
pub struct RateEntry {
    pub name: &'static str,
    pub about: &'static str,
    build: fn(packet_bytes: u32, name: &str) -> Result<Pair, SimError>,
}

/// Every rate-based controller, by name: the one list the bindings, scenario validation and the
/// CLI read. A new controller is its file plus one line here.
#[rustfmt::skip]
pub static RATE_CONTROLLERS: &[RateEntry] = &[
    RateEntry { name: "nada", about: "NADA (RFC 8698)", build: nada },
    RateEntry { name: "tfrc", about: "TFRC (RFC 5348)", build: tfrc },
    RateEntry { name: "gcc", about: "Google Congestion Control (draft-ietf-rmcat-gcc-02)", build: gcc },
    RateEntry { name: "rap", about: "RAP (Rejaie et al., INFOCOM 1999)", build: rap },
];

/// The names of [`RATE_CONTROLLERS`], in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    RATE_CONTROLLERS.iter().map(|e| e.name)
}

/// A sender/receiver pair of controller `kind` for packets of `packet_bytes`; `name` is the
/// parameter path used in errors.
pub fn build(kind: &str, packet_bytes: u32, name: &str) -> Result<Pair, SimError> {
    match RATE_CONTROLLERS.iter().find(|e| e.name == kind) {
        Some(e) => (e.build)(packet_bytes, name),
        None => Err(SimError::invalid(
            format!("{name}.controller"),
            kind,
            "a rate controller of RATE_CONTROLLERS (nada, tfrc, gcc, rap)",
        )),
    }
}

fn nada(_packet_bytes: u32, _name: &str) -> Result<Pair, SimError> {
    let cfg = NadaConfig::default();
    Ok((
        Box::new(NadaSender::new(cfg)?),
        Box::new(NadaReceiver::new(cfg)?),
    ))
}

fn tfrc(packet_bytes: u32, name: &str) -> Result<Pair, SimError> {
    let cfg = TfrcConfig {
        packet_bytes,
        ..TfrcConfig::default()
    };
    Ok((
        Box::new(TfrcSender::new(cfg, name)?),
        Box::new(TfrcReceiver::new(cfg, name)?),
    ))
}

fn gcc(_packet_bytes: u32, name: &str) -> Result<Pair, SimError> {
    let cfg = GccConfig::default();
    Ok((
        Box::new(GccSender::new(&cfg, name)?),
        Box::new(GccReceiver::new(&cfg, name)?),
    ))
}

fn rap(packet_bytes: u32, name: &str) -> Result<Pair, SimError> {
    let cfg = RapConfig {
        packet_bytes,
        ..RapConfig::default()
    };
    Ok((
        Box::new(RapSender::new(cfg, name)?),
        Box::new(RapReceiver::new()),
    ))
}
