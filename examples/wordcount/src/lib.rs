//! Word count on the GPU: every thread counts the lines, words and bytes of its own part of a
//! file (read at offsets through the host services), prints a line, and the last thread to
//! finish writes the totals, as `wc` prints them, to a summary file.
//!
//! ```text
//! ferry-ptx build                                    # target/nvptx64-nvidia-cuda/release/ferry_wordcount.ptx
//! rpc-gpu-run --blocks 264 --threads 1024 ferry_wordcount.ptx INPUT SUMMARY
//! cargo test                                         # the same program on CPU threads
//! ```
//!
//! A word is a run of bytes that are not white space (`' '`, `\t`, `\n`, `\v`, `\f`, `\r`, as C's
//! `isspace` and `wc` say); a thread counts the words that *start* in its part, so a word split
//! between two parts is counted once.

#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

use core::sync::atomic::{AtomicU64, Ordering};

use ferry_device::host::{self, mode, Handle, Printer};
use ferry_device::program::{self, Args};
use ferry_device::sync::{self, LastOut};

ferry_device::entry!(main);

/// Totals over every thread.
static LINES: AtomicU64 = AtomicU64::new(0);
static WORDS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
/// The input, opened once by thread 0 for all: its handle (0: not yet; `u64::MAX`: failed).
static FILE: AtomicU64 = AtomicU64::new(0);
/// Its size, set before the handle.
static SIZE: AtomicU64 = AtomicU64::new(0);
/// Who finishes last.
static DONE: LastOut = LastOut::new();
/// Every thread's exit code, ORed: the program's (a thread's failure is not lost when thread 0
/// succeeds).
static CODE: program::ExitOr = program::ExitOr::new();

/// Bytes a thread reads per call into its stack buffer.
const CHUNK: usize = 2048;

/// Exit codes.
const USAGE: i32 = 2;
const NO_INPUT: i32 = 4;
const READ_FAILED: i32 = 8;
const NO_SUMMARY: i32 = 16;

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Counts this thread's part of `file` (of `SIZE` bytes, shared by `threads` threads): its
/// lines, words and bytes.
fn count<L, M, W>(
    client: &host::HostClient<'_, L, M, W>,
    file: Handle,
    me: u32,
    threads: u32,
) -> Result<(u64, u64, u64), i32>
where
    L: ferry_device::ferry_rpc::Lanes,
    M: ferry_device::ferry_rpc::Mailbox,
    W: ferry_device::ferry_rpc::Wait,
{
    let size = SIZE.load(Ordering::Relaxed);
    // My part, and the byte before it (does a word start at my first byte?).
    let part = size.div_ceil(threads as u64);
    let start = (me as u64 * part).min(size);
    let end = (start + part).min(size);
    let mut buf = [0u8; CHUNK];
    let mut prev = b' ';
    if start > 0 {
        match host::read_at(client, file, start - 1, &mut buf[..1]) {
            Ok(1) => prev = buf[0],
            _ => return Err(READ_FAILED),
        }
    }
    let (mut lines, mut words) = (0u64, 0u64);
    let mut at = start;
    while at < end {
        let want = ((end - at) as usize).min(CHUNK);
        let got = match host::read_at(client, file, at, &mut buf[..want]) {
            Ok(n) if n == want => n,
            _ => return Err(READ_FAILED),
        };
        for &b in &buf[..got] {
            lines += (b == b'\n') as u64;
            words += (!is_space(b) && is_space(prev)) as u64;
            prev = b;
        }
        at += got as u64;
    }
    Ok((lines, words, end - start))
}

/// The program: `ferry_wordcount INPUT SUMMARY`.
pub fn main(args: Args) -> i32 {
    let client = program::client();
    // This thread's code; the program's is every thread's ORed.
    let code = (|| -> i32 {
        let out = Printer::new(&client);
        let me = program::global_thread_id();
        let threads = program::global_threads();
        let (Some(input), Some(summary)) = (args.get_str(1), args.get_str(2)) else {
            if me == 0 {
                let _ = ferry_device::eprintln!(&out, "usage: ferry_wordcount INPUT SUMMARY");
            }
            return USAGE;
        };

        // One handle for every thread (reads at offsets share it): thread 0 opens the file.
        if me == 0 {
            let opened = host::open(&client, input, mode::READ)
                .and_then(|h| host::size(&client, h).map(|size| (h, size)));
            match opened {
                Ok((h, size)) => {
                    SIZE.store(size, Ordering::Relaxed);
                    sync::store_release(&FILE, h.0);
                }
                Err(e) => {
                    let _ = ferry_device::eprintln!(&out, "{input}: {e}");
                    sync::store_release(&FILE, u64::MAX);
                }
            }
        }
        let file = loop {
            match sync::load_acquire(&FILE) {
                0 => core::hint::spin_loop(),
                h => break h,
            }
        };
        let counted = if file == u64::MAX {
            Err(NO_INPUT)
        } else {
            count(&client, Handle(file), me, threads)
        };
        if let Ok((lines, words, bytes)) = counted {
            let _ = ferry_device::println!(
                &out,
                "thread {me}: {lines} lines, {words} words, {bytes} bytes"
            );
            LINES.fetch_add(lines, Ordering::Relaxed);
            WORDS.fetch_add(words, Ordering::Relaxed);
            BYTES.fetch_add(bytes, Ordering::Relaxed);
        }

        // Every thread arrives, counted or not; the last one out sees every count, puts the
        // statics back for another run in the same process, and writes the summary.
        if !DONE.arrive(threads) {
            return counted.err().unwrap_or(0);
        }
        let (lines, words, bytes) = (
            LINES.swap(0, Ordering::Relaxed),
            WORDS.swap(0, Ordering::Relaxed),
            BYTES.swap(0, Ordering::Relaxed),
        );
        FILE.store(0, Ordering::Relaxed);
        DONE.reset();
        if file == u64::MAX {
            return NO_INPUT;
        }
        let _ = host::close(&client, Handle(file));
        if let Err(code) = counted {
            return code;
        }
        let _ = ferry_device::println!(&out, "{lines} {words} {bytes} {input}");
        let written = host::open(&client, summary, mode::from_c("w").unwrap_or(0)).and_then(|h| {
            let w = ferry_device::fprint!(&out, h, "{lines} {words} {bytes}\n");
            let closed = host::close(&client, h);
            w.and(closed)
        });
        match written {
            Ok(()) => 0,
            Err(e) => {
                let _ = ferry_device::eprintln!(&out, "{summary}: {e}");
                NO_SUMMARY
            }
        }
    })();
    CODE.finish(&client, code)
}
