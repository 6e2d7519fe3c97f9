//! Every warp makes `CALLS` no-op calls (argument 1, default 10 000) and checks every reply.
//!
//! Run at full occupancy: `rpc-gpu-run --blocks 264 --threads 1024 occupancy.ptx 10000` on an
//! H200 (132 SMs × 64 warps). Exit code 0: every lane of every call got its own value plus one;
//! 1: some reply was wrong; 2: a call failed (every thread's, ORed: `ExitOr`).

#![no_std]
#![feature(abi_ptx)]

use ferry_device::nvptx::global_thread_id;

ferry_device::entry!(main);

/// Every thread's code, ORed: the program's exit code (`ferry_device::program::ExitOr`).
static CODE: ferry_device::program::ExitOr = ferry_device::program::ExitOr::new();

fn main(args: ferry_device::Args) -> i32 {
    let calls = args.get_u32(1).unwrap_or(10_000);
    let client = ferry_device::client();
    let me = (global_thread_id() as u64) << 32;
    let mut code = 0;
    for i in 0..calls {
        let x = me | i as u64;
        match ferry_device::host::noop(&client, x) {
            Ok(y) if y == x + 1 => {}
            Ok(_) => code |= 1,
            Err(_) => {
                code |= 2;
                break;
            }
        }
    }
    CODE.finish(&client, code)
}
