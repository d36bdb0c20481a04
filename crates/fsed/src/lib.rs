//! `macroflowd`: the Flow State Exchange of RFC 8699 (and TCP-CCC for window-based flows) as a
//! daemon that flows of many processes register with over a Unix domain socket (issue 21; seed
//! 003 ch. 6 and 10 describe the FSE as an entity the flows of one host register with).
//!
//! | module | what it owns |
//! |---|---|
//! | [`proto`] | the wire protocol: frames, messages, version (the specification is its docs) |
//! | [`config`] | the configuration file and the per-user policy (share limits, flow limits, groups) |
//! | [`daemon`] | the state: clients, flows, groups and their `crates/coupling` couplers; pure logic, time passed in |
//! | [`server`] | the socket, SO_PEERCRED, one task per connection, soft-state expiry (tokio) |
//! | [`client`] | a blocking client (the Python module and the C library wrap it) |

pub mod client;
pub mod config;
pub mod daemon;
pub mod proto;
pub mod server;
