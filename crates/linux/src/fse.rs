//! `macroflowd` inside a run (issue 21): the Linux engine serves the FSE groups of a scenario's
//! media flows with the daemon's own server (`fsed::server`), started like the agents, so a run
//! needs no binary besides the Python extension. Config (JSON): `socket` (path), `mode` (octal
//! permissions as a number), `config` (the daemon's TOML text), `ready_path` (created once the
//! socket listens). Runs until SIGTERM or SIGINT.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    socket: String,
    mode: u32,
    config: String,
    ready_path: String,
}

pub fn main(path: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("fsed: reading {}: {e}", path.display()))?;
    let cfg: Config =
        serde_json::from_str(&text).map_err(|e| format!("fsed: {}: {e}", path.display()))?;
    let daemon = fsed::config::Config::parse(&cfg.config).map_err(|e| format!("fsed: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("fsed: runtime: {e}"))?;
    rt.block_on(async {
        let socket = fsed::server::bind(std::path::Path::new(&cfg.socket), cfg.mode)
            .map_err(|e| format!("fsed: socket {}: {e}", cfg.socket))?;
        std::fs::File::create(&cfg.ready_path)
            .map_err(|e| format!("fsed: ready_path {}: {e}", cfg.ready_path))?;
        let stop = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        };
        let stats = fsed::server::serve(socket, daemon, stop)
            .await
            .map_err(|e| format!("fsed: {e}"))?;
        eprintln!("fsed: stopped; {stats:?}");
        Ok(())
    })
}
