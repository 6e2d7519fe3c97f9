//! The process: one side's view of a region, and the port search both sides share.
//!
//! ```text
//!            client                                  server
//!  open:  lock port (own bitmap)                     (scans for ports it owns)
//!         in == out? -> owns the packet
//!         write header, fill slots
//!  send:  RELEASE fence, flip client outbox ──────▶  sees in != out, ACQUIRE fence
//!                                                    lock port (own bitmap), read slots
//!                                         ◀──────    RELEASE fence, flip server outbox
//!  recv:  sees in == out, ACQUIRE fence              (server: send / close)
//!         read slots; close: unlock
//! ```
//!
//! **The invariant.** The client owns a port's packet when its inbox equals its outbox; the server
//! owns it when they differ. Only the owner reads or writes the packet, and only the holder of a
//! side's lock bit flips that side's outbox bit. At rest (no lock held on either side) the client
//! owns every packet, or the server owns it and has a request to serve.
//!
//! Client and server are one generic [`Process`]; the [`Side`] supplies the three differences:
//! which mailbox is the outbox, which mailbox state means "owned", and where the next search starts.
//! One search serves both (the review's point: no copy-pasted twins). It walks the side's lock
//! bitmap a whole word (32 ports) per step, picks free ports with find-first-zero, and starts at
//! a per-handle cursor: a client resumes at the port it last used (spreading clients, keeping a
//! warm port), a server one port past the one it last served, so under constant load every pending
//! port is served within one pass of its scan (fairness).
//!
//! Two options per handle: [`Process::restrict`] limits it to a range of ports (server threads
//! that split the ports never contend for a lock word or a mailbox line), and
//! [`Process::keep_port`] keeps a closed port locked for the handle's next open, which skips the
//! search, the lock and the unlock when the handle still owns the packet.
//!
//! A client may hold its locks in port words instead ([`Process::with_port_words`], a GPU's
//! clients): a word per port holding the port's lock bit, its outbox shadow and its word-call
//! sequence, taken with its state in one atomic and released with one store (a release store; a
//! generated word call's port, answered, with a relaxed swap and no fence: `release_words` says
//! why that is enough). A group's open of a
//! port it does not keep first tries its cursor port with that atomic alone, in a short stretch
//! run by its first lane, and searches only if that fails: a long stretch run by one lane while
//! the others wait costs a group far more than it costs a lone lane.
//!
//! A transport's housekeeping that must keep one side's handles off a port without opening it
//! (the shared-memory server's monitor, before it frees a dead client's port) takes the port's
//! lock with [`Process::try_hold`]: a [`Held`] guard, released on drop, with the same orderings
//! as the lock of an open.

use core::cell::Cell;
use core::marker::PhantomData;

use crate::lanes::{Lanes, Single};
use crate::layout::{Layout, LayoutError, Slot, PORT_GRANULE};
use crate::mailbox::{Mailbox, PerPort};
use crate::sync::{
    fence, holder_store64, lock_acquire_or, lock_fence, lock_release_store64, private_load,
    private_store, unlock_swap64, AtomicU32, AtomicU64, Ordering, SharedCell,
};
use crate::wait::{Spin, Wait};

/// A region's shared memory, seen as its parts. Cheap to copy; both sides hold one.
pub struct Region<'a, M: Mailbox = PerPort> {
    layout: Layout,
    client_outbox: &'a [AtomicU32],
    server_outbox: &'a [AtomicU32],
    packets: &'a [SharedCell<Slot>],
    bulk: &'a [SharedCell<Slot>],
    /// The word lines' head words and lines (empty: none; see `crate::words`).
    heads: &'a [AtomicU64],
    lines: &'a [AtomicU64],
    _mailbox: PhantomData<M>,
}

impl<M: Mailbox> Clone for Region<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: Mailbox> Copy for Region<'_, M> {}

impl<M: Mailbox> core::fmt::Debug for Region<'_, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Region")
            .field("layout", &self.layout)
            .finish()
    }
}

impl<'a, M: Mailbox> Region<'a, M> {
    /// A region from its parts, checked against `layout`: the two outboxes, the packets, and the
    /// bulk areas (`layout.bulk_slots()` slots; empty for a layout without them).
    pub fn from_parts(
        layout: Layout,
        client_outbox: &'a [AtomicU32],
        server_outbox: &'a [AtomicU32],
        packets: &'a [SharedCell<Slot>],
        bulk: &'a [SharedCell<Slot>],
    ) -> Result<Self, LayoutError> {
        if layout.mailbox() != M::KIND {
            return Err(LayoutError::Mailbox(layout.mailbox()));
        }
        let words = layout.mailbox_words();
        let slots = layout.ports() as usize * layout.slots_per_packet();
        if client_outbox.len() != words || server_outbox.len() != words || packets.len() != slots {
            return Err(LayoutError::Ports(layout.ports()));
        }
        if bulk.len() != layout.bulk_slots() {
            return Err(LayoutError::Bulk(layout.bulk_share() as u64));
        }
        Ok(Region {
            layout,
            client_outbox,
            server_outbox,
            packets,
            bulk,
            heads: &[],
            lines: &[],
            _mailbox: PhantomData,
        })
    }

    /// This region with its word lines in `heads` and `lines` (for a layout
    /// [`with_words`](Layout::with_words); [`from_raw`](Self::from_raw) finds them itself):
    /// `layout.head_words()` and `ports × layout.word_line_words()` words.
    pub fn with_word_lines(
        mut self,
        heads: &'a [AtomicU64],
        lines: &'a [AtomicU64],
    ) -> Result<Self, LayoutError> {
        let l = &self.layout;
        if !l.has_words()
            || heads.len() != l.head_words()
            || lines.len() != l.ports() as usize * l.word_line_words()
        {
            return Err(LayoutError::Ports(l.ports()));
        }
        self.heads = heads;
        self.lines = lines;
        Ok(self)
    }

    /// The head words of the word lines (empty: the region has none).
    #[inline(always)]
    pub(crate) fn heads(&self) -> &'a [AtomicU64] {
        self.heads
    }

    /// The bell words of the word lines, one per group of [`crate::words::BELL_PORTS`] ports
    /// (empty: the region has none).
    #[inline(always)]
    pub(crate) fn bells(&self) -> &'a [AtomicU64] {
        let start = self.layout.ports() as usize;
        let end = start + self.layout.bell_words();
        self.heads.get(start..end).unwrap_or(&[])
    }

    /// The summit words of the word lines, one per [`crate::words::SUMMIT_BELLS`] bell words
    /// (empty: the region has none).
    #[inline(always)]
    pub(crate) fn summits(&self) -> &'a [AtomicU64] {
        let start = self.layout.ports() as usize + self.layout.bell_words();
        let end = start + self.layout.summit_words();
        self.heads.get(start..end).unwrap_or(&[])
    }

    /// `port`'s request line and reply line (empty: the region has none).
    #[inline(always)]
    pub(crate) fn word_lines(&self, port: u32) -> (&'a [AtomicU64], &'a [AtomicU64]) {
        let per = self.layout.word_line_words();
        let req = self.layout.request_line_words();
        match self
            .lines
            .get(port as usize * per..(port as usize + 1) * per)
        {
            Some(l) => l.split_at(req),
            None => (&[], &[]),
        }
    }

    /// A region laid out by `layout` over raw memory at `base`.
    ///
    /// # Safety
    ///
    /// `base` must be aligned to 64 bytes and valid for reads and writes of `layout.size()` bytes
    /// for `'a`, and that memory must be accessed during `'a` only through this protocol (by this
    /// and other `Region`s over the same memory, in this or other processes or devices). Any byte
    /// contents are valid: every field is an integer.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, layout: Layout) -> Result<Self, LayoutError> {
        debug_assert_eq!(base as usize % crate::layout::SLOT_BYTES, 0);
        let words = layout.mailbox_words();
        let slots = layout.ports() as usize * layout.slots_per_packet();
        // SAFETY: the caller guarantees `base .. base + size` is valid and 64-byte aligned; the
        // layout puts each part inside it, 64-byte aligned, without overlap; `AtomicU32` and
        // `SharedCell<Slot>` (a transparent `UnsafeCell<Slot>`) accept any bit pattern, and the
        // memory is shared only through atomics and the ownership protocol.
        let (client_outbox, server_outbox, packets, bulk) = unsafe {
            (
                core::slice::from_raw_parts(
                    base.add(layout.client_outbox_offset()).cast::<AtomicU32>(),
                    words,
                ),
                core::slice::from_raw_parts(
                    base.add(layout.server_outbox_offset()).cast::<AtomicU32>(),
                    words,
                ),
                core::slice::from_raw_parts(
                    base.add(layout.packets_offset()).cast::<SharedCell<Slot>>(),
                    slots,
                ),
                core::slice::from_raw_parts(
                    base.add(layout.bulk_offset()).cast::<SharedCell<Slot>>(),
                    layout.bulk_slots(),
                ),
            )
        };
        let region = Self::from_parts(layout, client_outbox, server_outbox, packets, bulk)?;
        if !layout.has_words() {
            return Ok(region);
        }
        // SAFETY: as above: the word lines lie after the bulk areas, inside the region, 64-byte
        // aligned; `AtomicU64` accepts any bit pattern and is 8-byte aligned there.
        let (heads, lines) = unsafe {
            let at = base.add(layout.words_offset());
            (
                core::slice::from_raw_parts(at.cast::<AtomicU64>(), layout.head_words()),
                core::slice::from_raw_parts(
                    at.add(layout.head_words() * 8).cast::<AtomicU64>(),
                    layout.ports() as usize * layout.word_line_words(),
                ),
            )
        };
        region.with_word_lines(heads, lines)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The client's outbox words (the server's inbox).
    pub fn client_outbox(&self) -> &'a [AtomicU32] {
        self.client_outbox
    }

    /// The server's outbox words (the client's inbox).
    pub fn server_outbox(&self) -> &'a [AtomicU32] {
        self.server_outbox
    }

    /// The header slot of `port`'s packet.
    #[inline(always)]
    pub(crate) fn header(&self, port: u32) -> &'a SharedCell<Slot> {
        &self.packets[port as usize * self.layout.slots_per_packet()]
    }

    /// Slot `lane` of `port`'s packet.
    #[inline(always)]
    pub(crate) fn slot(&self, port: u32, lane: u32) -> &'a SharedCell<Slot> {
        &self.packets[port as usize * self.layout.slots_per_packet() + 1 + lane as usize]
    }

    /// Lane `lane`'s share of `port`'s bulk area (empty if the region has none), as slots.
    #[inline(always)]
    pub(crate) fn bulk(&self, port: u32, lane: u32) -> &'a [SharedCell<Slot>] {
        let per_lane = self.layout.bulk_share() / crate::layout::SLOT_BYTES;
        let at = (port as usize * self.layout.lanes() as usize + lane as usize) * per_lane;
        &self.bulk[at..at + per_lane]
    }

    /// The address and length in bytes of lane `lane`'s share of `port`'s bulk area (length 0:
    /// the region has none), for a transport that lends the area by a rule of its own, outside
    /// a port (`ferry-shm` lends it with an inline request). Reading or writing through it is
    /// the caller's to justify: the area belongs to whichever side the protocol gives it to, as
    /// the packet does. Panics if `port` or `lane` is out of range.
    #[cfg(not(loom))]
    pub fn bulk_raw(&self, port: u32, lane: u32) -> (*mut u8, usize) {
        assert!(port < self.layout.ports() && lane < self.layout.lanes());
        let area = self.bulk(port, lane);
        (
            area.as_ptr() as *mut u8,
            area.len() * crate::layout::SLOT_BYTES,
        )
    }

    /// Whether a client could open `port` now: the client owns its packet (a request is not in
    /// flight). Transports use it to tell idle ports from ports a dead client left mid-call.
    pub fn client_owns(&self, port: u32) -> bool {
        M::load(self.server_outbox, port) == M::load(self.client_outbox, port)
    }
}

/// Which side of the protocol a [`Process`] plays. Sealed: [`Client`] and [`Server`].
pub trait Side: sealed::Sealed + 'static {
    /// `inbox ^ outbox` when this side owns the packet.
    const OWNED_WHEN: u32;
    /// Whether the search filters candidate ports by mailbox state before locking (the server:
    /// only ports with pending work matter), or locks first (the client: most ports are idle).
    const SCAN_MAILBOX: bool;
    /// Added to a port's index to get where the next search starts.
    const CURSOR_STEP: u32;
    /// Whether closing a port this side still owns hands it back (the server: a request it
    /// consumed without replying goes back to the client; the client keeps an idle packet).
    const RETURN_ON_CLOSE: bool;
    /// What opening a port takes: the opcode for a client, nothing for a server.
    type Open: Copy;
    /// This side's outbox.
    fn outbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32];
    /// This side's inbox.
    fn inbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32];
    /// What a freshly opened port's header gets: the client writes the call's opcode (`Some`),
    /// the server reads the header (`None`).
    fn open_opcode(arg: Self::Open) -> Option<u32>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Client {}
    impl Sealed for super::Server {}
}

/// The side that opens ports with an opcode and sends requests (a GPU warp, a client process).
#[derive(Clone, Copy, Debug)]
pub enum Client {}

/// The side that serves requests (the host).
#[derive(Clone, Copy, Debug)]
pub enum Server {}

impl Side for Client {
    const OWNED_WHEN: u32 = 0;
    const SCAN_MAILBOX: bool = false;
    const CURSOR_STEP: u32 = 0;
    const RETURN_ON_CLOSE: bool = false;
    type Open = u32;
    fn outbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32] {
        region.client_outbox
    }
    fn inbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32] {
        region.server_outbox
    }
    fn open_opcode(opcode: u32) -> Option<u32> {
        Some(opcode)
    }
}

impl Side for Server {
    const OWNED_WHEN: u32 = 1;
    const SCAN_MAILBOX: bool = true;
    const CURSOR_STEP: u32 = 1;
    const RETURN_ON_CLOSE: bool = true;
    type Open = ();
    fn outbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32] {
        region.server_outbox
    }
    fn inbox<'a, M: Mailbox>(region: &Region<'a, M>) -> &'a [AtomicU32] {
        region.client_outbox
    }
    fn open_opcode(_: ()) -> Option<u32> {
        None
    }
}

/// The most active lanes of a group whose small calls take the word lines by default
/// (`Process::word_lanes`): a lone lane (a print, a `malloc` from one thread).
pub const WORD_LANES: u32 = 1;

/// No port found (all lock words full, or nothing owned).
pub(crate) const NONE: u32 = u32::MAX;

/// What a group's search for a port answers, in every lane, when a lane's wait policy gave up
/// (`index * 2 + outbox bit` never reaches it: ports are at most `MAX_PORTS`).
pub(crate) const GAVE_UP: u32 = u32::MAX - 1;

/// A kept port whose ownership must be checked at the next open.
const UNKNOWN: u32 = u32::MAX;

/// One side's handle on a region: its lock bitmap, its lanes, its waiting policy and its search
/// cursor. Not `Sync` (the cursor is per handle): make one per thread, or per warp on a GPU.
pub struct Process<'a, S: Side, L: Lanes = Single, M: Mailbox = PerPort, W: Wait = Spin> {
    region: Region<'a, M>,
    locks: &'a [AtomicU32],
    lanes: L,
    wait: W,
    /// The lock words this handle searches and where its next search starts.
    range: Range,
    /// The port this handle keeps locked between calls.
    kept: Kept,
    /// A client's port words, one per port, which hold the ports' locks in place of the bitmap
    /// `locks` (empty: the bitmap); see [`Self::with_port_words`].
    port_words: &'a [AtomicU64],
    /// An exclusive handle's copy of its own outbox bits, one word per 32 ports of the whole
    /// region (empty: none); see [`Self::with_outbox_mirror`].
    mirror: &'a [AtomicU32],
    /// The handle's state for calls on the word lines (`crate::words`).
    word: WordCalls<'a>,
    /// A client's announce words, one per lane of every port (empty: none); see
    /// [`Self::with_announce_words`].
    announce: &'a [AtomicU32],
    _side: PhantomData<S>,
}

/// The lock words a handle searches and where its next search starts.
#[derive(Clone)]
struct Range {
    /// The first lock word of the range (all of them by default).
    first_word: u32,
    /// How many lock words, from `first_word`.
    words: u32,
    /// Where the next search starts.
    cursor: Cell<u32>,
    /// Whether this handle holds every lock of its range ([`Process::exclusive`]).
    sole: bool,
}

/// The port a handle keeps locked since its last close.
#[derive(Clone)]
struct Kept {
    /// Whether a closed port stays locked for this handle's next open ([`Process::keep_port`]).
    on: bool,
    /// The port kept locked since the last close, or `NONE` (set in the first lane only).
    port: Cell<u32>,
    /// This side's outbox bit for the kept port if this handle held its packet when it closed it
    /// (so it still does: the other side flips only a packet it owns), else `UNKNOWN`.
    out: Cell<u32>,
}

/// A client's state for calls on the word lines (`crate::words`).
#[derive(Clone)]
struct WordCalls<'a> {
    /// Whether this client makes small calls on the word lines (it has sequence words: its
    /// port words, or [`Process::with_word_seqs`]).
    on: bool,
    /// The most active lanes whose small calls take the word lines ([`Process::word_lanes`]).
    lanes: u32,
    /// A client's sequence word for each port's word line (empty: no word calls); see
    /// [`Process::with_word_seqs`].
    seqs: &'a [AtomicU32],
    /// The port of this handle's last word call and the sequence it sent, while the port has
    /// stayed locked for this handle since, or a port this handle locked and the sequence its
    /// word held then (with port words, the lock's atomic returns it); `NONE` as the port
    /// otherwise. Set and read in the first lane only. A call on that port takes its sequence
    /// from here instead of reading the word (on a GPU, a trip to device memory). With a lock
    /// bitmap the sequence word holds it too; with port words the word may be older (see
    /// `last_shadow`). An exclusive handle on port words caches nothing: its lane groups each
    /// hold every port, so the word is the only place they all see.
    last_seq: Cell<(u32, u32)>,
    /// With port words, the outbox shadow bits of `last_seq`'s port. With port words, `last_seq`
    /// and this are the state of a port this handle holds, newer than its word (written back
    /// when the handle caches another port or gives the lock away: `write_back`).
    last_shadow: Cell<u32>,
    /// How long after its send a word call's first poll for the reply goes out, in ns: learned
    /// from the calls' replies where the wait policy has a clock (`Wait::clock_ns`; see
    /// `words::learn_first_poll`), else 0. A group's call makes every lane's the first lane's and
    /// learns the same in every lane; a call of fewer lanes changes only theirs.
    first_poll: Cell<u32>,
}

/// A port word's lock bit. A client's port word (see [`Process::with_port_words`]) holds, for
/// one port: the sequence of its last word call (bits 0..32), this bit, and the outbox shadow
/// (bits `SHADOW_SHIFT`..: the outbox bit and `SHADOW_IN_FLIGHT`).
const PORT_LOCKED: u64 = 1 << 32;

/// Where the outbox shadow sits in a port word.
const SHADOW_SHIFT: u32 = 33;

/// The shadow's bit saying the client flipped its outbox and has not yet seen the reply (bit 0
/// is the outbox bit).
const SHADOW_IN_FLIGHT: u32 = 2;

/// `SHADOW_IN_FLIGHT` in a port word.
const PORT_IN_FLIGHT: u64 = (SHADOW_IN_FLIGHT as u64) << SHADOW_SHIFT;

/// A port word's state (lock bit clear) from its word-call sequence and outbox shadow.
#[inline(always)]
const fn port_state(seq: u32, shadow: u32) -> u64 {
    (shadow as u64) << SHADOW_SHIFT | seq as u64
}

/// The outbox shadow of a port word (or state): its outbox bit and `SHADOW_IN_FLIGHT` (no
/// bit above them is ever set).
#[inline(always)]
const fn shadow_of(word: u64) -> u32 {
    (word >> SHADOW_SHIFT) as u32
}

/// A client whose locks are port words.
///
/// With a lock bitmap, opening a port costs a locked instruction on a word 32 ports share, then
/// reads of the port's state (on a GPU: its outbox shadow and word-call sequence, a second trip
/// to memory), and closing it a release fence and another locked instruction. A port word holds
/// the lock and that state together: the open's one atomic (`fetch_or` of `PORT_LOCKED`,
/// acquire) returns the state with the lock, and the close is one release store of the state
/// with the bit clear (no other port shares the word, so a store will do). While a handle holds
/// the port, it keeps the state's changes (a word call's sequence, a flip's shadow) in the handle
/// and writes them to the word only when it releases the lock, or caches another port's state
/// instead, or gives the lock away without releasing it (relaxed: only the holder writes the
/// state, and a contender's `fetch_or` writes back what it read, the bit already set).
///
/// **The outbox shadow.** A client opening a port normally reads the port's two mailbox words
/// (on a GPU across PCIe, and fences at system scope): one round trip per call. Both can be known
/// without that read. The client outbox is written only by client lock holders, so a copy of it
/// in the port word, updated with every flip under the lock, is exact. And once a client has seen
/// inbox == outbox (its reply), the packet stays the client's until a client flips again: the
/// server flips only a packet it owns (the invariant in the module doc). So the shadow holds the
/// outbox bit and `SHADOW_IN_FLIGHT`, set with every flip and cleared when a client sees the
/// reply; a port opened with the bit clear is owned without reading the mailboxes. A port left
/// mid call (the bit set) is checked as before.
impl<'a, L: Lanes, M: Mailbox, W: Wait> Process<'a, Client, L, M, W> {
    /// A client handle on `region` whose ports' locks are `words` (one `u64` port word per port,
    /// zeroed while the region's mailboxes were, shared by every client handle on the region
    /// and by nothing else): each open takes its port's lock and state in one atomic, each close
    /// releases them with one store (this `impl`'s doc says how). With word lines in the region,
    /// the port words also hold the ports' word-call sequences: the handle makes small calls on
    /// them.
    /// For a GPU's clients (the words in device memory: an open reads nothing across the bus).
    /// An error (naming the port count) if `words` does not have one word per port, or the
    /// lanes do not fit the region's packets.
    pub fn with_port_words(
        region: Region<'a, M>,
        words: &'a [AtomicU64],
        lanes: L,
        wait: W,
    ) -> Result<Self, LayoutError> {
        if words.len() != region.layout.ports() as usize {
            return Err(LayoutError::Ports(region.layout.ports()));
        }
        let word_calls = region.layout.has_words() && !region.heads.is_empty();
        let mut client = Self::build(region, &[], words, lanes, wait)?;
        client.word.on = word_calls;
        Ok(client)
    }

    /// Whether this handle's locks are port words ([`Self::with_port_words`]).
    pub fn has_port_words(&self) -> bool {
        !self.port_words.is_empty()
    }
}

impl<'a, L: Lanes, M: Mailbox, W: Wait> Process<'a, Client, L, M, W> {
    /// Lets this handle make small calls on the region's word lines (`crate::words`) with
    /// `seqs` as the ports' sequence words: one word per port, zeroed when the region was,
    /// shared by every client handle on the region and by nothing else (on a GPU, device
    /// memory: a call then reads nothing across the bus before it sends). An error (naming the
    /// port count) if the region has no word lines or `seqs` has the wrong length.
    pub fn with_word_seqs(mut self, seqs: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        let layout = &self.region.layout;
        if !layout.has_words()
            || self.region.heads.is_empty()
            || seqs.len() != layout.ports() as usize
        {
            return Err(LayoutError::Ports(layout.ports()));
        }
        self.word.seqs = seqs;
        self.word.on = true;
        self.word.last_seq.set((NONE, 0));
        Ok(self)
    }

    /// Lets this handle's calls be announced in its own memory, with `words` as the announce
    /// words: two per lane of every port (`Layout::announce_words`, port by port, lane by lane:
    /// the word the service writes, then the count of values this lane asked for), shared by every
    /// client handle on the region and by nothing else (on a GPU, device memory). An error
    /// (naming the port count) if `words` has the wrong length.
    ///
    /// A service that finishes a call's work through a third party (the host's copy engine
    /// writing the GPU's memory) can be given a lane's word and a value to write there
    /// ([`Port::arm_announce`](crate::Port::arm_announce)); the client then waits on its own
    /// memory ([`Port::await_announced`](crate::Port::await_announced)) instead of polling the
    /// reply across the bus, and reads the reply once, when it is there.
    pub fn with_announce_words(mut self, words: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        let layout = &self.region.layout;
        if words.len() != layout.announce_words() {
            return Err(LayoutError::Ports(layout.ports()));
        }
        self.announce = words;
        Ok(self)
    }

    /// Whether this handle's calls can be announced in its own memory
    /// ([`Self::with_announce_words`]).
    pub fn announces(&self) -> bool {
        !self.announce.is_empty()
    }

    /// `lane`'s announce word on `port` and the count beside it, if the handle has them.
    #[inline(always)]
    pub(crate) fn announce_word(
        &self,
        port: u32,
        lane: u32,
    ) -> Option<(&'a AtomicU32, &'a AtomicU32)> {
        let at = 2 * (port * self.region.layout.lanes() + lane) as usize;
        Some((self.announce.get(at)?, self.announce.get(at + 1)?))
    }

    /// Lets groups of up to `lanes` active lanes make their small calls on the word lines
    /// (default [`WORD_LANES`]: a lone lane); larger groups use the
    /// packets. On an H200 (`BENCHMARKS.md`) a lone lane's no-op call is faster on a word line
    /// than through the packets, and so is a lone warp's; but a server does more work for a word
    /// call than for a packet, so thousands of warps calling at once are served faster on word
    /// lines with many server threads, about as fast with eight and slower with one (the figures:
    /// `BENCHMARKS.md`).
    pub fn word_lanes(mut self, lanes: u32) -> Self {
        self.word.lanes = lanes;
        self
    }

    /// The most active lanes of a group whose small calls take the word lines
    /// ([`word_lanes`](Self::word_lanes)).
    pub fn max_word_lanes(&self) -> u32 {
        self.word.lanes
    }

    /// Whether a group of `active` lanes makes its small calls on the word lines.
    #[inline(always)]
    pub(crate) fn words_for(&self, active: u64) -> bool {
        self.word.on && active.count_ones() <= self.word.lanes
    }

    /// The port [`open_for_words`](Self::open_for_words) opens, as `index * 2 + outbox bit`
    /// with the lanes that open it: the kept one, the cursor's, or one found by searching under
    /// the wait policy (the mask read again at each turn: a lane whose wait policy gave up has
    /// left, and the others go on as a smaller group).
    #[inline(always)]
    pub(crate) fn find_open(&self) -> Result<(u32, u64), crate::Error> {
        let mut mask = self.lanes.active_mask();
        let mut found = self.take_kept_for(mask);
        if found == NONE {
            found = self.take_cursor_for(mask);
        }
        let mut polls = 0u32;
        while found == NONE {
            mask = self.lanes.active_mask();
            if self.lanes.is_first_lane(mask) {
                found = self.search(u32::MAX);
            }
            found = self.lanes.broadcast(mask, found);
            if found == NONE {
                self.wait.pause(polls)?;
                polls = polls.saturating_add(1);
            }
        }
        Ok((found, mask))
    }

    /// The port this handle keeps, if it closed it holding its packet, as `index * 2 + outbox
    /// bit` shared by the lanes of `mask`, else `NONE`: no search, no memory read (the usual case
    /// for a GPU's word calls).
    #[inline(always)]
    fn take_kept_for(&self, mask: u64) -> u32 {
        let mut found = NONE;
        if self.kept.on {
            if self.lanes.is_first_lane(mask) {
                found = self.take_kept_open();
            }
            found = self.lanes.broadcast(mask, found);
        }
        found
    }

    /// The usual open of a port not kept, for the lanes of `mask`: the cursor port, free and ours
    /// by its outbox shadow, taken by one atomic in a short stretch of code run by the first lane
    /// alone ([`try_cursor`](Self::try_cursor)), as `index * 2 + outbox bit` shared by every
    /// lane; else `NONE` (the search decides). The search is far longer, and a stretch run by
    /// one lane while the others wait costs a group more than it costs a lone lane.
    #[inline(always)]
    fn take_cursor_for(&self, mask: u64) -> u32 {
        let mut found = NONE;
        if self.lanes.is_first_lane(mask) {
            found = self.try_cursor();
        }
        self.lanes.broadcast(mask, found)
    }

    /// The port a generated word call of the lanes of `mask` opens, as `index * 2 + outbox
    /// bit`, locked (or the kept one), and shared by every lane; `GAVE_UP` in every lane if the
    /// wait policy of any lane gave up. `mask` is the active mask the caller
    /// read at this same convergent point: a generated call passes a whole group's as a constant,
    /// so that each lane primitive of the call names the full group, which the GPU's compiler
    /// turns into the plain instruction (a mask known only at run time costs a check of the
    /// lanes' convergence at every primitive); the group is the same at every turn.
    ///
    /// (No `Result<Port, _>` here: its error shares the bytes of the port's handle pointer, and
    /// the merge of the two can keep the compiler from holding the handle in registers; on a GPU
    /// its fields then live in local memory. The caller checks this word and builds the port,
    /// [`port_for_words`](Self::port_for_words), only where there is one.)
    #[inline(always)]
    pub(crate) fn find_for_words(&self, mask: u64) -> u32 {
        let mut found = self.take_kept_for(mask);
        if found == NONE {
            found = self.take_cursor_for(mask);
        }
        let mut polls = 0u32;
        // (The group is the lanes that called: the same at every turn of the search.) Every lane
        // waits between searches under its wait policy, and the group gives up together when
        // one lane's policy gives up (a lane leaving alone would leave the others waiting for it
        // at the next broadcast), as a group's receive does.
        while found == NONE {
            if self.lanes.is_first_lane(mask) {
                found = self.search(u32::MAX);
            }
            found = self.lanes.broadcast(mask, found);
            if found == NONE {
                let stalled = self.wait.pause(polls).is_err();
                polls = polls.saturating_add(1);
                if self.lanes.ballot(mask, stalled) != 0 {
                    found = GAVE_UP;
                }
            }
        }
        found
    }
}

impl<L: Lanes, M: Mailbox, W: Wait> Process<'_, Client, L, M, W> {
    /// Runs `f` on a stand-in for this handle: a copy of it that takes this handle's state
    /// (its cursor, its kept port, its word calls' sequence and learned wait) and gives it back
    /// when `f` returns. For a call of a function that is not inlined (on a GPU, the runtime's
    /// shared calls: `ferry_rpc::service::CallSite::shared`): the function gets the copy's
    /// address, so this handle's own fields can stay in registers, where a handle whose address
    /// reaches such a function lives in local memory and every access of every call, the inlined
    /// ones too, becomes a load (gpu/NOTES.md).
    ///
    /// `f` gets this handle itself where its lanes or wait policy cannot be copied
    /// ([`Lanes::stand_in`], [`Wait::stand_in`]). The stand-in is never dropped: a port it keeps
    /// stays with this handle.
    #[inline(always)]
    pub fn with_stand_in<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        let (Some(lanes), Some(wait)) = (self.lanes.stand_in(), self.wait.stand_in()) else {
            return f(self);
        };
        // (Dropping the stand-in would release the kept port, and a sole handle's range: both
        // belong to this handle, which gets the state back below.)
        let stand_in = core::mem::ManuallyDrop::new(Process {
            region: self.region,
            locks: self.locks,
            lanes,
            wait,
            range: self.range.clone(),
            kept: self.kept.clone(),
            port_words: self.port_words,
            mirror: self.mirror,
            word: self.word.clone(),
            announce: self.announce,
            _side: PhantomData,
        });
        let result = f(&stand_in);
        self.range.cursor.set(stand_in.range.cursor.get());
        self.kept.port.set(stand_in.kept.port.get());
        self.kept.out.set(stand_in.kept.out.get());
        self.word.last_seq.set(stand_in.word.last_seq.get());
        self.word.last_shadow.set(stand_in.word.last_shadow.get());
        self.word.first_poll.set(stand_in.word.first_poll.get());
        result
    }
}

/// A client process.
pub type ClientProcess<'a, L = Single, M = PerPort, W = Spin> = Process<'a, Client, L, M, W>;
/// A server process.
pub type ServerProcess<'a, L = Single, M = PerPort, W = Spin> = Process<'a, Server, L, M, W>;

impl<'a, S: Side, L: Lanes, M: Mailbox, W: Wait> Process<'a, S, L, M, W> {
    /// A handle on `region` for side `S`, with `locks` as this side's lock bitmap.
    ///
    /// `locks` must have `layout.lock_words()` words and be shared by every handle of this side
    /// on this region (and by no handle of the other side).
    pub fn new(
        region: Region<'a, M>,
        locks: &'a [AtomicU32],
        lanes: L,
        wait: W,
    ) -> Result<Self, LayoutError> {
        if locks.len() != region.layout.lock_words() {
            return Err(LayoutError::Ports(region.layout.ports()));
        }
        Self::build(region, locks, &[], lanes, wait)
    }

    /// A handle whose locks are the bitmap `locks`, or (`locks` empty) the port words
    /// `port_words`; the caller checked their lengths.
    fn build(
        region: Region<'a, M>,
        locks: &'a [AtomicU32],
        port_words: &'a [AtomicU64],
        lanes: L,
        wait: W,
    ) -> Result<Self, LayoutError> {
        if lanes.lane_size() > region.layout.lanes() {
            return Err(LayoutError::Lanes(lanes.lane_size()));
        }
        let words = region.layout.lock_words() as u32;
        Ok(Process {
            region,
            locks,
            lanes,
            wait,
            range: Range {
                first_word: 0,
                words,
                cursor: Cell::new(0),
                sole: false,
            },
            kept: Kept {
                on: false,
                port: Cell::new(NONE),
                out: Cell::new(UNKNOWN),
            },
            port_words,
            mirror: &[],
            word: WordCalls {
                on: false,
                lanes: WORD_LANES,
                seqs: &[],
                last_seq: Cell::new((NONE, 0)),
                last_shadow: Cell::new(0),
                first_poll: Cell::new(0),
            },
            announce: &[],
            _side: PhantomData,
        })
    }

    /// Keeps a closed port locked for this handle's next `open`, which then takes it back without
    /// a search, a lock and an unlock (two locked instructions and a scan saved per call) if this
    /// side still owns its packet; otherwise it is unlocked and the search runs as usual. The price:
    /// the handle holds one port while idle, until its next open or until it is dropped. For
    /// handles that call often (a thread, a warp) on a region with a port for each of them and
    /// one more: a warp keeps the port of a group with lane 0 in it, which a group without lane 0
    /// cannot take, so with every port kept such a group would wait forever.
    pub fn keep_port(mut self, keep: bool) -> Self {
        self.kept.on = keep;
        self
    }

    /// Makes `port` this handle's kept port, as if it had opened and closed it with
    /// [`keep_port`](Self::keep_port) on (which this turns on): the next `open` takes it without a
    /// search or a lock if this side owns its packet. For transports that hand one port to a
    /// handle for a while (a claimed shared-memory port) and build handles per call; the other way
    /// out is [`take_kept`](Self::take_kept). A port kept before is unlocked first.
    ///
    /// # Safety
    ///
    /// `port` must be inside this handle's [`port_range`](Self::port_range) and its lock must be
    /// held on this handle's behalf (its bit set in this side's lock bitmap, or its port word's
    /// lock bit set: a port another handle gave up with [`take_kept`](Self::take_kept)): no other
    /// handle of this side opens it until this handle releases it (by `take_kept`, or by
    /// unlocking it when dropped). Otherwise two handles could write the same packet at once.
    pub unsafe fn adopt_port(mut self, port: u32) -> Self {
        debug_assert!(self.port_range().contains(&port));
        self.kept.on = true;
        let previous = self.kept.port.replace(port);
        self.kept.out.set(UNKNOWN);
        if previous != NONE && previous != port {
            self.unlock(previous);
        }
        // The lock was set for this handle from outside: the port's sequence word is read again.
        self.write_back();
        self
    }

    /// Takes the kept port back from this handle without unlocking it: its lock bit stays set, and
    /// the caller is now responsible for it: to adopt it into another handle
    /// ([`adopt_port`](Self::adopt_port)), which releases it in the end, or, on a lock bitmap, to
    /// clear its bit (with release ordering). A port word's state is written to the word first.
    /// `None` if no port is kept (`keep_port` is off, or the kept port was released because the
    /// other side held its packet at the last open).
    pub fn take_kept(&self) -> Option<u32> {
        self.kept.out.set(UNKNOWN);
        // Another handle may make the port's next calls: the port's state goes to its word.
        self.write_back();
        match self.kept.port.replace(NONE) {
            NONE => None,
            port => Some(port),
        }
    }

    /// Called by a closing port in its first lane: keeps `port` locked for the next open, or
    /// unlocks it. `owned_out` is this side's outbox bit if it holds the packet at close; `lead`
    /// says whether lane 0 had the port open (it is then the group's first lane, the one that
    /// searches at the next open of any group it is in). Only such a group keeps its port: each
    /// lane's handle is its own copy, so lanes that call apart (a divergent warp) would each keep
    /// one, and a warp could hold many ports while idle; with this rule a warp keeps at most one,
    /// and the calls of lane 0 alone (a print from one thread) keep theirs as a whole warp does.
    pub(crate) fn release(&self, port: u32, owned_out: Option<u32>, lead: bool) {
        if self.kept.on && lead {
            // A handle with two ports open keeps the last one closed: the one kept before is
            // released.
            let previous = self.kept.port.replace(port);
            self.kept.out.set(owned_out.unwrap_or(UNKNOWN));
            if previous != NONE && previous != port {
                self.unlock(previous);
            }
        } else {
            self.unlock(port);
        }
    }

    /// [`release`](Self::release) for a port whose hold made word calls only (no packet was
    /// touched since its lock): kept as `release` keeps it, else unlocked with no fence. With
    /// port words the unlock is a relaxed swap of the port's state into its word
    /// ([`unlock_swap64`]): the next holder needs from this one only that state, which is in the
    /// word its lock reads (the word lines' words carry their own sequence numbers, and the
    /// caller's last call was answered, so its words had arrived: a call given up on is closed
    /// as any port is, fenced, so its stores cannot land on the next holder's); the swap, a
    /// read-modify-write, keeps the next holder's lock in the release sequence of the last
    /// holder that touched the packet. (A bell or summit store of the answered call, a hint, could
    /// in principle still land after the next holder's: the server would then see its group
    /// settled and find the next call at the group's sweep, as for any bell seen early.) A lock
    /// bitmap's unlock is `unlock`'s. Runs in the first lane only.
    #[inline(always)]
    pub(crate) fn release_words(&self, port: u32, out: u32, lead: bool) {
        if (self.kept.on && lead) || self.range.sole || self.port_words.is_empty() {
            self.release(port, Some(out), lead);
            return;
        }
        let state = self.held_word(port);
        if self.word.last_seq.get().0 == port {
            self.word.last_seq.set((NONE, 0));
        }
        // SYNC (lock release, word calls only): none needed but the word's own order, above.
        unlock_swap64(&self.port_words[port as usize], state);
    }

    /// Takes every port of this handle's range ([`port_range`](Self::port_range)) for this
    /// handle alone: sets all their lock bits at once, so its opens and closes then skip the lock
    /// and the unlock (two locked instructions per call; the search still reads the mailboxes).
    /// The bits are cleared when the handle is dropped. For a server thread that serves a range no
    /// other handle of its side touches (`serve` in `ferry-gpu` splits the ports this way).
    /// If another handle holds a port of the range, nothing is changed and the handle comes back
    /// as the error. Call it before [`keep_port`](Self::keep_port) or
    /// [`adopt_port`](Self::adopt_port), which it makes pointless.
    // The handle itself comes back on failure (no allocation in this `no_std` crate to box it).
    #[allow(clippy::result_large_err)]
    pub fn exclusive(mut self) -> Result<Self, Self> {
        if !self.take_range() {
            return Err(self);
        }
        // SYNC (lock acquire): pairs with the release (fence, or a port word's release store)
        // in the `unlock` of every port's previous holder, as a `lock` of each would.
        lock_fence(Ordering::Acquire);
        self.range.sole = true;
        Ok(self)
    }

    /// Sets every lock of this handle's range (relaxed: the caller orders), or none if another
    /// handle holds one of them; whether it did.
    fn take_range(&self) -> bool {
        if !self.port_words.is_empty() {
            let ports = self.port_range();
            for port in ports.clone() {
                let previous =
                    self.port_words[port as usize].fetch_or(PORT_LOCKED, Ordering::Relaxed);
                if previous & PORT_LOCKED != 0 {
                    // Give back the locks taken before this one.
                    for p in ports.start..port {
                        self.port_words[p as usize].fetch_and(!PORT_LOCKED, Ordering::Relaxed);
                    }
                    return false;
                }
            }
            return true;
        }
        let range =
            self.range.first_word as usize..(self.range.first_word + self.range.words) as usize;
        for w in range.clone() {
            let previous = self.locks[w].fetch_or(u32::MAX, Ordering::Relaxed);
            if previous != 0 {
                // Give back the bits we set, here and in the words before.
                self.locks[w].fetch_and(previous, Ordering::Relaxed);
                for v in range.start..w {
                    self.locks[v].fetch_and(0, Ordering::Relaxed);
                }
                return false;
            }
        }
        true
    }

    /// Clears every lock of this handle's range, released: what `exclusive` took.
    fn give_range(&self) {
        // SYNC (lock release): as `unlock`, for every port of the range at once.
        lock_fence(Ordering::Release);
        if !self.port_words.is_empty() {
            for port in self.port_range() {
                self.port_words[port as usize].fetch_and(!PORT_LOCKED, Ordering::Relaxed);
            }
        } else {
            for w in self.range.first_word..self.range.first_word + self.range.words {
                self.locks[w as usize].fetch_and(0, Ordering::Relaxed);
            }
        }
    }

    /// Gives an [`exclusive`](Self::exclusive) handle a copy of its own outbox bits in `mirror`
    /// (`layout.lock_words()` words, one bit per port, private to this handle), filled here from
    /// the region and kept by the handle's flips. Its searches then read only the other side's
    /// mailbox words and take their own from the copy: with one word per port, half the loads of
    /// a scan (a server thread scanning thousands of GPU ports). Exact because no one else flips
    /// this side's outbox for the handle's ports: it holds all their locks. Refused (the error
    /// names the port count) if the handle is not exclusive or `mirror` has the wrong length.
    pub fn with_outbox_mirror(mut self, mirror: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        if !self.range.sole || mirror.len() != self.region.layout.lock_words() {
            return Err(LayoutError::Ports(self.region.layout.ports()));
        }
        for w in self.range.first_word..self.range.first_word + self.range.words {
            mirror[w as usize].store(M::load_word(S::outbox(&self.region), w), Ordering::Relaxed);
        }
        self.mirror = mirror;
        Ok(self)
    }

    /// Starts this handle's searches at `port` (modulo the port count). Spreading the starts of
    /// concurrent clients (by thread or warp index) lets each find a free port at its first step.
    pub fn with_cursor(self, port: u32) -> Self {
        self.range.cursor.set(port % self.region.layout.ports());
        self
    }

    /// Restricts this handle to ports `first_port .. first_port + count` (both multiples of 32):
    /// its searches scan, lock and open only those. Server threads that split the ports between
    /// them this way never touch each other's lock words or mailbox lines; together they must
    /// cover every port, or requests on the uncovered ones are never served. A search starting
    /// outside the range starts at its first port. Refused after [`exclusive`](Self::exclusive).
    pub fn restrict(mut self, first_port: u32, count: u32) -> Result<Self, LayoutError> {
        let ports = self.region.layout.ports();
        // An exclusive handle holds its range's locks: its range cannot move.
        if self.range.sole
            || !first_port.is_multiple_of(PORT_GRANULE)
            || !count.is_multiple_of(PORT_GRANULE)
            || count == 0
            || first_port.checked_add(count).is_none_or(|end| end > ports)
        {
            return Err(LayoutError::Ports(count));
        }
        self.range.first_word = first_port / PORT_GRANULE;
        self.range.words = count / PORT_GRANULE;
        Ok(self)
    }

    /// The ports this handle searches (all of the region's unless [`restrict`](Self::restrict)ed).
    pub fn port_range(&self) -> core::ops::Range<u32> {
        self.range.first_word * PORT_GRANULE
            ..(self.range.first_word + self.range.words) * PORT_GRANULE
    }

    /// Moves where this handle's next search starts (modulo the port count).
    pub fn set_cursor(&self, port: u32) {
        self.range.cursor.set(port % self.region.layout.ports());
    }

    /// The region.
    pub fn region(&self) -> &Region<'a, M> {
        &self.region
    }

    /// The lanes.
    pub fn lanes(&self) -> &L {
        &self.lanes
    }

    /// The waiting policy.
    pub fn wait_policy(&self) -> &W {
        &self.wait
    }

    /// The port [`try_open_within`](Self::try_open_within) opens, as `index * 2 + outbox bit`,
    /// with the lanes that open it: the first lane's choice, shared by every lane.
    #[inline(always)]
    pub(crate) fn find_within(&self, lock_words: u32) -> (u32, u64) {
        let mask = self.lanes.active_mask();
        let mut found = NONE;
        if self.lanes.is_first_lane(mask) {
            found = self.search(lock_words);
        }
        // The port index is made uniform: every lane uses the first lane's choice.
        (self.lanes.broadcast(mask, found), mask)
    }

    /// Whether [`try_open`](Self::try_open) may find a port now: one look at each lock word of
    /// this handle's range (with port words, at each port's word) and, for a server, at each
    /// mailbox word; no lock is taken. A hint for
    /// a poll loop (a port may be taken, or a request arrive, right after), much cheaper than a
    /// search that finds nothing. Any lane may call it.
    pub fn may_open(&self) -> bool {
        self.may_open_within(u32::MAX)
    }

    /// As [`may_open`](Self::may_open) for [`try_open_within`](Self::try_open_within)`(_,
    /// lock_words)`: looks at the ports that search would, no more: `lock_words` lock words (32
    /// ports each) from the cursor's port (of the first word, the ports from the cursor's up).
    /// If it finds nothing there, the next search (and the next look) starts after them, as
    /// after a search that found nothing: a poll loop that calls this and opens only when it
    /// says so still looks at every port in turn (a port waits at most a turn of the windows and
    /// one more), and its turns cost the same on a region of thousands of ports as on one of a
    /// few hundred.
    #[inline]
    pub fn may_open_within(&self, lock_words: u32) -> bool {
        if self.kept.port.get() != NONE {
            return true;
        }
        let (base, words) = (self.range.first_word, self.range.words);
        if lock_words >= words {
            // A look at every word: no window, no cursor to move.
            return (base..base + words).any(|word| self.may_open_word(word, u32::MAX));
        }
        let start = self.range.cursor.get();
        let (first, first_bit) = match self.port_range().contains(&start) {
            true => (start / PORT_GRANULE - base, start % PORT_GRANULE),
            false => (0, 0),
        };
        let looked = lock_words.clamp(1, words);
        // As the search it stands for: a window's first word from the cursor's port up (its
        // ports below were the last window's); a look at every word (a window of none, on a
        // range of one word) takes each whole.
        let mut mask = match looked < words {
            true => u32::MAX << first_bit,
            false => u32::MAX,
        };
        let mut offset = first;
        for _ in 0..looked {
            if self.may_open_word(base + offset, mask) {
                return true;
            }
            mask = u32::MAX;
            offset += 1;
            if offset == words {
                offset = 0;
            }
        }
        if looked < words {
            // Nothing here: the next look (and search) goes on from the word after these.
            self.range.cursor.set((base + offset) * PORT_GRANULE);
        }
        false
    }

    /// Whether a port of lock word `word` among those of `mask` is unlocked and (for a server,
    /// which scans the mailbox) has a request: [`may_open_within`](Self::may_open_within)'s
    /// look at one word.
    #[inline(always)]
    fn may_open_word(&self, word: u32, mask: u32) -> bool {
        let free = self.unlocked(word) & mask;
        free != 0 && (!S::SCAN_MAILBOX || free & self.owned_bits(word) != 0)
    }

    /// Takes `port`'s lock of this side without opening the port, if no handle of this side
    /// holds it now (a handle inside a call on it, or keeping it): `None` if one does. While the
    /// returned [`Held`] lives, no handle of this side opens the port, so this side's outbox bit
    /// for it stays as it is; and whatever the port's previous lock holders did (their outbox
    /// flips included) is visible to the holder: the lock is taken and released with the
    /// orderings of an open's and a close's. Dropping the guard releases the lock.
    ///
    /// For a transport's housekeeping beside this side's handles: the shared-memory server's
    /// monitor holds a dead client's port this way (as the server side) to learn, with no worker
    /// on it, whether its packet is at rest before freeing it. A guard opens nothing and moves no
    /// packet. Not a group operation: one thread calls it (on a GPU, one lane). An
    /// [`exclusive`](Self::exclusive) handle gets `None`: it holds every lock of its range
    /// itself, and cannot tell whether it is using the port.
    ///
    /// # Panics
    ///
    /// If `port` is not a port of the region.
    pub fn try_hold(&self, port: u32) -> Option<Held<'_, 'a, S, L, M, W>> {
        assert!(
            port < self.region.layout.ports(),
            "port {port} is not a port of the region"
        );
        if self.range.sole || !self.lock(port) {
            return None;
        }
        // SYNC (lock acquire): `lock` took the bit with acquire ordering (an acquire atomic on
        // NVPTX, an acquire fence after it elsewhere); it pairs with the release (fence, or a
        // port word's release store) in the previous holder's `unlock`, so that holder's outbox
        // flip is visible to the
        // mailbox reads made through the guard.
        Some(Held {
            process: self,
            port,
        })
    }

    /// Whether this side owns `port`'s packet, given its own outbox bit `out`.
    #[inline(always)]
    pub(crate) fn owns(&self, port: u32, out: u32) -> bool {
        (M::load(S::inbox(&self.region), port) ^ out) == S::OWNED_WHEN
    }

    #[inline(always)]
    pub(crate) fn flip_outbox(&self, port: u32, value: u32) {
        M::flip(S::outbox(&self.region), port, value);
        if let Some(bits) = self.mirror.get((port / PORT_GRANULE) as usize) {
            // A flip toggles the bit. Only this handle touches its mirror (first lane, ports it
            // holds), so a load and a store do.
            let bit = 1 << (port % PORT_GRANULE);
            private_store(bits, private_load(bits) ^ bit);
        }
        if !self.port_words.is_empty() {
            self.set_shadow(port, value | SHADOW_IN_FLIGHT);
        }
    }

    /// Records that this side (a client with port words) saw the reply on `port` and fenced
    /// after it. Runs in the first lane only, with the lock held.
    #[inline(always)]
    pub(crate) fn note_owned(&self, port: u32, out: u32) {
        if !self.port_words.is_empty() {
            self.set_shadow(port, out);
        }
    }

    /// Records `port`'s new outbox shadow (its word held by this handle), its sequence kept.
    #[inline(always)]
    fn set_shadow(&self, port: u32, shadow: u32) {
        let seq = self.held_word(port) as u32;
        self.set_held(port, seq, shadow);
    }

    /// The state of `port`, whose port word this handle holds, as the word holds it with the lock
    /// bit clear: from the handle when it took the lock or made the last change
    /// ([`set_held`](Self::set_held)), else from the word (exact: a state the handle no longer
    /// caches was written back). First lane only.
    #[inline(always)]
    fn held_word(&self, port: u32) -> u64 {
        let (last, seq) = self.word.last_seq.get();
        if last == port {
            return port_state(seq, self.word.last_shadow.get());
        }
        private_load(&self.port_words[port as usize]) & !PORT_LOCKED
    }

    /// Records `port`'s new state (its word-call sequence and outbox shadow), the port's word
    /// held by this handle, in the handle: the word gets it when the lock is released or given
    /// away, or when the handle caches another port (`write_back`). First lane only.
    #[inline(always)]
    fn set_held(&self, port: u32, seq: u32, shadow: u32) {
        if self.range.sole {
            // An exclusive handle's lane groups each hold every port: the state goes to the word
            // at once, and nothing is cached (`last_seq`).
            holder_store64(
                &self.port_words[port as usize],
                PORT_LOCKED | port_state(seq, shadow),
            );
            return;
        }
        if self.word.last_seq.get().0 != port {
            self.write_back();
        }
        self.word.last_seq.set((port, seq));
        self.word.last_shadow.set(shadow);
    }

    /// With port words, writes the state the handle caches (of a port it holds) back to the
    /// port's word, its lock bit still set, and forgets it. First lane only.
    #[inline(always)]
    fn write_back(&self) {
        let (port, seq) = self.word.last_seq.replace((NONE, 0));
        if let Some(word) = self.port_words.get(port as usize) {
            // Only the holder writes the word's state: a relaxed store keeps the word exact
            // (`holder_store64`), and the unlock's release orders it before the next holder's
            // lock.
            holder_store64(
                word,
                PORT_LOCKED | port_state(seq, self.word.last_shadow.get()),
            );
        }
    }

    /// With port words, whether the locked `port` is ours and our outbox bit: from the outbox
    /// shadow alone when the last holder saw its reply, else from the inbox.
    #[inline(always)]
    fn open_by_shadow(&self, port: u32) -> Option<u32> {
        let word = self.held_word(port);
        let out = shadow_of(word) & 1;
        if word & PORT_IN_FLIGHT == 0 {
            // SYNC (take ownership, no fence): the last holder saw inbox == outbox, fenced
            // (acquire, system scope) and then cleared the bit; its unlock's release and our
            // lock's acquire (GPU scope) order us after that fence, so the server's last accesses
            // to the packet happen before ours. The server cannot have flipped since: it flips
            // only a packet it owns, and it owns none until a client flips.
            return Some(out);
        }
        if self.owns(port, out) {
            // SYNC (take ownership): pairs with the server's release fence before the flip we
            // just observed (a port a client left mid-call, now answered).
            fence(Ordering::Acquire);
            self.note_owned(port, out);
            return Some(out);
        }
        None
    }

    /// With port words and no port kept, the cursor port locked and opened as by `search`'s
    /// first step (`try_port`: free, and ours by its outbox shadow), as `index * 2 + outbox
    /// bit`; else `NONE`, nothing held (the search decides). First lane only.
    #[inline(always)]
    fn try_cursor(&self) -> u32 {
        let port = self.range.cursor.get();
        if self.port_words.is_empty()
            || self.kept.port.get() != NONE
            || !self.port_range().contains(&port)
        {
            return NONE;
        }
        self.try_port(port).unwrap_or(NONE)
    }

    /// This handle's kept port as `index * 2 + outbox bit`, taken if this handle closed it
    /// holding its packet, else `NONE` with nothing changed (`search` then decides). No memory is
    /// read: on a GPU this open costs no trip across the bus. First lane only.
    #[inline(always)]
    fn take_kept_open(&self) -> u32 {
        let (kept, out) = (self.kept.port.get(), self.kept.out.get());
        if kept == NONE || out == UNKNOWN {
            return NONE;
        }
        // SYNC (none needed): this handle closed the port holding its packet, after taking it
        // with an acquire (fence or load) that ordered the other side's accesses before ours; the
        // other side flips only a packet it owns, so it has not touched the packet since.
        self.kept.port.set(NONE);
        self.kept.out.set(UNKNOWN);
        kept * 2 + out
    }

    /// Finds a port this side owns and locks it, among the ports of at most `limit` lock words
    /// from the cursor; returns `index * 2 + outbox bit`, or `NONE` (the cursor then moves past
    /// the words looked at). Runs in the first lane only.
    fn search(&self, limit: u32) -> u32 {
        let open = self.take_kept_open();
        if open != NONE {
            return open;
        }
        // A kept port whose packet this handle may not hold (or none): decided below.
        let kept = self.kept.port.replace(NONE);
        self.kept.out.set(UNKNOWN);
        if kept != NONE && !self.port_words.is_empty() {
            // With port words: decide from the outbox shadow, as a fresh lock would, without
            // reading the mailboxes (`open_by_shadow` holds the argument; here the last holder
            // is this handle itself, so program order replaces the lock's pairing).
            if let Some(out) = self.open_by_shadow(kept) {
                return kept * 2 + out;
            }
            self.unlock(kept);
        } else if kept != NONE {
            // The lock was never released: no other handle of this side touched the port since we
            // closed it, so our outbox bit is still the one we wrote.
            let out = M::load(S::outbox(&self.region), kept);
            if self.owns(kept, out) {
                // SYNC (take ownership): as in the search below; the other side may have flipped
                // since our last close (it answered a one-way call), and we read its packet next.
                fence(Ordering::Acquire);
                return kept * 2 + out;
            }
            self.unlock(kept);
        }
        let (base, words) = (self.range.first_word, self.range.words);
        let mut start = self.range.cursor.get();
        if !self.port_range().contains(&start) {
            start = base * PORT_GRANULE;
        }
        let (first_word, first_bit) = (start / PORT_GRANULE - base, start % PORT_GRANULE);
        // A GPU client first tries its cursor port alone, without reading its lock word (its own
        // port, or the one it used last: usually free), which saves a dependent trip to device
        // memory; then, as everywhere, it scans. On a CPU the read is cheap and a failed lock is
        // not. (One pass of the loop below, so the per-port step stays one copy of the code.)
        let mut cursor_only = cfg!(target_arch = "nvptx64") && !S::SCAN_MAILBOX;
        // `words + 1` steps: the starting word is visited twice, first from `first_bit` up, last
        // below it, so every port of the range is tried exactly once. The word index wraps by
        // comparison: a `%` (a division) per step would cost more than the step.
        // With a `limit` below the range's words, `limit` words: the first from `first_bit` up,
        // the next ones whole (the first word's bits below `first_bit` were the last window's).
        let last_step = match limit < words {
            true => limit.max(1) - 1,
            false => words,
        };
        let mut offset = first_word;
        let mut step = 0;
        while step <= last_step {
            if step != 0 {
                offset += 1;
                if offset == words {
                    offset = 0;
                }
            }
            let word = base + offset;
            let mut free = if cursor_only {
                1 << first_bit
            } else {
                self.unlocked(word)
            };
            if step == 0 {
                free &= u32::MAX << first_bit;
            } else if step == words {
                free &= !(u32::MAX << first_bit);
            }
            if S::SCAN_MAILBOX && free != 0 {
                free &= self.owned_bits(word);
            }
            while free != 0 {
                let port = word * PORT_GRANULE + free.trailing_zeros();
                free &= free - 1;
                if let Some(found) = self.try_port(port) {
                    return found;
                }
            }
            if cursor_only {
                // The cursor port alone did not do: scan from the same word, reading its locks.
                cursor_only = false;
                continue;
            }
            step += 1;
        }
        if last_step < words {
            // The next search goes on from the word after the last one looked at.
            let next = (first_word + last_step + 1) % words;
            self.range.cursor.set((base + next) * PORT_GRANULE);
        }
        NONE
    }

    /// The ports of lock word `word` that no handle of this side holds (an exclusive handle
    /// holds every lock of its range: all of them).
    #[inline(always)]
    fn unlocked(&self, word: u32) -> u32 {
        if self.range.sole {
            u32::MAX
        } else if !self.port_words.is_empty() {
            let first = (word * PORT_GRANULE) as usize;
            let mut free = 0;
            for (bit, port_word) in self.port_words[first..first + PORT_GRANULE as usize]
                .iter()
                .enumerate()
            {
                if private_load(port_word) & PORT_LOCKED == 0 {
                    free |= 1 << bit;
                }
            }
            free
        } else {
            !private_load(&self.locks[word as usize])
        }
    }

    /// The ports of mailbox word `word` whose packet this side owns, as the mailboxes read now
    /// (a hint: the owner is certain only under the port's lock).
    #[inline(always)]
    fn owned_bits(&self, word: u32) -> u32 {
        let inbox = M::load_word(S::inbox(&self.region), word);
        let outbox = match self.mirror.get(word as usize) {
            Some(bits) => private_load(bits),
            None => M::load_word(S::outbox(&self.region), word),
        };
        if S::OWNED_WHEN == 1 {
            inbox ^ outbox
        } else {
            !(inbox ^ outbox)
        }
    }

    /// Locks `port` and keeps it if this side owns its packet; returns `index * 2 + outbox bit`,
    /// or unlocks it again and returns `None`. First lane only.
    #[inline(always)]
    fn try_port(&self, port: u32) -> Option<u32> {
        if !self.lock(port) {
            return None;
        }
        if !self.port_words.is_empty() {
            // The lock's atomic returned the port's state with it (`lock` keeps it in the
            // handle): its outbox shadow and word-call sequence are known without a load.
            return match self.open_by_shadow(port) {
                Some(out) => {
                    self.advance_cursor(port);
                    Some(port * 2 + out)
                }
                None => {
                    self.unlock(port);
                    None
                }
            };
        }
        // The mailboxes are re-read with the lock held: the state may have moved since the scan,
        // and the previous lock holder may have flipped our outbox.
        let out = M::load(S::outbox(&self.region), port);
        if self.owns(port, out) {
            // SYNC (take ownership): pairs with the other side's release fence before the flip we
            // just observed; the packet's contents are now visible to us.
            fence(Ordering::Acquire);
            self.advance_cursor(port);
            return Some(port * 2 + out);
        }
        self.unlock(port);
        None
    }

    /// Where the next search starts after opening `port`: the same port for a client, the next
    /// for a server (fairness).
    #[inline(always)]
    fn advance_cursor(&self, port: u32) {
        let next = port + S::CURSOR_STEP;
        self.range
            .cursor
            .set(if next == self.region.layout.ports() {
                0
            } else {
                next
            });
    }

    /// The sequence words of word calls (empty: none, or port words).
    #[cfg(test)]
    pub(crate) fn word_seqs(&self) -> &'a [AtomicU32] {
        self.word.seqs
    }

    /// Whether this handle makes calls on the word lines (it has sequence words for them: its
    /// port words, or those of [`with_word_seqs`](Process::with_word_seqs)).
    #[inline(always)]
    pub(crate) fn word_calls(&self) -> bool {
        self.word.on
    }

    /// The next word-call sequence of `port`, which this handle holds: from
    /// [`last_seq`](Self::last_seq) where that is the port's, else from its sequence word. The
    /// caller stores it with [`sent_seq`](Self::sent_seq). First lane only.
    #[inline(always)]
    pub(crate) fn next_seq(&self, port: u32) -> u32 {
        let (last_port, last) = self.word.last_seq.get();
        if last_port == port {
            return last.wrapping_add(1);
        }
        // Only the lock holder touches the port's sequence word.
        if !self.port_words.is_empty() {
            return (self.held_word(port) as u32).wrapping_add(1);
        }
        private_load(&self.word.seqs[port as usize]).wrapping_add(1)
    }

    /// Records `seq` as `port`'s last word call: in this handle, and in its sequence word (for
    /// the port's next holder; a port word gets it when the lock is released or given away,
    /// `set_held`). First lane only.
    #[inline(always)]
    pub(crate) fn sent_seq(&self, port: u32, seq: u32) {
        if !self.port_words.is_empty() {
            // The word gets it when the lock is released or given away (`set_held`).
            self.set_held(port, seq, shadow_of(self.held_word(port)));
            return;
        }
        private_store(&self.word.seqs[port as usize], seq);
        self.word.last_seq.set((port, seq));
    }

    /// How long after its send a word call polls first for its reply, in ns (`first_poll`).
    #[inline(always)]
    pub(crate) fn first_poll(&self) -> &Cell<u32> {
        &self.word.first_poll
    }

    /// Whether this handle holds every lock of its range ([`Self::exclusive`]).
    #[inline(always)]
    pub(crate) fn is_sole(&self) -> bool {
        self.range.sole
    }

    /// Takes `port`'s lock bit of this side; true if it was clear (always for an exclusive
    /// handle). Release it with `unlock`.
    #[inline(always)]
    pub(crate) fn lock_port(&self, port: u32) -> bool {
        self.lock(port)
    }

    /// Sets `port`'s lock bit; true if it was clear.
    #[inline(always)]
    fn lock(&self, port: u32) -> bool {
        if self.range.sole {
            // Held since `exclusive`.
            return true;
        }
        if let Some(word) = self.port_words.get(port as usize) {
            // SYNC (lock acquire): pairs with the release store of the previous holder's
            // `unlock`, so its outbox flip and header writes are visible before we read the
            // mailboxes, and the state it left in the word (read by this very atomic) is the
            // latest.
            let previous = lock_acquire_or(word, PORT_LOCKED);
            if previous & PORT_LOCKED != 0 {
                return false;
            }
            // The port's state came with the lock: kept in the handle, so the open and a word
            // call on the port read nothing more.
            self.set_held(port, previous as u32, shadow_of(previous));
            return true;
        }
        let bit = 1 << (port % PORT_GRANULE);
        // SYNC (lock acquire): pairs with the release in `unlock` of the previous holder, so its
        // outbox flip and header writes are visible before we re-read the mailboxes.
        let previous = lock_acquire_or(&self.locks[(port / PORT_GRANULE) as usize], bit);
        previous & bit == 0
    }

    /// Clears `port`'s lock bit. Runs in the first lane only.
    #[inline(always)]
    pub(crate) fn unlock(&self, port: u32) {
        if let Some(word) = self.port_words.get(port as usize) {
            if self.range.sole {
                // Held until the handle is dropped: the state goes to the word, for the next
                // group of this handle's lanes.
                if self.word.last_seq.get().0 == port {
                    self.write_back();
                }
                return;
            }
            let state = self.held_word(port);
            if self.word.last_seq.get().0 == port {
                self.word.last_seq.set((NONE, 0));
            }
            // SYNC (lock release): everything this holder did to the port happens before the
            // next holder's `lock`, which reads this store; the state goes with it.
            lock_release_store64(word, state);
            return;
        }
        // The next holder moves the port's sequence on: another handle, or (a handle holding
        // every lock, whose lock is not released) another group of this handle's lanes.
        if self.word.last_seq.get().0 == port {
            self.word.last_seq.set((NONE, 0));
        }
        if self.range.sole {
            // Held until the handle is dropped.
            return;
        }
        // SYNC (lock release): everything this holder did to the port, its outbox flip included,
        // happens before the next holder's `lock`. (On NVPTX one `red.release.gpu` measured
        // slower than the fence and the relaxed atomic.)
        lock_fence(Ordering::Release);
        let bit = 1 << (port % PORT_GRANULE);
        self.locks[(port / PORT_GRANULE) as usize].fetch_and(!bit, Ordering::Relaxed);
    }
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> Drop for Process<'_, S, L, M, W> {
    fn drop(&mut self) {
        // A port kept locked by `keep_port` is released with its handle (only the first lane of
        // the group that closed it holds it in `kept`).
        let kept = self.kept.port.replace(NONE);
        if kept != NONE {
            self.unlock(kept);
        }
        if self.range.sole {
            self.write_back();
            self.give_range();
        }
    }
}

/// A port's lock, held by [`Process::try_hold`] without opening the port: while it lives no other
/// handle of the holder's side opens the port or flips that side's outbox bit for it. Dropping it
/// releases the lock with the release ordering of a close.
#[must_use = "dropping a held port releases its lock at once"]
pub struct Held<'p, 'a, S: Side, L: Lanes, M: Mailbox, W: Wait> {
    process: &'p Process<'a, S, L, M, W>,
    port: u32,
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> Held<'_, '_, S, L, M, W> {
    /// The port held.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Whether the client side owns the port's packet now ([`Region::client_owns`], read with the
    /// lock held, so after the last flip of every earlier holder of this side's lock).
    ///
    /// Held by the server side: `false` (a request is pending) stays `false` while the guard
    /// lives, since no server handle can answer it and a client flips only a packet it owns;
    /// `true` stays `true` unless a client sends (a live one may: keeping clients off the port
    /// is the transport's business).
    pub fn client_owns(&self) -> bool {
        self.process.region.client_owns(self.port)
    }
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> Drop for Held<'_, '_, S, L, M, W> {
    fn drop(&mut self) {
        // SYNC (lock release): `unlock`'s release (fence, or a port word's release store) orders
        // everything the holder did before the next holder's lock acquire.
        self.process.unlock(self.port);
    }
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> core::fmt::Debug for Held<'_, '_, S, L, M, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Held").field("port", &self.port).finish()
    }
}
