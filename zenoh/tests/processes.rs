//! A derived service across two processes through zenoh on loopback: every kind of call, the
//! handler's typed errors, streams and their limits, deadlines, a refused attach, hostile
//! payloads both ways, a server that dies mid-call and one that comes back, the one-name client
//! on both of its paths, and a partition between two network namespaces (skipped, saying why,
//! where the machine does not allow them). The server is this test binary run again as a child
//! (test `peer_server`, with `FERRY_ZENOH_SERVE` set; the namespaced client likewise,
//! `peer_client`). Every test runs under a watchdog.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_rpc::service::{Bytes, Error, Status, Text, Transport};
use ferry_rpc::{wire, RpcOpcodes};
use ferry_testkit::{free_port, Watchdog};
use ferry_zenoh::{peer_config, ClientConfig, NamedClient, ZenohClient, ZenohError, ZenohServer};
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

/// A second service the server serves beside `Store`: a call of one is never made at the
/// other's key.
#[derive(RpcOpcodes)]
enum Tally {
    /// Counts one; returns the count.
    #[rpc(response = u64)]
    Count,
}

#[derive(Default)]
struct Counted(AtomicU64);

impl TallyServer for Counted {
    fn count(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
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

/// The child: serves `Store` as `FERRY_ZENOH_SERVE` says (`NAME PORT HOST [bridged]`; PORT 0:
/// a port of its own choosing), prints `serving PORT`, and serves until its standard input
/// closes. `bridged`: a shared-memory server
/// under another name, exported under NAME by a bridge (so no server of NAME runs on this
/// machine as far as shared memory goes); otherwise a `ZenohServer` of NAME.
#[test]
fn peer_server() {
    let Some(what) = std::env::var_os(SERVE) else {
        return;
    };
    let what = what.into_string().unwrap();
    let words: Vec<&str> = what.split(' ').collect();
    let (name, port, host) = (words[0], words[1].parse::<u16>().unwrap(), words[2]);
    let (session, port) = listening(host, (port != 0).then_some(port));
    let config = ferry_shm::ServerConfig::default();
    let store = Store::server(Total::default()).and(Tally::server(Counted::default()));
    if words.get(3) == Some(&"bridged") {
        let path = ferry_shm::path_for(&format!("{name}-bridged"));
        let server = ferry_shm::ShmServer::start(&path, config, store).unwrap();
        let shm = ferry_shm::ShmClient::attach(&path, Default::default()).unwrap();
        let bridge = ferry_zenoh::Bridge::start(&session, name, shm, Default::default()).unwrap();
        println!("serving {port}");
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        drop(bridge);
        server.shutdown(Duration::from_secs(5));
        return;
    }
    let server = ZenohServer::start(&session, name, config, store).unwrap();
    println!("serving {port}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    server.shutdown(Duration::from_secs(5));
}

/// A session listening on `host`, at `port` or at a free port of its choosing, and the port.
/// A port found free can be taken before the session binds it (by another process's socket):
/// then another is tried, or the same one again a little later.
fn listening(host: &str, port: Option<u16>) -> (Session, u16) {
    let mut refused = String::new();
    for _ in 0..20 {
        let port = port.unwrap_or_else(free_port);
        let listen = format!("tcp/{host}:{port}");
        match zenoh::open(peer_config(&[&listen], &[]).unwrap()).wait() {
            Ok(session) => return (session, port),
            Err(e) => refused = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no session could listen on {host}: {refused}");
}

/// A server in a child process, stopped when dropped (its standard input closed, then killed if
/// it has not ended within `PEER_STOP`), its shared-memory files removed after it.
struct Peer {
    child: Child,
    /// The name it serves (its files: `ferry-NAME` and `ferry-NAME-bridged` in /dev/shm).
    name: String,
    /// The port it listens on.
    port: u16,
}

/// How long a dropped peer has to stop on its own before it is killed.
const PEER_STOP: Duration = Duration::from_secs(10);

impl Peer {
    /// A server of `name` on loopback, at a port of its choosing (`Peer::port`).
    fn start(name: &str) -> Peer {
        Peer::start_as(&[], &format!("{name} 0 127.0.0.1"))
    }

    /// A server of `name` on loopback at `port` (a restarted server, at its predecessor's).
    fn start_at(name: &str, port: u16) -> Peer {
        Peer::start_as(&[], &format!("{name} {port} 127.0.0.1"))
    }

    /// This test binary as a server (`what`: `FERRY_ZENOH_SERVE`'s value), run under `wrap` (a
    /// command and its arguments before the program: `ip netns exec NS`), once it says it
    /// serves.
    fn start_as(wrap: &[&str], what: &str) -> Peer {
        let exe = std::env::current_exe().unwrap();
        let mut command = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let mut child = command
            .args(["peer_server", "--exact", "--nocapture", "--test-threads=1"])
            .env(SERVE, what)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        let port = loop {
            match lines.next() {
                // After the harness's `test peer_server ... ` on the same line.
                Some(Ok(line)) if line.contains("serving ") => {
                    let (_, port) = line.split_once("serving ").unwrap();
                    break port.trim().parse::<u16>().unwrap();
                }
                Some(_) => continue,
                None => panic!("the server process ended before serving"),
            }
        };
        // The rest of its output read to the end, so that its test harness's last lines do not
        // meet a closed pipe when it stops.
        std::thread::spawn(move || lines.for_each(drop));
        let name = what.split(' ').next().unwrap_or_default().to_string();
        Peer { child, name, port }
    }

    /// Kills the server outright (no shutdown); its files are removed when `self` drops.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Removes the files a server of this name leaves when it is killed.
    fn remove_files(&self) {
        for file in [self.name.clone(), format!("{}-bridged", self.name)] {
            let _ = std::fs::remove_file(ferry_shm::path_for(&file));
        }
    }

    /// Waits for the server to end on its own.
    fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // Its standard input closed: it shuts down and removes its file.
        drop(self.child.stdin.take());
        let until = std::time::Instant::now() + PEER_STOP;
        while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.remove_files();
    }
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
    let name = name(test);
    let peer = Peer::start(&name);
    let session = session(peer.port);
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
    let name = name("attach");
    let peer = Peer::start(&name);
    let session = session(peer.port);
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
    let raw_at = |key: &str, payload: Vec<u8>| -> Vec<u8> {
        let replies = session
            .get(key)
            .payload(payload)
            .timeout(Duration::from_secs(5))
            .wait()
            .unwrap();
        let reply = replies.recv().unwrap();
        reply.result().unwrap().payload().to_bytes().to_vec()
    };
    let raw = |payload: Vec<u8>| raw_at(&key, payload);
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
    let reply = raw(good.clone());
    assert_eq!(reply[0], 0);
    assert_eq!(u64::from_le_bytes(reply[1..9].try_into().unwrap()), 5);
    assert_eq!(Store::client(&client).add(0), Ok(5));
    // The same server serves `Tally` too, but a call of it at `Store`'s key, and one of `Store`
    // at `Tally`'s, is refused as an opcode the key's service does not have: neither handler
    // runs.
    let count = Tally::Count.opcode();
    let mut foreign = header.clone();
    foreign[4..8].copy_from_slice(&count.to_le_bytes());
    foreign[8..12].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(status(&raw(foreign)), (1, 1, 1, count));
    let tally_key = ferry_zenoh::key_for(&name, "Tally", Tally::FINGERPRINT);
    let add = Store::Add { n: 0 }.opcode();
    assert_eq!(status(&raw_at(&tally_key, good)), (1, 1, 1, add));
    let tally =
        ZenohClient::connect(&session, &name, ClientConfig::default().service::<Tally>()).unwrap();
    assert_eq!(Tally::client(&tally).count(), Ok(1));
    assert_eq!(Store::client(&client).add(0), Ok(5));
}

/// A server that answers with bytes that are not a reply of the call's shape: the client
/// refuses them, and never returns them as a value.
#[test]
fn replies_not_of_the_calls_shape_are_never_ok() {
    let _watchdog = Watchdog::new("hostile replies", Duration::from_secs(60));
    let (server, port) = listening("127.0.0.1", None);
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
    let name = name("restart");
    let peer = Peer::start(&name);
    let port = peer.port;
    let session = session(port);
    let client = connect(&session, &name);
    let store = Store::client(&client).with_deadline(Duration::from_secs(5));
    assert_eq!(store.add(1), Ok(1));
    // The server's process ends inside the call: an error, not a reply, before the deadline.
    let started = Instant::now();
    let died = store.die();
    assert_eq!(
        died,
        Err(Error::Transport(Transport::Other(ferry_zenoh::NO_ANSWER)))
    );
    assert!(!died.unwrap_err().not_executed());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(peer.wait().code(), Some(3));
    // Killed outright in the middle of a call.
    let peer = Peer::start_at(&name, port);
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
    let _peer = Peer::start_at(&name, port);
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

#[test]
fn the_named_client_takes_shared_memory_on_this_machine_and_zenoh_otherwise() {
    let _watchdog = Watchdog::new("the one-name client", Duration::from_secs(120));
    let config = || ClientConfig::default().service::<Store>();
    // A server of the name on this machine: shared memory.
    let name = name("named-local");
    let local = Peer::start(&name);
    let session = session(local.port);
    let named = NamedClient::connect(&session, &name, config()).unwrap();
    assert!(named.is_local());
    check_calls(Store::client(&named));
    // Only a bridge of the name (its server's file under another name): zenoh.
    let remote = self::name("named-remote");
    let bridged = Peer::start_as(&[], &format!("{remote} 0 127.0.0.1 bridged"));
    let session = self::session(bridged.port);
    let named = NamedClient::connect(&session, &remote, config()).unwrap();
    assert!(!named.is_local());
    check_calls(Store::client(&named));
    // Neither: zenoh's refusal.
    let none = NamedClient::connect(
        &session,
        "nobody-here",
        config().attach(Duration::from_millis(300)),
    )
    .unwrap_err();
    assert!(matches!(none, ZenohError::NotServed { .. }), "{none}");
}

/// The same calls whichever path the client took (on a fresh server: its total at zero).
fn check_calls<S: ferry_rpc::service::Site + Copy>(store: StoreClient<S>) {
    assert_eq!(store.add(5), Ok(5));
    assert_eq!(store.take(9), Err(Error::App(Short::Empty)));
    assert_eq!(store.put(&[1, 2, 3]), Ok([3, 6]));
    assert_eq!(store.fill(300).map(|v| v.len()), Ok(300));
    let mut small = [0u8; 4];
    assert_eq!(
        store.fill_into(5, &mut small).map(|b| b.len()),
        Err(Error::Status(Status::ReplyTooLarge { len: 5, limit: 4 }))
    );
    assert_eq!(store.upper("één"), Ok("ÉÉN".to_owned()));
    assert_eq!(
        store.put(&vec![0; (1 << 20) + 1]),
        Err(Error::Status(Status::Rejected))
    );
    store.bump().unwrap();
    assert_eq!(
        store.with_deadline(Duration::from_millis(100)).sleep(2000),
        Err(Error::Transport(Transport::Deadline))
    );
}

/// The async client over zenoh: every kind of call as the blocking one makes it, and many calls
/// in flight from a runtime of two threads: each call a query awaited without a thread of its
/// own (far more calls wait at once than the runtime has threads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_client_keeps_many_calls_in_flight() {
    use std::sync::Arc;
    let _watchdog = Watchdog::new("async calls through zenoh", Duration::from_secs(120));
    let (_peer, _session, client, _) = served("async");
    let client = Arc::new(client);
    let store = Store::async_client(&*client);
    assert_eq!(store.add(5).await, Ok(5));
    assert_eq!(store.put(&[1, 2, 3]).await, Ok([3, 6]));
    assert_eq!(store.take(100).await, Err(Error::App(Short::Empty)));
    assert_eq!(store.fill(300).await.map(|v| v.len()), Ok(300));
    assert_eq!(store.upper("één").await, Ok("ÉÉN".to_owned()));
    assert_eq!(
        store.put(&vec![0; (1 << 20) + 1]).await,
        Err(Error::Status(Status::Rejected))
    );
    store.bump().await.unwrap();
    let started = Instant::now();
    assert_eq!(
        store
            .with_deadline(Duration::from_millis(200))
            .sleep(3000)
            .await,
        Err(Error::Transport(Transport::Deadline))
    );
    assert!(started.elapsed() < Duration::from_millis(2500));
    // 32 slow calls at once, each in a task: counted in when it starts, out when it returns.
    // Were a call to hold its thread while it waits, no more than two would be in at once.
    let inside = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (store, inside, most) = (
            Store::async_client(Arc::clone(&client)),
            Arc::clone(&inside),
            Arc::clone(&most),
        );
        tasks.spawn(async move {
            most.fetch_max(inside.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            let slept = store.sleep(50).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            slept
        });
    }
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap(), Ok(50));
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most > 2, "at most {most} calls were in flight at once");
    // Many quick calls from many tasks: every one counted once.
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let store = Store::async_client(Arc::clone(&client));
        tasks.spawn(async move {
            for _ in 0..10 {
                store.add(1).await?;
            }
            Ok::<u64, Error>(0)
        });
    }
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap(), Ok(0));
    }
    // (5, one bump, and the thousand adds.)
    let until = Instant::now() + Duration::from_secs(10);
    while store.add(0).await != Ok(5 + 1 + 1000) {
        assert!(Instant::now() < until, "{:?}", store.add(0).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

const CLIENT: &str = "FERRY_ZENOH_CLIENT";

/// The child that calls from another network namespace: connects as `FERRY_ZENOH_CLIENT` says
/// (`NAME ENDPOINT`), prints `connected`, then for each line `call MS` on its standard input
/// calls `add(1)` with a deadline of MS milliseconds and prints `ok TOTAL` or `err MS_TAKEN
/// ERROR`.
#[test]
fn peer_client() {
    let Some(what) = std::env::var_os(CLIENT) else {
        return;
    };
    let what = what.into_string().unwrap();
    let (name, endpoint) = what.split_once(' ').unwrap();
    let session = zenoh::open(peer_config(&[], &[endpoint]).unwrap())
        .wait()
        .unwrap();
    let client = ZenohClient::connect(
        &session,
        name,
        ClientConfig::default()
            .service::<Store>()
            .attach(Duration::from_secs(30)),
    )
    .unwrap();
    let store = Store::client(&client);
    println!("connected");
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let Some(ms) = line.strip_prefix("call ") else {
            continue;
        };
        let started = Instant::now();
        let result = store
            .with_deadline(Duration::from_millis(ms.parse().unwrap()))
            .add(1);
        match result {
            Ok(total) => println!("ok {total}"),
            Err(e) => println!("err {} {e}", started.elapsed().as_millis()),
        }
    }
}

#[test]
fn a_partition_between_two_network_namespaces_fails_calls_within_their_deadline_and_heals() {
    let namespaces = match ferry_testkit::Namespaces::make("fz") {
        Ok(n) => n,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let _watchdog = Watchdog::new("a partition between namespaces", Duration::from_secs(120));
    let (name, port) = (name("partition"), free_port());
    let server_ip = namespaces.addr(0);
    let [a, b] = &namespaces.names;
    let _server = Peer::start_as(
        &["ip", "netns", "exec", a],
        &format!("{name} {port} {server_ip}"),
    );
    let mut client = Command::new("ip")
        .args(["netns", "exec", b])
        .arg(std::env::current_exe().unwrap())
        .args(["peer_client", "--exact", "--nocapture", "--test-threads=1"])
        .env(CLIENT, format!("{name} tcp/{server_ip}:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill<'c>(&'c mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut input = client.stdin.take().unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let _client = Kill(&mut client);
    let mut next = move || loop {
        let line = lines.next().expect("the client ended").unwrap();
        // (The first follows the harness's "test peer_client ... " on its line.)
        let line = line.trim_start_matches("test peer_client ... ");
        if line.starts_with("ok ") || line.starts_with("err ") || line == "connected" {
            return line.to_owned();
        }
    };
    assert_eq!(next(), "connected");
    let mut call = |ms: u32| {
        use std::io::Write;
        writeln!(input, "call {ms}").unwrap();
        next()
    };
    assert_eq!(call(5000), "ok 1");
    // Partitioned: the call fails (no reply) within its deadline, and is not taken for done.
    namespaces.link(false).expect("cutting the link");
    let failed = call(1000);
    let taken: u64 = failed
        .strip_prefix("err ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("a call across the partition: {failed}"));
    assert!(taken < 3000 && failed.contains("deadline"), "{failed}");
    println!("across the partition: {failed}");
    // Healed: calls go through again (zenoh keeps the session across a short partition).
    namespaces.link(true).expect("restoring the link");
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let line = call(2000);
        if line.starts_with("ok ") {
            break;
        }
        assert!(Instant::now() < until, "not healed: {line}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
