//! A key-value service over the ferry protocol: two server threads, four client threads, one
//! region in this process's heap. Each client stores its own keys, reads them back, deletes half,
//! and logs a line; the program checks every answer and prints what it did.
//!
//! `cargo run -p ferry-examples --bin kv`

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ferry_examples::kv::{put_request, Found, Kv, KvClient, KvServer, Store};
use rpc_core::service::Service;
use rpc_core::{HeapRegion, Single, Stalled, Wait};

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
                    match store.serve_one(&server, &mut buffers) {
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
                    let client = region
                        .client_with(Single, SpinThenYield)
                        .expect("one lane fits")
                        .with_cursor(c as u32 * 16);
                    rpc_core::service::handshake::<Kv, _, _, _>(&client).expect("same schema");
                    let mut buf = vec![0u8; 1024];
                    let mut calls = 1;
                    for k in 0..KEYS {
                        let key = c << 32 | k;
                        let value = format!("client {c} key {k} ").repeat(1 + k as usize % 8);
                        client
                            .put(&put_request(key, value.as_bytes()))
                            .expect("put");
                        let got = client.get(key, &mut buf).expect("get");
                        assert_eq!(got, value.as_bytes());
                        calls += 2;
                        if k % 2 == 0 {
                            let found = client.delete(key).expect("delete");
                            assert_eq!(
                                found,
                                Found {
                                    found: 1,
                                    len: value.len() as u32
                                }
                            );
                            calls += 1;
                        }
                    }
                    client.log(&format!("client {c} done")).expect("log");
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
        let client = region.client();
        let mut kept = 0;
        for c in 0..CLIENTS {
            for k in 0..KEYS {
                let found = client.contains(c << 32 | k).expect("contains");
                assert_eq!(found.found, (k % 2) as u32, "client {c} key {k}");
                kept += found.found as u64;
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
