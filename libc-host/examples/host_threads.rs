//! The host's file services under server threads serving at once, without a GPU: each thread
//! serves messages of 32 lanes as a GPU program's warps send them (every lane opens the same
//! input read-only, asks its size, reads 1 KiB at its own offset, closes), and the time a lane's
//! call takes is printed by call and by thread count, against one thread's.
//!
//! ```text
//! cargo run --release -p ferry-libc-host --example host_threads [MESSAGES] [THREADS...]
//! ```

use std::io::Write;
use std::time::{Duration, Instant};

use ferry_libc::{mode, LibcServer};
use ferry_libc_host::{self as host, LibcConfig, LibcHost};

const LANES: usize = 32;
const READ: u32 = 1024;

/// Per lane, the time of each call: open, size, read_at, close.
fn serve(host: &LibcHost, path: &str, messages: usize, thread: usize) -> [Duration; 4] {
    let call = host.for_program();
    host::batch_per_message();
    let mut time = [Duration::ZERO; 4];
    let mut handles = [ferry_libc::Handle(0); LANES];
    // Held all along, as other warps' handles are at a launch's scale: the thread's shared
    // descriptor of the input stays open between messages.
    let held = call.open(mode::READ, path).expect("open");
    host::end_message();
    for m in 0..messages {
        let t = Instant::now();
        for h in handles.iter_mut() {
            *h = call.open(mode::READ, path).expect("open");
        }
        host::end_message();
        let t1 = Instant::now();
        for h in &handles {
            call.size(*h).expect("size");
        }
        host::end_message();
        let t2 = Instant::now();
        for (lane, h) in handles.iter().enumerate() {
            let at = ((thread * messages + m) * LANES + lane) as u64 * READ as u64 % (1 << 20);
            let got = call.read_at(*h, at, READ).expect("read_at");
            assert_eq!(got.as_ref().len(), READ as usize);
        }
        host::end_message();
        let t3 = Instant::now();
        for h in &handles {
            call.close(*h).expect("close");
        }
        host::end_message();
        let t4 = Instant::now();
        for (i, (a, b)) in [(t, t1), (t1, t2), (t2, t3), (t3, t4)]
            .into_iter()
            .enumerate()
        {
            time[i] += b - a;
        }
    }
    let _ = call.close(held);
    host::end_message();
    time
}

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mut threads: Vec<usize> = args.filter_map(|a| a.parse().ok()).collect();
    if threads.is_empty() {
        threads = vec![1, 2, 4, 8];
    }
    let path = std::env::temp_dir().join(format!("ferry-host-threads-{}", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&vec![7u8; (1 << 20) + READ as usize]))
        .expect("input file");
    let name = path.to_str().expect("path").to_string();
    let config = || LibcConfig {
        max_files: 1 << 20,
        max_files_per_client: 1 << 20,
        ..LibcConfig::default()
    };
    println!("{messages} messages of {LANES} lanes a thread; ns per lane (median of 3 runs)");
    println!("threads |   open |   size | read_at |  close | lanes/s (all threads) | × 1 thread");
    let mut one = 0.0;
    for &n in &threads {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let host = LibcHost::new(config());
            let started = Instant::now();
            let times: Vec<[Duration; 4]> = std::thread::scope(|s| {
                let spawned: Vec<_> = (0..n)
                    .map(|t| {
                        let (host, name) = (&host, &name);
                        s.spawn(move || serve(host, name, messages, t))
                    })
                    .collect();
                spawned.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let wall = started.elapsed().as_secs_f64();
            let lanes = (n * messages * LANES) as f64;
            let per =
                |i: usize| times.iter().map(|t| t[i].as_secs_f64()).sum::<f64>() / lanes * 1e9;
            runs.push(([per(0), per(1), per(2), per(3)], lanes / wall));
        }
        runs.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (per, rate) = runs[1];
        if n == threads[0] {
            one = rate / n as f64;
        }
        println!(
            "{n:7} | {:6.0} | {:6.0} | {:7.0} | {:6.0} | {:21.0} | {:.2}",
            per[0],
            per[1],
            per[2],
            per[3],
            rate,
            rate / one
        );
    }
    let _ = std::fs::remove_file(&path);
}
