//! What every ferry test crate shares, and nothing that depends on ferry itself (so ferry-rpc's
//! own tests can use it without a dependency cycle): a [`Watchdog`] that turns a hang into a
//! failure, [`in_child`], which runs a test in a process of its own, and [`Namespaces`], two
//! network namespaces joined by a link.
//!
//! ```
//! use std::time::Duration;
//! use ferry_testkit::Watchdog;
//!
//! let _watchdog = Watchdog::new("a test that could hang", Duration::from_secs(60));
//! // ... the test: if it is still running a minute from now, the process aborts with a message.
//! ```

#![deny(missing_docs)]

mod netns;

pub use netns::Namespaces;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Whether this process is the child that runs the test `name` (its path in the test binary,
/// as `--exact` takes it) with the variable `env` set; if not, runs that test alone in a child
/// process of this test binary and checks that it ran and passed. For a test that changes what
/// belongs to its whole process (its limits, its signals):
///
/// ```no_run
/// #[test]
/// fn at_a_low_descriptor_limit() {
///     if !ferry_testkit::in_child("at_a_low_descriptor_limit", "MY_TESTS_CHILD") {
///         return;
///     }
///     // ... lower this process's limit and test under it.
/// }
/// ```
pub fn in_child(name: &str, env: &str) -> bool {
    if std::env::var_os(env).is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(env, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} in its child:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

/// A loopback TCP port free now, for a server a test starts to listen on. It is below the
/// kernel's range of ephemeral ports: those are the local ports of outgoing connections, which
/// the tests' clients make all the while, and one made between this check and the server's
/// bind could take a port the kernel had just handed out (a server then fails with "Address
/// already in use"). Each call in a process gives another port; cargo runs test binaries one at
/// a time. A port that any socket of this machine still holds as its local port (a connection
/// in `TIME_WAIT` included, which a probe bound with `SO_REUSEADDR` would not see, but a server
/// that binds without it would meet) is passed over. Any free port where the ephemeral range
/// leaves no room below it.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    const FROM: u64 = 10_000;
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32_768);
    let span = first_ephemeral.saturating_sub(FROM);
    for _ in 0..span.min(4096) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FROM + (u64::from(std::process::id()) * 131 + n) % span;
        if !held_by_a_socket(port as u16)
            && std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok()
        {
            return port as u16;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

/// Whether a TCP socket of this machine, in any state, has `port` as its local port (read from
/// `/proc/net/tcp` and `tcp6`: the local address is the second column, `ADDR:PORT` in hex).
fn held_by_a_socket(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                line.split_whitespace()
                    .nth(1)
                    .and_then(|local| local.rsplit(':').next())
                    .and_then(|hex| u16::from_str_radix(hex, 16).ok())
                    == Some(port)
            })
        })
    })
}

/// Aborts the test process, with a message naming the test, if the test that armed it hangs:
/// runs past its limit ([`Watchdog::new`]) or stops making progress ([`Watchdog::on_progress`]).
/// A hang must fail, not stall CI; aborting (rather than panicking) ends the run even when the
/// stuck threads would never let a panic through. Disarmed when dropped.
pub struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Arms a watchdog for the test `name`: the process aborts if the watchdog is still armed
    /// `limit` from now.
    pub fn new(name: &'static str, limit: Duration) -> Watchdog {
        let start = Instant::now();
        Watchdog::arm(move || {
            (start.elapsed() > limit)
                .then(|| format!("watchdog: {name} still running after {limit:?}"))
        })
    }

    /// Arms a watchdog for the test `name` that counts its steps in `progress`: the process
    /// aborts, printing `report()` (the state the test can describe: lock words, mailboxes), if
    /// `progress` does not move for `quiet`.
    pub fn on_progress(
        name: &'static str,
        progress: Arc<AtomicU64>,
        quiet: Duration,
        report: impl Fn() -> String + Send + 'static,
    ) -> Watchdog {
        let mut last = progress.load(Ordering::Relaxed);
        let mut since = Instant::now();
        Watchdog::arm(move || {
            let now = progress.load(Ordering::Relaxed);
            if now != last {
                last = now;
                since = Instant::now();
                return None;
            }
            (since.elapsed() > quiet).then(|| {
                format!(
                    "watchdog: {name} made no progress for {quiet:?} at {now} steps\n{}",
                    report()
                )
            })
        })
    }

    /// Starts the thread that asks `hung` every few milliseconds until the watchdog is dropped,
    /// and aborts with its message once it has one.
    fn arm(mut hung: impl FnMut() -> Option<String> + Send + 'static) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                if let Some(message) = hung() {
                    eprintln!("{message}");
                    std::process::abort();
                }
                // Woken early by the drop.
                std::thread::park_timeout(Duration::from_millis(50));
            }
        });
        Watchdog {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Watchdog;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_dropped_watchdog_stops_at_once() {
        let start = Instant::now();
        drop(Watchdog::new("quick", Duration::from_secs(3600)));
        let progress = Arc::new(AtomicU64::new(0));
        let w = Watchdog::on_progress("steps", progress.clone(), Duration::from_secs(1), || {
            String::new()
        });
        // Progress keeps it quiet past its `quiet` period.
        for _ in 0..30 {
            progress.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(w);
        assert!(start.elapsed() < Duration::from_secs(60));
    }

    /// A hang aborts the process: each kind runs in a child process (this test binary, filtered
    /// to this test), which must die of SIGABRT with the watchdog's message.
    #[test]
    fn a_hang_aborts_the_process_with_the_tests_name() {
        match std::env::var("FERRY_TESTKIT_HANG").as_deref() {
            Ok("limit") => {
                let _w = Watchdog::new("the hanging child", Duration::from_millis(200));
                std::thread::sleep(Duration::from_secs(600));
                return;
            }
            Ok("progress") => {
                let progress = Arc::new(AtomicU64::new(7));
                let _w = Watchdog::on_progress(
                    "the stuck child",
                    progress,
                    Duration::from_millis(200),
                    || "lock words: w0=0x1".to_string(),
                );
                std::thread::sleep(Duration::from_secs(600));
                return;
            }
            _ => {}
        }
        for (kind, message) in [
            ("limit", "watchdog: the hanging child still running after 200ms"),
            (
                "progress",
                "watchdog: the stuck child made no progress for 200ms at 7 steps\nlock words: w0=0x1",
            ),
        ] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "tests::a_hang_aborts_the_process_with_the_tests_name",
                    "--nocapture",
                ])
                .env("FERRY_TESTKIT_HANG", kind)
                .output()
                .unwrap();
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(6), "{kind}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(message), "{kind}: {stderr}");
        }
    }
}
