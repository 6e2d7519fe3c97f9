//! The print benchmark: `N` lines in all (argument 1, default 1 000 000), `line <i>` for every
//! `i < N`, thread `t` of `T` printing `i = t, t + T, t + 2T...` with `println!` (one message per
//! warp and line round). Returns 1 if a print failed.
//!
//! `rpc-gpu-run --blocks 132 --threads 256 printbench.ptx 1000000 > lines`; the CUDA C++
//! counterpart is `gpu/bench/printbench.cu`.

#![no_std]
#![feature(abi_ptx)]

use ferry_device::host::Printer;
use ferry_device::nvptx::{block_dim, global_thread_id, grid_dim};

ferry_device::entry!(main);

/// Every thread's code, ORed: the program's exit code (`ferry_device::program::ExitOr`).
static CODE: ferry_device::program::ExitOr = ferry_device::program::ExitOr::new();

fn main(args: ferry_device::Args) -> i32 {
    let n = args.get_u32(1).unwrap_or(1_000_000);
    let client = ferry_device::client();
    let out = Printer::new(&client);
    let threads = grid_dim() * block_dim();
    let me = global_thread_id();
    let rounds = n.div_ceil(threads);
    let mut failed = 0;
    for r in 0..rounds {
        let i = r * threads + me;
        // Every lane takes part in every round; those past the end print nothing.
        let sent = if i < n {
            ferry_device::println!(&out, "line {i}")
        } else {
            ferry_device::print!(&out, "")
        };
        if sent.is_err() {
            failed = 1;
        }
    }
    CODE.finish(&client, failed)
}
