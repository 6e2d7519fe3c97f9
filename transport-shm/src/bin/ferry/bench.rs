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
//!
//! The shared-memory round trips run on the same two CPUs for every row (`--cpus`; by default two
//! CPUs of different cores chosen here), so that a ratio compares the protocols and not where
//! the scheduler happened to put the two sides: on the H200 host the ping-pong alone moved
//! between 103 and 203 ns from run to run unpinned. The socket and the throughput runs are not
//! pinned.

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
    /// The two CPUs the round trips run on, as `A,B` (the caller on A, the answering side on
    /// B); `auto` picks two CPUs of different cores among those this process may use; `none`
    /// leaves placement to the scheduler.
    #[arg(long, default_value = "auto")]
    cpus: String,
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
    /// The CPU to run on.
    #[arg(long)]
    cpu: Option<usize>,
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs this thread (and the threads it starts from now on) on `cpus` only.
fn pin_to(cpus: &[usize]) -> Res<()> {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| format!("cannot run on CPUs {cpus:?}: {e}").into())
}

/// The core a CPU belongs to, as the kernel names it (its list of hardware-thread siblings).
fn core_of(cpu: usize) -> Option<String> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ))
    .ok()
    .map(|s| s.trim().to_string())
}

/// The two CPUs of `--cpus`: `None` for `none`, or where fewer than two CPUs are allowed under
/// `auto`. `auto` takes the highest-numbered allowed CPU (CPU 0 takes most interrupts) and the
/// next one below it on another core (two hardware threads of one core share their caches, which
/// would measure another machine).
fn pick_cpus(spec: &str) -> Res<Option<(usize, usize)>> {
    match spec {
        "none" => Ok(None),
        "auto" => {
            let allowed = allowed_cpus();
            let Some(&a) = allowed.last() else {
                return Ok(None);
            };
            let core = core_of(a);
            let other = allowed
                .iter()
                .rev()
                .skip(1)
                .find(|&&c| core.is_none() || core_of(c) != core);
            Ok(other.map(|&b| (b, a)))
        }
        pair => {
            let parse = |s: &str| s.trim().parse::<usize>().ok();
            match pair.split_once(',').map(|(a, b)| (parse(a), parse(b))) {
                Some((Some(a), Some(b))) if a != b => Ok(Some((a, b))),
                _ => Err(format!(
                    "--cpus takes `auto`, `none` or two different CPUs as `A,B`, not {pair:?}"
                )
                .into()),
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spawn_peer(
    role: &str,
    path: &Path,
    trips: u64,
    runs: usize,
    piped_in: bool,
    cpu: Option<usize>,
) -> Res<Child> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["peer", role]).arg(path).args([
        "--trips",
        &trips.to_string(),
        "--runs",
        &runs.to_string(),
    ]);
    if let Some(cpu) = cpu {
        command.args(["--cpu", &cpu.to_string()]);
    }
    Ok(command
        .stdin(if piped_in {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Bytes of the raw ping-pong's mapping: room for `LINES` lines on pages of their own.
const PING_PONG_BYTES: usize = LINES * 4096 + 4096;

/// Untimed round trips at the start of each run on a new line or port.
const WARM_UP: u64 = 2_000;

/// How many cache lines (and ports) the round trips rotate over, one per run.
///
/// How long a line takes to cross between two cores depends on the line: on the H200 host, the
/// same ping-pong between the same two CPUs measured 160 ns on some lines and 240 ns on others,
/// each steadily (its physical address decides where in the processor the line is tracked). A
/// figure from one line would compare the protocols and the luck of two addresses; each run
/// therefore uses another line (the ping-pong) or another port (ferry's calls), and the medians
/// are over lines as well as runs.
const LINES: usize = 16;

/// The byte offset of the ping-pong's line for run `run`: each on its own page, at a different
/// offset within it.
fn ping_pong_offset(run: usize) -> usize {
    4096 + (run % LINES) * (4096 + 64)
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
        file.set_len(PING_PONG_BYTES as u64)?;
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
        let map = memmap2::MmapOptions::new()
            .len(PING_PONG_BYTES)
            .map_raw(&file)?;
        Ok(PingPongFile {
            map,
            path: path.to_path_buf(),
        })
    }

    /// The `u64` at byte `offset` (a multiple of 8 below `PING_PONG_BYTES`).
    fn word_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset < PING_PONG_BYTES);
        // SAFETY: the mapping is `PING_PONG_BYTES`, page aligned, alive as long as `self`, and `offset`
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
fn in_process(args: &BenchArgs, typed: bool, server_cpu: Option<usize>) -> f64 {
    let region =
        rpc_core::HeapRegion::<transport_shm::ShmMailbox>::new(64, 1).expect("a valid layout");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let opcode = Demo::Echo.opcode();
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(cpu) = server_cpu {
                // Best effort: the caller already ran on these CPUs.
                let _ = pin_to(&[cpu]);
            }
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

/// `steps` steps of a dependent chain of arithmetic: work a side does between receiving and
/// answering, without touching memory.
fn work(steps: u64) {
    let mut x = steps;
    for _ in 0..steps {
        x = std::hint::black_box(x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17));
    }
    std::hint::black_box(x);
}

/// How many `work` steps take `ns` nanoseconds on this CPU (the fastest of a few timings).
fn work_steps(ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    const PROBE: u64 = 1_000_000;
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            work(PROBE);
            t.elapsed().as_nanos() as f64
        })
        .fold(f64::MAX, f64::min);
    ((ns as f64 * PROBE as f64 / best).round() as u64).max(1)
}

/// The raw ping-pong; with `steps`, each side first does that much `work` on receiving.
fn raw_pingpong(dir: &str, args: &BenchArgs, peer_cpu: Option<usize>, steps: u64) -> Res<f64> {
    let path = PathBuf::from(format!("{dir}/ferry-bench-pp-{}", std::process::id()));
    let file = PingPongFile::create(&path)?;
    let mut runs = Vec::new();
    // Each run on its own line (`LINES`), with a peer started for it; run 0 warms up.
    for run in 0..=args.runs {
        let offset = ping_pong_offset(run);
        let mut child = spawn_peer("pingpong", &path, steps, offset, false, peer_cpu)?;
        let word = file.word_at(offset);
        let mut v = 0u64;
        let mut trip = || {
            word.store(v + 1, Ordering::Release);
            wait_for(word, v + 2);
            work(steps);
            v += 2;
        };
        (0..WARM_UP).for_each(|_| trip());
        let t = Instant::now();
        (0..args.trips).for_each(|_| trip());
        if run > 0 {
            runs.push(t.elapsed().as_nanos() as f64 / args.trips as f64);
        }
        word.store(u64::MAX, Ordering::Release);
        child.wait()?;
    }
    std::fs::remove_file(&file.path)?;
    Ok(median(runs))
}

/// The layout floor: a request (opcode in the header line, id in the slot line) and its reply
/// (in the slot line), each handed over by a store to the sender's mailbox line, between two
/// processes; no locks, no flips, no dispatch.
fn raw_layout(dir: &str, args: &BenchArgs, peer_cpu: Option<usize>) -> Res<f64> {
    let path = PathBuf::from(format!("{dir}/ferry-bench-layout-{}", std::process::id()));
    let file = PingPongFile::create(&path)?;
    let mut child = spawn_peer("layout", &path, 0, 0, false, peer_cpu)?;
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

fn uds(args: &BenchArgs, peer_cpu: Option<usize>) -> Res<f64> {
    let path = PathBuf::from(format!("/tmp/ferry-bench-{}.sock", std::process::id()));
    let listener = UnixListener::bind(&path)?;
    let mut child = spawn_peer("uds", &path, 0, 0, false, peer_cpu)?;
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

/// Times `echo` calls from a client process on CPU `client_cpu` to the server at `path`.
fn rpc(path: &Path, args: &BenchArgs, client_cpu: Option<usize>) -> Res<f64> {
    let mut child = spawn_peer("rpc", path, args.trips, args.runs, false, client_cpu)?;
    let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut runs = Vec::new();
    for line in out.lines() {
        if let Some(rest) = line?.strip_prefix("RUN ") {
            let ns = rest.split_whitespace().next().unwrap_or_default();
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
            let mut c = spawn_peer("load", path, args.load_calls, 1, true, None)?;
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
    let everywhere = allowed_cpus();
    let pinned = pick_cpus(&args.cpus)?;
    let placement = match pinned {
        Some((a, b)) => format!("round trips on CPUs {a} (caller) and {b} (answering side)"),
        None => "round trips unpinned".to_string(),
    };
    println!(
        "ferry bench: {cpu}, {cores} cores; {} trips × {} runs (medians), {} calls per client in throughput runs; {placement}",
        args.trips, args.runs, args.load_calls
    );
    let (caller, answerer) = (pinned.map(|p| p.0), pinned.map(|p| p.1));
    if let Some(a) = caller {
        pin_to(&[a])?;
    }
    let raw = raw_pingpong("/dev/shm", &args, answerer, 0)?;
    let with_work: Vec<(u64, f64)> = [10, 25, 50]
        .into_iter()
        .map(|ns| {
            Ok((
                ns,
                raw_pingpong("/dev/shm", &args, answerer, work_steps(ns))?,
            ))
        })
        .collect::<Res<_>>()?;
    let layout = raw_layout("/dev/shm", &args, answerer)?;
    let config = ServerConfig {
        workers: args.workers,
        fingerprint: Demo::FINGERPRINT,
        ..ServerConfig::default()
    };
    // A server started while this thread runs on B has its workers there (threads start with
    // their parent's CPUs); the client process runs on A.
    let start_on =
        |cpu: Option<usize>, start: &mut dyn FnMut() -> Res<ShmServer>| -> Res<ShmServer> {
            if let Some(b) = cpu {
                pin_to(&[b])?;
            }
            let server = start();
            if let Some(a) = caller {
                pin_to(&[a])?;
            }
            server
        };
    let call = {
        let path = path_for(&format!("bench-inline-{}", std::process::id()));
        let server = start_on(answerer, &mut || {
            Ok(ShmServer::start(&path, config.clone(), demo::DemoHandler)?)
        })?;
        let ns = rpc(&path, &args, caller)?;
        server.shutdown(Duration::from_secs(5));
        ns
    };
    let packets = {
        let path = path_for(&format!("bench-packets-{}", std::process::id()));
        let packets_only = |port: &mut transport_shm::ServerPort<'_, '_>| demo::serve(port);
        let server = start_on(answerer, &mut || {
            Ok(ShmServer::start(&path, config.clone(), packets_only)?)
        })?;
        let ns = rpc(&path, &args, caller)?;
        server.shutdown(Duration::from_secs(5));
        ns
    };
    let threads = in_process(&args, true, answerer);
    let by_hand = in_process(&args, false, answerer);
    // The socket and the throughput runs are left to the scheduler: a blocking read is woken
    // fastest on the CPU the scheduler picks (pinned to two CPUs, the socket measured 5× slower
    // on a 2-CPU machine).
    if pinned.is_some() && !everywhere.is_empty() {
        pin_to(&everywhere)?;
    }
    let socket = uds(&args, None)?;
    let path = path_for(&format!("bench-{}", std::process::id()));
    let server = ShmServer::start(&path, config, demo::DemoHandler)?;
    println!();
    println!("| round trip between two processes | median ns | ratio |");
    println!("|---|---:|---:|");
    println!("| raw atomic ping-pong (one u64 in the mapping) | {raw:.0} | 1.00 |");
    for (ns, t) in &with_work {
        println!(
            "| the same ping-pong, each side working {ns} ns on receiving before it answers | {t:.0} | {:.2}× |",
            t / raw
        );
    }
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
    if let Some(cpu) = args.cpu {
        pin_to(&[cpu])?;
    }
    match args.role {
        Role::Pingpong => {
            let file = PingPongFile::open(&args.path)?;
            // `--runs` is the line's byte offset here (`raw_pingpong`).
            let word = file.word_at(args.runs);
            loop {
                let mut v = word.load(Ordering::Acquire);
                while v % 2 == 0 {
                    std::hint::spin_loop();
                    v = word.load(Ordering::Acquire);
                }
                if v == u64::MAX {
                    return Ok(());
                }
                // `--trips` is the work per answer (`raw_pingpong`).
                work(args.trips);
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
            let mut first = DemoHandle::attach(&args.path, Duration::from_secs(10))?;
            let mut id = 0u64;
            for run in 0..=args.runs {
                // Each run on another port (`LINES`): a handle whose search starts elsewhere
                // claims another port, and gives it back when dropped.
                let mut c = DemoHandle::new(first.client().handle(run as u32 * 5));
                let mut call = || -> Res<()> {
                    id += 1;
                    if c.echo(id)? != (id, demo::mix(id)) {
                        return Err("a wrong reply".into());
                    }
                    Ok(())
                };
                for _ in 0..WARM_UP {
                    call()?;
                }
                let t = Instant::now();
                for _ in 0..args.trips {
                    call()?;
                }
                let ns = t.elapsed().as_nanos() as f64 / args.trips as f64;
                if run > 0 {
                    println!("RUN {ns} PORT {:?}", c.client().held_port());
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
