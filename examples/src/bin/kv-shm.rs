//! The key-value service between processes: a server over a shared-memory file in `/dev/shm`
//! and four client processes (this program again, started with `client`). Each client stores its
//! own keys, reads them back, checks and deletes half of them, and logs a line; the server then
//! checks what is left and prints what it served.
//!
//! `cargo run --release -p ferry-examples --bin kv-shm`

use std::path::Path;
use std::time::{Duration, Instant};

use ferry_examples::kv::{Kv, KvError, Store};
use ferry_rpc::service::{Error, Status};
use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmServer};

const CLIENTS: u64 = 4;
const KEYS: u64 = 200;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, path, index] = &args[..] {
        if role == "client" {
            return client(Path::new(path), index.parse()?);
        }
    }
    let path = path_for(&format!("kv-{}", std::process::id()));
    let config = ServerConfig {
        workers: 2,
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, config, Kv::server(Store::default()))?;
    println!(
        "service {} (fingerprint {:#018x}) served from {}",
        Kv::NAME,
        Kv::FINGERPRINT,
        path.display()
    );
    let start = Instant::now();
    let failed = ferry_examples::run_clients(&path, CLIENTS as usize)?;
    let elapsed = start.elapsed();
    // What is left: the odd keys of every client, checked from here as one more client.
    let check = ShmClient::attach(&path, ClientConfig::default().service::<Kv>())?;
    let kv = Kv::client(&check);
    for c in 0..CLIENTS {
        for k in 0..KEYS {
            let key = c << 32 | k;
            let len = kv.len(key);
            let expected = if k % 2 == 1 {
                Ok(value(key).len() as u64)
            } else {
                Err(Error::App(KvError::NotFound))
            };
            if len != expected {
                return Err(format!("key {key:#x}: {len:?}, expected {expected:?}").into());
            }
        }
    }
    drop(check);
    let shutdown = server.shutdown(Duration::from_secs(5));
    let stats = shutdown.stats;
    println!(
        "{CLIENTS} client processes: {} calls served in {:.1} ms ({} inline, the rest through the \
         packets), {} failed; {failed} clients failed",
        stats.served,
        elapsed.as_secs_f64() * 1e3,
        stats.inline,
        stats.failed,
    );
    if failed != 0 || stats.failed != 0 {
        return Err("some calls failed".into());
    }
    Ok(())
}

/// The value a client stores under `key`: its length varies with the key.
fn value(key: u64) -> Vec<u8> {
    (0..(key % 97) as usize * 13).map(|i| i as u8).collect()
}

/// One client process: puts, gets, deletes half, logs a line; checks every answer.
fn client(path: &Path, index: u64) -> Res<()> {
    // Attaching checks that the server serves this schema of the service.
    let shm = ShmClient::attach(path, ClientConfig::default().service::<Kv>().sticky(true))?;
    let kv = Kv::client(&shm);
    let mut buf = vec![0u8; 2048];
    for k in 0..KEYS {
        let key = index << 32 | k;
        kv.put(key, &value(key))?;
    }
    for k in 0..KEYS {
        let key = index << 32 | k;
        let got = kv.get_into(key, &mut buf)?;
        if got != value(key) {
            return Err(format!("client {index}: get {key:#x} returned another value").into());
        }
        if k % 2 == 0 {
            let len = kv.delete(key)?;
            if len != value(key).len() as u64 {
                return Err(format!("client {index}: delete {key:#x} removed {len} bytes").into());
            }
            match kv.get(key) {
                Err(Error::App(KvError::NotFound)) => {}
                other => {
                    return Err(
                        format!("client {index}: get {key:#x} after delete: {other:?}").into(),
                    )
                }
            }
        }
    }
    // A value longer than the buffer is refused, not truncated.
    let long = (1..KEYS)
        .step_by(2)
        .map(|k| index << 32 | k)
        .find(|&key| value(key).len() > 8)
        .ok_or("no long value")?;
    match kv.get_into(long, &mut [0u8; 8]) {
        Err(Error::Status(Status::ReplyTooLarge { len, .. }))
            if len == value(long).len() as u64 => {}
        other => return Err(format!("client {index}: a long get gave {other:?}").into()),
    }
    kv.log(&format!("client {index} done"))?;
    Ok(())
}
