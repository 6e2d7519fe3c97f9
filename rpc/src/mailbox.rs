//! Mailboxes: how each side tells the other that it has handed over a packet.
//!
//! Each side writes only its own outbox and reads the other side's outbox as its inbox. A port's
//! mailbox value is one bit; flipping its outbox bit hands the packet to the other side.
//!
//! Two representations are implemented, and `cargo bench -p ferry-rpc --bench protocol`
//! compares them (figures: `BENCHMARKS-history.md`):
//!
//! - [`PerPort`]: one `u32` word per port per direction. A flip is a plain store; reading one
//!   port's inbox is one load; the server's scan of 32 ports costs 64 loads.
//! - [`Packed`]: one bit per port, 32 ports per word. The server's scan of 32 ports costs two
//!   loads, but a flip is a read-modify-write (`fetch_xor`) on a word other threads of the same
//!   side flip too.
//!
//! **Which is faster depends on who flips**, so both are kept and each transport picks one; the
//! layout records the kind and both sides check it. Between CPU threads `Packed` is faster on
//! both hot paths, the round trip and, by an order of magnitude, the server's scan of many idle
//! ports (`BENCHMARKS-history.md`, "Figures moved out of code comments").
//!
//! - Between CPUs (`ferry-shm`, heap regions of threads) **`Packed` wins**: the server scans
//!   32 ports with two loads instead of 64, and the flip's `lock xor` costs little more than the
//!   store it replaces, because x86 drains the store buffer before the flip becomes visible either
//!   way.
//! - On a GPU (`ferry-gpu`) **`PerPort` is required**: the client's outbox lives in host memory
//!   across PCIe, where a flip must be a posted store, not a read-modify-write the GPU would have
//!   to carry out over the link (and NVPTX lowers ordered RMWs to relaxed GPU-scope ones, see
//!   `DESIGN.md`); the device library also keeps a per-port outbox shadow in the client's port
//!   words that assumes one word per port. It is the type parameters' default, as in LLVM libc's layout.

use crate::sync::{AtomicU32, Ordering, MAILBOX_LOAD};

/// Which representation a region's mailboxes use; part of the layout both sides must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MailboxKind {
    /// One word per port ([`PerPort`]).
    PerPort = 0,
    /// One bit per port ([`Packed`]).
    Packed = 1,
}

impl MailboxKind {
    /// `u32` words in one direction's mailbox array for `ports` ports (a multiple of 32).
    pub const fn words(self, ports: u32) -> u32 {
        match self {
            MailboxKind::PerPort => ports,
            MailboxKind::Packed => ports / 32,
        }
    }

    /// The kind with the given wire number, if any.
    pub const fn from_u32(n: u32) -> Option<MailboxKind> {
        match n {
            0 => Some(MailboxKind::PerPort),
            1 => Some(MailboxKind::Packed),
            _ => None,
        }
    }
}

/// A mailbox representation. Sealed: the protocol's correctness argument covers only these two.
pub trait Mailbox: sealed::Sealed + 'static {
    /// The layout tag of this representation.
    const KIND: MailboxKind;

    /// The mailbox bit (0 or 1) of `port`, loaded with `sync::MAILBOX_LOAD` ordering; callers
    /// also order it with an acquire fence before touching the packet.
    fn load(boxes: &[AtomicU32], port: u32) -> u32;

    /// Sets our outbox bit of `port` to `value`, which the caller knows differs from the current
    /// value (only the lock holder of `port` flips it). Relaxed: callers fence before it.
    fn flip(boxes: &[AtomicU32], port: u32, value: u32);

    /// The mailbox bits of ports `32 * word .. 32 * word + 32`, bit `i` for port `32 * word + i`.
    fn load_word(boxes: &[AtomicU32], word: u32) -> u32;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::PerPort {}
    impl Sealed for super::Packed {}
}

/// One `u32` per port per direction.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerPort;

impl Mailbox for PerPort {
    const KIND: MailboxKind = MailboxKind::PerPort;

    #[inline(always)]
    fn load(boxes: &[AtomicU32], port: u32) -> u32 {
        boxes[port as usize].load(MAILBOX_LOAD) & 1
    }

    #[inline(always)]
    fn flip(boxes: &[AtomicU32], port: u32, value: u32) {
        boxes[port as usize].store(value, Ordering::Relaxed);
    }

    #[inline(always)]
    fn load_word(boxes: &[AtomicU32], word: u32) -> u32 {
        let base = word as usize * 32;
        let mut bits = 0;
        for (i, b) in boxes[base..base + 32].iter().enumerate() {
            bits |= (b.load(Ordering::Relaxed) & 1) << i;
        }
        bits
    }
}

/// One bit per port, 32 ports per word.
#[derive(Clone, Copy, Debug, Default)]
pub struct Packed;

impl Mailbox for Packed {
    const KIND: MailboxKind = MailboxKind::Packed;

    #[inline(always)]
    fn load(boxes: &[AtomicU32], port: u32) -> u32 {
        (boxes[port as usize / 32].load(MAILBOX_LOAD) >> (port % 32)) & 1
    }

    #[inline(always)]
    fn flip(boxes: &[AtomicU32], port: u32, _value: u32) {
        boxes[port as usize / 32].fetch_xor(1 << (port % 32), Ordering::Relaxed);
    }

    #[inline(always)]
    fn load_word(boxes: &[AtomicU32], word: u32) -> u32 {
        boxes[word as usize].load(Ordering::Relaxed)
    }
}
