//! Stress: many client threads over few ports, and many ports, every request carrying a unique id
//! its reply must echo. Run in release (`cargo test --release`); a watchdog turns a hang into a
//! failure that prints the region's state.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{dump_region, Backoff};
use ferry_rpc::{HeapRegion, Mailbox, Packed, PerPort, Single};
use ferry_testkit::Watchdog;

struct Outcome {
    replies: u64,
    crossed: u64,
    errors: u64,
    duplicates: u64,
    per_port: Vec<u64>,
}

/// `clients` threads make `calls` calls in all over `ports` ports, served by `servers` threads.
fn stress<M: Mailbox>(ports: u32, clients: u32, servers: u32, calls: u64, keep: bool) -> Outcome {
    let region = Arc::new(HeapRegion::<M>::new(ports, 1).unwrap());
    let progress = Arc::new(AtomicU64::new(0));
    let dump_of = region.clone();
    let _watchdog = Watchdog::on_progress(
        "stress",
        progress.clone(),
        Duration::from_secs(20),
        move || dump_region(&dump_of),
    );
    let stop = AtomicBool::new(false);
    let seen = Mutex::new(HashSet::new());
    let per_port: Vec<AtomicU64> = (0..ports).map(|_| AtomicU64::new(0)).collect();
    let (mut replies, mut crossed, mut errors, mut duplicates) = (0, 0, 0, 0);
    std::thread::scope(|scope| {
        for _ in 0..servers {
            scope.spawn(|| {
                let server = region.server_with(Single, Backoff::default()).unwrap();
                let mut idle = 0u32;
                loop {
                    match server.try_open(()) {
                        Some(mut port) => {
                            idle = 0;
                            per_port[port.index() as usize].fetch_add(1, Ordering::Relaxed);
                            // Echo the id, and a value derived from it, so a reply that lands on
                            // the wrong request is caught.
                            port.recv_and_send(|s, _| {
                                s.words[1] = s.words[0].rotate_left(17) ^ 0x5a5a
                            })
                            .unwrap();
                        }
                        None if stop.load(Ordering::Acquire) => break,
                        None => {
                            idle += 1;
                            if idle > 64 {
                                std::thread::yield_now();
                            }
                        }
                    }
                }
            });
        }
        let workers: Vec<_> = (0..clients)
            .map(|t| {
                let (region, progress, seen) = (&region, &progress, &seen);
                let share = calls / clients as u64 + u64::from((t as u64) < calls % clients as u64);
                scope.spawn(move || {
                    let client = region
                        .client_with(Single, Backoff::default())
                        .unwrap()
                        .with_cursor(t * (ports / clients.min(ports)).max(1))
                        .keep_port(keep);
                    let mut ids = Vec::with_capacity(share as usize);
                    let (mut ok, mut bad, mut err) = (0u64, 0u64, 0u64);
                    for seq in 0..share {
                        let id = (t as u64) << 40 | seq;
                        let mut echoed = (0, 0);
                        let r = client.open(7).and_then(|mut port| {
                            port.send_and_recv(
                                |s, _| s.words = [id, 0, 0, 0, 0, 0, 0, 0],
                                |s, _| echoed = (s.words[0], s.words[1]),
                            )
                        });
                        match r {
                            Ok(()) if echoed == (id, id.rotate_left(17) ^ 0x5a5a) => ok += 1,
                            Ok(()) => bad += 1,
                            Err(_) => err += 1,
                        }
                        ids.push(echoed.0);
                        progress.fetch_add(1, Ordering::Relaxed);
                    }
                    let mut seen = seen.lock().unwrap();
                    let dup = ids.into_iter().filter(|id| !seen.insert(*id)).count() as u64;
                    (ok, bad, err, dup)
                })
            })
            .collect();
        for w in workers {
            let (ok, bad, err, dup) = w.join().unwrap();
            replies += ok;
            crossed += bad;
            errors += err;
            duplicates += dup;
        }
        stop.store(true, Ordering::Release);
    });
    for p in 0..ports {
        assert!(region.region().client_owns(p), "port {p} not at rest");
    }
    assert!(region
        .client_locks()
        .iter()
        .all(|w| w.load(Ordering::Relaxed) == 0));
    assert!(region
        .server_locks()
        .iter()
        .all(|w| w.load(Ordering::Relaxed) == 0));
    Outcome {
        replies,
        crossed,
        errors,
        duplicates,
        per_port: per_port.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
    }
}

fn check(o: &Outcome, calls: u64) {
    assert_eq!(o.crossed, 0, "crossed replies");
    assert_eq!(o.errors, 0, "calls that failed");
    assert_eq!(o.duplicates, 0, "duplicated replies");
    assert_eq!(o.replies, calls, "lost replies");
    assert_eq!(o.per_port.iter().sum::<u64>(), calls, "requests served");
}

#[test]
fn more_clients_than_ports() {
    let calls = 100_000;
    let o = stress::<PerPort>(32, 64, 2, calls, false);
    check(&o, calls);
    // With twice as many clients as ports every port must have been used.
    assert!(o.per_port.iter().all(|&n| n > 0), "{:?}", o.per_port);
}

#[test]
fn many_ports() {
    let calls = 100_000;
    let o = stress::<PerPort>(16384, 16, 2, calls, false);
    check(&o, calls);
}

#[test]
fn packed_mailboxes_under_contention() {
    let calls = 50_000;
    let o = stress::<Packed>(32, 64, 2, calls, false);
    check(&o, calls);
}

#[test]
fn kept_ports_with_more_clients_than_ports() {
    // Handles that keep their port between calls hold it while idle; the others wait for a
    // handle to finish (its drop releases the port): slower, but nothing is lost or stuck.
    let calls = 50_000;
    let o = stress::<PerPort>(32, 64, 2, calls, true);
    check(&o, calls);
}

#[test]
fn kept_ports_with_a_port_per_client() {
    let calls = 100_000;
    let o = stress::<Packed>(64, 16, 2, calls, true);
    check(&o, calls);
}
