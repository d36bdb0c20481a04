//! `macroflowd`: serves the FSE and TCP-CCC on a Unix socket (see the crate's README).

use clap::Parser;
use fsed::config::Config;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "macroflowd",
    about = "The Flow State Exchange (RFC 8699) and TCP-CCC as a daemon on a Unix socket"
)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "/run/macroflowd.sock")]
    socket: PathBuf,
    /// The socket file's permissions, octal: who may connect (0660: the owner and its group).
    #[arg(long, default_value = "660", value_parser = parse_mode)]
    mode: u32,
    /// The configuration file (TOML; absent: the defaults, every user unlimited and apart).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    check: bool,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?}: expected octal permissions such as 660"))
}

fn main() {
    let args = Args::parse();
    let config = match &args.config {
        None => Config::default(),
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| format!("{}: {e}", p.display()))
            .and_then(|t| Config::parse(&t).map_err(|e| format!("{}: {e}", p.display())))
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("macroflowd: {e}");
                std::process::exit(2);
            }
        },
    };
    if args.check {
        println!("macroflowd: configuration OK");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let code = rt.block_on(async {
        let socket = match fsed::server::bind(&args.socket, args.mode) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("macroflowd: {}: {e}", args.socket.display());
                return 1;
            }
        };
        eprintln!("macroflowd: listening on {}", args.socket.display());
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        };
        match fsed::server::serve(socket, config, shutdown).await {
            Ok(stats) => {
                eprintln!("macroflowd: stopped; {stats:?}");
                0
            }
            Err(e) => {
                eprintln!("macroflowd: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}
