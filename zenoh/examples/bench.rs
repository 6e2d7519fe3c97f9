//! Ferry over zenoh against a raw zenoh query/reply of the same payload, on the same session
//! configuration, in the same process: two peer sessions on loopback TCP (one listening, one
//! connecting), the server's queryables on one and the callers on the other.
//!
//! ```text
//! cargo run --release -p ferry-zenoh --example bench -- [--runs 5] [--seconds 2] [--workers 4]
//!     [--shm-workers 2] [--bulk 262144] [--set KEY=JSON5 ...]
//! ```
//!
//! `--set` applies a zenoh configuration setting to both sessions (for instance
//! `--set transport/unicast/lowlatency=true --set transport/unicast/qos/enabled=false`).
//!
//! Round trips (median of each run's median, per size): `Echo` (a `Bytes` argument and a `Bytes`
//! reply of the same length) against a queryable that replies with the query's payload; at 8 B
//! also `Add` (a fixed call: 8 bytes each way). Throughput: 1, 4 and 16 threads calling `Add`,
//! against 1, 4 and 16 threads querying 8 bytes raw. And, for scale, the same `Add` through
//! shared memory on this machine: straight through a `ShmClient`, and through the one-name
//! client (`NamedClient`, which takes shared memory when the service is local).
//! Raw and ferry runs alternate, so drift in the machine's load falls on both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_rpc::service::Bytes;
use ferry_rpc::RpcOpcodes;
use ferry_zenoh::{peer_config, BridgeConfig, ClientConfig, NamedClient, ZenohClient, ZenohServer};
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::{Session, Wait};

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
        value.to_vec()
    }
}

struct Args {
    runs: usize,
    seconds: f64,
    workers: usize,
    shm_workers: usize,
    bulk: usize,
    idle_sleep: Duration,
    /// zenoh configuration settings applied to both sessions (`--set KEY=JSON5`, repeatable).
    settings: Vec<(String, String)>,
}

fn args() -> Args {
    let mut args = Args {
        runs: 5,
        seconds: 2.0,
        workers: BridgeConfig::default().workers,
        shm_workers: ferry_shm::ServerConfig::default().workers,
        bulk: ferry_shm::ServerConfig::default().bulk,
        idle_sleep: ferry_shm::ServerConfig::default().idle_sleep,
        settings: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value.parse().expect("--runs N"),
            "--seconds" => args.seconds = value.parse().expect("--seconds S"),
            "--workers" => args.workers = value.parse().expect("--workers N"),
            "--shm-workers" => args.shm_workers = value.parse().expect("--shm-workers N"),
            "--bulk" => args.bulk = value.parse().expect("--bulk BYTES"),
            "--set" => {
                let (key, value) = value.split_once('=').expect("--set KEY=JSON5");
                args.settings.push((key.to_owned(), value.to_owned()));
            }
            "--idle-sleep-us" => {
                args.idle_sleep = Duration::from_micros(value.parse().expect("--idle-sleep-us N"))
            }
            other => panic!(
                "unknown option {other} (--runs, --seconds, --workers, --shm-workers, --bulk, --idle-sleep-us, --set)"
            ),
        }
    }
    args
}

/// A raw query of `payload`, waited for; its reply's length.
fn raw_query(session: &Session, key: &str, payload: &[u8]) -> usize {
    let replies = session
        .get(key)
        .payload(payload.to_vec())
        .target(QueryTarget::BestMatching)
        .consolidation(ConsolidationMode::None)
        .congestion_control(CongestionControl::Block)
        .express(true)
        .timeout(Duration::from_secs(10))
        .wait()
        .unwrap();
    let reply = replies.recv().unwrap();
    reply.result().unwrap().payload().len()
}

/// The median of `trips` timed calls of `call` (after a tenth as many untimed), in µs.
fn median_us(trips: usize, mut call: impl FnMut()) -> f64 {
    for _ in 0..trips / 10 + 1 {
        call();
    }
    let mut times: Vec<f64> = (0..trips)
        .map(|_| {
            let t = Instant::now();
            call();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    median(&mut times)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Calls per second of `threads` threads each calling `call` for `seconds`.
fn rate(threads: usize, seconds: f64, call: &(dyn Fn() + Sync)) -> f64 {
    let stop = AtomicBool::new(false);
    let calls = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    call();
                    n += 1;
                }
                calls.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    calls.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = args();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let tuned = |mut config: zenoh::Config| -> Result<zenoh::Config, Box<dyn std::error::Error + Send + Sync>> {
        for (key, value) in &args.settings {
            config.insert_json5(key, value).map_err(|e| format!("--set {key}={value}: {e}"))?;
        }
        Ok(config)
    };
    let server_session = zenoh::open(tuned(peer_config(&[&endpoint], &[])?)?).wait()?;
    let client_session = zenoh::open(tuned(peer_config(&[], &[&endpoint])?)?).wait()?;
    let name = format!("bench-{}", std::process::id());

    // The raw peer: replies with the query's payload, from zenoh's thread.
    let raw_key = format!("bench/raw/{}", std::process::id());
    let reply_key = raw_key.clone();
    let _raw = server_session
        .declare_queryable(&raw_key)
        .callback(move |query| {
            let payload = query.payload().cloned().unwrap_or_default();
            let _ = query.reply(&reply_key, payload).wait();
        })
        .wait()?;
    let server = ZenohServer::start_with(
        &server_session,
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
    let client = ZenohClient::connect(
        &client_session,
        &name,
        ClientConfig::default().service::<Bench>(),
    )?;
    let bench = Bench::client(&client);
    let shm = ferry_shm::ShmClient::attach(
        server.shm().path(),
        ferry_shm::ClientConfig::default().service::<Bench>(),
    )?;
    let local = Bench::client(&shm);
    // The one-name client: the server runs on this machine, so shared memory.
    let named = NamedClient::connect(
        &client_session,
        &name,
        ClientConfig::default().service::<Bench>(),
    )?;
    assert!(named.is_local());
    let by_name = Bench::client(&named);

    println!(
        "ferry over zenoh against raw zenoh query/reply, same sessions (peer to peer, loopback \
         TCP, express), bridge workers {}, shared-memory workers {}, bulk {} B, {} runs{}",
        args.workers,
        args.shm_workers,
        args.bulk,
        args.runs,
        args.settings
            .iter()
            .map(|(k, v)| format!(", {k} = {v}"))
            .collect::<String>()
    );
    println!("round trips, µs (median of the runs' medians):");
    println!(
        "{:<22} {:>10} {:>10} {:>7}",
        "payload", "raw zenoh", "ferry", "ratio"
    );
    let sizes: [(&str, usize, usize); 4] = [
        ("8 B", 8, 2000),
        ("4 KiB", 4096, 2000),
        ("64 KiB", 65536, 500),
        ("1 MiB", 1 << 20, 60),
    ];
    let row = |label: &str, raw: &mut Vec<f64>, ferry: &mut Vec<f64>| {
        let (r, f) = (median(raw), median(ferry));
        println!("{label:<22} {r:>10.1} {f:>10.1} {:>6.2}×", f / r);
    };
    {
        let (mut raw, mut ferry) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            raw.push(median_us(2000, || {
                raw_query(&client_session, &raw_key, &[7; 8]);
            }));
            ferry.push(median_us(2000, || {
                bench.add(1).unwrap();
            }));
        }
        row("8 B, Add (fixed)", &mut raw, &mut ferry);
    }
    for (label, len, trips) in sizes {
        let payload = vec![5u8; len];
        let (mut raw, mut ferry) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            raw.push(median_us(trips, || {
                assert_eq!(raw_query(&client_session, &raw_key, &payload), len);
            }));
            ferry.push(median_us(trips, || {
                assert_eq!(bench.echo(&payload).unwrap().len(), len);
            }));
        }
        row(&format!("{label}, Echo (Bytes)"), &mut raw, &mut ferry);
    }
    let mut shm_runs: Vec<f64> = (0..args.runs)
        .map(|_| {
            median_us(20_000, || {
                local.add(1).unwrap();
            })
        })
        .collect();
    println!(
        "{:<22} {:>10} {:>10.2}   (shared memory, the same server)",
        "8 B, Add, local",
        "",
        median(&mut shm_runs)
    );

    let mut named_runs: Vec<f64> = (0..args.runs)
        .map(|_| {
            median_us(20_000, || {
                by_name.add(1).unwrap();
            })
        })
        .collect();
    println!(
        "{:<22} {:>10} {:>10.2}   (the one-name client: shared memory, the same server)",
        "8 B, Add, by name",
        "",
        median(&mut named_runs)
    );
    let big = vec![5u8; 1 << 20];
    let mut shm_big: Vec<f64> = (0..args.runs)
        .map(|_| {
            median_us(60, || {
                assert_eq!(local.echo(&big).unwrap().len(), big.len());
            })
        })
        .collect();
    println!(
        "{:<22} {:>10} {:>10.1}   (shared memory, the same server)",
        "1 MiB, Echo, local",
        "",
        median(&mut shm_big)
    );

    println!(
        "throughput, calls/s ({} s each, median of the runs):",
        args.seconds
    );
    println!(
        "{:<22} {:>10} {:>10} {:>7}",
        "callers", "raw zenoh", "ferry", "ratio"
    );
    for threads in [1, 4, 16] {
        let (mut raw, mut ferry) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            raw.push(rate(threads, args.seconds, &|| {
                raw_query(&client_session, &raw_key, &[7; 8]);
            }));
            ferry.push(rate(threads, args.seconds, &|| {
                bench.add(1).unwrap();
            }));
        }
        let (r, f) = (median(&mut raw), median(&mut ferry));
        println!(
            "{:<22} {r:>10.0} {f:>10.0} {:>6.2}×",
            format!("{threads} (8 B)"),
            f / r
        );
    }
    drop(shm);
    drop(named);
    drop(client);
    server.shutdown(Duration::from_secs(5));
    Ok(())
}
