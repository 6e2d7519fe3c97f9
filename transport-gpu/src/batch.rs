//! Small announced copies into device memory, issued in batches.
//!
//! A warp's read of a small part of a file ([`Libc::ReadToDevice`] of up to [`SMALL_BYTES`],
//! with the end announced in the warp's memory) costs the host one file read into a pinned chunk
//! and one copy. Issued one at a time, each copy (`cuMemcpyHtoDAsync` and the announce's
//! `cuStreamWriteValue32`) takes the driver a few microseconds, and the driver serves one call at
//! a time whatever the number of threads: thousands of warps' copies then wait for the driver,
//! not for the copy engine or the files. So the serving threads only read the file into a chunk
//! and queue the copy, and return (the warp waits for its announce, not for the reply). One
//! issuing thread takes the queue and issues it, up to [`BATCH`] copies per driver call
//! (`cuMemcpyBatchAsync`), then their announces in one more call (`cuStreamBatchMemOp`) on the
//! same stream, so that each announce follows its bytes; batches take turns on two streams, so
//! that the copy engines can work on two at once. It issues at once when the copy engines have at
//! most a batch per stream to do, and otherwise lets the queue grow to a full batch first: a lone
//! copy is not kept waiting, and under load the driver's cost is shared by many copies. A chunk
//! goes back to the pool once the copy engine is done with its batch (an event per batch). A
//! driver without the batch calls gets the same copies one by one.
//!
//! Failures: a chunk that could not be read is queued with no bytes, so its announce still
//! comes; a copy the driver refuses (after the range was checked) is announced all the same, so
//! no warp waits forever (its bytes are then not in place, as a failed kernel's would not be).
//!
//! [`Libc::ReadToDevice`]: ferry_libc::Libc::ReadToDevice

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use cudarc::driver::sys;
use ferry_libc::Announce;

/// The most bytes of a copy that takes the batched path: a chunk's size.
pub const SMALL_BYTES: usize = 128 << 10;

/// Chunks of pinned memory for the batched path: enough for two full batches in flight and one
/// filling.
const CHUNKS: usize = 3 * BATCH;

/// Streams the batches take turns on (so that the copy engines can work on two at once).
const STREAMS: usize = 2;

/// The most copies (and announces) one driver call issues.
pub const BATCH: usize = 128;

fn ok(r: sys::CUresult) -> bool {
    r == sys::CUresult::CUDA_SUCCESS
}

/// Writes `value` to the 32-bit word of device memory at `address` (checked by the caller)
/// after the work on `stream`: a write of the stream (after a memory barrier), or where the
/// driver refuses one, the stream waited for and the 4 bytes copied. False if both fail.
pub(crate) fn write_word(stream: sys::CUstream, address: u64, value: u32) -> bool {
    // SAFETY: the caller checked that the word is 4 aligned bytes of device memory; flags 0
    // put a memory barrier before the write.
    if ok(unsafe { sys::cuStreamWriteValue32_v2(stream, address, value, 0) }) {
        return true;
    }
    // SAFETY: as above; the source is this function's own 4 bytes, read before it returns.
    unsafe {
        ok(sys::cuStreamSynchronize(stream))
            && ok(sys::cuMemcpyHtoD_v2(
                address,
                (&value as *const u32).cast::<c_void>(),
                4,
            ))
    }
}

/// Locks `m`, taking the value of a mutex a panicking thread left.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A queued copy: `len` bytes of chunk `chunk` to the device at `dst`, then `done` announced.
struct Job {
    chunk: usize,
    dst: u64,
    len: usize,
    done: Announce,
}

/// The chunks no copy holds, the copies waiting to be issued, and whether to stop.
#[derive(Default)]
struct State {
    free: Vec<usize>,
    queue: Vec<Job>,
    stop: bool,
}

/// What the serving threads and the issuing thread share.
struct Shared {
    /// `CHUNKS * SMALL_BYTES` bytes of pinned host memory.
    slab: *mut u8,
    state: Mutex<State>,
    /// Signalled when a copy is queued or the batcher stops (the issuing thread waits on it).
    work: Condvar,
    /// Signalled when chunks come back (serving threads wait on it for a chunk).
    chunks: Condvar,
    /// Whether the driver has `cuMemcpyBatchAsync_v2` and `cuStreamBatchMemOp_v2`.
    batches: bool,
}

// SAFETY: the slab is pinned memory owned by the batcher; a chunk is written only by the thread
// that took it from `free` and read only by the copy engine until its batch's event, after which
// it goes back to `free`.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

/// The batched path's chunks, queue and issuing thread (see the module docs).
pub(crate) struct Batcher {
    shared: Arc<Shared>,
    issuer: Option<JoinHandle<()>>,
}

/// Whether the loaded driver exports `name` (a NUL-terminated symbol).
fn driver_has(name: &[u8]) -> bool {
    // SAFETY: only looks the symbol up; it is not called through this pointer.
    unsafe { sys::culib().get::<unsafe extern "C" fn()>(name).is_ok() }
}

/// A driver context handle that may cross to the issuing thread.
struct Context(sys::CUcontext);
// SAFETY: a context handle is usable from any thread that makes it current.
unsafe impl Send for Context {}

impl Batcher {
    /// A batcher on `context` (current on this thread), or `None` if the driver refuses its
    /// memory or stream, or no thread can be started.
    pub(crate) fn new(context: sys::CUcontext) -> Option<Batcher> {
        let mut slab = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and a non-zero size.
        if !ok(unsafe {
            sys::cuMemHostAlloc(
                &mut slab,
                CHUNKS * SMALL_BYTES,
                sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        }) {
            return None;
        }
        let mut streams = [std::ptr::null_mut(); STREAMS];
        for i in 0..STREAMS {
            // SAFETY: a valid out-pointer; 1 is CU_STREAM_NON_BLOCKING.
            if !ok(unsafe { sys::cuStreamCreate(&mut streams[i], 1) }) {
                // SAFETY: made just above, unused.
                unsafe {
                    for s in &streams[..i] {
                        sys::cuStreamDestroy_v2(*s);
                    }
                    sys::cuMemFreeHost(slab);
                }
                return None;
            }
        }
        let shared = Arc::new(Shared {
            slab: slab.cast(),
            state: Mutex::new(State {
                free: (0..CHUNKS).rev().collect(),
                ..State::default()
            }),
            work: Condvar::new(),
            chunks: Condvar::new(),
            batches: driver_has(b"cuMemcpyBatchAsync_v2\0")
                && driver_has(b"cuStreamBatchMemOp_v2\0"),
        });
        let issuer = Issuer {
            shared: shared.clone(),
            streams,
            next: 0,
            in_flight: VecDeque::new(),
            spare: Vec::new(),
        };
        let context = Context(context);
        let started = std::thread::Builder::new()
            .name("ferry-copies".into())
            .spawn(move || {
                let (context, mut issuer) = (context, issuer);
                // SAFETY: the program's context, alive until the batcher (which joins this
                // thread) is dropped.
                unsafe { sys::cuCtxSetCurrent(context.0) };
                issuer.run();
            });
        match started {
            Ok(handle) => Some(Batcher {
                shared,
                issuer: Some(handle),
            }),
            Err(_) => {
                // SAFETY: made above and never used.
                unsafe {
                    for s in streams {
                        sys::cuStreamDestroy_v2(s);
                    }
                    sys::cuMemFreeHost(slab);
                }
                None
            }
        }
    }

    /// A free chunk (its index and its bytes), waiting for the copy engine to give one back if
    /// every chunk is taken.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn chunk(&self) -> (usize, &mut [u8]) {
        let mut state = lock(&self.shared.state);
        let c = loop {
            match state.free.pop() {
                Some(c) => break c,
                None => {
                    state = self
                        .shared
                        .chunks
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner())
                }
            }
        };
        // SAFETY: chunk `c` lies in the slab, and taking it from `free` makes this thread its
        // only user until it queues it (see the `Sync` impl).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(self.shared.slab.add(c * SMALL_BYTES), SMALL_BYTES)
        };
        (c, bytes)
    }

    /// Queues `len` bytes of `chunk` for the device at `dst` (0 bytes: the announce alone),
    /// then `done`'s announce.
    pub(crate) fn submit(&self, chunk: usize, dst: u64, len: usize, done: Announce) {
        lock(&self.shared.state).queue.push(Job {
            chunk,
            dst,
            len,
            done,
        });
        self.shared.work.notify_one();
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_one();
        if let Some(issuer) = self.issuer.take() {
            let _ = issuer.join();
        }
        // SAFETY: the issuing thread has ended, its stream synchronised: no copy reads the slab.
        unsafe { sys::cuMemFreeHost(self.shared.slab.cast()) };
    }
}

/// The issuing thread: its streams (the next batch's first), the batches in flight, oldest
/// first (each with its end event and its chunks), and the events no batch uses.
struct Issuer {
    shared: Arc<Shared>,
    streams: [sys::CUstream; STREAMS],
    next: usize,
    in_flight: VecDeque<(sys::CUevent, Vec<usize>)>,
    spare: Vec<sys::CUevent>,
}

// SAFETY: the handles are driver handles used only by the issuing thread once it starts.
unsafe impl Send for Issuer {}

impl Issuer {
    /// Issues what is queued until the batcher stops (and every queued copy is issued), then
    /// waits for the copies and releases the stream and events.
    fn run(&mut self) {
        let shared = self.shared.clone();
        loop {
            let back = self.reclaim();
            let mut state = lock(&shared.state);
            if !back.is_empty() {
                state.free.extend(back);
                shared.chunks.notify_all();
            }
            // Issue at once while the copy engines have at most a batch per stream to do; else
            // let the queue grow to a batch.
            let due =
                state.queue.len() >= BATCH || (!state.queue.is_empty() && self.in_flight.len() < 2);
            if due {
                let jobs = std::mem::take(&mut state.queue);
                drop(state);
                for group in jobs.chunks(BATCH) {
                    self.issue(group);
                }
                continue;
            }
            if state.stop && state.queue.is_empty() {
                break;
            }
            if self.in_flight.is_empty() {
                // Nothing to give back and nothing due: wait for a copy (or the stop).
                drop(shared.work.wait(state).unwrap_or_else(|e| e.into_inner()));
            } else if self.in_flight.len() <= STREAMS {
                // A copy queued now is due at once: wait for one, looking at the batch in
                // flight again shortly.
                let short = std::time::Duration::from_micros(20);
                drop(shared.work.wait_timeout(state, short));
            } else if let Some(&(oldest, _)) = self.in_flight.front() {
                // Batches in flight and nothing due until the oldest ends (the next batch keeps
                // the copy engine busy meanwhile): wait for it in the driver rather than asking
                // the driver over and over, which would keep the serving threads' calls waiting.
                drop(state);
                // SAFETY: an event of this issuer, recorded on its stream.
                unsafe { sys::cuEventSynchronize(oldest) };
            }
        }
        // SAFETY: the issuer's handles, released once, after the stream has nothing left to do.
        unsafe {
            for &s in &self.streams {
                sys::cuStreamSynchronize(s);
            }
            for (e, _) in self.in_flight.drain(..) {
                sys::cuEventDestroy_v2(e);
            }
            for e in self.spare.drain(..) {
                sys::cuEventDestroy_v2(e);
            }
            for &s in &self.streams {
                sys::cuStreamDestroy_v2(s);
            }
        }
    }

    /// Issues `group` (at most `BATCH` jobs): the copies, then the announces, then an event
    /// that gives the chunks back when it is reached.
    fn issue(&mut self, group: &[Job]) {
        let (stream, shared) = (self.streams[self.next], &*self.shared);
        self.next = (self.next + 1) % STREAMS;
        let copies: Vec<&Job> = group.iter().filter(|j| j.len > 0).collect();
        let src = |j: &Job| shared.slab as u64 + (j.chunk * SMALL_BYTES) as u64;
        let mut batched = false;
        if shared.batches && copies.len() > 1 {
            let mut dsts: Vec<u64> = copies.iter().map(|j| j.dst).collect();
            let mut srcs: Vec<u64> = copies.iter().map(|j| src(j)).collect();
            let mut sizes: Vec<usize> = copies.iter().map(|j| j.len).collect();
            // SAFETY: a zeroed value is valid for this plain C struct; the order is set below.
            let mut attr: sys::CUmemcpyAttributes = unsafe { std::mem::zeroed() };
            // The chunks are read when the copies run, in stream order.
            attr.srcAccessOrder = sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
            let mut first = 0usize;
            // SAFETY: three arrays of `copies.len()` entries; each destination range was checked
            // to lie in device memory, each source is a chunk of pinned memory that nothing
            // writes until this batch's event; one attribute applies from copy 0 on.
            batched = ok(unsafe {
                sys::cuMemcpyBatchAsync_v2(
                    dsts.as_mut_ptr(),
                    srcs.as_mut_ptr(),
                    sizes.as_mut_ptr(),
                    copies.len(),
                    &mut attr,
                    &mut first,
                    1,
                    stream,
                )
            });
        }
        if !batched {
            for j in &copies {
                // SAFETY: as above, one copy at a time. A refused copy is still announced.
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        j.dst,
                        src(j) as usize as *const c_void,
                        j.len,
                        stream,
                    )
                };
            }
        }
        let mut announced = false;
        if shared.batches && group.len() > 1 {
            let mut ops: Vec<sys::CUstreamBatchMemOpParams> = group
                .iter()
                .map(|j| {
                    // SAFETY: a zeroed value is valid for this plain C union; the write's
                    // fields are set below (flags 0: after a memory barrier).
                    let mut op: sys::CUstreamBatchMemOpParams = unsafe { std::mem::zeroed() };
                    op.writeValue.operation =
                        sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32;
                    op.writeValue.address = j.done.address;
                    op.writeValue.__bindgen_anon_1.value = j.done.value;
                    op
                })
                .collect();
            // SAFETY: `ops` holds `group.len()` writes of words checked to be device memory.
            announced = ok(unsafe {
                sys::cuStreamBatchMemOp_v2(stream, ops.len() as u32, ops.as_mut_ptr(), 0)
            });
        }
        if !announced {
            for j in group {
                // The word was checked to be 4 aligned bytes of device memory; the write
                // follows the copies above on this stream. Nothing more can be done if the
                // driver refuses even the plain copy of it.
                write_word(stream, j.done.address, j.done.value);
            }
        }
        let chunks: Vec<usize> = group.iter().map(|j| j.chunk).collect();
        let event = self.spare.pop().or_else(|| {
            let mut e = std::ptr::null_mut();
            // SAFETY: a valid out-pointer; 2 is CU_EVENT_DISABLE_TIMING.
            ok(unsafe { sys::cuEventCreate(&mut e, 2) }).then_some(e)
        });
        // SAFETY: the event (if made) is the issuer's, recorded on its stream.
        match event.filter(|&e| ok(unsafe { sys::cuEventRecord(e, stream) })) {
            Some(e) => self.in_flight.push_back((e, chunks)),
            None => {
                // No event to wait on later: wait now, then the chunks are free.
                // SAFETY: one of the issuer's streams.
                unsafe { sys::cuStreamSynchronize(stream) };
                if let Some(e) = event {
                    self.spare.push(e);
                }
                lock(&shared.state).free.extend(chunks);
                shared.chunks.notify_all();
            }
        }
    }

    /// The chunks of every batch the copy engine is done with, their events kept for reuse.
    fn reclaim(&mut self) -> Vec<usize> {
        let mut back = Vec::new();
        while let Some(&(event, _)) = self.in_flight.front() {
            // SAFETY: an event of this issuer, recorded on its stream.
            if unsafe { sys::cuEventQuery(event) } == sys::CUresult::CUDA_ERROR_NOT_READY {
                break;
            }
            // Done (or failed: nothing more will come of it either way).
            if let Some((event, chunks)) = self.in_flight.pop_front() {
                self.spare.push(event);
                back.extend(chunks);
            }
        }
        back
    }
}
