//! Transport protocols: TCP (sender, receiver, congestion controllers).

pub mod cc;
pub mod cubic;
pub mod sack;
pub mod tcp;
