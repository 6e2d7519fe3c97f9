//! ferry over zenoh against its peers, with the server and the caller in two processes: a raw
//! zenoh query/reply of the same payload on the same session configuration (the goal's
//! baseline), a TCP ping-pong of the same payload (the floor of any RPC over TCP), and, built
//! with `--features tarpc`, the same calls through tarpc (bincode over TCP; its bytes as a
//! `Vec<u8>`, as its users write them, and as `serde_bytes`, the tuned form).
//!
//! ```text
//! cargo run --release -p ferry-zenoh-bench [--features tarpc] -- [--netns] [--runs 5]
//!     [--seconds 2] [--workers 4] [--shm-workers 2] [--bulk 262144] [--set KEY=JSON5 ...]
//! ```
//!
//! By default both processes talk over loopback. `--netns` (root, `ip`) puts the server in one
//! network namespace and the caller in another, joined by a veth pair, and removes them after.
//! `--set` applies a zenoh setting to both sessions (for instance
//! `--set transport/unicast/lowlatency=true --set transport/unicast/qos/enabled=false`).
//!
//! Round trips (median of each run's median, per size): `Echo` (a `Bytes` argument and a `Bytes`
//! reply of the same length) against each peer's echo of the same bytes; at 8 B also `Add` (a
//! fixed call, 8 bytes each way). Throughput: 1, 4 and 16 threads calling `Add` against the same
//! through raw zenoh (8 bytes) and tarpc. And, for scale, the same `Add` through shared memory
//! on this machine: straight through a `ShmClient` on the server's file, and through the
//! one-name client (`NamedClient`, which takes shared memory when the service is local). The
//! peers take turns within each run, so drift in the machine's load falls on all of them.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferry_rpc::service::Bytes;
use ferry_rpc::RpcOpcodes;
use ferry_zenoh::{peer_config, BridgeConfig, ClientConfig, NamedClient, ZenohClient, ZenohServer};
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::{Session, Wait};

#[cfg(feature = "tarpc")]
mod tarpc_peer;
mod tcp;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The service measured.
#[derive(RpcOpcodes)]
enum Bench {
    /// Adds `n` to a total (a fixed call, 8 bytes each way).
    #[rpc(response = u64)]
    Add { n: u64 },
    /// The bytes sent, back.
    #[rpc(response = Bytes, limit = 1 << 21)]
    Echo { value: Bytes },
}

#[derive(Default)]
struct Handler(AtomicU64);

impl BenchServer for Handler {
    fn add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed) + n
    }
    fn echo(&self, value: &[u8]) -> impl AsRef<[u8]> {
        value
    }
}

/// What this process is.
enum Role {
    /// Starts the server process (in a namespace of its own with `--netns`), then calls it (from
    /// the other namespace, through a caller process).
    Main,
    /// The server: every peer's server on `ip`, until its standard input closes.
    Serve { ip: String },
    /// The caller: measures the server that printed `ready`.
    Call { ready: Ready },
}

struct Args {
    role: Role,
    netns: bool,
    runs: usize,
    seconds: f64,
    workers: usize,
    shm_workers: usize,
    bulk: usize,
    idle_sleep: Duration,
    /// zenoh configuration settings applied to both sessions (`--set KEY=JSON5`, repeatable).
    settings: Vec<(String, String)>,
    /// The options as given (but `--netns`), passed on to the server and caller processes.
    passed: Vec<String>,
}

fn args() -> Res<Args> {
    let mut args = Args {
        role: Role::Main,
        netns: false,
        runs: 5,
        seconds: 2.0,
        workers: BridgeConfig::default().workers,
        shm_workers: ferry_shm::ServerConfig::default().workers,
        bulk: ferry_shm::ServerConfig::default().bulk,
        idle_sleep: ferry_shm::ServerConfig::default().idle_sleep,
        settings: Vec::new(),
        passed: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--netns" {
            args.netns = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |what: &str| format!("{flag} {value}: expected {what}");
        match flag.as_str() {
            "--serve" => {
                args.role = Role::Serve { ip: value };
                continue;
            }
            "--call" => {
                args.role = Role::Call {
                    ready: Ready::parse(&value)?,
                };
                continue;
            }
            "--runs" => args.runs = value.parse().map_err(|_| number("a count"))?,
            "--seconds" => args.seconds = value.parse().map_err(|_| number("seconds"))?,
            "--workers" => args.workers = value.parse().map_err(|_| number("a count"))?,
            "--shm-workers" => args.shm_workers = value.parse().map_err(|_| number("a count"))?,
            "--bulk" => args.bulk = value.parse().map_err(|_| number("bytes"))?,
            "--idle-sleep-us" => {
                let us = value.parse().map_err(|_| number("microseconds"))?;
                args.idle_sleep = Duration::from_micros(us);
            }
            "--set" => {
                let (key, setting) = value.split_once('=').ok_or_else(|| number("KEY=JSON5"))?;
                args.settings.push((key.to_owned(), setting.to_owned()));
            }
            other => {
                return Err(format!(
                    "unknown option {other} (--netns, --runs, --seconds, --workers, \
                     --shm-workers, --bulk, --idle-sleep-us, --set)"
                )
                .into())
            }
        }
        args.passed.extend([flag, value]);
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err(format!("--seconds {}: expected a time above zero", args.seconds).into());
    }
    Ok(args)
}

/// A zenoh peer session with the bench's settings.
fn session(args: &Args, listen: &[&str], connect: &[&str]) -> Res<Session> {
    let mut config = peer_config(listen, connect)?;
    for (key, value) in &args.settings {
        config
            .insert_json5(key, value)
            .map_err(|e| format!("--set {key}={value}: {e}"))?;
    }
    zenoh::open(config).wait()
}

/// The server's `ready` line: where each of its peers listens.
struct Ready {
    ip: String,
    name: String,
    zenoh_port: u16,
    /// 0: no tarpc server (built without the feature).
    tarpc_port: u16,
    tcp_port: u16,
    shm_path: String,
}

impl Ready {
    fn line(&self) -> String {
        format!(
            "ready {} {} {} {} {} {}",
            self.ip, self.name, self.zenoh_port, self.tarpc_port, self.tcp_port, self.shm_path
        )
    }

    fn parse(line: &str) -> Res<Ready> {
        let bad = || format!("not a ready line: {line:?}");
        let words: Vec<&str> = line.split(' ').collect();
        let [ready, ip, name, zenoh_port, tarpc_port, tcp_port, shm_path] = words[..] else {
            return Err(bad().into());
        };
        let port = |p: &str| p.parse::<u16>().map_err(|_| bad());
        if ready != "ready" {
            return Err(bad().into());
        }
        Ok(Ready {
            ip: ip.to_owned(),
            name: name.to_owned(),
            zenoh_port: port(zenoh_port)?,
            tarpc_port: port(tarpc_port)?,
            tcp_port: port(tcp_port)?,
            shm_path: shm_path.to_owned(),
        })
    }

    fn addr(&self, port: u16) -> Res<SocketAddr> {
        Ok(format!("{}:{port}", self.ip).parse()?)
    }

    fn raw_key(&self) -> String {
        format!("bench/raw/{}", self.name)
    }
}

fn serve(args: &Args, ip: &str) -> Res<()> {
    let zenoh_port = std::net::TcpListener::bind((ip, 0))?.local_addr()?.port();
    let session = session(args, &[&format!("tcp/{ip}:{zenoh_port}")], &[])?;
    let name = format!("bench-{}", std::process::id());
    let ready = Ready {
        ip: ip.to_owned(),
        name: name.clone(),
        zenoh_port,
        tarpc_port: 0,
        tcp_port: tcp::serve(ip)?.port(),
        shm_path: String::new(),
    };
    // The raw peer: replies with the query's payload, from zenoh's thread.
    let raw_key = ready.raw_key();
    let reply_key = raw_key.clone();
    let _raw = session
        .declare_queryable(&raw_key)
        .callback(move |query| {
            let payload = query.payload().cloned().unwrap_or_default();
            let _ = query.reply(&reply_key, payload).wait();
        })
        .wait()?;
    let server = ZenohServer::start_with(
        &session,
        &name,
        ferry_shm::ServerConfig {
            workers: args.shm_workers,
            bulk: args.bulk,
            idle_sleep: args.idle_sleep,
            ..Default::default()
        },
        BridgeConfig::default().workers(args.workers),
        Bench::server(Handler::default()),
    )?;
    #[cfg(feature = "tarpc")]
    let tarpc = tarpc_peer::Server::start(ip)?;
    let ready = Ready {
        shm_path: server.shm().path().display().to_string(),
        #[cfg(feature = "tarpc")]
        tarpc_port: tarpc.addr.port(),
        ..ready
    };
    println!("{}", ready.line());
    // Serves until the main process closes our input (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    server.shutdown(Duration::from_secs(5));
    Ok(())
}

/// The server process, killed (and so its namespace freed) when dropped.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main_role(args: &Args) -> Res<()> {
    let namespaces = if args.netns {
        let made = ferry_testkit::Namespaces::make("ferry-bench").map_err(|why| {
            format!(
                "--netns: {why} (build, then run the binary so: \
                 `sudo target/release/ferry-zenoh-bench --netns`)"
            )
        })?;
        Some(made)
    } else {
        None
    };
    let exe = std::env::current_exe()?;
    let in_namespace = |index: usize| -> Command {
        match &namespaces {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", &ns.names[index]]).arg(&exe);
                command
            }
            None => Command::new(&exe),
        }
    };
    let ip = match &namespaces {
        Some(ns) => ns.addr(1),
        None => "127.0.0.1".to_owned(),
    };
    // In a process group of its own, so that a Ctrl-C meant for the bench does not kill it
    // outright: it sees its input close when this process ends, and shuts down (removing its
    // shared-memory file).
    let mut child = in_namespace(1)
        .arg("--serve")
        .arg(&ip)
        .args(&args.passed)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let server = ServerProcess(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let line = line.trim_end();
    if line.is_empty() {
        return Err("the server process ended before it was ready (its error is above)".into());
    }
    let ready = Ready::parse(line)?;
    if namespaces.is_some() {
        let status = in_namespace(0)
            .arg("--call")
            .arg(ready.line())
            .args(&args.passed)
            .status()?;
        if !status.success() {
            return Err(format!("the caller process failed: {status}").into());
        }
    } else {
        call(args, &ready)?;
    }
    drop(server);
    Ok(())
}

/// A call's outcome: its error, said, where it failed.
type Outcome = Result<(), String>;

/// `Ok` if `got` is the `len` expected.
fn check_len(got: usize, len: usize) -> Outcome {
    if got == len {
        Ok(())
    } else {
        Err(format!("{got} bytes came back, not {len}"))
    }
}

/// A raw query of `payload`, waited for; its reply's length.
fn raw_query(session: &Session, key: &str, payload: &[u8]) -> Result<usize, String> {
    let replies = session
        .get(key)
        .payload(payload.to_vec())
        .target(QueryTarget::BestMatching)
        .consolidation(ConsolidationMode::None)
        .congestion_control(CongestionControl::Block)
        .express(true)
        .timeout(Duration::from_secs(10))
        .wait()
        .map_err(|e| format!("query refused: {e}"))?;
    let reply = replies.recv().map_err(|_| "no reply".to_owned())?;
    match reply.result() {
        Ok(sample) => Ok(sample.payload().len()),
        Err(e) => Err(format!("an error reply: {e:?}")),
    }
}

/// The median of `trips` timed calls of `call` (after a tenth as many untimed), in µs; the
/// first error instead, if a call fails.
fn median_us(trips: usize, mut call: impl FnMut() -> Outcome) -> Result<f64, String> {
    for _ in 0..trips / 10 + 1 {
        call()?;
    }
    let mut times = Vec::with_capacity(trips);
    for _ in 0..trips {
        let t = Instant::now();
        call()?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&mut times))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Calls per second of `threads` threads each calling `call` for `seconds`; the first error
/// instead, if a call fails.
fn rate(threads: usize, seconds: f64, call: &(dyn Fn() -> Outcome + Sync)) -> Result<f64, String> {
    let stop = AtomicBool::new(false);
    let calls = AtomicU64::new(0);
    let failed = Mutex::new(None);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = call() {
                        failed.lock().unwrap().get_or_insert(e);
                        stop.store(true, Ordering::Relaxed);
                    }
                    n += 1;
                }
                calls.fetch_add(n, Ordering::Relaxed);
            });
        }
        let until = started + Duration::from_secs_f64(seconds);
        while !stop.load(Ordering::Relaxed) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    match failed.into_inner().unwrap() {
        Some(e) => Err(e),
        None => Ok(calls.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()),
    }
}

/// One column of a table: a peer's figures, a run at a time, or why it stopped.
#[derive(Default)]
struct Column {
    runs: Vec<f64>,
    failed: Option<String>,
}

impl Column {
    /// Records one run's figure, or its failure (after which the column runs no more).
    fn run(&mut self, measure: impl FnOnce() -> Result<f64, String>) {
        if self.failed.is_none() {
            match measure() {
                Ok(v) => self.runs.push(v),
                Err(e) => self.failed = Some(e),
            }
        }
    }

    fn median(&mut self) -> Option<f64> {
        (self.failed.is_none() && !self.runs.is_empty()).then(|| median(&mut self.runs))
    }

    /// Its median with `decimals`, `fails`, or `-` where the peer did not run.
    fn cell(&mut self, decimals: usize) -> String {
        if self.failed.is_some() {
            return "fails".to_owned();
        }
        self.median()
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}×", a / b),
        _ => "-".to_owned(),
    }
}

/// One peer's measurement: a figure, or the first error of its calls.
type Measure<'a> = &'a mut dyn FnMut() -> Result<f64, String>;

/// Runs every measure `runs` times into its column, each run starting one measure further along,
/// so that drift in the machine's load within a run falls on each peer in turn.
fn take_turns(runs: usize, columns: &mut [Column], measures: &mut [(usize, Measure<'_>)]) {
    for run in 0..runs {
        for k in 0..measures.len() {
            let (column, measure) = &mut measures[(k + run) % measures.len()];
            columns[*column].run(measure);
        }
    }
}

/// Says each failed column's error under its table.
fn failures(row: &str, names: &[&str], columns: &[Column]) {
    for (name, column) in names.iter().zip(columns) {
        if let Some(e) = &column.failed {
            println!("    {row}, {name} failed: {e}");
        }
    }
}

#[cfg(feature = "tarpc")]
fn tarpc_client(ready: &Ready) -> Res<Option<tarpc_peer::Client>> {
    Ok(Some(tarpc_peer::Client::connect(
        ready.addr(ready.tarpc_port)?,
    )?))
}

/// Built without the tarpc feature: no tarpc column.
#[cfg(not(feature = "tarpc"))]
fn tarpc_client(_: &Ready) -> Res<Option<NoTarpc>> {
    Ok(None)
}

#[cfg(not(feature = "tarpc"))]
enum NoTarpc {}

#[cfg(not(feature = "tarpc"))]
impl NoTarpc {
    fn add(&self, _: u64) -> Result<u64, String> {
        match *self {}
    }
    fn echo(&self, _: &[u8]) -> Result<usize, String> {
        match *self {}
    }
    fn echo_bytes(&self, _: &[u8]) -> Result<usize, String> {
        match *self {}
    }
}

fn call(args: &Args, ready: &Ready) -> Res<()> {
    let session = session(
        args,
        &[],
        &[&format!("tcp/{}:{}", ready.ip, ready.zenoh_port)],
    )?;
    let raw_key = ready.raw_key();
    let client = ZenohClient::connect(
        &session,
        &ready.name,
        ClientConfig::default().service::<Bench>(),
    )?;
    let bench = Bench::client(&client);
    let tcp = Mutex::new(tcp::Client::connect(ready.addr(ready.tcp_port)?)?);
    let tarpc = tarpc_client(ready)?;
    let shm = ferry_shm::ShmClient::attach(
        &ready.shm_path,
        ferry_shm::ClientConfig::default().service::<Bench>(),
    )?;
    let local = Bench::client(&shm);
    // The one-name client: the server runs on this machine, so shared memory.
    let named = NamedClient::connect(
        &session,
        &ready.name,
        ClientConfig::default().service::<Bench>(),
    )?;
    if !named.is_local() {
        return Err("the one-name client did not find the server's shared memory".into());
    }
    let by_name = Bench::client(&named);

    let link = if ready.ip.starts_with("127.") {
        "loopback TCP"
    } else {
        "TCP over a veth pair between two network namespaces"
    };
    println!(
        "ferry over zenoh against raw zenoh query/reply on the same sessions (peer to peer, {link}, \
         express), tarpc ({}) and a TCP ping-pong; server and caller in two processes; bridge \
         workers {}, shared-memory workers {}, bulk {} B, {} runs{}",
        if tarpc.is_some() {
            "bincode, TCP_NODELAY"
        } else {
            "not built: --features tarpc"
        },
        args.workers,
        args.shm_workers,
        args.bulk,
        args.runs,
        args.settings
            .iter()
            .map(|(k, v)| format!(", {k} = {v}"))
            .collect::<String>()
    );
    println!(
        "round trips, µs (median of the runs' medians); ÷: ferry's time over the peer's; \
         \"tarpc b.\": its bytes as serde_bytes:"
    );
    // Everything once before the first figure (connections, buffers, zenoh's routes).
    let warm_until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < warm_until {
        tcp.lock().unwrap().echo(&[1; 8])?;
        raw_query(&session, &raw_key, &[1; 8])?;
        bench.add(1)?;
        bench.echo(&[1; 8])?;
        if let Some(tarpc) = &tarpc {
            tarpc.add(1)?;
            tarpc.echo(&[1; 8])?;
            tarpc.echo_bytes(&[1; 8])?;
        }
    }
    println!(
        "{:<18} {:>8} {:>9} {:>8} {:>6} {:>8} {:>7} {:>9} {:>7}",
        "payload", "TCP", "raw zenoh", "ferry", "÷ raw", "tarpc", "÷ tarpc", "tarpc b.", "÷ t. b."
    );
    let sizes: [(&str, usize, usize); 5] = [
        ("8 B, Add (fixed)", 8, 2000),
        ("8 B, Echo", 8, 2000),
        ("4 KiB, Echo", 4096, 2000),
        ("64 KiB, Echo", 65536, 500),
        ("1 MiB, Echo", 1 << 20, 60),
    ];
    let mut failed = Vec::new();
    for (i, (label, len, trips)) in sizes.into_iter().enumerate() {
        let fixed = i == 0;
        let payload = vec![5u8; len];
        let mut columns: [Column; 5] = Default::default();
        let mut tcp_trips = || {
            let mut tcp = tcp.lock().unwrap();
            median_us(trips, || {
                check_len(tcp.echo(&payload).map_err(|e| e.to_string())?, len)
            })
        };
        let mut raw_trips = || {
            median_us(trips, || {
                check_len(raw_query(&session, &raw_key, &payload)?, len)
            })
        };
        let mut ferry_trips = || {
            median_us(trips, || match fixed {
                true => bench.add(1).map(drop).map_err(|e| e.to_string()),
                false => check_len(bench.echo(&payload).map_err(|e| e.to_string())?.len(), len),
            })
        };
        let mut measures: Vec<(usize, Measure<'_>)> = vec![
            (0, &mut tcp_trips),
            (1, &mut raw_trips),
            (2, &mut ferry_trips),
        ];
        let (mut tarpc_trips, mut bytes_trips);
        if let Some(tarpc) = &tarpc {
            tarpc_trips = || {
                median_us(trips, || match fixed {
                    true => tarpc.add(1).map(drop),
                    false => check_len(tarpc.echo(&payload)?, len),
                })
            };
            measures.push((3, &mut tarpc_trips));
            if !fixed {
                bytes_trips = || median_us(trips, || check_len(tarpc.echo_bytes(&payload)?, len));
                measures.push((4, &mut bytes_trips));
            }
        }
        take_turns(args.runs, &mut columns, &mut measures);
        let [_, r, f, p, b] = columns.each_mut().map(Column::median);
        println!(
            "{label:<18} {:>8} {:>9} {:>8} {:>6} {:>8} {:>7} {:>9} {:>7}",
            columns[0].cell(1),
            columns[1].cell(1),
            columns[2].cell(1),
            ratio(f, r),
            columns[3].cell(1),
            ratio(f, p),
            columns[4].cell(1),
            ratio(f, b)
        );
        failed.push((label, columns));
    }
    for (label, columns) in &failed {
        failures(
            label,
            &["TCP", "raw zenoh", "ferry", "tarpc", "tarpc b."],
            columns,
        );
    }
    let local_add = || local.add(1).map(drop).map_err(|e| e.to_string());
    let named_add = || by_name.add(1).map(drop).map_err(|e| e.to_string());
    let shm_rows: [(&str, &str, &dyn Fn() -> Outcome); 2] = [
        (
            "8 B, Add, local",
            "shared memory, the same server",
            &local_add,
        ),
        (
            "8 B, Add, by name",
            "the one-name client: shared memory, the same server",
            &named_add,
        ),
    ];
    for (label, how, add) in shm_rows {
        let mut runs = Column::default();
        for _ in 0..args.runs {
            runs.run(|| median_us(20_000, add));
        }
        println!(
            "{label:<18} {:>8} {:>9} {:>8}   ({how})",
            "",
            "",
            runs.cell(2)
        );
        failures(label, &["shared memory"], std::slice::from_ref(&runs));
    }

    println!(
        "throughput, calls/s of 8-byte Add ({} s each, median of the runs); ÷: ferry's rate over \
         the peer's (above 1: ferry more); tarpc's callers share one client:",
        args.seconds
    );
    println!(
        "{:<18} {:>9} {:>8} {:>6} {:>8} {:>7}",
        "callers", "raw zenoh", "ferry", "÷ raw", "tarpc", "÷ tarpc"
    );
    for threads in [1, 4, 16] {
        let mut columns: [Column; 3] = Default::default();
        let raw_add = || raw_query(&session, &raw_key, &[7; 8]).map(drop);
        let ferry_add = || bench.add(1).map(drop).map_err(|e| e.to_string());
        let mut raw_rate = || rate(threads, args.seconds, &raw_add);
        let mut ferry_rate = || rate(threads, args.seconds, &ferry_add);
        let mut measures: Vec<(usize, Measure<'_>)> =
            vec![(0, &mut raw_rate), (1, &mut ferry_rate)];
        let mut tarpc_rate;
        if let Some(tarpc) = &tarpc {
            tarpc_rate = move || rate(threads, args.seconds, &|| tarpc.add(1).map(drop));
            measures.push((2, &mut tarpc_rate));
        }
        take_turns(args.runs, &mut columns, &mut measures);
        let [r, f, p] = columns.each_mut().map(Column::median);
        println!(
            "{:<18} {:>9} {:>8} {:>6} {:>8} {:>7}",
            threads,
            columns[0].cell(0),
            columns[1].cell(0),
            ratio(f, r),
            columns[2].cell(0),
            ratio(f, p)
        );
        failures(
            &format!("{threads} callers"),
            &["raw zenoh", "ferry", "tarpc"],
            &columns,
        );
    }
    drop(shm);
    drop(named);
    drop(client);
    Ok(())
}

fn main() -> std::process::ExitCode {
    let done = args().and_then(|args| match &args.role {
        Role::Main => main_role(&args),
        Role::Serve { ip } => serve(&args, ip),
        Role::Call { ready } => call(&args, ready),
    });
    match done {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-zenoh-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
