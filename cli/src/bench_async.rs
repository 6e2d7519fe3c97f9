//! `ferry bench-async`: the async client and async handlers, between two processes.
//!
//! A server process (this program again, role `async-server`) serves two files: one whose
//! handlers are blocking (an echo), one whose handlers are `async fn`s on a tokio runtime of two
//! threads (a nap of a few milliseconds). This process then measures:
//! - the round trip of an echo made by the blocking client and by the async client (awaited on a
//!   current-thread runtime), and their ratio;
//! - many naps in flight at once from a runtime of two threads: their wall time, the calls per
//!   second, and the CPU time this (the client) process spent while they waited, as cores.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_shm::{path_for, ClientConfig, RpcOpcodes, ServerConfig, ShmClient, ShmServer};

use crate::Res;

/// The echo, served by blocking handlers.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.bench.async.echo")]
pub enum EchoBench {
    /// `x + 1`.
    #[rpc(response = u64)]
    Echo { x: u64 },
}

/// The nap, served by async handlers.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.bench.async.nap")]
pub enum NapBench {
    /// Sleeps `ms` milliseconds, then returns them.
    #[rpc(response = u64)]
    Nap { ms: u64 },
}

struct Echo;

impl EchoBenchServer for Echo {
    fn echo(&self, x: u64) -> u64 {
        x + 1
    }
}

struct Napper;

impl NapBenchAsyncServer for Napper {
    async fn nap(&self, ms: u64) -> u64 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ms
    }
}

#[derive(clap::Args, Debug)]
pub struct BenchAsyncArgs {
    /// Echo round trips per run.
    #[arg(long, default_value_t = 50_000)]
    trips: u64,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Naps in flight at once.
    #[arg(long, default_value_t = 10_000)]
    inflight: u64,
    /// How long each nap sleeps, in milliseconds (a run for each).
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    nap_ms: Vec<u64>,
}

/// The server process's arguments (`ferry async-server`, run by `bench-async`).
#[derive(clap::Args, Debug)]
pub struct AsyncServerArgs {
    #[arg(long)]
    name: String,
    #[arg(long)]
    ports: u32,
}

pub fn check(a: &BenchAsyncArgs) -> Result<(), String> {
    if a.trips == 0 || a.runs == 0 || a.inflight == 0 {
        return Err("--trips, --runs and --inflight: at least 1".into());
    }
    if a.inflight > 1 << 20 {
        return Err(format!(
            "--inflight {}: at most {} (a port each)",
            a.inflight,
            1 << 20
        ));
    }
    Ok(())
}

/// The server process: both files served until its standard input closes.
pub fn server(a: AsyncServerArgs) -> Res<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    let handle = runtime.handle().clone();
    let echo = ShmServer::start(
        path_for(&format!("{}-echo", a.name)),
        ServerConfig {
            workers: 1,
            ..ServerConfig::default()
        },
        EchoBench::server(Echo),
    )?;
    let naps = ShmServer::start(
        path_for(&format!("{}-nap", a.name)),
        ServerConfig {
            ports: a.ports,
            workers: 1,
            bulk: 0,
            ..ServerConfig::default()
        },
        NapBench::async_server(Napper, move |task| {
            handle.spawn(task);
        }),
    )?;
    println!("ready");
    std::io::stdout().flush()?;
    // Until the bench closes our standard input.
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line)? > 0 {
        line.clear();
    }
    echo.shutdown(Duration::from_secs(5));
    naps.shutdown(Duration::from_secs(5));
    drop(runtime);
    Ok(())
}

/// This process's CPU time so far (user and system).
fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let us = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Duration::from_micros(us.max(0) as u64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(a: BenchAsyncArgs) -> Res<()> {
    let name = format!("bench-async-{}", std::process::id());
    // A port per nap in flight, rounded up to the ports' multiple of 32.
    let ports = (a.inflight as u32).div_ceil(32) * 32;
    let mut server = Command::new(std::env::current_exe()?)
        .args([
            "async-server",
            "--name",
            &name,
            "--ports",
            &ports.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut ready = String::new();
    BufReader::new(server.stdout.take().ok_or("no server output")?).read_line(&mut ready)?;
    if ready.trim() != "ready" {
        return Err("the server process did not start".into());
    }
    let result = measure(&a, &name);
    drop(server.stdin.take());
    server.wait()?;
    result
}

fn measure(a: &BenchAsyncArgs, name: &str) -> Res<()> {
    let echo_shm = ShmClient::attach(
        path_for(&format!("{name}-echo")),
        ClientConfig::default().service::<EchoBench>(),
    )?;
    let nap_shm = Arc::new(ShmClient::attach(
        path_for(&format!("{name}-nap")),
        ClientConfig::default().service::<NapBench>(),
    )?);
    println!(
        "ferry bench-async: {} CPUs; the server's async handlers on a tokio runtime of 2 threads",
        crate::cpus()
    );

    // The echo: blocking and awaited, alternated.
    let blocking = EchoBench::client(&echo_shm);
    let awaited = EchoBench::async_client(&echo_shm);
    let local = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let (mut b, mut w) = (Vec::new(), Vec::new());
    for run in 0..a.runs + 1 {
        let t = Instant::now();
        for x in 0..a.trips {
            if blocking.echo(x)? != x + 1 {
                return Err("a wrong echo".into());
            }
        }
        let blocking_ns = t.elapsed().as_nanos() as f64 / a.trips as f64;
        let t = Instant::now();
        local.block_on(async {
            for x in 0..a.trips {
                if awaited.echo(x).await? != x + 1 {
                    return Err::<(), Box<dyn std::error::Error>>("a wrong echo".into());
                }
            }
            Ok(())
        })?;
        let awaited_ns = t.elapsed().as_nanos() as f64 / a.trips as f64;
        // (The first run warms up.)
        if run > 0 {
            b.push(blocking_ns);
            w.push(awaited_ns);
        }
    }
    let (b, w) = (median(b), median(w));
    println!();
    println!("| echo (8 B each way), round trip | ns | ratio |");
    println!("|---|---:|---:|");
    println!("| blocking client | {b:.0} | 1 |");
    println!("| async client, awaited | {w:.0} | {:.2}× |", w / b);

    // Naps in flight.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    println!();
    println!(
        "| {} naps in flight at once, a client runtime of 2 threads | wall time | one after another | calls/s | client CPU while they ran |",
        a.inflight
    );
    println!("|---|---:|---:|---:|---:|");
    for &nap_ms in &a.nap_ms {
        let (mut walls, mut cores) = (Vec::new(), Vec::new());
        for run in 0..a.runs + 1 {
            let cpu = cpu_time();
            let t = Instant::now();
            runtime.block_on(async {
                let mut tasks = tokio::task::JoinSet::new();
                for _ in 0..a.inflight {
                    let c = NapBench::async_client(Arc::clone(&nap_shm));
                    tasks.spawn(async move { c.nap(nap_ms).await });
                }
                while let Some(done) = tasks.join_next().await {
                    if done?? != nap_ms {
                        return Err::<(), Box<dyn std::error::Error>>("a wrong nap".into());
                    }
                }
                Ok(())
            })?;
            let wall = t.elapsed();
            let used = cpu_time().saturating_sub(cpu);
            if run > 0 {
                walls.push(wall.as_secs_f64());
                cores.push(used.as_secs_f64() / wall.as_secs_f64());
            }
        }
        let (wall, cores) = (median(walls), median(cores));
        println!(
            "| naps of {nap_ms} ms | {:.1} ms | {:.1} s | {:.0} | {cores:.2} cores |",
            wall * 1e3,
            (a.inflight * nap_ms) as f64 / 1e3,
            a.inflight as f64 / wall
        );
    }
    Ok(())
}
