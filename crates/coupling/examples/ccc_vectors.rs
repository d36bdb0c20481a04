//! Prints ctrlTCP test vectors for the kernel port (see `coupling::tcp::vectors`):
//! `cargo run --release -p macroflow-coupling --example ccc_vectors -- [SEED] [COUNT] [OPS]`.
fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or_else(|_| panic!("not a number: {a}")))
        .collect();
    let arg = |i: usize, d: u64| args.get(i).copied().unwrap_or(d);
    print!(
        "{}",
        coupling::tcp::vectors::ccc_vectors(arg(0, 1), arg(1, 1000) as usize, arg(2, 300) as usize)
    );
}
