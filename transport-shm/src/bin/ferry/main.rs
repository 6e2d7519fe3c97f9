//! `ferry`: serve the demo service over a shared-memory file and call it from other processes.
//!
//! - `ferry demo` (the default): a server and N client processes (this program, re-executed),
//!   then a summary table: calls, errors, latency percentiles, throughput.
//! - `ferry serve --name X` and `ferry call --name X`: the two sides from separate terminals.
//! - `ferry bench`: the benchmark of `BENCHMARKS.md` (round trip against a raw atomic ping-pong and
//!   a Unix socket, throughput with 1, 2, 4, 8 client processes).

mod bench;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use transport_shm::demo::{self, Demo, DemoHandle};
use transport_shm::{path_for, ServerConfig, ShmServer};

#[derive(Parser, Debug)]
#[command(
    name = "ferry",
    version,
    about = "Remote calls between processes through shared memory"
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
    /// Call a running demo server.
    Call(CallArgs),
    /// Measure round trips and throughput (see BENCHMARKS.md).
    Bench(bench::BenchArgs),
    /// A benchmark's peer process (started by `ferry bench`).
    #[command(hide = true)]
    Peer(bench::PeerArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct ServerOpts {
    /// Ports in the region (a multiple of 32).
    #[arg(long, default_value_t = 64)]
    ports: u32,
    /// Server worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

impl ServerOpts {
    fn config(&self) -> ServerConfig {
        ServerConfig {
            ports: self.ports,
            workers: self.workers,
            fingerprint: Demo::FINGERPRINT,
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

#[derive(clap::Args, Debug, Clone)]
struct CallArgs {
    /// Name (in /dev/shm) or path of the shared-memory file.
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
    /// Seconds to wait for the server before giving up.
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
    let cli = Cli::parse();
    let command = cli.command.unwrap_or_else(|| {
        Cli::parse_from(["ferry", "demo"])
            .command
            .expect("`ferry demo` parses")
    });
    let result = match command {
        Cmd::Demo(a) => run_demo(a),
        Cmd::Serve(a) => serve(a),
        Cmd::Call(a) => call(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Peer(a) => bench::peer(a),
    };
    if let Err(e) = result {
        eprintln!("ferry: {e}");
        std::process::exit(1);
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

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

/// The p50, p90, p99 and max of `sample`.
fn percentiles(sample: &mut [u64]) -> [u64; 4] {
    if sample.is_empty() {
        return [0; 4];
    }
    sample.sort_unstable();
    let at = |p: f64| sample[((sample.len() - 1) as f64 * p).round() as usize];
    [at(0.5), at(0.9), at(0.99), sample[sample.len() - 1]]
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

fn call_loop(args: &CallArgs, progress: bool) -> Res<Report> {
    let path = path_for(&args.name);
    let mut client = DemoHandle::attach(&path, Duration::from_secs(args.deadline))?;
    let data: Vec<u8> = (0..args.size)
        .map(|i| (i * 7 + args.id as usize) as u8)
        .collect();
    let want_sum: u64 = data.iter().map(|&b| b as u64).sum();
    let mut r = Report::default();
    let mut latencies = Vec::with_capacity(args.calls as usize);
    let start = Instant::now();
    let mut last_progress = start;
    for i in 0..args.calls {
        let t = Instant::now();
        let ok = match args.op {
            Op::Echo => {
                let id = args.id << 40 | i;
                client.echo(id).map(|got| got == (id, demo::mix(id)))
            }
            Op::Add => client.add(args.id, i).map(|s| s == args.id.wrapping_add(i)),
            Op::Sum => client
                .sum(&data)
                .map(|got| got == (data.len() as u64, want_sum)),
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
                if matches!(e, transport_shm::ShmError::NoServer { .. }) {
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
    Ok(r)
}

fn call(args: CallArgs) -> Res<()> {
    let r = call_loop(&args, !args.report)?;
    if args.report {
        println!("{}", r.line());
    } else {
        print_table(&[(format!("client {}", args.id), r.clone())], &r);
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

fn run_demo(args: DemoArgs) -> Res<()> {
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("demo-{}", std::process::id()));
    let path = path_for(&name);
    let server = ShmServer::start(&path, args.server.config(), demo::DemoService)?;
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
    let mut children = Vec::new();
    for id in 0..args.clients {
        let child = Command::new(&exe)
            .args(["call", "--report", "--name"])
            .arg(&path)
            .args(["--calls", &args.calls.to_string(), "--id", &id.to_string()])
            .args(["--size", &args.size.to_string()])
            .arg("--op")
            .arg(format!("{:?}", args.op).to_lowercase())
            .stdout(Stdio::piped())
            .spawn()?;
        children.push(child);
    }
    // Progress on long runs, from the server's counter.
    let total = args.calls * args.clients as u64;
    let done = AtomicBool::new(false);
    let reports = std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() >= Duration::from_secs(1) {
                    last = Instant::now();
                    let served = server.stats().served;
                    eprintln!("  {served} / {total} calls served");
                }
            }
        });
        let mut reports = Vec::new();
        for (id, mut child) in children.into_iter().enumerate() {
            let mut line = String::new();
            if let Some(out) = child.stdout.take() {
                let _ = BufReader::new(out).read_line(&mut line);
            }
            let status = child.wait();
            let report = Report::parse(line.trim()).unwrap_or_else(|| {
                eprintln!("client {id} gave no report ({status:?})");
                Report {
                    errors: args.calls,
                    ..Report::default()
                }
            });
            reports.push((format!("client {id}"), report));
        }
        done.store(true, Ordering::Relaxed);
        reports
    });
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
    // The total's percentiles: the worst of the clients' (exact per client, an upper bound overall).
    for k in 0..4 {
        all.pct[k] = reports.iter().map(|(_, r)| r.pct[k]).max().unwrap_or(0);
    }
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

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn serve(args: ServeArgs) -> Res<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }?;
    }
    let path = path_for(&args.name);
    let server = ShmServer::start(&path, args.server.config(), demo::DemoService)?;
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
    let until = args
        .seconds
        .map(|s| Instant::now() + Duration::from_secs(s));
    let mut last = server.stats();
    while !INTERRUPTED.load(Ordering::SeqCst) && until.is_none_or(|t| Instant::now() < t) {
        std::thread::sleep(Duration::from_millis(100));
        let now = server.stats();
        if now != last && now.served / 100_000 != last.served / 100_000 {
            println!("  {} calls served", now.served);
        }
        last = now;
    }
    let report = server.shutdown(Duration::from_secs(5));
    println!(
        "stopped: {} served, {} failed, {} ports reclaimed{}",
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
