//! Synchronisation a program's threads need, correct on a GPU as on the CPU.
//!
//! **What `core::sync::atomic` does on NVPTX.** With the LLVM the toolchains here use, a
//! read-modify-write of any ordering (`fetch_add(1, AcqRel)`) compiles to a *relaxed* `atom`
//! with no fence: it is atomic, but it orders nothing around it. A counter is fine; "the last
//! thread to finish reads what the others wrote" is not. The functions here put the fences in
//! themselves (`fence.acq_rel.gpu` on NVPTX, the language's fences elsewhere), so they hold as
//! written on every target:
//!
//! - [`fetch_add_acq_rel`], [`load_acquire`], [`store_release`]: ordered atomics for data shared
//!   across the whole grid (global memory);
//! - [`LastOut`]: a grid-wide "last one out": every thread arrives once; exactly one, the last,
//!   learns it is, and sees everything every thread wrote before arriving;
//! - [`program::sync_threads`](crate::program::sync_threads): a barrier of one block's threads.
//!
//! Scope: GPU-wide (`.gpu`), for threads of one launch; the host sees a program's memory through
//! its calls, which order themselves (the protocol's system-scope fences).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A fence ordering this thread's earlier memory accesses before its later ones, for every
/// thread of the GPU (`fence.acq_rel.gpu`; `fence(AcqRel)` off the GPU).
#[inline(always)]
pub fn fence_acq_rel() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a memory fence among the GPU's threads; it has no other effect.
    unsafe {
        core::arch::asm!("fence.acq_rel.gpu;", options(nostack))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    core::sync::atomic::fence(Ordering::AcqRel);
}

/// `a.fetch_add(v)` ordered as `AcqRel` on every target: what this thread wrote before is
/// visible to a thread that reads the result after it, and what others wrote before their own
/// ordered add is visible here after it.
#[inline(always)]
pub fn fetch_add_acq_rel(a: &AtomicU32, v: u32) -> u32 {
    fence_acq_rel();
    let old = a.fetch_add(v, Ordering::Relaxed);
    fence_acq_rel();
    old
}

/// `a.load(Acquire)` on every target.
#[inline(always)]
pub fn load_acquire(a: &AtomicU64) -> u64 {
    let v = a.load(Ordering::Relaxed);
    fence_acq_rel();
    v
}

/// `a.store(v, Release)` on every target.
#[inline(always)]
pub fn store_release(a: &AtomicU64, v: u64) {
    fence_acq_rel();
    a.store(v, Ordering::Relaxed);
}

/// A grid-wide "last one out": `total` threads each [`arrive`](Self::arrive) once; the one that
/// arrives last gets `true` and sees every write the others made before arriving (a summary, a
/// total). Put it in a `static`: on a GPU it then lives in the program's global memory, one per
/// load of the program; on the CPU (`sim::run_program`) one per process, so a program run twice
/// in one process needs a fresh one per run ([`reset`](Self::reset) by the last thread).
#[derive(Debug)]
pub struct LastOut {
    arrived: AtomicU32,
}

impl LastOut {
    /// No thread arrived yet.
    pub const fn new() -> LastOut {
        LastOut {
            arrived: AtomicU32::new(0),
        }
    }

    /// This thread is done; `true` for the last of `total` threads to say so.
    #[inline(always)]
    pub fn arrive(&self, total: u32) -> bool {
        fetch_add_acq_rel(&self.arrived, 1) + 1 == total
    }

    /// Back to no thread arrived: for the last thread, once it is done, so the next run of the
    /// program counts from zero.
    pub fn reset(&self) {
        self.arrived.store(0, Ordering::Relaxed);
        fence_acq_rel();
    }
}

impl Default for LastOut {
    fn default() -> Self {
        LastOut::new()
    }
}
