//! Integration tests across crates and processes live in `tests/`; this library holds what they
//! share (and ferry-gpu's tests use too): child processes that are killed when the test lets
//! go of them, lines read from them under a deadline, the watchdog of `ferry-testkit` (re-exported,
//! so no test can hang forever), and a writer a test reads back; and what the host services'
//! tests share (a scratch directory, a captured `LibcHost` configuration).

#![deny(missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for anything a peer process should do soon.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// A unique path in `/dev/shm` for this test process.
pub fn unique_path(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-it-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A child process, killed and reaped when dropped; its stdout read line by line.
pub struct Peer {
    child: Child,
    lines: Receiver<String>,
}

impl Peer {
    /// Starts `program` with `args`.
    pub fn spawn(program: impl AsRef<Path>, args: &[&str]) -> Peer {
        let mut command = Command::new(program.as_ref());
        command.args(args);
        Peer::start(command)
    }

    /// Starts `command` (with its arguments and environment), its stdout piped to the test and
    /// its stdin empty.
    pub fn start(mut command: Command) -> Peer {
        let mut child = command
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn a peer process");
        let out = child.stdout.take().expect("piped stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Peer { child, lines }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line the peer prints; panics if none comes within [`PATIENCE`].
    pub fn line(&self) -> String {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("peer {} printed nothing in time", self.pid()),
            Err(RecvTimeoutError::Disconnected) => panic!("peer {} exited early", self.pid()),
        }
    }

    /// The next line, which must start with `word`; returns the rest, split on spaces.
    pub fn expect(&self, word: &str) -> Vec<String> {
        let line = self.line();
        let mut parts = line.split(' ');
        assert_eq!(
            parts.next(),
            Some(word),
            "unexpected line from peer: {line}"
        );
        parts.map(str::to_string).collect()
    }

    /// Kills the peer with SIGKILL and reaps it (so it is no longer even a zombie).
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// Waits for the peer to exit on its own; panics after [`PATIENCE`].
    pub fn finish(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "peer {} did not exit",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` until it holds; panics with `what` after [`PATIENCE`].
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub use ferry_testkit::Watchdog;

/// Runs `serve` over and over on a thread of its own while `body` runs on this one, then stops
/// it: a server for the body's clients. `serve` returns whether it served anything (the thread
/// yields when it did not). The server is stopped even if `body` panics, and the panic is passed
/// on once it has (a scope would otherwise wait for the server forever).
pub fn serving_while<R>(mut serve: impl FnMut() -> bool + Send, body: impl FnOnce() -> R) -> R {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                if !serve() {
                    std::thread::yield_now();
                }
            }
        });
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        stop.store(true, Ordering::Release);
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A writer the test reads back (clones share the bytes).
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// What was written, as text (panics if it is not UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).expect("captured text is UTF-8")
    }
}

// ---- the host services' tests (tests/tests/host_services.rs, gpu/tests/libc.rs) ----

/// A `LibcHost` configuration printing to `out` and `err` (the rest default).
pub fn captured(out: &Capture, err: &Capture) -> ferry_libc_host::LibcConfig {
    ferry_libc_host::LibcConfig {
        stdout: Box::new(out.clone()),
        stderr: Box::new(err.clone()),
        ..ferry_libc_host::LibcConfig::default()
    }
}

/// The host's answer `e`, as a device call returns it.
pub const fn app<T>(e: ferry_libc::HostError) -> Result<T, ferry_libc::LibcError> {
    Err(ferry_rpc::service::Error::App(e))
}

/// A scratch directory under the system's temporary one, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory whose name starts with `tag`.
    pub fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "ferry-libc-{tag}-{}",
            unique_path("d").file_name().unwrap().to_str().unwrap()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The path of `name` inside it, as text.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
