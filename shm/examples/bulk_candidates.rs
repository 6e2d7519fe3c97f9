//! Measures the candidates for moving a large request between two threads over shared memory,
//! against a memcpy of the same bytes in the same run (the bulk-data issue's baseline), before
//! the bulk path is built:
//!
//! - **stream**: today's path, a `Bytes` argument streamed through the packet's slot 64 bytes per
//!   handoff (`Demo::sum` served by a real `ShmServer`; its handler adds every byte);
//! - **area, copied out**: the client copies the request into a shared area and hands over one
//!   line; the server copies it into its own buffer, then reads it (a handler given an owned
//!   `&[u8]` that the client can no longer change);
//! - **area, read in place**: the same, the server reading the area where it lies (a handler given
//!   a `&[u8]` into the mapping).
//!
//! The area's servers read all the bytes (a fold of 8-byte words, at about the speed of reading
//! them), and every reply is checked. Medians of `REPS` round
//! trips per size. `cargo run --release -p ferry-shm --example bulk_candidates`
//!
//! Both sides are threads of one process here, which moves the bytes between cores exactly as two
//! processes sharing the pages would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_demo::{Demo, DemoService};
use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmServer};

const SIZES: [usize; 3] = [4 << 10, 64 << 10, 1 << 20];
const REPS: usize = 200;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What the demo's `Sum` computes from the bytes (the stream's check).
fn sum(bytes: &[u8]) -> u64 {
    bytes.iter().map(|&b| b as u64).sum()
}

/// What the area's server computes: a fold of the bytes read eight at a time, at about the speed
/// of reading them (the server's own work should not hide the transport's).
fn fold(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail = words.remainder().iter().fold(0u64, |a, &b| a ^ b as u64);
    words.fold(tail, |a, w| a ^ u64::from_ne_bytes(w.try_into().unwrap()))
}

fn memcpy_ns(n: usize) -> f64 {
    let src: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut dst = vec![0u8; n];
    let times = (0..REPS)
        .map(|_| {
            let t = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst);
            t.elapsed().as_nanos() as f64
        })
        .collect();
    median(times)
}

fn stream_ns(n: usize) -> f64 {
    let path = path_for(&format!("bulk-candidates-{}", std::process::id()));
    let config = ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, config, Demo::server(DemoService)).expect("server");
    let shm = ShmClient::attach(
        &path,
        ClientConfig::default().service::<Demo>().sticky(true),
    )
    .expect("client");
    let demo = Demo::client(&shm);
    let data: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
    let expected = sum(&data);
    let times = (0..REPS)
        .map(|_| {
            let t = Instant::now();
            let got = demo.sum(&data).expect("call");
            let ns = t.elapsed().as_nanos() as f64;
            assert_eq!(got.sum, expected);
            ns
        })
        .collect();
    drop(shm);
    server.shutdown(Duration::from_secs(5));
    median(times)
}

/// The area and its handoff line: `seq` odd = a request of `len` bytes waits, even = replied.
#[repr(align(64))]
struct Line {
    seq: AtomicU64,
    len: AtomicU64,
    reply: AtomicU64,
}

fn area_ns(n: usize, copy_out: bool) -> f64 {
    let line = Line {
        seq: AtomicU64::new(0),
        len: AtomicU64::new(0),
        reply: AtomicU64::new(0),
    };
    // The shared area, as the client's and the server's mapping of one file would be.
    let area: Vec<AtomicU64> = (0..n.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
    let as_bytes = |area: &[AtomicU64]| -> *mut u8 { area.as_ptr() as *mut u8 };
    let data: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
    let expected = fold(&data);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut own = vec![0u8; n];
            let mut seen = 0;
            loop {
                let seq = line.seq.load(Ordering::Acquire);
                if seq == seen || seq.is_multiple_of(2) {
                    if seq == u64::MAX - 1 {
                        return;
                    }
                    std::hint::spin_loop();
                    continue;
                }
                let len = line.len.load(Ordering::Relaxed) as usize;
                // SAFETY: the client wrote `len` bytes of the area before its release of `seq`
                // and writes nothing until the reply; the area holds at least `len` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(as_bytes(&area), len.min(n)) };
                let total = if copy_out {
                    own[..bytes.len()].copy_from_slice(bytes);
                    fold(&own[..bytes.len()])
                } else {
                    fold(bytes)
                };
                line.reply.store(total, Ordering::Relaxed);
                seen = seq + 1;
                line.seq.store(seen, Ordering::Release);
            }
        });
        let mut seq = 0;
        let times = (0..REPS)
            .map(|_| {
                let t = Instant::now();
                // SAFETY: the server reads the area only between our release and its reply.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), as_bytes(&area), n) };
                line.len.store(n as u64, Ordering::Relaxed);
                seq += 1;
                line.seq.store(seq, Ordering::Release);
                seq += 1;
                while line.seq.load(Ordering::Acquire) != seq {
                    std::hint::spin_loop();
                }
                let ns = t.elapsed().as_nanos() as f64;
                assert_eq!(line.reply.load(Ordering::Relaxed), expected);
                ns
            })
            .collect();
        line.seq.store(u64::MAX - 1, Ordering::Release);
        median(times)
    })
}

fn main() {
    println!("| request | memcpy | stream (today) | area, copied out | area, read in place |");
    println!("|---|---|---|---|---|");
    for n in SIZES {
        let copy = memcpy_ns(n);
        let stream = stream_ns(n);
        let out = area_ns(n, true);
        let inplace = area_ns(n, false);
        println!(
            "| {} KiB | {:.0} ns | {:.0} ns ({:.1}×) | {:.0} ns ({:.1}×) | {:.0} ns ({:.1}×) |",
            n >> 10,
            copy,
            stream,
            stream / copy,
            out,
            out / copy,
            inplace,
            inplace / copy
        );
    }
}
