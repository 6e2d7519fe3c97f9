//! Benchmark kernels, launched by `ferry-gpu-bench` (transport-gpu) by name.
//!
//! - `pingpong(ping, pong, iters, stamps)`: the raw floor: one thread writes `i` to `ping` in
//!   mapped host memory (volatile store, `membar.sys`) and spins until the host echoes it in `pong`.
//! - `call_latency(iters, stamps)`: one warp makes `iters` no-op calls through the protocol.
//! - `call_throughput(calls, errors)`: every warp makes `calls` no-op calls and counts wrong replies.
//!
//! `stamps[k]` is the global timer after `k * STAMP_EVERY` iterations, for per-batch medians.

#![no_std]
#![feature(abi_ptx)]

use core::ptr::{read_volatile, write_volatile};
use device::nvptx::{global_thread_id, globaltimer, membar_sys};

/// Iterations between two timer stamps.
const STAMP_EVERY: u32 = 100;

/// # Safety
///
/// `ping` and `pong` are mapped host words an echo thread serves; `stamps` holds
/// `iters / STAMP_EVERY + 1` words. Launch with one thread.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn pingpong(
    ping: *mut u32,
    pong: *const u32,
    iters: u32,
    stamps: *mut u64,
) {
    // SAFETY: the launch contract above makes every pointer valid for these accesses.
    unsafe {
        write_volatile(stamps, globaltimer());
        for i in 1..=iters {
            write_volatile(ping, i);
            membar_sys();
            while read_volatile(pong) != i {}
            if i % STAMP_EVERY == 0 {
                write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer());
            }
        }
    }
}

/// # Safety
///
/// The host set up the descriptor and serves it; `stamps` holds `iters / STAMP_EVERY + 1` words;
/// `errors` is a device `u32`. Launch with one warp.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency(iters: u32, stamps: *mut u64, errors: *mut u32) {
    let client = device::client();
    let lane = global_thread_id() as u64;
    let mut wrong = 0;
    // SAFETY: `stamps` is valid for `iters / STAMP_EVERY + 1` words (launch contract).
    unsafe { write_volatile(stamps, globaltimer()) };
    for i in 1..=iters {
        let x = (lane << 32) | i as u64;
        match device::services::noop(&client, x) {
            Ok(y) if y == x + 1 => {}
            _ => wrong += 1,
        }
        if i % STAMP_EVERY == 0 && lane == 0 {
            // SAFETY: as above.
            unsafe { write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer()) };
        }
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// # Safety
///
/// The host set up the descriptor and serves it; `errors` is a device `u32`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_throughput(calls: u32, errors: *mut u32) {
    let client = device::client();
    let me = (global_thread_id() as u64) << 32;
    let mut wrong = 0;
    for i in 0..calls {
        let x = me | i as u64;
        match device::services::noop(&client, x) {
            Ok(y) if y == x + 1 => {}
            _ => wrong += 1,
        }
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// Adds `wrong` to `*errors` if non-zero.
///
/// # Safety
///
/// `errors` is a valid, aligned device `u32`.
unsafe fn count(errors: *mut u32, wrong: u32) {
    if wrong != 0 {
        // SAFETY: the caller guarantees a valid aligned `u32`; `AtomicU32` has its layout.
        let a = unsafe { &*(errors as *const core::sync::atomic::AtomicU32) };
        a.fetch_add(wrong, core::sync::atomic::Ordering::Relaxed);
    }
}
