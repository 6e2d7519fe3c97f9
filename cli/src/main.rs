//! `ferry`: serve the demo service over a shared-memory file and call it from other processes.
//!
//! - `ferry demo` (the default): a server and N client processes (this program, re-executed),
//!   then a summary table: calls, errors, latency percentiles, throughput.
//! - `ferry serve --name X` and `ferry call --name X`: the two sides from separate terminals.
//! - `ferry bench`: the benchmark of `BENCHMARKS.md` (round trip against a raw atomic ping-pong and
//!   a Unix socket, throughput with 1, 2, 4, 8 client processes).
//! - `ferry bridge --name X` (built with the `zenoh` feature): exports a running server's services
//!   to zenoh, for callers on other machines (`ferry_zenoh`).
//!
//! Exit status: 0 on success; 1 when the run failed; 2 for bad arguments (checked before anything
//! is created, and said in one line); 128 + the signal's number when `serve`, `demo` or `bench`
//! was stopped by SIGINT (130), SIGTERM (143) or SIGHUP (129), after removing its shared-memory
//! files (and, for `demo` and `bench`, stopping the processes it started).

mod any;
mod bench;
mod bench_async;
#[cfg(feature = "zenoh")]
mod bridge;
#[cfg(feature = "iceoryx2")]
mod iceoryx2_peer;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use ferry_demo::{self as demo, Demo};
use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmError, ShmServer};
use nix::sys::signal::Signal;

#[derive(Parser, Debug)]
#[command(
    name = "ferry",
    version,
    about = "Remote calls between processes through shared memory",
    after_help = "Exit status: 0 done; 1 the run failed; 2 bad arguments; 128 + the signal's number \
                  (130 SIGINT, 143 SIGTERM, 129 SIGHUP) when serve, demo or bench was stopped by one, \
                  its shared-memory file removed."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Serve the demo service and run client processes against it (the default).
    Demo(DemoArgs),
    /// Serve the demo service until interrupted (Ctrl-C) or for a while.
    Serve(ServeArgs),
    /// Call a running server: any service's call (`ferry call NAME SERVICE.METHOD ARG=VALUE ...`),
    /// or, with no call named, the demo's calls in a loop.
    Call(CallArgs),
    /// List a running server's services and their calls.
    Ls(LsArgs),
    /// Measure round trips and throughput (see BENCHMARKS.md).
    Bench(bench::BenchArgs),
    /// Measure the async client and async handlers between two processes (see BENCHMARKS.md).
    BenchAsync(bench_async::BenchAsyncArgs),
    /// A benchmark's peer process (started by `ferry bench`).
    #[command(hide = true)]
    Peer(bench::PeerArgs),
    /// The server process of `ferry bench-async`.
    #[command(hide = true)]
    AsyncServer(bench_async::AsyncServerArgs),
    /// Export a running server's services to zenoh, for callers on other machines.
    #[cfg(feature = "zenoh")]
    Bridge(bridge::BridgeArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct ServerOpts {
    /// Ports in the region (a multiple of 32).
    #[arg(long, default_value_t = 64)]
    ports: u32,
    /// Server worker threads (at most one per CPU this process may use, and per port).
    #[arg(long, default_value_t = default_workers())]
    workers: usize,
}

/// Two workers, or one on a machine that lets this process use one CPU only.
fn default_workers() -> usize {
    cpus().min(2)
}

/// The CPUs this process may use.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl ServerOpts {
    fn config(&self) -> ServerConfig {
        ServerConfig {
            ports: self.ports,
            workers: self.workers,
            ..ServerConfig::default()
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
struct DemoArgs {
    /// Client processes.
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// Calls per client process.
    #[arg(long, default_value_t = 25_000)]
    calls: u64,
    /// The call each client makes.
    #[arg(long, value_enum, default_value_t = Op::Echo)]
    op: Op,
    /// Bytes per `sum` call.
    #[arg(long, default_value_t = 256)]
    size: usize,
    /// Name (in /dev/shm) or path of the shared-memory file; default: one per run.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Name (in /dev/shm) or path of the shared-memory file.
    #[arg(long, default_value = "demo")]
    name: String,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    seconds: Option<u64>,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(clap::Args, Debug)]
struct LsArgs {
    /// Name (in /dev/shm) or path of the shared-memory file.
    name: String,
}

#[derive(clap::Args, Debug, Clone)]
struct CallArgs {
    /// Name (in /dev/shm) or path of the shared-memory file, for a call of any service.
    #[arg(value_name = "NAME")]
    file: Option<String>,
    /// The call, as SERVICE.METHOD (see `ferry ls NAME`).
    #[arg(value_name = "SERVICE.METHOD")]
    target: Option<String>,
    /// Its arguments, as NAME=VALUE (integers, floats, true/false, text; bytes as text or
    /// @PATH of a file).
    #[arg(value_name = "ARG=VALUE")]
    values: Vec<String>,
    /// Name (in /dev/shm) or path of the shared-memory file (the demo's loop).
    #[arg(long, default_value = "demo")]
    name: String,
    /// Calls to make.
    #[arg(long, default_value_t = 10_000)]
    calls: u64,
    /// The call to make.
    #[arg(long, value_enum, default_value_t = Op::Echo)]
    op: Op,
    /// Bytes per `sum` call.
    #[arg(long, default_value_t = 256)]
    size: usize,
    /// This client's number (ids of its calls are `id << 40 | i`).
    #[arg(long, default_value_t = 0)]
    id: u64,
    /// Seconds to wait for the server before giving up: for it to appear (a file of a server
    /// that stopped counts as none), then for each reply.
    #[arg(long, default_value_t = 10)]
    deadline: u64,
    /// Print one machine-readable line (for `ferry demo`).
    #[arg(long, hide = true)]
    report: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Echo an id (checks the reply belongs to the call).
    Echo,
    /// Add two numbers.
    Add,
    /// Stream `--size` bytes and get their sum back.
    Sum,
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| usage_error(e));
    let command = match cli.command {
        Some(c) => c,
        None => Cli::try_parse_from(["ferry", "demo"])
            .unwrap_or_else(|e| usage_error(e))
            .command
            .expect("`ferry demo` names a command"),
    };
    if let Err(e) = check(&command) {
        eprintln!("ferry: {e}");
        std::process::exit(2);
    }
    let result = match command {
        Cmd::Demo(a) => run_demo(a),
        Cmd::Serve(a) => serve(a),
        Cmd::Call(a) => match (&a.file, &a.target) {
            (Some(file), Some(target)) => {
                any::call(file, target, &a.values, Duration::from_secs(a.deadline))
            }
            _ => call(a),
        },
        Cmd::Ls(a) => any::ls(&a.name),
        Cmd::Bench(a) => bench::run(a),
        Cmd::BenchAsync(a) => bench_async::run(a),
        Cmd::Peer(a) => bench::peer(a),
        Cmd::AsyncServer(a) => bench_async::server(a),
        #[cfg(feature = "zenoh")]
        Cmd::Bridge(a) => bridge::run(a),
    };
    if let Err(e) = result {
        eprintln!("ferry: {e}");
        std::process::exit(1);
    }
    if let Some(signal) = signalled() {
        std::process::exit(128 + signal as i32);
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Prints help or the version as clap does; any other error of the command line in one line
/// (clap's own message, without its usage block), exiting with status 2 as clap does.
fn usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    // The message is the first paragraph (a list of missing arguments continues it, indented).
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    eprintln!("ferry: {message} (see ferry --help)");
    std::process::exit(2);
}

/// Checks the arguments a parser cannot check alone (ranges, bounds between two of them, names),
/// before anything is created; the error is one line naming the argument.
fn check(command: &Cmd) -> Result<(), String> {
    match command {
        Cmd::Demo(a) => {
            check_name(a.name.as_deref().unwrap_or("demo"))?;
            a.server.check()?;
            at_least_one("--clients", a.clients.into())?;
            if a.clients > a.server.ports {
                return Err(format!(
                    "--clients {}: at most {}, the --ports (each client process holds a port for its whole run)",
                    a.clients, a.server.ports
                ));
            }
            check_calls(a.calls, a.size, 0)
        }
        Cmd::Serve(a) => {
            check_name(&a.name)?;
            a.server.check()
        }
        Cmd::Ls(a) => check_name(&a.name),
        Cmd::Call(a) if a.file.is_some() => {
            if a.target.is_none() {
                return Err(
                    "name the call too: ferry call NAME SERVICE.METHOD ARG=VALUE ...".into(),
                );
            }
            at_least_one("--deadline", a.deadline)
        }
        Cmd::Call(a) => {
            check_name(&a.name)?;
            at_least_one("--deadline", a.deadline)?;
            check_calls(a.calls, a.size, a.id)
        }
        Cmd::Bench(a) => bench::check(a),
        Cmd::BenchAsync(a) => bench_async::check(a),
        Cmd::Peer(_) | Cmd::AsyncServer(_) => Ok(()),
        #[cfg(feature = "zenoh")]
        Cmd::Bridge(a) => bridge::check(a),
    }
}

fn at_least_one(flag: &str, value: u64) -> Result<(), String> {
    if value == 0 {
        return Err(format!("{flag} 0: must be at least 1"));
    }
    Ok(())
}

/// The most calls one client process makes in a run: each call's latency is kept, for the
/// percentiles.
const MAX_CALLS: u64 = 100_000_000;
/// The most client ids: a call's id is `id << 40 | its number`.
const MAX_ID: u64 = (1 << 24) - 1;

fn check_calls(calls: u64, size: usize, id: u64) -> Result<(), String> {
    at_least_one("--calls", calls)?;
    if calls > MAX_CALLS {
        return Err(format!(
            "--calls {calls}: at most {MAX_CALLS} per client process (each call's latency is kept for the percentiles)"
        ));
    }
    if size as u64 > demo::SUM_LIMIT {
        return Err(format!(
            "--size {size}: at most {} bytes, the most a `sum` call takes",
            demo::SUM_LIMIT
        ));
    }
    if id > MAX_ID {
        return Err(format!(
            "--id {id}: at most {MAX_ID} (a call's id is the client's id << 40 | the call's number)"
        ));
    }
    Ok(())
}

/// A name is placed in /dev/shm; one with a `/` is a path, whose directory must exist.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(
            "--name is empty: give a name (the file is /dev/shm/ferry-<name>) or a path".into(),
        );
    }
    if name.contains('\0') {
        return Err("--name contains a NUL byte, which no file name may".into());
    }
    // The longest file name Linux file systems take (NAME_MAX).
    const NAME_MAX: usize = 255;
    let file = path_for(name);
    let file_name = file.file_name().map_or(0, |f| f.len());
    if file_name > NAME_MAX {
        return Err(format!(
            "--name: {file_name} bytes long as a file name ({}), at most {NAME_MAX}",
            if name.contains('/') {
                "its last part"
            } else {
                "ferry-<name>"
            }
        ));
    }
    if !name.contains('/') {
        return Ok(());
    }
    let last = name.rsplit('/').next().unwrap_or_default();
    if matches!(last, "" | "." | "..") {
        return Err(format!(
            "--name {name}: a path (a name with a `/`) must end in a file name"
        ));
    }
    let dir = Path::new(name).parent().unwrap_or(Path::new("/"));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if !dir.is_dir() {
        return Err(format!(
            "--name {name}: no directory {} for the file (a name with a `/` is a path)",
            dir.display()
        ));
    }
    Ok(())
}

/// `--workers` for a server of `ports` ports: at least one, at most one per CPU and per port.
fn check_workers(workers: usize, ports: u32) -> Result<(), String> {
    at_least_one("--workers", workers as u64)?;
    let cpus = cpus();
    let most = cpus.min(ports as usize);
    if workers > most {
        return Err(format!(
            "--workers {workers}: at most {most} (one per CPU this process may use: {cpus}; one per port: {ports})"
        ));
    }
    Ok(())
}

/// Checks a `--ports` count: a whole number of mailbox words, at most the protocol's most.
fn check_ports(p: u32) -> Result<(), String> {
    use ferry_rpc::layout::{MAX_PORTS, PORT_GRANULE};
    if p == 0 || !p.is_multiple_of(PORT_GRANULE) || p > MAX_PORTS {
        return Err(format!(
            "--ports {p}: must be a multiple of {PORT_GRANULE} from {PORT_GRANULE} to {MAX_PORTS}"
        ));
    }
    Ok(())
}

impl ServerOpts {
    fn check(&self) -> Result<(), String> {
        check_ports(self.ports)?;
        check_workers(self.workers, self.ports)
    }
}

/// The first of SIGINT, SIGTERM, SIGHUP received since `catch_signals` (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: nix::libc::c_int) {
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP only record themselves, for [`signalled`]: the
/// caller's loop sees it, stops, removes its file, and `main` exits with 128 + its number. A
/// signal ignored when ferry started (SIGHUP under `nohup`, SIGINT in a script's background job)
/// stays ignored, as whoever started it asked.
pub(crate) fn catch_signals() -> Res<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // Blocked while its action is swapped and looked at: one sent meanwhile to an ignored
        // signal stays pending, and is discarded when the ignore is put back.
        let mut only = SigSet::empty();
        only.add(signal);
        only.thread_block()?;
        // SAFETY: `on_signal` only does a compare-and-swap on a lock-free atomic, which is
        // async-signal-safe; the action replaced is the default one, an ignore (put back just
        // below), or one set by this function.
        let old = unsafe { sigaction(signal, &action) };
        let kept = match old {
            // SAFETY: ignoring a signal installs no handler; it is the action just replaced.
            Ok(old) if old.handler() == SigHandler::SigIgn => unsafe { sigaction(signal, &old) },
            other => other,
        };
        only.thread_unblock()?;
        kept?;
    }
    Ok(())
}

/// The signal recorded by the handler of [`catch_signals`], if any.
pub(crate) fn signalled() -> Option<Signal> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}

/// What one client measured.
#[derive(Clone, Debug, Default)]
struct Report {
    calls: u64,
    errors: u64,
    wrong: u64,
    elapsed: Duration,
    /// p50, p90, p99 and max latency in nanoseconds.
    pct: [u64; 4],
}

/// The ranks of the p50, p90, p99 and max in a sorted sample of `n` (at least one) values.
fn ranks(n: u64) -> [u64; 4] {
    let at = |p: f64| ((n - 1) as f64 * p).round() as u64;
    [at(0.5), at(0.9), at(0.99), n - 1]
}

/// The p50, p90, p99 and max of `sample`.
fn percentiles(sample: &mut [u64]) -> [u64; 4] {
    if sample.is_empty() {
        return [0; 4];
    }
    sample.sort_unstable();
    ranks(sample.len() as u64).map(|r| sample[r as usize])
}

/// The p50, p90, p99 and max of the union of `runs`, each sorted (ascending) and `total` long
/// together: the percentiles of all the values as one sample, read in one merging pass, never
/// holding them all at once. (A run that ends early counts as ended; ranks past the values read
/// stay 0.)
fn merged_percentiles(mut runs: Vec<impl Iterator<Item = u64>>, total: u64) -> [u64; 4] {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut pct = [0; 4];
    if total == 0 {
        return pct;
    }
    let wanted = ranks(total);
    let mut heads: BinaryHeap<Reverse<(u64, usize)>> = runs
        .iter_mut()
        .enumerate()
        .filter_map(|(i, run)| Some(Reverse((run.next()?, i))))
        .collect();
    let mut rank = 0u64;
    while let Some(Reverse((value, i))) = heads.pop() {
        for (k, &r) in wanted.iter().enumerate() {
            if r == rank {
                pct[k] = value;
            }
        }
        if rank == wanted[3] {
            break;
        }
        rank += 1;
        if let Some(next) = runs[i].next() {
            heads.push(Reverse((next, i)));
        }
    }
    pct
}

/// A client's latency sample as `call --report` writes it after its report line: the values,
/// sorted, as little-endian `u64`s.
fn write_sample(out: &mut impl Write, sorted: &[u64]) -> std::io::Result<()> {
    for v in sorted {
        out.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}

/// Reads at most `n` values written by [`write_sample`] (fewer if the stream ends first).
fn read_sample(input: &mut impl Read, n: u64) -> impl Iterator<Item = u64> + '_ {
    std::iter::from_fn(move || {
        let mut word = [0; 8];
        input.read_exact(&mut word).ok()?;
        Some(u64::from_le_bytes(word))
    })
    .take(n as usize)
}

impl Report {
    fn line(&self) -> String {
        let [a, b, c, d] = self.pct;
        format!(
            "REPORT {} {} {} {} {a} {b} {c} {d}",
            self.calls,
            self.errors,
            self.wrong,
            self.elapsed.as_nanos()
        )
    }

    fn parse(line: &str) -> Option<Report> {
        let f: Vec<u64> = line
            .strip_prefix("REPORT ")?
            .split(' ')
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        if f.len() != 8 {
            return None;
        }
        Some(Report {
            calls: f[0],
            errors: f[1],
            wrong: f[2],
            elapsed: Duration::from_nanos(f[3]),
            pct: [f[4], f[5], f[6], f[7]],
        })
    }
}

fn micros(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1000.0)
}

/// Attaches to the server at `--name`, waiting up to `--deadline` for one to serve it (a missing
/// file, or one whose server has stopped, may be a server not started yet or restarting).
fn attach(args: &CallArgs) -> Res<ShmClient> {
    let path = path_for(&args.name);
    let deadline = Duration::from_secs(args.deadline);
    let until = Instant::now().checked_add(deadline);
    let config = ClientConfig::default()
        .service::<Demo>()
        .deadline(deadline)
        .sticky(true);
    loop {
        let error = match ShmClient::attach(&path, config.clone()) {
            Ok(client) => return Ok(client),
            Err(e) => e,
        };
        let missing = matches!(&error, ShmError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound);
        let may_come =
            missing || matches!(error, ShmError::NoServer { .. } | ShmError::ShuttingDown);
        if !may_come {
            return Err(error.into());
        }
        if until.is_some_and(|t| Instant::now() >= t) {
            let waited = format!("waited {} s", args.deadline);
            return Err(if missing {
                format!(
                    "no server at {} ({waited}; start one with `ferry serve --name {}`)",
                    path.display(),
                    args.name
                )
            } else {
                format!("{error} ({waited})")
            }
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes the calls; returns what they measured and their latencies, sorted. Stops at the first
/// failure of the transport (no server, or none answering by `--deadline`): the calls after it
/// would each wait out the deadline again.
fn call_loop(args: &CallArgs, progress: bool) -> Res<(Report, Vec<u64>)> {
    let shm = attach(args)?;
    let client = Demo::client(&shm);
    let data: Vec<u8> = (0..args.size)
        .map(|i| (i * 7 + args.id as usize) as u8)
        .collect();
    let want_sum: u64 = data.iter().map(|&b| b as u64).sum();
    let mut r = Report::default();
    // Grown as the calls go (a long run interrupted early does not hold its whole sample).
    let mut latencies = Vec::with_capacity(args.calls.min(1 << 16) as usize);
    let start = Instant::now();
    let mut last_progress = start;
    for i in 0..args.calls {
        let t = Instant::now();
        let ok = match args.op {
            Op::Echo => {
                let id = args.id << 40 | i;
                client.echo(id).map(|got| got == (id, demo::mix(id)).into())
            }
            Op::Add => client.add(args.id, i).map(|s| s == args.id.wrapping_add(i)),
            Op::Sum => client
                .sum(&data)
                .map(|got| (got.len, got.sum) == (data.len() as u64, want_sum)),
        };
        latencies.push(t.elapsed().as_nanos() as u64);
        r.calls += 1;
        match ok {
            Ok(true) => {}
            Ok(false) => r.wrong += 1,
            Err(e) => {
                r.errors += 1;
                if r.errors == 1 {
                    eprintln!("ferry call {}: {e}", args.id);
                }
                if matches!(e, ferry_rpc::service::Error::Transport(_)) {
                    break;
                }
            }
        }
        if progress && last_progress.elapsed() > Duration::from_secs(1) {
            last_progress = Instant::now();
            eprintln!("  {} / {} calls", i + 1, args.calls);
        }
    }
    r.elapsed = start.elapsed();
    r.pct = percentiles(&mut latencies);
    Ok((r, latencies))
}

fn call(args: CallArgs) -> Res<()> {
    let (r, sample) = call_loop(&args, !args.report)?;
    if args.report {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        writeln!(out, "{}", r.line())?;
        write_sample(&mut out, &sample)?;
        out.flush()?;
    } else {
        print_table(&[(format!("client {}", args.id), r.clone())], &r);
        if r.errors + r.wrong > 0 {
            return Err(format!(
                "{} of {} calls failed, {} wrong replies",
                r.errors, r.calls, r.wrong
            )
            .into());
        }
    }
    Ok(())
}

fn print_table(rows: &[(String, Report)], total: &Report) {
    println!(
        "{:<10} {:>9} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "", "calls", "errors", "wrong", "p50 µs", "p90 µs", "p99 µs", "max µs", "calls/s"
    );
    let row = |name: &str, r: &Report| {
        let rate = r.calls as f64 / r.elapsed.as_secs_f64().max(1e-9);
        println!(
            "{:<10} {:>9} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12.0}",
            name,
            r.calls,
            r.errors,
            r.wrong,
            micros(r.pct[0]),
            micros(r.pct[1]),
            micros(r.pct[2]),
            micros(r.pct[3]),
            rate
        );
    };
    for (name, r) in rows {
        row(name, r);
    }
    if rows.len() > 1 {
        row("all", total);
    }
}

/// A client process of `ferry demo`, locked (a panic while holding it leaves the child as it
/// was).
fn lock(child: &Mutex<Child>) -> std::sync::MutexGuard<'_, Child> {
    child.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run_demo(args: DemoArgs) -> Res<()> {
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("demo-{}", std::process::id()));
    let path = path_for(&name);
    catch_signals()?;
    let server = ShmServer::start(&path, args.server.config(), Demo::server(demo::DemoService))?;
    println!(
        "ferry demo: serving {} ({} ports, {} workers); {} client processes × {} {:?} calls",
        path.display(),
        args.server.ports,
        args.server.workers,
        args.clients,
        args.calls,
        args.op
    );
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    // Each client's process (behind a lock: the progress thread kills them on a signal) and its
    // output.
    let mut children: Vec<Mutex<Child>> = Vec::new();
    let mut outputs = Vec::new();
    for id in 0..args.clients {
        if signalled().is_some() {
            break;
        }
        let mut child = Command::new(&exe)
            .args(["call", "--report", "--name"])
            .arg(&path)
            .args(["--calls", &args.calls.to_string(), "--id", &id.to_string()])
            .args(["--size", &args.size.to_string()])
            .arg("--op")
            .arg(format!("{:?}", args.op).to_lowercase())
            .stdout(Stdio::piped())
            .spawn()?;
        outputs.push(child.stdout.take());
        children.push(Mutex::new(child));
    }
    // Progress on long runs, from the server's counter.
    let total = args.calls * args.clients as u64;
    let done = AtomicBool::new(false);
    let (reports, merged) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if signalled().is_some() {
                    // The clients stop at once (a child already waited for is not signalled: its
                    // pid may be another process's by now).
                    for child in &children {
                        let _ = lock(child).kill();
                    }
                    return;
                }
                if last.elapsed() >= Duration::from_secs(1) {
                    last = Instant::now();
                    let served = server.stats().served;
                    eprintln!("  {served} / {total} calls served");
                }
            }
        });
        // Each client's report line, then (all of them read together) their latency samples,
        // merged for the percentiles of all calls.
        let mut outputs: Vec<Option<BufReader<ChildStdout>>> =
            outputs.into_iter().map(|o| o.map(BufReader::new)).collect();
        let mut reports: Vec<Option<Report>> = Vec::new();
        for output in &mut outputs {
            let mut line = String::new();
            if let Some(out) = output {
                let _ = out.read_line(&mut line);
            }
            reports.push(Report::parse(line.trim()));
        }
        let samples = outputs
            .iter_mut()
            .zip(&reports)
            .filter_map(|(out, r)| Some(read_sample(out.as_mut()?, r.as_ref()?.calls)))
            .collect();
        let total = reports.iter().flatten().map(|r| r.calls).sum();
        let merged = merged_percentiles(samples, total);
        let mut rows = Vec::new();
        for (id, (output, report)) in outputs.into_iter().zip(reports).enumerate() {
            // Read to the end (the child's exit) before taking its lock to wait for it, so
            // that the lock is never held while the child runs.
            if let Some(mut out) = output {
                let _ = std::io::copy(&mut out, &mut std::io::sink());
            }
            let status = lock(&children[id]).wait();
            let report = report.unwrap_or_else(|| {
                if signalled().is_none() {
                    eprintln!("client {id} gave no report ({status:?})");
                }
                Report {
                    errors: args.calls,
                    ..Report::default()
                }
            });
            rows.push((format!("client {id}"), report));
        }
        done.store(true, Ordering::Relaxed);
        (rows, merged)
    });
    if let Some(signal) = signalled() {
        drop(server);
        eprintln!(
            "ferry demo: stopped by {signal}; clients stopped, {} removed",
            path.display()
        );
        return Ok(());
    }
    let wall = start.elapsed();
    let mut all = Report {
        elapsed: wall,
        ..Report::default()
    };
    for (_, r) in &reports {
        all.calls += r.calls;
        all.errors += r.errors;
        all.wrong += r.wrong;
    }
    // The total's percentiles: those of all the clients' calls as one sample.
    all.pct = merged;
    print_table(&reports, &all);
    let stats = server.shutdown(Duration::from_secs(5)).stats;
    println!(
        "server: {} served, {} failed, {} ports reclaimed; {:.2} s wall, {:.0} calls/s overall",
        stats.served,
        stats.failed,
        stats.reclaimed,
        wall.as_secs_f64(),
        all.calls as f64 / wall.as_secs_f64()
    );
    if all.errors + all.wrong > 0 {
        return Err(format!("{} errors, {} wrong replies", all.errors, all.wrong).into());
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Res<()> {
    catch_signals()?;
    let path = path_for(&args.name);
    let server =
        match ShmServer::start(&path, args.server.config(), Demo::server(demo::DemoService)) {
            Err(e @ ShmError::AlreadyServing { .. }) => {
                return Err(format!("{e}; stop it first, or serve another --name").into())
            }
            started => started?,
        };
    println!(
        "serving the demo service at {} ({} ports, {} workers); Ctrl-C to stop",
        path.display(),
        args.server.ports,
        args.server.workers
    );
    println!(
        "call it from another terminal: ferry call --name {}",
        args.name
    );
    // (No end that far off: `--seconds` past what the clock can count is forever.)
    let until = args
        .seconds
        .and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
    let mut last = server.stats();
    while signalled().is_none() && until.is_none_or(|t| Instant::now() < t) {
        std::thread::sleep(Duration::from_millis(100));
        let now = server.stats();
        if now != last && now.served / 100_000 != last.served / 100_000 {
            println!("  {} calls served", now.served);
        }
        last = now;
    }
    let report = server.shutdown(Duration::from_secs(5));
    println!(
        "stopped{}: {} served, {} failed, {} ports reclaimed{}",
        signalled().map_or(String::new(), |s| format!(" by {s}")),
        report.stats.served,
        report.stats.failed,
        report.stats.reclaimed,
        if report.drained {
            ""
        } else {
            " (some calls were still in flight)"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merged percentiles are those of all the values as one sample, not the worst client's.
    #[test]
    fn merged_percentiles_are_those_of_the_union() {
        // Many fast calls in one client, a few slow ones in another.
        let fast: Vec<u64> = (0..1000).map(|i| 100 + i % 7).collect();
        let slow: Vec<u64> = (0..20).map(|i| 50_000 + i).collect();
        let (mut fast_sorted, mut slow_sorted) = (fast.clone(), slow.clone());
        let worst_p50 = percentiles(&mut fast_sorted)[0].max(percentiles(&mut slow_sorted)[0]);
        let mut union = [fast.clone(), slow.clone()].concat();
        let want = percentiles(&mut union);
        let got = merged_percentiles(
            vec![fast_sorted.into_iter(), slow_sorted.into_iter()],
            union.len() as u64,
        );
        assert_eq!(got, want);
        assert!(got[0] < 200 && worst_p50 >= 50_000, "{got:?}");
        assert_eq!(got[3], 50_019);
    }

    #[test]
    fn merged_percentiles_of_one_value_and_of_none() {
        assert_eq!(merged_percentiles(vec![vec![7u64].into_iter()], 1), [7; 4]);
        assert_eq!(
            merged_percentiles(Vec::<std::vec::IntoIter<u64>>::new(), 0),
            [0; 4]
        );
    }

    /// A sample crosses the pipe as written.
    #[test]
    fn samples_round_trip_through_their_encoding() {
        let sample = [1u64, 5, 5, u64::MAX];
        let mut bytes = Vec::new();
        write_sample(&mut bytes, &sample).unwrap();
        let mut input = &bytes[..];
        assert_eq!(read_sample(&mut input, 10).collect::<Vec<_>>(), sample);
    }
}
