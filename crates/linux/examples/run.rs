//! `run agent CONFIG.json` or `run delayline CONFIG.json`: the namespace programs as a plain
//! binary, for trying them by hand inside `ip netns exec` without the Python orchestrator
//! (issue 15). Exit status 1 with the error on stderr when the program returns one.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = linux::main(&args) {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
