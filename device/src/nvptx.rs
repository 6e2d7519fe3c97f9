//! NVPTX only: indices, timer and sleep, the program entry and the descriptor the host fills in.
//!
//! A program is a `cdylib` built for `nvptx64-nvidia-cuda` (`scripts/build-ptx`) whose main
//! function the [`entry!`](crate::entry) macro (in [`program`](crate::program)) wraps in the
//! documented entry kernel:
//!
//! ```text
//! .entry _start(.param .u32 argc, .param .u64 argv, .param .u64 ret)
//! ```
//!
//! `argv` points to `argc` pointers to NUL-terminated strings in device memory, which the loader
//! zeroes `*ret` in; every thread runs `main` and ORs its return value into `*ret` (as LLVM libc's
//! GPU start code does), which the loader makes its exit code
//! ([the rule](crate::program#the-exit-code)). The loader fills the [`FERRY_RPC`] descriptor
//! before launch.

use core::arch::asm;

use crate::descriptor::Descriptor;

/// The region descriptor; the host writes it (by this name, `descriptor::SYMBOL`) before launch.
#[no_mangle]
pub static mut FERRY_RPC: Descriptor = Descriptor::UNSET;

macro_rules! special {
    ($name:ident, $reg:literal, $doc:literal) => {
        #[doc = $doc]
        #[inline(always)]
        pub fn $name() -> u32 {
            let v: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { asm!(concat!("mov.u32 {v}, ", $reg, ";"), v = out(reg32) v, options(nomem, nostack, pure)) };
            v
        }
    };
}

special!(
    thread_idx,
    "%tid.x",
    "This thread's index in its block (x)."
);
special!(block_idx, "%ctaid.x", "This block's index in the grid (x).");
special!(block_dim, "%ntid.x", "Threads per block (x).");
special!(grid_dim, "%nctaid.x", "Blocks in the grid (x).");

/// This thread's index in the (one-dimensional) grid.
#[inline(always)]
pub fn global_thread_id() -> u32 {
    block_idx() * block_dim() + thread_idx()
}

/// This warp's index in the grid: blocks' warps counted in order (any block size).
#[inline(always)]
pub fn global_warp_id() -> u32 {
    block_idx() * block_dim().div_ceil(32) + thread_idx() / 32
}

/// The global nanosecond timer (`%globaltimer`).
#[inline(always)]
pub fn globaltimer() -> u64 {
    let t: u64;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
    t
}

/// Sleeps about `ns` nanoseconds (`nanosleep`, sm_70 and later).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: suspends this thread for a while; no memory effects.
    unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nomem, nostack)) };
}

/// A system-scope memory barrier (`membar.sys`): this thread's earlier accesses are seen by the
/// host before its later ones.
#[inline(always)]
pub fn membar_sys() {
    // SAFETY: a memory barrier; it has no other effect.
    unsafe { asm!("membar.sys;", options(nostack)) };
}

/// Ends the kernel with an error (`trap`): the host sees a launch failure.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` aborts the kernel; it does not return.
    unsafe { asm!("trap;", options(noreturn, nostack)) }
}

/// ORs `value` into `*target` (device memory), atomically.
///
/// # Safety
///
/// `target` must be a valid, aligned pointer to an `i32` in global memory.
#[inline(always)]
pub unsafe fn fetch_or(target: *mut i32, value: i32) {
    // SAFETY: the caller guarantees `target` is a valid aligned `i32`; `AtomicI32` has its layout.
    let atomic = unsafe { &*(target as *const core::sync::atomic::AtomicI32) };
    atomic.fetch_or(value, core::sync::atomic::Ordering::Relaxed);
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    trap()
}
