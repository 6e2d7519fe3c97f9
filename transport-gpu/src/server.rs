//! Server threads: serve a region while a kernel (or any client) runs, then drain it.
//!
//! [`serve`] starts `threads` server threads on a region, runs the caller's `body` (launch a
//! kernel and wait for it) on the calling thread, and then tells the threads to stop. A thread
//! that is told to stop keeps serving until a whole scan of the region finds no request, so every
//! call made before the kernel ended is answered ("drain"). The ports are split between the threads
//! in whole lock words (32 ports): thread `t` owns words `t × W / T .. (t + 1) × W / T` of `W`
//! and scans and serves only those (`Process::restrict`), so no two threads race for a lock word
//! or read each other's mailbox lines; each holds its range's locks for its lifetime
//! (`Process::exclusive`), so serving a call takes no locked instruction for the lock, and keeps a
//! copy of its own outbox bits (`Process::with_outbox_mirror`), so a scan reads only the clients'
//! mailbox words. At most one thread per 32 ports is started.
//!
//! The server is generic over where the region lives: the same code serves a GPU region in mapped
//! host memory and a heap region that simulated warps call in tests.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rpc_core::sync::AtomicU32;
use rpc_core::{LayoutError, PerPort, Port, Region, Server, ServerProcess, Single, Stalled, Wait};

/// A port as a handler sees it: opened by a server thread, its request not yet received.
pub type ServerPort<'p, 'a> = Port<'p, 'a, Server, Single, PerPort, ServerWait>;

/// What the server does with a request.
pub trait Handler: Sync {
    /// Serves the request on `port` (its opcode is `port.opcode()`): receives it, replies. The
    /// port is closed after this returns; a request left unanswered goes back to the client.
    fn handle(&self, port: &mut ServerPort<'_, '_>);
}

/// Who calls on a GPU region's ports: the one program running on the GPU, as the caller id a
/// handler that tells its clients apart uses (`host::LibcHost::dispatch`). A region serves one
/// program, so every call served here has this id.
pub const PROGRAM: u64 = 1;

/// How a server thread waits inside a call (for the next packet of a stream): spin, and give up
/// after `limit` so a client that died mid-call cannot hang the server.
#[derive(Debug)]
pub struct ServerWait {
    limit: Duration,
    since: Cell<Option<Instant>>,
}

impl ServerWait {
    /// A policy that gives up after `limit`.
    pub fn new(limit: Duration) -> Self {
        ServerWait {
            limit,
            since: Cell::new(None),
        }
    }
}

impl Wait for ServerWait {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if polls == 0 {
            self.since.set(Some(Instant::now()));
        } else if polls.is_multiple_of(1024) {
            let since = self.since.get().unwrap_or_else(Instant::now);
            if since.elapsed() > self.limit {
                return Err(Stalled);
            }
            std::thread::yield_now();
        }
        std::hint::spin_loop();
        Ok(())
    }
}

/// What the server threads did.
#[derive(Clone, Debug, Default)]
pub struct ServeStats {
    /// Requests served by each thread.
    pub per_thread: Vec<u64>,
}

impl ServeStats {
    /// Requests served in all.
    pub fn calls(&self) -> u64 {
        self.per_thread.iter().sum()
    }
}

/// Sets the stop flag when dropped, so the server threads end even if the body panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// How long a server thread waits inside one call before it gives the client up for dead.
pub const CALL_LIMIT: Duration = Duration::from_secs(10);

/// Serves `region` (with `locks` as the server's lock bitmap) from `threads` threads while `body`
/// runs, then drains it; returns what `body` returned and the counts.
pub fn serve<R>(
    region: Region<'_, PerPort>,
    locks: &[AtomicU32],
    threads: u32,
    handler: &impl Handler,
    body: impl FnOnce() -> R,
) -> Result<(R, ServeStats), LayoutError> {
    let words = region.layout().ports() / rpc_core::layout::PORT_GRANULE;
    let threads = threads.clamp(1, words);
    // Check the locks before starting anything.
    ServerProcess::new(region, locks, Single, ServerWait::new(CALL_LIMIT))?;
    let stop = AtomicBool::new(false);
    let (result, per_thread) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let (first, end) = (t * words / threads, (t + 1) * words / threads);
                    let server =
                        ServerProcess::new(region, locks, Single, ServerWait::new(CALL_LIMIT))
                            .and_then(|s| {
                                s.restrict(
                                    first * rpc_core::layout::PORT_GRANULE,
                                    (end - first) * rpc_core::layout::PORT_GRANULE,
                                )
                            })
                            .expect("checked above");
                    // The ranges are disjoint and nothing else takes server locks: each thread
                    // holds its whole range and skips the per-call lock and unlock, and scans with
                    // a copy of its own outbox bits (half the loads of a scan). If the caller's
                    // bitmap has a bit set, the thread locks per port and reads both mailboxes.
                    let mirror: Vec<AtomicU32> = (0..words).map(|_| AtomicU32::new(0)).collect();
                    let server = match server.exclusive() {
                        Ok(sole) => sole
                            .with_outbox_mirror(&mirror)
                            .expect("an exclusive handle"),
                        Err(shared) => shared,
                    };
                    serve_thread(&server, handler, stop)
                })
            })
            .collect();
        let guard = StopOnDrop(&stop);
        let result = body();
        drop(guard);
        let per_thread = workers
            .into_iter()
            .map(|w| w.join().expect("a server thread panicked"))
            .collect();
        (result, per_thread)
    });
    Ok((result, ServeStats { per_thread }))
}

fn serve_thread(
    server: &ServerProcess<'_, Single, PerPort, ServerWait>,
    handler: &impl Handler,
    stop: &AtomicBool,
) -> u64 {
    let mut served = 0u64;
    let mut idle = 0u32;
    loop {
        // Read before the scan: if the stop was set before a scan that then finds nothing, every
        // request made before it was seen (by this thread or by the thread holding its lock).
        let stopping = stop.load(Ordering::Acquire);
        match server.try_open(()) {
            Some(mut port) => {
                handler.handle(&mut port);
                served += 1;
                idle = 0;
            }
            None if stopping => return served,
            None => {
                idle = idle.saturating_add(1);
                if idle > 4096 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}
