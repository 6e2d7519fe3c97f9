//! The host services' copies between files and the GPU's memory ([`Libc::ReadToDevice`],
//! [`Libc::WriteFromDevice`]): the GPU's copy engine moves the bytes between pinned staging
//! memory and device memory while the file is read into, or written from, other staging memory.
//!
//! A device address comes from the program: it is handed to the driver only, never dereferenced
//! here. Before any copy the whole range must lie in one allocation of the device's own memory
//! (`cuPointerGetAttributes`, one driver call: memory type, allocation start and size); anything
//! else is [`HostError::BadAddress`]. Each copy is also checked by the driver.
//!
//! **Announced copies.** A request may name a word of device memory where the end of the call
//! is announced (`ferry_libc_host::Announce`; the device library names the calling lane's announce
//! word when the region says the host announces, as the loader's do). The announce is a write of
//! the copy's stream after its last copy, so a warp waiting for it polls its own memory, not the
//! host's: thousands of warps polling host memory across the bus slow the copy engine's reads
//! of it many times over. A small announced read returns before its bytes land (the warp waits
//! for the announce, not for the reply), so a serving thread goes on to the next call. Every way
//! a call with an announce can end announces, a failure before any copy included (on a stream
//! kept for that); where the driver refuses a stream's write, the stream is waited for and the
//! word copied.
//!
//! **Three paths.**
//! - A small announced read (up to [`SMALL_BYTES`]): the file into a chunk of pinned memory,
//!   the copy queued for one issuing thread that issues queued copies in batches of up to
//!   [`BATCH`] per driver call, as the driver serves one call at a time (see `batch.rs`).
//! - A larger read: its pieces of 1 MiB are split into one contiguous run per file thread (up
//!   to [`READERS`] and the host's CPUs), each thread with its own two buffers and stream,
//!   reading its next piece while the copy engine moves its last. No step is shared between the
//!   threads, so none waits for a slower one; one thread's read of the page cache is several
//!   times slower than the copy engine.
//! - A write: the device's bytes into one buffer of 4 MiB while the file is written from the
//!   other, the file side on up to [`READERS`] threads in step (two barriers per piece). Writes
//!   to one file are mostly serialised by the file system, so more independence buys little.
//!
//! While a large copy's file threads run, idle serving threads sleep between their scans instead
//! of spinning (`server.rs`), leaving the CPUs to them.
//!
//! Each copy takes staging sets (two pinned buffers, a stream and two events) from a pool made
//! when the program is loaded, and makes more only when more copies run at once than it holds.
//!
//! [`Libc::ReadToDevice`]: ferry_libc::Libc::ReadToDevice
//! [`Libc::WriteFromDevice`]: ferry_libc::Libc::WriteFromDevice

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use cudarc::driver::sys;
use ferry_libc::HostError;
use ferry_libc_host::{Announce, DeviceCopy};

use crate::batch::{lock, ok, write_word, Batcher, CudaEngine};
pub use crate::batch::{BATCH, SMALL_BYTES};
use crate::cuda::Cuda;
use crate::Error;

/// Bytes of each staging buffer: large enough that a copy's fixed cost is small against its
/// bytes, small enough that reading the file and copying overlap early.
pub const STAGING_BYTES: usize = 4 << 20;

/// The most threads on the file side of one copy (a large read's independent runs, a write's
/// parts of each piece): one thread's read of the page cache is a memory copy, several times
/// slower than the copy engine.
pub const READERS: usize = 12;

/// A copy engine's large copies whose file side runs on helper threads right now. While there
/// are any, an idle serving thread sleeps between its scans instead of spinning
/// ([`server::serve_with`](crate::server::serve_with)), leaving the CPUs to the helpers: a file
/// read at memory speed needs more of them than the serving threads leave otherwise. A clone
/// counts the same copies ([`CudaCopy::helpers`]); a new one counts none.
#[derive(Clone, Debug, Default)]
pub struct Helpers(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Helpers {
    /// Whether a copy's helpers are at work now.
    pub fn busy(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    /// Counts a copy while the returned guard lives.
    fn enter(&self) -> Helped<'_> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Helped(self)
    }
}

/// A copy counted in its engine's [`Helpers`] while it lives.
struct Helped<'a>(&'a Helpers);

impl Drop for Helped<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The smallest part one of a write's threads takes: a write below this is made by one thread.
const PART_BYTES: usize = 256 << 10;

/// Threads for a write of `len` bytes from device memory: one per `PART_BYTES` of a piece, at
/// most `READERS` and the host's CPUs.
fn workers(len: u64) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let piece = len.min(STAGING_BYTES as u64) as usize;
    (piece / PART_BYTES).clamp(1, READERS.min(cpus))
}

/// Bytes of each piece of a large read into device memory (in the first part of a staging
/// buffer): small enough that the threads' runs end close together, large enough that a
/// copy's fixed cost is small against its bytes.
const FILL_PIECE: usize = 1 << 20;
const _: () = assert!(FILL_PIECE <= STAGING_BYTES);

/// Threads that read the file for a copy of `len` bytes into device memory: one per 2 pieces,
/// at most `READERS` and the host's CPUs.
fn readers(len: u64) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (len.div_ceil(2 * FILL_PIECE as u64) as usize).clamp(1, READERS.min(cpus))
}

/// Fills `buf` with the source's bytes from `at` on through `read`; returns how many (fewer only
/// at the source's end).
fn read_all(
    read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    at: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read(at + n as u64, &mut buf[n..])? {
            0 => break,
            m => n += m,
        }
    }
    Ok(n)
}

/// Runs rounds `0..rounds` on `workers` threads, this one and `workers - 1` helpers started once
/// for all rounds: in round `k`, `start(k)` on this thread (false: stop before the round), then
/// `part(k, i)` on worker `i` for every `i`, all at once, then `end(k, results)` on this thread,
/// with the parts' results in order (false: stop). Returns after the last round, every helper
/// joined. Each round's parts happen after its `start` and before its `end` (the barriers
/// between them order memory).
fn rounds<T: Send>(
    workers: usize,
    rounds: u64,
    mut start: impl FnMut(u64) -> bool,
    part: impl Fn(u64, usize) -> io::Result<T> + Sync,
    mut end: impl FnMut(u64, Vec<io::Result<T>>) -> bool,
) {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Barrier;
    let workers = workers.max(1);
    let slots: Vec<Mutex<Option<io::Result<T>>>> = (0..workers).map(|_| Mutex::new(None)).collect();
    let (go, done) = (Barrier::new(workers), Barrier::new(workers));
    let (stop, round) = (AtomicBool::new(false), AtomicU64::new(0));
    // A part that panics is that part's error, so no barrier waits for it forever.
    let run = |k: u64, i: usize| {
        let r = catch_unwind(AssertUnwindSafe(|| part(k, i)))
            .unwrap_or_else(|_| Err(io::Error::other("a copy thread panicked")));
        *lock(&slots[i]) = Some(r);
    };
    std::thread::scope(|s| {
        for i in 1..workers {
            let (go, done, stop, round, run) = (&go, &done, &stop, &round, &run);
            s.spawn(move || loop {
                // Synchronises with this thread's `go.wait()` below: the round's number and
                // whatever `start` did are visible.
                go.wait();
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                run(round.load(Ordering::Relaxed), i);
                // Synchronises with `done.wait()` below: the slot is written.
                done.wait();
            });
        }
        for k in 0..rounds {
            if !start(k) {
                break;
            }
            round.store(k, Ordering::Relaxed);
            go.wait();
            run(k, 0);
            done.wait();
            let results = slots
                .iter()
                .map(|s| {
                    let r = lock(s).take();
                    r.unwrap_or_else(|| Err(io::Error::other("a part did not run")))
                })
                .collect();
            if !end(k, results) {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        go.wait();
    });
}

/// The part of a piece of `n` bytes worker `i` of `workers` takes: its start and length.
fn part_of(n: usize, workers: usize, i: usize) -> (usize, usize) {
    let size = n.div_ceil(workers);
    let from = (i * size).min(n);
    (from, size.min(n - from))
}

/// Where a pipelined copy's staging lives and how its buffers move to and from the device: the
/// CUDA staging set, or memory in the tests.
trait Stage: Sync {
    /// Buffer `b`'s start (`STAGING_BYTES` bytes, `b` in 0..2).
    fn buffer(&self, b: usize) -> *mut u8;
    /// Waits until buffer `b`'s last copy is done; false if it failed.
    fn wait(&self, b: usize) -> bool;
    /// Starts copying `n` bytes of buffer `b` to the device at `at` (from the start of the
    /// range); false if refused.
    fn copy_in(&self, b: usize, at: u64, n: usize) -> bool;
    /// Starts copying `n` bytes from the device at `at` into buffer `b`; false if refused.
    fn copy_out(&self, b: usize, at: u64, n: usize) -> bool;
    /// Writes `done`'s value to its word once every copy started so far is over (the bytes of
    /// a copy in are in device memory); false if refused.
    fn announce(&self, done: Announce) -> bool;
    /// Readies the calling thread to use the stage (the driver's context made current); false
    /// if it cannot be.
    fn enter(&self) -> bool {
        true
    }
    /// Waits until every copy started on the stage is over, whether or not an event marks it;
    /// false if that cannot be known.
    fn finish(&self) -> bool;
    /// Where a copy on this stage that runs helper threads is counted, if anywhere.
    fn helpers(&self) -> Option<&Helpers> {
        None
    }
}

/// A buffer's address, shared by the threads that fill or drain its parts.
#[derive(Clone, Copy)]
struct Shared(*mut u8);
// SAFETY: the address is of pinned memory that outlives the copy; threads touch disjoint parts
// of it between two barriers of `rounds`, and no copy uses the buffer meanwhile.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

/// Reads `len` bytes of the source into the device range on one thread per stage in `stages`,
/// each through its own stage's two buffers: the pieces of `FILL_PIECE` are split into one
/// contiguous run per thread, and each thread reads its next piece while the copy engine moves
/// its last, with no step in common with the other threads (a thread is never kept waiting for
/// a slower one). Returns the bytes moved up to the first piece the source's end cut short;
/// every copy is over when it returns, and with `done` the end is announced after them on
/// `stages[0]`.
fn fill_split<S: Stage>(
    stages: &[S],
    len: u64,
    done: Option<Announce>,
    read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
) -> Result<u64, HostError> {
    let piece = FILL_PIECE as u64;
    let pieces = len.div_ceil(piece);
    let size = |k: u64| (len - k * piece).min(piece) as usize;
    let threads = (stages.len() as u64).clamp(1, pieces.max(1));
    // Thread `i`'s run of pieces, the pieces it read (index, bytes got, bytes wanted) or its
    // failure.
    let run = |i: u64| -> Result<Vec<(u64, usize, usize)>, HostError> {
        let stage = &stages[i as usize];
        let (first, end) = (i * pieces / threads, (i + 1) * pieces / threads);
        let mut got = Vec::new();
        if !stage.enter() {
            return Err(HostError::Io);
        }
        // A panic in `read` ends the run here, after its copies are over.
        struct Finish<'s, S: Stage>(&'s S);
        impl<S: Stage> Drop for Finish<'_, S> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.finish();
                }
            }
        }
        let _finish = Finish(stage);
        let mut failed = None;
        for (j, k) in (first..end).enumerate() {
            let b = j % 2;
            if !stage.wait(b) {
                failed = Some(HostError::Io);
                break;
            }
            // SAFETY: buffer b holds STAGING_BYTES >= FILL_PIECE >= size(k) bytes, this thread's alone, and
            // its last copy is over (waited just above).
            let buf = unsafe { std::slice::from_raw_parts_mut(stage.buffer(b), size(k)) };
            let n = match read_all(read, k * piece, buf) {
                Ok(n) => n,
                Err(_) => {
                    failed = Some(HostError::Io);
                    break;
                }
            };
            if n > 0 && !stage.copy_in(b, k * piece, n) {
                failed = Some(HostError::BadAddress);
                break;
            }
            got.push((k, n, size(k)));
            if n < size(k) {
                break;
            }
        }
        // Every copy of this thread is over before the reply or the announce, on every way
        // out (a copy whose event was not recorded included).
        if !stage.finish() && failed.is_none() {
            failed = Some(HostError::Io);
        }
        failed.map_or(Ok(got), Err)
    };
    let _helped = (threads > 1).then(|| stages[0].helpers().map(Helpers::enter));
    let results: Vec<_> = std::thread::scope(|s| {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let helpers: Vec<_> = (1..threads)
            .map(|i| {
                let run = &run;
                s.spawn(move || {
                    catch_unwind(AssertUnwindSafe(|| run(i))).unwrap_or(Err(HostError::Io))
                })
            })
            .collect();
        let mut results =
            vec![catch_unwind(AssertUnwindSafe(|| run(0))).unwrap_or(Err(HostError::Io))];
        results.extend(
            helpers
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(HostError::Io))),
        );
        results
    });
    let mut read_pieces = Vec::new();
    let mut failed = None;
    for r in results {
        match r {
            Ok(v) => read_pieces.extend(v),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let (Some(done), Some(stage)) = (done, stages.first()) {
        if !stage.announce(done) && failed.is_none() {
            failed = Some(HostError::Io);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // The bytes up to the first piece the source's end cut short.
    read_pieces.sort_unstable();
    let mut moved = 0u64;
    for (expect, &(k, n, want)) in read_pieces.iter().enumerate() {
        if k != expect as u64 {
            break;
        }
        moved += n as u64;
        if n < want {
            break;
        }
    }
    Ok(moved)
}

/// Writes `len` bytes of the device range to the sink through `stage`'s two buffers: piece
/// `k + 1` comes from the device while piece `k` is written on `workers(len)` threads.
///
/// With `done`, the end is announced there once the bytes were written (or the copy failed).
fn drain_through(
    stage: &dyn Stage,
    len: u64,
    done: Option<Announce>,
    write: &(dyn Fn(u64, &[u8]) -> io::Result<()> + Sync),
) -> Result<u64, HostError> {
    let piece = STAGING_BYTES as u64;
    let pieces = len.div_ceil(piece);
    let buffers = [Shared(stage.buffer(0)), Shared(stage.buffer(1))];
    let size = |k: u64| (len - k * piece).min(piece) as usize;
    let n_workers = workers(len);
    let _helped = (n_workers > 1).then(|| stage.helpers().map(Helpers::enter));
    let issue = |k: u64| stage.copy_out((k % 2) as usize, k * piece, size(k));
    let failed = Cell::new(None);
    if pieces > 0 && !issue(0) {
        failed.set(Some(HostError::BadAddress));
    }
    // (A refused first copy skips the rounds, not the wait and the announce below.)
    let pieces = if failed.get().is_some() { 0 } else { pieces };
    rounds(
        n_workers,
        pieces,
        |k| {
            // Piece k is in its buffer; the other buffer's writers finished last round.
            if !stage.wait((k % 2) as usize) {
                failed.set(Some(HostError::Io));
                return false;
            }
            if k + 1 < pieces && !issue(k + 1) {
                failed.set(Some(HostError::BadAddress));
                return false;
            }
            true
        },
        |k, i| {
            let (from, n) = part_of(size(k), n_workers, i);
            let b = buffers[(k % 2) as usize];
            // SAFETY: piece k's bytes are in buffer b (waited in `start`); this worker's part is
            // disjoint from the others', and the next copy goes to the other buffer.
            let bytes = unsafe { std::slice::from_raw_parts(b.0.add(from), n) };
            if n > 0 {
                write(k * piece + from as u64, bytes)?;
            }
            Ok(())
        },
        |_, parts| match parts.into_iter().find_map(Result::err) {
            Some(_) => {
                failed.set(Some(HostError::Io));
                false
            }
            None => true,
        },
    );
    // No copy may still write a buffer once the staging set goes back to the pool.
    if !stage.finish() && failed.get().is_none() {
        failed.set(Some(HostError::Io));
    }
    if let Some(done) = done {
        if !stage.announce(done) && failed.get().is_none() {
            failed.set(Some(HostError::Io));
        }
    }
    failed.get().map_or(Ok(len), Err)
}

/// One serving thread's staging: two pinned buffers, the stream their copies go on, and an event
/// per buffer marking when its last copy is done.
struct Staging {
    buffers: [*mut u8; 2],
    stream: sys::CUstream,
    done: [sys::CUevent; 2],
}

/// The GPU's memory as [`DeviceCopy`] for [`ferry_libc_host::LibcHost`] (the loader gives it to the
/// program's host services).
pub struct CudaCopy {
    context: sys::CUcontext,
    /// The staging sets not in use, the longest unused first.
    pool: Mutex<VecDeque<Staging>>,
    /// The batched path of small announced reads (`None` if the driver refused its memory).
    batch: Option<Batcher>,
    /// A stream of its own for announces made when no copy ran (a call that failed first).
    announces: sys::CUstream,
    stats: Counters,
    /// Its copies running helper threads now.
    helpers: Helpers,
}

/// Where the copies' time went, summed over the copies since [`CudaCopy::take_stats`] was last
/// called (times in nanoseconds; the file side summed over its threads, so it can exceed the
/// copies' own time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Copies served (each [`Libc::ReadToDevice`] or [`Libc::WriteFromDevice`] that reached the
    /// copy engine's path).
    ///
    /// [`Libc::ReadToDevice`]: ferry_libc::Libc::ReadToDevice
    /// [`Libc::WriteFromDevice`]: ferry_libc::Libc::WriteFromDevice
    pub copies: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Checking the device ranges with the driver.
    pub check_ns: u64,
    /// Reading or writing the files (every thread's time).
    pub file_ns: u64,
    /// Waiting for the copy engine (a buffer's last copy to end, or a chunk of the batched
    /// path to come back).
    pub wait_ns: u64,
    /// Queueing copies on the batched path, and issuing the queue when this thread did.
    pub issue_ns: u64,
    /// The copies from start to end, as their serving threads saw them.
    pub total_ns: u64,
}

/// [`CopyStats`]' running sums.
#[derive(Default)]
struct Counters {
    copies: AtomicU64,
    bytes: AtomicU64,
    check_ns: AtomicU64,
    file_ns: AtomicU64,
    wait_ns: AtomicU64,
    issue_ns: AtomicU64,
    total_ns: AtomicU64,
}

impl Counters {
    fn add(c: &AtomicU64, since: Instant) {
        c.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn take(&self) -> CopyStats {
        let t = |c: &AtomicU64| c.swap(0, Ordering::Relaxed);
        CopyStats {
            copies: t(&self.copies),
            bytes: t(&self.bytes),
            check_ns: t(&self.check_ns),
            file_ns: t(&self.file_ns),
            wait_ns: t(&self.wait_ns),
            issue_ns: t(&self.issue_ns),
            total_ns: t(&self.total_ns),
        }
    }
}

// SAFETY: the context handle and the staging resources are driver objects usable from any thread
// that makes the context current (every use does); a staging set is used by one thread at a time
// (taken out of the pool under its lock).
unsafe impl Send for CudaCopy {}
// SAFETY: as above.
unsafe impl Sync for CudaCopy {}

impl std::fmt::Debug for CudaCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaCopy").finish_non_exhaustive()
    }
}

impl CudaCopy {
    /// Copies for `cuda`'s device, with staging for `threads` serving threads made now. It must
    /// not outlive `cuda` (the loader drops it with the program).
    pub fn new(cuda: &Cuda, threads: usize) -> Result<CudaCopy, Error> {
        cuda.make_current()?;
        let mut announces = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; 1 is CU_STREAM_NON_BLOCKING.
        if !ok(unsafe { sys::cuStreamCreate(&mut announces, 1) }) {
            return Err(Error::Cuda {
                call: "cuStreamCreate",
                code: 0,
                message: "could not make the announces' stream".into(),
            });
        }
        let copy = CudaCopy {
            context: cuda.context(),
            pool: Mutex::new(VecDeque::new()),
            batch: Batcher::new(CudaEngine::new(cuda.context())),
            announces,
            stats: Counters::default(),
            helpers: Helpers::default(),
        };
        for _ in 0..threads.max(1) {
            let staging = copy.make_staging().ok_or_else(|| Error::Cuda {
                call: "cuMemHostAlloc (staging)",
                code: 0,
                message: "could not make pinned staging buffers".into(),
            })?;
            lock(&copy.pool).push_back(staging);
        }
        Ok(copy)
    }

    /// Its copies whose file side runs on helper threads now: what a server that serves its
    /// program reads to leave them the CPUs ([`server::serve_with`](crate::server::serve_with)).
    pub fn helpers(&self) -> &Helpers {
        &self.helpers
    }

    /// Where the copies' time went since the last call (the sums start again from zero).
    pub fn take_stats(&self) -> CopyStats {
        self.stats.take()
    }

    fn current(&self) -> bool {
        // SAFETY: the context is the program's, alive while this value is (see `new`).
        ok(unsafe { sys::cuCtxSetCurrent(self.context) })
    }

    /// A new staging set, or `None` if the driver refuses one.
    fn make_staging(&self) -> Option<Staging> {
        let mut staging = Staging {
            buffers: [std::ptr::null_mut(); 2],
            stream: std::ptr::null_mut(),
            done: [std::ptr::null_mut(); 2],
        };
        let mut made = true;
        for b in &mut staging.buffers {
            let mut p = std::ptr::null_mut();
            // SAFETY: a valid out-pointer and a non-zero size.
            made &= ok(unsafe {
                sys::cuMemHostAlloc(&mut p, STAGING_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE)
            });
            *b = p.cast();
        }
        // SAFETY: valid out-pointers; flag 1 is CU_STREAM_NON_BLOCKING (no implicit sync with
        // the kernel's stream), 2 is CU_EVENT_DISABLE_TIMING.
        made &= ok(unsafe { sys::cuStreamCreate(&mut staging.stream, 1) });
        for e in &mut staging.done {
            // SAFETY: as above.
            made &= ok(unsafe { sys::cuEventCreate(e, 2) });
        }
        if made {
            Some(staging)
        } else {
            self.free(staging);
            None
        }
    }

    fn free(&self, s: Staging) {
        // SAFETY: each handle is null or was made by the driver above and is released once; the
        // stream is synchronised first (a copy that was not waited for may still use a buffer).
        unsafe {
            if !s.stream.is_null() {
                sys::cuStreamSynchronize(s.stream);
            }
            for b in s.buffers {
                if !b.is_null() {
                    sys::cuMemFreeHost(b.cast());
                }
            }
            for e in s.done {
                if !e.is_null() {
                    sys::cuEventDestroy_v2(e);
                }
            }
            if !s.stream.is_null() {
                sys::cuStreamDestroy_v2(s.stream);
            }
        }
    }

    /// Runs `f` with up to `n` staging sets, at least one (from the pool, the longest unused
    /// first, new ones if the pool has too few); they go back to the pool after `f`, whose
    /// copies must be over. The calling thread has the context current (`begin`). An error only
    /// if `f` could not run (no pinned memory).
    fn with_stagings<R>(&self, n: usize, f: impl FnOnce(&[Staging]) -> R) -> Result<R, HostError> {
        let mut taken: Vec<Staging> = {
            let mut pool = lock(&self.pool);
            let k = n.min(pool.len());
            pool.drain(..k).collect()
        };
        while taken.len() < n {
            match self.make_staging() {
                Some(s) => taken.push(s),
                None if !taken.is_empty() => break,
                None => return Err(HostError::Io),
            }
        }
        let result = f(&taken);
        lock(&self.pool).extend(taken);
        Ok(result)
    }
}

/// Checks that `done` names 4 aligned bytes of the device's own memory.
fn announce_word(done: Announce) -> Result<(), HostError> {
    if !done.address.is_multiple_of(4) {
        return Err(HostError::BadAddress);
    }
    device_range(done.address, 4)
}

/// Checks that `address .. address + len` lies in one allocation of the device's own memory.
fn device_range(address: u64, len: u64) -> Result<(), HostError> {
    let end = address.checked_add(len).ok_or(HostError::BadAddress)?;
    if len == 0 {
        return Ok(());
    }
    let mut kind: u32 = 0;
    let mut start: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    let mut attributes = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 3] = [
        (&mut kind as *mut u32).cast(),
        (&mut start as *mut sys::CUdeviceptr).cast(),
        (&mut size as *mut usize).cast(),
    ];
    // SAFETY: one driver call for the three attributes (the driver serves one call at a time:
    // a copy's checks are as much of its cost as its copy); each out-pointer is valid for its
    // attribute's type (a memory type is an unsigned int, the range start a device pointer, the
    // range size a size_t); the driver only reads its own tables for `address`, which it does
    // not dereference. An address it does not know leaves the memory type 0.
    let known = unsafe {
        ok(sys::cuPointerGetAttributes(
            3,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            address,
        ))
    };
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    if !known || kind != device || address < start || end > start.saturating_add(size as u64) {
        return Err(HostError::BadAddress);
    }
    Ok(())
}

/// A staging set and the device range a copy moves, as the pipeline sees them.
struct CudaStage<'a> {
    /// The program's context, made current on each thread that uses the stage.
    context: sys::CUcontext,
    staging: &'a Staging,
    /// The device range's start (checked by `device_range`).
    address: u64,
    /// Where the time spent waiting goes.
    stats: &'a Counters,
    /// Where a copy with helper threads is counted.
    helpers: &'a Helpers,
}

// SAFETY: the stream and events are driver handles usable from any thread with the context
// current; only the pipeline's own thread (which made it current) calls the driver through them.
unsafe impl Sync for CudaStage<'_> {}

impl<'a> CudaStage<'a> {
    fn new(copy: &'a CudaCopy, staging: &'a Staging, address: u64, stats: &'a Counters) -> Self {
        CudaStage {
            context: copy.context,
            staging,
            address,
            stats,
            helpers: &copy.helpers,
        }
    }
}

impl Stage for CudaStage<'_> {
    fn buffer(&self, b: usize) -> *mut u8 {
        self.staging.buffers[b]
    }

    fn wait(&self, b: usize) -> bool {
        let t = Instant::now();
        // SAFETY: the event marks the end of this buffer's last copy (or was never recorded, and
        // returns at once).
        let done = ok(unsafe { sys::cuEventSynchronize(self.staging.done[b]) });
        Counters::add(&self.stats.wait_ns, t);
        done
    }

    fn copy_in(&self, b: usize, at: u64, n: usize) -> bool {
        let s = self.staging;
        // SAFETY: `address + at .. + n` lies in the device allocation checked by the caller;
        // the source is `n <= STAGING_BYTES` bytes of pinned buffer `b`, not touched until its
        // event.
        unsafe {
            ok(sys::cuMemcpyHtoDAsync_v2(
                self.address + at,
                s.buffers[b].cast(),
                n,
                s.stream,
            )) && ok(sys::cuEventRecord(s.done[b], s.stream))
        }
    }

    fn copy_out(&self, b: usize, at: u64, n: usize) -> bool {
        let s = self.staging;
        // SAFETY: buffer `b` is pinned, `n <= STAGING_BYTES`, and not read until its event; the
        // device range was checked by the caller.
        unsafe {
            ok(sys::cuMemcpyDtoHAsync_v2(
                s.buffers[b].cast(),
                self.address + at,
                n,
                s.stream,
            )) && ok(sys::cuEventRecord(s.done[b], s.stream))
        }
    }

    fn enter(&self) -> bool {
        // SAFETY: the program's context, alive while the copy that made this stage runs.
        ok(unsafe { sys::cuCtxSetCurrent(self.context) })
    }

    fn announce(&self, done: Announce) -> bool {
        // The word was checked to be 4 aligned bytes of device memory (`announce_word`); the
        // write follows this stream's copies.
        write_word(self.staging.stream, done.address, done.value)
    }

    fn finish(&self) -> bool {
        // SAFETY: the staging set's stream, used by this copy alone.
        ok(unsafe { sys::cuStreamSynchronize(self.staging.stream) })
    }

    fn helpers(&self) -> Option<&Helpers> {
        Some(self.helpers)
    }
}

impl DeviceCopy for CudaCopy {
    fn fill(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    ) -> Result<u64, HostError> {
        let (t, stats) = (self.begin(address, len, done)?, &self.stats);
        let timed = |at: u64, buf: &mut [u8]| {
            let t = Instant::now();
            let r = read(at, buf);
            Counters::add(&stats.file_ns, t);
            r
        };
        // A small announced read: the file into a chunk, the copy queued for the next batch.
        if let (Some(done), Some(batch)) = (done, &self.batch) {
            if len <= SMALL_BYTES as u64 {
                let waited = Instant::now();
                let (chunk, buf) = batch.chunk();
                Counters::add(&stats.wait_ns, waited);
                let got = read_all(&timed, 0, &mut buf[..len as usize]);
                // A failed read queues no bytes, so that the announce still comes.
                let issued = Instant::now();
                batch.submit(chunk, address, *got.as_ref().unwrap_or(&0), done);
                Counters::add(&stats.issue_ns, issued);
                return self.end(t, got.map(|n| n as u64).map_err(|_| HostError::Io));
            }
        }
        let moved = self.with_stagings(readers(len), |stagings| {
            let stages: Vec<CudaStage<'_>> = stagings
                .iter()
                .map(|staging| CudaStage::new(self, staging, address, stats))
                .collect();
            fill_split(&stages, len, done, &timed)
        });
        self.end(t, self.ran(done, moved))
    }

    fn drain(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        write: &(dyn Fn(u64, &[u8]) -> io::Result<()> + Sync),
    ) -> Result<u64, HostError> {
        let (t, stats) = (self.begin(address, len, done)?, &self.stats);
        let timed = |at: u64, bytes: &[u8]| {
            let t = Instant::now();
            let r = write(at, bytes);
            Counters::add(&stats.file_ns, t);
            r
        };
        let moved = self.with_stagings(1, |stagings| {
            let stage = CudaStage::new(self, &stagings[0], address, stats);
            drain_through(&stage, len, done, &timed)
        });
        self.end(t, self.ran(done, moved))
    }

    fn announce(&self, done: Announce) -> Result<(), HostError> {
        announce_word(done)?;
        if !self.current() {
            return Err(HostError::Io);
        }
        // The word was checked just above; nothing was copied for this call.
        match write_word(self.announces, done.address, done.value) {
            true => Ok(()),
            false => Err(HostError::Io),
        }
    }
}

impl CudaCopy {
    /// The start of a copy at `t`, returned: the program's context made current on this thread
    /// (for the checks and every driver call of the copy on it: none makes it current again),
    /// `done`'s word and the device range checked (a range refused, or no context, is announced
    /// at `done` where that can be done).
    fn begin(&self, address: u64, len: u64, done: Option<Announce>) -> Result<Instant, HostError> {
        let t = Instant::now();
        let current = self.current();
        done.map_or(Ok(()), announce_word)?;
        let checked = match current {
            true => device_range(address, len),
            false => Err(HostError::Io),
        };
        Counters::add(&self.stats.check_ns, t);
        checked.map(|()| t).map_err(|e| self.failed(done, e))
    }

    /// A copy's outcome from `with_stagings`: the copy's own, or where it could not start (no
    /// staging), its error, announced here as no copy ran.
    fn ran(
        &self,
        done: Option<Announce>,
        moved: Result<Result<u64, HostError>, HostError>,
    ) -> Result<u64, HostError> {
        moved.unwrap_or_else(|e| Err(self.failed(done, e)))
    }

    /// Counts a copy begun at `t` that ended with `moved`, and returns `moved`.
    fn end(&self, t: Instant, moved: Result<u64, HostError>) -> Result<u64, HostError> {
        let stats = &self.stats;
        stats.copies.fetch_add(1, Ordering::Relaxed);
        let bytes = *moved.as_ref().unwrap_or(&0);
        stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        Counters::add(&stats.total_ns, t);
        moved
    }

    /// `e`, the error of a call that ends before any copy ran, its end announced at `done` first
    /// (the announce's own error if that fails).
    fn failed(&self, done: Option<Announce>, e: HostError) -> HostError {
        match done {
            Some(d) => self.announce(d).err().unwrap_or(e),
            None => e,
        }
    }
}

impl Drop for CudaCopy {
    fn drop(&mut self) {
        if !self.current() {
            return;
        }
        let pool = std::mem::take(&mut *lock(&self.pool));
        for staging in pool {
            self.free(staging);
        }
        // SAFETY: the copy's own stream, released once, after its writes are done.
        unsafe {
            sys::cuStreamSynchronize(self.announces);
            sys::cuStreamDestroy_v2(self.announces);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source of `len` bytes, each a function of its offset, read at most `step` at a time.
    fn source(len: usize, step: usize) -> impl Fn(u64, &mut [u8]) -> io::Result<usize> + Sync {
        move |at, buf| {
            let at = at as usize;
            if at >= len {
                return Ok(0);
            }
            let n = buf.len().min(len - at).min(step);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = ((at + i) * 7 % 251) as u8;
            }
            Ok(n)
        }
    }

    fn expected(from: usize, n: usize) -> Vec<u8> {
        (from..from + n).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// Staging in memory; the "device" a vector the copies reach at once.
    struct MemStage {
        buffers: [std::cell::UnsafeCell<Box<[u8]>>; 2],
        device: std::sync::Arc<Mutex<Vec<u8>>>,
        refuse: bool,
        /// Copies made so far.
        copies: AtomicU64,
        /// Each announce: its value and the copies made before it.
        announced: Mutex<Vec<(u32, u64)>>,
    }

    impl MemStage {
        fn new(device_len: usize) -> MemStage {
            MemStage {
                buffers: [0, 1].map(|_| vec![0u8; STAGING_BYTES].into_boxed_slice().into()),
                device: std::sync::Arc::new(Mutex::new(vec![0xAA; device_len])),
                refuse: false,
                copies: AtomicU64::new(0),
                announced: Mutex::new(Vec::new()),
            }
        }
    }

    // SAFETY: the pipeline touches the buffers' bytes from several threads only in disjoint
    // parts between its barriers, as it does the pinned ones.
    unsafe impl Sync for MemStage {}

    impl Stage for MemStage {
        fn buffer(&self, b: usize) -> *mut u8 {
            // SAFETY: the box is never replaced; only its bytes are written, through this pointer.
            unsafe { (*self.buffers[b].get()).as_mut_ptr() }
        }
        fn wait(&self, _: usize) -> bool {
            true
        }
        fn copy_in(&self, b: usize, at: u64, n: usize) -> bool {
            let at = at as usize;
            // SAFETY: the test's buffers, read here between the pipeline's rounds only.
            let buf = unsafe { std::slice::from_raw_parts(self.buffer(b), n) };
            self.device.lock().unwrap()[at..at + n].copy_from_slice(buf);
            self.copies.fetch_add(1, Ordering::Relaxed);
            !self.refuse
        }
        fn copy_out(&self, b: usize, at: u64, n: usize) -> bool {
            let at = at as usize;
            // SAFETY: the test's buffers, written here between the pipeline's rounds only.
            let buf = unsafe { std::slice::from_raw_parts_mut(self.buffer(b), n) };
            buf.copy_from_slice(&self.device.lock().unwrap()[at..at + n]);
            self.copies.fetch_add(1, Ordering::Relaxed);
            !self.refuse
        }
        fn finish(&self) -> bool {
            true
        }
        fn announce(&self, done: Announce) -> bool {
            let copies = self.copies.load(Ordering::Relaxed);
            self.announced.lock().unwrap().push((done.value, copies));
            true
        }
    }

    const DONE: Announce = Announce {
        address: 0x1000,
        value: 7,
    };

    const SIZES: [usize; 9] = [
        0,
        1,
        PART_BYTES - 1,
        PART_BYTES,
        2 * PART_BYTES + 5,
        STAGING_BYTES - 1,
        STAGING_BYTES,
        STAGING_BYTES + 1,
        3 * STAGING_BYTES + 77,
    ];

    #[test]
    fn fill_moves_every_byte_in_order_and_stops_at_the_source_end() {
        for len in SIZES {
            // The source as long as the range, then ending inside it (in a part, at a piece).
            for source_len in [len, len / 2, len.saturating_sub(STAGING_BYTES), len + 9] {
                let stage = MemStage::new(len);
                let read = source(source_len, 300_000);
                let moved =
                    fill_split(std::slice::from_ref(&stage), len as u64, None, &read).unwrap();
                let want = source_len.min(len);
                assert_eq!(moved, want as u64, "range {len}, source {source_len}");
                let device = stage.device.lock().unwrap().clone();
                assert!(device[..want] == expected(0, want)[..], "range {len}");
                assert!(
                    device[want..].iter().all(|&b| b == 0xAA),
                    "nothing past the source"
                );
            }
        }
    }

    #[test]
    fn a_fill_split_over_threads_moves_every_byte_and_stops_at_the_source_end() {
        for len in [0, 1, STAGING_BYTES + 1, 5 * STAGING_BYTES + 77] {
            for source_len in [len, len / 2, len.saturating_sub(STAGING_BYTES), len + 9] {
                for threads in [2, 3, 8] {
                    let first = MemStage::new(len);
                    let others: Vec<MemStage> = (1..threads)
                        .map(|_| MemStage {
                            device: first.device.clone(),
                            ..MemStage::new(0)
                        })
                        .collect();
                    let mut stages = vec![first];
                    stages.extend(others);
                    let read = source(source_len, 300_000);
                    let moved = fill_split(&stages, len as u64, Some(DONE), &read).unwrap();
                    let want = source_len.min(len);
                    assert_eq!(moved, want as u64, "{len} {source_len} {threads}");
                    let device = stages[0].device.lock().unwrap().clone();
                    assert!(device[..want] == expected(0, want)[..]);
                    assert!(device[want..].iter().all(|&b| b == 0xAA));
                    // Announced once, on the first stage, after every stage's copies.
                    let copies: u64 = stages
                        .iter()
                        .map(|s| s.copies.load(Ordering::Relaxed))
                        .sum();
                    assert_eq!(stages[0].announced.lock().unwrap().len(), 1);
                    assert!(stages[1..]
                        .iter()
                        .all(|s| s.announced.lock().unwrap().is_empty()));
                    assert!(copies >= want.div_ceil(STAGING_BYTES) as u64);
                }
            }
        }
    }

    #[test]
    fn drain_puts_every_byte_at_its_offset() {
        for len in SIZES {
            let stage = MemStage::new(len);
            stage
                .device
                .lock()
                .unwrap()
                .copy_from_slice(&expected(0, len));
            let out = Mutex::new(vec![0u8; len]);
            let write = |at: u64, b: &[u8]| -> io::Result<()> {
                let at = at as usize;
                out.lock().unwrap()[at..at + b.len()].copy_from_slice(b);
                Ok(())
            };
            assert_eq!(
                drain_through(&stage, len as u64, None, &write),
                Ok(len as u64)
            );
            assert!(out.into_inner().unwrap() == expected(0, len), "range {len}");
        }
    }

    #[test]
    fn failures_on_either_side_are_errors_not_hangs() {
        let len = 3 * STAGING_BYTES;
        let failing_read = |at: u64, _: &mut [u8]| -> io::Result<usize> {
            match at > STAGING_BYTES as u64 {
                true => Err(io::Error::other("disk")),
                false => Ok(1),
            }
        };
        let stage = MemStage::new(len);
        assert_eq!(
            fill_split(
                std::slice::from_ref(&stage),
                len as u64,
                None,
                &failing_read
            ),
            Err(HostError::Io)
        );
        let failing_write = |at: u64, _: &[u8]| -> io::Result<()> {
            match at == 0 {
                true => Ok(()),
                false => Err(io::Error::other("full")),
            }
        };
        assert_eq!(
            drain_through(&stage, len as u64, None, &failing_write),
            Err(HostError::Io)
        );
        let panicking = |_: u64, _: &mut [u8]| -> io::Result<usize> { panic!("a reader's bug") };
        assert_eq!(
            fill_split(std::slice::from_ref(&stage), len as u64, None, &panicking),
            Err(HostError::Io)
        );
        // The driver refusing a copy: the address was not the device's after all.
        let refusing = MemStage {
            refuse: true,
            ..MemStage::new(len)
        };
        let read = source(len, usize::MAX);
        assert_eq!(
            fill_split(std::slice::from_ref(&refusing), len as u64, None, &read),
            Err(HostError::BadAddress)
        );
        let write = |_: u64, _: &[u8]| -> io::Result<()> { Ok(()) };
        assert_eq!(
            drain_through(&refusing, len as u64, None, &write),
            Err(HostError::BadAddress)
        );
    }

    #[test]
    fn an_announced_copy_announces_once_after_its_last_copy_whatever_the_outcome() {
        for len in SIZES {
            let stage = MemStage::new(len);
            let read = source(len, 300_000);
            assert_eq!(
                fill_split(std::slice::from_ref(&stage), len as u64, Some(DONE), &read),
                Ok(len as u64)
            );
            let copies = stage.copies.load(Ordering::Relaxed);
            assert_eq!(
                *stage.announced.lock().unwrap(),
                [(7, copies)],
                "fill {len}"
            );
            assert!(stage.device.lock().unwrap().clone() == expected(0, len));
            let stage = MemStage::new(len);
            let write = |_: u64, _: &[u8]| -> io::Result<()> { Ok(()) };
            assert_eq!(
                drain_through(&stage, len as u64, Some(DONE), &write),
                Ok(len as u64)
            );
            let copies = stage.copies.load(Ordering::Relaxed);
            assert_eq!(
                *stage.announced.lock().unwrap(),
                [(7, copies)],
                "drain {len}"
            );
        }
        // Failures on the file's side and refused copies are announced too.
        let len = 3 * STAGING_BYTES;
        let failing_read = |at: u64, _: &mut [u8]| -> io::Result<usize> {
            match at > STAGING_BYTES as u64 {
                true => Err(io::Error::other("disk")),
                false => Ok(1),
            }
        };
        let stage = MemStage::new(len);
        assert_eq!(
            fill_split(
                std::slice::from_ref(&stage),
                len as u64,
                Some(DONE),
                &failing_read
            ),
            Err(HostError::Io)
        );
        assert_eq!(stage.announced.lock().unwrap().len(), 1);
        let failing_write = |_: u64, _: &[u8]| -> io::Result<()> { Err(io::Error::other("full")) };
        let stage = MemStage::new(len);
        assert_eq!(
            drain_through(&stage, len as u64, Some(DONE), &failing_write),
            Err(HostError::Io)
        );
        assert_eq!(stage.announced.lock().unwrap().len(), 1);
        let refusing = MemStage {
            refuse: true,
            ..MemStage::new(len)
        };
        let read = source(len, usize::MAX);
        assert_eq!(
            fill_split(
                std::slice::from_ref(&refusing),
                len as u64,
                Some(DONE),
                &read
            ),
            Err(HostError::BadAddress)
        );
        assert_eq!(refusing.announced.lock().unwrap().len(), 1);
        // A refused first copy out: announced all the same, after the wait.
        let refusing = MemStage {
            refuse: true,
            ..MemStage::new(len)
        };
        let write = |_: u64, _: &[u8]| -> io::Result<()> { Ok(()) };
        assert_eq!(
            drain_through(&refusing, len as u64, Some(DONE), &write),
            Err(HostError::BadAddress)
        );
        assert_eq!(refusing.announced.lock().unwrap().len(), 1);
    }
}
