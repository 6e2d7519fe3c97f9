//! A key-value service over the ferry protocol: two server threads, four client threads, one
//! region in this process's heap. Each client stores its own keys, reads them back, deletes half,
//! and logs a line; the program checks every answer and prints what it did.
//!
//! `cargo run -p ferry-examples --bin kv`

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ferry_examples::kv::{Kv, KvError, Store};
use ferry_rpc::service::{Error, Service};
use ferry_rpc::{HeapRegion, Single, Stalled, Wait};

/// Spins briefly, then yields the processor: with more threads than cores, a client spinning on
/// its reply would otherwise hold the core its server needs.
struct SpinThenYield;

impl Wait for SpinThenYield {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if polls < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        Ok(())
    }
}

const CLIENTS: u64 = 4;
const KEYS: u64 = 200;

fn main() {
    let region: HeapRegion = HeapRegion::new(64, 1).expect("64 ports of one lane");
    let store = Store::default();
    let stop = AtomicBool::new(false);
    println!(
        "service {} with {} calls, fingerprint {:#018x}",
        Kv::NAME,
        Kv::OPCODES.len(),
        Kv::FINGERPRINT
    );
    let start = Instant::now();
    let (calls, elapsed, kept) = std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let server = region.server();
                let mut buffers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match Kv::serve_one(&store, &server, &mut buffers) {
                        Ok(Some(_)) => {}
                        Ok(None) => std::thread::yield_now(),
                        Err(e) => panic!("server: {e}"),
                    }
                }
            });
        }
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let region = &region;
                s.spawn(move || {
                    let site = region
                        .client_with(Single, SpinThenYield)
                        .expect("one lane fits")
                        .with_cursor(c as u32 * 16);
                    let kv = Kv::client(&site);
                    let mut buf = vec![0u8; 1024];
                    let mut calls = 0;
                    for k in 0..KEYS {
                        let key = c << 32 | k;
                        let value = format!("client {c} key {k} ").repeat(1 + k as usize % 8);
                        kv.put(key, value.as_bytes()).expect("put");
                        let got = kv.get_into(key, &mut buf).expect("get");
                        assert_eq!(got, value.as_bytes());
                        calls += 2;
                        if k % 2 == 0 {
                            let len = kv.delete(key).expect("delete");
                            assert_eq!(len, value.len() as u64);
                            // Gone: the next lookup is the call's own error.
                            assert_eq!(kv.len(key), Err(Error::App(KvError::NotFound)));
                            calls += 2;
                        }
                    }
                    kv.log(&format!("client {c} done")).expect("log");
                    calls + 1
                })
            })
            .collect();
        let calls: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
        // One-way calls do not wait: let the server drain the last log lines.
        while store.log().len() < CLIENTS as usize {
            std::thread::yield_now();
        }
        let elapsed = start.elapsed();
        // Every even key was deleted, every odd one is still there.
        let site = region.client();
        let kv = Kv::client(&site);
        let mut kept = 0;
        for c in 0..CLIENTS {
            for k in 0..KEYS {
                match kv.len(c << 32 | k) {
                    Ok(_) if k % 2 == 1 => kept += 1,
                    Err(Error::App(KvError::NotFound)) if k % 2 == 0 => {}
                    other => panic!("client {c} key {k}: {other:?}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        (calls, elapsed, kept)
    });
    println!(
        "{calls} calls from {CLIENTS} client threads to 2 server threads in {:.1} ms \
         ({:.2} µs per call); {kept} of {} keys kept",
        elapsed.as_secs_f64() * 1e3,
        elapsed.as_secs_f64() * 1e6 / calls as f64,
        CLIENTS * KEYS,
    );
    let mut log = store.log();
    log.sort();
    println!("log: {log:?}");
}
