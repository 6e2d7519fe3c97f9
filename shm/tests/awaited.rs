//! The async client (`Name::async_client(&shm)`): the same answers as the blocking one, many
//! calls in flight from few threads, deadlines, dropped calls, a server that goes away.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_shm::ferry_rpc::service::{Error, Status, Transport};
use ferry_shm::{
    path_for, wire, Bytes, ClientConfig, RpcOpcodes, ServerConfig, ShmClient, ShmServer, Text,
};

#[wire]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Odd = 1,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("odd")
    }
}

#[derive(RpcOpcodes)]
#[rpc(service = "sleepy")]
pub enum Sleepy {
    #[rpc(response = u64)]
    Add { a: u64, b: u64 },
    /// Sleeps `ms` milliseconds, then returns them.
    #[rpc(response = u64)]
    Nap { ms: u64 },
    #[rpc(response = u64, limit = 1 << 20)]
    Len { data: Bytes },
    #[rpc(response = Bytes, limit = 1 << 20)]
    Repeat { n: u32 },
    #[rpc(response = Text)]
    Greet { n: u32 },
    #[rpc(response = u64, error = Refused)]
    Even { v: u64 },
    #[rpc(oneway)]
    Count { v: u64 },
    #[rpc(response = u64)]
    Counted,
    /// Works `ms` milliseconds, a millisecond at a time, unless its caller gives the call up
    /// first; returns the milliseconds it worked.
    #[rpc(response = u64)]
    Work { ms: u64 },
}

/// Calls of `work` that saw their caller give them up (the async handler's).
static NOTICED: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct Napper {
    counted: AtomicU64,
}

impl SleepyServer for Napper {
    fn add(&self, a: u64, b: u64) -> u64 {
        a + b
    }
    fn nap(&self, ms: u64) -> u64 {
        std::thread::sleep(Duration::from_millis(ms));
        ms
    }
    fn len(&self, data: &[u8]) -> u64 {
        data.iter().map(|&b| b as u64).sum::<u64>() << 32 | data.len() as u64
    }
    fn repeat(&self, n: u32) -> impl AsRef<[u8]> {
        (0..n).map(|i| i as u8).collect::<Vec<u8>>()
    }
    fn greet(&self, n: u32) -> impl AsRef<str> {
        format!("hello {n}")
    }
    fn even(&self, v: u64) -> Result<u64, Refused> {
        if v.is_multiple_of(2) {
            Ok(v / 2)
        } else {
            Err(Refused::Odd)
        }
    }
    fn count(&self, v: u64) {
        self.counted.fetch_add(v, Ordering::Relaxed);
    }
    fn counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }
    fn work(&self, ms: u64) -> u64 {
        for done in 0..ms {
            if ferry_shm::cancelled() {
                return done;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        ms
    }
}

fn start(tag: &str, config: ServerConfig) -> (ShmServer, Arc<ShmClient>) {
    let path = path_for(&format!("test-awaited-{tag}-{}", std::process::id()));
    let server = ShmServer::start(&path, config, Sleepy::server(Napper::default())).unwrap();
    let client = ShmClient::attach(&path, ClientConfig::default().service::<Sleepy>()).unwrap();
    (server, Arc::new(client))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaited_calls_answer_as_blocking_ones() {
    let (server, shm) = start("answers", ServerConfig::default());
    let c = Sleepy::async_client(&*shm);
    let b = Sleepy::client(&*shm);
    assert_eq!(c.add(2, 3).await, Ok(5));
    assert_eq!(c.even(8).await, Ok(4));
    assert_eq!(c.even(7).await, Err(Error::App(Refused::Odd)));
    assert_eq!(c.even(7).await, b.even(7));
    // A streamed argument in the bulk area, one longer than it (the helper threads), one over
    // the limit (refused before it is sent).
    let small: Vec<u8> = (0..100u8).collect();
    assert_eq!(c.len(&small).await, b.len(&small));
    let large = vec![3u8; ferry_shm::DEFAULT_BULK + 10];
    assert_eq!(
        c.len(&large).await,
        Ok((3 * large.len() as u64) << 32 | large.len() as u64)
    );
    let over = vec![0u8; (1 << 20) + 1];
    assert_eq!(c.len(&over).await, Err(Error::Status(Status::Rejected)));
    // Streamed replies and one-way calls go through the helper threads.
    assert_eq!(c.repeat(300).await.unwrap(), b.repeat(300).unwrap());
    assert_eq!(c.greet(7).await.unwrap(), "hello 7");
    c.count(5).await.unwrap();
    c.count(6).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.counted().await != Ok(11) {
        assert!(Instant::now() < deadline, "the one-way calls never arrived");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

/// Thousands of calls in flight from a runtime of two threads, every answer right; calls that
/// wait for slow handlers hold no thread (they are far more than the runtime's threads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_calls_in_flight() {
    let config = ServerConfig {
        ports: 256,
        workers: 8,
        ..ServerConfig::default()
    };
    let (server, shm) = start("many", config);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..4000u64 {
        let c = Sleepy::async_client(Arc::clone(&shm));
        tasks.spawn(async move { (i, c.add(i, 1).await) });
    }
    while let Some(done) = tasks.join_next().await {
        let (i, sum) = done.unwrap();
        assert_eq!(sum, Ok(i + 1));
    }
    // Slow handlers: 64 naps of 20 ms on 8 workers, all in flight at once.
    let started = Instant::now();
    for _ in 0..64 {
        let c = Sleepy::async_client(Arc::clone(&shm));
        tasks.spawn(async move { (20, c.nap(20).await) });
    }
    while let Some(done) = tasks.join_next().await {
        let (ms, slept) = done.unwrap();
        assert_eq!(slept, Ok(ms));
    }
    // 8 rounds of 8 naps: 160 ms at the least.
    assert!(started.elapsed() >= Duration::from_millis(160));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

#[tokio::test(flavor = "current_thread")]
async fn a_deadline_ends_an_awaited_call() {
    let (server, shm) = start("deadline", ServerConfig::default());
    let c = Sleepy::async_client(&*shm).with_deadline(Duration::from_millis(20));
    let started = Instant::now();
    assert_eq!(c.nap(300).await, Err(Error::Transport(Transport::Deadline)));
    let took = started.elapsed();
    assert!(took < Duration::from_millis(250), "the call took {took:?}");
    // The next calls work (on another port: the abandoned one comes back once answered), with
    // the handle's deadline: the worker whose share of the ports it lands on may be the one
    // still in the nap, and the other reaches that port only on its sweeps.
    assert_eq!(Sleepy::async_client(&*shm).add(1, 2).await, Ok(3));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

#[tokio::test(flavor = "current_thread")]
async fn a_dropped_call_gives_its_port_back() {
    let config = ServerConfig {
        ports: 32,
        ..ServerConfig::default()
    };
    let (server, shm) = start("dropped", config);
    let c = Sleepy::async_client(&*shm);
    for _ in 0..40 {
        // Cancelled while the handler sleeps: its port is abandoned, then taken back by the
        // server once it answered; 40 of them on 32 ports need the ports back.
        let cancelled = tokio::time::timeout(Duration::from_millis(1), c.nap(5)).await;
        assert!(cancelled.is_err());
    }
    assert_eq!(c.add(40, 2).await, Ok(42));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

#[tokio::test(flavor = "current_thread")]
async fn a_server_that_stops_fails_the_calls_that_wait() {
    let (server, shm) = start("stopped", ServerConfig::default());
    let c = Sleepy::async_client(&*shm);
    assert_eq!(c.add(1, 1).await, Ok(2));
    // A drain lets a call in flight finish; new ones are refused.
    let waiting = tokio::spawn({
        let shm = Arc::clone(&shm);
        async move { Sleepy::async_client(&*shm).nap(100).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stopped = std::thread::spawn(move || server.shutdown(Duration::from_secs(5)));
    assert_eq!(waiting.await.unwrap(), Ok(100));
    assert!(stopped.join().unwrap().drained);
    let refused = c.add(1, 1).await;
    assert!(
        matches!(
            refused,
            Err(Error::Transport(
                Transport::ShuttingDown | Transport::NoServer
            ))
        ),
        "{refused:?}"
    );
}

/// The same service with async handlers: its naps hold no server thread.
#[derive(Default)]
struct AsyncNapper {
    counted: AtomicU64,
}

impl SleepyAsyncServer for AsyncNapper {
    async fn add(&self, a: u64, b: u64) -> u64 {
        a + b
    }
    async fn nap(&self, ms: u64) -> u64 {
        if ms == LONE_NAP {
            LONE_NAPS.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ms
    }
    async fn len(&self, data: &[u8]) -> u64 {
        tokio::task::yield_now().await;
        data.iter().map(|&b| b as u64).sum::<u64>() << 32 | data.len() as u64
    }
    async fn repeat(&self, n: u32) -> Vec<u8> {
        // A timer of the runtime's, from a call that goes through the packets.
        tokio::time::sleep(Duration::from_millis(1)).await;
        (0..n).map(|i| i as u8).collect()
    }
    async fn greet(&self, n: u32) -> String {
        format!("hello {n}")
    }
    async fn even(&self, v: u64) -> Result<u64, Refused> {
        if v.is_multiple_of(2) {
            Ok(v / 2)
        } else {
            Err(Refused::Odd)
        }
    }
    async fn count(&self, v: u64) {
        self.counted.fetch_add(v, Ordering::Relaxed);
    }
    async fn counted(&self) -> u64 {
        self.counted.load(Ordering::Relaxed)
    }
    async fn work(&self, ms: u64) -> u64 {
        for done in 0..ms {
            if ferry_shm::cancelled() {
                NOTICED.fetch_add(1, Ordering::Relaxed);
                return done;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        ms
    }
}

fn start_async(tag: &str, config: ServerConfig) -> (ShmServer, Arc<ShmClient>) {
    let path = path_for(&format!("test-awaited-{tag}-{}", std::process::id()));
    let runtime = tokio::runtime::Handle::current();
    let service = Sleepy::async_server(AsyncNapper::default(), move |task| {
        runtime.spawn(task);
    });
    let server = ShmServer::start(&path, config, service).unwrap();
    let client = ShmClient::attach(&path, ClientConfig::default().service::<Sleepy>()).unwrap();
    (server, Arc::new(client))
}

/// The naps of `a_lone_worker_runs_a_later_answer_once` (no other test naps this long).
const LONE_NAP: u64 = 57;
static LONE_NAPS: AtomicU64 = AtomicU64::new(0);

/// A lone worker whose handlers answer later (a task) holds the port's inline lock while the task
/// has the call, as one of several workers does: its next passes find the request still pending
/// and leave it, and the handler runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_worker_runs_a_later_answer_once() {
    let config = ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    };
    let (server, shm) = start_async("lone-later", config);
    let c = Sleepy::async_client(&*shm);
    assert_eq!(c.nap(LONE_NAP).await, Ok(LONE_NAP));
    assert_eq!(
        LONE_NAPS.load(Ordering::Relaxed),
        1,
        "the handler ran again"
    );
    assert_eq!(c.add(1, 2).await, Ok(3));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_handlers_answer_every_kind_of_call() {
    let (server, shm) = start_async("async-handlers", ServerConfig::default());
    // Blocking calls, from a thread of their own (they block it).
    let answers = tokio::task::spawn_blocking({
        let shm = Arc::clone(&shm);
        move || {
            let c = Sleepy::client(&*shm);
            (
                c.add(2, 3),
                c.even(7),
                c.repeat(5),
                c.greet(1),
                c.len(&[1, 2]),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(answers.0, Ok(5));
    assert_eq!(answers.1, Err(Error::App(Refused::Odd)));
    assert_eq!(answers.2.unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(answers.3.unwrap(), "hello 1");
    assert_eq!(answers.4, Ok(3u64 << 32 | 2));
    let c = Sleepy::async_client(&*shm);
    assert_eq!(c.add(2, 3).await, Ok(5));
    assert_eq!(c.even(8).await, Ok(4));
    assert_eq!(c.nap(3).await, Ok(3));
    let large = vec![1u8; ferry_shm::DEFAULT_BULK + 1];
    assert_eq!(
        c.len(&large).await,
        Ok((large.len() as u64) << 32 | large.len() as u64)
    );
    assert_eq!(c.repeat(300).await.unwrap().len(), 300);
    c.count(4).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.counted().await != Ok(4) {
        assert!(Instant::now() < deadline, "the one-way call never arrived");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stats = server.stats();
    drop(shm);
    assert!(stats.served >= 10, "{stats:?}");
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

/// Ten thousand calls in flight at once from a runtime of two threads, against a handler that
/// sleeps 10 ms: they take about as long as one, not ten thousand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_in_flight_against_async_handlers() {
    const CALLS: u64 = 10_000;
    let config = ServerConfig {
        ports: 10_016,
        workers: 2,
        bulk: 0,
        ..ServerConfig::default()
    };
    let (server, shm) = start_async("ten-thousand", config);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let c = Sleepy::async_client(Arc::clone(&shm));
        tasks.spawn(async move { c.nap(10).await });
    }
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap(), Ok(10));
    }
    let took = started.elapsed();
    // One after another they would take 100 s; all at once, the time to make and answer them.
    assert!(
        took < Duration::from_secs(20),
        "{CALLS} calls took {took:?}"
    );
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

/// A blocking handler sees its caller give the call up (`ferry_shm::cancelled`), returns early,
/// and its worker serves the next call at once: a lone worker, a call of 5 s given up at 50 ms.
#[tokio::test(flavor = "current_thread")]
async fn a_handler_sees_its_caller_give_up() {
    let config = ServerConfig {
        workers: 1,
        ..ServerConfig::default()
    };
    let (server, shm) = start("cancelled", config);
    assert!(!ferry_shm::cancelled(), "outside a handler");
    let c = Sleepy::async_client(&*shm);
    let started = Instant::now();
    let given_up = c.with_deadline(Duration::from_millis(50)).work(5_000).await;
    assert_eq!(given_up, Err(Error::Transport(Transport::Deadline)));
    // The lone worker is free again long before the 5 s the call asked for.
    assert_eq!(c.add(1, 2).await, Ok(3));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the worker was held {took:?}"
    );
    // A blocking caller that gives up at its deadline, the same.
    let blocking = tokio::task::spawn_blocking({
        let shm = Arc::clone(&shm);
        move || {
            let c = Sleepy::client(&*shm).with_deadline(Duration::from_millis(50));
            (c.work(5_000), Sleepy::client(&*shm).add(2, 2))
        }
    });
    let (given_up, next) = blocking.await.unwrap();
    assert_eq!(given_up, Err(Error::Transport(Transport::Deadline)));
    assert_eq!(next, Ok(4));
    assert!(started.elapsed() < Duration::from_secs(4));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}

/// An async handler's task sees its caller give the call up (a dropped call) within its polls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_handler_sees_its_caller_give_up() {
    let (server, shm) = start_async("cancelled-async", ServerConfig::default());
    let c = Sleepy::async_client(&*shm);
    let before = NOTICED.load(Ordering::Relaxed);
    let dropped = tokio::time::timeout(Duration::from_millis(30), c.work(5_000)).await;
    assert!(dropped.is_err());
    let deadline = Instant::now() + Duration::from_secs(3);
    while NOTICED.load(Ordering::Relaxed) == before {
        assert!(
            Instant::now() < deadline,
            "the handler never saw the call dropped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(c.work(3).await, Ok(3));
    drop(shm);
    assert!(server.shutdown(Duration::from_secs(5)).drained);
}
