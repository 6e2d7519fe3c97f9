//! `ferry bench`: one run measuring a ferry call against its baselines, medians of several runs.
//!
//! - raw: one `AtomicU64` in a shared mapping, ping-ponged between two processes (the floor);
//! - layout floor: the same two processes exchanging a request and its reply through the four
//!   cache lines a ferry call moves (each side's mailbox line, the packet's header and slot), with
//!   plain loads and stores and no protocol: what this region layout costs before any logic;
//! - ferry: an `echo` call from a client process to a server with one worker, inline (the path the
//!   generated client takes for small fixed calls), and the same call through the packets (a
//!   server whose handler serves no inline calls);
//! - socket: an 8-byte request and reply over a Unix-domain stream socket between two processes;
//! - throughput: `echo` calls per second with 1, 2, 4, 8 client processes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use transport_shm::demo::{self, Demo, DemoClient, DemoHandle, DemoServer, DemoService};
use transport_shm::{path_for, ServerConfig, ShmServer};

use crate::Res;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Round trips per run.
    #[arg(long, default_value_t = 100_000)]
    trips: u64,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// Calls per client process in a throughput run.
    #[arg(long, default_value_t = 50_000)]
    load_calls: u64,
    /// Client process counts for the throughput runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    clients: Vec<u32>,
    /// Server worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Role {
    /// Answer the raw atomic ping-pong.
    Pingpong,
    /// Answer the raw exchange over the four lines of a call (the layout floor).
    Layout,
    /// Echo over a Unix socket.
    Uds,
    /// Time ferry echo calls, print one line per run.
    Rpc,
    /// Wait for "go" on stdin, make the calls, print "done".
    Load,
}

#[derive(clap::Args, Debug)]
pub struct PeerArgs {
    #[arg(value_enum)]
    role: Role,
    path: PathBuf,
    #[arg(long, default_value_t = 0)]
    trips: u64,
    #[arg(long, default_value_t = 1)]
    runs: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spawn_peer(role: &str, path: &Path, trips: u64, runs: usize, piped_in: bool) -> Res<Child> {
    Ok(Command::new(std::env::current_exe()?)
        .args(["peer", role])
        .arg(path)
        .args(["--trips", &trips.to_string(), "--runs", &runs.to_string()])
        .stdin(if piped_in {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .spawn()?)
}

/// A small shared mapping for the raw ping-pong.
struct PingPongFile {
    map: memmap2::MmapRaw,
    path: PathBuf,
}

impl PingPongFile {
    fn create(path: &Path) -> Res<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        file.set_len(4096)?;
        Self::map(file, path)
    }

    fn open(path: &Path) -> Res<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Self::map(file, path)
    }

    fn map(file: std::fs::File, path: &Path) -> Res<Self> {
        let map = memmap2::MmapOptions::new().len(4096).map_raw(&file)?;
        Ok(PingPongFile {
            map,
            path: path.to_path_buf(),
        })
    }

    fn word(&self) -> &AtomicU64 {
        self.word_at(0)
    }

    /// The `u64` at byte `offset` (a multiple of 8 below 4096).
    fn word_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset < 4096);
        // SAFETY: the mapping is 4096 bytes, page aligned, alive as long as `self`, and `offset`
        // is an aligned word inside it; both processes access these words only atomically.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU64>() }
    }
}

/// The four lines of a call in a one-lane region of 64 ports with packed mailboxes, at their
/// offsets there: the client's mailbox words, the server's, then port 0's header and slot.
struct CallLines<'f> {
    client_box: &'f AtomicU64,
    server_box: &'f AtomicU64,
    opcode: &'f AtomicU64,
    request: &'f AtomicU64,
    reply: &'f AtomicU64,
}

impl<'f> CallLines<'f> {
    fn new(file: &'f PingPongFile) -> Self {
        CallLines {
            client_box: file.word_at(0),
            server_box: file.word_at(64),
            opcode: file.word_at(128 + 8),
            request: file.word_at(192),
            reply: file.word_at(192 + 8),
        }
    }
}

fn wait_for(word: &AtomicU64, value: u64) {
    while word.load(Ordering::Acquire) != value {
        std::hint::spin_loop();
    }
}

/// The rpc-core protocol alone: an echo between two threads of this process over a heap region
/// of 64 ports (the same port count as the file), both sides spinning. `typed`: the demo
/// service's `echo` through the generated client trait and dispatch (what the file transport
/// runs); otherwise the same exchange hand-written on `Port` (words in lane 0's slot), so the
/// cost of the generated code shows as the difference.
fn in_process(args: &BenchArgs, typed: bool) -> f64 {
    let region =
        rpc_core::HeapRegion::<transport_shm::ShmMailbox>::new(64, 1).expect("a valid layout");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let opcode = Demo::Echo.opcode();
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut buffers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if typed {
                    let _ = DemoService.serve_one(&server, &mut buffers);
                } else if let Some(mut port) = server.try_open(()) {
                    let _ = port.recv_and_send(|slot, _| slot.words[1] = demo::mix(slot.words[0]));
                }
            }
        });
        let client = region.client();
        let mut runs = Vec::new();
        for run in 0..=args.runs {
            let t = Instant::now();
            for id in 0..args.trips {
                let mut reply = 0;
                if typed {
                    reply = client.echo(id).map_or(0, |r| r.mix);
                } else if let Ok(mut port) = client.open(opcode) {
                    let _ = port.send_and_recv(|s, _| s.words[0] = id, |s, _| reply = s.words[1]);
                }
                std::hint::black_box(reply);
            }
            if run > 0 {
                runs.push(t.elapsed().as_nanos() as f64 / args.trips as f64);
            }
        }
        stop.store(true, Ordering::Relaxed);
        median(runs)
    })
}

fn raw_pingpong(dir: &str, args: &BenchArgs) -> Res<f64> {
    let path = PathBuf::from(format!("{dir}/ferry-bench-pp-{}", std::process::id()));
    let file = PingPongFile::create(&path)?;
    let mut child = spawn_peer("pingpong", &path, 0, 0, false)?;
    let word = file.word();
    let mut v = 0u64;
    let mut runs = Vec::new();
    for run in 0..=args.runs {
        let t = Instant::now();
        for _ in 0..args.trips {
            word.store(v + 1, Ordering::Release);
            wait_for(word, v + 2);
            v += 2;
        }
        // Run 0 warms up.
        if run > 0 {
            runs.push(t.elapsed().as_nanos() as f64 / args.trips as f64);
        }
    }
    word.store(u64::MAX, Ordering::Release);
    child.wait()?;
    std::fs::remove_file(&file.path)?;
    Ok(median(runs))
}

/// The layout floor: a request (opcode in the header line, id in the slot line) and its reply
/// (in the slot line), each handed over by a store to the sender's mailbox line, between two
/// processes; no locks, no flips, no dispatch.
fn raw_layout(dir: &str, args: &BenchArgs) -> Res<f64> {
    let path = PathBuf::from(format!("{dir}/ferry-bench-layout-{}", std::process::id()));
    let file = PingPongFile::create(&path)?;
    let mut child = spawn_peer("layout", &path, 0, 0, false)?;
    let lines = CallLines::new(&file);
    let mut trip = 0u64;
    let mut runs = Vec::new();
    for run in 0..=args.runs {
        let t = Instant::now();
        for _ in 0..args.trips {
            trip += 1;
            lines.opcode.store(7, Ordering::Relaxed);
            lines.request.store(trip, Ordering::Relaxed);
            lines.client_box.store(trip, Ordering::Release);
            wait_for(lines.server_box, trip);
            if lines.reply.load(Ordering::Relaxed) != demo::mix(trip) {
                return Err("a wrong reply in the layout floor".into());
            }
        }
        if run > 0 {
            runs.push(t.elapsed().as_nanos() as f64 / args.trips as f64);
        }
    }
    lines.client_box.store(u64::MAX, Ordering::Release);
    child.wait()?;
    std::fs::remove_file(&file.path)?;
    Ok(median(runs))
}

fn uds(args: &BenchArgs) -> Res<f64> {
    let path = PathBuf::from(format!("/tmp/ferry-bench-{}.sock", std::process::id()));
    let listener = UnixListener::bind(&path)?;
    let mut child = spawn_peer("uds", &path, 0, 0, false)?;
    let (mut s, _) = listener.accept()?;
    let mut runs = Vec::new();
    let mut buf = [0u8; 8];
    for run in 0..=args.runs {
        let t = Instant::now();
        for i in 0..args.trips {
            s.write_all(&i.to_le_bytes())?;
            s.read_exact(&mut buf)?;
        }
        if run > 0 {
            runs.push(t.elapsed().as_nanos() as f64 / args.trips as f64);
        }
    }
    drop(s);
    child.wait()?;
    std::fs::remove_file(&path)?;
    Ok(median(runs))
}

fn rpc(path: &Path, args: &BenchArgs) -> Res<f64> {
    let mut child = spawn_peer("rpc", path, args.trips, args.runs, false)?;
    let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut runs = Vec::new();
    for line in out.lines() {
        if let Some(ns) = line?.strip_prefix("RUN ") {
            runs.push(ns.parse::<f64>()?);
        }
    }
    child.wait()?;
    if runs.is_empty() {
        return Err("the rpc peer reported nothing".into());
    }
    Ok(median(runs))
}

fn throughput(path: &Path, clients: u32, args: &BenchArgs) -> Res<f64> {
    let mut rates = Vec::new();
    for _ in 0..3 {
        let mut children = Vec::new();
        for _ in 0..clients {
            let mut c = spawn_peer("load", path, args.load_calls, 1, true)?;
            let mut out = BufReader::new(c.stdout.take().ok_or("no stdout")?);
            let mut line = String::new();
            out.read_line(&mut line)?;
            if line.trim() != "ready" {
                return Err(format!("a load peer said {line:?}").into());
            }
            children.push((c, out));
        }
        let t = Instant::now();
        for (c, _) in &mut children {
            writeln!(c.stdin.as_mut().ok_or("no stdin")?, "go")?;
        }
        for (_, out) in &mut children {
            let mut line = String::new();
            out.read_line(&mut line)?;
            if line.trim() != "done" {
                return Err(format!("a load peer said {line:?}").into());
            }
        }
        let elapsed = t.elapsed();
        for (mut c, _) in children {
            c.wait()?;
        }
        rates.push((clients as u64 * args.load_calls) as f64 / elapsed.as_secs_f64());
    }
    Ok(median(rates))
}

pub fn run(args: BenchArgs) -> Res<()> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "ferry bench: {cpu}, {cores} cores; {} trips × {} runs (medians), {} calls per client in throughput runs",
        args.trips, args.runs, args.load_calls
    );
    let raw = raw_pingpong("/dev/shm", &args)?;
    let layout = raw_layout("/dev/shm", &args)?;
    let config = ServerConfig {
        workers: args.workers,
        fingerprint: Demo::FINGERPRINT,
        ..ServerConfig::default()
    };
    let path = path_for(&format!("bench-{}", std::process::id()));
    let server = ShmServer::start(&path, config.clone(), demo::DemoHandler)?;
    let call = rpc(&path, &args)?;
    let packets = {
        let path = path_for(&format!("bench-packets-{}", std::process::id()));
        let packets_only = |port: &mut transport_shm::ServerPort<'_, '_>| demo::serve(port);
        let server = ShmServer::start(&path, config, packets_only)?;
        let ns = rpc(&path, &args)?;
        server.shutdown(Duration::from_secs(5));
        ns
    };
    let socket = uds(&args)?;
    let threads = in_process(&args, true);
    let by_hand = in_process(&args, false);
    println!();
    println!("| round trip between two processes | median ns | ratio |");
    println!("|---|---:|---:|");
    println!("| raw atomic ping-pong (one u64 in the mapping) | {raw:.0} | 1.00 |");
    println!(
        "| layout floor: the four lines of a call, raw stores, no protocol | {layout:.0} | {:.2}× the ping-pong |",
        layout / raw
    );
    println!(
        "| ferry `echo` call (inline: request and reply in one line) | {call:.0} | {:.2}× the ping-pong (goal ≤ 1.5×) |",
        call / raw,
    );
    println!(
        "| ferry `echo` call through the packets | {packets:.0} | {:.2}× the ping-pong, {:.2}× the layout floor, {:.2}× the inline call |",
        packets / raw,
        packets / layout,
        packets / call
    );
    println!(
        "| rpc-core alone: the same echo through the packets between two threads, heap region | {threads:.0} | {:.2}× the ping-pong; the file transport adds {:.0} ns |",
        threads / raw,
        packets - threads
    );
    println!(
        "| rpc-core alone, the echo hand-written on `Port` (no derive) | {by_hand:.0} | {:.2}× the ping-pong; the generated code costs {:.2}× this |",
        by_hand / raw,
        threads / by_hand
    );
    println!(
        "| Unix-domain socket, 8 B request + 8 B reply | {socket:.0} | ferry is {:.1}× faster (goal ≥ 10×) |",
        socket / call
    );
    println!();
    println!("| client processes | calls/s (median of 3) | vs 1 client |");
    println!("|---:|---:|---:|");
    let mut one = None;
    for &n in &args.clients {
        let rate = throughput(&path, n, &args)?;
        let base = *one.get_or_insert(rate);
        println!("| {n} | {rate:.0} | {:.2} |", rate / base);
    }
    let stats = server.shutdown(Duration::from_secs(5)).stats;
    println!();
    println!(
        "server ({} worker{}): {} calls served, {} failed",
        args.workers,
        if args.workers == 1 { "" } else { "s" },
        stats.served,
        stats.failed
    );
    Ok(())
}

pub fn peer(args: PeerArgs) -> Res<()> {
    match args.role {
        Role::Pingpong => {
            let file = PingPongFile::open(&args.path)?;
            let word = file.word();
            loop {
                let mut v = word.load(Ordering::Acquire);
                while v % 2 == 0 {
                    std::hint::spin_loop();
                    v = word.load(Ordering::Acquire);
                }
                if v == u64::MAX {
                    return Ok(());
                }
                word.store(v + 1, Ordering::Release);
            }
        }
        Role::Layout => {
            let file = PingPongFile::open(&args.path)?;
            let lines = CallLines::new(&file);
            let mut seen = 0;
            loop {
                let mut trip = lines.client_box.load(Ordering::Acquire);
                while trip == seen {
                    std::hint::spin_loop();
                    trip = lines.client_box.load(Ordering::Acquire);
                }
                if trip == u64::MAX {
                    return Ok(());
                }
                let id = lines.request.load(Ordering::Relaxed);
                let opcode = lines.opcode.load(Ordering::Relaxed);
                lines
                    .reply
                    .store(demo::mix(id) ^ (opcode ^ 7), Ordering::Relaxed);
                lines.server_box.store(trip, Ordering::Release);
                seen = trip;
            }
        }
        Role::Uds => {
            let mut s = UnixStream::connect(&args.path)?;
            let mut buf = [0u8; 8];
            while s.read_exact(&mut buf).is_ok() {
                s.write_all(&buf)?;
            }
            Ok(())
        }
        Role::Rpc => {
            let mut c = DemoHandle::attach(&args.path, Duration::from_secs(10))?;
            let mut id = 0u64;
            for run in 0..=args.runs {
                let t = Instant::now();
                for _ in 0..args.trips {
                    id += 1;
                    if c.echo(id)? != (id, demo::mix(id)) {
                        return Err("a wrong reply".into());
                    }
                }
                if run > 0 {
                    println!("RUN {}", t.elapsed().as_nanos() as f64 / args.trips as f64);
                }
            }
            Ok(())
        }
        Role::Load => {
            let mut c = DemoHandle::attach(&args.path, Duration::from_secs(10))?;
            println!("ready");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            let base = (std::process::id() as u64) << 40;
            for i in 0..args.trips {
                let id = base | i;
                if c.echo(id)? != (id, demo::mix(id)) {
                    return Err("a wrong reply".into());
                }
            }
            println!("done");
            Ok(())
        }
    }
}
