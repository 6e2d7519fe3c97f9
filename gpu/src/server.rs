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
//! mailbox words. At most one thread per 32 ports is started. Each turn of a thread's loop
//! searches a window of its mailboxes (`Process::try_open_within`, [`SCAN_LOCK_WORDS`] lock
//! words), then passes over its word lines, so on a region of thousands of ports a word call
//! does not wait for a search of every mailbox.
//!
//! The server is generic over where the region lives: the same code serves a GPU region in mapped
//! host memory and a heap region that simulated warps call in tests.
//!
//! What it serves is a [`Handler`]: derived services bound to their handlers
//! (`Tally::server(handler)`, several with `.and(..)`: `ferry_rpc::service::Serving` and `Both`)
//! are handlers, and so are the hand-written ones of this crate. [`serve_region`] serves a
//! [`GpuRegion`] for a caller that loads and launches its kernels itself (through cudarc);
//! [`Program`](crate::launch::Program) does all of it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferry_rpc::service::{serve_lanes, serve_packet, Outcome};
use ferry_rpc::sync::AtomicU32;
use ferry_rpc::words::WordScan;
use ferry_rpc::{LayoutError, PerPort, Port, Region, Server, ServerProcess, Single, Stalled, Wait};

use crate::copy::Helpers;
use crate::region::GpuRegion;

/// A port as a handler sees it: opened by a server thread, its request not yet received.
pub type ServerPort<'p, 'a> = Port<'p, 'a, Server, Single, PerPort, ServerWait>;

/// What the server serves: `ferry_rpc`'s one handler trait, for a GPU region's mailbox and this
/// server's wait policy (`Handler<PerPort, ServerWait>`): derived services bound to their
/// handlers, `LibcHost`, a closure over a [`ServerPort`], or a hand-written handler implemented
/// for any mailbox and wait policy (see [`ferry_rpc::service::Handler`]).
///
/// A handler that returns an error (the client stalled mid-call) is counted in
/// [`ServeStats::failed`], one that panics in [`ServeStats::panicked`] (the panic is caught: the
/// thread goes on serving); if it still held the packet, the packet goes back with
/// `status::SERVER_ERROR`, and lanes of a word-line call it had not answered get that status.
pub use ferry_rpc::service::Handler;

/// Who calls on a GPU region's ports: the one program running on the GPU, as the caller id a
/// handler that tells its clients apart uses (`host::LibcHost::dispatch`). A region serves one
/// program, so every call served here has this id.
pub use ferry_libc_host::PROGRAM;

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
    /// Of those, requests whose handler returned an error (a client that stalled mid-call), all
    /// threads together.
    pub failed: u64,
    /// Of those, requests whose handler panicked, all threads together: each was answered
    /// `status::SERVER_ERROR` (on every lane the handler had not answered) and its thread went
    /// on serving.
    pub panicked: u64,
    /// Requests served by opcode (one per message, however many lanes it carried; handshakes and
    /// opcodes no service has included), all threads together, in the order first seen.
    pub by_opcode: Vec<(u32, u64)>,
    /// The time server threads spent in the handlers of the packets' requests, by opcode, all
    /// threads together (from the open of a request's port to its close: waits for the rest of a
    /// streamed request included), in the order first seen. Word-line calls are not timed.
    pub time_by_opcode: Vec<(u32, Duration)>,
}

impl ServeStats {
    /// Requests served in all.
    pub fn calls(&self) -> u64 {
        self.per_thread.iter().sum()
    }

    /// Requests served with `opcode`.
    pub fn count(&self, opcode: u32) -> u64 {
        self.by_opcode
            .iter()
            .find(|&&(o, _)| o == opcode)
            .map_or(0, |&(_, n)| n)
    }
}

/// Adds `n` calls of `opcode` to `counts`: a linear search, as a run sees few opcodes and the
/// busiest come first.
fn add_count<T: core::ops::AddAssign>(counts: &mut Vec<(u32, T)>, opcode: u32, n: T) {
    match counts.iter_mut().find(|(o, _)| *o == opcode) {
        Some((_, c)) => *c += n,
        None => counts.push((opcode, n)),
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
///
/// A thread that finds nothing spins, then yields between its scans. A handler whose copies
/// between files and device memory run threads of their own: [`serve_with`].
pub fn serve<R>(
    region: Region<'_, PerPort>,
    locks: &[AtomicU32],
    threads: u32,
    handler: &impl Handler<PerPort, ServerWait>,
    body: impl FnOnce() -> R,
) -> Result<(R, ServeStats), LayoutError> {
    serve_with(region, locks, threads, handler, &Helpers::default(), body)
}

/// As [`serve`], for a handler whose large copies between a file and device memory run helper
/// threads counted in `helpers` (a [`CudaCopy`](crate::copy::CudaCopy)'s): while any do, a
/// thread that finds nothing sleeps between its scans instead of yielding, so that the copy has
/// the CPUs.
pub fn serve_with<R>(
    region: Region<'_, PerPort>,
    locks: &[AtomicU32],
    threads: u32,
    handler: &impl Handler<PerPort, ServerWait>,
    helpers: &Helpers,
    body: impl FnOnce() -> R,
) -> Result<(R, ServeStats), LayoutError> {
    let words = region.layout().ports() / ferry_rpc::layout::PORT_GRANULE;
    let threads = threads.clamp(1, words);
    // Check the locks before starting anything.
    ServerProcess::new(region, locks, Single, ServerWait::new(CALL_LIMIT))?;
    let stop = AtomicBool::new(false);
    let (result, threads) = std::thread::scope(|s| {
        // Set on the way out, however it goes (a thread that failed to spawn included): the
        // threads spawned before it stop, and the scope's join returns.
        let guard = StopOnDrop(&stop);
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                // Named, so that `top -H` and profilers tell the server threads apart.
                let named = std::thread::Builder::new().name(format!("ferry-serve-{t}"));
                let spawned = named.spawn_scoped(s, move || {
                    let (first, end) = (t * words / threads, (t + 1) * words / threads);
                    let server =
                        ServerProcess::new(region, locks, Single, ServerWait::new(CALL_LIMIT))
                            .and_then(|s| {
                                s.restrict(
                                    first * ferry_rpc::layout::PORT_GRANULE,
                                    (end - first) * ferry_rpc::layout::PORT_GRANULE,
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
                    serve_thread(&server, handler, stop, helpers)
                });
                // As `Scope::spawn` does, which this is with a name.
                spawned.expect("failed to spawn a server thread")
            })
            .collect();
        let result = body();
        drop(guard);
        let threads: Vec<Served> = workers
            .into_iter()
            .map(|w| w.join().expect("a server thread panicked"))
            .collect();
        (result, threads)
    });
    let mut stats = ServeStats::default();
    for Served {
        served,
        failed,
        panicked,
        by_opcode,
        time_by_opcode,
    } in threads
    {
        stats.per_thread.push(served);
        stats.failed += failed;
        stats.panicked += panicked;
        for (opcode, n) in by_opcode {
            add_count(&mut stats.by_opcode, opcode, n);
        }
        for (opcode, t) in time_by_opcode {
            add_count(&mut stats.time_by_opcode, opcode, t);
        }
    }
    Ok((result, stats))
}

/// Serves `services` on `region` from `threads` server threads while `body` runs (load the
/// kernels, install the region, launch, wait: however the caller does it), then drains the region
/// (every call made before `body` returned is answered); returns what `body` returned and the
/// counts. The region's descriptor must be in the module's `FERRY_RPC` global before a kernel
/// calls ([`GpuRegion::install`], or [`GpuRegion::descriptor`] written by the caller's own
/// means). Calls on a GPU region all come from one program: a `LibcHost` serves them as
/// `host.for_program()`.
///
/// Through cudarc: [`Cuda::new`](crate::cuda::Cuda::new) retains the device's primary context,
/// the one cudarc's `CudaContext::new` uses, so the region it maps is reachable from kernels
/// cudarc loads and launches:
///
/// ```no_run
/// use std::ffi::{c_void, CString};
///
/// use cudarc::driver::result;
/// use ferry_rpc::RpcOpcodes;
/// use ferry_gpu::cuda::Cuda;
/// use ferry_gpu::host::{Libc, LibcConfig, LibcHost};
/// use ferry_gpu::{serve_region, GpuRegion, PortCount};
///
/// #[derive(RpcOpcodes)]
/// pub enum Tally {
///     #[rpc(response = u64)]
///     Add { n: u64 },
/// }
///
/// #[derive(Default)]
/// struct Sum(std::sync::atomic::AtomicU64);
///
/// impl TallyServer for Sum {
///     fn add(&self, n: u64) -> u64 {
///         self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n
///     }
/// }
///
/// let cuda = Cuda::new(0)?; // the device's primary context, current on this thread
/// let region = GpuRegion::new(&cuda, PortCount::default())?;
/// let ptx = CString::new(std::fs::read("tally.ptx")?)?;
/// // SAFETY: NUL-terminated PTX; the primary context is current on this thread.
/// let module = unsafe { result::module::load_data(ptx.as_ptr().cast()) }?;
/// // SAFETY: the module is loaded; the names are NUL-terminated.
/// let (global, len) = unsafe { result::module::get_global(module, c"FERRY_RPC".into()) }?;
/// // SAFETY: as above.
/// let kernel = unsafe { result::module::get_function(module, c"my_kernel".into()) }?;
/// let descriptor = region.descriptor().to_bytes();
/// assert_eq!(len, descriptor.len());
/// // SAFETY: `global` is a `len`-byte device global of the loaded module.
/// unsafe { result::memcpy_htod_sync(global, &descriptor) }?;
///
/// let host = LibcHost::new(LibcConfig::default());
/// let services = Tally::server(Sum::default()).and(Libc::server(host.for_program()));
/// let (ran, stats) = serve_region(&region, 1, &services, || {
///     let mut params: [*mut c_void; 0] = [];
///     let null = std::ptr::null_mut();
///     // SAFETY: `my_kernel` takes no parameters; the region outlives the synchronize below.
///     unsafe { result::launch_kernel(kernel, (1, 1, 1), (32, 1, 1), 0, null, &mut params) }?;
///     result::ctx::synchronize()
/// })?;
/// ran?;
/// println!("{} calls, sum {:?}", stats.calls(), services.0.handler().0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve_region<R>(
    region: &GpuRegion,
    threads: u32,
    services: &impl Handler<PerPort, ServerWait>,
    body: impl FnOnce() -> R,
) -> Result<(R, ServeStats), crate::Error> {
    Ok(serve(
        region.region(),
        region.server_locks(),
        threads,
        services,
        body,
    )?)
}

/// What one server thread did.
struct Served {
    served: u64,
    failed: u64,
    panicked: u64,
    by_opcode: Vec<(u32, u64)>,
    time_by_opcode: Vec<(u32, Duration)>,
}

/// Lock words (32 ports each) a serving thread's search for packets looks at per turn of its
/// loop (`Process::try_open_within`): on a region of a port per resident warp (thousands), one
/// turn over every mailbox would come between a word call's arrival and its pass.
pub const SCAN_LOCK_WORDS: u32 = 8;

fn serve_thread(
    server: &ServerProcess<'_, Single, PerPort, ServerWait>,
    handler: &impl Handler<PerPort, ServerWait>,
    stop: &AtomicBool,
    helpers: &Helpers,
) -> Served {
    let mut served = 0u64;
    let mut failed = 0u64;
    let mut panicked = 0u64;
    let mut by_opcode = Vec::new();
    let mut time_by_opcode = Vec::new();
    let mut idle = 0u32;
    // Turns in a row that found nothing, and how many make one look at every mailbox (the
    // backoff below counts whole looks, not windows).
    let mut quiet = 0u32;
    let windows = (server.port_range().len() as u32)
        .div_ceil(ferry_rpc::layout::PORT_GRANULE * SCAN_LOCK_WORDS)
        .max(1);
    let inline = handler.serves_inline();
    // Work shared by a message's lanes done once a message (prints written, a path looked up).
    crate::host::batch_per_message();
    // The word lines, if the region has them: looked over when no packet came, and every
    // `PASS_EVERY` packets.
    let mut words = server
        .region()
        .layout()
        .has_words()
        .then(|| WordScan::new(server));
    loop {
        // Read before the scan: if the stop was set before a scan that then finds nothing, every
        // request made before it was seen (by this thread or by the thread holding its lock).
        let stopping = stop.load(Ordering::Acquire);
        let mut pass_due = true;
        // A window of the mailboxes per turn, so that the word lines' pass (a few loads on an
        // idle region: their bells) comes between two windows, not after a scan of every port;
        // once told to stop, every port (the drain needs a whole scan that finds nothing).
        let window = match stopping {
            true => u32::MAX,
            false => SCAN_LOCK_WORDS,
        };
        let packet = server.try_open_within((), window);
        let found_packet = packet.is_some();
        if let Some(mut port) = packet {
            let opcode = port.opcode();
            add_count(&mut by_opcode, opcode, 1);
            let started = Instant::now();
            // A failed or panicking handler: the packet goes back with `SERVER_ERROR`.
            let outcome = serve_packet(handler, &mut port);
            // Before the port goes back: its client finds its text written.
            crate::host::end_message();
            add_count(&mut time_by_opcode, opcode, started.elapsed());
            match outcome {
                Outcome::Served => {}
                Outcome::Failed => failed += 1,
                Outcome::Panicked => panicked += 1,
            }
            served += 1;
            pass_due = words.as_mut().is_some_and(WordScan::packet_served);
        }
        let mut found_words = false;
        if let Some(scan) = words.as_mut().filter(|_| pass_due) {
            if stopping {
                // The drain: every head, whatever the bells say.
                scan.read_every_head();
            }
            let n = scan.pass(
                server,
                |opcode, lanes| match inline {
                    true => {
                        // A panicking handler: the lanes it had not answered get `SERVER_ERROR`.
                        if serve_lanes(handler, opcode, lanes) == Outcome::Panicked {
                            panicked += 1;
                        }
                    }
                    // The client makes the call through the packets.
                    false => lanes.decline(),
                },
                |s| {
                    // A declined call executed nothing; it is counted when the packets bring it.
                    if !s.declined {
                        add_count(&mut by_opcode, s.opcode, 1);
                        served += 1;
                    }
                },
            );
            found_words = n > 0;
        }
        if found_packet || found_words {
            idle = 0;
            quiet = 0;
        } else if stopping {
            return Served {
                served,
                failed,
                panicked,
                by_opcode,
                time_by_opcode,
            };
        } else {
            quiet += 1;
            if quiet == windows {
                // A whole look at every mailbox (and as many word passes) found nothing.
                quiet = 0;
                idle = idle.saturating_add(1);
            }
            // After a few idle scans (not in the busy loop's first ones), a large copy's file
            // threads need the CPUs more than an idle scan does; a look is not cut by a sleep.
            if quiet == 0 && idle > 64 && helpers.busy() {
                std::thread::sleep(std::time::Duration::from_micros(100));
            } else if idle > 4096 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
