//! A derived service across two processes through zenoh on loopback: every kind of call, the
//! handler's typed errors, streams and their limits, deadlines, a refused attach, hostile
//! payloads both ways, a server that dies mid-call and one that comes back. The server is this
//! test binary run again as a child (test `peer_server`, with `FERRY_ZENOH_SERVE` set). Every
//! test runs under a watchdog.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_rpc::service::{Bytes, Error, Status, Text, Transport};
use ferry_rpc::{wire, RpcOpcodes};
use ferry_testkit::Watchdog;
use ferry_zenoh::{peer_config, ClientConfig, ZenohClient, ZenohError, ZenohServer};
use zenoh::{Session, Wait};

/// Why `take` refused.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Short {
    Empty = 1,
}

/// The service under test: one call of each shape.
#[derive(RpcOpcodes)]
enum Store {
    /// Adds `n` to the total; returns it.
    #[rpc(response = u64)]
    Add { n: u64 },
    /// The length and byte sum of `value` (at most 1 MiB).
    #[rpc(response = [u64; 2], limit = 1 << 20)]
    Put { value: Bytes },
    /// `n` bytes counting up (mod 251), at most 1 MiB.
    #[rpc(response = Bytes, limit = 1 << 20)]
    Fill { n: u32 },
    /// The text in upper case (at most 64 KiB each way: the default).
    #[rpc(response = Text)]
    Upper { text: Text },
    /// Takes `n` from the total, refusing to go below zero.
    #[rpc(response = u64, error = Short)]
    Take { n: u64 },
    /// Adds 1 to the total, without waiting.
    #[rpc(oneway)]
    Bump,
    /// Sleeps `ms` milliseconds, then returns them.
    #[rpc(response = u32)]
    Sleep { ms: u32 },
    /// Ends the server's process from inside the call.
    #[rpc(response = u32)]
    Die,
}

/// A newer schema of the same service.
mod newer {
    use super::*;

    #[derive(RpcOpcodes)]
    #[rpc(service = "Store")]
    pub enum Store {
        #[rpc(response = u64)]
        Add { n: u64 },
        #[rpc(response = u64)]
        Reset,
    }
}

#[derive(Default)]
struct Total(AtomicU64);

impl StoreServer for Total {
    fn add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed) + n
    }
    fn put(&self, value: &[u8]) -> [u64; 2] {
        [
            value.len() as u64,
            value.iter().map(|&b| b as u64).sum::<u64>(),
        ]
    }
    fn fill(&self, n: u32) -> impl AsRef<[u8]> {
        (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>()
    }
    fn upper(&self, text: &str) -> impl AsRef<str> {
        text.to_uppercase()
    }
    fn take(&self, n: u64) -> Result<u64, Short> {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| t.checked_sub(n))
            .map(|t| t - n)
            .map_err(|_| Short::Empty)
    }
    fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn sleep(&self, ms: u32) -> u32 {
        std::thread::sleep(Duration::from_millis(ms as u64));
        ms
    }
    fn die(&self) -> u32 {
        std::process::exit(3)
    }
}

const SERVE: &str = "FERRY_ZENOH_SERVE";

/// The child: serves `Store` under the name and on the port `FERRY_ZENOH_SERVE` gives
/// (`NAME PORT`), prints `serving`, and serves until its standard input closes.
#[test]
fn peer_server() {
    let Some(what) = std::env::var_os(SERVE) else {
        return;
    };
    let what = what.into_string().unwrap();
    let (name, port) = what.split_once(' ').unwrap();
    let listen = format!("tcp/127.0.0.1:{port}");
    let session = zenoh::open(peer_config(&[&listen], &[]).unwrap())
        .wait()
        .unwrap();
    let server = ZenohServer::start(
        &session,
        name,
        ferry_shm::ServerConfig::default(),
        Store::server(Total::default()),
    )
    .unwrap();
    println!("serving");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    server.shutdown(Duration::from_secs(5));
}

/// A server in a child process, stopped (killed) when dropped.
struct Peer {
    child: Child,
}

impl Peer {
    fn start(name: &str, port: u16) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["peer_server", "--exact", "--nocapture", "--test-threads=1"])
            .env(SERVE, format!("{name} {port}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("serving") => break,
                Some(_) => continue,
                None => panic!("the server process ended before serving"),
            }
        }
        Peer { child }
    }

    /// Kills the server outright (no shutdown).
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the server to end on its own.
    fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A name of this test's own.
fn name(test: &str) -> String {
    format!("zt-{test}-{}", std::process::id())
}

/// A client session connected to the server's port.
fn session(port: u16) -> Session {
    let connect = format!("tcp/127.0.0.1:{port}");
    zenoh::open(peer_config(&[], &[&connect]).unwrap())
        .wait()
        .unwrap()
}

fn connect(session: &Session, name: &str) -> ZenohClient {
    ZenohClient::connect(session, name, ClientConfig::default().service::<Store>()).unwrap()
}

/// A server in a child process under a name of test `test`'s own, and a client connected to it
/// (with its session, and the name).
fn served(test: &str) -> (Peer, Session, ZenohClient, String) {
    let (name, port) = (name(test), free_port());
    let peer = Peer::start(&name, port);
    let session = session(port);
    let client = connect(&session, &name);
    (peer, session, client, name)
}

#[test]
fn every_kind_of_call_crosses_between_two_processes() {
    let _watchdog = Watchdog::new("every kind of call through zenoh", Duration::from_secs(120));
    let (_peer, _session, client, _) = served("calls");
    let store = Store::client(&client);
    assert_eq!(store.add(5), Ok(5));
    assert_eq!(store.add(2), Ok(7));
    // Streamed arguments and replies of every size to the limit.
    for len in [0usize, 1, 8, 64, 65, 4096, 65536, 1 << 20] {
        let value: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let sum = value.iter().map(|&b| b as u64).sum::<u64>();
        assert_eq!(store.put(&value), Ok([len as u64, sum]), "put {len}");
        assert_eq!(
            store.put_with(len, |b| b.copy_from_slice(&value)),
            Ok([len as u64, sum])
        );
        let got = store.fill(len as u32).unwrap();
        assert_eq!(got.len(), len);
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    }
    let text = "ferry über zenoh ".repeat(100);
    assert_eq!(store.upper(&text), Ok(text.to_uppercase()));
    let mut buf = [0u8; 4];
    assert_eq!(store.upper_into("abc", &mut buf), Ok("ABC"));
    // The handler's typed error, apart from the others.
    assert_eq!(store.take(100), Err(Error::App(Short::Empty)));
    assert_eq!(store.take(7), Ok(0));
    // One-way calls: not waited for, run all the same.
    for _ in 0..10 {
        store.bump().unwrap();
    }
    let until = Instant::now() + Duration::from_secs(10);
    while store.add(0).unwrap() < 10 {
        assert!(Instant::now() < until, "the one-way calls did not all run");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The limits: an argument over its limit is refused before it is sent; a reply longer than
    // the caller's buffer is refused here.
    assert_eq!(
        store.put(&vec![0; (1 << 20) + 1]),
        Err(Error::Status(Status::Rejected))
    );
    assert_eq!(
        store.upper(&"x".repeat(65 * 1024)),
        Err(Error::Status(Status::Rejected))
    );
    let mut small = [0u8; 10];
    assert_eq!(
        store.fill_into(500, &mut small).map(|b| b.len()),
        Err(Error::Status(Status::ReplyTooLarge {
            len: 500,
            limit: 10
        }))
    );
    // Threads share a client.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    store.add(1).unwrap();
                }
            });
        }
    });
    assert_eq!(store.add(0), Ok(10 + 200));
}

#[test]
fn attaching_is_refused_without_a_server_of_the_schema() {
    let _watchdog = Watchdog::new("attach refusals", Duration::from_secs(60));
    let (name, port) = (name("attach"), free_port());
    let _peer = Peer::start(&name, port);
    let session = session(port);
    let quick = Duration::from_millis(500);
    // Another schema of the same service: told which one answers.
    let newer = ZenohClient::connect(
        &session,
        &name,
        ClientConfig::default()
            .service::<newer::Store>()
            .attach(quick),
    )
    .unwrap_err();
    assert!(
        matches!(
            newer,
            ZenohError::Mismatch { service: "Store", client, server }
                if client == newer::Store::FINGERPRINT && server == Store::FINGERPRINT
        ),
        "{newer}"
    );
    // Another name: nobody serves it.
    let started = Instant::now();
    let none = ZenohClient::connect(
        &session,
        "nobody-here",
        ClientConfig::default().service::<Store>().attach(quick),
    )
    .unwrap_err();
    assert!(
        matches!(
            none,
            ZenohError::NotServed {
                service: "Store",
                ..
            }
        ),
        "{none}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(none.to_string().contains("nobody-here"));
    // A name that cannot be a key.
    assert!(matches!(
        ZenohClient::connect(&session, "a/b", ClientConfig::default().service::<Store>()),
        Err(ZenohError::BadName(_))
    ));
}

#[test]
fn a_call_past_its_deadline_returns_within_it() {
    let _watchdog = Watchdog::new("deadlines through zenoh", Duration::from_secs(60));
    let (_peer, _session, client, _) = served("deadline");
    let store = Store::client(&client);
    assert_eq!(store.sleep(1), Ok(1));
    let hurried = store.with_deadline(Duration::from_millis(200));
    let started = Instant::now();
    assert_eq!(
        hurried.sleep(3000),
        Err(Error::Transport(Transport::Deadline))
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    // The client goes on.
    assert_eq!(store.add(1), Ok(1));
}

/// Hand-made queries to the server's key: requests no generated client makes are refused as
/// bad requests, an opcode the service does not have as unknown, and the server goes on.
#[test]
fn hostile_requests_are_refused_and_the_server_goes_on() {
    let _watchdog = Watchdog::new("hostile requests", Duration::from_secs(60));
    let (_peer, session, client, name) = served("hostile");
    let key = ferry_zenoh::key_for(&name, "Store", Store::FINGERPRINT);
    let raw = |payload: Vec<u8>| -> Vec<u8> {
        let replies = session
            .get(&key)
            .payload(payload)
            .timeout(Duration::from_secs(5))
            .wait()
            .unwrap();
        let reply = replies.recv().unwrap();
        reply.result().unwrap().payload().to_bytes().to_vec()
    };
    let status = |reply: &[u8]| {
        (
            reply[0],
            reply[1],
            reply[2],
            u32::from_le_bytes(reply[4..8].try_into().unwrap()),
        )
    };
    // Too short, another format, a prefix longer than the bytes, a fixed reply over a slot.
    let mut header = vec![1u8, 1, 0, 0];
    header.extend_from_slice(&Store::Add { n: 0 }.opcode().to_le_bytes());
    header.extend_from_slice(&8u32.to_le_bytes());
    header.extend_from_slice(&8u32.to_le_bytes());
    header.extend_from_slice(&[0; 16]);
    let mut good = header.clone();
    good.extend_from_slice(&5u64.to_le_bytes());
    let bad_request = (1, 1, 3, 0);
    assert_eq!(status(&raw(vec![1, 2, 3])), bad_request);
    let mut other = good.clone();
    other[0] = 2;
    assert_eq!(status(&raw(other)), bad_request);
    assert_eq!(status(&raw(header.clone())), bad_request);
    let mut wide = good.clone();
    wide[12..16].copy_from_slice(&65u32.to_le_bytes());
    assert_eq!(status(&raw(wide)), bad_request);
    // A fixed reply of the wrong length for the call: the server's call is made with that
    // length and its bytes come back, but no generated client asks so; an opcode the service
    // does not have: refused by the server.
    let mut unknown = good.clone();
    unknown[4..8].copy_from_slice(&0x8000_0001u32.to_le_bytes());
    assert_eq!(status(&raw(unknown)), (1, 1, 1, 0x8000_0001));
    // The well-formed call is served.
    let reply = raw(good);
    assert_eq!(reply[0], 0);
    assert_eq!(u64::from_le_bytes(reply[1..9].try_into().unwrap()), 5);
    assert_eq!(Store::client(&client).add(0), Ok(5));
}

/// A server that answers with bytes that are not a reply of the call's shape: the client
/// refuses them, and never returns them as a value.
#[test]
fn replies_not_of_the_calls_shape_are_never_ok() {
    let _watchdog = Watchdog::new("hostile replies", Duration::from_secs(60));
    let port = free_port();
    let listen = format!("tcp/127.0.0.1:{port}");
    let server = zenoh::open(peer_config(&[&listen], &[]).unwrap())
        .wait()
        .unwrap();
    let name = name("forged");
    let key = ferry_zenoh::key_for(&name, "Store", Store::FINGERPRINT);
    let answers: std::sync::Mutex<Vec<Vec<u8>>> = Default::default();
    let answers = std::sync::Arc::new(answers);
    let queue = std::sync::Arc::clone(&answers);
    let reply_key = key.clone();
    let _queryable = server
        .declare_queryable(&key)
        .callback(move |query| {
            let empty = query.payload().is_none_or(|p| p.is_empty());
            let answer = match empty {
                true => vec![0],
                false => queue.lock().unwrap().pop().unwrap_or_default(),
            };
            let _ = query.reply(&reply_key, answer).wait();
        })
        .wait()
        .unwrap();
    let session = session(port);
    let client = connect(&session, &name);
    let store = Store::client(&client);
    let bad = Err(Error::Status(Status::BadResponse));
    // Each call takes the next forged answer.
    let forge = |answer: Vec<u8>| answers.lock().unwrap().push(answer);
    forge(vec![]);
    assert_eq!(store.add(1), bad);
    forge(vec![0, 1, 2, 3]);
    assert_eq!(store.add(1), bad, "a fixed reply shorter than the call's");
    forge([&[0u8][..], &[0; 9]].concat());
    assert_eq!(store.add(1), bad, "a fixed reply longer than the call's");
    forge(vec![7; 9]);
    assert_eq!(store.add(1), bad, "an unknown tag");
    forge(vec![1, 9, 9, 9]);
    assert_eq!(store.add(1), bad, "an error of the wrong length");
    forge([&[0u8][..], &[0xff; 10]].concat());
    assert_eq!(
        store.upper("abc"),
        Err(Error::Status(Status::BadResponse)),
        "text that is not UTF-8"
    );
    forge([&[0u8][..], &[2]].concat());
    assert_eq!(
        store.take(1),
        Err(Error::Status(Status::BadResponse)),
        "a tagged reply with no value"
    );
    forge([&[0u8][..], &vec![1; (1 << 20) + 1]].concat());
    assert_eq!(
        store.fill(1).map(|v| v.len()),
        Err(Error::Status(Status::ReplyTooLarge {
            len: (1 << 20) + 1,
            limit: 1 << 20
        }))
    );
    forge([&[0u8][..], &8u64.to_le_bytes()].concat());
    assert_eq!(store.add(1), Ok(8), "a well-formed reply");
}

#[test]
fn a_server_that_dies_mid_call_fails_it_and_a_restarted_one_is_reached_again() {
    let _watchdog = Watchdog::new("a server's death and restart", Duration::from_secs(120));
    let (name, port) = (name("restart"), free_port());
    let peer = Peer::start(&name, port);
    let session = session(port);
    let client = connect(&session, &name);
    let store = Store::client(&client).with_deadline(Duration::from_secs(5));
    assert_eq!(store.add(1), Ok(1));
    // The server's process ends inside the call: an error, not a reply, before the deadline.
    let started = Instant::now();
    let died = store.die();
    assert!(died.is_err(), "{died:?}");
    assert!(!died.unwrap_err().not_executed());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(peer.wait().code(), Some(3));
    // Killed outright in the middle of a call.
    let peer = Peer::start(&name, port);
    let until = Instant::now() + Duration::from_secs(30);
    while store.add(1).is_err() {
        assert!(
            Instant::now() < until,
            "the restarted server was not reached"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::scope(|s| {
        let call = s.spawn(|| {
            let started = Instant::now();
            (store.sleep(10_000), started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        peer.kill();
        let (result, took) = call.join().unwrap();
        assert!(result.is_err(), "{result:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
    // Restarted: the same client reaches it again (a new server: its total starts at zero).
    let _peer = Peer::start(&name, port);
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match store.add(1) {
            Ok(total) => {
                assert_eq!(total, 1);
                break;
            }
            Err(e) => assert!(Instant::now() < until, "not reached again: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
