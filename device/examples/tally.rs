//! A user's own service on the GPU: every thread keeps a running total on the host through the
//! `Tally` service (`ferry-example-tally`), then prints what it and the host think.
//!
//! `gpu-tally tally.ptx [ROUNDS]` (examples/src/bin/gpu-tally.rs) runs it, serving `Tally` and the
//! C-library services. Every thread adds `amount(me, round)` to its slot (its global thread id)
//! for ROUNDS rounds (default `DEFAULT_ROUNDS`), each lane of a warp with its own arguments in the
//! same call, and checks each reply against its own running sum; then asks the total and a
//! description, and prints a line with both. The program's exit code is 0 if every reply matched,
//! else the OR of every thread's failed steps' bits (`ExitOr`).

#![no_std]
#![feature(abi_ptx)]

use ferry_device::host::Printer;
use ferry_device::nvptx::global_thread_id;
use ferry_example_tally::{amount, Tally, DEFAULT_ROUNDS, DESCRIBE_LIMIT};

ferry_device::entry!(main);

/// Every thread's code, ORed: the program's exit code (`ferry_device::program::ExitOr`).
static CODE: ferry_device::program::ExitOr = ferry_device::program::ExitOr::new();

/// Failure bits.
const ADD: i32 = 1;
const TOTAL: i32 = 2;
const DESCRIBE: i32 = 4;
const PRINT: i32 = 8;

fn main(args: ferry_device::Args) -> i32 {
    let client = ferry_device::client();
    let out = Printer::new(&client);
    let tally = Tally::client(&client);
    let me = global_thread_id();
    // Every lane gets the same arguments, so the lanes of a warp make the same calls.
    let rounds = args.get_u32(1).unwrap_or(DEFAULT_ROUNDS);
    let mut failed = 0;

    let mut sum = 0u64;
    for round in 0..rounds {
        let n = amount(me, round);
        sum += n;
        if tally.add(me, n) != Ok(sum) {
            failed |= ADD;
        }
    }
    let host_total = match tally.total(me) {
        Ok(t) => t,
        Err(_) => {
            failed |= TOTAL;
            u64::MAX
        }
    };
    if host_total != sum {
        failed |= TOTAL;
    }
    let mut buf = [0u8; DESCRIBE_LIMIT as usize];
    let described = match tally.describe_into(me, &mut buf) {
        Ok(text) => text,
        Err(_) => {
            failed |= DESCRIBE;
            "(no description)"
        }
    };
    let verdict = if failed == 0 { "ok" } else { "MISMATCH" };
    let printed = ferry_device::println!(
        &out,
        "thread {me}: kernel total {sum}, host total {host_total}, host says \"{described}\": {verdict}"
    );
    if printed.is_err() {
        failed |= PRINT;
    }
    CODE.finish(&client, failed)
}
