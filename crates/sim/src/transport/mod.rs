//! Transport protocols: TCP (sender, receiver, congestion controllers).

pub mod cc;
pub mod sack;
pub mod tcp;
