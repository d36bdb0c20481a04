//! Transport protocols: TCP (sender, receiver, window-based controllers: NewReno, CUBIC, LEDBAT,
//! Vegas; `coupled`: a controller's coupling group called from its hooks)
//! and rate-based controllers for media flows (RAP, TFRC, NADA, GCC) behind `rate`'s interface.

pub mod cc;
pub mod controllers;
pub mod coupled;
pub mod cubic;
pub mod gcc;
pub mod ledbat;
pub mod measured;
pub mod nada;
pub mod rap;
pub mod rate;
pub mod sack;
pub mod tcp;
#[cfg(test)]
pub(crate) mod test_sender;
pub mod tfrc;
pub mod vegas;
