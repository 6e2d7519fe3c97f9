//! A region in this process's heap: for tests, benchmarks, and threads of one process talking
//! through the protocol. Transports lay the same [`Layout`] over shared or device-visible memory.

use alloc::boxed::Box;
use core::marker::PhantomData;

use crate::lanes::{Lanes, Single};
use crate::layout::{Layout, LayoutError};
use crate::mailbox::{Mailbox, PerPort};
use crate::process::{Client, Process, Region, Server};
use crate::sync::{AtomicU32, AtomicU64};
use crate::wait::{Spin, Wait};

/// A heap-allocated region and both sides' lock bitmaps.
pub struct HeapRegion<M: Mailbox = PerPort> {
    layout: Layout,
    #[cfg(not(loom))]
    base: core::ptr::NonNull<u8>,
    #[cfg(loom)]
    parts: (
        Box<[AtomicU32]>,
        Box<[AtomicU32]>,
        Box<[crate::sync::SharedCell<crate::layout::Slot>]>,
        Box<[crate::sync::SharedCell<crate::layout::Slot>]>,
        Box<[crate::sync::AtomicU64]>,
        Box<[crate::sync::AtomicU64]>,
    ),
    /// The client's lock bitmap, followed (with word lines) by the ports' word-line sequence
    /// words: the memory of [`client`](Self::client)'s handles.
    client_locks: LockBitmap,
    /// The client's port words (`Process::with_port_words`): the client memory a device
    /// descriptor names (`Descriptor::client_words`), for clients built as a GPU's are.
    port_words: Box<[AtomicU64]>,
    server_locks: LockBitmap,
    _mailbox: PhantomData<M>,
}

// SAFETY: the region memory is only reached through `Region`, whose accesses are atomics or
// packet accesses ordered by the ownership protocol; the heap block itself is owned by this value.
unsafe impl<M: Mailbox> Send for HeapRegion<M> {}
// SAFETY: as above: shared access goes through the protocol.
unsafe impl<M: Mailbox> Sync for HeapRegion<M> {}

/// A side's lock bitmap in cache lines of its own: next to the other side's bitmap (two small heap
/// blocks often share a line) every lock and unlock of one side would pull the line away from the
/// other.
struct LockBitmap {
    #[cfg(not(loom))]
    lines: Box<[LockLine]>,
    /// Under loom, plain words: loom's atomics have their own layout.
    #[cfg(loom)]
    lines: Box<[AtomicU32]>,
    /// The lock words (what the bitmap derefs to).
    words: usize,
    /// All words, `extra` more after the lock words.
    total: usize,
}

/// One cache line of lock words.
#[cfg(not(loom))]
#[repr(C, align(64))]
struct LockLine([AtomicU32; 16]);

impl LockBitmap {
    /// `words` lock words followed by `extra` more words, all zero.
    fn new(words: usize, extra: usize) -> Self {
        let total = words + extra;
        LockBitmap {
            #[cfg(not(loom))]
            lines: (0..total.div_ceil(16))
                .map(|_| LockLine(core::array::from_fn(|_| AtomicU32::new(0))))
                .collect(),
            #[cfg(loom)]
            lines: self::words(total),
            words,
            total,
        }
    }

    /// Every word: the lock words, then the extra ones.
    fn all(&self) -> &[AtomicU32] {
        #[cfg(not(loom))]
        // SAFETY: `LockLine` is `repr(C)`: 16 contiguous `AtomicU32`s with no padding (64 bytes,
        // its alignment), so the lines are `16 * lines.len() >= total` contiguous words.
        let words = unsafe {
            core::slice::from_raw_parts(self.lines.as_ptr().cast::<AtomicU32>(), self.total)
        };
        #[cfg(loom)]
        let words = &self.lines[..self.total];
        words
    }
}

impl core::ops::Deref for LockBitmap {
    type Target = [AtomicU32];
    fn deref(&self) -> &[AtomicU32] {
        &self.all()[..self.words]
    }
}

#[cfg(loom)]
fn words(n: usize) -> Box<[AtomicU32]> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

impl<M: Mailbox> HeapRegion<M> {
    /// A zeroed region of `ports` ports (a multiple of 32) and `lanes` lanes per packet.
    pub fn new(ports: u32, lanes: u32) -> Result<Self, LayoutError> {
        Ok(Self::from_layout(Layout::new(ports, lanes, M::KIND)?))
    }

    /// As [`new`](Self::new), with a bulk area per port of `share` bytes per lane (see
    /// [`Layout::with_bulk`]).
    pub fn with_bulk(ports: u32, lanes: u32, share: u64) -> Result<Self, LayoutError> {
        Ok(Self::from_layout(
            Layout::new(ports, lanes, M::KIND)?.with_bulk(share)?,
        ))
    }

    /// A zeroed region of `ports` ports of `lanes` lanes with word lines for small calls
    /// (`Layout::with_words`, see `crate::words`); its clients make such calls on them.
    pub fn with_words(ports: u32, lanes: u32) -> Result<Self, LayoutError> {
        Ok(Self::from_layout(
            Layout::new(ports, lanes, M::KIND)?.with_words(),
        ))
    }

    /// A zeroed region laid out by `layout` (bulk areas, word lines and all); an error if its
    /// mailbox kind is not `M`'s.
    pub fn with_layout(layout: Layout) -> Result<Self, LayoutError> {
        if layout.mailbox() != M::KIND {
            return Err(LayoutError::Mailbox(layout.mailbox()));
        }
        Ok(Self::from_layout(layout))
    }

    fn from_layout(layout: Layout) -> Self {
        HeapRegion {
            layout,
            #[cfg(not(loom))]
            base: {
                let heap = Self::heap_layout(&layout);
                // SAFETY: `heap` has a non-zero size (a region holds at least 32 packets).
                let p = unsafe { alloc::alloc::alloc_zeroed(heap) };
                match core::ptr::NonNull::new(p) {
                    Some(p) => p,
                    None => alloc::alloc::handle_alloc_error(heap),
                }
            },
            #[cfg(loom)]
            parts: (
                words(layout.mailbox_words()),
                words(layout.mailbox_words()),
                (0..layout.ports() as usize * layout.slots_per_packet())
                    .map(|_| crate::sync::SharedCell::new(crate::layout::Slot::default()))
                    .collect(),
                (0..layout.bulk_slots())
                    .map(|_| crate::sync::SharedCell::new(crate::layout::Slot::default()))
                    .collect(),
                (0..layout.head_words())
                    .map(|_| crate::sync::AtomicU64::new(0))
                    .collect(),
                (0..if layout.has_words() {
                    layout.ports() as usize * layout.word_line_words()
                } else {
                    0
                })
                    .map(|_| crate::sync::AtomicU64::new(0))
                    .collect(),
            ),

            client_locks: LockBitmap::new(
                layout.lock_words(),
                if layout.has_words() {
                    layout.ports() as usize
                } else {
                    0
                },
            ),
            port_words: (0..layout.ports()).map(|_| AtomicU64::new(0)).collect(),
            server_locks: LockBitmap::new(layout.lock_words(), 0),
            _mailbox: PhantomData,
        }
    }

    #[cfg(not(loom))]
    fn heap_layout(layout: &Layout) -> core::alloc::Layout {
        // The word lines' rows are laid on 128-byte lines from the base: so is the base.
        core::alloc::Layout::from_size_align(layout.size(), crate::layout::WORD_LINE_BYTES)
            .expect("region sizes are bounded far below isize::MAX")
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The shared part of the region.
    pub fn region(&self) -> Region<'_, M> {
        #[cfg(not(loom))]
        // SAFETY: `base` is our own zeroed, 128-byte aligned block of `layout.size()` bytes, alive
        // as long as `self`, reached only through `Region`s.
        let region = unsafe { Region::from_raw(self.base.as_ptr(), self.layout) };
        #[cfg(loom)]
        let region = Region::from_parts(
            self.layout,
            &self.parts.0,
            &self.parts.1,
            &self.parts.2,
            &self.parts.3,
        )
        .and_then(|r| match self.layout.has_words() {
            true => r.with_word_lines(&self.parts.4, &self.parts.5),
            false => Ok(r),
        });
        region.expect("a region built from its own layout matches it")
    }

    /// A client handle with its own lanes and wait policy.
    pub fn client_with<L: Lanes, W: Wait>(
        &self,
        lanes: L,
        wait: W,
    ) -> Result<Process<'_, Client, L, M, W>, LayoutError> {
        let client = Process::new(self.region(), &self.client_locks, lanes, wait)?;
        match self.layout.has_words() {
            true => client.with_word_seqs(&self.client_locks.all()[self.layout.lock_words()..]),
            false => Ok(client),
        }
    }

    /// A server handle with its own lanes and wait policy.
    pub fn server_with<L: Lanes, W: Wait>(
        &self,
        lanes: L,
        wait: W,
    ) -> Result<Process<'_, Server, L, M, W>, LayoutError> {
        Process::new(self.region(), &self.server_locks, lanes, wait)
    }

    /// A single-lane, spinning client handle.
    pub fn client(&self) -> Process<'_, Client, Single, M, Spin> {
        self.client_with(Single, Spin)
            .expect("one lane always fits")
    }

    /// A single-lane, spinning server handle.
    pub fn server(&self) -> Process<'_, Server, Single, M, Spin> {
        self.server_with(Single, Spin)
            .expect("one lane always fits")
    }

    /// The client's memory as a device descriptor names it (`Descriptor::locks`): the port
    /// words, one per port (`Process::with_port_words`), apart from the lock bitmap of
    /// [`client`](Self::client)'s handles (the two kinds of handle do not exclude each other:
    /// use one kind on a region).
    pub fn client_memory(&self) -> &[AtomicU64] {
        &self.port_words
    }

    /// The client's lock bitmap (for diagnostics and baselines).
    pub fn client_locks(&self) -> &[AtomicU32] {
        &self.client_locks
    }

    /// The server's lock bitmap (for diagnostics and baselines).
    pub fn server_locks(&self) -> &[AtomicU32] {
        &self.server_locks
    }
}

#[cfg(not(loom))]
impl<M: Mailbox> Drop for HeapRegion<M> {
    fn drop(&mut self) {
        // SAFETY: `base` came from `alloc_zeroed` with this very layout and is freed once.
        unsafe { alloc::alloc::dealloc(self.base.as_ptr(), Self::heap_layout(&self.layout)) };
    }
}
