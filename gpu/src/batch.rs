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
//! The batcher asks the driver through [`Engine`], so that its tests run it against a model of
//! the copy engine that runs the work late and in pieces.
//!
//! [`Libc::ReadToDevice`]: ferry_libc::Libc::ReadToDevice

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use cudarc::driver::sys;
use ferry_libc_host::Announce;

/// The most bytes of a copy that takes the batched path: a chunk's size.
pub const SMALL_BYTES: usize = 128 << 10;

/// Chunks of pinned memory for the batched path: enough for two full batches in flight and one
/// filling.
const CHUNKS: usize = 3 * BATCH;

/// Streams the batches take turns on (so that the copy engines can work on two at once).
const STREAMS: usize = 2;

/// The most copies (and announces) one driver call issues.
pub const BATCH: usize = 128;

/// Whether a driver call succeeded.
pub(crate) fn ok(r: sys::CUresult) -> bool {
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
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the batcher asks of the driver: the CUDA driver ([`CudaEngine`]) or a model.
pub(crate) trait Engine: Send + Sync + 'static {
    /// A stream: the work started on one happens in order.
    type Stream: Copy + Send;
    /// An event: a point of a stream, reached once the work started before it is done.
    type Event: Copy + Send;
    /// Makes the engine usable from the calling thread (the issuing thread, once).
    fn enter(&self);
    /// `bytes` of host memory the engine copies from, or `None`.
    fn alloc(&self, bytes: usize) -> Option<*mut u8>;
    /// Frees what `alloc` gave, once nothing reads it.
    fn free(&self, memory: *mut u8);
    /// A new stream, or `None`.
    fn stream(&self) -> Option<Self::Stream>;
    /// Waits until the work started on `stream` is done.
    fn finish(&self, stream: Self::Stream);
    /// Releases a finished stream.
    fn drop_stream(&self, stream: Self::Stream);
    /// Starts each copy `(to, from, len)` (device address, host memory, bytes) on `stream`, as
    /// few calls as the engine can; a copy it refuses is left out.
    fn copy(&self, stream: Self::Stream, copies: &[(u64, *const u8, usize)]);
    /// Writes each `(address, value)` on `stream` after the work started on it so far; a write
    /// the stream refuses is made after waiting for the stream.
    fn announce(&self, stream: Self::Stream, words: &[(u64, u32)]);
    /// A new event, or `None`.
    fn event(&self) -> Option<Self::Event>;
    /// Releases an event nothing waits on.
    fn drop_event(&self, event: Self::Event);
    /// Marks the point of `stream` reached once the work started on it so far is done; false if
    /// refused.
    fn record(&self, event: Self::Event, stream: Self::Stream) -> bool;
    /// Whether `event` is reached (true as well if it failed: nothing more will come of it).
    fn reached(&self, event: Self::Event) -> bool;
    /// Waits until `event` is reached (or failed).
    fn wait(&self, event: Self::Event);
}

/// The CUDA driver as the batcher's [`Engine`], on one context.
pub(crate) struct CudaEngine {
    context: sys::CUcontext,
    /// Whether the driver has `cuMemcpyBatchAsync_v2` and `cuStreamBatchMemOp_v2`.
    batches: bool,
}

// SAFETY: a context handle is usable from any thread that makes it current (`enter`); the other
// handles the engine hands out are driver handles usable from any thread with it current.
unsafe impl Send for CudaEngine {}
// SAFETY: as above.
unsafe impl Sync for CudaEngine {}

/// Whether the loaded driver exports `name` (a NUL-terminated symbol).
fn driver_has(name: &[u8]) -> bool {
    // SAFETY: only looks the symbol up; it is not called through this pointer.
    unsafe { sys::culib().get::<unsafe extern "C" fn()>(name).is_ok() }
}

impl CudaEngine {
    /// The driver on `context`.
    pub(crate) fn new(context: sys::CUcontext) -> CudaEngine {
        CudaEngine {
            context,
            batches: driver_has(b"cuMemcpyBatchAsync_v2\0")
                && driver_has(b"cuStreamBatchMemOp_v2\0"),
        }
    }
}

/// A stream handle that may cross threads.
#[derive(Clone, Copy)]
pub(crate) struct CudaStream(sys::CUstream);
// SAFETY: a stream handle is usable from any thread with its context current.
unsafe impl Send for CudaStream {}

/// An event handle that may cross threads.
#[derive(Clone, Copy)]
pub(crate) struct CudaEvent(sys::CUevent);
// SAFETY: an event handle is usable from any thread with its context current.
unsafe impl Send for CudaEvent {}

impl Engine for CudaEngine {
    type Stream = CudaStream;
    type Event = CudaEvent;

    fn enter(&self) {
        // SAFETY: the program's context, alive while the batcher that holds this engine is.
        unsafe { sys::cuCtxSetCurrent(self.context) };
    }

    fn alloc(&self, bytes: usize) -> Option<*mut u8> {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer and a non-zero size.
        ok(unsafe { sys::cuMemHostAlloc(&mut p, bytes, sys::CU_MEMHOSTALLOC_PORTABLE) })
            .then_some(p.cast())
    }

    fn free(&self, memory: *mut u8) {
        // SAFETY: pinned memory `alloc` gave, no longer read by any copy.
        unsafe { sys::cuMemFreeHost(memory.cast()) };
    }

    fn stream(&self) -> Option<CudaStream> {
        let mut s = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; 1 is CU_STREAM_NON_BLOCKING.
        ok(unsafe { sys::cuStreamCreate(&mut s, 1) }).then_some(CudaStream(s))
    }

    fn finish(&self, stream: CudaStream) {
        // SAFETY: a stream this engine made.
        unsafe { sys::cuStreamSynchronize(stream.0) };
    }

    fn drop_stream(&self, stream: CudaStream) {
        // SAFETY: a finished stream this engine made, released once.
        unsafe { sys::cuStreamDestroy_v2(stream.0) };
    }

    fn copy(&self, stream: CudaStream, copies: &[(u64, *const u8, usize)]) {
        if self.batches && copies.len() > 1 {
            let mut dsts: Vec<u64> = copies.iter().map(|c| c.0).collect();
            let mut srcs: Vec<u64> = copies.iter().map(|c| c.1 as u64).collect();
            let mut sizes: Vec<usize> = copies.iter().map(|c| c.2).collect();
            // SAFETY: a zeroed value is valid for this plain C struct; the order is set below.
            let mut attr: sys::CUmemcpyAttributes = unsafe { std::mem::zeroed() };
            // The sources are read when the copies run, in stream order.
            attr.srcAccessOrder = sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
            let mut first = 0usize;
            // SAFETY: three arrays of `copies.len()` entries; each destination range was checked
            // to lie in device memory, each source is pinned memory that nothing writes until
            // the batch's event; one attribute applies from copy 0 on.
            let batched = ok(unsafe {
                sys::cuMemcpyBatchAsync_v2(
                    dsts.as_mut_ptr(),
                    srcs.as_mut_ptr(),
                    sizes.as_mut_ptr(),
                    copies.len(),
                    &mut attr,
                    &mut first,
                    1,
                    stream.0,
                )
            });
            if batched {
                return;
            }
        }
        for &(to, from, len) in copies {
            // SAFETY: as above, one copy at a time.
            unsafe { sys::cuMemcpyHtoDAsync_v2(to, from.cast::<c_void>(), len, stream.0) };
        }
    }

    fn announce(&self, stream: CudaStream, words: &[(u64, u32)]) {
        if self.batches && words.len() > 1 {
            let mut ops: Vec<sys::CUstreamBatchMemOpParams> = words
                .iter()
                .map(|&(address, value)| {
                    // SAFETY: a zeroed value is valid for this plain C union; the write's
                    // fields are set below (flags 0: after a memory barrier).
                    let mut op: sys::CUstreamBatchMemOpParams = unsafe { std::mem::zeroed() };
                    op.writeValue.operation =
                        sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32;
                    op.writeValue.address = address;
                    op.writeValue.__bindgen_anon_1.value = value;
                    op
                })
                .collect();
            // SAFETY: `ops` holds `words.len()` writes of words checked to be device memory.
            let written = ok(unsafe {
                sys::cuStreamBatchMemOp_v2(stream.0, ops.len() as u32, ops.as_mut_ptr(), 0)
            });
            if written {
                return;
            }
        }
        for &(address, value) in words {
            // Nothing more can be done if the driver refuses even the plain copy of the word.
            write_word(stream.0, address, value);
        }
    }

    fn event(&self) -> Option<CudaEvent> {
        let mut e = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; 2 is CU_EVENT_DISABLE_TIMING.
        ok(unsafe { sys::cuEventCreate(&mut e, 2) }).then_some(CudaEvent(e))
    }

    fn drop_event(&self, event: CudaEvent) {
        // SAFETY: an event this engine made, nothing waiting on it, released once.
        unsafe { sys::cuEventDestroy_v2(event.0) };
    }

    fn record(&self, event: CudaEvent, stream: CudaStream) -> bool {
        // SAFETY: an event and a stream this engine made.
        ok(unsafe { sys::cuEventRecord(event.0, stream.0) })
    }

    fn reached(&self, event: CudaEvent) -> bool {
        // SAFETY: an event this engine made.
        unsafe { sys::cuEventQuery(event.0) != sys::CUresult::CUDA_ERROR_NOT_READY }
    }

    fn wait(&self, event: CudaEvent) {
        // SAFETY: an event this engine made.
        unsafe { sys::cuEventSynchronize(event.0) };
    }
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
struct Shared<E: Engine> {
    engine: E,
    /// `CHUNKS * SMALL_BYTES` bytes of host memory the engine copies from.
    slab: *mut u8,
    state: Mutex<State>,
    /// Signalled when a copy is queued or the batcher stops (the issuing thread waits on it).
    work: Condvar,
    /// Signalled when chunks come back (serving threads wait on it for a chunk).
    chunks: Condvar,
}

// SAFETY: the slab is memory owned by the batcher; a chunk is written only by the thread that
// took it from `free` and read only by the copy engine until its batch's event, after which it
// goes back to `free`. The engine is `Send + Sync`.
unsafe impl<E: Engine> Send for Shared<E> {}
// SAFETY: as above.
unsafe impl<E: Engine> Sync for Shared<E> {}

/// The batched path's chunks, queue and issuing thread (see the module docs).
pub(crate) struct Batcher<E: Engine = CudaEngine> {
    shared: Arc<Shared<E>>,
    issuer: Option<JoinHandle<()>>,
}

impl<E: Engine> Batcher<E> {
    /// A batcher on `engine` (usable from this thread), or `None` if the engine refuses its
    /// memory or streams, or no thread can be started.
    pub(crate) fn new(engine: E) -> Option<Batcher<E>> {
        let slab = engine.alloc(CHUNKS * SMALL_BYTES)?;
        let mut streams = Vec::with_capacity(STREAMS);
        for _ in 0..STREAMS {
            match engine.stream() {
                Some(s) => streams.push(s),
                None => {
                    for s in streams {
                        engine.drop_stream(s);
                    }
                    engine.free(slab);
                    return None;
                }
            }
        }
        let shared = Arc::new(Shared {
            engine,
            slab,
            state: Mutex::new(State {
                free: (0..CHUNKS).rev().collect(),
                ..State::default()
            }),
            work: Condvar::new(),
            chunks: Condvar::new(),
        });
        let issuer = Issuer {
            shared: shared.clone(),
            streams: streams.clone(),
            next: 0,
            in_flight: VecDeque::new(),
            spare: Vec::new(),
        };
        let started = std::thread::Builder::new()
            .name("ferry-copies".into())
            .spawn(move || {
                let mut issuer = issuer;
                issuer.shared.engine.enter();
                issuer.run();
            });
        match started {
            Ok(handle) => Some(Batcher {
                shared,
                issuer: Some(handle),
            }),
            Err(_) => {
                for s in streams {
                    shared.engine.drop_stream(s);
                }
                shared.engine.free(slab);
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

impl<E: Engine> Drop for Batcher<E> {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_one();
        if let Some(issuer) = self.issuer.take() {
            let _ = issuer.join();
        }
        // The issuing thread has ended, its streams finished: no copy reads the slab.
        self.shared.engine.free(self.shared.slab);
    }
}

/// The issuing thread: its streams (the next batch's first), the batches in flight, oldest
/// first (each with its end event and its chunks), and the events no batch uses.
struct Issuer<E: Engine> {
    shared: Arc<Shared<E>>,
    streams: Vec<E::Stream>,
    next: usize,
    in_flight: VecDeque<(E::Event, Vec<usize>)>,
    spare: Vec<E::Event>,
}

impl<E: Engine> Issuer<E> {
    /// Issues what is queued until the batcher stops (and every queued copy is issued), then
    /// waits for the copies and releases the streams and events.
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
            let due = state.queue.len() >= BATCH
                || (!state.queue.is_empty() && self.in_flight.len() <= STREAMS);
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
                // A copy queued now is due at once: wait for one, looking at the batches in
                // flight again shortly.
                let short = std::time::Duration::from_micros(20);
                drop(shared.work.wait_timeout(state, short));
            } else if let Some(&(oldest, _)) = self.in_flight.front() {
                // Batches in flight and nothing due until the oldest ends (the next batch keeps
                // the copy engine busy meanwhile): wait for it in the driver rather than asking
                // the driver over and over, which would keep the serving threads' calls waiting.
                drop(state);
                shared.engine.wait(oldest);
            }
        }
        let engine = &shared.engine;
        for &s in &self.streams {
            engine.finish(s);
        }
        for (e, _) in self.in_flight.drain(..) {
            engine.drop_event(e);
        }
        for e in self.spare.drain(..) {
            engine.drop_event(e);
        }
        for &s in &self.streams {
            engine.drop_stream(s);
        }
    }

    /// Issues `group` (at most `BATCH` jobs): the copies, then the announces, then an event
    /// that gives the chunks back when it is reached.
    fn issue(&mut self, group: &[Job]) {
        let stream = self.streams[self.next];
        self.next = (self.next + 1) % self.streams.len();
        let shared = &*self.shared;
        let engine = &shared.engine;
        let copies: Vec<(u64, *const u8, usize)> = group
            .iter()
            .filter(|j| j.len > 0)
            .map(|j| {
                // SAFETY: a chunk's start lies in the slab (`chunk` < CHUNKS).
                let from = unsafe { shared.slab.add(j.chunk * SMALL_BYTES) };
                (j.dst, from.cast_const(), j.len)
            })
            .collect();
        engine.copy(stream, &copies);
        let words: Vec<(u64, u32)> = group
            .iter()
            .map(|j| (j.done.address, j.done.value))
            .collect();
        engine.announce(stream, &words);
        let chunks: Vec<usize> = group.iter().map(|j| j.chunk).collect();
        let event = self.spare.pop().or_else(|| engine.event());
        match event.filter(|&e| engine.record(e, stream)) {
            Some(e) => self.in_flight.push_back((e, chunks)),
            None => {
                // No event to wait on later: wait now, then the chunks are free.
                engine.finish(stream);
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
            if !self.shared.engine.reached(event) {
                break;
            }
            if let Some((event, chunks)) = self.in_flight.pop_front() {
                self.spare.push(event);
                back.extend(chunks);
            }
        }
        back
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// Work the model was given and has not done yet, in order.
    enum Op {
        Copy { to: u64, from: usize, len: usize },
        Word { address: u64, value: u32 },
        Mark(u64),
    }

    /// What the model did: device memory (by address), every announce in the order made, the
    /// order of the copies and announces, and the events reached.
    #[derive(Default)]
    struct Done {
        device: HashMap<u64, Vec<u8>>,
        words: Vec<(u64, u32)>,
        order: Vec<(bool, u64)>,
        reached: HashSet<u64>,
    }

    /// A copy engine that does its work late: only when asked whether an event is reached (a
    /// few steps at a time) or told to wait. A chunk the batcher reused before its copy ran
    /// would show in the bytes the copy finds.
    #[derive(Default)]
    struct Model {
        ops: Mutex<VecDeque<Op>>,
        done: Mutex<Done>,
        next_event: Mutex<u64>,
        slabs: Mutex<Vec<Vec<u8>>>,
    }

    impl Model {
        /// Does up to `steps` operations; whether `event` is reached after them.
        fn run(&self, steps: usize, event: Option<u64>) -> bool {
            let mut ops = lock(&self.ops);
            let mut done = lock(&self.done);
            for _ in 0..steps {
                match ops.pop_front() {
                    None => break,
                    Some(Op::Copy { to, from, len }) => {
                        // SAFETY: `from` is a chunk of a slab this model gave, alive until the
                        // batcher is dropped (after its streams are finished).
                        let bytes = unsafe { std::slice::from_raw_parts(from as *const u8, len) };
                        done.device.insert(to, bytes.to_vec());
                        done.order.push((false, to));
                    }
                    Some(Op::Word { address, value }) => {
                        done.words.push((address, value));
                        done.order.push((true, address));
                    }
                    Some(Op::Mark(e)) => {
                        done.reached.insert(e);
                    }
                }
            }
            event.is_none_or(|e| done.reached.contains(&e))
        }
    }

    /// The model behind an `Arc`, as the batcher's engine.
    #[derive(Clone, Default)]
    struct Engine(Arc<Model>);

    impl super::Engine for Engine {
        type Stream = u32;
        type Event = u64;
        fn enter(&self) {}
        fn alloc(&self, bytes: usize) -> Option<*mut u8> {
            let mut slab = vec![0u8; bytes];
            let p = slab.as_mut_ptr();
            lock(&self.0.slabs).push(slab);
            Some(p)
        }
        fn free(&self, _: *mut u8) {}
        fn stream(&self) -> Option<u32> {
            Some(0)
        }
        fn finish(&self, _: u32) {
            self.0.run(usize::MAX, None);
        }
        fn drop_stream(&self, _: u32) {}
        fn copy(&self, _: u32, copies: &[(u64, *const u8, usize)]) {
            let mut ops = lock(&self.0.ops);
            for &(to, from, len) in copies {
                ops.push_back(Op::Copy {
                    to,
                    from: from as usize,
                    len,
                });
            }
        }
        fn announce(&self, _: u32, words: &[(u64, u32)]) {
            let mut ops = lock(&self.0.ops);
            for &(address, value) in words {
                ops.push_back(Op::Word { address, value });
            }
        }
        fn event(&self) -> Option<u64> {
            let mut next = lock(&self.0.next_event);
            *next += 1;
            Some(*next)
        }
        fn drop_event(&self, _: u64) {}
        fn record(&self, event: u64, _: u32) -> bool {
            lock(&self.0.done).reached.remove(&event);
            lock(&self.0.ops).push_back(Op::Mark(event));
            true
        }
        fn reached(&self, event: u64) -> bool {
            self.0.run(3, Some(event))
        }
        fn wait(&self, event: u64) {
            while !self.0.run(1, Some(event)) {}
        }
    }

    /// Job `id`'s bytes.
    fn pattern(id: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (id as usize * 31 + i * 7) as u8).collect()
    }

    const LEN: usize = 3000;

    #[test]
    fn every_copy_lands_whole_and_is_announced_once_after_its_bytes() {
        let model = Engine::default();
        let batcher = Batcher::new(model.clone()).unwrap();
        let (threads, each) = (6u64, 400u64);
        std::thread::scope(|s| {
            for t in 0..threads {
                let batcher = &batcher;
                s.spawn(move || {
                    for k in 0..each {
                        let id = t * each + k;
                        // Every seventh call copies nothing (a failed read): announced all the same.
                        let len = if id % 7 == 0 { 0 } else { LEN };
                        let (chunk, buf) = batcher.chunk();
                        buf[..len].copy_from_slice(&pattern(id, len));
                        let done = Announce {
                            address: id,
                            value: id as u32 + 1,
                        };
                        batcher.submit(chunk, id * LEN as u64, len, done);
                    }
                });
            }
        });
        // Dropping the batcher issues what is queued and finishes the streams.
        drop(batcher);
        let done = lock(&model.0.done);
        let total = threads * each;
        assert_eq!(done.words.len() as u64, total, "one announce per call");
        let announced: HashMap<u64, u32> = done.words.iter().copied().collect();
        for id in 0..total {
            assert_eq!(announced.get(&id), Some(&(id as u32 + 1)), "call {id}");
            if id % 7 != 0 {
                // The bytes the copy found are the call's: its chunk was not reused early.
                assert_eq!(done.device.get(&(id * LEN as u64)), Some(&pattern(id, LEN)));
            }
        }
        // Each copy before its call's announce.
        let mut copied = HashSet::new();
        for &(word, at) in &done.order {
            match word {
                false => {
                    copied.insert(at / LEN as u64);
                }
                true => assert!(at % 7 == 0 || copied.contains(&at), "announce {at} early"),
            }
        }
    }

    #[test]
    fn calls_queued_when_the_batcher_stops_are_issued_and_announced() {
        for calls in [0u64, 1, 5, BATCH as u64 + 3] {
            let model = Engine::default();
            let batcher = Batcher::new(model.clone()).unwrap();
            for id in 0..calls {
                let (chunk, buf) = batcher.chunk();
                buf[..8].copy_from_slice(&id.to_le_bytes());
                let done = Announce {
                    address: id,
                    value: 1,
                };
                batcher.submit(chunk, id * 8, 8, done);
            }
            drop(batcher);
            let done = lock(&model.0.done);
            assert_eq!(done.words.len() as u64, calls);
            assert_eq!(done.device.len() as u64, calls);
        }
    }
}
