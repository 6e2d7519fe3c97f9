//! Hello world on the GPU: every thread prints one line through its host.
//!
//! Build with `scripts/build-ptx`, run with `rpc-gpu-run --blocks 132 --threads 64 hello.ptx`.

#![no_std]
#![feature(abi_ptx)]

use ferry_device::host::Printer;
use ferry_device::nvptx::{block_idx, global_thread_id, thread_idx};

ferry_device::entry!(main);

fn main(_args: ferry_device::Args) -> i32 {
    let client = ferry_device::client();
    let out = Printer::new(&client);
    let printed = ferry_device::println!(
        &out,
        "hello from thread {} (block {}, thread {})",
        global_thread_id(),
        block_idx(),
        thread_idx()
    );
    match printed {
        Ok(n) if n > 0 => 0,
        _ => 1,
    }
}
