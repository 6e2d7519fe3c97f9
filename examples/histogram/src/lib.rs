//! A byte histogram on the GPU, written as the README's GPU section says: every thread opens the
//! input, reads its slice at offsets into a buffer on its own stack, and adds its counts to a
//! grid-wide histogram; the last thread out formats the 256 counts into a block it `malloc`s,
//! writes them to the output file and prints one line.
//!
//! ```text
//! ferry-ptx build                            # target/nvptx64-nvidia-cuda/release/ferry_histogram.ptx
//! rpc-gpu-run --blocks 132 --threads 256 ferry_histogram.ptx INPUT OUTPUT
//! HISTOGRAM_CHUNK=1024 rpc-gpu-run ...        # bytes per read (default and most: 4096)
//! cargo test                                 # the same program on CPU threads
//! ```
//!
//! The output has one line per byte value, `VALUE COUNT`, in order. The exit code is 0 when every
//! thread counted its slice and the output was written; otherwise the OR of the failures' bits
//! below (each failing thread also says why on standard error).

#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use core::fmt::Write;
use core::sync::atomic::{AtomicU64, Ordering};

use ferry_device::host::{self, mode, Handle, Printer};
use ferry_device::program::{self, Args, Client};
use ferry_device::sync::LastOut;

ferry_device::entry!(main);

/// The grid-wide histogram.
static COUNTS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
/// Who finishes last.
static DONE: LastOut = LastOut::new();

/// The most bytes a thread reads per call, into its stack buffer.
pub const MAX_CHUNK: usize = 4096;

/// Exit code bits.
pub const USAGE: i32 = 1;
pub const OPEN_FAILED: i32 = 2;
pub const READ_FAILED: i32 = 4;
pub const OUTPUT_FAILED: i32 = 8;
pub const NO_MEMORY: i32 = 16;

/// Bytes per read: `HISTOGRAM_CHUNK` from the host's environment, else [`MAX_CHUNK`].
fn chunk(client: &Client) -> usize {
    let mut buf = [0u8; 16];
    match host::getenv(client, "HISTOGRAM_CHUNK", &mut buf) {
        Ok(v) => v.parse().unwrap_or(MAX_CHUNK).clamp(1, MAX_CHUNK),
        Err(_) => MAX_CHUNK,
    }
}

/// Counts this thread's slice of `input` (of `threads` equal slices) into `counts`.
fn count_slice(
    client: &Client,
    input: &str,
    me: u32,
    threads: u32,
    chunk: usize,
    counts: &mut [u32; 256],
) -> Result<(), (i32, host::LibcError)> {
    let file = host::open(client, input, mode::READ).map_err(|e| (OPEN_FAILED, e))?;
    let counted = read_slice(client, file, me, threads, chunk, counts);
    let _ = host::close(client, file);
    counted
}

fn read_slice(
    client: &Client,
    file: Handle,
    me: u32,
    threads: u32,
    chunk: usize,
    counts: &mut [u32; 256],
) -> Result<(), (i32, host::LibcError)> {
    let size = host::size(client, file).map_err(|e| (READ_FAILED, e))?;
    let part = size.div_ceil(threads as u64);
    let start = (me as u64 * part).min(size);
    let end = (start + part).min(size);
    let mut buf = [0u8; MAX_CHUNK];
    let mut at = start;
    // Bytes in `counts` not yet added to the grid's: a slice of more than 4 GiB adds in parts.
    let mut pending = 0u64;
    while at < end {
        let want = ((end - at) as usize).min(chunk);
        let got =
            host::read_at(client, file, at, &mut buf[..want]).map_err(|e| (READ_FAILED, e))?;
        if got == 0 {
            // The file shrank under us: what is left of the slice is gone.
            break;
        }
        if pending + got as u64 > u32::MAX as u64 {
            add_to_grid(counts);
            pending = 0;
        }
        for &b in &buf[..got] {
            counts[b as usize] += 1;
        }
        pending += got as u64;
        at += got as u64;
    }
    Ok(())
}

/// Adds this thread's counts to the grid's and clears them.
fn add_to_grid(counts: &mut [u32; 256]) {
    for (c, n) in COUNTS.iter().zip(counts.iter_mut()) {
        if *n > 0 {
            c.fetch_add(*n as u64, Ordering::Relaxed);
            *n = 0;
        }
    }
}

/// A `core::fmt` sink over a block of memory.
struct Block<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Write for Block<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The last thread out: the 256 lines, formatted into a `malloc`ed block, written to `output`.
fn write_histogram(client: &Client, output: &str) -> i32 {
    const BYTES: usize = 256 * 32;
    let out = Printer::new(client);
    let Ok(block) = host::malloc(client, BYTES as u64) else {
        return NO_MEMORY;
    };
    // SAFETY: `malloc` returned `BYTES` bytes of the program's heap, this thread's alone until it
    // frees them below.
    let mut text = Block {
        buf: unsafe { core::slice::from_raw_parts_mut(block, BYTES) },
        len: 0,
    };
    let mut total = 0u64;
    let mut values = 0;
    for (value, c) in COUNTS.iter().enumerate() {
        // Back to zero for the next run in the same process (the CPU tests run it many times).
        let n = c.swap(0, Ordering::Relaxed);
        total += n;
        values += (n > 0) as u32;
        let _ = writeln!(text, "{value} {n}");
    }
    let written =
        host::open(client, output, mode::WRITE | mode::CREATE | mode::TRUNCATE).and_then(|h| {
            let w = host::write_at(client, h, 0, &text.buf[..text.len]);
            let closed = host::close(client, h);
            w.and_then(|n| closed.map(|()| n))
        });
    let _ = host::free(client, block);
    match written {
        Ok(n) if n == text.len => {
            let _ = ferry_device::println!(
                &out,
                "{total} bytes counted, {values} distinct values, histogram in {output}"
            );
            0
        }
        Ok(_) => OUTPUT_FAILED,
        Err(e) => {
            let _ = ferry_device::eprintln!(&out, "{output}: {e}");
            OUTPUT_FAILED
        }
    }
}

/// The program: `histogram INPUT OUTPUT`.
pub fn main(args: Args) -> i32 {
    let client = program::client();
    let out = Printer::new(&client);
    let me = program::global_thread_id();
    let threads = program::global_threads();
    let (Some(input), Some(output)) = (args.get_str(1), args.get_str(2)) else {
        if me == 0 {
            let _ = ferry_device::eprintln!(&out, "usage: histogram INPUT OUTPUT");
        }
        return USAGE;
    };
    let chunk = chunk(&client);

    let mut counts = [0u32; 256];
    let mut code = match count_slice(&client, input, me, threads, chunk, &mut counts) {
        Ok(()) => 0,
        Err((code, e)) => {
            let _ = ferry_device::eprintln!(&out, "thread {me}: {input}: {e}");
            code
        }
    };
    add_to_grid(&mut counts);

    // The last one out sees every thread's counts (`arrive` orders them before it).
    if DONE.arrive(threads) {
        DONE.reset();
        code |= write_histogram(&client, output);
    }
    code
}
