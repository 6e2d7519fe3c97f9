//! The host services' copies between files and the GPU's memory ([`Libc::ReadToDevice`],
//! [`Libc::WriteFromDevice`]): the GPU's copy engine moves the bytes between pinned staging
//! buffers and device memory while the file is read into, or written from, the other buffer.
//!
//! A device address comes from the program: it is handed to the driver only, never dereferenced
//! here. Before any copy the whole range must lie in one allocation of the device's own memory
//! (`cuPointerGetAttribute`: memory type, allocation start and size); anything else is
//! [`HostError::BadAddress`]. Each copy is also checked by the driver.
//!
//! Each serving thread that copies takes one set of staging buffers (two pinned buffers, a stream
//! and two events) from a pool made when the program is loaded, so no pinned memory is allocated
//! while a kernel runs unless more threads copy at once than the pool holds.
//!
//! [`Libc::ReadToDevice`]: ferry_libc::Libc::ReadToDevice
//! [`Libc::WriteFromDevice`]: ferry_libc::Libc::WriteFromDevice

use std::ffi::c_void;
use std::io;
use std::sync::Mutex;

use cudarc::driver::sys;
use ferry_libc::{DeviceCopy, HostError};

use crate::cuda::Cuda;
use crate::Error;

/// Bytes of each staging buffer: large enough that a copy's fixed cost is small against its
/// bytes, small enough that reading the file and copying overlap early.
pub const STAGING_BYTES: usize = 4 << 20;

/// Threads that read (or write) one staging buffer's piece of the file at once, in parts of at
/// least `PART_BYTES`: one thread's read of the page cache is a memory copy, several times slower
/// than the copy engine.
pub const READERS: usize = 4;

/// The smallest part one of the `READERS` takes.
const PART_BYTES: usize = 1 << 20;

/// Fills `buf` with the source's bytes from `at` on through `read`; returns how many (fewer only
/// at the source's end).
fn read_all(
    read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    at: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read(at + n as u64, &mut buf[n..])? {
            0 => break,
            m => n += m,
        }
    }
    Ok(n)
}

/// Fills `buf` from `at` on, in up to `READERS` parts read at once (the first on this thread);
/// returns how many bytes of `buf`, from its start, hold the source's (the rest: past its end).
fn read_parallel(
    read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    at: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let parts = (buf.len() / PART_BYTES).clamp(1, READERS);
    if parts == 1 {
        return read_all(read, at, buf);
    }
    let part = buf.len().div_ceil(parts);
    let counts: Vec<io::Result<usize>> = std::thread::scope(|s| {
        let mut chunks = buf.chunks_mut(part).enumerate();
        let first = chunks.next();
        let others: Vec<_> = chunks
            .map(|(i, c)| s.spawn(move || read_all(read, at + (i * part) as u64, c)))
            .collect();
        let mut counts = vec![first.map_or(Ok(0), |(_, c)| read_all(read, at, c))];
        counts.extend(others.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(io::Error::other("a reader panicked")))
        }));
        counts
    });
    // The bytes up to the first part the source's end cut short.
    let mut n = 0;
    for (i, c) in counts.into_iter().enumerate() {
        let got = c?;
        n += got;
        if got < part.min(buf.len() - i * part) {
            break;
        }
    }
    Ok(n)
}

/// One serving thread's staging: two pinned buffers, the stream their copies go on, and an event
/// per buffer marking when its last copy is done.
struct Staging {
    buffers: [*mut u8; 2],
    stream: sys::CUstream,
    done: [sys::CUevent; 2],
}

/// The GPU's memory as [`DeviceCopy`] for [`ferry_libc::LibcHost`] (the loader gives it to the
/// program's host services).
pub struct CudaCopy {
    context: sys::CUcontext,
    pool: Mutex<Vec<Staging>>,
}

// SAFETY: the context handle and the staging resources are driver objects usable from any thread
// that makes the context current (every use does); a staging set is used by one thread at a time
// (taken out of the pool under its lock).
unsafe impl Send for CudaCopy {}
// SAFETY: as above.
unsafe impl Sync for CudaCopy {}

impl std::fmt::Debug for CudaCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaCopy").finish_non_exhaustive()
    }
}

fn ok(r: sys::CUresult) -> bool {
    r == sys::CUresult::CUDA_SUCCESS
}

impl CudaCopy {
    /// Copies for `cuda`'s device, with staging for `threads` serving threads made now. It must
    /// not outlive `cuda` (the loader drops it with the program).
    pub fn new(cuda: &Cuda, threads: usize) -> Result<CudaCopy, Error> {
        cuda.make_current()?;
        let copy = CudaCopy {
            context: cuda.context(),
            pool: Mutex::new(Vec::new()),
        };
        for _ in 0..threads.max(1) {
            let staging = copy.make_staging().ok_or_else(|| Error::Cuda {
                call: "cuMemHostAlloc (staging)",
                code: 0,
                message: "could not make pinned staging buffers".into(),
            })?;
            copy.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(staging);
        }
        Ok(copy)
    }

    fn current(&self) -> bool {
        // SAFETY: the context is the program's, alive while this value is (see `new`).
        ok(unsafe { sys::cuCtxSetCurrent(self.context) })
    }

    /// A new staging set, or `None` if the driver refuses one.
    fn make_staging(&self) -> Option<Staging> {
        let mut staging = Staging {
            buffers: [std::ptr::null_mut(); 2],
            stream: std::ptr::null_mut(),
            done: [std::ptr::null_mut(); 2],
        };
        let mut made = true;
        for b in &mut staging.buffers {
            let mut p = std::ptr::null_mut();
            // SAFETY: a valid out-pointer and a non-zero size.
            made &= ok(unsafe {
                sys::cuMemHostAlloc(&mut p, STAGING_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE)
            });
            *b = p.cast();
        }
        // SAFETY: valid out-pointers; flag 1 is CU_STREAM_NON_BLOCKING (no implicit sync with
        // the kernel's stream), 2 is CU_EVENT_DISABLE_TIMING.
        made &= ok(unsafe { sys::cuStreamCreate(&mut staging.stream, 1) });
        for e in &mut staging.done {
            // SAFETY: as above.
            made &= ok(unsafe { sys::cuEventCreate(e, 2) });
        }
        if made {
            Some(staging)
        } else {
            self.free(staging);
            None
        }
    }

    fn free(&self, s: Staging) {
        // SAFETY: each handle is null or was made by the driver above and is released once; the
        // stream is idle (every use synchronises before giving its staging back).
        unsafe {
            for b in s.buffers {
                if !b.is_null() {
                    sys::cuMemFreeHost(b.cast());
                }
            }
            for e in s.done {
                if !e.is_null() {
                    sys::cuEventDestroy_v2(e);
                }
            }
            if !s.stream.is_null() {
                sys::cuStreamDestroy_v2(s.stream);
            }
        }
    }

    /// Runs `f` with a staging set (from the pool, or a new one if every set is in use).
    fn with_staging<R>(
        &self,
        f: impl FnOnce(&Staging) -> Result<R, HostError>,
    ) -> Result<R, HostError> {
        if !self.current() {
            return Err(HostError::Io);
        }
        let taken = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let staging = match taken {
            Some(s) => s,
            None => self.make_staging().ok_or(HostError::Io)?,
        };
        let result = f(&staging);
        // SAFETY: the stream is this call's; waiting leaves no copy in flight on its buffers.
        unsafe { sys::cuStreamSynchronize(staging.stream) };
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(staging);
        result
    }
}

/// Checks that `address .. address + len` lies in one allocation of the device's own memory.
fn device_range(address: u64, len: u64) -> Result<(), HostError> {
    let end = address.checked_add(len).ok_or(HostError::BadAddress)?;
    if len == 0 {
        return Ok(());
    }
    let mut kind: u32 = 0;
    let mut start: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    // SAFETY: each out-pointer is valid for the attribute's type (a memory type is an unsigned
    // int, the range start a device pointer, the range size a size_t); the driver only reads its
    // own tables for `address`, which it does not dereference.
    let known = unsafe {
        ok(sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast::<c_void>(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            address,
        )) && ok(sys::cuPointerGetAttribute(
            (&mut start as *mut sys::CUdeviceptr).cast::<c_void>(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
            address,
        )) && ok(sys::cuPointerGetAttribute(
            (&mut size as *mut usize).cast::<c_void>(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
            address,
        ))
    };
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    if !known || kind != device || address < start || end > start.saturating_add(size as u64) {
        return Err(HostError::BadAddress);
    }
    Ok(())
}

/// Passes `bytes` (the source's from `at` on) to `write` in up to `READERS` parts at once.
fn write_parallel(
    write: &(dyn Fn(u64, &[u8]) -> io::Result<()> + Sync),
    at: u64,
    bytes: &[u8],
) -> io::Result<()> {
    let parts = (bytes.len() / PART_BYTES).clamp(1, READERS);
    if parts == 1 {
        return write(at, bytes);
    }
    let part = bytes.len().div_ceil(parts);
    std::thread::scope(|s| {
        let mut chunks = bytes.chunks(part).enumerate();
        let first = chunks.next();
        let others: Vec<_> = chunks
            .map(|(i, c)| s.spawn(move || write(at + (i * part) as u64, c)))
            .collect();
        let mut result = first.map_or(Ok(()), |(_, c)| write(at, c));
        for h in others {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a writer panicked")));
            result = result.and(r);
        }
        result
    })
}

impl DeviceCopy for CudaCopy {
    fn fill(
        &self,
        address: u64,
        len: u64,
        read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    ) -> Result<u64, HostError> {
        device_range(address, len)?;
        self.with_staging(|s| {
            let mut done = 0u64;
            let mut k = 0usize;
            while done < len {
                let b = k % 2;
                // SAFETY: the event marks the end of this buffer's last copy (or was never
                // recorded, and returns at once); after it the buffer is ours to refill.
                unsafe { sys::cuEventSynchronize(s.done[b]) };
                let want = (len - done).min(STAGING_BYTES as u64) as usize;
                // SAFETY: the buffer is a pinned allocation of STAGING_BYTES >= want bytes, no
                // copy reads it now (waited above), and only this thread holds the staging set.
                let buf = unsafe { std::slice::from_raw_parts_mut(s.buffers[b], want) };
                let n = read_parallel(read, done, buf).map_err(|_| HostError::Io)?;
                if n == 0 {
                    break;
                }
                // SAFETY: `address + done .. + n` lies in the device allocation checked above;
                // the source is `n` bytes of the pinned buffer, not touched until the event.
                let copied = unsafe {
                    ok(sys::cuMemcpyHtoDAsync_v2(
                        address + done,
                        buf.as_ptr().cast(),
                        n,
                        s.stream,
                    )) && ok(sys::cuEventRecord(s.done[b], s.stream))
                };
                if !copied {
                    return Err(HostError::BadAddress);
                }
                done += n as u64;
                k += 1;
                if n < want {
                    break;
                }
            }
            // SAFETY: the stream is this call's: the copies are done when it returns, before
            // the reply tells the program its bytes are there.
            if !ok(unsafe { sys::cuStreamSynchronize(s.stream) }) {
                return Err(HostError::Io);
            }
            Ok(done)
        })
    }

    fn drain(
        &self,
        address: u64,
        len: u64,
        write: &(dyn Fn(u64, &[u8]) -> io::Result<()> + Sync),
    ) -> Result<u64, HostError> {
        device_range(address, len)?;
        self.with_staging(|s| {
            let piece = STAGING_BYTES as u64;
            let pieces = len.div_ceil(piece);
            // Copy piece k+1 while piece k is written to the file.
            let issue = |k: u64| -> bool {
                let at = k * piece;
                let n = (len - at).min(piece) as usize;
                let b = (k % 2) as usize;
                // SAFETY: the buffer is pinned, STAGING_BYTES >= n, and not read by the file
                // side until its event; the device range was checked above.
                unsafe {
                    ok(sys::cuMemcpyDtoHAsync_v2(
                        s.buffers[b].cast(),
                        address + at,
                        n,
                        s.stream,
                    )) && ok(sys::cuEventRecord(s.done[b], s.stream))
                }
            };
            if pieces > 0 && !issue(0) {
                return Err(HostError::BadAddress);
            }
            for k in 0..pieces {
                let b = (k % 2) as usize;
                // SAFETY: waits for piece k's copy into buffer b.
                if !ok(unsafe { sys::cuEventSynchronize(s.done[b]) }) {
                    return Err(HostError::Io);
                }
                if k + 1 < pieces && !issue(k + 1) {
                    return Err(HostError::BadAddress);
                }
                let n = (len - k * piece).min(piece) as usize;
                // SAFETY: piece k's bytes are in buffer b (waited above); the next copy goes to
                // the other buffer.
                let bytes = unsafe { std::slice::from_raw_parts(s.buffers[b], n) };
                write_parallel(write, k * piece, bytes).map_err(|_| HostError::Io)?;
            }
            Ok(len)
        })
    }
}

impl Drop for CudaCopy {
    fn drop(&mut self) {
        if !self.current() {
            return;
        }
        let pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(|e| e.into_inner()));
        for staging in pool {
            self.free(staging);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source of `len` bytes, each a function of its offset, read at most `step` at a time.
    fn source(len: usize, step: usize) -> impl Fn(u64, &mut [u8]) -> io::Result<usize> + Sync {
        move |at, buf| {
            let at = at as usize;
            if at >= len {
                return Ok(0);
            }
            let n = buf.len().min(len - at).min(step);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = ((at + i) * 7 % 251) as u8;
            }
            Ok(n)
        }
    }

    fn expected(from: usize, n: usize) -> Vec<u8> {
        (from..from + n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn parallel_reads_fill_the_buffer_in_order_and_stop_at_the_end() {
        let piece = 4 * PART_BYTES + 123;
        for (len, at) in [
            (10 * PART_BYTES, 0),
            (10 * PART_BYTES, 3),
            // The source ends inside the second part, at a part's boundary, in the last part,
            // before the buffer, and exactly at its end.
            (PART_BYTES + 500, 0),
            (2 * PART_BYTES, 0),
            (piece - 1, 0),
            (100, 200),
            (piece, 0),
        ] {
            let read = source(len, 300_000);
            let mut buf = vec![0xAAu8; piece];
            let n = read_parallel(&read, at as u64, &mut buf).unwrap();
            let want = len.saturating_sub(at).min(piece);
            assert_eq!(n, want, "source of {len} from {at}");
            assert!(buf[..n] == expected(at, n)[..], "source of {len} from {at}");
        }
    }

    #[test]
    fn parallel_writes_put_every_part_at_its_offset() {
        let bytes = expected(0, 4 * PART_BYTES + 77);
        let out = Mutex::new(vec![0u8; bytes.len() + 1000]);
        let write = |at: u64, b: &[u8]| -> io::Result<()> {
            let at = at as usize;
            out.lock().unwrap()[at..at + b.len()].copy_from_slice(b);
            Ok(())
        };
        write_parallel(&write, 1000, &bytes).unwrap();
        assert!(out.lock().unwrap()[1000..] == bytes[..]);
        let failing = |_: u64, _: &[u8]| -> io::Result<()> { Err(io::Error::other("full")) };
        assert!(write_parallel(&failing, 0, &bytes).is_err());
    }
}
