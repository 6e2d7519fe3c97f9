//! Files, printing, malloc and an exit code through the `Libc` host services.
//!
//! `rpc-gpu-run --blocks 2 --threads 64 files.ptx DIR CODE [exit]`: every thread
//! - prints a line with `println!`;
//! - writes its own file `DIR/ferry-files-<thread>` (more bytes than one call carries, so the
//!   write and the read are split in chunks), seeks back, reads it back and checks every byte, checks
//!   that the next read finds the end of the file, closes and removes it;
//! - mallocs a block from the heap the loader reserved, fills it, checks it; writes it to its file
//!   and reads it back into a second block with the host's copy engine (`write_from_device`,
//!   `read_to_device`: every lane of a warp in one call, each waiting on its own announce word),
//!   and checks that a read into a lane's stack is refused; frees both blocks;
//! - prints a second line with its verdict (`ok`, or which step failed).
//!
//! Then it returns CODE if every step passed, else 64 | the failed steps' bits; with `exit`,
//! every warp instead calls the host's `exit` with that code (the first one served ends the
//! loader, so lines still in flight may be lost). Each thread's file is its own and writable, so
//! it takes a descriptor of the loader's (`RLIMIT_NOFILE`): use fewer threads than that. Its
//! stack frames need more than the driver's default 1 KiB per thread (the loader gives 8 KiB).

#![no_std]
#![feature(abi_ptx)]

use core::fmt::Write;

use ferry_device::ferry_rpc::{Lanes, Mailbox, Wait};
use ferry_device::host::{self, mode, Printer, SEEK_SET};
use ferry_device::nvptx::{block_idx, global_thread_id, thread_idx};

ferry_device::entry!(main);

/// Every thread's code, ORed: the program's exit code (`ferry_device::program::ExitOr`).
static CODE: ferry_device::program::ExitOr = ferry_device::program::ExitOr::new();

/// The bytes each thread writes and reads back.
const FILE_BYTES: usize = 1300;

/// Failure bits.
const BAD_ARGS: i32 = 1;
const PRINT: i32 = 2;
const FILE: i32 = 4;
const READ_BACK: i32 = 8;
const MALLOC: i32 = 16;
const DEVICE_COPY: i32 = 128;

/// A string buffer `core::fmt` writes into.
struct Text<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    fn new() -> Self {
        Text {
            buf: [0; N],
            len: 0,
        }
    }
    fn as_str(&self) -> &str {
        // Only `write_str` fills the buffer, with whole `str`s.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> Write for Text<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > N {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `ok`, or the failed steps' bits.
struct Verdict(i32);

impl core::fmt::Display for Verdict {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            0 => f.write_str("ok"),
            bits => write!(f, "FAILED {bits:#x}"),
        }
    }
}

/// Writes the `size` bytes at `p` (device memory holding thread `me`'s pattern; none if null)
/// to a file at `path` and reads them back into a second block with the host's copy engine;
/// checks them, and that a read into this lane's stack is refused. Every lane makes the same
/// calls (a lane without its blocks copies nothing). Returns `DEVICE_COPY` if anything failed.
fn device_copy<L: Lanes, M: Mailbox, W: Wait>(
    client: &host::HostClient<'_, L, M, W>,
    path: &str,
    p: *mut u8,
    size: usize,
    me: u32,
) -> i32 {
    let mut failed = 0;
    let q = match host::malloc(client, size as u64) {
        Ok(q) if !q.is_null() && !p.is_null() => q,
        Ok(q) => {
            let _ = host::free(client, q);
            failed = DEVICE_COPY;
            core::ptr::null_mut()
        }
        Err(_) => {
            failed = DEVICE_COPY;
            core::ptr::null_mut()
        }
    };
    let n = if q.is_null() { 0 } else { size };
    // SAFETY: with `q` non-null both blocks are `size` bytes of device memory this lane holds
    // (from `malloc`); otherwise empty slices at a dangling, aligned address.
    let (from, to) = unsafe {
        if q.is_null() {
            (&[][..], &mut [][..])
        } else {
            (
                core::slice::from_raw_parts(p as *const u8, n),
                core::slice::from_raw_parts_mut(q, n),
            )
        }
    };
    let f = host::open(client, path, mode::from_c("w+").unwrap_or(0)).unwrap_or(host::Handle(0));
    if host::write_from_device(client, f, 0, from) != Ok(n)
        || host::read_to_device(client, f, 0, to) != Ok(n)
        || to.iter().enumerate().any(|(i, &b)| b != pattern(me, i))
    {
        failed = DEVICE_COPY;
    }
    // A lane's stack is no device memory the host can copy to: refused, and nothing waits.
    let mut stack = [0u8; 8];
    let refused = host::read_to_device(client, f, 0, &mut stack);
    if refused
        != Err(ferry_device::ferry_rpc::service::Error::App(
            host::HostError::BadAddress,
        ))
    {
        failed = DEVICE_COPY;
    }
    if host::close(client, f).is_err() || host::remove(client, path).is_err() {
        failed = DEVICE_COPY;
    }
    if host::free(client, q).is_err() {
        failed = DEVICE_COPY;
    }
    failed
}

/// The byte at `i` of thread `t`'s file.
fn pattern(t: u32, i: usize) -> u8 {
    (t as usize * 7 + i * 13) as u8
}

fn main(args: ferry_device::Args) -> i32 {
    let client = ferry_device::client();
    let out = Printer::new(&client);
    let me = global_thread_id();
    let lane = client.lanes().lane_id();
    let mut failed = 0;

    let hello = ferry_device::println!(
        &out,
        "thread {me} (block {}, thread {}, lane {lane}): hello",
        block_idx(),
        thread_idx()
    );
    if hello.is_err() {
        failed |= PRINT;
    }

    // Arguments: every lane of a warp gets the same, so they agree on what to call.
    let dir = args.get(1).and_then(|d| core::str::from_utf8(d).ok());
    let code = args.get_u32(2).map(|c| c as i32);
    let (Some(dir), Some(code)) = (dir, code) else {
        return BAD_ARGS | 64;
    };
    let exit = args.get(3) == Some(b"exit".as_slice());

    // A file of our own: write, seek back, read, check, end of file, close, remove.
    let mut path = Text::<200>::new();
    if write!(path, "{dir}/ferry-files-{me}").is_err() {
        path.len = 0; // The host refuses the empty path: this lane fails, the others go on.
    }
    let mut data = [0u8; FILE_BYTES];
    for (i, b) in data.iter_mut().enumerate() {
        *b = pattern(me, i);
    }
    // Every lane makes the same calls (a lane whose open failed passes handle 0, which the host
    // refuses), so the warp's lanes never split between different calls.
    let opened = host::open(&client, path.as_str(), mode::from_c("w+").unwrap_or(0));
    if opened.is_err() {
        failed |= FILE;
    }
    let f = opened.unwrap_or(host::Handle(0));
    if host::write(&client, f, &data) != Ok(FILE_BYTES) {
        failed |= FILE;
    }
    if host::seek(&client, f, 0, SEEK_SET) != Ok(0) {
        failed |= FILE;
    }
    // Read back into the same buffer, cleared, and check it against the pattern.
    data.fill(0);
    match host::read(&client, f, &mut data) {
        Ok(FILE_BYTES) if data.iter().enumerate().all(|(i, &b)| b == pattern(me, i)) => {}
        _ => failed |= READ_BACK,
    }
    if host::read(&client, f, &mut data[..1]) != Ok(0) {
        failed |= READ_BACK;
    }
    if host::close(&client, f).is_err() {
        failed |= FILE;
    }
    if host::remove(&client, path.as_str()).is_err() {
        failed |= FILE;
    }

    // A block from the reserved heap: fill, check, free (a null pointer's free is ignored).
    let size = 64 + 16 * (me as u64 % 5);
    let p = match host::malloc(&client, size) {
        Ok(p) if !p.is_null() && p as usize % 16 == 0 => p,
        Ok(_) | Err(_) => {
            failed |= MALLOC;
            core::ptr::null_mut()
        }
    };
    if !p.is_null() {
        // SAFETY: `malloc` handed us `size` bytes of device memory no one else holds.
        let block = unsafe { core::slice::from_raw_parts_mut(p, size as usize) };
        for (i, b) in block.iter_mut().enumerate() {
            *b = pattern(me, i);
        }
        if block.iter().enumerate().any(|(i, &b)| b != pattern(me, i)) {
            failed |= MALLOC;
        }
    }
    failed |= device_copy(&client, path.as_str(), p, size as usize, me);
    if host::free(&client, p).is_err() {
        failed |= MALLOC;
    }

    let verdict = ferry_device::println!(&out, "thread {me}: {}", Verdict(failed));
    if verdict.is_err() {
        failed |= PRINT;
    }
    let code = if failed == 0 { code } else { 64 | failed };
    let code = if exit {
        match host::exit(&client, code) {
            // A host that records the code answers: the return adds nothing to it.
            Ok(()) => 0,
            Err(_) => 64 | 32,
        }
    } else {
        code
    };
    CODE.finish(&client, code)
}
