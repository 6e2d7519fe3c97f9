//! `ferry bench`: one run measuring a ferry call against its baselines, medians of several runs.
//!
//! - raw: one `AtomicU64` in a shared mapping, ping-ponged between two processes (the floor),
//!   once with the spin-wait hint between polls (as ferry polls) and once without; every ratio is
//!   against the faster of the two; also with 10, 25 and 50 ns of work per side;
//! - layout floor: the same two processes exchanging a request and its reply through the four
//!   cache lines a ferry call moves (each side's mailbox line, the packet's header and slot), with
//!   plain loads and stores and no protocol: what this region layout costs before any logic;
//! - ferry: an `echo` call from a client process to a server with one worker, inline (the path the
//!   generated client takes for small fixed calls) from a sticky handle and from one that claims
//!   a port for each call, and the same call through the packets (a server whose handler serves
//!   no inline calls);
//! - socket: an 8-byte request and reply over a Unix-domain stream socket between two processes;
//! - throughput: `echo` calls per second with 1, 2, 4, 8 client processes, each warmed up
//!   before a common start and timing its own calls (the rate: every call over the span from
//!   the first timed call to the last);
//! - bulk: a request of N bytes (4 KiB, 64 KiB, 1 MiB by default) and an 8-byte reply, between
//!   two processes, the handler reading every byte where it lies (the bulk area, sized to the
//!   largest request so each crosses in one handoff), against a memcpy of the same N bytes
//!   timed in the client process in the same run, and against the inline call;
//! - sweep: a request of N bytes (8 B to 1 MiB by default) and an 8-byte reply, timed as the echo
//!   is (a run of calls, not each call), as a `Bytes` argument at every size and as fixed
//!   arguments where a fixed call has that size (8, 32, 40, 64 bytes; also with a reply of N
//!   bytes), every size in each run; each against the ping-pong, and whether any size is slower
//!   than the next one up (by more than 5 %); built with the `iceoryx2` feature, the same sizes
//!   through iceoryx2's request-response on the same two CPUs, side by side
//!   (`cargo run --release -p ferry-rpc-cli --features iceoryx2 -- bench`).
//!
//! The shared-memory round trips run on the same two CPUs for every row (`--cpus`; by default two
//! CPUs of different cores chosen here), so that a ratio compares the protocols and not where
//! the scheduler happened to put the two sides: unpinned, the ping-pong alone moves from run to
//! run by more than the differences being measured (`BENCHMARKS-history.md`). The socket and the
//! throughput runs are not pinned (the throughput runs are with `--throughput-pinned`: each
//! client process and each worker on a CPU of its own).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_demo::{self as demo, Demo, DemoService};
use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmServer};

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
    #[arg(long, default_value_t = 200_000)]
    load_calls: u64,
    /// Client process counts for the throughput runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    clients: Vec<u32>,
    /// Server worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The servers' ports (a multiple of 32; more than 1024 are looked at a 1024-port window a
    /// worker's pass).
    #[arg(long, default_value_t = ServerConfig::default().ports)]
    ports: u32,
    /// Server worker counts for the throughput runs (each with every `--clients` count); counts
    /// above this machine's CPUs are left out.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    throughput_workers: Vec<usize>,
    /// Throughput runs with every thread on a CPU of its own: client process i on this process's
    /// i-th allowed CPU, the server's workers on the last ones (a run whose clients and workers
    /// outnumber the CPUs runs unpinned, and is marked so). By default the scheduler places them.
    #[arg(long)]
    throughput_pinned: bool,
    /// The two CPUs the round trips run on, as `A,B` (the caller on A, the answering side on
    /// B); `auto` picks two CPUs of different cores among those this process may use; `none`
    /// leaves placement to the scheduler.
    #[arg(long, default_value = "auto")]
    cpus: String,
    /// Request sizes of the bulk rows, in bytes (suffixes K and M: 4K, 1M); `none` skips them.
    #[arg(long, value_delimiter = ',', default_value = "4K,64K,1M")]
    bulk: Vec<String>,
    /// Request sizes of the sweep (a request of N bytes, an 8-byte reply, timed as the echo
    /// is), in bytes (suffixes K and M); `none` skips it.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8,32,40,64,128,256,1K,4K,64K,1M"
    )]
    sweep: Vec<String>,
}

/// The largest request the bulk rows send (the bench service's limit).
const BULK_LIMIT: u64 = 64 << 20;

/// The bulk rows' service: the request's bytes read once, an 8-byte reply.
#[derive(ferry_shm::RpcOpcodes)]
#[rpc(service = "ferry.bench.bulk")]
enum BulkBench {
    /// A fold of the request's 8-byte words (a read of every byte at about the speed of reading
    /// them: the handler's own work should not hide the transport's).
    #[rpc(response = u64, limit = BULK_LIMIT)]
    Take { data: ferry_shm::Bytes },
    /// The request's length only: what a transport costs when the handler reads none of the
    /// bytes (as a peer's benchmark that only receives its request measures).
    #[rpc(response = u64, limit = BULK_LIMIT)]
    Len { data: ferry_shm::Bytes },
    /// Fixed arguments of 8 bytes (the sweep): their first word back.
    #[rpc(response = u64)]
    Fixed8 { a: [u64; 1] },
    /// Fixed arguments of 32 bytes.
    #[rpc(response = u64)]
    Fixed32 { a: [u64; 4] },
    /// Fixed arguments of 40 bytes.
    #[rpc(response = u64)]
    Fixed40 { a: [u64; 5] },
    /// Fixed arguments of 64 bytes (a slot: the most a fixed call takes).
    #[rpc(response = u64)]
    Fixed64 { a: [u64; 8] },
    /// 8 bytes each way: the arguments back.
    #[rpc(response = [u64; 1])]
    Mirror8 { a: [u64; 1] },
    /// 32 bytes each way.
    #[rpc(response = [u64; 4])]
    Mirror32 { a: [u64; 4] },
    /// 40 bytes each way.
    #[rpc(response = [u64; 5])]
    Mirror40 { a: [u64; 5] },
    /// 64 bytes each way.
    #[rpc(response = [u64; 8])]
    Mirror64 { a: [u64; 8] },
}

struct Taker;

impl BulkBenchServer for Taker {
    fn take(&self, data: &[u8]) -> u64 {
        fold(data)
    }
    fn len(&self, data: &[u8]) -> u64 {
        data.len() as u64
    }
    fn fixed8(&self, a: [u64; 1]) -> u64 {
        a[0]
    }
    fn fixed32(&self, a: [u64; 4]) -> u64 {
        a[0]
    }
    fn fixed40(&self, a: [u64; 5]) -> u64 {
        a[0]
    }
    fn fixed64(&self, a: [u64; 8]) -> u64 {
        a[0]
    }
    fn mirror8(&self, a: [u64; 1]) -> [u64; 1] {
        a
    }
    fn mirror32(&self, a: [u64; 4]) -> [u64; 4] {
        a
    }
    fn mirror40(&self, a: [u64; 5]) -> [u64; 5] {
        a
    }
    fn mirror64(&self, a: [u64; 8]) -> [u64; 8] {
        a
    }
}

/// What [`BulkBench::Take`] replies: a fold of the bytes, eight at a time.
fn fold(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail = words.remainder().iter().fold(0u64, |a, &b| a ^ b as u64);
    words.fold(tail, |a, w| {
        a ^ u64::from_ne_bytes(w.try_into().expect("8 bytes"))
    })
}

/// `4K`, `64K`, `1M`, `100` as bytes (for option `flag`).
fn parse_size(flag: &str, s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, unit) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{flag}: {s:?} is not a size (4096, 4K, 1M)"))?;
    match n.checked_mul(unit) {
        Some(b) if b > 0 && b as u64 <= BULK_LIMIT => Ok(b),
        _ => Err(format!(
            "{flag}: {s:?} is not between 1 byte and {} MiB",
            BULK_LIMIT >> 20
        )),
    }
}

/// The sizes that option `flag` (`--bulk`, `--sweep`) lists (none for `none`).
fn sizes_of(flag: &str, list: &[String]) -> Result<Vec<usize>, String> {
    if list.len() == 1 && list[0] == "none" {
        return Ok(Vec::new());
    }
    list.iter().map(|s| parse_size(flag, s)).collect()
}

/// The bulk rows' sizes (none for `--bulk none`).
fn bulk_sizes(args: &BenchArgs) -> Result<Vec<usize>, String> {
    sizes_of("--bulk", &args.bulk)
}

/// The sweep's sizes (none for `--sweep none`), smallest first.
fn sweep_sizes(args: &BenchArgs) -> Result<Vec<usize>, String> {
    let mut sizes = sizes_of("--sweep", &args.sweep)?;
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// Calls of a sweep's size `n` in one timed run: `trips` for the small ones, fewer for large
/// ones (about 256 MiB a run at most, at least 20).
fn sweep_trips(n: usize, trips: u64) -> u64 {
    ((256u64 << 20) / n.max(1) as u64).clamp(20, trips.max(20))
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
    /// The same from a handle that claims and frees a port on every call (not sticky).
    RpcFree,
    /// Wait for "go" on stdin, make the calls, print "done".
    Load,
    /// Time bulk calls and a memcpy of each size, print one line per size.
    Bulk,
    /// Time calls with a request of each size (the sweep), print one line per size.
    Sweep,
    /// Serve the sweep's requests through iceoryx2's request-response (the `iceoryx2` feature).
    #[cfg(feature = "iceoryx2")]
    Iceoryx2Server,
    /// Time the sweep's sizes through iceoryx2's request-response, print one line per size.
    #[cfg(feature = "iceoryx2")]
    Iceoryx2,
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
    /// Where the line (ping-pong) or the four lines (layout) start in the mapping, in bytes.
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// `work` steps to run on receiving, before answering (ping-pong).
    #[arg(long, default_value_t = 0)]
    work: u64,
    /// Demote the line after answering (ping-pong), as an inline-call worker does.
    #[arg(long)]
    demote: bool,
    /// Poll without a pause instruction between polls (ping-pong).
    #[arg(long)]
    no_pause: bool,
    /// Request sizes in bytes (bulk).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
}

/// Checks the counts before anything runs (see `crate::check`).
pub fn check(args: &BenchArgs) -> Result<(), String> {
    crate::at_least_one("--trips", args.trips)?;
    crate::at_least_one("--runs", args.runs as u64)?;
    crate::at_least_one("--load-calls", args.load_calls)?;
    let ports = args.ports;
    crate::check_ports(ports)?;
    crate::check_workers(args.workers, ports)?;
    bulk_sizes(args)?;
    sweep_sizes(args)?;
    if args.clients.is_empty() {
        return Err("--clients: give at least one count".into());
    }
    if args.throughput_workers.is_empty() {
        return Err("--throughput-workers: give at least one count".into());
    }
    for &w in &args.throughput_workers {
        crate::at_least_one("--throughput-workers", w as u64)?;
        if w > ports as usize {
            return Err(format!(
                "--throughput-workers {w}: at most {ports}, the server's ports"
            ));
        }
    }
    for &n in &args.clients {
        crate::at_least_one("--clients", n.into())?;
        if n > ports {
            return Err(format!(
                "--clients {n}: at most {ports}, the server's ports (each client process holds one)"
            ));
        }
    }
    Ok(())
}

/// How `spawn_peer` starts a peer.
#[derive(Clone, Copy, Default)]
struct PeerOptions {
    trips: u64,
    runs: usize,
    offset: usize,
    work: u64,
    demote: bool,
    no_pause: bool,
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

/// The set of `cpus`.
fn cpu_set(cpus: &[usize]) -> rustix::thread::CpuSet {
    let mut set = rustix::thread::CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    set
}

/// Runs this thread (and the threads it starts from now on) on `cpus` only.
fn pin_to(cpus: &[usize]) -> Res<()> {
    rustix::thread::sched_setaffinity(None, &cpu_set(cpus))
        .map_err(|e| format!("cannot run on CPUs {cpus:?}: {e}").into())
}

/// A CPU's topology entry `what`, as the kernel writes it.
fn topology(cpu: usize, what: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The core a CPU belongs to, as the kernel names it (its list of hardware-thread siblings).
fn core_of(cpu: usize) -> Option<String> {
    topology(cpu, "thread_siblings_list")
}

/// Moves this process's threads named `name` to `cpus` (best effort: nothing if `cpus` is
/// empty or the threads cannot be listed).
fn move_thread(name: &str, cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    let set = cpu_set(cpus);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let tid = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok());
        if comm.trim() == name {
            if let Some(pid) = tid.and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::thread::sched_setaffinity(Some(pid), &set);
            }
        }
    }
}

/// Starts a server (`start`) with this thread on `on`, so that its workers run there; then puts
/// this thread back on `back` and the server's monitor on `monitor`.
fn start_on(
    on: &[usize],
    back: &[usize],
    monitor: &[usize],
    start: &mut dyn FnMut() -> Res<ShmServer>,
) -> Res<ShmServer> {
    pin_to(on)?;
    let server = start();
    pin_to(back)?;
    move_thread(ferry_shm::MONITOR_THREAD, monitor);
    server
}

/// The package (socket) a CPU belongs to.
fn package_of(cpu: usize) -> Option<String> {
    topology(cpu, "physical_package_id")
}

/// Where the round trips run: two CPUs (caller, answering side), or unpinned and why.
enum Placement {
    Pinned(usize, usize),
    Unpinned(String),
}

/// The CPUs of `--cpus`. `auto` takes the highest-numbered allowed CPU (CPU 0 takes most
/// interrupts) and the next one below it on another core of the same package if there is one,
/// else of another package (two hardware threads of one core share their caches, which would
/// measure another machine); with no second core it runs unpinned and says so. Two named CPUs
/// must be among those this process may use.
fn pick_cpus(spec: &str) -> Res<Placement> {
    let allowed = allowed_cpus();
    match spec {
        "none" => Ok(Placement::Unpinned("--cpus none".into())),
        "auto" => {
            let Some(&a) = allowed.last() else {
                return Ok(Placement::Unpinned("the allowed CPUs are unknown".into()));
            };
            let (core, package) = (core_of(a), package_of(a));
            let other_core = |c: &&usize| core.is_none() || core_of(**c) != core;
            let below = || allowed.iter().rev().skip(1);
            let other = below()
                .filter(other_core)
                .find(|c| package_of(**c) == package)
                .or_else(|| below().find(other_core));
            Ok(match other {
                Some(&b) => Placement::Pinned(b, a),
                None => Placement::Unpinned(format!(
                    "CPUs {allowed:?} are not two cores; the spinning rows share a core"
                )),
            })
        }
        pair => {
            let parse = |s: &str| s.trim().parse::<usize>().ok();
            let (a, b) = match pair.split_once(',').map(|(a, b)| (parse(a), parse(b))) {
                Some((Some(a), Some(b))) if a != b => (a, b),
                _ => {
                    return Err(format!(
                        "--cpus takes `auto`, `none` or two different CPUs as `A,B`, not {pair:?}"
                    )
                    .into())
                }
            };
            for c in [a, b] {
                if !allowed.contains(&c) {
                    return Err(format!(
                        "CPU {c} is not among those this process may use: {allowed:?}"
                    )
                    .into());
                }
            }
            Ok(Placement::Pinned(a, b))
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spawn_peer(role: &str, path: &Path, o: PeerOptions) -> Res<Child> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["peer", role]).arg(path);
    for (flag, value) in [
        ("--trips", o.trips),
        ("--runs", o.runs as u64),
        ("--offset", o.offset as u64),
        ("--work", o.work),
    ] {
        command.args([flag, &value.to_string()]);
    }
    if o.demote {
        command.arg("--demote");
    }
    if o.no_pause {
        command.arg("--no-pause");
    }
    if let Some(cpu) = o.cpu {
        command.args(["--cpu", &cpu.to_string()]);
    }
    command.env(PARENT_VAR, std::process::id().to_string());
    // A load peer waits for "go" on its stdin.
    Ok(command
        .stdin(if role == "load" {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Bytes of the raw mapping: a page for each of `LINES` runs.
const PING_PONG_BYTES: usize = LINES * 4096 + 4096;

/// Untimed round trips at the start of each run on a new line or port.
const WARM_UP: u64 = 2_000;

/// How many places in the raw mapping the raw round trips rotate over, one per run.
///
/// How long a line takes to cross between two cores depends on the line: the same ping-pong
/// between the same two CPUs is steadily faster on some lines than on others (its physical
/// address decides where in the processor the line is tracked; `shm/BENCHMARKS.md`). A
/// figure from one line would compare the protocols and the luck of two addresses; each run
/// therefore uses other lines (the raw round trips) or another port (ferry's calls, whose handle
/// starts its search elsewhere each run), and the medians are over lines as well as runs.
const LINES: usize = 16;

/// The byte offset of run `run`'s lines in the raw mapping: each run on its own page, at a
/// different offset within it (room for the layout floor's four lines).
fn run_offset(run: usize) -> usize {
    4096 + (run % LINES) * 4096 + (run % LINES) * 256 % 3840
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
        // SAFETY: the mapping is `PING_PONG_BYTES` long, page aligned, alive as long as `self`,
        // and `offset` is an aligned word inside it; both processes access these words only
        // atomically.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU64>() }
    }
}

/// The four lines of a call in a one-lane region of 64 ports with packed mailboxes, at their
/// offsets there (from `base`): the client's mailbox words, the server's, then port 0's header
/// and slot.
struct CallLines<'f> {
    client_box: &'f AtomicU64,
    server_box: &'f AtomicU64,
    opcode: &'f AtomicU64,
    request: &'f AtomicU64,
    reply: &'f AtomicU64,
}

impl<'f> CallLines<'f> {
    fn new(file: &'f PingPongFile, base: usize) -> Self {
        CallLines {
            client_box: file.word_at(base),
            server_box: file.word_at(base + 64),
            opcode: file.word_at(base + 128 + 8),
            request: file.word_at(base + 192),
            reply: file.word_at(base + 192 + 8),
        }
    }
}

/// Polls between two checks that the other side is still there.
const LIVENESS_POLLS: u32 = 1 << 16;

/// Spins until `ready` says yes, running the processor's spin-wait hint (`pause` on x86) between
/// polls if `pause`; every `LIVENESS_POLLS` polls asks `gone` whether the other side has gone,
/// and fails with its reason if so (the spin would never end).
#[inline(always)]
fn spin_until(
    pause: bool,
    mut ready: impl FnMut() -> bool,
    mut gone: impl FnMut() -> Res<Option<String>>,
) -> Res<()> {
    let mut polls = 0u32;
    while !ready() {
        if pause {
            std::hint::spin_loop();
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(LIVENESS_POLLS) {
            if let Some(why) = gone()? {
                return Err(why.into());
            }
        }
    }
    Ok(())
}

/// Spins until `word` holds `value`, or fails if `peer` exits first (`spin_until`).
fn wait_for(word: &AtomicU64, value: u64, peer: &mut Child, pause: bool) -> Res<()> {
    spin_until(
        pause,
        || word.load(Ordering::Acquire) == value,
        || {
            let status = peer.try_wait()?;
            Ok(status.map(|s| format!("a benchmark peer exited mid-run ({s})")))
        },
    )
}

/// In a peer: spins until `ready` says yes, or fails if `parent`, the process that started this
/// one (read once, at the start), has gone (`spin_until`).
fn peer_wait(
    parent: Option<rustix::process::Pid>,
    pause: bool,
    ready: impl FnMut() -> bool,
) -> Res<()> {
    spin_until(pause, ready, || {
        let gone = rustix::process::getppid() != parent;
        Ok(gone.then(|| "the benchmark that started this peer has gone".to_string()))
    })
}

/// The ferry-rpc protocol alone: an echo between two threads of this process over a heap region
/// of 64 ports (the same port count as the file), both sides spinning. `typed`: the demo
/// service's `echo` through the generated client trait and dispatch (what the file transport
/// runs); otherwise the same exchange hand-written on `Port` (words in lane 0's slot), so the
/// cost of the generated code shows as the difference.
fn in_process(args: &BenchArgs, typed: bool, server_cpu: Option<usize>) -> f64 {
    let region =
        ferry_rpc::HeapRegion::<ferry_shm::ShmMailbox>::new(64, 1).expect("a valid layout");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let opcode = Demo::Echo { id: 0 }.opcode();
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(cpu) = server_cpu {
                // The answering side on B, as in the other rows (B was checked by `pick_cpus`).
                if let Err(e) = pin_to(&[cpu]) {
                    eprintln!("ferry bench: the in-process server runs unpinned: {e}");
                }
            }
            let server = region.server();
            let mut buffers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if typed {
                    let _ = Demo::serve_one(&DemoService, &server, &mut buffers);
                } else if let Some(mut port) = server.try_open(()) {
                    let _ = port.recv_and_send(|slot, _| slot.words[1] = demo::mix(slot.words[0]));
                }
            }
        });
        let client = region.client();
        let demo = Demo::client(&client);
        let mut runs = Vec::new();
        let mut id = 0u64;
        for run in 0..=args.runs {
            // Each run on another port (its packet's lines elsewhere), as the other rows.
            client.set_cursor((run * 5 % 64) as u32);
            let ns = timed(args.trips, || {
                id += 1;
                let mut reply = 0;
                if typed {
                    reply = demo.echo(id).map_or(0, |r| r.mix);
                } else if let Ok(mut port) = client.open(opcode) {
                    let _ = port.send_and_recv(|s, _| s.words[0] = id, |s, _| reply = s.words[1]);
                }
                std::hint::black_box(reply);
                Ok(())
            });
            if run > 0 {
                runs.push(ns.expect("an in-process trip cannot fail") / args.trips as f64);
            }
        }
        stop.store(true, Ordering::Relaxed);
        median(runs)
    })
}

/// The floor of a bulk call whose handler reads every byte, with no protocol: two threads on
/// the caller's and the answering side's CPUs; one writes `n` bytes into a shared area and
/// flips a word, the other folds the bytes where they lie, writes the fold and flips back.
/// Median ns of a round trip.
fn bulk_floor(n: usize, args: &BenchArgs, cpus: (Option<usize>, Option<usize>)) -> f64 {
    /// One cache line of 64 bytes: the area's unit, aligned as a bulk area is.
    #[repr(C, align(64))]
    struct Line([u64; 8]);
    let area: Vec<Line> = (0..n.div_ceil(64)).map(|_| Line([0; 8])).collect();
    let base = area.as_ptr() as usize;
    let flag = AtomicU64::new(0);
    let reply = AtomicU64::new(0);
    let data: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
    let want = fold(&data);
    let per_run = ((256usize << 20) / n.max(1)).clamp(20, 2000);
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(b) = cpus.1 {
                let _ = pin_to(&[b]);
            }
            let mut seen = 0;
            loop {
                let v = flag.load(Ordering::Acquire);
                if v == seen || v.is_multiple_of(2) {
                    if v == u64::MAX - 1 {
                        return;
                    }
                    std::hint::spin_loop();
                    continue;
                }
                // SAFETY: the writer wrote `n` bytes of the area (which holds at least `n`)
                // before its release of `flag`, acquired above, and writes nothing more until
                // our reply.
                let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, n) };
                reply.store(fold(bytes), Ordering::Relaxed);
                seen = v + 1;
                flag.store(seen, Ordering::Release);
            }
        });
        let mut v = 0;
        let mut times = Vec::new();
        for run in 0..=args.runs {
            for _ in 0..per_run {
                let t = Instant::now();
                // SAFETY: the reader reads the area only between our release and its reply.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base as *mut u8, n) };
                v += 1;
                flag.store(v, Ordering::Release);
                v += 1;
                while flag.load(Ordering::Acquire) != v {
                    std::hint::spin_loop();
                }
                let ns = t.elapsed().as_nanos() as f64;
                assert_eq!(reply.load(Ordering::Relaxed), want, "the floor's fold");
                if run > 0 {
                    times.push(ns);
                }
            }
        }
        flag.store(u64::MAX - 1, Ordering::Release);
        median(times)
    })
}

/// `steps` steps of a dependent chain of arithmetic: work a side does between receiving and
/// answering, without touching memory.
fn work(steps: u64) {
    if steps == 0 {
        return;
    }
    let mut x = steps;
    for _ in 0..steps {
        x = std::hint::black_box(x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17));
    }
    std::hint::black_box(x);
}

/// How many `work` steps take `ns` nanoseconds on this CPU: the fastest of five timings of a
/// chain long enough (at least a millisecond) for a coarse clock.
fn work_steps(ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let mut probe = 1u64 << 16;
    let ns_per_step = loop {
        let best = (0..5)
            .map(|_| {
                let t = Instant::now();
                work(probe);
                t.elapsed().as_nanos() as f64
            })
            .fold(f64::MAX, f64::min);
        if best >= 1e6 || probe >= 1 << 32 {
            break best.max(1.0) / probe as f64;
        }
        probe *= 4;
    };
    ((ns as f64 / ns_per_step).round() as u64).clamp(1, 1 << 24)
}

/// Makes `trips` round trips with `trip` after `WARM_UP` untimed ones (at most `trips`);
/// returns the nanoseconds the timed ones took.
fn timed(trips: u64, mut trip: impl FnMut() -> Res<()>) -> Res<f64> {
    for _ in 0..WARM_UP.min(trips) {
        trip()?;
    }
    let t = Instant::now();
    for _ in 0..trips {
        trip()?;
    }
    Ok(t.elapsed().as_nanos() as f64)
}

/// One raw measurement: for each run (run 0 warms up), a peer of `role` started on the run's
/// lines (`run_offset`, zeroed first) and `run` timing the run on them (`timed`); `stop` then
/// tells the peer to exit.
fn raw_runs(
    dir: &str,
    args: &BenchArgs,
    role: &str,
    peer: PeerOptions,
    mut run: impl FnMut(&PingPongFile, usize, &mut Child) -> Res<f64>,
    stop: impl Fn(&PingPongFile, usize),
) -> Res<f64> {
    let path = PathBuf::from(format!("{dir}/ferry-bench-{role}-{}", std::process::id()));
    let file = PingPongFile::create(&path)?;
    let result = (|| {
        let mut runs = Vec::new();
        for n in 0..=args.runs {
            let offset = run_offset(n);
            // The run's lines start at 0 (a run may reuse an earlier run's lines).
            for at in (offset..offset + 256).step_by(8) {
                file.word_at(at).store(0, Ordering::Relaxed);
            }
            let mut child = spawn_peer(role, &path, PeerOptions { offset, ..peer })?;
            let outcome = run(&file, offset, &mut child);
            stop(&file, offset);
            let exited = child.wait()?;
            let ns = outcome?;
            if !exited.success() {
                return Err(format!("a benchmark peer failed ({exited})").into());
            }
            if n > 0 {
                runs.push(ns / args.trips as f64);
            }
        }
        Ok(median(runs))
    })();
    std::fs::remove_file(&file.path)?;
    result
}

/// The raw ping-pong; with `steps`, each side first does that much `work` on receiving; with
/// `demote`, the answering side demotes the line after answering (as an inline-call worker
/// does); with `pause`, both sides run the spin-wait hint between polls.
fn raw_pingpong(
    dir: &str,
    args: &BenchArgs,
    peer_cpu: Option<usize>,
    steps: u64,
    demote: bool,
    pause: bool,
) -> Res<f64> {
    let peer = PeerOptions {
        work: steps,
        demote,
        no_pause: !pause,
        cpu: peer_cpu,
        ..PeerOptions::default()
    };
    raw_runs(
        dir,
        args,
        "pingpong",
        peer,
        |file, offset, child| {
            let word = file.word_at(offset);
            let mut v = 0u64;
            timed(args.trips, || {
                word.store(v + 1, Ordering::Release);
                wait_for(word, v + 2, child, pause)?;
                work(steps);
                v += 2;
                Ok(())
            })
        },
        |file, offset| file.word_at(offset).store(u64::MAX, Ordering::Release),
    )
}

/// The layout floor: a request (opcode in the header line, id in the slot line) and its reply
/// (in the slot line), each handed over by a store to the sender's mailbox line, between two
/// processes; no locks, no flips, no dispatch.
fn raw_layout(dir: &str, args: &BenchArgs, peer_cpu: Option<usize>) -> Res<f64> {
    let peer = PeerOptions {
        cpu: peer_cpu,
        ..PeerOptions::default()
    };
    raw_runs(
        dir,
        args,
        "layout",
        peer,
        |file, offset, child| {
            let lines = CallLines::new(file, offset);
            let mut trip = 0u64;
            timed(args.trips, || {
                trip += 1;
                lines.opcode.store(7, Ordering::Relaxed);
                lines.request.store(trip, Ordering::Relaxed);
                lines.client_box.store(trip, Ordering::Release);
                wait_for(lines.server_box, trip, child, true)?;
                if lines.reply.load(Ordering::Relaxed) != demo::mix(trip) {
                    return Err("a wrong reply in the layout floor".into());
                }
                Ok(())
            })
        },
        |file, offset| {
            CallLines::new(file, offset)
                .client_box
                .store(u64::MAX, Ordering::Release)
        },
    )
}

fn uds(args: &BenchArgs) -> Res<f64> {
    let path = PathBuf::from(format!("/tmp/ferry-bench-{}.sock", std::process::id()));
    let listener = UnixListener::bind(&path)?;
    let mut child = spawn_peer("uds", &path, PeerOptions::default())?;
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

/// Times `echo` calls from a client process on CPU `client_cpu` to the server at `path`; `role`
/// is `rpc` (a sticky handle) or `rpc-free` (a handle that claims a port for each call).
fn rpc(path: &Path, args: &BenchArgs, client_cpu: Option<usize>, role: &str) -> Res<f64> {
    let peer = PeerOptions {
        trips: args.trips,
        runs: args.runs,
        cpu: client_cpu,
        ..PeerOptions::default()
    };
    let mut child = spawn_peer(role, path, peer)?;
    let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut runs = Vec::new();
    for line in out.lines() {
        if let Some(ns) = line?.strip_prefix("RUN ") {
            runs.push(ns.trim().parse::<f64>()?);
        }
    }
    child.wait()?;
    if runs.is_empty() {
        return Err("the rpc peer reported nothing".into());
    }
    Ok(median(runs))
}

/// The throughput table: echo calls per second for each `--clients` count (rows) against a
/// server with each `--throughput-workers` count (columns), every count of workers against the
/// first, each client count against the first row's; unpinned.
fn print_throughput(args: &BenchArgs, config: &ServerConfig) -> Res<()> {
    let cpus = allowed_cpus().len().max(1);
    let (workers, left_out): (Vec<usize>, Vec<usize>) =
        args.throughput_workers.iter().partition(|&&w| w <= cpus);
    let mut table: Vec<Vec<f64>> = Vec::new();
    let (mut served, mut failed) = (0, 0);
    let everywhere = allowed_cpus();
    let mut unpinned = Vec::new();
    for &w in &workers {
        let path = path_for(&format!("bench-load-{}", std::process::id()));
        // Pinned: the workers on the last `w` CPUs (they run where the thread that starts them
        // runs), the monitor anywhere.
        let worker_cpus = (args.throughput_pinned && w < everywhere.len())
            .then(|| &everywhere[everywhere.len() - w..]);
        let mut start = || -> Res<ShmServer> {
            let config = ServerConfig {
                workers: w,
                ..config.clone()
            };
            Ok(ShmServer::start(&path, config, Demo::server(DemoService))?)
        };
        let server = match worker_cpus {
            Some(cpus) => start_on(cpus, &everywhere, &everywhere, &mut start)?,
            None => start()?,
        };
        let mut column = Vec::new();
        for &n in &args.clients {
            let clients = worker_cpus
                .filter(|_| n as usize + w <= everywhere.len())
                .map(|_| &everywhere[..n as usize]);
            if args.throughput_pinned && clients.is_none() {
                unpinned.push((n, w));
            }
            column.push(throughput(&path, n, args, clients)?);
        }
        let stats = server.shutdown(Duration::from_secs(5)).stats;
        served += stats.served;
        failed += stats.failed;
        table.push(column);
    }
    println!();
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let name = |w: usize| count(w, "worker");
    let mut head = "| client processes |".to_string();
    let mut rule = "|---:|".to_string();
    for (i, &w) in workers.iter().enumerate() {
        head += &format!(" {}: calls/s (median of 3) | vs 1 client |", name(w));
        rule += "---:|---:|";
        if i > 0 {
            head += &format!(" vs {} |", name(workers[0]));
            rule += "---:|";
        }
    }
    println!("{head}");
    println!("{rule}");
    for (row, &n) in args.clients.iter().enumerate() {
        let mut line = format!("| {n} |");
        for (i, column) in table.iter().enumerate() {
            line += &format!(" {:.0} | {:.2} |", column[row], column[row] / column[0]);
            if i > 0 {
                line += &format!(" {:.2}× |", column[row] / table[0][row]);
            }
        }
        println!("{line}");
    }
    if !left_out.is_empty() {
        println!("(left out: {left_out:?} workers, more than this machine's {cpus} CPUs)");
    }
    if args.throughput_pinned {
        println!(
            "(pinned: each client process and each worker on a CPU of its own{})",
            if unpinned.is_empty() {
                String::new()
            } else {
                format!(
                    "; unpinned, more threads than CPUs: {}",
                    unpinned
                        .iter()
                        .map(|&(n, w)| format!("{} with {}", count(n as usize, "client"), name(w)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    println!();
    println!("throughput servers: {served} calls served, {failed} failed");
    Ok(())
}

fn throughput(path: &Path, clients: u32, args: &BenchArgs, cpus: Option<&[usize]>) -> Res<f64> {
    let mut rates = Vec::new();
    for _ in 0..3 {
        let mut children = Vec::new();
        for i in 0..clients as usize {
            let peer = PeerOptions {
                trips: args.load_calls,
                cpu: cpus.map(|c| c[i]),
                ..PeerOptions::default()
            };
            let mut c = spawn_peer("load", path, peer)?;
            let mut out = BufReader::new(c.stdout.take().ok_or("no stdout")?);
            let mut line = String::new();
            out.read_line(&mut line)?;
            if line.trim() != "ready" {
                return Err(format!("a load peer said {line:?}").into());
            }
            children.push((c, out));
        }
        for (c, _) in &mut children {
            writeln!(c.stdin.as_mut().ok_or("no stdin")?, "go")?;
        }
        // From the first client's first timed call to the last one's last: every client's calls
        // inside, none of their start-ups or warm-ups.
        let (mut first, mut last) = (u64::MAX, 0u64);
        for (_, out) in &mut children {
            let mut line = String::new();
            out.read_line(&mut line)?;
            let span = line
                .trim()
                .strip_prefix("done ")
                .and_then(|t| t.split_once(' '))
                .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
            let Some((start, end)) = span else {
                return Err(format!("a load peer said {line:?}").into());
            };
            first = first.min(start);
            last = last.max(end);
        }
        for (mut c, _) in children {
            c.wait()?;
        }
        let window = last.saturating_sub(first).max(1);
        rates.push((clients as u64 * args.load_calls) as f64 * 1e9 / window as f64);
    }
    Ok(median(rates))
}

/// This machine's monotonic clock in nanoseconds: one clock for every process, so that the
/// throughput peers' spans can be put together.
fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The environment variable that tells a peer which process started it.
const PARENT_VAR: &str = "FERRY_BENCH_PARENT";

/// Stops the benchmark on SIGINT, SIGTERM or SIGHUP as `serve` and `demo` stop: its files in
/// `/dev/shm` and its socket are removed, its peers end (each asked the kernel to kill it when
/// this process ends, [`peer`]) and the process exits with 128 + the signal's number.
fn stop_on_signal() -> Res<()> {
    crate::catch_signals()?;
    std::thread::Builder::new()
        .name("ferry-bench-signals".into())
        .spawn(|| loop {
            if let Some(signal) = crate::signalled() {
                let removed = remove_own_files();
                eprintln!(
                    "ferry bench: stopped by {signal}; its peers stopped, {removed} file(s) removed"
                );
                std::process::exit(128 + signal as i32);
            }
            std::thread::sleep(Duration::from_millis(10));
        })?;
    Ok(())
}

/// Removes what this process's benchmark may have created (every name ends with its pid): the
/// mappings and servers' files in `/dev/shm` and the Unix socket. Returns how many it removed.
fn remove_own_files() -> usize {
    let pid = std::process::id();
    let suffix = format!("-{pid}");
    let mut paths: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with("ferry-bench-") && n.ends_with(&suffix))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    paths.push(PathBuf::from(format!("/tmp/ferry-bench-{pid}.sock")));
    paths
        .iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

pub fn run(args: BenchArgs) -> Res<()> {
    stop_on_signal()?;
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
    let placement = match &pinned {
        Placement::Pinned(a, b) => {
            format!("round trips on CPUs {a} (caller) and {b} (answering side)")
        }
        Placement::Unpinned(why) => format!("round trips unpinned ({why})"),
    };
    println!(
        "ferry bench: {cpu}, {cores} cores; {} trips × {} runs (medians), {} calls per client in throughput runs; servers of {} ports; {placement}",
        args.trips, args.runs, args.load_calls, args.ports
    );
    let (caller, answerer) = match pinned {
        Placement::Pinned(a, b) => (Some(a), Some(b)),
        Placement::Unpinned(_) => (None, None),
    };
    if let Some(a) = caller {
        pin_to(&[a])?;
    }
    // Two baselines: polling with the spin-wait hint (`pause` on x86, long enough to show in a
    // round trip: `shm/BENCHMARKS.md`), as ferry's polls do, and without it; the
    // ratios are against the faster.
    let paused = raw_pingpong("/dev/shm", &args, answerer, 0, false, true)?;
    let tight = raw_pingpong("/dev/shm", &args, answerer, 0, false, false)?;
    let raw = paused.min(tight);
    let mut with_work = Vec::new();
    for ns in [10, 25, 50] {
        let steps = work_steps(ns);
        let plain = raw_pingpong("/dev/shm", &args, answerer, steps, false, true)?;
        let demoted = raw_pingpong("/dev/shm", &args, answerer, steps, true, true)?;
        with_work.push((ns, plain, demoted));
    }
    let layout = raw_layout("/dev/shm", &args, answerer)?;
    let config = ServerConfig {
        workers: args.workers,
        ports: args.ports,
        ..ServerConfig::default()
    };
    // The server's threads run where this thread runs when it starts them. Its one worker goes
    // on B (several share every CPU but A, the client's); its monitor, which wakes now and then,
    // moves off both if it can.
    let server_cpus: Option<Vec<usize>> = answerer.map(|b| {
        if args.workers <= 1 {
            vec![b]
        } else {
            everywhere
                .iter()
                .copied()
                .filter(|&c| Some(c) != caller)
                .collect()
        }
    });
    let start_pinned = |start: &mut dyn FnMut() -> Res<ShmServer>| -> Res<ShmServer> {
        match (&server_cpus, caller) {
            (Some(cpus), Some(a)) => {
                let spare: Vec<usize> = everywhere
                    .iter()
                    .copied()
                    .filter(|&c| Some(c) != caller && Some(c) != answerer)
                    .collect();
                start_on(cpus, &[a], &spare, start)
            }
            _ => start(),
        }
    };
    let (call, call_free) = {
        let path = path_for(&format!("bench-inline-{}", std::process::id()));
        let server = start_pinned(&mut || {
            Ok(ShmServer::start(
                &path,
                config.clone(),
                Demo::server(DemoService),
            )?)
        })?;
        let ns = rpc(&path, &args, caller, "rpc")?;
        let free = rpc(&path, &args, caller, "rpc-free")?;
        server.shutdown(Duration::from_secs(5));
        (ns, free)
    };
    let packets = {
        let path = path_for(&format!("bench-packets-{}", std::process::id()));
        // The demo's calls through the packets only: a server that offers no inline path.
        let packets_only = ServerConfig {
            inline: false,
            ..config.clone()
        };
        let server = start_pinned(&mut || {
            Ok(ShmServer::start(
                &path,
                packets_only.clone(),
                Demo::server(DemoService),
            )?)
        })?;
        let ns = rpc(&path, &args, caller, "rpc")?;
        server.shutdown(Duration::from_secs(5));
        ns
    };
    // Bulk: a server whose bulk area holds the largest request, one worker pinned as above.
    let sizes = bulk_sizes(&args)?;
    let bulk_rows = if sizes.is_empty() {
        Vec::new()
    } else {
        let path = path_for(&format!("bench-bulk-{}", std::process::id()));
        let bulk_config = ServerConfig {
            bulk: sizes.iter().copied().max().unwrap_or(0),
            ..config.clone()
        };
        let server = start_pinned(&mut || {
            Ok(ShmServer::start(
                &path,
                bulk_config.clone(),
                BulkBench::server(Taker),
            )?)
        })?;
        let mut rows = bulk(&path, &sizes, &args, caller)?;
        server.shutdown(Duration::from_secs(5));
        for row in &mut rows {
            row.floor = bulk_floor(row.size, &args, (caller, answerer));
        }
        rows
    };
    // The sweep: a server whose bulk area holds the largest request, one worker pinned as above.
    let sizes = sweep_sizes(&args)?;
    let sweep_rows = if sizes.is_empty() {
        Vec::new()
    } else {
        let path = path_for(&format!("bench-sweep-{}", std::process::id()));
        let sweep_config = ServerConfig {
            bulk: sizes.iter().copied().max().unwrap_or(0).div_ceil(64) * 64,
            ..config.clone()
        };
        let server = start_pinned(&mut || {
            Ok(ShmServer::start(
                &path,
                sweep_config.clone(),
                BulkBench::server(Taker),
            )?)
        })?;
        let mut rows = sweep(&path, &sizes, &args, caller)?;
        server.shutdown(Duration::from_secs(5));
        peer_sweep(&mut rows, &sizes, &args, (caller, answerer))?;
        rows
    };
    let threads = in_process(&args, true, answerer);
    let by_hand = in_process(&args, false, answerer);
    // The socket and the throughput runs are left to the scheduler: a blocking read is woken
    // fastest on the CPU the scheduler picks (pinned to two CPUs the socket was several times
    // slower: `BENCHMARKS-history.md`).
    if caller.is_some() && !everywhere.is_empty() {
        pin_to(&everywhere)?;
    }
    let socket = uds(&args)?;
    println!();
    println!(
        "| round trip between two processes | median ns | ratio to the faster ping-pong ({raw:.0} ns) |"
    );
    println!("|---|---:|---:|");
    println!(
        "| raw atomic ping-pong (one u64 in the mapping), spin-wait hint between polls | {paused:.0} | {:.2} |",
        paused / raw
    );
    println!(
        "| raw atomic ping-pong, polling without the hint | {tight:.0} | {:.2} |",
        tight / raw
    );
    for (ns, plain, demoted) in &with_work {
        println!(
            "| the same ping-pong, each side working {ns} ns on receiving before it answers | {plain:.0} | {:.2}× |",
            plain / raw
        );
        println!(
            "| ... and the answering side demoting the line after answering, as a ferry worker does | {demoted:.0} | {:.2}× |",
            demoted / raw
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
        "| ... from a handle that claims and frees a port on each call (`ClientConfig::sticky` off, the default) | {call_free:.0} | {:.2}× the ping-pong, {:.2}× the sticky call |",
        call_free / raw,
        call_free / call,
    );
    println!(
        "| ferry `echo` call through the packets | {packets:.0} | {:.2}× the ping-pong, {:.2}× the layout floor, {:.2}× the inline call |",
        packets / raw,
        packets / layout,
        packets / call
    );
    println!(
        "| ferry-rpc alone: the same echo through the packets between two threads, heap region | {threads:.0} | {:.2}× the ping-pong; the file transport adds {:.0} ns |",
        threads / raw,
        packets - threads
    );
    println!(
        "| ferry-rpc alone, the echo hand-written on `Port` (no derive) | {by_hand:.0} | {:.2}× the ping-pong; the generated code costs {:.2}× this |",
        by_hand / raw,
        threads / by_hand
    );
    println!(
        "| Unix-domain socket, 8 B request + 8 B reply | {socket:.0} | ferry is {:.1}× faster (goal ≥ 10×) |",
        socket / call
    );
    print_throughput(&args, &config)?;
    if !bulk_rows.is_empty() {
        println!();
        println!(
            "| bulk: request of N bytes + 8-byte reply | memcpy of N bytes (ns) | handler reads the length only (ns) | ratio to the memcpy | the same, minus the inline call, in memcpys | handler reads every byte (ns) | ratio to the memcpy | floor: written, handed over, read, no protocol (ns) | ratio to the floor |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &bulk_rows {
            println!(
                "| {} | {:.0} | {:.0} | {:.2}× | {:.2} | {:.0} | {:.2}× | {:.0} | {:.2}× |",
                size_name(r.size),
                r.memcpy,
                r.len,
                r.len / r.memcpy,
                (r.len - call) / r.memcpy,
                r.read,
                r.read / r.memcpy,
                r.floor,
                r.read / r.floor,
            );
        }
    }
    if !sweep_rows.is_empty() {
        print_sweep(&sweep_rows, raw, call);
    }
    Ok(())
}

/// One size's sweep figures (medians, ns a call; `None` where the size has no such call).
struct SweepRow {
    size: usize,
    /// A `Bytes` argument of `size` bytes, the handler reading its length.
    bytes: f64,
    /// Fixed arguments of `size` bytes, an 8-byte reply.
    fixed: Option<f64>,
    /// Fixed arguments and a fixed reply of `size` bytes each.
    mirror: Option<f64>,
    /// iceoryx2's request-response: a request of `size` bytes, an 8-byte reply (built with the
    /// `iceoryx2` feature).
    peer: Option<f64>,
}

/// The sweep's sizes through iceoryx2's request-response on the same two CPUs, into `rows`.
#[cfg(feature = "iceoryx2")]
fn peer_sweep(
    rows: &mut [SweepRow],
    sizes: &[usize],
    args: &BenchArgs,
    (caller, answerer): (Option<usize>, Option<usize>),
) -> Res<()> {
    let name = crate::iceoryx2_peer::service_name(std::process::id());
    let mut server = spawn_peer(
        "iceoryx2-server",
        Path::new(&name),
        PeerOptions {
            cpu: answerer,
            ..PeerOptions::default()
        },
    )?;
    let timed = sized_peer("iceoryx2", Path::new(&name), sizes, args, caller);
    // The server polls until stopped.
    let _ = server.kill();
    let _ = server.wait();
    for (row, f) in rows.iter_mut().zip(timed?) {
        if f[0] as usize != row.size {
            return Err("the iceoryx2 peer's sizes differ from the sweep's".into());
        }
        row.peer = Some(f[1]);
    }
    Ok(())
}

/// Without the `iceoryx2` feature, the sweep has no peer column.
#[cfg(not(feature = "iceoryx2"))]
fn peer_sweep(
    _: &mut [SweepRow],
    _: &[usize],
    _: &BenchArgs,
    _: (Option<usize>, Option<usize>),
) -> Res<()> {
    Ok(())
}

/// The lines a sweep's fixed call of `n` bytes each way takes (a `Bytes` argument goes into the
/// port's bulk area, beside an empty request in the head line).
fn sweep_path(n: usize) -> &'static str {
    if n <= 40 {
        "head line"
    } else {
        "head and wide lines"
    }
}

/// How much slower than the next size up a sweep's size may be before the sweep says so: the
/// medians of two sizes that cost the same differ by a few percent from run to run.
const SWEEP_SLACK: f64 = 1.05;

/// The sweep's table, ratios against the ping-pong `raw` and the inline echo `call`, then
/// whether any size was slower than the next one up.
fn print_sweep(rows: &[SweepRow], raw: f64, call: f64) {
    println!();
    let peer = rows.iter().any(|r| r.peer.is_some());
    println!(
        "| request of N bytes | `Bytes` argument (bulk area), 8-byte reply (ns) | ratio to the ping-pong | fixed arguments, 8-byte reply (ns) | ratio | fixed arguments and reply of N bytes each (ns) | ratio | fixed calls' inline lines |{}",
        if peer {
            " iceoryx2 request-response, N bytes, 8-byte reply (ns) | ferry's `Bytes` call ÷ iceoryx2's |"
        } else {
            ""
        }
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---|{}",
        if peer { "---:|---:|" } else { "" }
    );
    let cell = |v: Option<f64>| match v {
        Some(ns) => (format!("{ns:.0}"), format!("{:.2}×", ns / raw)),
        None => ("".to_string(), "".to_string()),
    };
    for r in rows {
        let (f, fr) = cell(r.fixed);
        let (m, mr) = cell(r.mirror);
        let path = if r.fixed.is_some() {
            sweep_path(r.size)
        } else {
            ""
        };
        let peer_cells = match r.peer {
            Some(ns) => format!(" {ns:.0} | {:.2}× |", r.bytes / ns),
            None if peer => " | |".to_string(),
            None => String::new(),
        };
        println!(
            "| {} | {:.0} | {:.2}× | {f} | {fr} | {m} | {mr} | {path} |{peer_cells}",
            size_name(r.size),
            r.bytes,
            r.bytes / raw,
        );
    }
    // Each column's sizes in turn: none slower than the next one up.
    let mut slower = Vec::new();
    type Column = fn(&SweepRow) -> Option<f64>;
    let columns: [(&str, Column); 3] = [
        ("`Bytes`", |r| Some(r.bytes)),
        ("fixed", |r| r.fixed),
        ("fixed each way", |r| r.mirror),
    ];
    for (name, get) in columns {
        let sized: Vec<(usize, f64)> = rows
            .iter()
            .filter_map(|r| get(r).map(|ns| (r.size, ns)))
            .collect();
        for pair in sized.windows(2) {
            let ((a, ta), (b, tb)) = (pair[0], pair[1]);
            if ta > tb * SWEEP_SLACK {
                slower.push(format!(
                    "{name} {} ({ta:.0} ns) > {} ({tb:.0} ns)",
                    size_name(a),
                    size_name(b)
                ));
            }
        }
    }
    let at_most = rows
        .iter()
        .filter(|r| r.size <= ferry_shm::ferry_rpc::service::INLINE_BYTES)
        .flat_map(|r| [Some(r.bytes), r.fixed, r.mirror])
        .flatten()
        .fold(0f64, f64::max);
    println!();
    println!(
        "sweep: the slowest call of at most {} bytes takes {at_most:.0} ns = {:.2}× the ping-pong, {:.2}× the inline echo (goal ≤ 2× the ping-pong)",
        ferry_shm::ferry_rpc::service::INLINE_BYTES,
        at_most / raw,
        at_most / call
    );
    let slack = (SWEEP_SLACK - 1.0) * 100.0;
    if slower.is_empty() {
        println!("sweep: no size slower than the next one up (by more than {slack:.0} %)");
    } else {
        println!(
            "sweep: sizes slower than the next one up by more than {slack:.0} %: {}",
            slower.join("; ")
        );
    }
}

/// Times calls with a request of each of `sizes` from a client process on CPU `client_cpu` to
/// the server at `path` (the sweep).
fn sweep(
    path: &Path,
    sizes: &[usize],
    args: &BenchArgs,
    client_cpu: Option<usize>,
) -> Res<Vec<SweepRow>> {
    let some = |v: f64| (v > 0.0).then_some(v);
    sized_peer("sweep", path, sizes, args, client_cpu)?
        .into_iter()
        .map(|f| {
            Ok(SweepRow {
                size: f[0] as usize,
                bytes: f[1],
                fixed: some(f[2]),
                mirror: some(f[3]),
                peer: None,
            })
        })
        .collect()
}

/// Runs a peer of `role` (`bulk`, `sweep`) that times calls of each of `sizes` on CPU
/// `client_cpu` against the server at `path`, and returns its lines: for each size, the size and
/// three figures (the peer prints them after its role's name in capitals).
fn sized_peer(
    role: &str,
    path: &Path,
    sizes: &[usize],
    args: &BenchArgs,
    client_cpu: Option<usize>,
) -> Res<Vec<[f64; 4]>> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["peer", role])
        .arg(path)
        .args(["--runs", &args.runs.to_string()])
        .args(["--trips", &args.trips.to_string()]);
    let list: Vec<String> = sizes.iter().map(|n| n.to_string()).collect();
    command.args(["--sizes", &list.join(",")]);
    if let Some(cpu) = client_cpu {
        command.args(["--cpu", &cpu.to_string()]);
    }
    command.env(PARENT_VAR, std::process::id().to_string());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let prefix = format!("{} ", role.to_uppercase());
    let mut rows = Vec::new();
    for line in out.lines() {
        let line = line?;
        if let Some(rest) = line.strip_prefix(&prefix) {
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|v| v.parse::<f64>())
                .collect::<Result<_, _>>()?;
            let row: [f64; 4] = f
                .try_into()
                .map_err(|_| format!("the {role} peer said {line:?}"))?;
            rows.push(row);
        }
    }
    let status = child.wait()?;
    if !status.success() || rows.len() != sizes.len() {
        return Err(format!(
            "the {role} peer failed ({status}, {} of {} sizes timed)",
            rows.len(),
            sizes.len()
        )
        .into());
    }
    Ok(rows)
}

/// In a sweep peer: one run of each fixed call of `n` bytes, `trips` calls (ns a call; `None`
/// for a size no call has): arguments of `n` bytes and an 8-byte reply, then `n` bytes each way.
fn fixed_calls(
    c: &BulkBenchClient<&ShmClient>,
    n: usize,
    trips: u64,
) -> Res<(Option<f64>, Option<f64>)> {
    let mut i = 0u64;
    let wrong = || -> Res<()> { Err("a wrong reply".into()) };
    macro_rules! both {
        ($k:literal, $fixed:ident, $mirror:ident) => {{
            let fixed = timed(trips, || {
                i += 1;
                if c.$fixed([i; $k])? != i {
                    return wrong();
                }
                Ok(())
            })?;
            let mirror = timed(trips, || {
                i += 1;
                if c.$mirror([i; $k])? != [i; $k] {
                    return wrong();
                }
                Ok(())
            })?;
            (Some(fixed / trips as f64), Some(mirror / trips as f64))
        }};
    }
    Ok(match n {
        8 => both!(1, fixed8, mirror8),
        32 => both!(4, fixed32, mirror32),
        40 => both!(5, fixed40, mirror40),
        64 => both!(8, fixed64, mirror64),
        _ => (None, None),
    })
}

/// `4 KiB`, `1 MiB`, `100 B`.
fn size_name(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// One size's bulk figures (medians, ns).
struct BulkRow {
    size: usize,
    /// The call whose handler reads every byte.
    read: f64,
    /// The call whose handler reads only the length.
    len: f64,
    /// A memcpy of `size` bytes in the client process.
    memcpy: f64,
    /// The floor of `read`: the same bytes written, handed over and read, with no protocol.
    floor: f64,
}

/// Times bulk calls of each size from a client process on CPU `client_cpu` to the server at
/// `path`, with a memcpy of each size in that process.
fn bulk(
    path: &Path,
    sizes: &[usize],
    args: &BenchArgs,
    client_cpu: Option<usize>,
) -> Res<Vec<BulkRow>> {
    Ok(sized_peer("bulk", path, sizes, args, client_cpu)?
        .into_iter()
        .map(|f| BulkRow {
            size: f[0] as usize,
            read: f[1],
            len: f[2],
            memcpy: f[3],
            floor: 0.0,
        })
        .collect())
}

pub fn peer(args: PeerArgs) -> Res<()> {
    // A peer never outlives the benchmark that started it, however that ends (a signal, a
    // crash): the kernel kills it when its parent ends. (`spawn_peer` is called from the
    // benchmark's main thread, which lives as long as its process.) A parent that ended before
    // this was asked has already left this process to another parent: it stops at once.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    let parent = rustix::process::getppid();
    if let Ok(started_by) = std::env::var(PARENT_VAR) {
        if parent.map(|p| p.as_raw_nonzero().get().to_string()) != Some(started_by) {
            return Ok(());
        }
    }
    if let Some(cpu) = args.cpu {
        pin_to(&[cpu])?;
    }
    match args.role {
        Role::Pingpong => {
            let file = PingPongFile::open(&args.path)?;
            let word = file.word_at(args.offset);
            loop {
                let mut v = 0;
                peer_wait(parent, !args.no_pause, || {
                    v = word.load(Ordering::Acquire);
                    v % 2 == 1
                })?;
                if v == u64::MAX {
                    return Ok(());
                }
                work(args.work);
                word.store(v + 1, Ordering::Release);
                if args.demote {
                    ferry_shm::cache::demote(word);
                }
            }
        }
        Role::Layout => {
            let file = PingPongFile::open(&args.path)?;
            let lines = CallLines::new(&file, args.offset);
            let mut seen = 0;
            loop {
                let mut trip = 0;
                peer_wait(parent, true, || {
                    trip = lines.client_box.load(Ordering::Acquire);
                    trip != seen
                })?;
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
        Role::Rpc | Role::RpcFree => {
            let config = ClientConfig::default()
                .service::<Demo>()
                .sticky(matches!(args.role, Role::Rpc));
            let first = ShmClient::attach(&args.path, config)?;
            let mut id = 0u64;
            for run in 0..=args.runs {
                // Each run on another port: a handle whose search starts elsewhere claims
                // another port, and gives it back when dropped.
                let shm = first.handle(run as u32 * 5);
                let c = Demo::client(&shm);
                let ns = timed(args.trips, || {
                    id += 1;
                    if c.echo(id)? != (id, demo::mix(id)).into() {
                        return Err("a wrong reply".into());
                    }
                    Ok(())
                })? / args.trips as f64;
                if run > 0 {
                    println!("RUN {ns}");
                }
            }
            Ok(())
        }
        Role::Load => {
            let config = ClientConfig::default().service::<Demo>().sticky(true);
            let shm = ShmClient::attach(&args.path, config)?;
            let c = Demo::client(&shm);
            let base = (std::process::id() as u64) << 40;
            let call = |i: u64| -> Res<()> {
                let id = base | i;
                if c.echo(id)? != (id, demo::mix(id)).into() {
                    return Err("a wrong reply".into());
                }
                Ok(())
            };
            // Warmed up (the port claimed and armed, the server's workers polling hot) before
            // the timed calls, which are timed here: the run's rate is steady state, not this
            // process's start.
            for i in 0..args.trips / 10 {
                call(i)?;
            }
            println!("ready");
            std::io::stdout().flush()?;
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            let start = monotonic_ns();
            for i in 0..args.trips {
                call(i)?;
            }
            let end = monotonic_ns();
            println!("done {start} {end}");
            std::io::stdout().flush()?;
            Ok(())
        }
        Role::Sweep => {
            let config = ClientConfig::default().service::<BulkBench>().sticky(true);
            let shm = ShmClient::attach(&args.path, config)?;
            let c = BulkBench::client(&shm);
            // Every size in each run, the runs one after another: a machine that slows down or
            // speeds up during the sweep moves every size's median alike, not the last sizes'.
            let mut times: Vec<[Vec<f64>; 3]> =
                args.sizes.iter().map(|_| Default::default()).collect();
            for run in 0..=args.runs {
                for (&n, times) in args.sizes.iter().zip(&mut times) {
                    let data: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
                    let trips = sweep_trips(n, args.trips);
                    let bytes = timed(trips, || {
                        if c.len(&data)? != n as u64 {
                            return Err("a wrong reply".into());
                        }
                        Ok(())
                    })? / trips as f64;
                    let (fixed, mirror) = fixed_calls(&c, n, trips)?;
                    if run > 0 {
                        times[0].push(bytes);
                        times[1].extend(fixed);
                        times[2].extend(mirror);
                    }
                }
            }
            for (&n, [bytes, fixed, mirror]) in args.sizes.iter().zip(times) {
                let med = |v: Vec<f64>| if v.is_empty() { 0.0 } else { median(v) };
                println!("SWEEP {n} {} {} {}", med(bytes), med(fixed), med(mirror));
            }
            Ok(())
        }
        #[cfg(feature = "iceoryx2")]
        Role::Iceoryx2Server => crate::iceoryx2_peer::serve(&args.path.to_string_lossy()),
        #[cfg(feature = "iceoryx2")]
        Role::Iceoryx2 => {
            let sizes: Vec<(usize, u64)> = (args.sizes.iter())
                .map(|&n| (n, sweep_trips(n, args.trips)))
                .collect();
            crate::iceoryx2_peer::sweep(&args.path.to_string_lossy(), &sizes, args.runs)
        }
        Role::Bulk => {
            let config = ClientConfig::default().service::<BulkBench>().sticky(true);
            let shm = ShmClient::attach(&args.path, config)?;
            let c = BulkBench::client(&shm);
            for &n in &args.sizes {
                let data: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
                let want = fold(&data);
                let mut copy = vec![0u8; n];
                // Enough calls for a steady median, about 256 MiB a run at most.
                let per_run = ((256usize << 20) / n.max(1)).clamp(20, 2000);
                let (mut calls, mut lens, mut copies) = (Vec::new(), Vec::new(), Vec::new());
                // Each kind in a loop of its own, so that one does not leave the area's lines
                // where the other would not find them (the first run warms up).
                for run in 0..=args.runs {
                    for _ in 0..per_run {
                        let t = Instant::now();
                        let got = c.take(&data)?;
                        let ns = t.elapsed().as_nanos() as f64;
                        if got != want {
                            return Err("a wrong reply".into());
                        }
                        if run > 0 {
                            calls.push(ns);
                        }
                    }
                    for _ in 0..per_run {
                        let t = Instant::now();
                        let got = c.len(&data)?;
                        let ns = t.elapsed().as_nanos() as f64;
                        if got != n as u64 {
                            return Err("a wrong reply".into());
                        }
                        if run > 0 {
                            lens.push(ns);
                        }
                    }
                    for _ in 0..per_run {
                        let t = Instant::now();
                        copy.copy_from_slice(std::hint::black_box(&data));
                        std::hint::black_box(&mut copy);
                        let ns = t.elapsed().as_nanos() as f64;
                        if run > 0 {
                            copies.push(ns);
                        }
                    }
                }
                println!(
                    "BULK {n} {} {} {}",
                    median(calls),
                    median(lens),
                    median(copies)
                );
            }
            Ok(())
        }
    }
}
