//! Builds a rate-based controller pair by name, for the engine's callers (Python, scenario files).

use super::gcc::{GccConfig, GccReceiver, GccSender};
use super::nada::{NadaConfig, NadaReceiver, NadaSender};
use super::rap::{RapConfig, RapReceiver, RapSender};
use super::rate::{RateReceiver, RateSender};
use super::tfrc::{TfrcConfig, TfrcReceiver, TfrcSender};
use crate::error::SimError;

/// The rate-based controllers by name.
pub const RATE_CONTROLLERS: &[&str] = &["nada", "tfrc", "gcc", "rap"];

/// A controller's two halves.
pub type Pair = (Box<dyn RateSender>, Box<dyn RateReceiver>);

/// A sender/receiver pair of controller `kind` for packets of `packet_bytes`; `name` is the
/// parameter path used in errors.
pub fn build(kind: &str, packet_bytes: u32, name: &str) -> Result<Pair, SimError> {
    match kind {
        "nada" => {
            let cfg = NadaConfig::default();
            Ok((
                Box::new(NadaSender::new(cfg)?),
                Box::new(NadaReceiver::new(cfg)?),
            ))
        }
        "tfrc" => {
            let cfg = TfrcConfig {
                packet_bytes,
                ..TfrcConfig::default()
            };
            Ok((
                Box::new(TfrcSender::new(cfg, name)?),
                Box::new(TfrcReceiver::new(cfg, name)?),
            ))
        }
        "gcc" => {
            let cfg = GccConfig::default();
            Ok((
                Box::new(GccSender::new(&cfg, name)?),
                Box::new(GccReceiver::new(&cfg, name)?),
            ))
        }
        "rap" => {
            let cfg = RapConfig {
                packet_bytes,
                ..RapConfig::default()
            };
            Ok((
                Box::new(RapSender::new(cfg, name)?),
                Box::new(RapReceiver::new()),
            ))
        }
        other => Err(SimError::invalid(
            format!("{name}.controller"),
            other,
            "one of nada, tfrc, gcc, rap",
        )),
    }
}
