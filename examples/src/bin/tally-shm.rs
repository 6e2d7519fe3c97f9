//! One user service, `Tally`, served by the handler that `gpu-tally` serves to a GPU kernel, here
//! to threads of this process (a heap region) and then to client processes (this program again,
//! started with `client`) over a ferry-shm file. Each caller adds to its own keys the amounts
//! the GPU threads add, and every total is checked on both sides.
//!
//! `cargo run --release -p ferry-examples --bin tally-shm`

use std::path::Path;
use std::time::Duration;

use ferry_example_tally::{amount, expected_total, Tally, DEFAULT_ROUNDS};
use ferry_examples::tally::HostTally;
use ferry_rpc::service::Site;
use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmServer};

/// Callers (threads, then processes), and keys per caller.
const CALLERS: u32 = 4;
const KEYS: u32 = 32;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, path, index] = &args[..] {
        if role == "client" {
            let shm = ShmClient::attach(
                Path::new(path),
                ClientConfig::default().service::<Tally>().sticky(true),
            )?;
            return tally_keys(&shm, index.parse()?);
        }
    }

    // In-process: the handler serves a heap region; each caller thread is a client process of it.
    let region: ferry_rpc::HeapRegion = ferry_rpc::HeapRegion::new(32, 1)?;
    let host = HostTally::default();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| -> Res<()> {
        s.spawn(|| {
            let (server, mut buffers) = (region.server(), Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if Tally::serve_one(&host, &server, &mut buffers)
                    .map_or(true, |served| served.is_none())
                {
                    std::thread::yield_now();
                }
            }
        });
        let callers: Vec<_> = (0..CALLERS)
            .map(|c| {
                let region = &region;
                s.spawn(move || tally_keys(&region.client(), c).map_err(|e| e.to_string()))
            })
            .collect();
        let results: Vec<_> = callers.into_iter().map(|c| c.join()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in results {
            r.map_err(|_| "a caller thread panicked")??;
        }
        Ok(())
    })?;
    check(&host, "in-process")?;

    // Between processes: the same handler type, served on a file.
    let path = path_for(&format!("tally-{}", std::process::id()));
    let server = ShmServer::start(
        &path,
        ServerConfig::default(),
        Tally::server(HostTally::default()),
    )?;
    let failed = ferry_examples::run_clients(&path, CALLERS as usize)?;
    // The totals as the server's handler kept them, read back through the service itself.
    let shm = ShmClient::attach(&path, ClientConfig::default().service::<Tally>())?;
    let tally = Tally::client(&shm);
    for key in 0..CALLERS * KEYS {
        let total = tally.total(key)?;
        if total != expected_total(key, DEFAULT_ROUNDS) {
            return Err(format!("between processes: key {key} totals {total}").into());
        }
    }
    drop(shm);
    let stats = server.shutdown(Duration::from_secs(5)).stats;
    if failed != 0 {
        return Err(format!("{failed} client processes failed").into());
    }
    println!(
        "tally: {CALLERS} threads and {CALLERS} processes, {} keys each way, every total \
         checked; between processes {} calls served ({} inline)",
        CALLERS * KEYS,
        stats.served,
        stats.inline
    );
    Ok(())
}

/// Caller `index` adds, for each of its keys, the amounts a GPU thread of that id adds, checking
/// each reply and its key's description.
fn tally_keys(site: &impl Site, index: u32) -> Res<()> {
    let tally = Tally::client(site);
    for key in index * KEYS..(index + 1) * KEYS {
        let mut total = 0;
        for round in 0..DEFAULT_ROUNDS {
            total += amount(key, round);
            let got = tally.add(key, amount(key, round))?;
            if got != total {
                return Err(
                    format!("key {key}, round {round}: total {got}, expected {total}").into(),
                );
            }
        }
        let line = tally.describe(key)?;
        let want = format!("key {key}: {DEFAULT_ROUNDS} adds, total {total}");
        if line != want {
            return Err(format!("key {key}: described as {line:?}, expected {want:?}").into());
        }
    }
    Ok(())
}

/// Every key's total as the handler kept it.
fn check(host: &HostTally, how: &str) -> Res<()> {
    let keys = host.keys();
    for key in 0..CALLERS * KEYS {
        let want = (DEFAULT_ROUNDS, expected_total(key, DEFAULT_ROUNDS));
        if keys.get(&key).copied() != Some(want) {
            return Err(format!(
                "{how}: key {key} is {:?}, expected {want:?}",
                keys.get(&key)
            )
            .into());
        }
    }
    Ok(())
}
