//! The one place atomics, fences, spin hints and shared cells come from.
//!
//! Every synchronising access in the protocol goes through this module so that `--cfg loom`
//! can replace the whole memory model with loom's checked one (the crossbeam habit), and so a
//! GPU build can swap in scoped atomics later without touching the protocol code.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, Ordering};

/// The atomic word of mailboxes and lock bitmaps (loom's under `--cfg loom`).
#[cfg(not(loom))]
pub use core::sync::atomic::{AtomicU32, AtomicU64};
/// The atomic word of mailboxes and lock bitmaps (loom's under `--cfg loom`).
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64};

/// The fence that orders a side's private lock bitmap (lock acquire, unlock release).
///
/// Lock words are touched only by threads of one side, so on NVPTX, where the client's locks are
/// in device memory and only warps of one GPU take them, a GPU-scope fence (`fence.acq_rel.gpu`)
/// orders them; the system-scope fence that `core`'s `fence` gives would also wait on the host
/// link. Everywhere else this is `fence(order)`.
#[inline(always)]
pub(crate) fn lock_fence(order: Ordering) {
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = order;
        // SAFETY: a memory fence among the GPU's threads; it has no other effect.
        unsafe { core::arch::asm!("fence.acq_rel.gpu;", options(nostack)) };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    fence(order);
}

/// A word of this side's private memory, 32 or 64 bits (a lock bitmap's word, a client's port
/// word): the width-specific halves of [`lock_acquire_or`] and [`private_load`].
pub(crate) trait PrivateWord {
    /// The word's value.
    type Value: Copy + PartialEq + core::ops::BitAnd<Output = Self::Value>;

    /// Sets `bits` and returns the word as it was: on NVPTX with acquire ordering at GPU scope,
    /// elsewhere relaxed (`lock_acquire_or` fences after it).
    fn fetch_or_for_lock(&self, bits: Self::Value) -> Self::Value;

    /// A relaxed load, at GPU scope on NVPTX.
    fn load_private(&self) -> Self::Value;
}

/// [`PrivateWord`] for one width: its atomic type, value type, PTX register class and bit count.
macro_rules! private_word {
    ($atomic:ty, $value:ty, $reg:ident, $bits:literal) => {
        impl PrivateWord for $atomic {
            type Value = $value;

            #[inline(always)]
            fn fetch_or_for_lock(&self, bits: $value) -> $value {
                #[cfg(target_arch = "nvptx64")]
                {
                    let previous: $value;
                    // SAFETY: an atomic read-modify-write of a valid, aligned word (`self` is a
                    // reference to an atomic, which has the layout of its value) in the generic
                    // address space; it touches nothing else.
                    unsafe {
                        core::arch::asm!(
                            concat!("atom.acquire.gpu.or.b", $bits, " {p}, [{a}], {b};"),
                            p = out($reg) previous,
                            a = in(reg64) self.as_ptr(),
                            b = in($reg) bits,
                            options(nostack),
                        )
                    };
                    previous
                }
                #[cfg(not(target_arch = "nvptx64"))]
                self.fetch_or(bits, Ordering::Relaxed)
            }

            #[inline(always)]
            fn load_private(&self) -> $value {
                #[cfg(target_arch = "nvptx64")]
                {
                    let value: $value;
                    // SAFETY: an atomic load of a valid, aligned word (as above) in the generic
                    // address space; it touches nothing else.
                    unsafe {
                        core::arch::asm!(
                            concat!("ld.relaxed.gpu.u", $bits, " {v}, [{a}];"),
                            v = out($reg) value,
                            a = in(reg64) self.as_ptr(),
                            options(nostack, readonly),
                        )
                    };
                    value
                }
                #[cfg(not(target_arch = "nvptx64"))]
                self.load(Ordering::Relaxed)
            }
        }
    };
}

private_word!(AtomicU32, u32, reg32, "32");
private_word!(AtomicU64, u64, reg64, "64");

/// Sets `bits` in a lock word of this side's private memory (a bitmap's word, or a client's port
/// word) and returns the word as it was, ordered as a lock acquire: nothing this thread does
/// after it moves before it, and a previous holder's accesses released by its unlock (a release
/// fence then the bit cleared, or a port word's release store) are visible after it.
///
/// On NVPTX one `atom.acquire.gpu.or` (the locks are in device memory and taken by one GPU's
/// warps); elsewhere a relaxed `fetch_or` then [`lock_fence`]`(Acquire)`. A caller that finds
/// the bits were already set took nothing, and pays the ordering for nothing.
#[inline(always)]
pub(crate) fn lock_acquire_or<W: PrivateWord>(word: &W, bits: W::Value) -> W::Value {
    let previous = word.fetch_or_for_lock(bits);
    #[cfg(not(target_arch = "nvptx64"))]
    if previous & bits != bits {
        lock_fence(Ordering::Acquire);
    }
    previous
}

/// Stores `value` to a client's port word, ordered as a lock release: everything this thread did
/// before it is visible to the next thread whose [`lock_acquire_or`] reads it. On NVPTX one
/// `st.release.gpu.u64` (a store, where a lock bitmap's unlock needs a fence and an atomic:
/// other ports share a bitmap word). Elsewhere (hosts, loom, AMD GPUs) a release `swap`: the same
/// ordering, as an RMW ([`holder_store64`] says why).
#[inline(always)]
pub(crate) fn lock_release_store64(word: &AtomicU64, value: u64) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: an atomic store to a valid, aligned `u64` (`word` is a reference to an
    // `AtomicU64`) in the generic address space; it touches nothing else.
    unsafe {
        core::arch::asm!(
            "st.release.gpu.u64 [{a}], {v};",
            a = in(reg64) word.as_ptr(),
            v = in(reg64) value,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    word.swap(value, Ordering::Release);
}

/// Swaps `value` (its lock bit clear) into a client's port word this thread holds, relaxed: the
/// unlock of a holder that touched nothing the next holder reads but the word itself (a hold of
/// word calls only: their words carry their own sequence numbers, and the port's state is this
/// word's). Being a read-modify-write, it continues the release sequence of the last release
/// store to the word, so a later holder's acquire still synchronizes with the last holder that
/// touched the packet. On NVPTX `atom.relaxed.gpu.exch.b64`, its result unused (the warp does not
/// wait for it, where a release store waits for a `MEMBAR` first); elsewhere a relaxed `swap`.
#[inline(always)]
pub(crate) fn unlock_swap64(word: &AtomicU64, value: u64) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: an atomic read-modify-write of a valid, aligned `u64` (`word` is a reference to an
    // `AtomicU64`) in the generic address space; it touches nothing else.
    unsafe {
        core::arch::asm!(
            "atom.relaxed.gpu.exch.b64 {_old}, [{a}], {v};",
            _old = out(reg64) _,
            a = in(reg64) word.as_ptr(),
            v = in(reg64) value,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    word.swap(value, Ordering::Relaxed);
}

/// Stores `value` to a client's port word that this thread holds (its lock bit set in `value`
/// too), relaxed: only the holder writes the word's state, and a contender's `fetch_or` on it
/// writes back what it read (the bit already set), so whichever comes first in the word's
/// modification order the word ends up holding `value`. On NVPTX a relaxed store at GPU scope
/// (`st.relaxed.gpu.u64`). Elsewhere (hosts, loom, AMD GPUs) a relaxed `swap`: in the C++ model a
/// store racing an RMW is as good, but loom's model of it is not (it lets the store fall between
/// the RMW's read and write, tokio-rs/loom#254), and the host's port-word clients are the ones
/// loom checks.
#[inline(always)]
pub(crate) fn holder_store64(word: &AtomicU64, value: u64) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: an atomic store to a valid, aligned `u64` (`word` is a reference to an
    // `AtomicU64`) in the generic address space; it touches nothing else.
    unsafe {
        core::arch::asm!(
            "st.relaxed.gpu.u64 [{a}], {v};",
            a = in(reg64) word.as_ptr(),
            v = in(reg64) value,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    word.swap(value, Ordering::Relaxed);
}

/// Loads a word of this side's private memory: one only threads of this side on one device
/// touch (a client's lock bitmap or port words, an exclusive server's mirror, word-call
/// sequences), ordered by this side's lock. On NVPTX a relaxed load at GPU scope
/// (`ld.relaxed.gpu`), where `core`'s relaxed load is at system scope; elsewhere a relaxed load.
#[inline(always)]
pub(crate) fn private_load<W: PrivateWord>(word: &W) -> W::Value {
    word.load_private()
}

/// Stores a word of this side's private memory (see [`private_load`]): on NVPTX a relaxed
/// store at GPU scope (`st.relaxed.gpu`), elsewhere a relaxed store.
#[inline(always)]
pub(crate) fn private_store(word: &AtomicU32, value: u32) {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: an atomic store to a valid, aligned `u32`, as in `private_load`.
        unsafe {
            core::arch::asm!(
                "st.relaxed.gpu.u32 [{a}], {v};",
                a = in(reg64) word.as_ptr(),
                v = in(reg32) value,
                options(nostack),
            )
        };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    word.store(value, Ordering::Relaxed)
}

/// What [`load_pair`] and [`store_pair`] expect of `pair`: two words, 16-byte aligned where the
/// access is one vector access (a host's, and loom's cells, need no alignment).
#[inline(always)]
fn debug_check_pair(pair: &[AtomicU64]) {
    #[cfg(target_arch = "nvptx64")]
    debug_assert!((pair.as_ptr() as usize).is_multiple_of(16));
    debug_assert!(pair.len() >= 2);
}

/// Loads two adjacent words, `pair[0]` and `pair[1]` (16-byte aligned), each single-copy atomic
/// and relaxed. On NVPTX one vector load (`ld.relaxed.sys.v2.u64`): one request across the bus
/// where two loads would be two, and a poll with two requests in flight answers later
/// (`BENCHMARKS.md`); elsewhere two relaxed loads.
#[inline(always)]
pub(crate) fn load_pair(pair: &[AtomicU64]) -> (u64, u64) {
    debug_check_pair(pair);
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b): (u64, u64);
        // SAFETY: two atomic loads of valid, aligned `u64`s (`pair` holds at least two
        // `AtomicU64`s, which have the layout of `u64`; the callers pass 16-byte aligned pairs) in
        // the generic address space; they touch nothing else.
        unsafe {
            core::arch::asm!(
                "ld.relaxed.sys.v2.u64 {{{a}, {b}}}, [{p}];",
                a = out(reg64) a,
                b = out(reg64) b,
                p = in(reg64) pair.as_ptr(),
                options(nostack, readonly),
            )
        };
        (a, b)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    (
        pair[0].load(Ordering::Relaxed),
        pair[1].load(Ordering::Relaxed),
    )
}

/// Stores two adjacent words (16-byte aligned), each single-copy atomic and relaxed: on NVPTX
/// one vector store (`st.relaxed.sys.v2.u64`), elsewhere two relaxed stores (see [`load_pair`]).
#[inline(always)]
pub(crate) fn store_pair(pair: &[AtomicU64], a: u64, b: u64) {
    debug_check_pair(pair);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: two atomic stores to valid, aligned `u64`s, as in `load_pair`.
    unsafe {
        core::arch::asm!(
            "st.relaxed.sys.v2.u64 [{p}], {{{a}, {b}}};",
            p = in(reg64) pair.as_ptr(),
            a = in(reg64) a,
            b = in(reg64) b,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        pair[0].store(a, Ordering::Relaxed);
        pair[1].store(b, Ordering::Relaxed);
    }
}

/// The ordering of a load that decides whether this side owns a packet (`Mailbox::load`).
///
/// Every such load is followed by an acquire fence before the packet is touched, which already
/// orders it; on the host the load is *also* an acquire load. On x86-64 both forms compile to a
/// plain `mov`, and the acquire load is what loom (`--cfg loom`) credits as synchronising: its
/// model did not credit a relaxed load followed by `fence(Acquire)` here and reported a race on
/// the packet header that the C++ model rules out, so the host form is the one loom checks. On
/// NVPTX an acquire load is a costlier `ld.acquire.sys` (DESIGN.md's table), so there the load is
/// relaxed and the explicit fence alone orders it.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) const MAILBOX_LOAD: Ordering = Ordering::Acquire;
/// See the host definition: on NVPTX the explicit acquire fence after the load orders it.
#[cfg(target_arch = "nvptx64")]
pub(crate) const MAILBOX_LOAD: Ordering = Ordering::Relaxed;

/// A hint that the caller is spinning on a value the other side will change.
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Asks the CPU to bring `word`'s cache line in for a read soon: a hint (nothing is read, no
/// ordering is implied; on x86-64 only, elsewhere it does nothing). A server that
/// learns which port called fetches the lines it will read next together, not one after another.
#[inline(always)]
pub(crate) fn prefetch(word: &AtomicU64) {
    #[cfg(all(not(loom), target_arch = "x86_64"))]
    // SAFETY: a prefetch reads nothing and cannot fault, whatever the address; SSE is part of
    // x86-64.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(word.as_ptr().cast::<i8>());
    }
    #[cfg(any(loom, not(target_arch = "x86_64")))]
    let _ = word;
}

/// A shared-memory cell read and written only by the side that owns it at the time.
///
/// Outside loom this is a `repr(transparent)` `UnsafeCell`, so it can be laid over raw shared
/// memory; under loom it is loom's tracked cell, which reports any access the mailbox handoff
/// does not order.
#[cfg(not(loom))]
#[repr(transparent)]
pub struct SharedCell<T>(core::cell::UnsafeCell<T>);

/// A shared-memory cell read and written only by the side that owns it (loom's tracked cell).
#[cfg(loom)]
pub struct SharedCell<T>(loom::cell::UnsafeCell<T>);

// SAFETY: a `SharedCell` is only accessed by the side that owns its packet; ownership moves
// between sides and threads only through the mailbox handoff (release fence + flip, then
// observe + acquire fence), which orders every access. The type is never handed out by
// reference to callers, only through `with`/`with_mut` inside the protocol.
unsafe impl<T: Send> Sync for SharedCell<T> {}

impl<T> SharedCell<T> {
    /// A new cell holding `value`.
    pub fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return Self(core::cell::UnsafeCell::new(value));
        #[cfg(loom)]
        return Self(loom::cell::UnsafeCell::new(value));
    }

    /// Reads through a raw pointer to the value.
    #[inline(always)]
    #[cfg_attr(loom, track_caller)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with(f);
    }

    /// Writes through a raw pointer to the value.
    #[inline(always)]
    #[cfg_attr(loom, track_caller)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        return f(self.0.get());
        #[cfg(loom)]
        return self.0.with_mut(f);
    }
}
