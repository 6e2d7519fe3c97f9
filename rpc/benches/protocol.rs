//! Protocol benchmarks, each against a baseline measured in the same run, as medians of batches.
//!
//! `cargo bench -p ferry-rpc --bench protocol` prints a Markdown table (copied into BENCHMARKS-history.md).
//! A custom harness rather than criterion/divan: every row is a ratio of two measurements taken
//! back to back in one process, which those harnesses do not report.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use ferry_rpc::{HeapRegion, Mailbox, Packed, PerPort, SliceSink};

const BATCHES: usize = 15;

/// Median nanoseconds per operation of `batch(iters)` over `BATCHES` batches (after one warm-up).
fn median_ns(iters: u64, mut batch: impl FnMut(u64)) -> f64 {
    batch(iters);
    let mut v: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            batch(iters);
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[BATCHES / 2]
}

#[repr(align(128))]
struct Padded(AtomicU64);

/// Two threads bouncing two atomics: the floor of any shared-memory round trip.
fn ping_pong(iters: u64) -> f64 {
    let (a, b) = (Padded(AtomicU64::new(0)), Padded(AtomicU64::new(0)));
    let total = iters * (BATCHES as u64 + 1);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=total {
                while a.0.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
                b.0.store(i, Ordering::Release);
            }
        });
        let mut next = 1;
        median_ns(iters, |n| {
            for _ in 0..n {
                a.0.store(next, Ordering::Release);
                while b.0.load(Ordering::Acquire) != next {
                    std::hint::spin_loop();
                }
                next += 1;
            }
        })
    })
}

/// A no-op call: open, send, receive the reply, close; one server thread. With `keep`, the client
/// handle keeps its port between calls (`Process::keep_port`); with `exclusive`, the server holds
/// the locks of every port (`Process::exclusive`), as a thread serving its own range does.
fn round_trip<M: Mailbox>(iters: u64, keep: bool, exclusive: bool) -> f64 {
    let region = HeapRegion::<M>::new(32, 1).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = match exclusive {
                true => region
                    .server()
                    .exclusive()
                    .unwrap_or_else(|_| unreachable!()),
                false => region.server(),
            };
            while !stop.load(Ordering::Relaxed) {
                if let Some(mut port) = server.try_open(()) {
                    port.recv_and_send(|_, _| {}).unwrap();
                }
            }
        });
        let client = region.client().keep_port(keep);
        let ns = median_ns(iters, |n| {
            for i in 0..n {
                let mut port = client.open(1).unwrap();
                port.send_and_recv(
                    |s, _| s.words[0] = i,
                    |s, _| {
                        black_box(s.words[0]);
                    },
                )
                .unwrap();
            }
        });
        stop.store(true, Ordering::Relaxed);
        ns
    })
}

/// A no-op exchange on a port both sides keep open: the handoff alone, without the search, the
/// locks and the header of opening a port per call.
fn held_port<M: Mailbox>(iters: u64) -> f64 {
    let region = HeapRegion::<M>::new(32, 1).unwrap();
    let total = iters * (BATCHES as u64 + 1);
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut port = server.open(()).unwrap();
            for _ in 0..total {
                port.recv_and_send(|_, _| {}).unwrap();
            }
        });
        let client = region.client();
        let mut port = client.open(1).unwrap();
        median_ns(iters, |n| {
            for i in 0..n {
                port.send_and_recv(
                    |s, _| s.words[0] = i,
                    |s, _| {
                        black_box(s.words[0]);
                    },
                )
                .unwrap();
            }
        })
    })
}

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The busy pattern: which of `ports` ports are held by other clients.
fn busy_pattern(ports: u32, percent: u32) -> Vec<bool> {
    let mut rng = XorShift(0x9e3779b97f4a7c15);
    (0..ports)
        .map(|_| (rng.next() % 100) < percent as u64)
        .collect()
}

/// `try_open` + close with `percent` of the ports held: our search (warm cursor: each search starts
/// at the last port used; cold: at a random port) and the seed's linear scan from port 0 with one
/// lock word per port.
fn try_open_rows(ports: u32, percent: u32) -> (f64, f64, f64) {
    let busy = busy_pattern(ports, percent);
    let region = HeapRegion::<PerPort>::new(ports, 1).unwrap();
    for (p, &b) in busy.iter().enumerate() {
        if b {
            region.client_locks()[p / 32].fetch_or(1 << (p % 32), Ordering::Relaxed);
        }
    }
    let client = region.client();
    let warm = median_ns(20_000, |n| {
        for _ in 0..n {
            black_box(client.try_open(0).expect("a free port").index());
        }
    });
    let mut rng = XorShift(12345);
    let cold = median_ns(20_000, |n| {
        for _ in 0..n {
            client.set_cursor(rng.next() as u32);
            black_box(client.try_open(0).expect("a free port").index());
        }
    });
    // The seed: `for index in 0..port_count { if lock[index].fetch_or(1) != 0 continue; ... }`.
    let locks: Vec<AtomicU32> = busy.iter().map(|&b| AtomicU32::new(b as u32)).collect();
    let r = region.region();
    let (inbox, outbox) = (r.server_outbox(), r.client_outbox());
    let naive = median_ns(if percent > 90 { 2_000 } else { 20_000 }, |n| {
        for _ in 0..n {
            let mut found = None;
            for index in 0..ports as usize {
                if locks[index].fetch_or(1, Ordering::AcqRel) != 0 {
                    continue;
                }
                let (i, o) = (
                    inbox[index].load(Ordering::Relaxed),
                    outbox[index].load(Ordering::Relaxed),
                );
                if i != o {
                    locks[index].store(0, Ordering::Release);
                    continue;
                }
                found = Some(index);
                break;
            }
            let index = found.expect("a free port");
            black_box(index);
            locks[index].store(0, Ordering::Release);
        }
    });
    (warm, cold, naive)
}

/// The seed's client scan: from port 0, one lock word per port, the first free port it owns.
fn naive_open(locks: &[AtomicU32], inbox: &[AtomicU32], outbox: &[AtomicU32]) -> usize {
    for index in 0..locks.len() {
        if locks[index].fetch_or(1, Ordering::AcqRel) != 0 {
            continue;
        }
        if inbox[index].load(Ordering::Relaxed) != outbox[index].load(Ordering::Relaxed) {
            locks[index].store(0, Ordering::Release);
            continue;
        }
        return index;
    }
    panic!("no free port");
}

/// `try_open` + close by `threads` threads at once with `percent` of the ports held: ours (each
/// thread its own handle, cursors spread) and the seed's scan (every thread from port 0), as
/// nanoseconds per open per thread.
fn try_open_contended(ports: u32, percent: u32, threads: u32) -> (f64, f64) {
    let busy = busy_pattern(ports, percent);
    let region = HeapRegion::<PerPort>::new(ports, 1).unwrap();
    for (p, &b) in busy.iter().enumerate() {
        if b {
            region.client_locks()[p / 32].fetch_or(1 << (p % 32), Ordering::Relaxed);
        }
    }
    let ours = median_ns(20_000, |n| {
        std::thread::scope(|s| {
            for t in 0..threads {
                let region = &region;
                s.spawn(move || {
                    let client = region.client().with_cursor(t * (ports / threads));
                    for _ in 0..n {
                        black_box(client.try_open(0).expect("a free port").index());
                    }
                });
            }
        })
    });
    let locks: Vec<AtomicU32> = busy.iter().map(|&b| AtomicU32::new(b as u32)).collect();
    let r = region.region();
    let (inbox, outbox) = (r.server_outbox(), r.client_outbox());
    let naive = median_ns(2_000, |n| {
        std::thread::scope(|s| {
            for _ in 0..threads {
                let locks = &locks;
                s.spawn(move || {
                    for _ in 0..n {
                        let index = naive_open(locks, inbox, outbox);
                        black_box(index);
                        locks[index].store(0, Ordering::Release);
                    }
                });
            }
        })
    });
    (ours, naive)
}

/// The server's scan for one pending request among `ports` idle ports, by mailbox representation.
fn server_scan<M: Mailbox>(ports: u32) -> f64 {
    let region = HeapRegion::<M>::new(ports, 1).unwrap();
    let client = region.client().with_cursor(ports - 7);
    let server = region.server();
    median_ns(2_000, |n| {
        for _ in 0..n {
            let mut c = client.try_open(0).unwrap();
            c.send(|_, _| {}).unwrap();
            drop(c);
            let mut s = server.try_open(()).expect("the pending request");
            s.recv(|_, _| {}).unwrap();
        }
    })
}

/// `send_n` of `len` bytes to a server thread that `recv_n`s them into a buffer, per transfer; and
/// `memcpy` of the same bytes.
fn stream(len: usize) -> (f64, f64) {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let stop = AtomicBool::new(false);
    let ours = std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut buf = vec![0u8; len];
            while !stop.load(Ordering::Relaxed) {
                if let Some(mut port) = server.try_open(()) {
                    let mut sink = SliceSink::new(&mut buf);
                    port.recv_n(len as u64, &mut sink).unwrap();
                    port.send(|_, _| {}).unwrap();
                }
            }
        });
        let client = region.client();
        let ns = median_ns(4, |n| {
            for _ in 0..n {
                let mut port = client.open(1).unwrap();
                port.send_n(|_| &data).unwrap();
                port.recv(|_, _| {}).unwrap();
            }
        });
        stop.store(true, Ordering::Relaxed);
        ns
    });
    let mut dst = vec![0u8; len];
    let copy = median_ns(64, |n| {
        for _ in 0..n {
            dst.copy_from_slice(black_box(&data));
            black_box(&dst);
        }
    });
    (ours, copy)
}

/// What serving `ports` lone lanes' small calls (8 bytes each way, all pending at once) costs the
/// server, per call: one pass over the word lines (`serve_words`), and the same calls through the
/// packets (a `try_open` and a reply each). Medians over `reps` rounds; only the server is timed.
fn word_pass(ports: u32, reps: usize) -> (f64, f64) {
    use ferry_rpc::words::lane_by_lane;
    use ferry_rpc::{Single, Spin};
    let region = HeapRegion::<PerPort>::with_words(ports, 32).unwrap();
    let clients: Vec<_> = (0..ports)
        .map(|p| region.client_with(Single, Spin).unwrap().with_cursor(p))
        .collect();
    let server = region.server().exclusive().ok().unwrap();
    let mut seen = vec![0u64; server.seen_words()];
    let plus_one = |_: u32, req: &[u8], rep: &mut [u8; ferry_rpc::service::INLINE_BYTES]| {
        let v = u64::from_le_bytes(req[..8].try_into().unwrap());
        rep[..8].copy_from_slice(&(v + 1).to_le_bytes());
        Some((0, 8))
    };
    let (mut words, mut packets) = (Vec::new(), Vec::new());
    for round in 0..reps as u64 {
        let mut calls: Vec<_> = clients
            .iter()
            .map(|c| {
                let mut port = c.open_for_words(1).unwrap();
                let call = port.send_words(&round.to_le_bytes(), 8);
                (port, call)
            })
            .collect();
        let t = Instant::now();
        let mut served = 0;
        while served < ports as usize {
            served += server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {});
        }
        words.push(t.elapsed().as_nanos() as f64 / ports as f64);
        for (port, call) in &mut calls {
            let mut reply = [0u8; 8];
            assert_eq!(port.recv_words(*call, &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), round + 1);
        }
        drop(calls);
        let mut ports_open: Vec<_> = clients
            .iter()
            .map(|c| {
                let mut port = c.try_open(1).unwrap();
                port.send(|s, _| s.words[0] = round).unwrap();
                port
            })
            .collect();
        let t = Instant::now();
        for _ in 0..ports {
            let mut s = server.try_open(()).expect("a pending request");
            s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
        }
        packets.push(t.elapsed().as_nanos() as f64 / ports as f64);
        for port in &mut ports_open {
            let mut got = 0;
            port.recv(|s, _| got = s.words[0]).unwrap();
            assert_eq!(got, round + 1);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    (median(&mut words), median(&mut packets))
}

fn row(name: &str, ours: f64, base_name: &str, base: f64) {
    println!(
        "| {name} | {} | {base_name} | {} | {:.2}× |",
        fmt(ours),
        fmt(base),
        ours / base
    );
}

fn fmt(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a smoke pass then.
    let full = std::env::args().any(|a| a == "--bench");
    if !full {
        println!("smoke run (use `cargo bench` for figures)");
        black_box(round_trip::<PerPort>(100, false, true));
        black_box(stream(4096));
        black_box(word_pass(64, 3));
        return;
    }
    // `cargo bench -p ferry-rpc --bench protocol -- NAME` runs only the groups whose name contains
    // NAME: round_trip, try_open, word_pass, server_scan, stream.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let run = |group: &str| group.contains(filter.as_str());
    println!("| benchmark | ours | baseline | baseline time | ours / baseline |");
    println!("|---|---|---|---|---|");
    if run("round_trip") {
        let pp = ping_pong(200_000);
        let rt = round_trip::<PerPort>(200_000, false, false);
        row(
            "no-op call round trip, 2 threads (PerPort mailbox)",
            rt,
            "two-atomic ping-pong",
            pp,
        );
        let rt = round_trip::<Packed>(200_000, false, false);
        row(
            "no-op call round trip, 2 threads (Packed mailbox)",
            rt,
            "two-atomic ping-pong",
            pp,
        );
        let kept = round_trip::<Packed>(200_000, true, false);
        row(
            "no-op call round trip, client keeps its port (Packed)",
            kept,
            "two-atomic ping-pong",
            pp,
        );
        for (name, keep) in [
            ("no-op call round trip, exclusive server (Packed)", false),
            (
                "no-op call round trip, exclusive server, client keeps its port (Packed)",
                true,
            ),
        ] {
            let t = round_trip::<Packed>(200_000, keep, true);
            row(name, t, "two-atomic ping-pong", pp);
        }
        let held = held_port::<PerPort>(200_000);
        row(
            "no-op exchange on a port kept open (PerPort)",
            held,
            "two-atomic ping-pong",
            pp,
        );
    }
    for percent in [0, 50, 99].into_iter().filter(|_| run("try_open")) {
        let (warm, cold, naive) = try_open_rows(16384, percent);
        let name = format!("try_open+close, 16384 ports, {percent}% busy");
        row(
            &format!("{name}, warm cursor"),
            warm,
            "seed linear scan",
            naive,
        );
        row(
            &format!("{name}, cold (random) cursor"),
            cold,
            "seed linear scan",
            naive,
        );
    }
    for percent in [99].into_iter().filter(|_| run("try_open")) {
        let (ours, naive) = try_open_contended(16384, percent, 2);
        let name = format!("try_open+close, 16384 ports, {percent}% busy, 2 threads at once");
        row(&name, ours, "seed linear scan, 2 threads", naive);
    }
    if run("word_pass") {
        for ports in [64, 1024] {
            let (words, packets) = word_pass(ports, 201);
            row(
                &format!("server's cost of a lone lane's word call, {ports} pending at once"),
                words,
                "the same calls through the packets",
                packets,
            );
        }
    }
    if run("server_scan") {
        let per_port = server_scan::<PerPort>(16384);
        let packed = server_scan::<Packed>(16384);
        row(
            "server finds 1 request in 16384 ports (Packed)",
            packed,
            "the same with PerPort",
            per_port,
        );
    }
    if run("stream") {
        let (ours, copy) = stream(1 << 20);
        row(
            "send_n 1 MiB to another thread (+ reply)",
            ours,
            "memcpy 1 MiB",
            copy,
        );
    }
}
