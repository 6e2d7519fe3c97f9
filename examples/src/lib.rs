//! Examples of the ferry framework; see the binaries in `src/bin`.
//!
//! - `kv`: a key-value service defined with `#[derive(RpcOpcodes)]` (the service is [`kv`]: its
//!   calls take their arguments as fields, and a missing key or a full store is the call's own
//!   typed error), served by two threads and called by four, over a region in this process's
//!   heap (`Kv::serve_one` on the server side, `Kv::client(&process)` on the client side).
//!   `cargo run -p ferry-examples --bin kv`.
//! - `kv-shm`: the same service between processes, over a ferry-shm file:
//!   `ShmServer::start(path, config, Kv::server(store))` and
//!   `Kv::client(&ShmClient::attach(path, ClientConfig::default().service::<Kv>())?)`.
//!   `cargo run --release -p ferry-examples --bin kv-shm`.

//! - `gpu-tally` and `tally-shm`: one user service, `Tally` (`ferry-example-tally`, `no_std`),
//!   served by one handler ([`tally::HostTally`]) to a GPU kernel that calls it from every lane
//!   (`gpu-tally TALLY.ptx`), and to threads of one process and to client processes over a
//!   ferry-shm file (`tally-shm`).

#![deny(missing_docs)]

pub mod kv;
pub mod tally;

/// Runs `count` client processes (this program again, with arguments `client PATH INDEX`) and
/// waits for them; returns how many failed.
pub fn run_clients(path: &std::path::Path, count: usize) -> std::io::Result<usize> {
    let children = (0..count)
        .map(|c| {
            std::process::Command::new(std::env::current_exe()?)
                .args(["client", &path.display().to_string(), &c.to_string()])
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut failed = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed += 1;
        }
    }
    Ok(failed)
}
