//! Issue 34, 6: a client process killed while it holds files and heap blocks gets them freed by
//! the server's monitor within a bounded time, with no open or `malloc` of anyone else needed:
//! the host's table, its heap and this process's descriptors come back, the descriptor its
//! read-only handles of one file share among them. (A file of its own: it counts this process's
//! descriptors, which tests running beside it would move.)

// A device call must take a client of any lifetime, which a function path does not: closures.
#![allow(clippy::redundant_closure)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_device::host::{self, mode, Libc};
use ferry_libc_host::{Arena, HeapQuota, LibcConfig, LibcHost};
use ferry_rpc::service::Site;
use ferry_shm::{
    Caller, Claimed, ClientConfig, Handler, ServerConfig, ServerPort, ServerWait, ShmClient,
    ShmMailbox, ShmServer,
};
use ferry_tests::{captured, unique_path, Capture, Peer, Scratch, Watchdog};

/// The files the client holds: the default quota of a client, half of them read-only handles of
/// one file (on one descriptor), half writable files of their own.
const FILES: usize = 64;
/// The heap, all of which the client takes.
const HEAP: u64 = 64 << 10;
/// The monitor's interval, as in the report.
const INTERVAL: Duration = Duration::from_millis(100);
/// How long the test waits for what the killed client held: far above the interval and a look
/// at the client (the bound the docs give), far below forever (the bug).
const BOUND: Duration = Duration::from_secs(10);

/// The host served for each call's client process, the monitor's reclaim forwarded to it.
struct ShmLibc(Arc<LibcHost>);

impl Handler<ShmMailbox, ServerWait> for ShmLibc {
    fn handle(&self, port: &mut ServerPort<'_, '_>) -> Result<(), ferry_rpc::Error> {
        self.0.dispatch(port.caller(), port).map(|_| ())
    }

    fn services(&self) -> Vec<(&'static str, u64)> {
        vec![(Libc::NAME, Libc::FINGERPRINT)]
    }

    fn reclaim(&self) {
        self.0.reclaim_gone();
    }
}

/// The environment variable that makes a run of this test binary the client that holds files
/// and the heap: `PATH DIR`.
const HOLDER: &str = "FERRY_LIBC_HOLDER";

/// The client: opens `FILES` handles, takes the whole heap, says so, and waits to be killed.
fn holder(spec: &str) {
    let (path, dir) = spec.split_once(' ').unwrap();
    let config = ClientConfig::default().service::<Libc>();
    let shm = ShmClient::attach(Path::new(path), config).unwrap();
    Site::call(&shm, None, |claim: &Claimed<'_>| {
        let p = Claimed::process(claim);
        let w = mode::from_c("w").unwrap();
        let written = (0..FILES / 2)
            .filter(|i| host::open(p, &format!("{dir}/f{i}"), w).is_ok())
            .count();
        let read = (0..FILES / 2)
            .filter(|_| host::open(p, &format!("{dir}/f0"), mode::READ).is_ok())
            .count();
        let opened = written + read;
        let block = host::malloc(p, HEAP);
        println!("holder: {opened} {}", block.is_ok());
        Ok::<_, ferry_libc::LibcError>(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

/// This process's open descriptors.
fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_killed_clients_files_and_heap_come_back_within_a_bounded_time() {
    if let Ok(spec) = std::env::var(HOLDER) {
        return holder(&spec);
    }
    let _w = Watchdog::new("reclaim", Duration::from_secs(120));
    let dir = Scratch::new("reclaim");
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: HEAP,
        }),
        max_heap_per_client: HeapQuota::Whole,
        client_alive: |id| ferry_shm::owner::holder_alive(id as u32),
        ..captured(&Capture::default(), &Capture::default())
    }));
    let path = unique_path("reclaim");
    let config = ServerConfig {
        ports: 32,
        reclaim_interval: INTERVAL,
        ..ServerConfig::default()
    };
    let server = ShmServer::start(&path, config, ShmLibc(Arc::clone(&host))).unwrap();
    let before = descriptors();
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "a_killed_clients_files_and_heap_come_back_within_a_bounded_time",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOLDER, format!("{} {}", path.display(), dir.0.display()));
    let peer = Peer::start(command);
    let said = loop {
        if let Some((_, said)) = peer.line().split_once("holder: ") {
            break said.to_string();
        }
    };
    assert_eq!(said, format!("{FILES} true"));
    assert_eq!(host.open_files(), FILES);
    assert_eq!(host.heap_free(), Some(0));
    // One descriptor a writable file, one for every read-only handle of the other.
    let held = descriptors() - before;
    assert!(
        (FILES / 2 + 1..FILES).contains(&held),
        "{held} descriptors for {FILES} handles"
    );
    peer.kill();
    let killed = Instant::now();
    // Nobody opens or allocates meanwhile: only the monitor can free them.
    let back = || host.open_files() == 0 && host.heap_free() == Some(HEAP);
    while !(back() && descriptors() <= before) && killed.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = killed.elapsed();
    assert!(
        back() && descriptors() <= before,
        "{BOUND:?} after the kill: {} files open, {:?} bytes of the heap free, {} descriptors \
         ({before} before)",
        host.open_files(),
        host.heap_free(),
        descriptors()
    );
    println!("freed {took:?} after the kill (monitor interval {INTERVAL:?})");
    let stats = server.shutdown(Duration::from_secs(5)).stats;
    assert_eq!(stats.panicked, 0);
}
