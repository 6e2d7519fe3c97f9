//! Benchmark kernels, launched by `ferry-gpu-bench` (ferry-gpu) by name.
//!
//! - `pingpong(ping, pong, iters, stamps)`: the raw floor: one thread writes `i` to `ping` in
//!   mapped host memory (volatile store, `membar.sys`) and spins until the host echoes it in `pong`.
//! - `pingpong_piped_KxG(..)` (2x600, 4x300, 4x150, 8x150): the same exchange with its poll kept
//!   `K` reads of `pong` deep, issued `G` ns apart (`ferry-gpu-bench --poll-probe`);
//!   `pingpong_split_KxG(..)` the same with each read polling a word on a line of its own.
//! - `call_latency(iters, stamps)`: one warp makes `iters` no-op calls (`Libc::Noop`, through the
//!   generated client) through the protocol.
//! - `call_latency_kept(iters, stamps, errors)`: the same by a client that keeps its port.
//! - `call_latency_lane0(iters, stamps, errors)`, `call_latency_lane0_kept(..)`: lane 0 alone,
//!   opening a port per call or keeping it.
//! - `call_throughput(calls, errors)`: every warp makes `calls` no-op calls and counts wrong replies
//!   (on word lines where the host's descriptor says so: `GpuRegion::set_words_for_warps`).
//! - `call_phases(iters, phases, errors)`: one warp's no-op calls as in `call_latency_kept`, written out
//!   step by step as the generated call makes them (the value in the slot's first word each way),
//!   with the global timer read between the steps (lane 0 records
//!   `PHASES` durations per call into `phases`), to show where a call's time goes.
//!
//! - `call_phases_words(iters, phases, errors)`: the same calls on the port's word line, step by
//!   step (`WORD_PHASES` durations per call); `call_phases_words_lane0(..)`: lane 0 alone;
//!   `call_phases_values(..)`, `call_phases_values_lane0(..)`: the same declared to pass values
//!   only (`Memory::ValuesOnly`: no fences).
//! - `call_phases_values_open(..)`, `call_phases_values_lane0_open(..)`: the values calls with the
//!   port opened for each call; `lock_phases(..)`: a port's lock, and an open and close, alone;
//!   `open_probe(..)`, `open_real_probe(..)`: an open's instructions alone, and beside a real open
//!   on the same words; `warp_open_probe(..)`, `warp_open_probe_lane0(..)`: a port word's lock
//!   taken and released by a warp's first lane, and by lane 0 alone, beside a real open.
//! - `call_latency_words_lane0_fenced(..)`, `call_latency_words_lane0_values(..)`: lane 0's
//!   no-op on its kept port's word line made directly, with and without the fences;
//!   `call_values_one_word(..)`, `call_values_one_word_lane0(..)`: one word each way;
//!   `call_values_two_in_one_out(..)`: two words of request, one of reply.
//!
//! - `bulk_read(handle, dst, slice, errors)`, `bulk_write(handle, src, slice, errors)`: lane 0 of
//!   each warp moves its `slice` of a file to or from device memory with one copy-engine call;
//!   `bulk_read_lanes(...)`: every lane its thirty-second of the slice, in one call;
//!   `chunk_read(...)`: the same read through the region, each lane reading its part with
//!   `read_at` (`IO_CHUNK` bytes per call).
//!
//! `stamps[k]` is the global timer after `k * STAMP_EVERY` iterations, for per-batch medians.

#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]

use core::ptr::{read_volatile, write_volatile};
use ferry_device::ferry_rpc::service::status;
use ferry_device::ferry_rpc::words::Memory;
use ferry_device::host::{opcode, Handle, Libc};
use ferry_device::nvptx::{global_thread_id, global_warp_id, globaltimer, membar_sys};

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

/// The floor's exchange (`pingpong`) with its poll kept `K` reads deep: `K` reads issued
/// `gap_ns` apart, each checked when it returns and issued again at once, so a new read leaves
/// every `gap_ns` instead of one per round trip. Read `k` polls the word `k × STRIDE` words past
/// `pong`: with `STRIDE` 0 every read polls `pong` itself; with 32 each polls a word on a
/// 128-byte line of its own, which the echo writes too. A probe of whether the reply's wait can be
/// cut below one read's round trip.
///
/// # Safety
///
/// As `pingpong`, `pong` holding the `K` words polled.
#[inline(always)]
unsafe fn pingpong_piped<const K: usize, const STRIDE: usize>(
    ping: *mut u32,
    pong: *const u32,
    iters: u32,
    stamps: *mut u64,
    gap_ns: u64,
) {
    // SAFETY: the launch contract makes every pointer valid for these accesses.
    unsafe {
        write_volatile(stamps, globaltimer());
        for i in 1..=iters {
            write_volatile(ping, i);
            membar_sys();
            let mut v = [0u32; K];
            for (k, v) in v.iter_mut().enumerate() {
                *v = read_volatile(pong.add(k * STRIDE));
                if k + 1 < K {
                    let t = globaltimer();
                    while globaltimer() - t < gap_ns {}
                }
            }
            'wait: loop {
                for (k, v) in v.iter_mut().enumerate() {
                    if *v == i {
                        break 'wait;
                    }
                    *v = read_volatile(pong.add(k * STRIDE));
                }
            }
            if i % STAMP_EVERY == 0 {
                write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer());
            }
        }
    }
}

macro_rules! pingpong_piped_kernel {
    ($name:ident, $k:expr, $stride:expr, $gap:expr) => {
        /// `pingpong` with its poll kept deep (`pingpong_piped`: reads, gap in ns in the name;
        /// `piped` polls one word, `split` one word a line).
        ///
        /// # Safety
        ///
        /// As `pingpong`, `pong` holding the words polled.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            ping: *mut u32,
            pong: *const u32,
            iters: u32,
            stamps: *mut u64,
        ) {
            // SAFETY: the kernel's contract is `pingpong_piped`'s.
            unsafe { pingpong_piped::<$k, $stride>(ping, pong, iters, stamps, $gap) };
        }
    };
}

pingpong_piped_kernel!(pingpong_piped_2x600, 2, 0, 600);
pingpong_piped_kernel!(pingpong_piped_4x300, 4, 0, 300);
pingpong_piped_kernel!(pingpong_piped_4x150, 4, 0, 150);
pingpong_piped_kernel!(pingpong_piped_8x150, 8, 0, 150);
pingpong_piped_kernel!(pingpong_split_2x0, 2, 32, 0);
pingpong_piped_kernel!(pingpong_split_2x400, 2, 32, 400);
pingpong_piped_kernel!(pingpong_split_2x600, 2, 32, 600);
pingpong_piped_kernel!(pingpong_split_4x300, 4, 32, 300);
pingpong_piped_kernel!(pingpong_split_4x200, 4, 32, 200);

/// The floor's exchange (`pingpong`) with its first poll `delay_ns` after the write: no read of
/// `pong` is in flight while the echo answers, if the delay is long enough. A probe of whether
/// the reads of a poll slow the answer they wait for.
///
/// # Safety
///
/// As `pingpong`.
#[inline(always)]
unsafe fn pingpong_delayed(
    ping: *mut u32,
    pong: *const u32,
    iters: u32,
    stamps: *mut u64,
    delay_ns: u64,
) {
    // SAFETY: the launch contract makes every pointer valid for these accesses.
    unsafe {
        write_volatile(stamps, globaltimer());
        for i in 1..=iters {
            write_volatile(ping, i);
            membar_sys();
            let t = globaltimer();
            while globaltimer() - t < delay_ns {}
            while read_volatile(pong) != i {}
            if i % STAMP_EVERY == 0 {
                write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer());
            }
        }
    }
}

macro_rules! pingpong_delayed_kernel {
    ($name:ident, $delay:expr) => {
        /// `pingpong` with its first poll delayed (`pingpong_delayed`, the delay in ns in the
        /// name).
        ///
        /// # Safety
        ///
        /// As `pingpong`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            ping: *mut u32,
            pong: *const u32,
            iters: u32,
            stamps: *mut u64,
        ) {
            // SAFETY: the kernel's contract is `pingpong_delayed`'s.
            unsafe { pingpong_delayed(ping, pong, iters, stamps, $delay) };
        }
    };
}

pingpong_delayed_kernel!(pingpong_delay_300, 300);
pingpong_delayed_kernel!(pingpong_delay_600, 600);
pingpong_delayed_kernel!(pingpong_delay_900, 900);
pingpong_delayed_kernel!(pingpong_delay_1200, 1200);

/// `iters` no-op calls (values only) on a kept port's word line by every lane that calls it,
/// each call's first poll of its reply `delay_ns` after its send (`word_calls`).
///
/// # Safety
///
/// As `latency_loop`.
#[inline(always)]
unsafe fn words_delayed(iters: u32, stamps: *mut u64, errors: *mut u32, delay_ns: u64) {
    let lane = global_thread_id() as u64;
    let x = move |i: u32| (lane << 32) | i as u64;
    // SAFETY: the caller's contract is `word_calls`'.
    unsafe {
        word_calls(
            iters,
            stamps,
            errors,
            Memory::ValuesOnly,
            delay_ns,
            |i| x(i).to_le_bytes(),
            |i, status, reply: [u8; 8]| {
                status == Ok(status::OK) && u64::from_le_bytes(reply) == x(i) + 1
            },
        )
    };
}

macro_rules! words_delayed_kernels {
    ($warp:ident, $lane0:ident, $delay:expr) => {
        /// One warp's no-op word calls, the first poll delayed (ns in the name).
        ///
        /// # Safety
        ///
        /// As `call_latency_kept`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $warp(iters: u32, stamps: *mut u64, errors: *mut u32) {
            // SAFETY: the kernel's contract is `words_delayed`'s.
            unsafe { words_delayed(iters, stamps, errors, $delay) };
        }

        /// Lane 0's no-op word calls, the first poll delayed (ns in the name).
        ///
        /// # Safety
        ///
        /// As `call_latency_lane0_kept`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $lane0(iters: u32, stamps: *mut u64, errors: *mut u32) {
            if global_thread_id() == 0 {
                // SAFETY: the kernel's contract is `words_delayed`'s.
                unsafe { words_delayed(iters, stamps, errors, $delay) };
            }
        }
    };
}

words_delayed_kernels!(words_delay_warp_0, words_delay_lane0_0, 0);
words_delayed_kernels!(words_delay_warp_600, words_delay_lane0_600, 600);
words_delayed_kernels!(words_delay_warp_900, words_delay_lane0_900, 900);
words_delayed_kernels!(words_delay_warp_1200, words_delay_lane0_1200, 1200);
words_delayed_kernels!(words_delay_warp_1500, words_delay_lane0_1500, 1500);
words_delayed_kernels!(words_delay_warp_1800, words_delay_lane0_1800, 1800);

/// # Safety
///
/// The host set up the descriptor and serves it; `stamps` holds `iters / STAMP_EVERY + 1` words;
/// `errors` is a device `u32`. Launch with one warp.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency(iters: u32, stamps: *mut u64, errors: *mut u32) {
    // SAFETY: the caller's contract is the one `latency_loop` needs.
    unsafe { latency_loop(&ferry_device::client(), iters, stamps, errors) };
}

/// One warp's `iters` no-op calls through `client`, stamping the timer every `STAMP_EVERY`.
///
/// # Safety
///
/// `stamps` holds `iters / STAMP_EVERY + 1` words and `errors` is a device `u32`.
#[inline(always)]
unsafe fn latency_loop(
    client: &ferry_device::Client<'_, ferry_device::lanes::Warp, ferry_device::GpuWait>,
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    let lane = global_thread_id() as u64;
    let libc = Libc::client(client);
    let mut wrong = 0;
    // SAFETY: `stamps` is valid for `iters / STAMP_EVERY + 1` words (contract).
    unsafe { write_volatile(stamps, globaltimer()) };
    for i in 1..=iters {
        let x = (lane << 32) | i as u64;
        // The generated call: one send and one receive on the port.
        match libc.noop(x) {
            Ok(y) if y == x + 1 => {}
            _ => wrong += 1,
        }
        if i % STAMP_EVERY == 0 && lane == 0 {
            // SAFETY: as above.
            unsafe { write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer()) };
        }
    }
    // SAFETY: `errors` is a valid device `u32` (contract).
    unsafe { count(errors, wrong) };
}

/// # Safety
///
/// As `call_latency`: one warp's no-op calls, by a client that keeps its port between calls
/// (`ferry_rpc::Process::keep_port`): no lock, unlock or search per call.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency_kept(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    // SAFETY: the caller's contract is the one `latency_loop` needs.
    unsafe {
        latency_loop(
            &ferry_device::client().keep_port(true),
            iters,
            stamps,
            errors,
        )
    };
}

/// # Safety
///
/// As `call_latency`, but only lane 0 of the warp calls (a one-lane packet: one slot each way).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency_lane0(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    if ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) == 0 {
        // SAFETY: the caller's contract is the one `latency_loop` needs.
        unsafe { latency_loop(&ferry_device::client(), iters, stamps, errors) };
    }
}

/// # Safety
///
/// As `call_latency_lane0`, by a client that keeps its port between calls: lane 0 keeps it
/// alone as a whole warp does (`ferry_rpc::Process::keep_port`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency_lane0_kept(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    if ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) == 0 {
        let client = ferry_device::client().keep_port(true);
        // SAFETY: the caller's contract is the one `latency_loop` needs.
        unsafe { latency_loop(&client, iters, stamps, errors) };
    }
}

/// # Safety
///
/// As `call_latency_lane0_kept`, the no-op made on the port's word line directly
/// (`Port::call_words_with`) with the fences of a call that may name memory
/// (`Memory::Fenced`): beside `call_latency_words_lane0_values`, what the fences cost.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency_words_lane0_fenced(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    if global_thread_id() == 0 {
        // SAFETY: the caller's contract is the one `words_loop` needs.
        unsafe { words_loop(iters, stamps, errors, Memory::Fenced) };
    }
}

/// # Safety
///
/// As `call_latency_words_lane0_fenced`, declared to pass values only (`Memory::ValuesOnly`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_latency_words_lane0_values(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
) {
    if global_thread_id() == 0 {
        // SAFETY: the caller's contract is the one `words_loop` needs.
        unsafe { words_loop(iters, stamps, errors, Memory::ValuesOnly) };
    }
}

/// `iters` no-op calls on a kept port's word line with the fences `memory` asks for, stamping
/// the timer every `STAMP_EVERY`.
///
/// # Safety
///
/// As `latency_loop`.
#[inline(always)]
unsafe fn words_loop(iters: u32, stamps: *mut u64, errors: *mut u32, memory: Memory) {
    // SAFETY: the caller's contract is `word_calls`'.
    unsafe {
        word_calls(
            iters,
            stamps,
            errors,
            memory,
            0,
            |i| (i as u64).to_le_bytes(),
            |i, status, reply: [u8; 8]| {
                status == Ok(status::OK) && u64::from_le_bytes(reply) == i as u64 + 1
            },
        )
    };
}

/// `iters` no-op calls on a kept port's word line, call `i` (from 1) sending `request(i)` and
/// asking for `R` bytes back, with the fences `memory` asks for, its first poll of the reply at
/// least `delay_ns` after its send (0: as the call makes it); `right(i, status, reply)` says
/// whether its answer is the one expected (the others are counted into `errors`). With `stamps`
/// non-null, the timer is stamped every `STAMP_EVERY` calls.
///
/// # Safety
///
/// The host set up the descriptor and serves it; `errors` is a device `u32`; `stamps` is null or
/// holds `iters / STAMP_EVERY + 1` words.
#[inline(always)]
unsafe fn word_calls<const Q: usize, const R: usize>(
    iters: u32,
    stamps: *mut u64,
    errors: *mut u32,
    memory: Memory,
    delay_ns: u64,
    request: impl Fn(u32) -> [u8; Q],
    right: impl Fn(u32, Result<u32, ferry_device::ferry_rpc::Error>, [u8; R]) -> bool,
) {
    let client = ferry_device::client().keep_port(true);
    let mut wrong = 0;
    if !stamps.is_null() {
        // SAFETY: `stamps` holds `iters / STAMP_EVERY + 1` words (contract).
        unsafe { write_volatile(stamps, globaltimer()) };
    }
    for i in 1..=iters {
        let mut reply = [0u8; R];
        match client.open_for_words(opcode::NOOP) {
            Ok(mut port) => {
                let call = port.send_words_with(&request(i), R, memory);
                if delay_ns > 0 {
                    let t = globaltimer();
                    while globaltimer() - t < delay_ns {}
                }
                let status = port.recv_words(call, &mut reply);
                if !right(i, status, reply) {
                    wrong += 1;
                }
            }
            Err(_) => wrong += 1,
        }
        if !stamps.is_null() && i % STAMP_EVERY == 0 {
            // SAFETY: as above.
            unsafe { write_volatile(stamps.add((i / STAMP_EVERY) as usize), globaltimer()) };
        }
    }
    // SAFETY: `errors` is a valid device `u32` (contract).
    unsafe { count(errors, wrong) };
}

/// # Safety
///
/// As `call_phases_values`, each call one word each way (4 bytes of request, 4 of reply: the
/// no-op refuses it as a bad request, which still crosses as a call); `phases` is not written.
/// For the host-side timing of `ferry-gpu-bench --word-timing` beside the two-word call.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_values_one_word(
    iters: u32,
    _phases: *mut u32,
    errors: *mut u32,
) {
    // SAFETY: the kernel's contract is `one_word`'s.
    unsafe { one_word(iters, errors) };
}

/// # Safety
///
/// As `call_values_one_word`; only lane 0 of the warp calls.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_values_one_word_lane0(
    iters: u32,
    _phases: *mut u32,
    errors: *mut u32,
) {
    if global_thread_id() == 0 {
        // SAFETY: the kernel's contract is `one_word`'s.
        unsafe { one_word(iters, errors) };
    }
}

/// # Safety
///
/// As `call_values_one_word`, with two words of request (the no-op's 8 bytes, served) and one of
/// reply (its low 4 bytes).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_values_two_in_one_out(
    iters: u32,
    _phases: *mut u32,
    errors: *mut u32,
) {
    let lane = global_thread_id() as u64;
    let x = move |i: u32| (lane << 32) | i as u64;
    // SAFETY: the kernel's contract is `word_calls`' (no stamps).
    unsafe {
        word_calls(
            iters,
            core::ptr::null_mut(),
            errors,
            Memory::ValuesOnly,
            0,
            |i| x(i).to_le_bytes(),
            |i, status, reply: [u8; 4]| {
                status == Ok(status::OK) && u32::from_le_bytes(reply) == (x(i) + 1) as u32
            },
        )
    };
}

/// `iters` one-word values calls on a kept port's word line; a call not answered
/// `BAD_REQUEST` counts as wrong.
///
/// # Safety
///
/// The host set up the descriptor and serves it; `errors` is a device `u32`.
#[inline(always)]
unsafe fn one_word(iters: u32, errors: *mut u32) {
    // SAFETY: the caller's contract is `word_calls`' (no stamps).
    unsafe {
        word_calls(
            iters,
            core::ptr::null_mut(),
            errors,
            Memory::ValuesOnly,
            0,
            |i| i.to_le_bytes(),
            |_, status, _: [u8; 4]| status == Ok(status::BAD_REQUEST),
        )
    };
}

/// Timed steps of a call in `call_phases`.
const PHASES: usize = 5;

/// The global timer, read as if it touched memory, so the compiler keeps memory accesses on their
/// side of it.
#[inline(always)]
fn stamp() -> u64 {
    let t: u64;
    // SAFETY: reads a special register; declared as touching memory only to order it.
    unsafe { core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nostack)) };
    t
}

/// The global timer, read once `v` has arrived (a load's value: the read is predicated on it, so
/// it cannot issue before; 0 in the one case `v` is `u32::MAX`).
#[inline(always)]
fn stamp_after(v: u32) -> u64 {
    let t: u64;
    // SAFETY: reads a special register; `v` is an input only so the read waits for it.
    unsafe {
        core::arch::asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {v}, 0xFFFFFFFF; mov.u64 {t}, 0; @p mov.u64 {t}, %globaltimer; }}",
            v = in(reg32) v,
            t = out(reg64) t,
            options(nostack)
        )
    };
    t
}

/// # Safety
///
/// The host set up the descriptor and serves it; `phases` holds `iters * PHASES` `u32`s;
/// `errors` is a device `u32`. Launch with one warp.
///
/// The client keeps its port (as the loader sets clients up when every warp has a port): after the
/// first call, `open` reads no memory.
///
/// Per call, in nanoseconds: 0 `open` (kept port); 1 `send` from the fill to its return (the
/// slot stores, the release fence, the flip); 2 from there to the first lane's reply read (the
/// poll and the acquire fence); 3 the reply's load (until its value has arrived);
/// 4 the status check and `close`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn call_phases(iters: u32, phases: *mut u32, errors: *mut u32) {
    let client = ferry_device::client().keep_port(true);
    let lane = global_thread_id() as u64;
    let mut wrong = 0;
    for i in 0..iters {
        let x = (lane << 32) | i as u64;
        let mut t = [0u64; PHASES + 1];
        t[0] = stamp();
        let Ok(mut port) = client.open(opcode::NOOP) else {
            wrong += 1;
            continue;
        };
        // As a generated call does: its fixed arguments' length (`Noop`'s `u64`), which the
        // server checks.
        port.set_request_len(8);
        t[1] = stamp();
        let sent = port.send(|slot, _| slot.words[0] = x);
        t[2] = stamp();
        let mut reply = 0;
        let received = port.recv(|slot, _| {
            t[3] = stamp();
            reply = slot.words[0];
        });
        if lane == 0 {
            // SAFETY: as below. The store waits for the reply's load, so the next stamp comes
            // after its arrival (overwritten with the duration at the end of the call).
            unsafe { write_volatile(phases.add(i as usize * PHASES + 3), reply as u32) };
        }
        t[4] = stamp();
        if sent.is_err() || received.is_err() || reply != x + 1 {
            wrong += 1;
        }
        if port.status() != status::OK {
            wrong += 1;
        }
        port.close();
        t[5] = stamp();
        if lane == 0 {
            // SAFETY: `phases` holds `iters * PHASES` words (launch contract).
            unsafe { record(phases, i, &t) };
        }
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// Writes call `i`'s step durations (the differences of the `M` stamps `t`) to `phases`.
///
/// # Safety
///
/// `phases` holds at least `(i + 1) * (M - 1)` words.
unsafe fn record<const M: usize>(phases: *mut u32, i: u32, t: &[u64; M]) {
    let n = M - 1;
    for k in 0..n {
        // SAFETY: `i * n + k < (i + 1) * n` words (the caller's contract).
        unsafe {
            write_volatile(
                phases.add(i as usize * n + k),
                t[k + 1].wrapping_sub(t[k]) as u32,
            )
        };
    }
}

/// Timed steps of a call in `call_phases_words`.
const WORD_PHASES: usize = 4;

/// A `(iters, phases, errors)` kernel of `phases_words` with the given fences (`Memory`) and
/// port keeping, run by every lane of the warp or by lane 0 alone (`lane0`).
macro_rules! word_phases_kernel {
    ($(#[$doc:meta])* $name:ident, $memory:expr, keep: $keep:expr, lane0: $lane0:expr) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(iters: u32, phases: *mut u32, errors: *mut u32) {
            if !$lane0 || global_thread_id() == 0 {
                // SAFETY: the kernel's contract is `phases_words`'.
                unsafe { phases_words(iters, phases, errors, $memory, $keep) };
            }
        }
    };
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases`, `phases` holding `iters * WORD_PHASES` `u32`s.
    ///
    /// The same no-op calls on the port's word line (`ferry_rpc::words`), as the generated
    /// client makes them: 0 `open_for_words` (kept port); 1 `send_words` (the sequence from
    /// device memory, the release fence, the word stores); 2 `recv_words` (polling the lane's
    /// reply words until they carry the call's sequence, the acquire fence); 3 `close`.
    call_phases_words, Memory::Fenced, keep: true, lane0: false
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases_words`; only lane 0 of the warp calls.
    call_phases_words_lane0, Memory::Fenced, keep: true, lane0: true
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases_words`, each call declared to pass values only (`Memory::ValuesOnly`: no
    /// fences around it).
    call_phases_values, Memory::ValuesOnly, keep: true, lane0: false
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases_values`; only lane 0 of the warp calls.
    call_phases_values_lane0, Memory::ValuesOnly, keep: true, lane0: true
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases_values_lane0`, by a client that opens the port for each call and closes
    /// it after (no kept port): step 0 is then the lock and the port's state, step 3 the unlock.
    call_phases_values_lane0_open, Memory::ValuesOnly, keep: false, lane0: true
}

word_phases_kernel! {
    /// # Safety
    ///
    /// As `call_phases_values`, a whole warp's port opened for each call and closed after.
    call_phases_values_open, Memory::ValuesOnly, keep: false, lane0: false
}

/// Timed steps of `lock_phases`.
const LOCK_PHASES: usize = 4;

/// # Safety
///
/// As `call_phases`, `phases` holding `iters * LOCK_PHASES` `u32`s; lane 0 alone runs it.
///
/// What opening and closing a port cost without a call: 0 taking port 0's lock alone
/// (`Process::try_hold`: the lock's atomic and its acquire fence), 1 releasing it (the release
/// fence and the atomic), 2 `open_for_words` (the lock, then the port's state), 3 `close`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn lock_phases(iters: u32, phases: *mut u32, errors: *mut u32) {
    if global_thread_id() != 0 {
        return;
    }
    let client = ferry_device::client().keep_port(false);
    let mut wrong = 0;
    for i in 0..iters {
        let mut t = [0u64; LOCK_PHASES + 1];
        t[0] = stamp();
        let held = client.try_hold(0);
        t[1] = stamp();
        wrong += u32::from(held.is_none());
        drop(held);
        t[2] = stamp();
        wrong += timed_open_close(&client, &mut t, 3);
        // SAFETY: `phases` holds `iters * LOCK_PHASES` words (launch contract).
        unsafe { record(phases, i, &t) };
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// Opens a port for word calls with `client` and closes it, stamping `t[k]` after the open and
/// `t[k + 1]` after the close; 1 if the open failed, else 0.
#[inline(always)]
fn timed_open_close<const M: usize>(
    client: &ferry_device::Client<'_, ferry_device::lanes::Warp, ferry_device::GpuWait>,
    t: &mut [u64; M],
    k: usize,
) -> u32 {
    let wrong = match client.open_for_words(opcode::NOOP) {
        Ok(port) => {
            t[k] = stamp();
            port.close();
            0
        }
        Err(_) => {
            t[k] = stamp();
            1
        }
    };
    t[k + 1] = stamp();
    wrong
}

/// Timed steps of `open_probe`.
const OPEN_PROBE: usize = 10;

/// Device words for `open_probe`: a lock word, then two words read after it, each on a line of
/// its own.
static mut PROBE_WORDS: [u32; 96] = [0; 96];

/// Three loads of `local`, each at an index taken from the one before (starting from `from`):
/// their latencies add up.
#[inline(always)]
fn local_chain(local: &[u32; 64], from: u32) -> u32 {
    let mut v = from;
    for _ in 0..3 {
        // SAFETY: the index is masked into the array.
        v = unsafe { read_volatile(local.as_ptr().add((v & 63) as usize)) };
    }
    v
}

/// # Safety
///
/// As `call_phases`, `phases` holding `iters * OPEN_PROBE` `u32`s; lane 0 alone runs it.
///
/// What the steps of an open cost on their own, on device words no other thread touches:
/// 0 `atom.acquire.gpu.or` (its value used), 1 two `ld.relaxed.gpu` of other lines after it,
/// 2 `atom.relaxed.gpu.or`, 3 the two loads after that, 4 `fence.acq_rel.gpu` alone,
/// 5 `st.release.gpu` of the lock word; 6 `atom.acquire.gpu.or` again, 7 three dependent loads
/// of the thread's local memory after it, 8 `atom.relaxed.gpu.or`, 9 the same loads after it.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn open_probe(iters: u32, phases: *mut u32, errors: *mut u32) {
    if global_thread_id() != 0 {
        return;
    }
    // SAFETY: lane 0 of one warp is the only user of `PROBE_WORDS`; the pointers are in bounds.
    let (lock, b, c) = unsafe {
        let base = (&raw mut PROBE_WORDS).cast::<u32>();
        (base, base.add(32), base.add(64))
    };
    let mut sum = 0u32;
    // Thread-local memory the compiler cannot keep in registers (read volatile, indexed by
    // loaded values).
    let local = [0u32; 64];
    for i in 0..iters {
        let mut t = [0u64; OPEN_PROBE + 1];
        let (mut x, mut y, mut z): (u32, u32, u32);
        t[0] = stamp();
        // SAFETY: atomic accesses of valid, aligned device words (above).
        unsafe {
            core::arch::asm!("atom.acquire.gpu.or.b32 {x}, [{a}], 1;", x = out(reg32) x, a = in(reg64) lock, options(nostack));
            sum = sum.wrapping_add(x);
            t[1] = stamp_after(x);
            core::arch::asm!("ld.relaxed.gpu.u32 {y}, [{b}];", "ld.relaxed.gpu.u32 {z}, [{c}];", y = out(reg32) y, z = out(reg32) z, b = in(reg64) b, c = in(reg64) c, options(nostack));
            sum = sum.wrapping_add(y ^ z);
            t[2] = stamp_after(y ^ z);
            core::arch::asm!("atom.relaxed.gpu.or.b32 {x}, [{a}], 1;", x = out(reg32) x, a = in(reg64) lock, options(nostack));
            sum = sum.wrapping_add(x);
            t[3] = stamp_after(x);
            core::arch::asm!("ld.relaxed.gpu.u32 {y}, [{b}];", "ld.relaxed.gpu.u32 {z}, [{c}];", y = out(reg32) y, z = out(reg32) z, b = in(reg64) b, c = in(reg64) c, options(nostack));
            sum = sum.wrapping_add(y ^ z);
            t[4] = stamp_after(y ^ z);
            core::arch::asm!("fence.acq_rel.gpu;", options(nostack));
            t[5] = stamp();
            core::arch::asm!("st.release.gpu.u32 [{a}], {v};", a = in(reg64) lock, v = in(reg32) sum & 0, options(nostack));
            t[6] = stamp();
            // Three dependent loads of this thread's local memory, after an acquire and after a
            // relaxed atomic: does the acquire send them to L2?
            core::arch::asm!("atom.acquire.gpu.or.b32 {x}, [{a}], 1;", x = out(reg32) x, a = in(reg64) lock, options(nostack));
            t[7] = stamp_after(x);
            let v = local_chain(&local, x);
            t[8] = stamp_after(v);
            core::arch::asm!("atom.relaxed.gpu.or.b32 {x}, [{a}], 1;", x = out(reg32) x, a = in(reg64) lock, options(nostack));
            t[9] = stamp_after(x);
            let w = local_chain(&local, x ^ v);
            t[10] = stamp_after(w);
            sum = sum.wrapping_add(v ^ w);
            core::arch::asm!("st.release.gpu.u32 [{a}], {v};", a = in(reg64) lock, v = in(reg32) sum & 0, options(nostack));
        }
        // SAFETY: `phases` holds `iters * OPEN_PROBE` words (launch contract).
        unsafe { record(phases, i, &t) };
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract); `sum` keeps the loads alive
    // and is 0 or more, counted as no error unless it is the impossible `u32::MAX`.
    unsafe { count(errors, u32::from(sum == u32::MAX)) };
}

/// Timed steps of `open_real_probe`.
const OPEN_REAL: usize = 9;

/// The lock bit of a client's port word (`ferry_rpc::Process::with_port_words`).
const PORT_LOCKED: u64 = 1 << 32;

/// # Safety
///
/// As `call_phases`, `phases` holding `iters * OPEN_REAL` `u32`s; lane 0 alone runs it, on a
/// region with word lines whose descriptor the host set up (port 0 is the warp's).
///
/// A real open beside its instructions written out on the same word (port 0's port word in the
/// client's memory), in the same loop: 0 `open_for_words` (port not kept), 1 a values call on
/// it, 2 `close`; 3 `atom.acquire.gpu.or.b64` of the word's lock bit (its value used), 4 the
/// unlock's `st.release.gpu.u64`; 5 the atomic again, 6 an unlock as a lock bitmap's
/// (`fence.acq_rel.gpu`, then a relaxed store); 7 `open_for_words` again with no call before it,
/// 8 its `close`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn open_real_probe(iters: u32, phases: *mut u32, errors: *mut u32) {
    if global_thread_id() != 0 {
        return;
    }
    let client = ferry_device::client().keep_port(false);
    // SAFETY: the host set the descriptor up before launch (the kernel's contract).
    let desc = unsafe { read_volatile(&raw const ferry_device::nvptx::FERRY_RPC) };
    // Port 0's port word: the first `u64` of the client memory (the descriptor's contract).
    let word = desc.locks as usize as *mut u64;
    let mut wrong = 0;
    for i in 0..iters {
        let x = i as u64;
        let mut t = [0u64; OPEN_REAL + 1];
        t[0] = stamp();
        let Ok(mut port) = client.open_for_words(opcode::NOOP) else {
            wrong += 1;
            continue;
        };
        t[1] = stamp();
        let call = port.send_words_with(&x.to_le_bytes(), 8, Memory::ValuesOnly);
        let mut reply = [0u8; 8];
        let status = port.recv_words(call, &mut reply);
        t[2] = stamp_after(reply[0] as u32);
        if status != Ok(status::OK) || u64::from_le_bytes(reply) != x + 1 {
            wrong += 1;
        }
        port.close();
        t[3] = stamp();
        let mut a: u64;
        // SAFETY: atomic accesses of port 0's word, which this lane alone uses (one warp, lane
        // 0); the lock is taken and released as an open and a close would, the state put back.
        unsafe {
            core::arch::asm!("atom.acquire.gpu.or.b64 {x}, [{a}], {b};", x = out(reg64) a, a = in(reg64) word, b = in(reg64) PORT_LOCKED, options(nostack));
            t[4] = stamp_after(a as u32 ^ (a >> 32) as u32);
            // (A lock bit found set is an error: nothing else holds port 0.)
            wrong += u32::from(a & PORT_LOCKED != 0);
            core::arch::asm!("st.release.gpu.u64 [{a}], {v};", a = in(reg64) word, v = in(reg64) a, options(nostack));
            t[5] = stamp();
            core::arch::asm!("atom.acquire.gpu.or.b64 {x}, [{a}], {b};", x = out(reg64) a, a = in(reg64) word, b = in(reg64) PORT_LOCKED, options(nostack));
            t[6] = stamp_after(a as u32 ^ (a >> 32) as u32);
            wrong += u32::from(a & PORT_LOCKED != 0);
            core::arch::asm!("fence.acq_rel.gpu;", "st.relaxed.gpu.u64 [{a}], {v};", a = in(reg64) word, v = in(reg64) a, options(nostack));
            t[7] = stamp();
        }
        wrong += timed_open_close(&client, &mut t, 8);
        // SAFETY: `phases` holds `iters * OPEN_REAL` words (launch contract).
        unsafe { record(phases, i, &t) };
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// Timed steps of `warp_open_probe`.
const WARP_OPEN: usize = 4;

/// `warp_open_probe`'s steps, run by the lanes that call it: 0 the first lane's
/// `atom.acquire.gpu.or.b64` of port 0's word and its broadcast (a port word's lock as an open
/// takes it, written out), 1 the first lane's `st.release.gpu.u64` of it and the lanes' sync;
/// 2 `open_for_words` of the same port, 3 its `close`.
///
/// # Safety
///
/// As `open_real_probe`.
#[inline(always)]
unsafe fn warp_open_steps(iters: u32, phases: *mut u32, errors: *mut u32) {
    use ferry_device::ferry_rpc::Lanes;
    let client = ferry_device::client().keep_port(false);
    let lanes = *client.lanes();
    // SAFETY: the host set the descriptor up before launch (the kernel's contract).
    let desc = unsafe { read_volatile(&raw const ferry_device::nvptx::FERRY_RPC) };
    // Port 0's port word: the first `u64` of the client memory (the descriptor's contract).
    let word = desc.locks as usize as *mut u64;
    let first = lanes.is_first_lane(lanes.active_mask());
    let mut wrong = 0;
    for i in 0..iters {
        let mut t = [0u64; WARP_OPEN + 1];
        let mask = lanes.active_mask();
        t[0] = stamp();
        let mut a = 0u64;
        if lanes.is_first_lane(mask) {
            // SAFETY: port 0's word, which this warp alone uses; taken and put back as an open
            // and a close would.
            unsafe {
                core::arch::asm!("atom.acquire.gpu.or.b64 {x}, [{a}], {b};", x = out(reg64) a, a = in(reg64) word, b = in(reg64) PORT_LOCKED, options(nostack));
            }
        }
        let low = lanes.broadcast(mask, a as u32);
        let high = lanes.broadcast(mask, (a >> 32) as u32);
        t[1] = stamp_after(low ^ high);
        wrong += u32::from(high & 1 != 0);
        if lanes.is_first_lane(mask) {
            // SAFETY: as above.
            unsafe {
                core::arch::asm!("st.release.gpu.u64 [{a}], {v};", a = in(reg64) word, v = in(reg64) a, options(nostack));
            }
        }
        lanes.sync(mask);
        t[2] = stamp();
        wrong += timed_open_close(&client, &mut t, 3);
        if first {
            // SAFETY: `phases` holds `iters * WARP_OPEN` words (launch contract).
            unsafe { record(phases, i, &t) };
        }
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// # Safety
///
/// As `open_real_probe`, `phases` holding `iters * WARP_OPEN` `u32`s; the whole warp runs it.
///
/// A warp's open of a port not kept, in pieces (`warp_open_steps`): where a warp's open costs
/// more than a lone lane's (`warp_open_probe_lane0`).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn warp_open_probe(iters: u32, phases: *mut u32, errors: *mut u32) {
    // SAFETY: the kernel's contract is `warp_open_steps`'.
    unsafe { warp_open_steps(iters, phases, errors) };
}

/// # Safety
///
/// As `warp_open_probe`; lane 0 of the warp alone runs it.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn warp_open_probe_lane0(
    iters: u32,
    phases: *mut u32,
    errors: *mut u32,
) {
    if global_thread_id() == 0 {
        // SAFETY: the kernel's contract is `warp_open_steps`'.
        unsafe { warp_open_steps(iters, phases, errors) };
    }
}

/// The body of `call_phases_words` for the lanes that run it.
///
/// # Safety
///
/// As `call_phases_words`.
#[inline(always)]
unsafe fn phases_words(iters: u32, phases: *mut u32, errors: *mut u32, memory: Memory, keep: bool) {
    let client = ferry_device::client().keep_port(keep);
    let lane = global_thread_id() as u64;
    let mut wrong = 0;
    for i in 0..iters {
        let x = (lane << 32) | i as u64;
        let mut t = [0u64; WORD_PHASES + 1];
        t[0] = stamp();
        let Ok(mut port) = client.open_for_words(opcode::NOOP) else {
            wrong += 1;
            continue;
        };
        t[1] = stamp();
        let call = port.send_words_with(&x.to_le_bytes(), 8, memory);
        t[2] = stamp();
        let mut reply = [0u8; 8];
        let status = port.recv_words(call, &mut reply);
        if lane == 0 {
            // SAFETY: as below; the store waits for the reply (overwritten at the end).
            unsafe { write_volatile(phases.add(i as usize * WORD_PHASES + 2), reply[0] as u32) };
        }
        t[3] = stamp();
        if status != Ok(status::OK) || u64::from_le_bytes(reply) != x + 1 {
            wrong += 1;
        }
        port.close();
        t[4] = stamp();
        if lane == 0 {
            // SAFETY: `phases` holds `iters * WORD_PHASES` words (launch contract).
            unsafe { record(phases, i, &t) };
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
    let client = ferry_device::client();
    let me = (global_thread_id() as u64) << 32;
    let mut wrong = 0;
    for i in 0..calls {
        let x = me | i as u64;
        match ferry_device::host::noop(&client, x) {
            Ok(y) if y == x + 1 => {}
            _ => wrong += 1,
        }
    }
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, wrong) };
}

/// # Safety
///
/// The host set up the descriptor and serves it with a copy engine (`ferry_gpu::copy`);
/// `handle` is a file the host opened for the program; `dst` is device memory of at least
/// `slice` bytes per warp of the launch; `errors` a device `u32`.
///
/// Lane 0 of each warp reads the file's bytes `warp * slice ..` into `dst + warp * slice` with
/// one `read_to_device` call (the host's copy engine moves them); a short read is an error.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bulk_read(
    handle: u64,
    dst: *mut u8,
    slice: u64,
    errors: *mut u32,
) {
    if ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) != 0 {
        return;
    }
    let warp = global_warp_id() as u64;
    let at = warp * slice;
    // SAFETY: the launch contract gives `slice` bytes of device memory per warp from `dst`.
    let buf = unsafe { core::slice::from_raw_parts_mut(dst.add(at as usize), slice as usize) };
    let got = ferry_device::host::read_to_device(&ferry_device::client(), Handle(handle), at, buf);
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, (got != Ok(slice as usize)) as u32) };
}

/// # Safety
///
/// As `bulk_read` (`slice` a multiple of 32), every lane at once: each of the warp's 32 lanes
/// reads its thirty-second of the warp's slice into its place with `read_to_device`, 32 copies
/// in one call, each lane waiting on its own announce word.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bulk_read_lanes(
    handle: u64,
    dst: *mut u8,
    slice: u64,
    errors: *mut u32,
) {
    let lane = ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) as u64;
    let part = slice / 32;
    let at = global_warp_id() as u64 * slice + lane * part;
    // SAFETY: the launch contract gives `slice` bytes of device memory per warp from `dst`;
    // this lane's thirty-second of its warp's.
    let buf = unsafe { core::slice::from_raw_parts_mut(dst.add(at as usize), part as usize) };
    let got = ferry_device::host::read_to_device(&ferry_device::client(), Handle(handle), at, buf);
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, (got != Ok(part as usize)) as u32) };
}

/// # Safety
///
/// As `bulk_read`, the other way: lane 0 of each warp writes `src + warp * slice ..` (`slice`
/// bytes of device memory) to the file at `warp * slice` with one `write_from_device` call.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn bulk_write(
    handle: u64,
    src: *const u8,
    slice: u64,
    errors: *mut u32,
) {
    if ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) != 0 {
        return;
    }
    let warp = global_warp_id() as u64;
    let at = warp * slice;
    // SAFETY: the launch contract gives `slice` bytes of device memory per warp from `src`.
    let buf = unsafe { core::slice::from_raw_parts(src.add(at as usize), slice as usize) };
    let put =
        ferry_device::host::write_from_device(&ferry_device::client(), Handle(handle), at, buf);
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, (put != Ok(slice as usize)) as u32) };
}

/// # Safety
///
/// As `bulk_read`, as a program writes it: each of the warp's 32 lanes reads its thirty-second of
/// the warp's slice with `read_at` (slice a multiple of 32) into device memory, which `read_at`
/// hands to the copy engine when a lane's part is larger than a call through the region carries.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn chunk_read(
    handle: u64,
    dst: *mut u8,
    slice: u64,
    errors: *mut u32,
) {
    let lane = ferry_device::ferry_rpc::Lanes::lane_id(&ferry_device::lanes::Warp) as u64;
    let part = slice / 32;
    let at = global_warp_id() as u64 * slice + lane * part;
    // SAFETY: the launch contract gives `slice` bytes of device memory per warp from `dst`.
    let buf = unsafe { core::slice::from_raw_parts_mut(dst.add(at as usize), part as usize) };
    let got = ferry_device::host::read_at(&ferry_device::client(), Handle(handle), at, buf);
    // SAFETY: `errors` is a valid device `u32` (launch contract).
    unsafe { count(errors, (got != Ok(part as usize)) as u32) };
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
