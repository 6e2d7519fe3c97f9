//! Hello world on the GPU: every thread prints one line through its host.
//!
//! Build with `scripts/build-ptx`, run with `rpc-gpu-run --blocks 132 --threads 64 hello.ptx`.

#![no_std]
#![feature(abi_ptx)]

use core::fmt::Write;
use ferry_device::nvptx::{block_idx, global_thread_id, thread_idx};

ferry_device::entry!(main);

/// A line buffer `core::fmt` writes into.
struct Line {
    buf: [u8; 96],
    len: usize,
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn main(_args: ferry_device::Args) -> i32 {
    let client = ferry_device::client();
    let mut line = Line {
        buf: [0; 96],
        len: 0,
    };
    let formatted = writeln!(
        line,
        "hello from thread {} (block {}, thread {})",
        global_thread_id(),
        block_idx(),
        thread_idx()
    );
    if formatted.is_err() {
        return 2;
    }
    match ferry_device::services::print(&client, &line.buf[..line.len]) {
        Ok(n) if n == line.len as u64 => 0,
        _ => 1,
    }
}
