//! macroflow's coupling layer: the code between a congestion controller's output and what the flow
//! uses. Pure logic: no I/O, no clock (time is passed in as [`Instant`]), no allocation on the
//! per-update path of the passive and TCP algorithms.
//!
//! - [`fse`]: the Flow State Exchange for rate-based flows (RFC 8699; seed 003 ch. 5-6).
//! - [`tcp`]: coupling of TCP congestion windows behind one [`tcp::TcpCoupler`] interface: TCP-CCC
//!   / ctrlTCP with ack-clocked handover (seed 003 ch. 7, 9), and the E-TCP and EFCM baselines.
//! - [`tcb`]: the TCB interdependence cache (RFC 2140bis / RFC 9040; seed 003 ch. 12).
//! - [`group`]: flow ids, flow groups and the grouping rules (RFC 8699 sec. 5.1).
//! - [`sbd`]: measurement-based Shared Bottleneck Detection from OWD and loss (RFC 8382).
//! - [`falseshare`]: detecting false sharing of two flows by loss, delay, order (seed 000 sec. 4).
//! - [`response`]: the response to false sharing: share by default, split and merge flows between
//!   TCP-CCC or FSE groups on detectors' verdicts without a burst, per-destination memory
//!   (seed 000 sec. 5).
//! - [`units`]: time types and input validation.

pub mod error;
pub mod falseshare;
pub mod fse;
pub mod group;
pub mod response;
pub mod sbd;
pub mod tcb;
pub mod tcp;
pub mod units;

pub use error::Error;
pub use group::{FiveTuple, FlowId, GroupId, Grouping};
pub use units::{Duration, Instant};
