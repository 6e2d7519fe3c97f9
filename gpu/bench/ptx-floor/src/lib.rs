//! The histogram's own code (`examples/histogram`) with every host call an external function:
//! the PTX a program of this shape has before any RPC machinery (the host calls' bodies are not
//! in it). Built and measured, never run: no host defines these functions.
//!
//! ```text
//! cd gpu/bench/ptx-floor && ferry-ptx build && wc -c target/nvptx64-nvidia-cuda/release/ptx_floor.ptx
//! ```
#![no_std]
#![feature(abi_ptx)]
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

// SAFETY: never called: the probe is compiled to measure its size, and no definition exists.
// Declared `safe` so that the program reads as the histogram does, without `unsafe` at each call.
unsafe extern "C" {
    safe fn h_open(path: *const u8, len: usize, mode: u32) -> i64;
    safe fn h_close(h: u64) -> i64;
    safe fn h_size(h: u64) -> i64;
    safe fn h_read_at(h: u64, at: u64, buf: *mut u8, len: usize) -> i64;
    safe fn h_write_at(h: u64, at: u64, buf: *const u8, len: usize) -> i64;
    safe fn h_getenv(name: *const u8, len: usize, buf: *mut u8, cap: usize) -> i64;
    safe fn h_malloc(n: u64) -> *mut u8;
    safe fn h_free(p: *mut u8);
    safe fn h_print(buf: *const u8, len: usize, err: u32);
    safe fn h_arg(i: u32, buf: *mut *const u8) -> usize;
}

#[derive(Debug)]
pub struct LibcError(i32);
impl core::fmt::Display for LibcError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let what = match self.0 {
            2 => "no such file",
            13 => "permission denied",
            24 => "too many open files",
            _ => "host error",
        };
        write!(f, "{what} (errno {})", self.0)
    }
}
fn r(v: i64) -> Result<u64, LibcError> {
    if v < 0 {
        Err(LibcError(-v as i32))
    } else {
        Ok(v as u64)
    }
}

struct Printer {
    buf: [u8; 256],
    len: usize,
    err: u32,
}
impl Write for Printer {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                h_print(self.buf.as_ptr(), self.len, self.err);
                self.len = 0;
            }
            self.buf[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}
impl Printer {
    fn flush(&mut self) {
        h_print(self.buf.as_ptr(), self.len, self.err);
        self.len = 0;
    }
}
macro_rules! eprintln { ($($t:tt)*) => {{ let mut p = Printer { buf: [0; 256], len: 0, err: 1 }; let _ = writeln!(p, $($t)*); p.flush(); }} }
macro_rules! println { ($($t:tt)*) => {{ let mut p = Printer { buf: [0; 256], len: 0, err: 0 }; let _ = writeln!(p, $($t)*); p.flush(); }} }

static COUNTS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
static DONE: AtomicU32 = AtomicU32::new(0);
pub const MAX_CHUNK: usize = 4096;

fn chunk() -> usize {
    let mut buf = [0u8; 16];
    let n = h_getenv(b"HISTOGRAM_CHUNK".as_ptr(), 15, buf.as_mut_ptr(), 16);
    match r(n)
        .ok()
        .and_then(|n| core::str::from_utf8(&buf[..n as usize]).ok())
    {
        Some(v) => v.parse().unwrap_or(MAX_CHUNK).clamp(1, MAX_CHUNK),
        None => MAX_CHUNK,
    }
}

fn count_slice(
    input: &str,
    me: u32,
    threads: u32,
    chunk: usize,
    counts: &mut [u32; 256],
) -> Result<(), (i32, LibcError)> {
    let file = r(h_open(input.as_ptr(), input.len(), 1)).map_err(|e| (2, e))?;
    let size = r(h_size(file)).map_err(|e| (4, e));
    let counted = size.and_then(|size| {
        let part = size.div_ceil(threads as u64);
        let start = (me as u64 * part).min(size);
        let end = (start + part).min(size);
        let mut buf = [0u8; MAX_CHUNK];
        let mut at = start;
        while at < end {
            let want = ((end - at) as usize).min(chunk);
            let got = r(h_read_at(file, at, buf.as_mut_ptr(), want)).map_err(|e| (4, e))? as usize;
            if got == 0 {
                break;
            }
            for &b in &buf[..got] {
                counts[b as usize] += 1;
            }
            at += got as u64;
        }
        Ok(())
    });
    h_close(file);
    counted
}

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

fn write_histogram(output: &str) -> i32 {
    const BYTES: usize = 256 * 32;
    let block = h_malloc(BYTES as u64);
    if block.is_null() {
        return 16;
    }
    let mut text = Block {
        // SAFETY: `h_malloc` returns `BYTES` bytes of this thread's own, or null (checked above).
        buf: unsafe { core::slice::from_raw_parts_mut(block, BYTES) },
        len: 0,
    };
    let (mut total, mut values) = (0u64, 0u32);
    for (value, c) in COUNTS.iter().enumerate() {
        let n = c.swap(0, Ordering::Relaxed);
        total += n;
        values += (n > 0) as u32;
        let _ = writeln!(text, "{value} {n}");
    }
    let written = r(h_open(output.as_ptr(), output.len(), 2 | 4 | 8)).and_then(|h| {
        let w = r(h_write_at(h, 0, text.buf.as_ptr(), text.len));
        let c = r(h_close(h));
        w.and_then(|n| c.map(|_| n))
    });
    h_free(block);
    match written {
        Ok(n) if n as usize == text.len => {
            println!("{total} bytes counted, {values} distinct values, histogram in {output}");
            0
        }
        Ok(_) => 8,
        Err(e) => {
            eprintln!("{output}: {e}");
            8
        }
    }
}

fn arg(i: u32) -> Option<&'static str> {
    let mut p = core::ptr::null();
    let n = h_arg(i, &mut p);
    if p.is_null() {
        return None;
    }
    // SAFETY: `h_arg` points `p` at the argument's `n` bytes, which live as long as the program.
    core::str::from_utf8(unsafe { core::slice::from_raw_parts(p, n) }).ok()
}

/// The entry, as `ferry_device::entry!` makes it.
///
/// # Safety
/// `status` points to an `i32` the kernel may write (never run: see the crate's docs).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn _start(me: u32, threads: u32, status: *mut i32) {
    let (Some(input), Some(output)) = (arg(1), arg(2)) else {
        if me == 0 {
            eprintln!("usage: histogram INPUT OUTPUT");
        }
        // SAFETY: the function's contract.
        unsafe { *status |= 1 };
        return;
    };
    let chunk = chunk();
    let mut counts = [0u32; 256];
    let mut code = match count_slice(input, me, threads, chunk, &mut counts) {
        Ok(()) => 0,
        Err((code, e)) => {
            eprintln!("thread {me}: {input}: {e}");
            code
        }
    };
    for (c, n) in COUNTS.iter().zip(counts.iter()) {
        if *n > 0 {
            c.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }
    core::sync::atomic::fence(Ordering::AcqRel);
    if DONE.fetch_add(1, Ordering::AcqRel) + 1 == threads {
        DONE.store(0, Ordering::Relaxed);
        code |= write_histogram(output);
    }
    // SAFETY: the function's contract.
    unsafe { *status |= code };
}
