//! One-process tests: the server's workers and clients as threads of this test, the file real.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferry_demo::{self as demo, Demo, DemoServer, DemoService, Echoed, SleepError, Summed};
use ferry_rpc::service::{Bytes, Error, Service, Serving, Status, Transport, SERVICE_NAME_BYTES};
use ferry_rpc::{Mailbox, Port, Server, Single, Wait};
use ferry_shm::header::{Geometry, HEADER_SIZE, SERVICE_ENTRY};
use ferry_shm::{
    status, ClientConfig, Created, Handler, ServerConfig, ServerPort, ShmClient, ShmError,
    ShmServer,
};
use ferry_testkit::Watchdog;

mod raw;
use raw::{map_file, word32, word64};

// A generated client over a shared handle is shared by threads too (the handle's docs promise it).
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<ferry_demo::DemoClient<&ShmClient>>();
};

fn unique(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn demo_server(tag: &str) -> ShmServer {
    ShmServer::start(
        unique(tag),
        ServerConfig::default(),
        Demo::server(DemoService),
    )
    .unwrap()
}

const DEADLINE: Duration = Duration::from_secs(20);

/// A sticky client of the demo service (checked at attach), with the tests' deadline.
fn demo_client(path: impl AsRef<Path>) -> ShmClient {
    ShmClient::attach(path, demo_config().sticky(true)).unwrap()
}

/// A client configuration expecting the demo service, with the tests' deadline (not sticky).
fn demo_config() -> ClientConfig {
    ClientConfig::default().service::<Demo>().deadline(DEADLINE)
}

/// The reply an echo of `id` must get.
fn echoed(id: u64) -> Echoed {
    (id, demo::mix(id)).into()
}

#[test]
fn demo_calls_round_trip() {
    let server = demo_server("calls");
    let shm = demo_client(server.path());
    let c = Demo::client(&shm);
    for id in 0..1000u64 {
        assert_eq!(c.echo(id), Ok(echoed(id)));
    }
    assert_eq!(c.add(40, 2), Ok(42));
    assert_eq!(c.sleep(10), Ok(10));
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let want: u64 = data.iter().map(|&b| b as u64).sum();
    assert_eq!(
        c.sum(&data),
        Ok(Summed {
            len: 10_000,
            sum: want
        })
    );
    assert_eq!(c.sum(&[]), Ok(Summed { len: 0, sum: 0 }));
    // Too long a stream is refused with a status, and the port stays usable.
    let big = vec![1u8; demo::SUM_LIMIT as usize + 1];
    assert_eq!(c.sum(&big), Err(Error::Status(Status::Rejected)));
    // Too long a sleep is refused (the handler's own error) without sleeping.
    let started = std::time::Instant::now();
    assert_eq!(
        c.sleep(demo::MAX_SLEEP_MICROS + 1),
        Err(Error::App(SleepError::TooLong))
    );
    assert!(started.elapsed() < Duration::from_micros(demo::MAX_SLEEP_MICROS) / 2);
    assert_eq!(c.echo(7), Ok(echoed(7)));
    drop(shm);
    let stats = server.shutdown(DEADLINE).stats;
    // The sum over the limit never left the client (its generated method checks the limit).
    assert_eq!(stats.served, 1000 + 6);
}

#[test]
fn unknown_opcode_gets_a_status() {
    let server = demo_server("opcode");
    let c = ShmClient::attach(server.path(), ClientConfig::default()).unwrap();
    let status = c
        .call(999, |port| {
            port.send_and_recv(|s, _| s.words[0] = 5, |_, _| {})?;
            Ok(port.status())
        })
        .unwrap();
    assert_eq!(status, status::UNKNOWN_OPCODE);
}

#[test]
fn failing_and_panicking_handlers_answer_with_an_error_status() {
    let path = unique("panic");
    let server = ShmServer::start(
        &path,
        ServerConfig::default(),
        |port: &mut ferry_shm::ServerPort<'_, '_>| {
            if port.opcode() == 1 {
                panic!("handler panics on purpose");
            }
            Err(ferry_rpc::Error::Rejected)
        },
    )
    .unwrap();
    let c = ShmClient::attach(&path, ClientConfig::default()).unwrap();
    for op in [1, 2, 1] {
        let status = c
            .call(op, |port| {
                port.send_and_recv(|_, _| {}, |_, _| {})?;
                Ok(port.status())
            })
            .unwrap();
        assert_eq!(status, status::SERVER_ERROR);
    }
    let stats = server.stats();
    assert_eq!((stats.panicked, stats.failed), (2, 1));
}

#[test]
fn file_is_0600_and_removed_on_shutdown_and_drop() {
    let server = demo_server("mode");
    let path = server.path().to_path_buf();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.uid(), rustix_uid());
    assert!(server.shutdown(DEADLINE).drained);
    assert!(!path.exists());
    let server = demo_server("drop");
    let path = server.path().to_path_buf();
    // Let the monitor start its first interval's sleep.
    std::thread::sleep(Duration::from_millis(100));
    drop(server);
    assert!(!path.exists());
    // And when the owning thread panics.
    let path = unique("unwind");
    let p2 = path.clone();
    let joined = std::thread::spawn(move || {
        let _server =
            ShmServer::start(&p2, ServerConfig::default(), Demo::server(DemoService)).unwrap();
        assert!(p2.exists());
        panic!("the thread holding the server panics");
    })
    .join();
    assert!(joined.is_err());
    assert!(!path.exists());
}

fn rustix_uid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

#[test]
fn second_server_on_the_same_name_is_refused() {
    let server = demo_server("twice");
    let err = ShmServer::start(
        server.path(),
        ServerConfig::default(),
        Demo::server(DemoService),
    )
    .unwrap_err();
    assert!(
        matches!(err, ShmError::AlreadyServing { pid: Some(p), .. } if p == std::process::id()),
        "{err}"
    );
    assert!(err.to_string().contains("already served"), "{err}");
    // The first one is untouched.
    let shm = demo_client(server.path());
    assert_eq!(Demo::client(&shm).add(1, 2), Ok(3));
}

#[test]
fn symlinks_are_never_followed() {
    let target = unique("target");
    std::fs::write(&target, b"precious").unwrap();
    let link = unique("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err =
        ShmServer::start(&link, ServerConfig::default(), Demo::server(DemoService)).unwrap_err();
    assert!(matches!(err, ShmError::Symlink(_)), "{err}");
    let err = ShmClient::attach(&link, ClientConfig::default()).unwrap_err();
    assert!(matches!(err, ShmError::Symlink(_)), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_file(&target).unwrap();
}

/// A pid that no process has: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// The services table listing `services`, as the header's documentation lays it out: per entry
/// the name zero-padded to 48 bytes, the fingerprint, 8 zero bytes.
fn table(services: &[(&str, u64)]) -> Vec<u8> {
    let mut out = vec![0u8; services.len() * SERVICE_ENTRY];
    for (entry, (name, fp)) in out.chunks_exact_mut(SERVICE_ENTRY).zip(services) {
        entry[..name.len()].copy_from_slice(name.as_bytes());
        entry[SERVICE_NAME_BYTES..SERVICE_NAME_BYTES + 8].copy_from_slice(&fp.to_le_bytes());
    }
    out
}

/// The services table and calls table a server writes for `services` and their calls: each
/// entry's text length in its last 8 bytes, the texts after the entries, padded to 64 bytes.
fn served_table(services: &[(&str, u64, &[ferry_rpc::service::CallInfo])]) -> Vec<u8> {
    let entries: Vec<(&str, u64)> = services.iter().map(|&(n, f, _)| (n, f)).collect();
    let mut out = table(&entries);
    let texts: Vec<String> = services
        .iter()
        .map(|(_, _, calls)| calls.iter().map(|c| c.line() + "\n").collect())
        .collect();
    for (entry, text) in out.chunks_exact_mut(SERVICE_ENTRY).zip(&texts) {
        entry[SERVICE_NAME_BYTES + 8..SERVICE_NAME_BYTES + 12]
            .copy_from_slice(&(text.len() as u32).to_le_bytes());
    }
    for text in &texts {
        out.extend_from_slice(text.as_bytes());
    }
    let tail = (out.len() - services.len() * SERVICE_ENTRY).next_multiple_of(64);
    out.resize(services.len() * SERVICE_ENTRY + tail, 0);
    out
}

/// The hash of a services table, as the header keeps it.
fn table_hash(table: &[u8]) -> u64 {
    ferry_rpc::service::fnv1a_64(ferry_rpc::service::FNV64_OFFSET, table)
}

/// The geometry of a 64-port, one-lane file served by `pid` that lists `services`.
fn geometry(pid: u32, services: &[(&str, u64)]) -> Geometry {
    Geometry::new(64, 1, table_hash(&table(services)), pid)
        .unwrap()
        .with_services(services.len() as u32)
}

/// The demo service's entry in a services table.
const DEMO_ENTRY: (&str, u64) = (<Demo as Service>::NAME, Demo::FINGERPRINT);

/// Writes a complete, valid file as a server of the demo service that died would have left it.
fn write_stale(path: &PathBuf) -> Geometry {
    write_file(path, geometry(dead_pid(), &[DEMO_ENTRY]), &[DEMO_ENTRY])
}

/// Writes a complete file of geometry `g` whose table lists `services` (`g` must count them).
fn write_file(path: &PathBuf, g: Geometry, services: &[(&str, u64)]) -> Geometry {
    let mut bytes = vec![0u8; g.file_size()];
    bytes[..HEADER_SIZE].copy_from_slice(&g.encode());
    bytes[g.services_offset()..].copy_from_slice(&table(services));
    std::fs::write(path, &bytes).unwrap();
    g
}

#[test]
fn stale_file_is_detected_and_replaced() {
    let path = unique("stale");
    write_stale(&path);
    // The file is whole and lists the demo service: only its server is gone.
    let err = attach_err(&path, demo_config());
    assert!(matches!(err, ShmError::NoServer { .. }), "{err}");
    let server =
        ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService)).unwrap();
    assert_eq!(server.created(), Created::ReplacedStale);
    let shm = demo_client(&path);
    assert_eq!(Demo::client(&shm).echo(3), Ok(echoed(3)));
}

/// Starting a server at `path` is refused with [`ShmError::NotStale`], and the file there keeps
/// its bytes and stays (also after the refused server is gone).
fn refuses_to_replace(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    let err = ShmServer::start(path, ServerConfig::default(), Demo::server(DemoService))
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, ShmError::NotStale { .. }), "{err}");
    let said = err.to_string();
    assert!(said.contains(&path.display().to_string()), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert_eq!(std::fs::read(path).unwrap(), bytes, "the file was changed");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_file_that_is_not_a_stale_ferry_file_is_never_replaced() {
    // A user's file under a mistyped name, outside /dev/shm.
    let dir = std::env::temp_dir().join(format!("ferry-test-users-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    refuses_to_replace(&dir.join("data.bin"), b"precious\n");
    // An empty file, and one as large as a region, of zeros.
    refuses_to_replace(&dir.join("empty"), b"");
    refuses_to_replace(&dir.join("zeros"), &vec![0u8; 1 << 20]);
    std::fs::remove_dir(&dir).unwrap();
    // Another program's file under ferry's own name in /dev/shm.
    refuses_to_replace(&unique("foreign"), b"another program's state");
    // The magic, but a format version no ferry wrote.
    let mut future = write_stale_bytes();
    future[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    refuses_to_replace(&unique("future"), &future);
    // A whole stale file of this version is still replaced (its server is gone).
    let path = unique("still-stale");
    std::fs::write(&path, write_stale_bytes()).unwrap();
    let server =
        ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService)).unwrap();
    assert_eq!(server.created(), Created::ReplacedStale);
}

/// The bytes of a complete file a dead server of the demo service left.
fn write_stale_bytes() -> Vec<u8> {
    let path = unique("stale-bytes");
    write_stale(&path);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    bytes
}

#[test]
fn a_file_whose_server_pid_was_recycled_has_no_server() {
    // The header names a live pid (ours) but another start time: the server that wrote it died
    // and its pid went to a later process.
    let path = unique("recycled-server");
    let me = std::process::id();
    let start = ferry_shm::owner::start_time(me).unwrap();
    let served = [DEMO_ENTRY];
    write_file(
        &path,
        geometry(me, &served).with_server_start(start + 1),
        &served,
    );
    let err = attach_err(&path, demo_config());
    assert!(
        matches!(err, ShmError::NoServer { pid, .. } if pid == me),
        "{err}"
    );
    // The same header with our start time names a live server (this process).
    write_file(
        &path,
        geometry(me, &served).with_server_start(start),
        &served,
    );
    ShmClient::attach(&path, demo_config()).expect("a live server's file");
    std::fs::remove_file(&path).unwrap();
}

fn attach_err(path: &PathBuf, config: ClientConfig) -> ShmError {
    ShmClient::attach(path, config).unwrap_err()
}

fn header_field(err: &ShmError) -> &'static str {
    match err {
        ShmError::Header { error, .. } => error.field,
        other => panic!("expected a header error, got: {other}"),
    }
}

#[test]
fn attaching_to_bad_files_is_an_error_naming_the_field() {
    let server = demo_server("bad");
    let good = std::fs::read(server.path()).unwrap();
    let path = unique("badcopy");

    // A live, good copy attaches (the server pid in it is alive): the baseline of the test.
    std::fs::write(&path, &good).unwrap();
    ShmClient::attach(&path, demo_config()).unwrap();

    std::fs::write(&path, &good[..HEADER_SIZE / 2]).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "file_size");
    std::fs::write(&path, &good[..good.len() - 64]).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "file_size");
    std::fs::write(&path, []).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "file_size");

    let mut v = good.clone();
    v[8] = 9;
    std::fs::write(&path, &v).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "version");

    let mut v = good.clone();
    v[..8].copy_from_slice(b"NOTFERRY");
    std::fs::write(&path, &v).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "magic");

    let mut v = good.clone();
    v[16] ^= 0x40;
    std::fs::write(&path, &v).unwrap();
    assert_eq!(header_field(&attach_err(&path, demo_config())), "checksum");

    // The services table, whose hash the header keeps: a byte flipped in a name, in a
    // fingerprint, or in an entry's zero tail is refused at attach, by clients that expect a
    // service and by those that expect none.
    let g = *server.geometry();
    assert_eq!(g.services(), 1);
    let at = g.services_offset();
    for flip in [at, at + 3, at + SERVICE_NAME_BYTES, at + SERVICE_ENTRY - 1] {
        let mut v = good.clone();
        v[flip] ^= 0x20;
        std::fs::write(&path, &v).unwrap();
        for config in [demo_config(), ClientConfig::default()] {
            let err = attach_err(&path, config);
            assert_eq!(header_field(&err), "services_hash", "byte {flip}");
            assert!(err.to_string().contains("services table"), "{err}");
        }
    }

    let err = attach_err(&unique("absent"), demo_config());
    assert!(
        matches!(&err, ShmError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_services_table_written_behind_the_servers_back_is_restored() {
    let config = ServerConfig {
        reclaim_interval: Duration::from_millis(5),
        ..ServerConfig::default()
    };
    let server = ShmServer::start(unique("table"), config, Demo::server(DemoService)).unwrap();
    let g = *server.geometry();
    let map = map_file(server.path());
    // A stray write into the table: the name's first byte.
    let word = word32(&map, g.services_offset());
    let good = word.load(Ordering::SeqCst);
    word.store(good ^ 0x20, Ordering::SeqCst);
    // The monitor writes the table back within a few intervals; until then attaching may be
    // refused (never accepted with the wrong table).
    let deadline = std::time::Instant::now() + DEADLINE;
    let shm = loop {
        match ShmClient::attach(server.path(), demo_config()) {
            Ok(shm) => break shm,
            Err(err) => assert_eq!(header_field(&err), "services_hash"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the table was never restored"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(word.load(Ordering::SeqCst), good);
    assert_eq!(shm.services(), [(DEMO_ENTRY.0.to_string(), DEMO_ENTRY.1)]);
    assert_eq!(Demo::client(&shm).add(1, 2), Ok(3));
}

#[test]
fn shutdown_refuses_new_calls() {
    let server = demo_server("drain");
    let path = server.path().to_path_buf();
    let shm = demo_client(&path);
    let c = Demo::client(&shm);
    assert_eq!(c.add(2, 2), Ok(4));
    assert!(server.shutdown(DEADLINE).drained);
    match c.echo(1) {
        Err(Error::Transport(Transport::NoServer | Transport::ShuttingDown)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Another service, for the tests of a client built for a service the server does not serve.
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "ferry.other")]
// The fields name the arguments; no code reads them as values (the client takes arguments).
#[allow(dead_code)]
enum Other {
    /// Not a demo call.
    #[rpc(response = u64)]
    Twice {
        /// What to double.
        x: u64,
    },
}

/// The demo service as a client built from another definition knows it: the same name, another
/// schema (`Add` takes one argument).
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "ferry.demo")]
// The fields name the arguments; no code reads them as values (the client takes arguments).
#[allow(dead_code)]
enum OldDemo {
    /// Adds one.
    #[rpc(response = u64)]
    Add {
        /// The addend.
        a: u64,
    },
}

/// The demo service as a client built from a third definition knows it: `Add` takes three
/// arguments (wider than the server's two).
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "ferry.demo")]
// The fields name the arguments; no code reads them as values (the client takes arguments).
#[allow(dead_code)]
enum WideDemo {
    /// Adds three.
    #[rpc(response = u64)]
    Add {
        /// The first addend.
        a: u64,
        /// The second addend.
        b: u64,
        /// The third addend.
        c: u64,
    },
}

#[test]
fn a_request_of_another_length_is_refused_on_every_path() {
    // Clients that skip the checked attach and call `Add` with 8 or 24 bytes of arguments where
    // the server's `Add` takes 16: refused whether the call goes inline or through the packets,
    // and the port is free again for a right call.
    for inline in [true, false] {
        let config = ServerConfig {
            inline,
            ..ServerConfig::default()
        };
        let server = ShmServer::start(unique("length"), config, Demo::server(DemoService)).unwrap();
        let shm =
            ShmClient::attach(server.path(), ClientConfig::default().deadline(DEADLINE)).unwrap();
        assert_eq!(server.geometry().serves_inline(), inline);
        let bad = Err(Error::Status(Status::BadRequest));
        assert_eq!(
            OldDemo::client(&shm).add(1_000_000_002),
            bad,
            "inline: {inline}"
        );
        assert_eq!(WideDemo::client(&shm).add(1, 2, 3), bad, "inline: {inline}");
        assert_eq!(Demo::client(&shm).add(20, 22), Ok(42), "inline: {inline}");
    }
}

/// Threads that keep every core busy until dropped.
struct Busy(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Busy {
    fn start(threads: usize) -> Busy {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let handles = (0..threads)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Busy(stop, handles)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for h in self.1.drain(..) {
            let _ = h.join();
        }
    }
}

#[test]
fn a_call_returns_at_its_deadline_with_an_error_that_says_so_whatever_the_load() {
    // Calls with a 100 ms deadline to a handler that sleeps 1 s, inline and through the packets,
    // on an idle machine and with every core busy: each returns an error naming the deadline,
    // well before the handler's second (never `Ok` after it).
    const DEADLINE_MS: u64 = 100;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    for busy in [false, true] {
        for inline in [true, false] {
            let config = ServerConfig {
                inline,
                workers: 2,
                ..ServerConfig::default()
            };
            let server =
                ShmServer::start(unique("deadline"), config, Demo::server(DemoService)).unwrap();
            let _busy = busy.then(|| Busy::start(cores * 2));
            let path = server.path().to_path_buf();
            let took: Vec<Duration> = std::thread::scope(|s| {
                let callers: Vec<_> = (0..4)
                    .map(|_| {
                        let path = &path;
                        s.spawn(move || {
                            let shm = ShmClient::attach(path, demo_config()).unwrap();
                            let c = Demo::client(&shm)
                                .with_deadline(Duration::from_millis(DEADLINE_MS));
                            (0..3)
                                .map(|_| {
                                    let start = std::time::Instant::now();
                                    let got = c.sleep(1_000_000);
                                    let took = start.elapsed();
                                    assert_eq!(
                                        got,
                                        Err(Error::Transport(Transport::Deadline)),
                                        "busy {busy}, inline {inline}, after {took:?}"
                                    );
                                    took
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                callers
                    .into_iter()
                    .flat_map(|c| c.join().unwrap())
                    .collect()
            });
            let mut sorted = took.clone();
            sorted.sort();
            let (min, median, max) = (
                sorted[0],
                sorted[sorted.len() / 2],
                sorted[sorted.len() - 1],
            );
            eprintln!(
                "deadline {DEADLINE_MS} ms, busy {busy}, inline {inline}: \
                 min {min:?} median {median:?} max {max:?}"
            );
            assert!(min >= Duration::from_millis(DEADLINE_MS), "{min:?}");
            // The handler's second is far off: a call that waited for it would be caught here.
            assert!(max < Duration::from_millis(600), "{sorted:?}");
            assert!(Error::<SleepError>::Transport(Transport::Deadline)
                .to_string()
                .contains("deadline"),);
        }
    }
}

#[test]
fn a_client_of_another_service_is_refused_at_attach() {
    let server = demo_server("other");
    let path = server.path().to_path_buf();
    assert_ne!(Other::FINGERPRINT, Demo::FINGERPRINT);
    // The server's file lists the demo service by its generated fingerprint, and the header
    // keeps the hash of that table.
    let listed = [(DEMO_ENTRY.0.to_string(), DEMO_ENTRY.1)];
    assert_eq!(
        ShmClient::attach(&path, demo_config()).unwrap().services(),
        listed
    );
    let g = *server.geometry();
    let file = std::fs::read(&path).unwrap();
    let written = served_table(&[(DEMO_ENTRY.0, DEMO_ENTRY.1, <Demo as Service>::CALLS)]);
    assert_eq!(&file[g.services_offset()..], written);
    assert_eq!(g.fingerprint(), table_hash(&written));

    // A client that expects a service the server does not serve.
    let err = attach_err(&path, ClientConfig::default().service::<Other>());
    match &err {
        ShmError::NotServed {
            path: p,
            service,
            expected,
            served,
        } => {
            assert_eq!(
                (p, *service, *expected, *served),
                (&path, "ferry.other", Other::FINGERPRINT, None)
            );
        }
        other => panic!("expected NotServed, got {other}"),
    }
    assert!(err.to_string().contains("ferry.other"), "{err}");
    // Expecting the demo service too does not help: each expected service must be served.
    let err = attach_err(&path, demo_config().service::<Other>());
    assert!(
        matches!(
            err,
            ShmError::NotServed {
                service: "ferry.other",
                ..
            }
        ),
        "{err}"
    );

    // A client built from another schema of the same service: the name is served, with another
    // fingerprint, and the error says which.
    assert_ne!(OldDemo::FINGERPRINT, Demo::FINGERPRINT);
    let err = attach_err(&path, ClientConfig::default().service::<OldDemo>());
    match &err {
        ShmError::NotServed {
            service,
            expected,
            served,
            ..
        } => assert_eq!(
            (*service, *expected, *served),
            ("ferry.demo", OldDemo::FINGERPRINT, Some(Demo::FINGERPRINT))
        ),
        other => panic!("expected NotServed, got {other}"),
    }
    assert!(err.to_string().contains("another schema"), "{err}");

    // A client that skips the check and calls anyway gets an error status, not a hang, and the
    // port is freed: the next call (on the same handle, which resumes at that port) works.
    let shm = ShmClient::attach(&path, ClientConfig::default()).unwrap();
    assert_eq!(
        Other::client(&shm).twice(21),
        Err(Error::Status(Status::UnknownOpcode {
            opcode: Other::Twice { x: 0 }.opcode()
        }))
    );
    let port = shm.last_port();
    assert_eq!(
        server.port_owner(port).0,
        0,
        "the refused call freed its port"
    );
    assert_eq!(Demo::client(&shm).add(20, 22), Ok(42));
    assert_eq!(shm.last_port(), port);
    drop(shm);
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!((stats.served, stats.failed), (2, 0));
}

/// Two definitions of one service whose argument type has the same name, size and field types,
/// its two `u64` fields swapped: issue 34's case.
mod swapped {
    /// What the server was built from.
    pub mod served {
        use ferry_shm::ferry_rpc::zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
        use ferry_shm::{RpcOpcodes, Schema};

        /// A difference's two sides.
        #[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Schema)]
        #[zerocopy(crate = "ferry_shm::ferry_rpc::zerocopy")]
        #[repr(C)]
        pub struct Pair {
            /// The minuend.
            pub a: u64,
            /// The subtrahend.
            pub b: u64,
        }

        /// `a - b`.
        #[derive(RpcOpcodes)]
        #[rpc(service = "ferry.pairs")]
        // The fields name the arguments; no code reads them as values.
        #[allow(dead_code)]
        pub enum Pairs {
            /// `pair.a - pair.b`, wrapping.
            #[rpc(response = u64)]
            Diff {
                /// The sides.
                pair: Pair,
            },
        }

        /// The server's handler.
        pub struct Differ;

        impl PairsServer for Differ {
            fn diff(&self, pair: Pair) -> u64 {
                pair.a.wrapping_sub(pair.b)
            }
        }
    }

    /// What a client was built from: the same, `Pair`'s fields swapped.
    pub mod newer {
        use ferry_shm::ferry_rpc::zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
        use ferry_shm::{RpcOpcodes, Schema};

        /// A difference's two sides, declared the other way round.
        #[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Schema)]
        #[zerocopy(crate = "ferry_shm::ferry_rpc::zerocopy")]
        #[repr(C)]
        pub struct Pair {
            /// The subtrahend.
            pub b: u64,
            /// The minuend.
            pub a: u64,
        }

        /// `a - b`.
        #[derive(RpcOpcodes)]
        #[rpc(service = "ferry.pairs")]
        // The fields name the arguments; no code reads them as values.
        #[allow(dead_code)]
        pub enum Pairs {
            /// `pair.a - pair.b`, wrapping.
            #[rpc(response = u64)]
            Diff {
                /// The sides.
                pair: Pair,
            },
        }
    }
}

#[test]
fn a_client_whose_argument_type_changed_inside_is_refused_at_attach() {
    use swapped::{newer, served};
    // Everything the fingerprint hashed before the types' structure is the same.
    assert_eq!(served::Pairs::OPCODES, newer::Pairs::OPCODES);
    assert_eq!(
        std::mem::size_of::<served::Pair>(),
        std::mem::size_of::<newer::Pair>()
    );
    let pair = newer::Pair {
        a: 1_000_000_003,
        b: 1,
    };
    // Through the inline lines and through the packets.
    for inline in [true, false] {
        let path = unique("swapped");
        let server = if inline {
            ShmServer::start(
                &path,
                ServerConfig::default(),
                served::Pairs::server(served::Differ),
            )
        } else {
            ShmServer::start(
                &path,
                ServerConfig::default(),
                PacketsOnly(served::Pairs::server(served::Differ)),
            )
        }
        .unwrap();
        assert_eq!(server.geometry().serves_inline(), inline);
        // The newer client expects the service by its own fingerprint: refused, naming both.
        let err = attach_err(&path, ClientConfig::default().service::<newer::Pairs>());
        match &err {
            ShmError::NotServed {
                service,
                expected,
                served: listed,
                ..
            } => assert_eq!(
                (*service, *expected, *listed),
                (
                    "ferry.pairs",
                    newer::Pairs::FINGERPRINT,
                    Some(served::Pairs::FINGERPRINT)
                )
            ),
            other => panic!("expected NotServed, got {other}"),
        }
        // What the check keeps out: a client that skips it gets the server's reading of its
        // bytes, `b - a`, as a value.
        let shm = ShmClient::attach(&path, ClientConfig::default().deadline(DEADLINE)).unwrap();
        assert_eq!(
            newer::Pairs::client(&shm).diff(pair),
            Ok(18_446_744_072_709_551_614)
        );
        // A client built from the served definition attaches and gets the difference.
        let shm = ShmClient::attach(
            &path,
            ClientConfig::default()
                .service::<served::Pairs>()
                .deadline(DEADLINE),
        )
        .unwrap();
        let pair = served::Pair {
            a: 1_000_000_003,
            b: 1,
        };
        assert_eq!(served::Pairs::client(&shm).diff(pair), Ok(1_000_000_002));
        drop(shm);
        server.shutdown(DEADLINE);
    }
}

/// The demo service, but `add` panics for `a == 0`.
struct Fragile;

impl DemoServer for Fragile {
    fn echo(&self, id: u64) -> Echoed {
        DemoService.echo(id)
    }
    fn add(&self, a: u64, b: u64) -> u64 {
        assert!(a != 0, "add panics on purpose");
        DemoService.add(a, b)
    }
    fn sleep(&self, micros: u64) -> Result<u64, SleepError> {
        DemoService.sleep(micros)
    }
    fn sum(&self, data: &[u8]) -> Summed {
        DemoService.sum(data)
    }
}

/// A handler that serves what `H` serves, all of it through the packets: it answers no inline
/// calls, so its clients make every call through the packets. It lists `H`'s services, so
/// clients that expect them attach.
struct PacketsOnly<H>(H);

impl<M: Mailbox, W: Wait, H: Handler<M, W>> Handler<M, W> for PacketsOnly<H> {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        self.0.handle(port)
    }
    fn services(&self) -> Vec<(&'static str, u64)> {
        self.0.services()
    }
}

#[test]
fn a_panicking_generated_handler_reaches_the_typed_client_as_server_error() {
    for inline in [false, true] {
        let path = unique("fragile");
        let server = if inline {
            ShmServer::start(&path, ServerConfig::default(), Demo::server(Fragile))
        } else {
            ShmServer::start(
                &path,
                ServerConfig::default(),
                PacketsOnly(Demo::server(Fragile)),
            )
        }
        .unwrap();
        assert_eq!(server.geometry().serves_inline(), inline);
        let shm = demo_client(&path);
        let c = Demo::client(&shm);
        for _ in 0..3 {
            assert_eq!(c.add(0, 1), Err(Error::Status(Status::ServerError)));
            // The call completed with an answer: the (sticky) handle still holds its port, which
            // is not abandoned, and the next call works.
            let port = shm.last_port();
            assert_eq!(shm.held_port(), Some(port));
            assert_eq!(server.port_owner(port).0, std::process::id());
            assert_eq!(c.add(1, 1), Ok(2));
        }
        drop(shm);
        let stats = server.shutdown(DEADLINE).stats;
        assert_eq!((stats.served, stats.panicked, stats.reclaimed), (3, 3, 0));
        assert_eq!(stats.inline, if inline { 6 } else { 0 });
    }
}

#[test]
fn small_calls_travel_inline_and_the_others_through_the_packets() {
    let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let want: u64 = data.iter().map(|&b| b as u64).sum();
    // Inline with one worker (no inline locks) and with two; packets only.
    for (inline, workers) in [(true, 1), (true, 2), (false, 2)] {
        let path = unique("inline");
        let config = ServerConfig {
            workers,
            ..ServerConfig::default()
        };
        let server = if inline {
            ShmServer::start(&path, config, Demo::server(DemoService)).unwrap()
        } else {
            ShmServer::start(&path, config, PacketsOnly(Demo::server(DemoService))).unwrap()
        };
        let shm = demo_client(&path);
        let c = Demo::client(&shm);
        for id in 0..100u64 {
            assert_eq!(c.echo(id), Ok(echoed(id)));
        }
        assert_eq!(c.add(40, 2), Ok(42));
        assert_eq!(c.sleep(1), Ok(1));
        assert_eq!(
            c.sleep(demo::MAX_SLEEP_MICROS + 1),
            Err(Error::App(SleepError::TooLong))
        );
        assert_eq!(
            c.sum(&data),
            Ok(Summed {
                len: 1000,
                sum: want
            })
        );
        drop(shm);
        let stats = server.shutdown(DEADLINE).stats;
        assert_eq!((stats.served, stats.failed, stats.panicked), (104, 0, 0));
        // Everything came inline (the stream beside its request, in the bulk area), if the
        // server serves inline.
        assert_eq!(stats.inline, if inline { 104 } else { 0 });
    }
}
#[test]
fn hostile_inline_requests_get_an_error_status() {
    let (server, g, map) = raw_view("hostile-inline");
    let (bitmap, word) = (|at| word32(&map, at), |at| word64(&map, at));
    // Claim port 5 and arm its line by hand, as a client would (the monitor disarms a free
    // port's line), and hand over raw requests: word 0 is the request sequence and opcode, word
    // 1 the length, word 2 the reply sequence, length and status.
    let port = 5;
    let me = ferry_shm::owner::current_holder().unwrap();
    word(g.owners_offset() + port * 8).store(ferry_shm::owner::pack(1, me), Ordering::SeqCst);
    bitmap(g.inline_offset()).fetch_or(1 << port, Ordering::SeqCst);
    let line = g.inline_lines_offset() + port * 64;
    let call = |opcode: u32, len: u64, seq: u64| {
        word(line + 8).store(len, Ordering::Relaxed);
        word(line).store((opcode as u64) << 32 | seq, Ordering::Release);
        let deadline = std::time::Instant::now() + DEADLINE;
        loop {
            let answer = word(line + 16).load(Ordering::Acquire);
            if answer as u32 as u64 == seq {
                return (answer >> 48) as u32;
            }
            assert!(std::time::Instant::now() < deadline, "no answer");
            std::hint::spin_loop();
        }
    };
    let echo = Demo::Echo { id: 0 }.opcode();
    assert_eq!(echo, Demo::OPCODE_ECHO);
    // A length over what the lines hold (256 bytes), a request of the wrong size, an unknown opcode, a call
    // that cannot travel inline: each an answer with an error status, nothing else.
    assert_eq!(call(echo, 1000, 1), status::BAD_REQUEST);
    assert_eq!(call(echo, 3, 2), status::BAD_REQUEST);
    assert_eq!(call(0x1234, 8, 3), status::UNKNOWN_OPCODE);
    assert_eq!(
        call(ferry_rpc::service::HANDSHAKE, 8, 4),
        status::NOT_INLINE
    );
    assert_eq!(call(echo, 8, 5), status::OK);
    // Bodies in the port's bulk area (their length in the high half of word 1): longer than the
    // area (refused before anything is read, however long), beside a request the call does not
    // take, for a call that takes none; then one that is served, whatever the area holds.
    let body = |n: u64| n << 32;
    let share = g.bulk() as u64;
    assert!(share > 0);
    assert_eq!(
        call(Demo::OPCODE_SUM, body(share + 1), 6),
        status::BAD_REQUEST
    );
    assert_eq!(
        call(Demo::OPCODE_SUM, body(u32::MAX.into()), 7),
        status::BAD_REQUEST
    );
    assert_eq!(call(Demo::OPCODE_SUM, 8 | body(5), 8), status::BAD_REQUEST);
    assert_eq!(call(echo, 8 | body(5), 9), status::BAD_REQUEST);
    assert_eq!(call(Demo::OPCODE_SUM, body(share), 10), status::OK);
    assert_eq!(call(echo, 8, 11), status::OK);
    // The claim ends.
    word(g.owners_offset() + port * 8).store(ferry_shm::owner::pack(1, 0), Ordering::SeqCst);
    // The handler's dispatch saw seven of them: the over-long request and bodies were refused
    // before it, and the call that cannot travel inline was not served.
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!((stats.served, stats.inline, stats.panicked), (7, 7, 0));
}

#[test]
fn a_sticky_handle_keeps_its_port_until_released_dropped_or_drained() {
    let server = demo_server("sticky");
    let path = server.path().to_path_buf();
    let me = std::process::id();
    let a = demo_client(&path);
    let da = Demo::client(&a);
    assert_eq!(da.echo(1), Ok(echoed(1)));
    let port = a.held_port().expect("a sticky handle keeps its port");
    let generation = server.port_owner(port).1;
    for id in 2..100 {
        assert_eq!(da.echo(id), Ok(echoed(id)));
    }
    // One claim for all those calls: the generation did not move, the port is still ours.
    assert_eq!(server.port_owner(port), (me, generation));
    a.release_port();
    assert_eq!(server.port_owner(port).0, 0);
    assert_eq!(a.held_port(), None);
    assert_eq!(da.add(2, 3), Ok(5));
    let port = a.held_port().unwrap();
    drop(a);
    assert_eq!(
        server.port_owner(port).0,
        0,
        "dropping a sticky handle frees its port"
    );

    // A non-sticky handle frees its port after each call.
    let b = ShmClient::attach(&path, demo_config()).unwrap();
    assert_eq!(Demo::client(&b).add(1, 2), Ok(3));
    assert_eq!(b.held_port(), None);
    assert_eq!(server.port_owner(b.last_port()).0, 0);

    // An idle sticky holder does not keep a drain waiting past the grace, and its next call is
    // refused cleanly (the claim is given back).
    let c = demo_client(&path);
    let dc = Demo::client(&c);
    assert_eq!(dc.echo(7), Ok(echoed(7)));
    let started = std::time::Instant::now();
    let shutdown = server.shutdown(DEADLINE);
    assert!(
        shutdown.drained,
        "the drain counted the idle sticky claim as finished"
    );
    assert!(started.elapsed() < DEADLINE / 2);
    match dc.echo(8) {
        Err(Error::Transport(Transport::NoServer | Transport::ShuttingDown)) => {}
        other => panic!("expected the call to be refused, got {other:?}"),
    }
    assert_eq!(c.held_port(), None);
}

/// One handle shared by four threads (`&shm`: no handle of their own), sticky and not: 10 000
/// calls each, every answer its own call's, inline and now and then through the packets (a
/// stream longer than the bulk area, which takes a process on the seat's private bitmap).
#[test]
fn four_threads_share_one_handle_and_every_answer_is_their_own() {
    let _watchdog = Watchdog::new("four threads share one handle", Duration::from_secs(600));
    const THREADS: u64 = 4;
    const CALLS: u64 = 10_000;
    let long: Vec<u8> = (0..ferry_shm::DEFAULT_BULK + 100)
        .map(|i| (i % 7) as u8)
        .collect();
    let long_sum = Summed {
        len: long.len() as u64,
        sum: long.iter().map(|&b| b as u64).sum(),
    };
    for sticky in [true, false] {
        let config = ServerConfig {
            workers: 2,
            ..ServerConfig::default()
        };
        let server = ShmServer::start(unique("shared"), config, Demo::server(DemoService)).unwrap();
        let shm = ShmClient::attach(server.path(), demo_config().sticky(sticky)).unwrap();
        let c = Demo::client(&shm);
        let long = &long;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..CALLS {
                        let id = t << 32 | i;
                        assert_eq!(c.echo(id), Ok(echoed(id)), "thread {t}, call {i}");
                        if i % 1000 == 0 {
                            assert_eq!(c.sum(long), Ok(long_sum), "thread {t}, call {i}");
                        }
                    }
                });
            }
        });
        // A sticky handle keeps a port per seat, and gives them all back.
        let held: Vec<u32> = (0..server.geometry().layout().ports())
            .filter(|&p| server.port_owner(p).0 == std::process::id())
            .collect();
        assert!(
            held.len() <= if sticky { THREADS as usize } else { 0 },
            "sticky {sticky}: ports held {held:?}"
        );
        shm.release_port();
        assert!((0..server.geometry().layout().ports()).all(|p| server.port_owner(p).0 == 0));
        drop(shm);
        let report = server.shutdown(DEADLINE);
        assert!(report.drained);
        let sums = THREADS * CALLS.div_ceil(1000);
        assert_eq!(report.stats.served, THREADS * CALLS + sums);
        assert_eq!(report.stats.failed + report.stats.panicked, 0);
    }
}

/// The handle and a generated client over it are `Send + Sync`, and a generated client may be
/// held across an `.await` in a future that is `Send` (checked when this compiles).
#[test]
fn a_generated_client_over_a_shared_handle_is_send_sync_and_held_across_await() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send_future<F: std::future::Future + Send>(_: &F) {}
    let server = demo_server("send-sync");
    let shm = demo_client(server.path());
    let c = Demo::client(&shm);
    send_sync(&shm);
    send_sync(&c);
    let task = async move {
        let first = c.add(1, 2);
        std::future::ready(()).await;
        (first, c.add(3, 4))
    };
    send_future(&task);
    let shared = std::sync::Arc::new(demo_client(server.path()));
    let spawned = std::thread::spawn({
        let shared = std::sync::Arc::clone(&shared);
        move || Demo::client(&*shared).add(5, 6)
    });
    assert_eq!(spawned.join().unwrap(), Ok(11));
    assert_eq!(Demo::client(&*shared).add(7, 8), Ok(15));
}

/// The holder field of a process that had this process's pid and is gone: our pid, another start
/// time (as after the pid was recycled).
fn recycled_holder() -> u32 {
    use ferry_shm::owner::{holder, start_time};
    let me = std::process::id();
    let start = start_time(me).unwrap();
    let ours = holder(me, start).unwrap();
    (1..)
        .map(|d| holder(me, start + d).unwrap())
        .find(|&h| h != ours)
        .unwrap()
}

/// A demo server, its file's geometry, and the file mapped for writing words directly.
fn raw_view(tag: &str) -> (ShmServer, Geometry, memmap2::MmapRaw) {
    let server = demo_server(tag);
    let g = *ShmClient::attach(server.path(), ClientConfig::default())
        .unwrap()
        .geometry();
    let map = map_file(server.path());
    (server, g, map)
}

#[test]
fn a_request_left_on_an_unarmed_line_by_a_dead_holder_is_answered_and_its_port_freed() {
    use ferry_shm::owner::pack;
    let (server, g, map) = raw_view("left-request");
    let word = |at| word64(&map, at);
    // Port 9: claimed by a process that is gone (our pid with another start time), with a
    // request on its line that it never armed.
    let port = 9;
    let dead = recycled_holder();
    word(g.owners_offset() + port * 8).store(pack(1, dead), Ordering::SeqCst);
    let line = g.inline_lines_offset() + port * 64;
    word(line + 24).store(5, Ordering::Relaxed);
    word(line + 8).store(8, Ordering::Relaxed);
    word(line).store(
        (Demo::Echo { id: 0 }.opcode() as u64) << 32 | 1,
        Ordering::Release,
    );
    let deadline = std::time::Instant::now() + DEADLINE;
    while server.port_owner(port as u32).0 != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the dead holder's port was never freed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The monitor armed the line, a worker answered (to nobody), and then the port was freed.
    assert_eq!(word(line + 16).load(Ordering::Acquire) as u32, 1);
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!((stats.reclaimed, stats.inline), (1, 1));
}

#[test]
fn a_port_held_under_a_recycled_pid_is_reclaimed() {
    use ferry_shm::owner::pack;
    let server = demo_server("recycled");
    let me = std::process::id();
    let live = demo_client(server.path());
    let demo = Demo::client(&live);
    assert_eq!(demo.echo(1), Ok(echoed(1)));
    let held = live.held_port().expect("a sticky handle keeps its port");

    // A claim by a process that died and whose pid was given to this one: our pid, another start
    // time. Written straight into the file, as the dead client's claim would be.
    let stale = recycled_holder();
    let victim = (held + 1) % live.geometry().layout().ports();
    let at = live.geometry().owners_offset() + victim as usize * 8;
    let map = map_file(server.path());
    let word = word64(&map, at);
    assert_eq!(word.load(Ordering::SeqCst), 0, "the port was free");
    word.store(pack(1, stale), Ordering::SeqCst);
    assert_eq!(server.port_owner(victim), (me, 1), "a live pid holds it");

    let deadline = std::time::Instant::now() + DEADLINE;
    while server.port_owner(victim).0 != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the port of the dead holder was never reclaimed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The live holder of the same pid keeps its port through many monitor passes.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(server.port_owner(held).0, me);
    assert_eq!(demo.echo(2), Ok(echoed(2)));
    assert_eq!(live.held_port(), Some(held));
    drop(live);
    assert_eq!(server.shutdown(DEADLINE).stats.reclaimed, 1);
}

/// The demo service whose inline `add` of `a == 999` waits until the gate opens.
struct Gated {
    gate: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    demo: Serving<Demo, DemoService>,
}

impl<M: Mailbox, W: Wait> Handler<M, W> for Gated {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        self.demo.handle(port)
    }
    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; ferry_rpc::service::INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        if opcode == (Demo::Add { a: 0, b: 0 }).opcode() && request.first() == Some(&0xe7) {
            let (open, cv) = &*self.gate;
            // Opened by the test; bounded, so a failing test still lets the server stop.
            let _ = cv
                .wait_timeout_while(open.lock().unwrap(), Duration::from_secs(30), |open| !*open)
                .unwrap();
        }
        Handler::<M, W>::handle_inline(&self.demo, opcode, request, body, reply)
    }
    fn serves_inline(&self) -> bool {
        true
    }
    fn services(&self) -> Vec<(&'static str, u64)> {
        Handler::<M, W>::services(&self.demo)
    }
}

#[test]
fn a_blocked_inline_handler_does_not_stall_other_ports() {
    let gate = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let path = unique("inline-block");
    let gated = Gated {
        gate: gate.clone(),
        demo: Demo::server(DemoService),
    };
    let server = ShmServer::start(&path, ServerConfig::default(), gated).unwrap();
    let blocked = {
        let path = path.clone();
        std::thread::spawn(move || Demo::client(&demo_client(&path)).add(999, 1))
    };
    // 999 = 0x3e7: the request's first byte is 0xe7. Wait until the call has claimed a port,
    // and a little more for its request to reach the handler.
    let deadline = std::time::Instant::now() + DEADLINE;
    while !(0..64).any(|p| server.port_owner(p).0 != 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "the gated call never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    // One worker is held inside the blocked call; the other answers everyone else.
    let shm = demo_client(&path);
    let c = Demo::client(&shm);
    for id in 0..1000u64 {
        assert_eq!(c.echo(id), Ok(echoed(id)));
    }
    assert!(
        !blocked.is_finished(),
        "the gated call returned before the gate opened"
    );
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert_eq!(blocked.join().unwrap(), Ok(1000));
    drop(shm);
    assert_eq!(server.shutdown(DEADLINE).stats.inline, 1001);
}

/// Whether `port`'s inline bitmap bit is set in the mapped file.
fn armed(map: &memmap2::MmapRaw, g: &Geometry, port: u32) -> bool {
    let word = word32(map, g.inline_offset() + port as usize / 32 * 4);
    word.load(Ordering::Relaxed) & 1 << (port % 32) != 0
}

#[test]
fn an_inline_line_stays_armed_after_its_claim_until_the_monitor_finds_the_port_idle() {
    // Long enough that the checks right after a call come before the monitor's second pass.
    let interval = Duration::from_millis(500);
    let config = ServerConfig {
        reclaim_interval: interval,
        ..ServerConfig::default()
    };
    let server =
        ShmServer::start(unique("idle-disarm"), config, Demo::server(DemoService)).unwrap();
    let map = map_file(server.path());
    // A sticky holder (it will sit idle), then a handle that claims a port per call: it gets
    // another port, and frees it after its call.
    let b = demo_client(server.path());
    assert_eq!(Demo::client(&b).echo(2), Ok(echoed(2)));
    let held = b.held_port().unwrap();
    let a = ShmClient::attach(server.path(), demo_config()).unwrap();
    let g = *a.geometry();
    assert_eq!(Demo::client(&a).echo(1), Ok(echoed(1)));
    let port = a.last_port();
    let (holder, generation) = server.port_owner(port);
    assert_ne!(port, held);
    // The claim ended, the line stays armed for the next claim.
    assert_eq!(holder, 0);
    assert!(armed(&map, &g, port), "the bit was cleared with the claim");
    // The free port: disarmed within a few intervals, under a claim of the monitor's own (one
    // more generation: only the monitor claims the port now, and only while it is armed), and
    // free again.
    let deadline = std::time::Instant::now() + DEADLINE;
    while armed(&map, &g, port) || server.port_owner(port) != (0, generation + 1) {
        assert!(
            std::time::Instant::now() < deadline,
            "never disarmed, or not under a claim: armed {}, owner {:?}",
            armed(&map, &g, port),
            server.port_owner(port)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The held port, idle all along, keeps its bit: the monitor disarms free ports only.
    std::thread::sleep(interval * 2);
    assert!(armed(&map, &g, held), "a held port's line was disarmed");
    assert_eq!(Demo::client(&b).echo(3), Ok(echoed(3)));
    // The next claim of the port (a handle starting where `a` did) arms it again and is
    // answered.
    let c = a.handle(0);
    for id in 10..20 {
        assert_eq!(Demo::client(&c).echo(id), Ok(echoed(id)));
    }
    assert_eq!(c.last_port(), port);
    assert!(armed(&map, &g, port), "the next claim did not arm the line");
    drop((a, b, c));
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!((stats.served, stats.failed, stats.inline), (13, 0, 13));
}

#[test]
fn handles_that_claim_a_port_per_call_never_stall_while_the_monitor_disarms_idle_ports() {
    // A monitor pass every millisecond, and clients pausing about as long between calls: ports
    // go idle, get disarmed and claimed again all the time. A request on a line the monitor
    // disarmed under a live claim would never be answered: the call would fail at its deadline.
    let config = ServerConfig {
        reclaim_interval: Duration::from_millis(1),
        workers: 2,
        ports: 32,
        ..ServerConfig::default()
    };
    let server =
        ShmServer::start(unique("disarm-race"), config, Demo::server(DemoService)).unwrap();
    let client_config = demo_config().deadline(Duration::from_secs(5));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let client = ShmClient::attach(server.path(), client_config.clone()).unwrap();
            std::thread::spawn(move || {
                let c = Demo::client(&client);
                for i in 0..300u64 {
                    let id = t << 32 | i;
                    assert_eq!(c.echo(id), Ok(echoed(id)), "thread {t} call {i}");
                    std::thread::sleep(Duration::from_micros((i * 7919 + t * 13) % 2000));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Every claim adds a generation: more than the clients' 1 200 means the monitor claimed
    // ports too (it disarmed idle ones while the clients ran).
    let claims: u32 = (0..32).map(|p| server.port_owner(p).1).sum();
    assert!(
        claims > 1200,
        "the monitor never disarmed a port ({claims} claims)"
    );
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!((stats.served, stats.failed), (1200, 0));
}

/// A service of the test's own.
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "test.tally")]
// The fields name the arguments; no code reads them as values (the client takes arguments).
#[allow(dead_code)]
enum Tally {
    /// Adds to the tally; returns it.
    #[rpc(response = u64)]
    Add {
        /// The amount.
        n: u64,
    },
    /// Counts the bytes of a stream.
    #[rpc(response = u64, limit = 65536)]
    Count {
        /// The bytes.
        data: Bytes,
    },
}

struct Counter(std::sync::atomic::AtomicU64);

impl Counter {
    fn new() -> Counter {
        Counter(std::sync::atomic::AtomicU64::new(0))
    }
}

impl TallyServer for Counter {
    fn add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed) + n
    }

    fn count(&self, data: &[u8]) -> u64 {
        data.len() as u64
    }
}

#[test]
fn a_derived_service_is_served_inline_and_through_the_packets() {
    let server = ShmServer::start(
        unique("tally"),
        ServerConfig::default(),
        Tally::server(Counter::new()),
    )
    .unwrap();
    let shm = ShmClient::attach(server.path(), ClientConfig::default().service::<Tally>()).unwrap();
    assert_eq!(
        shm.services(),
        [("test.tally".to_string(), Tally::FINGERPRINT)]
    );
    let tally = Tally::client(&shm);
    assert_eq!(tally.add(5), Ok(5));
    assert_eq!(tally.add(7), Ok(12));
    let data = vec![1u8; 5000];
    assert_eq!(tally.count(&data), Ok(5000));
    // Over the limit: refused, nothing run.
    let big = vec![1u8; 70000];
    assert_eq!(tally.count(&big), Err(Error::Status(Status::Rejected)));
    drop(shm);
    let stats = server.shutdown(DEADLINE).stats;
    // Both adds inline, and the stream beside its request (in the bulk area); the one over the
    // limit refused by the client before sending.
    assert_eq!((stats.inline, stats.served, stats.failed), (3, 3, 0));
}

#[test]
fn two_derived_services_are_served_together_and_called_from_one_client() {
    let server = ShmServer::start(
        unique("two-services"),
        ServerConfig::default(),
        Demo::server(DemoService).and(Tally::server(Counter::new())),
    )
    .unwrap();
    let g = *server.geometry();
    assert!(g.serves_inline());
    // The file lists both, in the order they were given; the header keeps the table's hash.
    let both = [DEMO_ENTRY, ("test.tally", Tally::FINGERPRINT)];
    assert_eq!(g.services(), 2);
    let file = std::fs::read(server.path()).unwrap();
    let written = served_table(&[
        (both[0].0, both[0].1, <Demo as Service>::CALLS),
        (both[1].0, both[1].1, <Tally as Service>::CALLS),
    ]);
    assert_eq!(&file[g.services_offset()..], written);
    assert_eq!(g.fingerprint(), table_hash(&written));

    // One sticky client expecting both: every call on one kept claim, whichever service it is of.
    let shm = ShmClient::attach(
        server.path(),
        ClientConfig::default()
            .service::<Demo>()
            .service::<Tally>()
            .sticky(true),
    )
    .unwrap();
    let listed: Vec<(String, u64)> = both.iter().map(|&(n, f)| (n.to_string(), f)).collect();
    assert_eq!(shm.services(), listed);
    let (demo, tally) = (Demo::client(&shm), Tally::client(&shm));
    let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let want: u64 = data.iter().map(|&b| b as u64).sum();
    let mut total = 0;
    for i in 0..50u64 {
        // Inline calls of each, interleaved.
        assert_eq!(demo.echo(i), Ok(echoed(i)));
        total += i;
        assert_eq!(tally.add(i), Ok(total));
        assert_eq!(demo.add(i, 1), Ok(i + 1));
    }
    let port = shm.held_port().expect("a sticky handle keeps its port");
    // Streams of each, through the packets; each service's limit holds for its own calls.
    assert_eq!(
        demo.sum(&data),
        Ok(Summed {
            len: 3000,
            sum: want
        })
    );
    assert_eq!(tally.count(&data), Ok(3000));
    assert_eq!(
        tally.count(&[7; 65537]),
        Err(Error::Status(Status::Rejected))
    );
    let under_demo_limit = vec![1u8; 65537];
    assert_eq!(
        demo.sum(&under_demo_limit),
        Ok(Summed {
            len: 65537,
            sum: 65537
        })
    );
    assert_eq!(tally.add(0), Ok(total));
    assert_eq!(shm.held_port(), Some(port));

    // Clients expecting either one alone attach too, and call it.
    let only_tally =
        ShmClient::attach(server.path(), ClientConfig::default().service::<Tally>()).unwrap();
    assert_eq!(Tally::client(&only_tally).add(1), Ok(total + 1));
    let only_demo = ShmClient::attach(server.path(), demo_config()).unwrap();
    assert_eq!(Demo::client(&only_demo).echo(9), Ok(echoed(9)));
    drop((shm, only_tally, only_demo));
    let stats = server.shutdown(DEADLINE).stats;
    // 150 inline in the loop, a tally add, the two single-service clients' calls, and 3
    // streams, inline beside their requests (the fourth, over its limit, refused by the client
    // before sending).
    assert_eq!((stats.inline, stats.failed, stats.panicked), (156, 0, 0));
    assert_eq!(stats.served, 156);
}

#[test]
fn a_service_given_twice_is_refused_at_start() {
    let path = unique("served-twice");
    let err = ShmServer::start(
        &path,
        ServerConfig::default(),
        Demo::server(DemoService).and(Demo::server(Fragile)),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ShmError::BadServices(why) if why.contains("ferry.demo")),
        "{err}"
    );
    assert!(!path.exists());
}

/// The holder field of a live process other than this one (init), as another client's claim
/// would carry.
fn foreign_holder() -> u32 {
    use ferry_shm::owner::{holder, start_time};
    holder(1, start_time(1).expect("init's start time")).unwrap()
}

#[test]
fn a_kept_port_taken_behind_the_clients_back_is_neither_used_nor_freed() {
    use ferry_shm::owner::{generation_of, pack};
    let (server, g, map) = raw_view("taken-kept");
    let c = ShmClient::attach(server.path(), ClientConfig::default().sticky(true)).unwrap();
    let demo = Demo::client(&c);
    assert_eq!(demo.echo(1), Ok(echoed(1)));
    let port = c.held_port().unwrap();
    let owner = word64(&map, g.owners_offset() + port as usize * 8);
    // Another client's claim replaces ours while the handle is idle (as a monitor that wrongly
    // judged us dead, then a claimer, would leave it).
    let theirs = pack(
        generation_of(owner.load(Ordering::SeqCst)) + 1,
        foreign_holder(),
    );
    owner.store(theirs, Ordering::SeqCst);
    // The next call sees the claim is gone, claims another port and is answered there.
    assert_eq!(demo.echo(2), Ok(echoed(2)));
    assert_ne!(c.held_port(), Some(port));
    drop(c);
    // The other claim was never freed by the handle that lost the port.
    assert_eq!(owner.load(Ordering::SeqCst), theirs);
    owner.store(pack(generation_of(theirs), 0), Ordering::SeqCst);
    server.shutdown(DEADLINE);
}

#[test]
fn a_reply_read_after_the_port_was_taken_is_an_error_not_a_result() {
    use ferry_shm::owner::{generation_of, pack};
    use std::sync::{Arc, OnceLock};
    // A handler that, mid-call, replaces the port's claim with another client's (as a wrong
    // reclaim and a new claimer would), then answers.
    let view: Arc<OnceLock<(Geometry, memmap2::MmapRaw)>> = Arc::new(OnceLock::new());
    let seen = Arc::clone(&view);
    let handler = move |port: &mut ServerPort<'_, '_>| {
        let (g, map) = seen.get().expect("mapped before the first call");
        let owner = word64(map, g.owners_offset() + port.index() as usize * 8);
        let now = owner.load(Ordering::SeqCst);
        owner.store(
            pack(generation_of(now) + 1, foreign_holder()),
            Ordering::SeqCst,
        );
        port.recv_and_send(|s, _| s.words[0] += 1)
    };
    let server =
        ShmServer::start(unique("taken-mid-call"), ServerConfig::default(), handler).unwrap();
    let c = ShmClient::attach(server.path(), ClientConfig::default()).unwrap();
    view.set((*c.geometry(), map_file(server.path())))
        .ok()
        .unwrap();
    let got = c.call(7, |port| {
        let mut answer = 0;
        port.send_and_recv(|s, _| s.words[0] = 41, |s, _| answer = s.words[0])?;
        Ok(answer)
    });
    match got {
        Err(ShmError::PortLost { port }) => {
            let (g, map) = view.get().unwrap();
            let owner = word64(map, g.owners_offset() + port as usize * 8);
            // Not ours: left as the other claim has it.
            assert_eq!(ferry_shm::owner::pid_of(owner.load(Ordering::SeqCst)), 1);
            owner.store(
                pack(generation_of(owner.load(Ordering::SeqCst)), 0),
                Ordering::SeqCst,
            );
        }
        other => panic!("a reply read on a port taken mid-call was returned as {other:?}"),
    }
    drop(c);
    server.shutdown(DEADLINE);
}

/// A small tmpfs mounted for one test, unmounted (and its directory removed) when dropped.
struct SmallTmpfs(PathBuf);

impl SmallTmpfs {
    /// Mounts a tmpfs of `size` bytes, or says why it cannot (not root, no mount permission).
    fn mount(size: usize) -> Result<SmallTmpfs, String> {
        let dir = unique("tmpfs");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| e.to_string());
        match out {
            Ok(o) if o.status.success() => Ok(SmallTmpfs(dir)),
            Ok(o) => {
                let _ = std::fs::remove_dir(&dir);
                Err(String::from_utf8_lossy(&o.stderr).trim().to_string())
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_file_system_without_room_fails_the_start_naming_the_size() {
    let config = ServerConfig {
        ports: 1024,
        lanes: 2,
        ..ServerConfig::default()
    };
    // The file of a server of the demo service: its table lists one service.
    let calls = served_table(&[(DEMO_ENTRY.0, DEMO_ENTRY.1, <Demo as Service>::CALLS)]).len()
        - SERVICE_ENTRY;
    let size = Geometry::new(config.ports, config.lanes, 0, 1)
        .unwrap()
        .with_services(1)
        .with_calls(calls)
        .with_bulk(config.bulk as u64)
        .unwrap()
        .file_size();
    // Room for the header and some pages, not for the whole file.
    let fs = match SmallTmpfs::mount(64 * 1024) {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs here ({why}); CI runs as root");
            return;
        }
    };
    assert!(size > 64 * 1024);
    let path = fs.0.join("full");
    match ShmServer::start(&path, config, Demo::server(DemoService)) {
        Err(ShmError::NoRoom { path: p, bytes }) => {
            assert_eq!((p, bytes), (path.clone(), size as u64));
            let text = ShmError::NoRoom {
                path: path.clone(),
                bytes,
            }
            .to_string();
            assert!(text.contains(&size.to_string()), "{text}");
        }
        other => panic!("a server on a full file system started: {other:?}"),
    }
    // Nothing is left behind: neither the name nor a temporary file.
    assert_eq!(std::fs::read_dir(&fs.0).unwrap().count(), 0);
    // A file that fits (no bulk areas) starts and serves.
    let small = ServerConfig {
        ports: 32,
        bulk: 0,
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, small, Demo::server(DemoService)).unwrap();
    let shm = demo_client(server.path());
    assert_eq!(Demo::client(&shm).echo(3), Ok(echoed(3)));
    drop(shm);
    server.shutdown(DEADLINE);
}

#[test]
fn dropping_a_server_does_not_wait_out_the_monitors_interval() {
    let _watchdog = Watchdog::new(
        "drop with a one-hour reclaim interval",
        Duration::from_secs(60),
    );
    let config = ServerConfig {
        reclaim_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    };
    let server = ShmServer::start(
        unique("slow-monitor"),
        config.clone(),
        Demo::server(DemoService),
    )
    .unwrap();
    let path = server.path().to_path_buf();
    // Let the monitor start its first interval's sleep.
    std::thread::sleep(Duration::from_millis(100));
    drop(server);
    assert!(!path.exists());
    // Nor does a graceful shutdown.
    let server =
        ShmServer::start(unique("slow-monitor"), config, Demo::server(DemoService)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let done = server.shutdown(Duration::from_secs(1));
    assert!(done.drained && done.stuck_workers == 0);
}

#[test]
fn names_up_to_the_file_systems_limit_are_served() {
    // `ferry-` and a name of 249 bytes: 255 bytes, the longest file name Linux allows.
    for len in [230, 240, 249] {
        let name: String = std::iter::repeat_n('n', len - 12)
            .chain(format!("{:012}", std::process::id() as u64 * 1000 + len as u64).chars())
            .collect();
        let path = ferry_shm::path_for(&name);
        assert_eq!(path.file_name().unwrap().len(), len + 6);
        let server = ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService))
            .unwrap_or_else(|e| panic!("a {len}-byte name was refused: {e}"));
        let shm = demo_client(&path);
        assert_eq!(Demo::client(&shm).echo(len as u64), Ok(echoed(len as u64)));
        drop(shm);
        server.shutdown(DEADLINE);
    }
    // One byte more is the file system's refusal, worded as such.
    let name = "n".repeat(250);
    let err = ShmServer::start(
        ferry_shm::path_for(&name),
        ServerConfig::default(),
        Demo::server(DemoService),
    )
    .unwrap_err();
    assert!(err.to_string().contains("File name too long"), "{err}");
}

#[test]
fn a_handler_that_never_returns_does_not_hold_up_shutdown() {
    let _watchdog = Watchdog::new("shutdown past a stuck handler", Duration::from_secs(60));
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = std::sync::Mutex::new(release_rx);
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let entered_tx = std::sync::Mutex::new(entered_tx);
    let handler = move |port: &mut ServerPort<'_, '_>| {
        let _ = entered_tx.lock().unwrap().send(());
        // Blocks until the test lets it go, long after the server stopped.
        let _ = release_rx.lock().unwrap().recv();
        port.recv_and_send(|_, _| {})
    };
    let server =
        ShmServer::start(unique("stuck-handler"), ServerConfig::default(), handler).unwrap();
    let path = server.path().to_path_buf();
    let caller = {
        let path = path.clone();
        std::thread::spawn(move || {
            let c = ShmClient::attach(&path, ClientConfig::default()).unwrap();
            c.call(1, |port| port.send_and_recv(|_, _| {}, |_, _| {}))
        })
    };
    entered_rx.recv().unwrap();
    let done = server.shutdown(Duration::from_millis(100));
    assert!(!done.drained);
    assert_eq!(done.stuck_workers, 1);
    assert!(!path.exists(), "the file outlived the shutdown");
    // The caller learns the server is gone instead of waiting for a reply forever.
    assert!(caller.join().unwrap().is_err());
    release_tx.send(()).unwrap();
}

/// Two services whose calls share an opcode are not served together: the server refuses to start
/// rather than send one service's calls to the other.
mod colliding {
    use ferry_rpc::RpcOpcodes;

    #[derive(RpcOpcodes)]
    #[rpc(service = "first")]
    pub enum First {
        #[rpc(response = u64, opcode = 0x100)]
        Get,
    }

    #[derive(RpcOpcodes)]
    #[rpc(service = "second")]
    pub enum Second {
        #[rpc(response = u32)]
        Other,
        #[rpc(opcode = 0x100)]
        Put { value: u64 },
    }

    pub struct Both;
    impl FirstServer for Both {
        fn get(&self) -> u64 {
            1
        }
    }
    impl SecondServer for Both {
        fn other(&self) -> u32 {
            2
        }
        fn put(&self, _value: u64) {}
    }
}

#[test]
fn services_that_share_an_opcode_are_refused_at_start() {
    use colliding::{Both, First, Second};
    let err = ShmServer::start(
        unique("collision"),
        ServerConfig::default(),
        First::server(Both).and(Second::server(Both)),
    )
    .unwrap_err();
    match &err {
        ShmError::BadServices(why) => {
            assert!(why.contains("`first`") && why.contains("`second`"), "{why}");
            assert!(why.contains("0x00000100"), "{why}");
        }
        other => panic!("two services sharing an opcode started: {other:?}"),
    }
}

/// A service whose one call panics on 0.
#[derive(ferry_rpc::RpcOpcodes)]
enum Shaky {
    #[rpc(response = u64)]
    Div { n: u64 },
}

struct Hundred;

impl ShakyServer for Hundred {
    fn div(&self, n: u64) -> u64 {
        100 / n
    }
}

/// Calls carried whole made on a server's handler in its own process (`ShmServer::in_process`,
/// what a bridge in that process does): answered as through the file, counted, a panicking
/// handler caught, refused once the server stops; a handler written by hand does not serve them
/// (`None`: the caller goes through the file).
#[test]
fn calls_made_in_process_are_answered_counted_and_refused_once_stopped() {
    use ferry_rpc::service::{ReplyShape, WholeReply, WholeRequest};
    let server = ShmServer::start(
        unique("in-process"),
        ServerConfig::default(),
        Shaky::server(Hundred),
    )
    .unwrap();
    let local = server.in_process();
    let call = |n: u64| {
        let prefix = n.to_le_bytes();
        let request = WholeRequest {
            opcode: Shaky::Div { n: 0 }.opcode(),
            prefix: &prefix,
            body: None,
            reply: ReplyShape::Fixed(8),
        };
        let mut out = [0u8; 8];
        let made = local.call_whole(&request, WholeReply::fixed(&mut out));
        made.expect("a derived service serves it")
            .map(|()| u64::from_le_bytes(out))
    };
    assert_eq!(call(4), Ok(25));
    assert_eq!(call(0), Err(Error::Status(Status::ServerError)));
    assert_eq!(call(50), Ok(2));
    let stats = server.stats();
    assert_eq!((stats.served, stats.panicked), (2, 1));
    let through_file = ShmClient::attach(server.path(), ClientConfig::default()).unwrap();
    assert_eq!(Shaky::client(&through_file).div(20), Ok(5));
    drop(through_file);
    server.shutdown(Duration::from_secs(1));
    assert_eq!(call(4), Err(Error::Transport(Transport::ShuttingDown)));

    let by_hand = ShmServer::start(
        unique("in-process-by-hand"),
        ServerConfig::default(),
        |port: &mut ferry_shm::ServerPort<'_, '_>| port.recv_and_send(|_, _| {}),
    )
    .unwrap();
    let request = WholeRequest {
        opcode: 1,
        prefix: &[0; 8],
        body: None,
        reply: ReplyShape::Fixed(8),
    };
    let mut out = [0u8; 8];
    let made = by_hand
        .in_process()
        .call_whole(&request, WholeReply::fixed(&mut out));
    assert!(made.is_none());
}

/// A demo server of 8192 ports (no bulk areas) with `config`'s other fields, serving inline calls
/// or not, and a sticky client of it (whose `handle`s claim the ports the tests name).
fn thousands_of_ports(tag: &str, inline: bool, config: ServerConfig) -> (ShmServer, ShmClient) {
    let config = ServerConfig {
        ports: 8192,
        inline,
        bulk: 0,
        ..config
    };
    let server = ShmServer::start(unique(tag), config, Demo::server(DemoService)).unwrap();
    let first = demo_client(server.path());
    (server, first)
}

/// A server of thousands of ports serves a client on any of them, inline and through the
/// packets, with one worker or several: a worker's pass looks at a window of the mailboxes and at
/// the inline lines it saw armed, and still reaches every port in turn.
#[test]
fn a_server_of_thousands_of_ports_serves_every_port() {
    for (inline, workers) in [(true, 1), (true, 3), (false, 1), (false, 3)] {
        let config = ServerConfig {
            workers,
            ..ServerConfig::default()
        };
        let (server, first) = thousands_of_ports("thousands", inline, config);
        let mut calls = 0;
        for port in [8191u32, 0, 4100, 6000, 33, 8160] {
            let shm = first.handle(port);
            let c = Demo::client(&shm);
            for id in 0..20u64 {
                assert_eq!(c.echo(id), Ok(echoed(id)), "port {port}, inline {inline}");
            }
            assert_eq!(c.add(port as u64, 1), Ok(port as u64 + 1));
            assert_eq!(shm.last_port(), port, "inline {inline}");
            calls += 21;
        }
        drop(first);
        let stats = server.shutdown(DEADLINE).stats;
        let on_lines = if inline { calls } else { 0 };
        assert_eq!(
            (stats.served, stats.failed, stats.inline),
            (calls, 0, on_lines),
            "inline {inline}, {workers} workers"
        );
    }
}

/// A worker that rests between passes (an idle server sleeps up to `idle_sleep` between them)
/// sees a call on any port after one rest, not after a rest per window of the mailboxes or of the
/// inline bitmap: the first call of a fresh claim on a server of 8192 ports idle for a while,
/// inline and through the packets. (With a pass of a window per rest it would wait 8 rests for a
/// packet, 32 for a newly armed line.)
#[test]
fn a_resting_worker_sees_a_call_on_any_of_thousands_of_ports_after_one_rest() {
    const REST: Duration = Duration::from_millis(20);
    for inline in [false, true] {
        let config = ServerConfig {
            workers: 1,
            idle_sleep: REST,
            ..ServerConfig::default()
        };
        let (server, first) = thousands_of_ports("resting", inline, config);
        let mut took = Vec::new();
        for (i, port) in [7000u32, 1500, 5000, 3000, 8100].into_iter().enumerate() {
            let shm = first.handle(port);
            // Long enough for the worker to rest at its longest.
            std::thread::sleep(REST * 4);
            let started = std::time::Instant::now();
            assert_eq!(Demo::client(&shm).echo(i as u64), Ok(echoed(i as u64)));
            took.push(started.elapsed());
            assert_eq!(shm.last_port(), port);
        }
        took.sort();
        // One rest, and room for a busy machine; a window a rest would take a rest per window
        // (8 at 8192 ports).
        assert!(took[2] < REST * 2, "inline {inline}: {took:?}");
        drop(first);
        assert!(server.shutdown(DEADLINE).drained);
    }
}

/// A worker whose every pass runs slow handlers (two clients calling a handler of 40 ms each in
/// turn) still sees the first call of a fresh claim on a port outside the bitmap words it last
/// saw armed within about a monitor interval and the handlers running then: a server of 8192
/// ports, whose passes re-read the bitmap 32 words at a time (a turn of 8 passes: up to 640 ms
/// here).
#[test]
fn a_busy_worker_sees_a_new_claim_on_any_of_thousands_of_ports_within_an_interval() {
    const SLOW: u64 = 40_000;
    for inline in [true, false] {
        let config = ServerConfig {
            workers: 1,
            ..ServerConfig::default()
        };
        let (server, first) = thousands_of_ports("busy", inline, config);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy: Vec<_> = [8000u32, 8001]
            .into_iter()
            .map(|port| {
                let (shm, stop) = (first.handle(port), stop.clone());
                std::thread::spawn(move || {
                    let c = Demo::client(&shm);
                    while !stop.load(Ordering::Relaxed) {
                        assert_eq!(c.sleep(SLOW), Ok(SLOW));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let mut took = Vec::new();
        for (i, port) in [100u32, 1500, 3000, 4500, 6000].into_iter().enumerate() {
            let shm = first.handle(port);
            let started = std::time::Instant::now();
            assert_eq!(Demo::client(&shm).echo(i as u64), Ok(echoed(i as u64)));
            took.push(started.elapsed());
            assert_eq!(shm.last_port(), port);
        }
        stop.store(true, Ordering::Relaxed);
        for b in busy {
            b.join().unwrap();
        }
        // The pass running when the call came and the next (80 ms each), and the interval
        // (10 ms); a turn of 8 such passes would be up to 640 ms.
        let slowest = took.iter().max().unwrap();
        assert!(
            *slowest < Duration::from_millis(400),
            "inline {inline}: {took:?}"
        );
        drop(first);
        assert!(server.shutdown(DEADLINE).drained);
    }
}

/// A sticky handle whose kept claim meets a state word that a stray writer flips between
/// serving and draining (the monitor puts it back each interval) never loses its claim: once the
/// writes stop and the handle is dropped, every port is free. (A call that read "draining" where
/// the kept claim was checked and "serving" a moment later took it for a claim taken from it and
/// claimed another, leaving the first held by this live process for good.)
#[test]
fn a_flickering_state_word_never_strands_a_kept_claim() {
    const STATE_OFFSET: usize = 84;
    let config = ServerConfig {
        ports: 32,
        reclaim_interval: Duration::from_millis(1),
        ..ServerConfig::default()
    };
    let server = ShmServer::start(unique("flicker"), config, Demo::server(DemoService)).unwrap();
    let path = server.path().to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            let map = map_file(&path);
            let state = word32(&map, STATE_OFFSET);
            let mut draining = true;
            while !stop.load(Ordering::Relaxed) {
                state.store(if draining { 2 } else { 1 }, Ordering::Relaxed);
                draining = !draining;
            }
            state.store(1, Ordering::Relaxed);
        })
    };
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                for _ in 0..30 {
                    // An attach that reads "draining" is refused: try again.
                    let shm = loop {
                        if let Ok(shm) = ShmClient::attach(&path, demo_config().sticky(true)) {
                            break shm;
                        }
                    };
                    let c = Demo::client(&shm);
                    for id in 0..500u64 {
                        // Refusals ("shutting down") are allowed while the word flickers.
                        let _ = c.echo(id);
                    }
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // Every handle is gone: no port may be held by this process.
    let me = std::process::id();
    let held: Vec<u32> = (0..32).filter(|&p| server.port_owner(p).0 == me).collect();
    assert!(held.is_empty(), "ports {held:?} held by no handle");
    drop(server);
}
