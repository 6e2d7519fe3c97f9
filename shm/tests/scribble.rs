//! Random writes into a served file, by a same-user process, while clients call: once the writing
//! stops, the server must bring every port back to rest within a bounded time (see the crate
//! docs, "Recovering from writes behind the protocol's back"), and every port must serve calls
//! again. The writer here is a thread of the test with its own mapping of the file, as another
//! process would have; the clients are threads too.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_demo::{self as demo, Demo, DemoService};
use ferry_shm::header::HEADER_SIZE;
use ferry_shm::{ClientConfig, ServerConfig, ShmClient, ShmServer};

mod raw;
use raw::map_file;

const PORTS: u32 = 32;

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Writes random words at random places of `[from, to)` of the mapping until `stop`.
fn scribble(map: &memmap2::MmapRaw, from: usize, to: usize, seed: u64, stop: &AtomicBool) -> u64 {
    let mut rng = Rng(seed | 1);
    let words = (to - from) / 8;
    let mut writes = 0;
    while !stop.load(Ordering::Relaxed) {
        let at = from + (rng.next() as usize % words) * 8;
        // Mostly small values and single flipped bits (what a stray writer or a torn state
        // looks like), sometimes anything.
        let value = match rng.next() % 4 {
            0 => rng.next(),
            1 => rng.next() % 4,
            2 => 1 << (rng.next() % 64),
            _ => 0,
        };
        // SAFETY: `at` is 8-byte aligned and `at + 8 <= to <= map.len()`, inside the live
        // mapping `map` keeps; the file's words are accessed atomically by every process.
        let word = unsafe { &*map.as_ptr().add(at).cast::<AtomicU64>() };
        word.store(value, Ordering::Relaxed);
        writes += 1;
        if writes % 64 == 0 {
            std::thread::yield_now();
        }
    }
    writes
}

/// One round: clients call while the file is written at random in `[from(g), to(g))`; then every
/// port must serve again within `bound`.
fn round(tag: &str, seed: u64, area: fn(&ferry_shm::Geometry) -> (usize, usize)) {
    let path = format!("/dev/shm/ferry-test-scribble-{tag}-{}", std::process::id());
    let config = ServerConfig {
        ports: PORTS,
        reclaim_interval: Duration::from_millis(5),
        call_deadline: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, config, Demo::server(DemoService)).unwrap();
    let client_config = |sticky| {
        ClientConfig::default()
            .service::<Demo>()
            .deadline(Duration::from_millis(500))
            .sticky(sticky)
    };
    let g = *ShmClient::attach(&path, client_config(false))
        .unwrap()
        .geometry();
    let stop = Arc::new(AtomicBool::new(false));
    // Clients: sticky and not, small calls and streams; every error is allowed while the file
    // is being written (a reply may even be garbage), none may hang or crash.
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let stop = Arc::clone(&stop);
            // Attached before the writing starts (a header being written may refuse attaching).
            let shm = ShmClient::attach(&path, client_config(i % 2 == 0)).unwrap();
            std::thread::spawn(move || {
                let c = Demo::client(&shm);
                let data = vec![3u8; 300];
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _ = c.echo(calls);
                    let _ = c.sum(&data);
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let map = map_file(std::path::Path::new(&path));
    let (from, to) = area(&g);
    let writer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || scribble(&map, from, to, seed, &stop))
    };
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    let calls: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    eprintln!("{tag}: seed {seed:#x}, {writes} random writes, {calls} call pairs meanwhile");

    // The bound: a client's deadline and the server's call deadline (a call in flight when the
    // writing stopped ends by then), then a few reclaim intervals. Generous for a loaded machine.
    let bound = Duration::from_secs(10);
    let since = Instant::now();
    let handles = loop {
        match every_port_serves(&path, client_config(true)) {
            Ok(handles) => break handles,
            Err(e) if since.elapsed() < bound => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                dump(&path, &g);
                panic!(
                    "{tag} (seed {seed:#x}): ports still unusable {bound:?} after the writes \
                 stopped: {e}"
                )
            }
        }
    };
    drop(handles);
    let done = server.shutdown(Duration::from_secs(5));
    assert_eq!(done.stuck_workers, 0);
}

/// Holds every port at once with a sticky handle each, each making a small call and a stream
/// call: fails unless all `PORTS` ports serve.
fn every_port_serves(path: &str, config: ClientConfig) -> Result<Vec<ShmClient>, String> {
    let mut handles = Vec::new();
    let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let want = data.iter().map(|&b| b as u64).sum::<u64>();
    for i in 0..PORTS as u64 {
        let shm = ShmClient::attach(path, config.clone()).map_err(|e| format!("attach: {e}"))?;
        let c = Demo::client(&shm);
        let echoed = c.echo(i).map_err(|e| format!("handle {i}: echo: {e}"))?;
        if (echoed.id, echoed.mix) != (i, demo::mix(i)) {
            return Err(format!("handle {i}: a wrong echo {echoed:?}"));
        }
        let summed = c.sum(&data).map_err(|e| format!("handle {i}: sum: {e}"))?;
        if (summed.len, summed.sum) != (1000, want) {
            return Err(format!("handle {i}: a wrong sum {summed:?}"));
        }
        handles.push(shm);
    }
    let mut ports: Vec<_> = handles.iter().map(|h| h.held_port().unwrap()).collect();
    ports.sort_unstable();
    ports.dedup();
    if ports.len() != PORTS as usize {
        return Err(format!("two handles share a port: {ports:?}"));
    }
    Ok(handles)
}

fn seed() -> u64 {
    std::env::var("FERRY_SCRIBBLE_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn ports_come_back_after_random_writes_to_the_mailboxes_packets_and_lines() {
    // Everything after the header: mailboxes, packet headers and slots, owner words, the
    // inline bitmap and lines.
    round("body", seed(), |g| (g.region_offset(), g.file_size()));
}

#[test]
fn ports_come_back_after_random_writes_to_the_owner_words_and_lines() {
    // The owner words and the inline area alone: more writes land on each.
    round("owners", seed(), |g| (g.owners_offset(), g.file_size()));
}

#[test]
fn the_header_comes_back_after_random_writes() {
    round("header", seed(), |_| (0, HEADER_SIZE));
}

fn dump(path: &str, g: &ferry_shm::Geometry) {
    let map = map_file(std::path::Path::new(path));
    let w = |at: usize| {
        // SAFETY: aligned and inside the mapping (offsets from the geometry).
        unsafe { &*map.as_ptr().add(at).cast::<AtomicU64>() }.load(Ordering::SeqCst)
    };
    let bitmap = w(g.inline_offset());
    for p in 0..PORTS as usize {
        let owner = w(g.owners_offset() + p * 8);
        let line: Vec<u64> = (0..4)
            .map(|i| w(g.inline_lines_offset() + p * 64 + i * 8))
            .collect();
        eprintln!(
            "port {p:2}: owner {owner:#018x} armed {} line {:x?}",
            bitmap >> p & 1,
            line
        );
    }
    eprintln!("layout {:?}", g.layout());
}
