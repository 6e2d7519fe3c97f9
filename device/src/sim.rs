//! A simulated warp: CPU threads acting as the lanes of one warp, so device code (the same
//! [`host`](crate::host) calls a kernel makes, or a user's own derived service) runs on
//! the host against a real server, divergent branches included.
//!
//! Each lane is one thread holding a [`SimWarp`], which implements [`ferry_rpc::Lanes`] as an
//! NVIDIA warp does under independent thread scheduling (`shfl.sync`, `vote.sync.ballot`,
//! `bar.warp.sync`): a ballot, broadcast or sync over `mask` is a meeting of exactly the lanes of
//! `mask`; it returns in none of them before all have reached it, and hands all the same values.
//! Meetings over disjoint masks proceed at once, as the two sides of a branch do on a GPU.
//!
//! # Divergence
//!
//! A lane's *active mask* is the set of lanes executing the same branch of the program with it:
//! every lane of the warp at first. Device code written against `Lanes` reads it where a kernel
//! reads `activemask`, so a call made inside a branch is made by that branch's lanes only. Branches
//! are scopes on the lane, entered by every lane of the active mask together (a convergence
//! point, where the lanes learn who goes where) and left by each lane on its own:
//!
//! - [`SimWarp::diverge`]`(group, body)`: the lanes split by `group` (an `if`/`else`, a `match`);
//!   each runs `body` with the lanes of its group active;
//! - [`SimWarp::when`]`(cond, body)`: an `if` without `else`: the lanes where `cond` holds run
//!   `body` together; the others go straight on;
//! - [`SimWarp::repeat`]`(body)`: a loop that lanes leave at different iterations: `body` runs with
//!   the lanes still looping active, and a lane leaves when its `body` returns `false`.
//!
//! A lane that leaves a branch is back in the outer active mask; its next meeting over that mask
//! waits for the other lanes to leave theirs: the warp reconverges there, as after a branch on a
//! GPU.
//!
//! Misuse that a GPU punishes with a hang or a wrong value fails loudly here: a meeting over a
//! mask that names an inactive lane (or leaves out the caller) panics at once; lanes of one mask
//! that reach different operations (a ballot against a broadcast) panic; a meeting that a lane of
//! its mask can no longer join (its thread ended or panicked) panics in the waiting lanes; and a
//! meeting still incomplete after a minute panics, naming the missing lanes.
//!
//! # Example
//!
//! A server echoes each slot's word plus one; four lanes split by parity, and each half makes its
//! own call (its own opcode and arguments) while the other half makes its own:
//!
//! ```
//! use ferry_rpc::{HeapRegion, Lanes};
//! use ferry_device::sim::{SimWarp, Yield};
//!
//! let region: HeapRegion = HeapRegion::new(32, 4).unwrap();
//! let replies = std::thread::scope(|s| {
//!     s.spawn(|| {
//!         let server = region.server();
//!         for _ in 0..2 {
//!             let mut port = server.open(()).unwrap();
//!             let (opcode, mask) = (port.opcode(), port.lane_mask());
//!             assert_eq!(mask, if opcode == 10 { 0b0101 } else { 0b1010 });
//!             port.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
//!         }
//!     });
//!     // One thread per lane, as a kernel's warp; `lane` moves into the lane's client.
//!     SimWarp::run(4, |lane| {
//!         let client = region.client_with(lane, Yield).unwrap();
//!         let me = client.lanes().lane_id();
//!         let odd = me % 2;
//!         client.lanes().diverge(odd, || {
//!             assert_eq!(client.lanes().active_mask(), if odd == 1 { 0b1010 } else { 0b0101 });
//!             let mut port = client.open(10 + odd).unwrap();
//!             let mut reply = 0;
//!             port.send_and_recv(|slot, _| slot.words[0] = 100 * me as u64, |slot, _| {
//!                 reply = slot.words[0]
//!             })
//!             .unwrap();
//!             reply
//!         })
//!     })
//! });
//! assert_eq!(replies, [1, 101, 201, 301]);
//! ```

use core::cell::Cell;
use std::boxed::Box;
use std::format;
use std::string::{String, ToString};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use std::vec::Vec;

/// How long a lane waits at a meeting before it gives up and panics, naming who is missing.
const MEETING_LIMIT: Duration = Duration::from_secs(60);

/// One lane of a simulated warp, to be moved into the thread that runs it.
///
/// `Send` but not `Sync`: a lane is one thread; the active mask it carries is that thread's view.
#[derive(Debug)]
pub struct SimWarp {
    shared: Arc<Shared>,
    lane: u32,
    /// The lanes executing the same branch as this one, bit `i` for lane `i`.
    active: Cell<u64>,
}

/// What the lanes of one warp share: the meetings in progress.
#[derive(Debug)]
struct Shared {
    size: u32,
    meetings: Mutex<Meetings>,
    /// Signalled whenever a meeting fills, empties, or a lane exits.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Meetings {
    open: Vec<Meeting>,
    /// Lanes whose `SimWarp` was dropped (their thread ended or unwound): they meet no more.
    exited: u64,
}

/// One warp-wide operation in progress over `mask`: lanes arrive, leave their value, wait for the
/// rest, read every value and leave. A new meeting over the same mask opens only once every lane
/// has left the last one.
#[derive(Debug)]
struct Meeting {
    op: Op,
    mask: u64,
    arrived: u64,
    left: u64,
    values: [u32; 64],
}

/// Which operation a meeting is: lanes of one mask must reach the same one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Broadcast,
    Ballot,
    Sync,
    /// The convergence point of a branch, exchanging the lanes' group keys.
    Branch,
}

impl SimWarp {
    /// The `size` lanes (1 to 64) of one warp, all active, to be moved one per thread.
    pub fn lanes(size: u32) -> Vec<SimWarp> {
        assert!((1..=64).contains(&size), "a warp has 1 to 64 lanes");
        let shared = Arc::new(Shared {
            size,
            meetings: Mutex::new(Meetings::default()),
            changed: Condvar::new(),
        });
        let all = u64::MAX >> (64 - size);
        (0..size)
            .map(|lane| SimWarp {
                shared: shared.clone(),
                lane,
                active: Cell::new(all),
            })
            .collect()
    }

    /// Runs `body` on each of the `size` lanes of a new warp, one thread per lane, as a kernel runs
    /// on a warp; returns what each lane returned, in lane order. A lane's panic is re-raised here
    /// once every lane has finished (lanes waiting on it panic too, rather than hang).
    pub fn run<R: Send>(size: u32, body: impl Fn(SimWarp) -> R + Sync) -> Vec<R> {
        let body = &body;
        let results: Vec<std::thread::Result<R>> = std::thread::scope(|s| {
            let lanes: Vec<_> = SimWarp::lanes(size)
                .into_iter()
                .map(|lane| s.spawn(move || body(lane)))
                .collect();
            lanes.into_iter().map(|h| h.join()).collect()
        });
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    }

    /// A divergent branch: the lanes of the active mask (all of which must call this together,
    /// as all reach a branch) split by `group`, and each runs `body` with only the lanes that
    /// passed the same `group` active. Groups run at once; a lane returns as soon as its `body`
    /// does, back in the outer active mask.
    pub fn diverge<R>(&self, group: u32, body: impl FnOnce() -> R) -> R {
        let outer = self.active.get();
        let groups = self.meet(Op::Branch, outer, group);
        let inner = lanes_of(outer)
            .filter(|&i| groups[i as usize] == group)
            .fold(0, |m, i| m | 1 << i);
        self.active.set(inner);
        let _back = Restore(&self.active, outer);
        body()
    }

    /// An `if` without `else`: the lanes of the active mask (all of which must call this together)
    /// where `cond` holds run `body` with only themselves active; the others return `None` at once.
    pub fn when<R>(&self, cond: bool, body: impl FnOnce() -> R) -> Option<R> {
        self.diverge(cond as u32, || cond.then(body))
    }

    /// A loop that lanes leave at different iterations: the lanes of the active mask (all of
    /// which must call this together) run `body` again and again, each iteration with only the
    /// lanes still looping active; a lane leaves once its `body` returns `false`.
    pub fn repeat(&self, mut body: impl FnMut() -> bool) {
        let outer = self.active.get();
        let _back = Restore(&self.active, outer);
        loop {
            let again = body();
            // The loop's back edge is a branch among this iteration's lanes.
            let now = self.active.get();
            let votes = self.meet(Op::Branch, now, again as u32);
            if !again {
                return;
            }
            let staying = lanes_of(now)
                .filter(|&i| votes[i as usize] != 0)
                .fold(0, |m, i| m | 1 << i);
            self.active.set(staying);
        }
    }

    /// Meets the other lanes of `mask` at operation `op`, leaving `value`; returns every lane's
    /// value (those outside `mask` are zero) once all lanes of `mask` have arrived.
    fn meet(&self, op: Op, mask: u64, value: u32) -> [u32; 64] {
        let me = 1u64 << self.lane;
        let active = self.active.get();
        assert!(
            mask & me != 0,
            "lane {}: {op:?} over mask {mask:#x}, which leaves out the calling lane",
            self.lane
        );
        assert!(
            mask & !active == 0,
            "lane {}: {op:?} over mask {mask:#x} names lanes {:#x} that are not active \
             (the active mask is {active:#x}): on a GPU this hangs or reads garbage",
            self.lane,
            mask & !active
        );
        let deadline = Instant::now() + MEETING_LIMIT;
        let mut m = self.lock();
        // Join the open meeting over `mask`, or open one; wait while the last one over `mask`
        // is still being left.
        loop {
            match m.open.iter_mut().find(|g| g.mask == mask) {
                Some(g) if g.arrived == mask => {}
                Some(g) => {
                    if g.op != op {
                        let (theirs, lanes) = (g.op, g.arrived);
                        drop(m);
                        panic!(
                            "lane {}: {op:?} over mask {mask:#x} while lanes {lanes:#x} of the \
                             same mask are at a {theirs:?}: the lanes did not stay convergent",
                            self.lane
                        );
                    }
                    g.arrived |= me;
                    g.values[self.lane as usize] = value;
                    break;
                }
                None => {
                    let mut values = [0; 64];
                    values[self.lane as usize] = value;
                    m.open.push(Meeting {
                        op,
                        mask,
                        arrived: me,
                        left: 0,
                        values,
                    });
                    break;
                }
            }
            m = self.wait(m, op, mask, deadline);
        }
        // Wait for the rest of `mask`.
        loop {
            let g = m.open.iter().find(|g| g.mask == mask).expect("joined");
            if g.arrived == mask {
                break;
            }
            m = self.wait(m, op, mask, deadline);
        }
        let at = m.open.iter().position(|g| g.mask == mask).expect("joined");
        let g = &mut m.open[at];
        let values = g.values;
        g.left |= me;
        if g.left == mask {
            m.open.swap_remove(at);
        }
        drop(m);
        // Lanes waiting to arrive, or for this meeting to fill or empty.
        self.shared.changed.notify_all();
        values
    }

    /// Waits for the meetings to change; panics if a lane this meeting needs has exited, or the
    /// deadline passed.
    fn wait<'m>(
        &self,
        m: MutexGuard<'m, Meetings>,
        op: Op,
        mask: u64,
        deadline: Instant,
    ) -> MutexGuard<'m, Meetings> {
        let arrived = m
            .open
            .iter()
            .find(|g| g.mask == mask && g.arrived != mask)
            .map_or(0, |g| g.arrived);
        let exited = m.exited & mask & !arrived;
        if exited != 0 {
            drop(m);
            panic!(
                "lane {}: {op:?} over mask {mask:#x} waits for lanes {exited:#x}, which have \
                 exited (returned or panicked)",
                self.lane
            );
        }
        let now = Instant::now();
        if now >= deadline {
            drop(m);
            panic!(
                "lane {}: {op:?} over mask {mask:#x} still waits for lanes {:#x} after {:?}",
                self.lane,
                mask & !arrived,
                MEETING_LIMIT
            );
        }
        // Woken by every change; re-checked by the caller's loop.
        let (m, _) = self
            .shared
            .changed
            .wait_timeout(m, (deadline - now).min(Duration::from_millis(100)))
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        m
    }

    fn lock(&self) -> MutexGuard<'_, Meetings> {
        // No lane panics with the lock held (each drops the guard first), so the meetings are
        // consistent even if a panic elsewhere poisoned it.
        self.shared
            .meetings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for SimWarp {
    fn drop(&mut self) {
        self.lock().exited |= 1 << self.lane;
        // Lanes waiting for this one learn that it will not come.
        self.shared.changed.notify_all();
    }
}

/// Sets the active mask back to the outer one when a branch's body returns (or unwinds).
struct Restore<'a>(&'a Cell<u64>, u64);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

/// The lane indices set in `mask`, lowest first.
fn lanes_of(mask: u64) -> impl Iterator<Item = u32> {
    (0..64).filter(move |i| mask & (1 << i) != 0)
}

// SAFETY: `meet` returns to no lane of `mask` before every lane of `mask` has arrived, and hands
// each the same values, written before the meeting filled and read after, under one mutex (which
// also orders the lanes' memory accesses, as `bar.warp.sync` does). So broadcast and ballot are
// uniform over `mask`, and `sync` returns in no lane of `mask` before all have reached it. A mask
// naming a lane that is not active, which could never fill, panics instead.
unsafe impl ferry_rpc::Lanes for SimWarp {
    fn lane_size(&self) -> u32 {
        self.shared.size
    }
    fn lane_id(&self) -> u32 {
        self.lane
    }
    fn active_mask(&self) -> u64 {
        self.active.get()
    }
    fn broadcast(&self, mask: u64, value: u32) -> u32 {
        self.meet(Op::Broadcast, mask, value)[mask.trailing_zeros() as usize]
    }
    fn ballot(&self, mask: u64, predicate: bool) -> u64 {
        let votes = self.meet(Op::Ballot, mask, predicate as u32);
        lanes_of(mask)
            .filter(|&i| votes[i as usize] != 0)
            .fold(0, |m, i| m | 1 << i)
    }
    fn sync(&self, mask: u64) {
        self.meet(Op::Sync, mask, 0);
    }
}

/// The descriptor a host installs for `region`, a region in this process's heap (as
/// `ferry-gpu`'s `GpuRegion::descriptor` does for mapped memory), so simulated warps build
/// their clients from it as a kernel does.
pub fn descriptor(region: &ferry_rpc::HeapRegion) -> crate::Descriptor {
    let r = region.region();
    crate::Descriptor {
        magic: crate::descriptor::MAGIC,
        ports: r.layout().ports(),
        lanes: r.layout().lanes(),
        mailbox: ferry_rpc::MailboxKind::PerPort as u32
            | if r.layout().has_words() {
                crate::descriptor::FLAG_WORDS
            } else {
                0
            },
        region: r.client_outbox().as_ptr() as u64,
        locks: region.client_memory().as_ptr() as u64,
        bulk: r.layout().bulk_share() as u32,
        max_sleep_ns: 0,
    }
}

/// A waiting policy for simulated warps, which run many more threads than there are cores: spins
/// a little, then yields; gives up after 60 s, so a lost handoff fails a test instead of hanging it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Yield;

std::thread_local! {
    static SINCE: core::cell::Cell<Option<std::time::Instant>> = const { core::cell::Cell::new(None) };
}

impl ferry_rpc::Wait for Yield {
    fn pause(&self, polls: u32) -> Result<(), ferry_rpc::Stalled> {
        if polls == 0 {
            SINCE.with(|s| s.set(Some(std::time::Instant::now())));
        }
        if polls < 16 {
            core::hint::spin_loop();
            return Ok(());
        }
        let since = SINCE
            .with(|s| s.get())
            .unwrap_or_else(std::time::Instant::now);
        if since.elapsed() > std::time::Duration::from_secs(60) {
            return Err(ferry_rpc::Stalled);
        }
        std::thread::yield_now();
        Ok(())
    }
}

/// How a program thread of [`run_program`] waits for the host.
pub use crate::program::cpu::ProgramWait;

/// A whole program run on CPU threads by [`run_program`].
#[derive(Debug)]
pub struct ProgramRun {
    /// The program's exit code, as the loader makes it on a GPU
    /// ([the rule](crate::program#the-exit-code)): the first `exit` call's code, else the OR of
    /// every thread's return value.
    pub code: i32,
    /// What the program printed to standard output.
    pub stdout: String,
    /// What the program printed to standard error.
    pub stderr: String,
    /// Whether a thread called `abort`.
    pub aborted: bool,
    /// The host services' calls served, by `Libc::OPCODES` index (see `LibcHost::counts`).
    pub calls: ferry_libc_host::CallCounts,
}

/// The most threads [`run_program`] runs (each GPU thread is one host thread).
pub const MAX_PROGRAM_THREADS: u32 = 4096;

/// Bytes of each port's bulk area in a [`run_program`] region: 4 KiB and a slot, as the loader's
/// largest (so device code's file calls move 4 KiB per call: `host::io_chunk`).
pub const PROGRAM_BULK: u64 = 4096 + 64;

/// Runs the GPU program `main` on CPU threads, `blocks` × `threads` of them as a launch of that
/// shape would run it (each thread's `program::thread_idx()` etc. as on the GPU), against the
/// real host services ([`ferry_libc_host::LibcHost`], files on this machine, output captured) served
/// by host threads, and returns the exit code and output. `args` are the program's arguments,
/// its name first.
///
/// Each GPU thread is one host thread with its own client (a GPU packs the calls of a warp's
/// lanes together; the calls and their answers are the same). The host services are configured
/// as the loader configures them on a GPU, so a program that passes here runs there: a heap of
/// `ferry_libc_host::PROGRAM_HEAP` bytes for `malloc` (host memory here), all of it the
/// program's; `PROGRAM_MAX_FILES` files open at once; the loader's environment for `getenv`;
/// `exit` recorded, ending nothing (the threads run to their end); the exit code by
/// [the same rule](crate::program#the-exit-code); `system` off. What stays GPU-only: warp
/// intrinsics called directly, the copy engine's calls (`read_to_device`, `write_from_device`:
/// `NoDeviceMemory`), and timing. A thread that panics is an error naming it.
///
/// Each run's region (one port per thread, about 4.2 KiB each with its bulk area) stays
/// allocated for the rest of the process, so that a client a program kept past its run still
/// names valid memory. At most [`MAX_PROGRAM_THREADS`] threads.
pub fn run_program(
    main: fn(crate::program::Args) -> i32,
    args: &[&str],
    blocks: u32,
    threads: u32,
) -> Result<ProgramRun, String> {
    use std::ffi::CString;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    let total = blocks
        .checked_mul(threads)
        .filter(|&t| (1..=MAX_PROGRAM_THREADS).contains(&t))
        .ok_or_else(|| {
            format!(
                "{blocks} blocks of {threads} threads: run_program runs 1 to \
                 {MAX_PROGRAM_THREADS} threads (one host thread each)"
            )
        })?;
    let strings: Vec<CString> = args
        .iter()
        .map(|a| CString::new(*a).map_err(|_| format!("argument {a:?} holds a NUL")))
        .collect::<Result<_, _>>()?;
    let pointers: Vec<*const u8> = strings.iter().map(|c| c.as_ptr().cast()).collect();
    // A port per thread, kept between its calls.
    let ports = total.next_multiple_of(ferry_rpc::layout::PORT_GRANULE);
    // A bulk area per port, so a thread's file data and prints cross in one handoff per call
    // rather than one per 64 bytes (each handoff may wait out a sleeping thread).
    let region: &'static ferry_rpc::HeapRegion = Box::leak(Box::new(
        ferry_rpc::Layout::new(ports, 1, ferry_rpc::MailboxKind::PerPort)
            .and_then(|l| l.with_bulk(PROGRAM_BULK))
            .and_then(|l| ferry_rpc::HeapRegion::with_layout(l.with_words()))
            .map_err(|e| e.to_string())?,
    ));
    let mut desc = descriptor(region);
    desc.mailbox |= crate::descriptor::FLAG_KEEP_PORTS;
    let out = Capture::default();
    let err = Capture::default();
    // What the loader gives a program on a GPU: its heap (here in host memory, which the
    // program's threads reach directly; zeroed pages are only mapped when touched), the whole
    // heap and file table for the one program, the loader's environment.
    let mut heap = std::vec![0u8; ferry_libc_host::PROGRAM_HEAP];
    let host = ferry_libc_host::LibcHost::new(ferry_libc_host::LibcConfig {
        stdout: Box::new(out.clone()),
        stderr: Box::new(err.clone()),
        heap: Some(ferry_libc_host::Arena {
            base: heap.as_mut_ptr() as u64,
            size: heap.len() as u64,
        }),
        max_heap_per_client: ferry_libc_host::HeapQuota::Whole,
        max_files: ferry_libc_host::PROGRAM_MAX_FILES,
        max_files_per_client: usize::MAX,
        give_environment: true,
        ..ferry_libc_host::LibcConfig::default()
    });
    let code = AtomicI32::new(0);
    let stop = AtomicBool::new(false);
    let failed: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        // One serving thread: the program's threads already outnumber the cores.
        let servers: Vec<_> = (0..1)
            .map(|_| {
                let (host, stop) = (&host, &stop);
                s.spawn(move || {
                    let server = region.server();
                    // The word lines (small calls): looked over when no packet came, and every
                    // `PASS_EVERY` packets.
                    let mut words = ferry_rpc::words::WordScan::new(&server);
                    // Polls, then yields, then short sleeps while nothing comes.
                    let mut idle = 0u32;
                    while !stop.load(Ordering::Acquire) {
                        if let Some(mut port) = server.try_open(()) {
                            idle = 0;
                            // The loader's server step: a failed or panicking handler answers
                            // `SERVER_ERROR`, and this thread goes on serving.
                            let _ = ferry_rpc::service::serve_packet(host, &mut port);
                            if !words.packet_served() {
                                continue;
                            }
                        }
                        let served = words.pass(
                            &server,
                            |opcode, lanes| {
                                let _ = ferry_rpc::service::serve_lanes::<
                                    ferry_rpc::PerPort,
                                    ferry_rpc::Spin,
                                    _,
                                >(host, opcode, lanes);
                            },
                            |_| {},
                        );
                        match served {
                            1.. => idle = 0,
                            0 => {
                                idle = idle.saturating_add(1);
                                match idle {
                                    0..256 => core::hint::spin_loop(),
                                    256..320 => std::thread::yield_now(),
                                    _ => std::thread::sleep(Duration::from_micros(20)),
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        let barriers: Vec<Arc<std::sync::Barrier>> = (0..blocks)
            .map(|_| Arc::new(std::sync::Barrier::new(threads as usize)))
            .collect();
        let program: Vec<_> = (0..total)
            .map(|t| {
                let barrier = barriers[(t / threads) as usize].clone();
                let place = crate::program::Place {
                    thread: t % threads,
                    block: t / threads,
                    threads,
                    blocks,
                };
                // The argument pointers, as an address each thread reads (they are only read).
                let (code, argc, argv) = (&code, pointers.len() as u32, pointers.as_ptr() as usize);
                std::thread::Builder::new()
                    .name(format!("gpu thread {t}"))
                    .stack_size(1 << 20)
                    .spawn_scoped(s, move || {
                        crate::program::cpu::enter(place, desc, barrier);
                        // SAFETY: `argv` is `pointers`: `argc` pointers to NUL-terminated strings
                        // (`strings`), both alive and unchanged until after this thread is joined.
                        let args =
                            unsafe { crate::program::Args::new(argc, argv as *const *const u8) };
                        let returned = main(args);
                        // The OR of every thread's return (as on a GPU).
                        code.fetch_or(returned, Ordering::Relaxed);
                    })
            })
            .collect();
        for (t, h) in program.into_iter().enumerate() {
            let ended = h.map_err(|e| e.to_string()).and_then(|h| {
                h.join()
                    .map_err(|p| panic_text(&*p).unwrap_or_else(|| "a panic".into()))
            });
            if let Err(why) = ended {
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("thread {t}: {why}"));
            }
        }
        // Every thread has returned; what it sent one-way (prints) may still wait on its port:
        // serve until every port is back with its client, so no output is lost.
        let r = region.region();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(0..r.layout().ports()).all(|p| r.client_owns(p)) {
            if Instant::now() > deadline {
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push("calls still pending a minute after every thread returned".into());
                break;
            }
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Release);
        for h in servers {
            let _ = h.join();
        }
    });
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failed.is_empty() {
        return Err(failed.join("; "));
    }
    Ok(ProgramRun {
        code: host
            .exit_code()
            .unwrap_or_else(|| code.load(Ordering::Relaxed)),
        stdout: out.text(),
        stderr: err.text(),
        aborted: host.aborted(),
        calls: host.counts(),
    })
}

/// The text of a panic's payload, if it is text.
fn panic_text(p: &(dyn core::any::Any + Send)) -> Option<String> {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
}

/// An output stream collected in memory.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::SimWarp;
    use ferry_rpc::Lanes;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// The panic message of `f`, which must panic.
    fn panic_of(f: impl FnOnce()) -> String {
        let e = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn a_descriptor_can_put_whole_warps_on_the_word_lines() {
        use crate::descriptor::FLAG_WORDS_FOR_WARPS;
        use ferry_rpc::{HeapRegion, Single, Spin};
        let region = HeapRegion::with_words(32, 32).unwrap();
        let mut d = super::descriptor(&region);
        // SAFETY: the descriptor names `region`'s memory, which outlives the clients.
        let client = unsafe { d.client(Single, Spin) }.unwrap();
        assert_eq!(client.max_word_lanes(), ferry_rpc::words::WORD_LANES);
        d.mailbox |= FLAG_WORDS_FOR_WARPS;
        // SAFETY: as above.
        let client = unsafe { d.client(Single, Spin) }.unwrap();
        assert_eq!(client.max_word_lanes(), u32::MAX);
        // A flag this library does not know is refused, not ignored.
        d.mailbox |= 1 << 20;
        assert!(d.layout().is_err());
    }

    #[test]
    fn broadcast_and_ballot_are_uniform() {
        let results = SimWarp::run(8, |w| {
            let mask = w.active_mask();
            let b = w.broadcast(mask, 100 + w.lane_id());
            let v = w.ballot(mask, w.lane_id() % 3 == 0);
            w.sync(mask);
            // A subset of the active lanes meets apart (its lanes alone call).
            let sub = w.when(w.lane_id() != 0, || {
                w.broadcast(mask & !1, 200 + w.lane_id())
            });
            (b, v, sub)
        });
        for (lane, (b, v, sub)) in results.into_iter().enumerate() {
            assert_eq!(b, 100, "the lowest lane of the mask is lane 0");
            assert_eq!(v, 0b0100_1001);
            assert_eq!(sub, (lane != 0).then_some(201));
        }
    }

    #[test]
    fn branches_see_their_own_lanes_and_meet_apart() {
        let results = SimWarp::run(8, |w| {
            let me = w.lane_id();
            let third = me % 3;
            let (mask, first, votes) = w.diverge(third, || {
                let mask = w.active_mask();
                // Each group meets over its own mask, at once (no group waits for another).
                let first = w.broadcast(mask, me);
                let votes = w.ballot(mask, me >= 4);
                w.sync(mask);
                (mask, first, votes)
            });
            // Back together: the whole warp meets.
            assert_eq!(w.active_mask(), 0xff);
            let all = w.ballot(0xff, true);
            (third, mask, first, votes, all)
        });
        let groups = [0b0100_1001u64, 0b1001_0010, 0b0010_0100];
        for (lane, (third, mask, first, votes, all)) in results.into_iter().enumerate() {
            let group = groups[third as usize];
            assert_eq!(third, lane as u32 % 3);
            assert_eq!(mask, group);
            assert_eq!(first, group.trailing_zeros());
            assert_eq!(votes, group & 0xf0);
            assert_eq!(all, 0xff);
        }
    }

    #[test]
    fn nested_branches_and_a_loop_that_lanes_leave_one_by_one() {
        let results = SimWarp::run(6, |w| {
            let me = w.lane_id();
            // Lane i makes i + 1 iterations; iteration k sees the lanes k.. active.
            let mut seen = Vec::new();
            let mut k = 0;
            w.repeat(|| {
                let mask = w.active_mask();
                assert_eq!(w.ballot(mask, true), mask);
                // Inside the loop, an `if` on the odd lanes.
                let odd = w.when(me % 2 == 1, || w.active_mask());
                seen.push((mask, odd));
                k += 1;
                k <= me
            });
            (w.active_mask(), seen)
        });
        for (lane, (after, seen)) in results.into_iter().enumerate() {
            assert_eq!(after, 0x3f, "the loop left, the warp is whole again");
            assert_eq!(seen.len(), lane + 1);
            for (k, (mask, odd)) in seen.into_iter().enumerate() {
                let still = 0x3f & !((1u64 << k) - 1);
                assert_eq!(mask, still, "lane {lane}, iteration {k}");
                assert_eq!(odd, (lane % 2 == 1).then_some(still & 0b10_1010));
            }
        }
    }

    #[test]
    fn a_mask_naming_an_inactive_lane_panics_instead_of_hanging() {
        let messages = SimWarp::run(4, |w| {
            w.when(w.lane_id() < 2, || {
                // The whole warp's mask, from inside a branch that lanes 2 and 3 did not take.
                panic_of(|| {
                    w.broadcast(0b1111, 1);
                })
            })
        });
        for m in messages.iter().take(2) {
            let m = m.as_deref().unwrap();
            assert!(m.contains("names lanes 0xc that are not active"), "{m}");
        }
        assert_eq!(messages[2], None);
    }

    #[test]
    fn lanes_at_different_operations_panic() {
        let messages = SimWarp::run(2, |w| {
            panic_of(|| {
                if w.lane_id() == 0 {
                    w.ballot(0b11, true);
                } else {
                    // Give lane 0 time to open its ballot first.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    w.broadcast(0b11, 1);
                }
            })
        });
        // Lane 1 finds lane 0's ballot; lane 0 then waits for lane 1, which has panicked and
        // will not come: it panics too once lane 1's thread ends.
        assert!(
            messages[1].contains("did not stay convergent"),
            "{messages:?}"
        );
        assert!(messages[0].contains("have exited"), "{messages:?}");
    }
}
