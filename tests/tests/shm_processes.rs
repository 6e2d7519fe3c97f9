//! The shared-memory transport between real processes: `shm-peer` clients (and servers) against
//! servers in this test process.
//!
//! Sizes: `FERRY_TEST_CALLS` calls per client in the many-calls test (default 100 000, as the
//! issue asks; it runs in seconds in release and in well under a minute in debug on two cores).

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ferry_demo::{Demo, DemoServer, DemoService};
use ferry_demo::{Echoed, SleepError, Summed};
use ferry_rpc::service::{Error, Serving, Transport};
use ferry_rpc::{Mailbox, Port, Server, Single, Wait};
use ferry_shm::{ClientConfig, Created, Handler, ServerConfig, ShmClient, ShmError, ShmServer};
use ferry_tests::{eventually, unique_path, Peer};

const PEER: &str = env!("CARGO_BIN_EXE_shm-peer");

fn config(ports: u32, workers: usize) -> ServerConfig {
    ServerConfig {
        ports,
        workers,
        ..ServerConfig::default()
    }
}

/// A sticky client of the demo service (checked at attach) waiting at most `deadline`.
fn demo_client(path: &std::path::Path, deadline: Duration) -> Result<ShmClient, ShmError> {
    ShmClient::attach(
        path,
        ClientConfig::default()
            .service::<Demo>()
            .deadline(deadline)
            .sticky(true),
    )
}

fn calls_per_client() -> u64 {
    std::env::var("FERRY_TEST_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// `ok O wrong W errors E port P` → (O, W, E, P).
fn outcome(peer: &Peer) -> (u64, u64, u64, u32) {
    let f = peer.expect("ok");
    assert_eq!(f.len(), 7, "{f:?}");
    (
        f[0].parse().unwrap(),
        f[2].parse().unwrap(),
        f[4].parse().unwrap(),
        f[6].parse().unwrap(),
    )
}

/// The demo service, recording the id of every echo it serves (in the vector it shares with the
/// test).
struct Recording {
    seen: Arc<Mutex<Vec<u64>>>,
}

impl DemoServer for Recording {
    fn echo(&self, id: u64) -> Echoed {
        self.seen.lock().unwrap().push(id);
        DemoService.echo(id)
    }
    fn add(&self, a: u64, b: u64) -> u64 {
        DemoService.add(a, b)
    }
    fn sleep(&self, micros: u64) -> Result<u64, SleepError> {
        DemoService.sleep(micros)
    }
    fn sum(&self, data: &[u8]) -> Summed {
        DemoService.sum(data)
    }
}

#[test]
fn four_processes_many_calls_none_lost_duplicated_or_crossed() {
    // Inline (the demo's echo fits a line), then through the packets alone.
    many_calls(true, calls_per_client());
    many_calls(false, (calls_per_client() / 4).max(1000));
}

/// Four client processes making `n` echo calls each, inline or through the packets alone.
fn many_calls(inline: bool, n: u64) {
    let seen = Arc::new(Mutex::new(Vec::with_capacity(4 * n as usize)));
    let recording = Recording {
        seen: Arc::clone(&seen),
    };
    let path = unique_path("many");
    let config = ServerConfig {
        inline,
        ..config(64, 2)
    };
    let server = ShmServer::start(&path, config, Demo::server(recording)).unwrap();
    let p = path.to_str().unwrap();
    let peers: Vec<Peer> = (0..4u64)
        .map(|k| Peer::spawn(PEER, &["calls", p, &k.to_string(), &n.to_string()]))
        .collect();
    for peer in peers {
        // Every reply came back to its own call: right id, right mix, no error.
        let (ok, wrong, errors, _) = outcome(&peer);
        assert_eq!((ok, wrong, errors), (n, 0, 0));
        assert!(peer.finish().success());
    }
    let stats = server.shutdown(Duration::from_secs(10));
    assert!(stats.drained);
    assert_eq!(stats.stats.served, 4 * n);
    assert_eq!(stats.stats.failed, 0);
    // Every call took the path asked for.
    assert_eq!(stats.stats.inline, if inline { 4 * n } else { 0 });
    // The server saw each id exactly once: none lost, none duplicated.
    let mut ids = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(ids.len() as u64, 4 * n);
    ids.sort_unstable();
    let expected: Vec<u64> = (0..4u64)
        .flat_map(|k| (0..n).map(move |i| k << 40 | i))
        .collect();
    assert_eq!(ids, expected);
    assert!(!path.exists());
}

#[test]
fn a_client_killed_mid_call_leaves_others_running_and_its_port_reclaimed() {
    let path = unique_path("kill");
    let server = ShmServer::start(&path, config(32, 2), Demo::server(DemoService)).unwrap();
    let p = path.to_str().unwrap();
    let n = (calls_per_client() / 5).max(1000);
    let others: Vec<Peer> = (1..=2u64)
        .map(|k| Peer::spawn(PEER, &["calls", p, &k.to_string(), &n.to_string()]))
        .collect();
    // The victim's request is in the server's hands (a 1 s sleep) when it dies.
    let victim = Peer::spawn(PEER, &["sleep", p, "1000000"]);
    let port: u32 = victim.expect("sent")[0].parse().unwrap();
    let pid = victim.pid();
    assert_eq!(server.port_owner(port).0, pid);
    victim.kill();
    for peer in others {
        let (ok, wrong, errors, _) = outcome(&peer);
        assert_eq!((ok, wrong, errors), (n, 0, 0));
    }
    eventually("the killed client's port is reclaimed", || {
        server.port_owner(port).0 == 0
    });
    let stats = server.stats();
    assert_eq!(stats.reclaimed, 1);
    // The server answered the dead client's request (to nobody) and carried on.
    assert_eq!(stats.failed, 0);
    let shm = demo_client(&path, Duration::from_secs(30)).unwrap();
    assert_eq!(Demo::client(&shm).add(2, 3), Ok(5));
}

#[test]
fn the_port_of_a_sticky_client_killed_while_idle_is_reclaimed() {
    let path = unique_path("sticky");
    let server = ShmServer::start(&path, config(32, 1), Demo::server(DemoService)).unwrap();
    let p = path.to_str().unwrap();
    // Idle, between calls, its claim kept: the port is at rest and looks like any held one.
    let victim = Peer::spawn(PEER, &["sticky", p]);
    let port: u32 = victim.expect("holding")[0].parse().unwrap();
    assert_eq!(server.port_owner(port).0, victim.pid());
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        server.port_owner(port).0,
        victim.pid(),
        "a live sticky holder keeps its port"
    );
    victim.kill();
    eventually("the dead sticky client's port is reclaimed", || {
        server.port_owner(port).0 == 0
    });
    assert_eq!(server.stats().reclaimed, 1);
    // And the drain does not wait on it (nor on a live idle sticky holder).
    let live = Peer::spawn(PEER, &["sticky", p]);
    live.expect("holding");
    let started = std::time::Instant::now();
    let shutdown = server.shutdown(Duration::from_secs(20));
    assert!(shutdown.drained);
    assert!(started.elapsed() < Duration::from_secs(5));
    live.kill();
}

#[test]
fn a_new_client_gets_the_port_of_a_client_killed_mid_stream() {
    let path = unique_path("last");
    let server = ShmServer::start(&path, config(32, 2), Demo::server(DemoService)).unwrap();
    let p = path.to_str().unwrap();
    // A live client holds 31 of the 32 ports; the victim takes the last one.
    let hog = Peer::spawn(PEER, &["hold", p, "31"]);
    let held: HashSet<u32> = hog
        .expect("held")
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(held.len(), 31);
    let victim = Peer::spawn(PEER, &["stream", p]);
    let port: u32 = victim.expect("streaming")[0].parse().unwrap();
    assert!(!held.contains(&port));
    // Every port is taken: a client finds none before its deadline.
    let shm = ShmClient::attach(
        &path,
        ClientConfig::default()
            .service::<Demo>()
            .deadline(Duration::from_millis(50)),
    )
    .unwrap();
    let err = shm
        .call(Demo::Echo { id: 0 }.opcode(), |_| Ok(()))
        .unwrap_err();
    assert!(matches!(err, ShmError::NoFreePort), "{err}");
    // As the typed client sees it.
    assert_eq!(
        Demo::client(&shm).echo(1),
        Err(Error::Transport(Transport::NoFreePort))
    );
    drop(shm);
    // The victim dies with the server's worker waiting for the rest of its stream.
    victim.kill();
    let newcomer = Peer::spawn(PEER, &["calls", p, "7", "100"]);
    let (ok, wrong, errors, used) = outcome(&newcomer);
    assert_eq!((ok, wrong, errors), (100, 0, 0));
    assert_eq!(used, port, "the only free port is the reclaimed one");
    let stats = server.stats();
    assert_eq!(stats.reclaimed, 1);
    assert_eq!(stats.failed, 1, "the cut stream is one failed call");
    // The hog still holds its ports, untouched.
    for p in &held {
        assert_eq!(server.port_owner(*p).0, hog.pid());
    }
    hog.kill();
    eventually("the hog's ports are reclaimed", || {
        server.stats().reclaimed == 32
    });
}

/// Serves the demo service through the packets, except calls of opcode `BLOCK`, which wait
/// until the gate opens. It lists the demo service, so clients that expect it attach.
struct Blocking {
    gate: Arc<(Mutex<bool>, Condvar)>,
    demo: Serving<Demo, DemoService>,
}

const BLOCK: u32 = 100;

impl<M: Mailbox, W: Wait> Handler<M, W> for Blocking {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        if port.opcode() == BLOCK {
            port.recv(|_, _| {})?;
            let (open, cv) = &*self.gate;
            // Opened by the test; bounded, so a failing test still lets the server stop.
            let _ = cv
                .wait_timeout_while(open.lock().unwrap(), Duration::from_secs(30), |open| !*open)
                .unwrap();
            return port.send(|_, _| {});
        }
        self.demo.handle(port)
    }

    fn services(&self) -> Vec<(&'static str, u64)> {
        Handler::<M, W>::services(&self.demo)
    }
}

#[test]
fn a_blocked_handler_does_not_stall_other_ports() {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let path = unique_path("block");
    let blocking = Blocking {
        gate: Arc::clone(&gate),
        demo: Demo::server(DemoService),
    };
    let server = ShmServer::start(&path, config(64, 2), blocking).unwrap();
    let blocked = {
        let path = path.clone();
        std::thread::spawn(move || {
            let c = ShmClient::attach(&path, ClientConfig::default()).unwrap();
            c.call(BLOCK, |port| port.send_and_recv(|_, _| {}, |_, _| {}))
        })
    };
    eventually("the blocking call reaches its handler", || {
        (0..64).any(|p| server.port_owner(p).0 != 0)
    });
    let peer = Peer::spawn(PEER, &["calls", path.to_str().unwrap(), "3", "2000"]);
    let (ok, wrong, errors, _) = outcome(&peer);
    assert_eq!((ok, wrong, errors), (2000, 0, 0));
    // All of that happened while the first call was still blocked in its handler.
    assert!(!blocked.is_finished());
    let (open, cv) = &*gate;
    *open.lock().unwrap() = true;
    cv.notify_all();
    blocked.join().unwrap().unwrap();
}

#[test]
fn second_server_is_refused_and_a_killed_servers_file_is_replaced() {
    let path = unique_path("serve");
    let first = Peer::spawn(PEER, &["serve", path.to_str().unwrap()]);
    let pid: u32 = first.expect("serving")[0].parse().unwrap();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let err = ShmServer::start(&path, config(64, 1), Demo::server(DemoService)).unwrap_err();
    assert!(
        matches!(err, ShmError::AlreadyServing { pid: Some(p), .. } if p == pid),
        "{err}"
    );
    // A client of the live server works; when the server dies, its calls fail instead of hanging.
    let shm = demo_client(&path, Duration::from_secs(30)).unwrap();
    let c = Demo::client(&shm);
    assert_eq!(c.add(1, 1), Ok(2));
    first.kill();
    assert!(path.exists(), "SIGKILL leaves the file behind");
    match c.echo(1) {
        Err(Error::Transport(
            Transport::NoServer | Transport::Protocol(ferry_rpc::Error::Stalled),
        )) => {}
        other => panic!("expected the dead server to be noticed, got {other:?}"),
    }
    let err = demo_client(&path, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, ShmError::NoServer { .. }), "{err}");
    // The next server replaces the stale file.
    let server = ShmServer::start(&path, config(64, 1), Demo::server(DemoService)).unwrap();
    assert_eq!(server.created(), Created::ReplacedStale);
    let shm = demo_client(&path, Duration::from_secs(30)).unwrap();
    assert_eq!(Demo::client(&shm).add(20, 22), Ok(42));
    drop(shm);
    drop(server);
    assert!(!path.exists());
}

/// Sends `signal` to process `pid`.
fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: `kill` touches no memory of this process; `pid` is a child of this test, not yet
    // reaped (its `Peer` is alive), so the number names no other process.
    let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(sent, 0, "kill {pid}: {}", std::io::Error::last_os_error());
}

/// A `Sleep` call of `micros` from a handle of its own, made raw so that the test knows when its
/// request is in the server's hands (`sent` is told then); `Ok` once the reply is in.
fn sleep_in_flight(
    path: &std::path::Path,
    micros: u64,
    sent: std::sync::mpsc::Sender<()>,
) -> Result<(), ShmError> {
    let config = ClientConfig::default()
        .service::<Demo>()
        .deadline(Duration::from_secs(60));
    let shm = ShmClient::attach(path, config)?;
    shm.call(Demo::Sleep { micros }.opcode(), |port| {
        port.set_request_len(8);
        port.send(|slot, _| slot.words[0] = micros)?;
        let _ = sent.send(());
        port.recv(|_, _| {})
    })
}

/// A server program serving until a signal (`serve_until_signal`), stopped by SIGTERM and by
/// SIGINT: the call in flight when the signal comes is answered in the drain, a later call gets
/// a clear error, and the process exits 0 with its file gone.
#[test]
fn a_server_serving_until_a_signal_drains_exits_0_and_removes_its_file() {
    let _watchdog = ferry_tests::Watchdog::new("serve until a signal", Duration::from_secs(600));
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let path = unique_path("until-signal");
        let p = path.to_str().unwrap();
        let server = Peer::spawn(PEER, &["serve-until-signal", p, "30000"]);
        server.expect("serving");
        let shm = demo_client(&path, Duration::from_secs(30)).unwrap();
        let c = Demo::client(&shm);
        assert_eq!(c.add(1, 2), Ok(3));
        let (sent_tx, sent) = std::sync::mpsc::channel();
        let answered = std::thread::scope(|s| {
            let in_flight = s.spawn(|| sleep_in_flight(&path, 300_000, sent_tx));
            sent.recv_timeout(ferry_tests::PATIENCE)
                .expect("the request is sent");
            send_signal(server.pid(), signal);
            in_flight.join().unwrap()
        });
        assert!(
            answered.is_ok(),
            "the call in flight ({name}): {answered:?}"
        );
        let report = server.expect("stopped");
        assert_eq!(report[0], name, "{report:?}");
        assert_eq!(
            report[1..5],
            ["drained", "true", "stuck", "0"],
            "{report:?}"
        );
        let served: u64 = report[6].parse().unwrap();
        assert!(served >= 2, "{report:?}");
        assert!(server.finish().success(), "{name}: exit status");
        assert!(!path.exists(), "{name}: the file is left");
        match c.add(1, 2) {
            Err(Error::Transport(Transport::NoServer | Transport::ShuttingDown)) => {}
            other => panic!("{name}: a call after the stop gave {other:?}"),
        }
    }
}

/// A call whose handler outlasts the drain, and a second signal that cuts the drain short: the
/// call fails with a clear error instead of hanging, and the process still exits 0 with its
/// file gone (the worker left in the handler is counted stuck).
#[test]
fn a_second_signal_cuts_the_drain_and_the_call_in_flight_fails_clearly() {
    let _watchdog = ferry_tests::Watchdog::new("a second signal", Duration::from_secs(600));
    let path = unique_path("second-signal");
    let p = path.to_str().unwrap();
    // A drain long enough for the call, were it not cut short.
    let server = Peer::spawn(PEER, &["serve-until-signal", p, "60000"]);
    server.expect("serving");
    let (sent_tx, sent) = std::sync::mpsc::channel();
    let failed = std::thread::scope(|s| {
        let in_flight = s.spawn(|| sleep_in_flight(&path, 8_000_000, sent_tx));
        sent.recv_timeout(ferry_tests::PATIENCE)
            .expect("the request is sent");
        send_signal(server.pid(), libc::SIGTERM);
        send_signal(server.pid(), libc::SIGINT);
        in_flight.join().unwrap()
    });
    assert!(
        matches!(failed, Err(ShmError::NoServer { .. })),
        "{failed:?}"
    );
    let report = server.expect("stopped");
    assert!(["SIGTERM", "SIGINT"].contains(&&*report[0]), "{report:?}");
    assert_eq!(
        report[1..5],
        ["drained", "false", "stuck", "1"],
        "{report:?}"
    );
    assert!(server.finish().success(), "exit status");
    assert!(!path.exists(), "the file is left");
}
