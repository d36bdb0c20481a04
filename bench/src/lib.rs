//! Benchmarks live in benches/; this library holds what they share with the binaries in src/bin/.

pub mod fsed_fuzz;
pub mod machine;
pub mod stream;
