//! Inline calls: a small call's request and reply in a few cache lines per port, beside the
//! packets.
//!
//! A call through the packets moves four cache lines between the two processes: the client's
//! mailbox line and the packet's header and slot lines to the server, the server's mailbox line
//! and the slot line back, each transfer a cross-core trip, before any protocol logic (`ferry
//! bench` measures this "layout floor" against a one-line ping-pong: `BENCHMARKS.md`). A call
//! whose request and reply are both fixed and at most [`INLINE_BYTES`] (256) can instead travel
//! in its port's *inline lines*: its *head line*, where both sides' sequence words sit beside the
//! first 40 bytes, and, for a call longer than that, up to [`WIDE_LINES`] *wide lines*, each
//! carrying the call's sequence in its first word beside 56 bytes. A call of at most 40 bytes
//! each way moves one line each way; a longer one moves the lines its bytes need, all at once
//! (no line waits for another).
//!
//! ```text
//! head line, u64 word  written by  meaning
//!   0       client      request sequence (low 32 bits) and opcode (high 32): written last, with
//!                       release, to hand the request over
//!   1       client      lengths (`lens`): request bytes in the lines (bits 0..16, at most
//!                       INLINE_BYTES), reply bytes the client reads (16..31, at most
//!                       INLINE_BYTES), whether the body is the request's tail (bit 31), the
//!                       body's length (32..64; 0: none): in the port's bulk area, or the last
//!                       bytes of the request
//!   2       server      reply sequence (bits 0..32), reply length in bytes (32..48) and status
//!                       (48..64, `status`: OK, an error, or NOT_INLINE): written last, with
//!                       release, to hand the reply back (`reply_word`)
//!   3..8    both        bytes 0..40: the request, then the reply in its place
//!
//! wide line i (0..4), u64 word
//!   0       both        its tag: the call's sequence (low 32 bits), bit 32 set by the server
//!                       (a reply) and clear by the client (a request)
//!   1..8    both        bytes 40 + 56 i .. 40 + 56 (i + 1) of the request, then of the reply
//!                       (the last line's last word unused: INLINE_BYTES is 256)
//! ```
//!
//! Each word a side writes is one it needs: the reply's length rides in its reply word and the
//! request's lengths in one word, so that the head carries 40 bytes each way, and a call of up to
//! 40 bytes moves one line each way. A second line costs a call far more than its bytes, wherever
//! it lies and however it is polled (`examples/line_floor` measures each layout with no protocol;
//! `BENCHMARKS.md` has its figures).
//!
//! The tags make each wide line say which call's bytes it holds, as each word of a GPU's word
//! lines does (`ferry_rpc::words`): the client waits for its reply by polling the head's reply
//! word *and* the tag of every wide line its reply covers in one look, each load independent of
//! the others, so the lines cross together while it polls instead of one after the head. The
//! worker writes each wide line's tag after its bytes (release) and covers every line the client
//! said it reads (word 1), however short its reply; the head's reply word, stored last with
//! release, orders them all for a client that saw it. A request's wide lines are written before
//! its head's release store and read after the worker's acquire load of it. Both sides push a
//! request's wide lines out to the shared cache as soon as they are done with them (the client
//! after writing, the worker after reading those its reply does not cover;
//! [`cache::demote`](crate::cache::demote)): the worker's
//! read after the head and the client's next write then find each line in the shared cache
//! instead of taking it from the other core. No worker polls or fetches a wide line ahead of its
//! head: a line the worker holds is one the client's next write must take back from the worker's
//! core before its head can go. The tags are checked
//! on both sides: a request line whose tag is not the request's (a write behind the protocol's
//! back) gets `BAD_REQUEST`, never a handler run on bytes of another call, and a client never
//! reads a reply line that does not carry its call's tag (it waits, and fails at its deadline).
//!
//! Each side writes only the words it needs (a 16-byte reply is two payload words): while one
//! side writes, the other is polling the same line, and every store that finds the line taken
//! back by a poll costs a transfer.
//!
//! After writing a reply, a worker pushes the lines out of its core's private caches into the
//! shared cache ([`cache::demote`](crate::cache::demote)). Without it,
//! the line sits modified in the worker's core, and whichever of the client's read of the reply
//! and the worker's next poll comes first takes it from there, the other then taking it again: a
//! round trip in which either side does any work between receiving and answering pays one line
//! transfer more than a bare ping-pong (`ferry bench` runs that ping-pong with work on each side).
//! The client demotes no head line: the worker is polling it, so a request demoted to the shared
//! cache is taken from there by the worker's next poll anyway, and a line demoted after the reply
//! is read must come back for the client's next request: either costs the client a push out of its
//! core for no transfer saved (`shm/BENCHMARKS.md`, round 4, measures both).
//!
//! The line is *at rest* when both sequences of its head are equal. The inline area also holds a
//! bitmap, one bit per port: workers poll only the head lines whose bit is set (*armed*), so a
//! port costs them nothing once it has been free for a reclaim interval or two (a port that is
//! held, or was freed more recently, costs a worker two loads a pass). A client sets its port's
//! bit when it first calls inline on a claim that found it
//! clear; the bit stays set when the claim ends, so that the next claim of the port (a client
//! that claims a port for each call claims the same one again and again) neither sets nor clears
//! it: two read-modify-writes less per call, on a line that the workers poll. The server's monitor
//! clears the bit of a port left free, its line at rest, for a whole reclaim interval, and does so
//! while holding the port's claim itself (its own process as the holder), so a client never holds
//! a port whose bit the monitor clears: a claim made before the monitor's keeps the bit, one made
//! after it sees the bit clear (the monitor's release of the claim pairs with the client's
//! compare-and-swap) and sets it.
//!
//! A call with a streamed argument (a `Bytes` or `Text` field) and a fixed reply travels inline
//! too. Its argument (the *body*), when the server has bulk areas and it fits the port's, is
//! written into the port's bulk area first, its length beside the request's. The worker reads
//! such a body where it lies, in the mapping, and the handler gets it in place: only the bytes it
//! reads cross to its core. The area belongs to the client while the line is at rest and it holds
//! the packet (as between packet calls), to the worker from the request to the reply. A body
//! that the area cannot take (a server without bulk areas) follows the fixed arguments in the
//! lines when both together fit [`INLINE_BYTES`], and the handler gets a copy.
//!
//! **Rules** (those of the packets, extended; see the crate docs):
//! - Only the holder of a port's claim writes words 0–2 and the request, and only while the line
//!   is at rest; it then waits for the reply before anything else on that port. A packet call and
//!   an inline call on one port therefore never overlap.
//! - With several workers, a worker answers a line only while it holds the port's inline lock (a
//!   word per port in the server's memory), so no two workers answer one request; a handler that
//!   blocks holds up only its own port (the other workers sweep every armed line now and then).
//! - The monitor frees a dead or abandoned client's port only if its line is at rest (a pending
//!   request is answered first, as a pending packet is), and clears its bitmap bit; it takes no
//!   inline lock: no new request comes from a holder that is dead or gave up, and a worker touches
//!   a line only while a request is pending on it (its last access is the store that puts the line
//!   at rest). A drain waits for lines that are not at rest.
//! - Bad input from the other side (a length over INLINE_BYTES, a body longer than the bulk area
//!   or than the request it ends, a wide line whose tag is not the request's, an unknown opcode)
//!   gets an error status; the lengths and tags are checked before any copy or read, and the
//!   reply still covers every line the client reads, so it is never left waiting.

use ferry_rpc::layout::MAX_PORTS;
use ferry_rpc::service::{InlineCall, INLINE_BYTES};
use ferry_rpc::Wait;

use crate::owner::{generation_of, pack, release, try_claim};
use crate::status;
use crate::sync::{word_bit, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Word indices in a head line.
pub(crate) mod word {
    pub const CLIENT: usize = 0;
    pub const REQUEST_LEN: usize = 1;
    pub const SERVER: usize = 2;
    pub const PAYLOAD: usize = 3;
}

/// Payload bytes of a head line.
pub(crate) const HEAD_BYTES: usize = 40;
/// Wide lines per port.
pub const WIDE_LINES: usize = 4;
/// Payload bytes of a wide line: its words after the tag.
const WIDE_BYTES: usize = 56;

const _: () = assert!(word::PAYLOAD + HEAD_BYTES / 8 == 8);
/// Payload bytes of a head line and all its wide lines: at least INLINE_BYTES (the last wide
/// line's last word is past them, unused).
const LINES_BYTES: usize = HEAD_BYTES + WIDE_LINES * WIDE_BYTES;
const _: () = assert!(LINES_BYTES >= INLINE_BYTES);
const _: () = assert!(LINES_BYTES - WIDE_BYTES < INLINE_BYTES);

/// A wide line's tag for the call of sequence `seq`: the client's request, or the server's reply.
#[inline(always)]
const fn tag(seq: u32, reply: bool) -> u64 {
    seq as u64 | (reply as u64) << 32
}

/// The wide lines that bytes `0..len` of a request or reply reach (0 for at most a head line's).
#[inline(always)]
const fn wide_lines_for(len: usize) -> usize {
    if len <= HEAD_BYTES {
        0
    } else {
        let n = (len - HEAD_BYTES).div_ceil(WIDE_BYTES);
        if n > WIDE_LINES {
            WIDE_LINES
        } else {
            n
        }
    }
}

/// Word 1 of a head line: the lengths of a request (see the module docs).
pub(crate) mod lens {
    /// Bit 31: the body is the last bytes of the request, in the lines.
    const BODY_IN_LINES: u64 = 1 << 31;
    /// Bit 15: the client's task waits asleep for the reply: the worker rings the doorbell
    /// after it (`ring`).
    pub(crate) const WAKE: u64 = 1 << 15;

    /// The lengths of a request of `len` bytes in the lines whose client reads `want` bytes of
    /// the reply, with a body of `body` bytes, in the lines (`in_lines`) or the bulk area.
    #[inline(always)]
    pub(crate) const fn pack(len: usize, want: usize, body: usize, in_lines: bool) -> u64 {
        (len as u64 & 0x7fff)
            | (want as u64 & 0x7fff) << 16
            | if in_lines { BODY_IN_LINES } else { 0 }
            | (body as u64) << 32
    }

    /// What [`pack`] packed: the request's length in the lines, the reply bytes the client
    /// reads, the body's length and whether it is in the lines (unchecked: the other side wrote
    /// them).
    #[inline(always)]
    pub(crate) const fn unpack(word: u64) -> (usize, usize, usize, bool) {
        (
            (word & 0x7fff) as usize,
            (word >> 16 & 0x7fff) as usize,
            (word >> 32) as usize,
            word & BODY_IN_LINES != 0,
        )
    }
}

/// The sequence in a sequence word (words 0 and 2).
const fn seq(word: u64) -> u32 {
    word as u32
}

/// Word 2 of a head line, the server's: the reply's sequence (bits 0..32), its length in bytes
/// (32..48) and its status (48..64).
pub(crate) mod reply_word {
    /// The reply word of request `seq`'s reply of `len` bytes (at most `INLINE_BYTES`) with
    /// `status`; a status that does not fit in 16 bits goes as `SERVER_ERROR` (every status
    /// ferry defines fits).
    #[inline(always)]
    pub(crate) const fn pack(seq: u32, status: u32, len: usize) -> u64 {
        let status = if status > u16::MAX as u32 {
            crate::status::SERVER_ERROR
        } else {
            status
        };
        seq as u64 | (len as u64 & 0xffff) << 32 | (status as u64) << 48
    }

    /// The status in reply word `word`.
    #[inline(always)]
    pub(crate) const fn status(word: u64) -> u32 {
        (word >> 48) as u32
    }

    /// The reply's length in reply word `word` (unchecked: the other side wrote it).
    #[inline(always)]
    pub(crate) const fn len(word: u64) -> usize {
        (word >> 32 & 0xffff) as usize
    }
}

/// One port's head line, or one of its wide lines.
#[repr(C, align(64))]
pub(crate) struct Line {
    pub(crate) words: [AtomicU64; 8],
}

/// One port's wide lines.
#[repr(C)]
pub(crate) struct Wide {
    pub(crate) lines: [Line; WIDE_LINES],
}

// Loom's atomics are larger; the model never maps a file.
#[cfg(not(loom))]
const _: () =
    assert!(std::mem::size_of::<Line>() == 64 && std::mem::size_of::<Wide>() == 64 * WIDE_LINES);

impl Line {
    /// Whether no request is pending on this line (a head line).
    pub(crate) fn at_rest(&self) -> bool {
        let (request, last) = self.sequences();
        seq(request) == last
    }

    /// The request word and the sequence of the last reply (a head line): a request is pending
    /// when the request word's sequence is not the last reply's.
    #[inline(always)]
    pub(crate) fn sequences(&self) -> (u64, u32) {
        // SYNC (inline, see the line): acquire; pairs with the client's release store of the
        // request word (for a worker, what the client wrote before is visible once the request is
        // seen) and with the worker's release store of the reply word (for the monitor and the
        // drain, the line at rest is the worker's last access done).
        (
            self.words[word::CLIENT].load(Ordering::Acquire),
            seq(self.words[word::SERVER].load(Ordering::Acquire)),
        )
    }

    /// Writes `bytes` (at most the words from `first` on hold) into the words from `first` on
    /// that they cover (the rest of the last one zero).
    #[inline(always)]
    fn write_from(&self, first: usize, bytes: &[u8]) {
        let bytes = &bytes[..bytes.len().min((8 - first) * 8)];
        let mut chunks = bytes.chunks_exact(8);
        let mut w = first;
        for chunk in &mut chunks {
            let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            self.words[w].store(v, Ordering::Relaxed);
            w += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut le = [0u8; 8];
            le[..rest.len()].copy_from_slice(rest);
            self.words[w].store(u64::from_le_bytes(le), Ordering::Relaxed);
        }
    }

    /// Writes the first `len` bytes of `bytes` (whole words: its length a multiple of 8, at most
    /// the words from `first` on hold) into the words from `first` on that they touch, the rest
    /// of the last of those words zero (what a handler left past `len` does not travel). For the
    /// worker's reply, whose length is known only at run time: a store a word, no byte loop.
    #[inline(always)]
    fn write_masked(&self, first: usize, bytes: &[u8], len: usize) {
        let words = bytes.chunks_exact(8).take(8 - first).take(len.div_ceil(8));
        for (w, chunk) in words.enumerate() {
            let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            self.words[first + w].store(v & low_bytes(len - w * 8), Ordering::Relaxed);
        }
    }

    /// Reads the words from `first` on into `out` (at most what they hold), its bytes at or
    /// past `len` as zero.
    ///
    /// Only the words `out` covers are read, each masked, so the copy has no length-dependent
    /// loop or fill; for an `out` of a length the compiler knows (the client's generated calls),
    /// it is a fixed number of loads.
    #[inline(always)]
    fn read_from(&self, first: usize, out: &mut [u8], len: usize) {
        let n = out.len().min((8 - first) * 8);
        for (w, chunk) in out[..n].chunks_mut(8).enumerate() {
            let v = self.words[first + w].load(Ordering::Relaxed);
            // The bytes of this word at or past `len` read as zero.
            let v = v & low_bytes(len.saturating_sub(w * 8));
            chunk.copy_from_slice(&v.to_le_bytes()[..chunk.len()]);
        }
    }

    /// [`write_from`](Self::write_from) for a head line's payload.
    #[inline(always)]
    fn write_payload(&self, bytes: &[u8]) {
        self.write_from(word::PAYLOAD, bytes);
    }

    /// [`read_from`](Self::read_from) for a head line's payload.
    #[inline(always)]
    fn read_payload(&self, out: &mut [u8], len: usize) {
        self.read_from(word::PAYLOAD, out, len);
    }
}

/// The bytes of a request or reply that lie in wide line `i`: its range in the whole.
#[inline(always)]
const fn wide_range(i: usize) -> std::ops::Range<usize> {
    HEAD_BYTES + i * WIDE_BYTES..HEAD_BYTES + (i + 1) * WIDE_BYTES
}

/// The client's request: `bytes` (at most [`INLINE_BYTES`]) into `head`'s payload and the wide
/// lines they reach, each of those tagged as request `seq`. (The head's release store, after
/// them, hands them all over.) The wide lines first: the head's stores, this payload's and then
/// the lengths' and the request word's, follow one another with no other line's between them,
/// so that the worker's polls cannot take the head back from this core halfway (each store
/// that finds it taken costs a transfer).
#[inline(always)]
fn put_request(head: &Line, wide: &Wide, bytes: &[u8], seq: u32) {
    let n = bytes.len().min(INLINE_BYTES);
    for (i, line) in wide.lines.iter().enumerate().take(wide_lines_for(n)) {
        let range = wide_range(i);
        line.write_from(1, &bytes[range.start..range.end.min(n)]);
        line.words[0].store(tag(seq, false), Ordering::Relaxed);
        // Out to the shared cache, where the worker's read after the head finds it, rather than
        // in this core (see the module doc).
        crate::cache::demote(line);
    }
    head.write_payload(&bytes[..n.min(HEAD_BYTES)]);
}

/// The worker's read of a request of `len` bytes (at most [`INLINE_BYTES`]) into `out`: the head's
/// payload and the wide lines `len` reaches, whole (the handler sees only the first `len`
/// bytes). Whether every one of those lines carries request `seq`'s tag. `want`: the bytes of
/// reply the client reads (the wide lines they reach are written next, by the reply).
#[inline(always)]
fn take_request(
    head: &Line,
    wide: &Wide,
    out: &mut [u8; LINES_BYTES],
    (len, want): (usize, usize),
    seq: u32,
) -> bool {
    // Every word as it is (constant lengths: no masks).
    head.read_payload(&mut out[..HEAD_BYTES], HEAD_BYTES);
    let mut intact = true;
    let replied = wide_lines_for(want);
    for (i, line) in wide.lines.iter().enumerate().take(wide_lines_for(len)) {
        intact &= line.words[0].load(Ordering::Relaxed) == tag(seq, false);
        line.read_from(1, &mut out[wide_range(i)], WIDE_BYTES);
        if i >= replied {
            // Out to the shared cache, where the client's next request finds it to write,
            // rather than in this core (see the module doc). A line the reply covers stays:
            // this worker writes it next.
            crate::cache::demote(line);
        }
    }
    intact
}

/// The worker's reply: the first `len` bytes of `reply` into `head`'s payload and the wide lines
/// they reach, and the tag of reply `seq` into every wide line that the first `want` bytes or
/// `len` reach. Each tag after its line's bytes, with release: the client reads a line once its
/// tag is there, before or after the head's reply word.
#[inline(always)]
fn put_reply(
    head: &Line,
    wide: &Wide,
    reply: &[u8; INLINE_BYTES],
    len: usize,
    want: usize,
    seq: u32,
) {
    let len = len.min(INLINE_BYTES);
    let lines = wide_lines_for(len.max(want));
    for (i, line) in wide.lines.iter().enumerate().take(lines) {
        let range = wide_range(i);
        line.write_masked(
            1,
            &reply[range.start..range.end.min(INLINE_BYTES)],
            len.saturating_sub(range.start),
        );
        // SYNC (inline, hand a wide line back): release; pairs with the client's acquire load
        // of the tag, so the bytes above are visible to it.
        line.words[0].store(tag(seq, true), Ordering::Release);
    }
    for line in &wide.lines[..lines] {
        crate::cache::demote(line);
    }
    // The head last, its payload's stores and then the reply word's with no other line's
    // between them (as the client's request: `put_request`).
    head.write_masked(word::PAYLOAD, &reply[..HEAD_BYTES], len);
}

/// Whether every wide line that the first `want` bytes of a reply reach carries reply `seq`'s
/// tag. Every tag is loaded, none waiting for another (no early exit): the lines cross together.
#[inline(always)]
fn reply_lines_in(wide: &Wide, want: usize, seq: u32) -> bool {
    let mut all = true;
    for line in wide.lines.iter().take(wide_lines_for(want)) {
        // SYNC (inline, take a wide line): acquire; pairs with the worker's release store of the
        // tag after the line's bytes.
        all &= line.words[0].load(Ordering::Acquire) == tag(seq, true);
    }
    all
}

/// The client's read of a reply of `len` bytes into `out` (at most [`INLINE_BYTES`]): the head's
/// payload and the wide lines `out` reaches, its bytes at or past `len` as zero.
#[inline(always)]
fn take_reply(head: &Line, wide: &Wide, out: &mut [u8], len: usize) {
    let n = out.len().min(INLINE_BYTES);
    if n <= HEAD_BYTES && len >= n {
        // The whole of `out` in the head, the reply at least that long: every word as it is.
        head.read_from(word::PAYLOAD, &mut out[..n], usize::MAX);
        return;
    }
    head.read_payload(&mut out[..n.min(HEAD_BYTES)], len);
    for (i, line) in wide.lines.iter().enumerate().take(wide_lines_for(n)) {
        let range = wide_range(i);
        line.read_from(
            1,
            &mut out[range.start..range.end.min(n)],
            len.saturating_sub(range.start),
        );
    }
}

/// The mask of a word's first `n` bytes (all of them from 8 on; little-endian: the first bytes
/// are the low ones).
#[inline(always)]
const fn low_bytes(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (n * 8)) - 1
    }
}

/// Bytes of the inline bitmap for `ports` ports (one bit each, rounded up to a cache line).
const fn bitmap_bytes(ports: u32) -> usize {
    (ports as usize / 8).div_ceil(64) * 64
}

/// Bytes of the inline area of a file with `ports` ports: the bitmap, one head line per port,
/// each port's wide lines, then the ready bitmap and the doorbell's line (after the lines the
/// calls use, so that those lie where they lay before either existed).
pub(crate) const fn area_size(ports: u32) -> usize {
    doorbell_offset(ports) + 64
}

/// Byte offset of the first head line within the inline area.
pub(crate) const fn lines_offset(ports: u32) -> usize {
    bitmap_bytes(ports)
}

/// Byte offset of port 0's wide lines within the inline area (each port's [`WIDE_LINES`] follow
/// one another).
pub(crate) const fn wide_offset(ports: u32) -> usize {
    lines_offset(ports) + ports as usize * 64
}

/// Byte offset of the ready bitmap (one bit per port, set by a worker that answered a waking
/// request: [`ring`]) within the inline area.
pub(crate) const fn ready_offset(ports: u32) -> usize {
    wide_offset(ports) + ports as usize * 64 * WIDE_LINES
}

/// Byte offset of the doorbell's line within the inline area.
pub(crate) const fn doorbell_offset(ports: u32) -> usize {
    ready_offset(ports) + bitmap_bytes(ports)
}

/// Where the async clients' reactors sleep (`crate::awaited`): a futex word that a worker bumps
/// after answering a waking request while a reactor sleeps, and the count of reactors asleep.
#[repr(C, align(64))]
pub(crate) struct Doorbell {
    /// The futex word: bumped by each ring that finds a reactor asleep.
    pub(crate) rings: AtomicU32,
    /// Reactors asleep on `rings`, or about to be (counted before their last look).
    pub(crate) sleepers: AtomicU32,
    /// Handles attached so far: each takes the next value as the port its searches start at,
    /// so that client processes spread evenly over the ports, and so over the workers, which
    /// share the ports by index (`share`). (Not the doorbell's: a word of the same line, written
    /// once per attach.)
    pub(crate) attaches: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Doorbell>() == 64);

/// What a worker tells the async clients about the waking requests it answers: the ready bitmap
/// and the doorbell.
#[derive(Clone, Copy)]
pub(crate) struct Wake<'a> {
    pub(crate) ready: &'a [AtomicU32],
    pub(crate) doorbell: &'a Doorbell,
}

/// Tells the reactors that `port`'s waking request has its reply: sets the port's ready bit and,
/// if a reactor sleeps, bumps the doorbell and wakes every sleeper (a futex shared between
/// processes). Called after the reply's release store.
#[inline(never)]
pub(crate) fn ring(wake: Wake<'_>, port: usize) {
    let (w, bit) = word_bit(port);
    // SYNC (async wake): SeqCst, as the reactor's count of itself among the sleepers before its
    // look at the ready bits (`awaited`): either it sees this bit or this load sees it asleep.
    wake.ready[w].fetch_or(bit, Ordering::SeqCst);
    if wake.doorbell.sleepers.load(Ordering::SeqCst) != 0 {
        wake.doorbell.rings.fetch_add(1, Ordering::SeqCst);
        #[cfg(not(loom))]
        {
            // Not private: the sleepers are other processes, on the same mapped file.
            let _ = rustix::thread::futex::wake(
                &wake.doorbell.rings,
                rustix::thread::futex::Flags::empty(),
                u32::MAX,
            );
        }
    }
}

/// Where the ports' bulk areas lie in the mapping: lane 0's share of each (an inline call is one
/// lane's), `stride` bytes apart from `base`, `share` bytes long. No areas: `share` 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BulkAreas {
    pub(crate) base: *mut u8,
    pub(crate) share: usize,
    pub(crate) stride: usize,
}

// SAFETY: `base` is an address in a mapping its owner keeps alive; this value only computes
// addresses from it, and the bytes there are read and written under the inline protocol's rules
// (the module docs), whichever thread holds the value.
unsafe impl Send for BulkAreas {}
// SAFETY: as above: shared, it is read only.
unsafe impl Sync for BulkAreas {}

impl BulkAreas {
    /// A file without bulk areas.
    pub(crate) const NONE: BulkAreas = BulkAreas {
        base: std::ptr::null_mut(),
        share: 0,
        stride: 0,
    };

    /// `port`'s area: its address and length.
    #[inline(always)]
    pub(crate) fn of(&self, port: usize) -> (*mut u8, usize) {
        if self.share == 0 {
            return (std::ptr::null_mut(), 0);
        }
        (self.base.wrapping_add(port * self.stride), self.share)
    }
}

/// Polls of the reply word spun before the wait policy is consulted.
const SPIN_POLLS: u32 = 1024;

/// A claimed port's inline path (see the module docs of `ferry_shm` on inline calls): what
/// a [`Claimed`](crate::Claimed) port hands the generated client calls as its
/// [`CallSite::Inline`](ferry_rpc::service::CallSite::Inline), so that they are compiled against
/// it. It has no methods of its own beyond [`InlineCall`].
pub struct ClientInline<'a, W: Wait = crate::ClientWait> {
    /// The port's head line.
    pub(crate) line: &'a Line,
    /// The port's wide lines.
    pub(crate) wide: &'a Wide,
    /// The inline bitmap's word that holds the port's bit, and the bit.
    pub(crate) bitmap_word: &'a AtomicU32,
    pub(crate) bit: u32,
    /// Whether the server answers inline calls (the header's flag).
    pub(crate) serves: bool,
    pub(crate) port: u32,
    pub(crate) wait: &'a W,
    /// Whether the port's bitmap bit is known to be set for this claim (found set when the port
    /// was claimed, or set by this claim's first inline call). Only the claim's holder uses it:
    /// relaxed.
    pub(crate) armed: &'a AtomicBool,
    /// The port's bulk area (lane 0's share): address and length, 0 if the file has none.
    pub(crate) bulk: (*mut u8, usize),
}

// SAFETY: `bulk`'s pointer is the port's bulk area in a mapping its handle keeps alive (as
// `BulkAreas`, which is Send and Sync); the other fields are shared references to atomics and to
// a `W` that is Sync. Whichever thread holds the value, the area is written only under the
// inline protocol's rules: by the claim's holder, while the line is at rest.
unsafe impl<W: Wait + Sync> Send for ClientInline<'_, W> {}
// SAFETY: as above; shared, it only computes addresses and makes atomic accesses.
unsafe impl<W: Wait + Sync> Sync for ClientInline<'_, W> {}

impl<'a, W: Wait> ClientInline<'a, W> {
    /// The inline path of `port`, in a file whose inline bitmap, head lines and wide lines are
    /// `bitmap`, `lines` and `wide`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        bitmap: &'a [AtomicU32],
        lines: &'a [Line],
        wide: &'a [Wide],
        serves: bool,
        port: u32,
        wait: &'a W,
        armed: &'a AtomicBool,
        bulk: BulkAreas,
    ) -> Self {
        let (w, bit) = word_bit(port as usize);
        ClientInline {
            line: &lines[port as usize],
            wide: &wide[port as usize],
            bitmap_word: &bitmap[w],
            bit,
            serves,
            port,
            wait,
            armed,
            bulk: bulk.of(port as usize),
        }
    }
}

/// Waits for reply `next` on `line` (and the wide lines of `wide` that its first `want` bytes
/// reach) after the first `SPIN_POLLS` polls found none: spins and consults `wait` (deadline,
/// server liveness). Out of line, so that the call's own path stays short.
#[cold]
#[inline(never)]
fn wait_for_reply(
    line: &Line,
    wide: &Wide,
    want: usize,
    next: u32,
    wait: &impl Wait,
) -> Result<u64, ferry_rpc::Error> {
    let mut polls = 0u32;
    loop {
        // SYNC (inline, take the reply): as in `ClientInline::answer`.
        let answer = line.words[word::SERVER].load(Ordering::Acquire);
        if (seq(answer) == next) & reply_lines_in(wide, want, next) {
            return Ok(answer);
        }
        if wait.pause(polls).is_err() {
            return Err(ferry_rpc::Error::Stalled);
        }
        polls = polls.saturating_add(1);
    }
}

impl<W: Wait> InlineCall for ClientInline<'_, W> {
    #[inline(always)]
    fn call_inline(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        if reply.len() > INLINE_BYTES {
            return None;
        }
        let lens = lens::pack(request.len(), reply.len(), 0, false);
        let next = self.post(opcode, request, lens, |_| {})?;
        self.answer(next, reply)
    }

    #[inline(always)]
    fn call_inline_bulk(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        self.exchange_with(
            opcode,
            request,
            body.len(),
            |area| area.copy_from_slice(body),
            reply,
        )
    }

    #[inline(always)]
    fn call_inline_bulk_with(
        &self,
        opcode: u32,
        request: &[u8],
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        self.exchange_with(opcode, request, len, |area| fill(area), reply)
    }
}

impl<W: Wait> ClientInline<'_, W> {
    /// One inline call with a body of `len` bytes, which `put` writes: into the port's bulk area
    /// if it fits there (the handler reads it in place, and only what it reads crosses), else
    /// after the request in the lines if both fit (a server without bulk areas); `None`, nothing
    /// sent and `put` not called, if neither.
    #[inline(always)]
    fn exchange_with(
        &self,
        opcode: u32,
        request: &[u8],
        len: usize,
        put: impl FnOnce(&mut [u8]),
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        let want = reply.len();
        if want > INLINE_BYTES {
            return None;
        }
        self.with_body(request, len, want, put, |request, lens, body| {
            let next = self.post(opcode, request, lens, |area| body.write(area))?;
            self.answer(next, reply)
        })
    }

    /// Where a call's body of `len` bytes (written by `put`) travels, given to `go` as the
    /// request bytes of the lines, their lengths word (`lens`, the reply's `want` bytes in it),
    /// and the [`Body`] to write once the line is at rest and before the request is handed over:
    /// the body into the port's bulk area if it fits there, else after `request` in the lines if
    /// both fit (a server without bulk areas; written here, the `Body` then writes nothing).
    /// `None`, `go` and `put` not called, if neither.
    #[inline(always)]
    pub(crate) fn with_body<P: FnOnce(&mut [u8]), T>(
        &self,
        request: &[u8],
        len: usize,
        want: usize,
        put: P,
        go: impl FnOnce(&[u8], u64, Body<P>) -> Option<T>,
    ) -> Option<T> {
        if len > self.bulk.1 {
            let whole = request.len().checked_add(len)?;
            if whole > INLINE_BYTES {
                return None;
            }
            let mut bytes = [0u8; INLINE_BYTES];
            bytes[..request.len()].copy_from_slice(request);
            put(&mut bytes[request.len()..whole]);
            let lens = lens::pack(whole, want, len, true);
            return go(&bytes[..whole], lens, Body { put: None, len: 0 });
        }
        let lens = lens::pack(request.len(), want, len, false);
        go(
            request,
            lens,
            Body {
                put: Some(put),
                len,
            },
        )
    }

    /// The reply to the request [`post`](Self::post) handed over (`next`, its sequence, or the
    /// error it met): the first `reply.len()` bytes of it (at most [`INLINE_BYTES`]) into
    /// `reply`, and its status; `None` if the server had the call go through the packets.
    #[inline(always)]
    fn answer(
        &self,
        next: Result<u32, ferry_rpc::Error>,
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        let next = match next {
            Ok(next) => next,
            Err(e) => return Some(Err(e)),
        };
        // The first polls spin right here: a reply usually comes within a microsecond, and
        // calling out to the wait policy on every poll lengthens the loop that a reply is waited
        // for in, and so every call. Then the policy takes over, out of line (deadline,
        // liveness).
        let want = reply.len();
        let mut polls = SPIN_POLLS;
        let answer = loop {
            if let Some(answer) = self.reply_in(next, want) {
                break answer;
            }
            polls -= 1;
            if polls == 0 {
                match wait_for_reply(self.line, self.wide, want, next, self.wait) {
                    Ok(answer) => break answer,
                    Err(e) => return Some(Err(e)),
                }
            }
            std::hint::spin_loop();
        };
        self.take(answer, reply).map(Ok)
    }

    /// Hands a request over: `request` (at most [`INLINE_BYTES`]) into the lines, the lengths
    /// word `lens` beside it, `before` run (with the bulk area's address) once the line is known
    /// to be at rest. Returns the request's sequence, whose reply [`reply_in`](Self::reply_in)
    /// looks for; `None` (nothing sent) if the request is too long; an error if the line is not
    /// at rest (the file was tampered with). Only for a server that serves inline calls.
    #[inline(always)]
    pub(crate) fn post(
        &self,
        opcode: u32,
        request: &[u8],
        lens: u64,
        before: impl FnOnce(*mut u8),
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        // (A claim offers no inline path where the server serves none: `Claimed::inline`, and
        // `awaited` checks the header itself.)
        debug_assert!(self.serves, "an inline call on a server that serves none");
        if request.len() > INLINE_BYTES {
            return None;
        }
        let (line, wide) = (self.line, self.wide);
        // SYNC (inline, take the line): pairs with the server's release store of its last reply
        // sequence; the server's accesses to the payload happen before ours.
        let last = seq(line.words[word::SERVER].load(Ordering::Acquire));
        if seq(line.words[word::CLIENT].load(Ordering::Relaxed)) != last {
            // Only this claim's holder writes the request sequence, and it waits for every reply:
            // the file was tampered with. Fail the call; the claim is abandoned.
            return Some(Err(ferry_rpc::Error::Stalled));
        }
        if !self.armed.load(Ordering::Relaxed) {
            // Tells the workers to poll this line. Relaxed: a worker that sees the request before
            // the bit misses nothing (it reads the bit again within a turn of its passes), and
            // one that sees the bit first finds the line at rest until the store below.
            self.bitmap_word.fetch_or(self.bit, Ordering::Relaxed);
            self.armed.store(true, Ordering::Relaxed);
        }
        before(self.bulk.0);
        let next = last.wrapping_add(1);
        put_request(line, wide, request, next);
        line.words[word::REQUEST_LEN].store(lens, Ordering::Relaxed);
        // SYNC (inline, hand the request over): release; pairs with the worker's acquire load of
        // the request word, so the words above (and the wide lines) are visible to it.
        line.words[word::CLIENT].store((opcode as u64) << 32 | next as u64, Ordering::Release);
        Some(Ok(next))
    }

    /// The reply word of request `next`, if its reply is in: the head's reply word and the tag
    /// of every wide line the reply's first `want` bytes reach, in one look.
    #[inline(always)]
    pub(crate) fn reply_in(&self, next: u32, want: usize) -> Option<u64> {
        // SYNC (inline, take the reply): acquire; pairs with the worker's release store of the
        // reply word after it wrote the reply. The wide lines' tags in the same look
        // (`reply_lines_in`), not after it.
        let answer = self.line.words[word::SERVER].load(Ordering::Acquire);
        ((seq(answer) == next) & reply_lines_in(self.wide, want, next)).then_some(answer)
    }

    /// Reads the reply whose reply word is `answer` (from [`reply_in`](Self::reply_in)) into
    /// `reply` (at most [`INLINE_BYTES`]): its status, or `None` if the server had the call go
    /// through the packets (`NOT_INLINE`: nothing was run).
    #[inline(always)]
    pub(crate) fn take(&self, answer: u64, reply: &mut [u8]) -> Option<u32> {
        let status = reply_word::status(answer);
        if status == status::NOT_INLINE {
            return None;
        }
        let len = reply_word::len(answer);
        take_reply(self.line, self.wide, reply, len);
        Some(status)
    }
}

/// A call's body on its way into the port's bulk area ([`ClientInline::with_body`]): written
/// by [`write`](Body::write) once the line is at rest, before the request is handed over.
pub(crate) struct Body<P> {
    /// What writes the body (`None`: it travels in the lines, written with the request).
    put: Option<P>,
    len: usize,
}

impl<P: FnOnce(&mut [u8])> Body<P> {
    /// Writes the body into the bulk area at `area` (the port's, at least `len` bytes).
    #[inline(always)]
    pub(crate) fn write(self, area: *mut u8) {
        let Some(put) = self.put else { return };
        if self.len > 0 {
            // SAFETY: the area is the port's bulk area, at least `len` bytes of the live mapping
            // (`with_body` checked the length against it), and it is this claim's: the exchange
            // calls this once the line is at rest (after the acquire of the last reply, so the
            // worker's reads of the area are done), and this claim holds the packet between
            // calls; nobody else writes it until the reply.
            put(unsafe { std::slice::from_raw_parts_mut(area, self.len) });
        } else {
            put(&mut []);
        }
    }
}

/// Whether `port`'s bitmap bit is set. A client reads it right after claiming the port: only the
/// monitor clears a bit, and only while it holds the port's claim, so the bit stays as read while
/// the client holds the claim. (Relaxed: the client's claim, a compare-and-swap, is ordered after
/// the monitor's release of its own claim, which the clearing precedes.)
pub(crate) fn is_armed(bitmap: &[AtomicU32], port: u32) -> bool {
    let (w, bit) = word_bit(port as usize);
    bitmap[w].load(Ordering::Relaxed) & bit != 0
}

/// The monitor's disarm of a port it found free and armed for a whole interval (see the module
/// docs): claims the port as `holder`, clears its bit if its line is at rest, and frees the port
/// again. Returns the port's owner word after, or `None` if a client claimed the port meanwhile
/// (its bit then stays).
pub(crate) fn disarm_idle(
    owner: &AtomicU64,
    bitmap: &[AtomicU32],
    line: &Line,
    port: u32,
    holder: u32,
) -> Option<u64> {
    // SYNC (claim): as a client's; no client holds the port from here to the release.
    let mine = try_claim(owner, holder)?;
    if line.at_rest() {
        disarm(bitmap, port);
    }
    // SYNC (release): the clear above happens before any later claim of the port, whose holder
    // so sees the bit clear and sets it. (The release fails only if the word was changed behind
    // the protocol's back; it is then left as it is.)
    release(owner, mine).then(|| pack(generation_of(mine), 0))
}

/// Clears `port`'s bitmap bit (the monitor, holding the port's claim or reclaiming it).
pub(crate) fn disarm(bitmap: &[AtomicU32], port: u32) {
    let (w, bit) = word_bit(port as usize);
    bitmap[w].fetch_and(!bit, Ordering::Relaxed);
}

/// A file's inline area as a worker sees it: the bitmap, the head lines, the wide lines, and the
/// ports' bulk areas.
#[derive(Clone, Copy)]
pub(crate) struct InlineArea<'a> {
    pub(crate) bitmap: &'a [AtomicU32],
    pub(crate) lines: &'a [Line],
    pub(crate) wide: &'a [Wide],
    pub(crate) bulk: BulkAreas,
    /// Where a waking request's reply is told (`None`: nowhere; its client polls).
    pub(crate) wake: Option<Wake<'a>>,
}

/// A worker's buffers for the requests it answers and their replies (`serve_pending`), kept
/// between calls so that no call waits for them to be cleared: the reply buffer is all zero
/// when a handler gets it, cleared after each reply has gone; the request buffer holds, of each
/// request, the bytes it has (a handler sees those only) and whatever the last ones left after
/// them.
#[repr(C)]
pub(crate) struct Scratch {
    request: [u8; LINES_BYTES],
    reply: [u8; INLINE_BYTES],
    armed: ArmedWords,
}

impl Scratch {
    /// A worker's buffers.
    pub(crate) fn new() -> Scratch {
        Scratch {
            request: [0; LINES_BYTES],
            reply: [0; INLINE_BYTES],
            armed: ArmedWords::new(),
        }
    }

    /// Counts every word of the bitmap armed until looked at again, as at the first pass: for a
    /// worker back from a rest (a yield, a sleep), whose view of the bitmap is as old as the
    /// rest, so that its next pass polls every armed line, not only those it last saw.
    pub(crate) fn assume_armed(&mut self) {
        self.armed.words = 0;
    }
}

/// Words of the inline bitmap a pass of `serve_pending` looks at, at most, to learn which have a
/// line armed: a bitmap of more words (a server of more than 1024 ports) is polled through
/// [`ArmedWords`], so that a pass costs about the same on a server of thousands of ports, and a
/// line armed since is polled within a turn of `words / REFRESH_WORDS` passes (8 at 8192 ports).
pub(crate) const REFRESH_WORDS: usize = 32;

/// Which words of the inline bitmap a worker last saw with a line armed, one bit a word: on a
/// large bitmap a pass polls the lines of those words alone, and looks again at
/// [`REFRESH_WORDS`] words of the bitmap, in turn, to learn of lines armed (or disarmed) since.
/// A line armed in a word seen empty is polled within one turn over the bitmap's words (a
/// client arms its line once per claim, and the monitor disarms it only after a whole reclaim
/// interval free); the sweep of every line (`share` `None`) reads the bitmap itself. (Inline,
/// not on the heap: the worker's scratch stays a plain value its loop holds.)
struct ArmedWords {
    seen: [u64; MAX_PORTS as usize / 32 / 64],
    /// The bitmap's words as of the first refresh (0: none yet).
    words: usize,
    next: usize,
}

impl ArmedWords {
    const fn new() -> ArmedWords {
        ArmedWords {
            seen: [0; MAX_PORTS as usize / 32 / 64],
            words: 0,
            next: 0,
        }
    }

    /// The words seen armed, 64 a chunk, as far as the bitmap reaches.
    fn seen(&self) -> &[u64] {
        &self.seen[..self.words.div_ceil(64)]
    }

    /// Looks at the next [`REFRESH_WORDS`] words of `bitmap`.
    fn refresh(&mut self, bitmap: &[AtomicU32]) {
        let words = bitmap.len().min(self.seen.len() * 64);
        if self.words != words {
            // First use: every word counted armed until looked at (and none past the bitmap).
            self.words = words;
            self.next = 0;
            let chunks = words.div_ceil(64);
            for (i, chunk) in self.seen[..chunks].iter_mut().enumerate() {
                *chunk = low_bits(words - i * 64);
            }
        }
        for _ in 0..REFRESH_WORDS.min(words) {
            let w = self.next;
            let bit = 1u64 << (w % 64);
            match bitmap[w].load(Ordering::Relaxed) != 0 {
                true => self.seen[w / 64] |= bit,
                false => self.seen[w / 64] &= !bit,
            }
            self.next = if w + 1 == words { 0 } else { w + 1 };
        }
    }
}

/// A port's inline lock (`serve_pending`): 1 while a worker answers the port's line, on a cache
/// line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct InlineLock(pub(crate) AtomicU32);

/// Worker `index` of `workers`'s share of the ports for `serve_pending`: for each of the `words`
/// bitmap words, the mask of its ports whose index is `index` modulo `workers`.
pub(crate) fn share(index: usize, workers: usize, words: usize) -> Vec<u32> {
    (0..words)
        .map(|w| {
            (0..32)
                .filter(|b| (w * 32 + b) % workers.max(1) == index)
                .fold(0u32, |mask, b| mask | 1 << b)
        })
        .collect()
}

/// Answers the pending requests on the armed lines (bitmap bit set) of the ports `share` names
/// (for each bitmap word, a mask of the ports it polls; `None`: every port): `serve` gets each
/// request's opcode and bytes and returns the status and reply length, with the reply bytes in
/// its third argument. Returns how many were answered.
///
/// Each worker polls its own share of the armed ports on every pass (worker `i` of `n`: the ports
/// whose index is `i` modulo `n`, so that clients, which spread over the ports, spread over the
/// workers) and all of them on every `SWEEP`th (`server::work`): a line polled by one worker
/// moves between two cores only, and a handler that blocks still holds up only its own port,
/// since the other workers' sweeps answer the rest of its share. With several workers, `locks`
/// (the server's inline locks, one per port) makes one worker answer each request: a worker
/// holds the port's lock while on it. A lock is a word rather than a bit, so that releasing it is
/// a plain store (a locked instruction there would wait for the reply's stores, which wait for the
/// line to come back from the polling client: a cross-core trip added to every call), and each
/// has a cache line of its own, so that two workers answering neighbouring ports do not take the
/// same line from each other on every call. A lone worker passes `None` and takes no lock. The
/// monitor needs none either (see `monitor` in `server`). On a bitmap of more than
/// [`REFRESH_WORDS`] words, a pass with a `share` polls the lines of the words `scratch` last saw
/// armed ([`ArmedWords`]), so that its time does not grow with the server's ports.
#[inline]
pub(crate) fn serve_pending(
    area: &InlineArea<'_>,
    locks: Option<&[InlineLock]>,
    share: Option<&[u32]>,
    scratch: &mut Scratch,
    serve: &mut impl FnMut(Call, &[u8], &[u8], &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)>,
) -> u32 {
    let InlineArea {
        bitmap,
        lines,
        wide,
        bulk,
        wake,
    } = *area;
    let mut answered = 0;
    let words = bitmap.len();
    // The words polled: every one on a small bitmap and in a sweep, else those seen armed.
    let every = words <= REFRESH_WORDS || share.is_none();
    if !every {
        scratch.armed.refresh(bitmap);
    }
    for chunk in 0..words.div_ceil(64) {
        let mut polled = match every {
            true => low_bits(words - chunk * 64),
            false => scratch.armed.seen()[chunk],
        };
        while polled != 0 {
            let w = chunk * 64 + polled.trailing_zeros() as usize;
            polled &= polled - 1;
            let mine = share.map_or(u32::MAX, |share| share[w]);
            let mut bits = bitmap[w].load(Ordering::Relaxed) & mine;
            while bits != 0 {
                let port = w * 32 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let line = &lines[port];
                let seen = line.sequences();
                if seq(seen.0) == seen.1 {
                    continue;
                }
                // SYNC (lock acquire): pairs with the release store of the last holder; while we
                // hold it no other worker is on the port.
                if locks.is_some_and(|l| l[port].0.swap(1, Ordering::Acquire) != 0) {
                    continue;
                }
                // SYNC (inline, take the request): acquire; pairs with the client's release
                // store of the request word. Re-read under the lock: another worker may have
                // answered.
                let (request_word, last) = match locks {
                    Some(_) => line.sequences(),
                    // No other worker: the words just read (acquired) are as they are.
                    None => seen,
                };
                let pending = seq(request_word);
                let mut later = false;
                if pending != last {
                    match answer(
                        line,
                        &wide[port],
                        (port as u32, request_word),
                        bulk.of(port),
                        scratch,
                        serve,
                    ) {
                        Answered::Now { wake: true } => {
                            if let Some(wake) = wake {
                                ring(wake, port);
                            }
                        }
                        Answered::Now { wake: false } => {}
                        // A task answers it, then rings and releases the lock itself.
                        Answered::Later => later = true,
                    }
                    answered += 1;
                }
                // SYNC (lock release): a plain store; pairs with the next holder's acquire.
                if let Some(locks) = locks.filter(|_| !later) {
                    locks[port].0.store(0, Ordering::Release);
                }
            }
        }
    }
    answered
}

/// The `n` low bits of a word set (all of them from 64 on).
#[inline(always)]
const fn low_bits(n: usize) -> u64 {
    match n {
        0..64 => (1 << n) - 1,
        _ => u64::MAX,
    }
}

/// A call as its handler's caller sees it: its opcode, and what an answer given later needs
/// (`serve_pending`'s `serve` returning `None`: a task answers it with [`hand_back`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    pub(crate) opcode: u32,
    pub(crate) port: u32,
    /// The request's sequence, which the reply carries.
    pub(crate) seq: u32,
    /// The reply bytes the client reads.
    pub(crate) want: usize,
    /// Whether the client's task sleeps until a ring (`lens::WAKE`).
    pub(crate) wake: bool,
}

/// What [`answer`] did.
enum Answered {
    /// Replied; `wake`: the request asked for a ring.
    Now { wake: bool },
    /// A task took the call: it replies (and rings, and releases the port's lock) later.
    Later,
}

/// Answers the request `request_word` (acquired, pending) on port `port`'s head line `line`:
/// checks its lengths and its wide lines' tags, serves it (`serve_pending`), writes the reply
/// and hands it back, or leaves that to a task that took it (`serve` answering `None`). `area`
/// is the port's bulk area (address, length).
#[inline(always)]
fn answer(
    line: &Line,
    wide: &Wide,
    (port, request_word): (u32, u64),
    (area, share): (*mut u8, usize),
    scratch: &mut Scratch,
    serve: &mut impl FnMut(Call, &[u8], &[u8], &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)>,
) -> Answered {
    let Scratch { request, reply, .. } = scratch;
    let pending = seq(request_word);
    let opcode = (request_word >> 32) as u32;
    let lens_word = line.words[word::REQUEST_LEN].load(Ordering::Relaxed);
    let (len, want, body_len, body_in_lines) = lens::unpack(lens_word);
    let wake = lens_word & lens::WAKE != 0;
    let fits = len <= INLINE_BYTES
        && want <= INLINE_BYTES
        && if body_in_lines {
            body_len <= len
        } else {
            body_len <= share
        };
    let (status, reply_len) = if !fits || !take_request(line, wide, request, (len, want), pending) {
        // A length past what the lines or the area hold, or a wide line of another call.
        (status::BAD_REQUEST, 0)
    } else {
        let (fixed, body): (&[u8], &[u8]) = if body_in_lines {
            request[..len].split_at(len - body_len)
        } else if body_len == 0 {
            (&request[..len], &[])
        } else {
            // SAFETY: `body_len <= share`, the area's length in the live mapping; the client
            // wrote the body before its release store of the request word, acquired by the
            // caller, and writes the area again only after our reply (this worker alone is on
            // the port: its inline lock, or the only one).
            (&request[..len], unsafe {
                std::slice::from_raw_parts(area, body_len)
            })
        };
        let call = Call {
            opcode,
            port,
            seq: pending,
            want,
            wake,
        };
        // (One call of the handler, so that it is inlined here once.)
        match serve(call, fixed, body, reply) {
            Some(answer) => answer,
            None => return Answered::Later,
        }
    };
    // Every line the client reads is handed back, whatever the status (`want` bounded: a client
    // that asked for more than the lines hold got BAD_REQUEST, and the lines they hold).
    hand_back(line, wide, status, reply, reply_len, want, pending);
    // The reply buffer zero again for the next call, now that this reply has gone (whatever the
    // handler wrote in it, past its reply's length too).
    reply.fill(0);
    Answered::Now { wake }
}

/// Writes the reply (its first `len` bytes of `reply`, the rest of the word that holds its last
/// byte as zero; the words after it keep what they held, which the client reads as zero: it masks
/// every byte past `len`), tags every wide line the client's `want` bytes reach, and hands it
/// back with `status` for request `seq`.
#[inline(always)]
pub(crate) fn hand_back(
    line: &Line,
    wide: &Wide,
    status: u32,
    reply: &[u8; INLINE_BYTES],
    len: usize,
    want: usize,
    seq: u32,
) {
    let len = len.min(INLINE_BYTES);
    put_reply(line, wide, reply, len, want.min(INLINE_BYTES), seq);
    // SYNC (inline, hand the reply back): release; pairs with the client's acquire load of the
    // reply word.
    line.words[word::SERVER].store(reply_word::pack(seq, status, len), Ordering::Release);
    // Push the answered line to the shared cache, so that the client's read of the reply does
    // not take it from this core and the next poll take it back (see the module doc;
    // `shm/BENCHMARKS.md`, round 4).
    crate::cache::demote(line);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn line() -> Line {
        Line {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn wide() -> Wide {
        Wide {
            lines: std::array::from_fn(|_| line()),
        }
    }

    #[test]
    fn a_payload_reads_back_its_length_and_zeros_after_it() {
        let bytes: Vec<u8> = (1..=HEAD_BYTES as u8).collect();
        // Every length of payload against every length the reader asks for (a generated call
        // asks for its reply type's size).
        for len in 0..=HEAD_BYTES + 3 {
            for wanted in [0, 1, 5, 8, 12, 16, 24, 31, HEAD_BYTES] {
                let line = line();
                // Stale bytes everywhere first: what a previous call leaves.
                line.write_payload(&[0xee; HEAD_BYTES]);
                line.write_payload(&bytes[..len.min(HEAD_BYTES)]);
                let mut out = vec![0x55u8; wanted];
                line.read_payload(&mut out, len);
                let n = len.min(wanted);
                assert_eq!(&out[..n], &bytes[..n], "len {len}, wanted {wanted}");
                assert!(out[n..].iter().all(|&b| b == 0), "len {len}: {out:?}");
            }
        }
    }

    /// A request of every length up to `INLINE_BYTES`, as the worker reads it (whole lines) and
    /// with each wide line it reaches tagged, and none other touched.
    #[test]
    fn a_request_crosses_every_line_it_reaches_tagged() {
        let bytes: Vec<u8> = (0..INLINE_BYTES).map(|i| i as u8 ^ 0x5a).collect();
        for len in 0..=INLINE_BYTES {
            let (head, wide) = (line(), wide());
            for l in &wide.lines {
                l.write_from(1, &[0xee; WIDE_BYTES]);
            }
            put_request(&head, &wide, &bytes[..len], 7);
            let mut out = [0u8; LINES_BYTES];
            assert!(
                take_request(&head, &wide, &mut out, (len, 0), 7),
                "len {len}"
            );
            assert_eq!(&out[..len], &bytes[..len], "len {len}");
            for (i, l) in wide.lines.iter().enumerate() {
                let reached = i < wide_lines_for(len);
                assert_eq!(l.words[0].load(Ordering::Relaxed) == tag(7, false), reached);
                if !reached {
                    let untouched =
                        (1..8).all(|w| l.words[w].load(Ordering::Relaxed) == 0xeeee_eeee_eeee_eeee);
                    assert!(untouched, "len {len}: line {i} written");
                }
            }
            // A line of another call (or none) among those it reaches: the request is refused.
            if len > HEAD_BYTES {
                let last = &wide.lines[wide_lines_for(len) - 1];
                last.words[0].store(tag(6, false), Ordering::Relaxed);
                assert!(
                    !take_request(&head, &wide, &mut out, (len, 0), 7),
                    "len {len}"
                );
                last.words[0].store(tag(7, true), Ordering::Relaxed);
                assert!(
                    !take_request(&head, &wide, &mut out, (len, 0), 7),
                    "len {len}"
                );
            }
        }
    }

    /// The reply word carries a reply's sequence, length and status, each whole; a status past
    /// its 16 bits goes as SERVER_ERROR, never as another status.
    #[test]
    fn the_reply_word_keeps_its_fields_apart() {
        for (seq, status, len) in [
            (0, status::OK, 0),
            (u32::MAX, status::NOT_INLINE, INLINE_BYTES),
            (7, u16::MAX as u32, 40),
        ] {
            let w = reply_word::pack(seq, status, len);
            assert_eq!(
                (super::seq(w), reply_word::status(w), reply_word::len(w)),
                (seq, status, len)
            );
        }
        let w = reply_word::pack(3, 1 << 16 | status::OK, 8);
        assert_eq!(reply_word::status(w), status::SERVER_ERROR);
        assert_eq!((super::seq(w), reply_word::len(w)), (3, 8));
    }

    /// A reply of every length read back for every length a client asks for: its bytes, zeros
    /// after it, every line the client waits for tagged (however short the reply), and no bytes
    /// past the reply's length left in the words it wrote.
    #[test]
    fn a_reply_reads_back_its_length_in_every_line_the_client_reads() {
        let mut reply = [0u8; INLINE_BYTES];
        for (i, b) in reply.iter_mut().enumerate() {
            *b = (i as u8).wrapping_add(1);
        }
        for len in 0..=INLINE_BYTES {
            for want in [
                0,
                1,
                8,
                12,
                16,
                32,
                HEAD_BYTES - 1,
                HEAD_BYTES,
                HEAD_BYTES + 1,
                64,
                HEAD_BYTES + WIDE_BYTES,
                HEAD_BYTES + WIDE_BYTES + 1,
                128,
                200,
                255,
                INLINE_BYTES,
            ] {
                let (head, wide) = (line(), wide());
                head.write_payload(&[0xee; HEAD_BYTES]);
                for l in &wide.lines {
                    l.write_from(1, &[0xee; WIDE_BYTES]);
                }
                put_reply(&head, &wide, &reply, len, want, 9);
                assert!(reply_lines_in(&wide, want, 9), "len {len}, want {want}");
                assert!(!reply_lines_in(
                    &wide,
                    want.max(len).max(HEAD_BYTES + 1),
                    10
                ));
                let mut out = vec![0x55u8; want];
                take_reply(&head, &wide, &mut out, len);
                let n = len.min(want);
                assert_eq!(&out[..n], &reply[..n], "len {len}, want {want}");
                assert!(out[n..].iter().all(|&b| b == 0), "len {len}, want {want}");
                // Read whole, the words are: the reply, zeros to the end of its last word, then
                // the words it did not touch.
                let mut raw = [0u8; LINES_BYTES];
                head.read_payload(&mut raw[..HEAD_BYTES], INLINE_BYTES);
                for (i, l) in wide.lines.iter().enumerate() {
                    l.read_from(1, &mut raw[wide_range(i)], INLINE_BYTES);
                }
                let end = {
                    // The reply's last word ends on a multiple of 8 from the start of its line.
                    let at = |n: usize| {
                        if n <= HEAD_BYTES {
                            n.div_ceil(8) * 8
                        } else {
                            let i = (n - HEAD_BYTES - 1) / WIDE_BYTES;
                            wide_range(i).start + (n - wide_range(i).start).div_ceil(8) * 8
                        }
                    };
                    at(len)
                };
                assert_eq!(&raw[..len], &reply[..len]);
                assert!(raw[len..end].iter().all(|&b| b == 0), "len {len}: {raw:?}");
                assert!(raw[end..].iter().all(|&b| b == 0xee), "len {len}: {raw:?}");
            }
        }
    }

    /// On a bitmap of many words, a line armed anywhere is answered within one turn of
    /// `ArmedWords` over the bitmap, and its next requests at the next pass; lines of a word seen
    /// empty are not read; the sweep (`share` `None`) answers at once.
    #[test]
    fn a_large_bitmap_serves_every_line_armed() {
        const PORTS: usize = 8192;
        let words = PORTS / 32;
        let turn = words.div_ceil(REFRESH_WORDS);
        let bitmap: Vec<AtomicU32> = (0..words).map(|_| AtomicU32::new(0)).collect();
        let lines: Vec<Line> = (0..PORTS).map(|_| line()).collect();
        let wides: Vec<Wide> = (0..PORTS).map(|_| wide()).collect();
        let area = InlineArea {
            bitmap: &bitmap,
            lines: &lines,
            wide: &wides,
            bulk: BulkAreas::NONE,
            wake: None,
        };
        let all = share(0, 1, words);
        let mut scratch = Scratch::new();
        let served = std::cell::RefCell::new(Vec::new());
        let mut serve = |call: Call, _: &[u8], _: &[u8], _: &mut [u8; INLINE_BYTES]| {
            served.borrow_mut().push(call.port);
            Some((status::OK, 0))
        };
        let post = |port: usize, seq: u32| {
            let (w, bit) = word_bit(port);
            bitmap[w].fetch_or(bit, Ordering::Relaxed);
            let line = &lines[port];
            line.words[word::REQUEST_LEN].store(lens::pack(8, 8, 0, false), Ordering::Relaxed);
            line.words[word::CLIENT].store(3 << 32 | seq as u64, Ordering::Release);
        };
        // Nothing armed: a turn of passes learns that every word is empty.
        for _ in 0..turn {
            assert_eq!(
                serve_pending(&area, None, Some(&all), &mut scratch, &mut serve),
                0
            );
        }
        assert!(scratch.armed.seen().iter().all(|&w| w == 0));
        for (i, port) in [6500usize, 0, 8191, 4096, 33].into_iter().enumerate() {
            post(port, 1);
            let passes = (1..=turn)
                .find(|_| serve_pending(&area, None, Some(&all), &mut scratch, &mut serve) == 1)
                .unwrap_or_else(|| panic!("port {port} not answered in {turn} passes"));
            assert!(passes <= turn);
            if i == 0 {
                // The turn before ended at word 0: word 203 is in window 203 / REFRESH_WORDS,
                // and the passes before it do not read its line.
                assert_eq!(passes, 6500 / 32 / REFRESH_WORDS + 1);
            }
            // Its word is known armed now: the next request is answered at the next pass.
            post(port, 2);
            assert_eq!(
                serve_pending(&area, None, Some(&all), &mut scratch, &mut serve),
                1
            );
            assert_eq!(served.borrow().len(), 2 * (i + 1));
        }
        // A line armed in a word seen empty: after a rest, the next pass answers it.
        post(7000, 1);
        assert_eq!(
            serve_pending(&area, None, Some(&all), &mut scratch, &mut serve),
            0
        );
        scratch.assume_armed();
        assert_eq!(
            serve_pending(&area, None, Some(&all), &mut scratch, &mut serve),
            1
        );
        assert_eq!(served.borrow().last(), Some(&7000));
        post(7000, 2);
        assert_eq!(
            serve_pending(&area, None, Some(&all), &mut scratch, &mut serve),
            1
        );
        // A line armed in a word seen empty: the sweep answers it at once.
        post(1000, 1);
        assert_eq!(
            serve_pending(&area, None, None, &mut scratch, &mut serve),
            1
        );
        let served = served.into_inner();
        assert_eq!(served.last(), Some(&1000));
        assert!(served[..served.len() - 1]
            .chunks(2)
            .all(|pair| pair[0] == pair[1]));
    }

    /// Every port is in exactly one worker's share, and neighbouring ports in different ones.
    #[test]
    fn every_port_has_one_worker() {
        for workers in 1..=9 {
            let shares: Vec<Vec<u32>> = (0..workers).map(|i| share(i, workers, 3)).collect();
            for w in 0..3 {
                let all = shares.iter().fold(0u32, |seen, s| {
                    assert_eq!(seen & s[w], 0, "{workers} workers: a port in two shares");
                    seen | s[w]
                });
                assert_eq!(all, u32::MAX, "{workers} workers: a port in no share");
            }
            if workers > 1 {
                assert!(shares.iter().all(|s| s[0] & 0b11 != 0b11));
            }
        }
    }

    #[test]
    fn lengths_pack_and_unpack() {
        for (len, want, body, in_lines) in [
            (0, 0, 0, false),
            (256, 256, 0, true),
            (40, 8, 1 << 20, false),
            (3, 255, 3, true),
        ] {
            assert_eq!(
                lens::unpack(lens::pack(len, want, body, in_lines)),
                (len, want, body, in_lines)
            );
        }
        // What the other side may write: any bits, each field within its width.
        let (len, want, body, _) = lens::unpack(u64::MAX);
        assert_eq!((len, want, body), (0x7fff, 0x7fff, u32::MAX as usize));
        // The wake bit is no part of the length.
        assert_eq!(lens::unpack(lens::pack(8, 8, 0, false) | lens::WAKE).0, 8);
    }
}

/// The inline protocol under loom: every interleaving (to a preemption bound) of a client and the
/// workers that poll its line. Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p ferry-shm --lib --release inline::model`.
#[cfg(all(test, loom))]
mod model {
    use super::*;
    use crate::sync::AtomicBool;
    use ferry_rpc::Stalled;
    use loom::sync::Arc;
    use loom::thread;

    /// A wait that hands the processor to the other threads (loom explores spin loops that way).
    struct Yield;

    impl Wait for Yield {
        fn pause(&self, _polls: u32) -> Result<(), Stalled> {
            thread::yield_now();
            Ok(())
        }
    }

    fn line() -> Line {
        Line {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn wide() -> Wide {
        Wide {
            lines: std::array::from_fn(|_| line()),
        }
    }

    /// The handler: the request's first eight bytes plus the opcode, and a count of its runs;
    /// a request longer than a head line's payload gets its last eight bytes plus the opcode as
    /// well, at the same place in the reply (so both ends of a wide reply are checked).
    fn answer(
        runs: &AtomicU32,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> (u32, usize) {
        runs.fetch_add(1, Ordering::Relaxed);
        let x = u64::from_le_bytes(request[..8].try_into().expect("8 bytes")) + opcode as u64;
        reply[..8].copy_from_slice(&x.to_le_bytes());
        let n = request.len();
        if n > HEAD_BYTES {
            let y =
                u64::from_le_bytes(request[n - 8..].try_into().expect("8 bytes")) + opcode as u64;
            reply[n - 8..n].copy_from_slice(&y.to_le_bytes());
            return (status::OK, n);
        }
        (status::OK, 8)
    }

    /// A client making `calls` calls in turn on one line, and `workers` workers polling it, to
    /// two preemptions per execution; each request and reply `len` bytes (8: the head line
    /// alone; more: wide lines too).
    fn run(workers: usize, calls: u64) {
        run_len(workers, calls, 8);
    }

    fn run_len(workers: usize, calls: u64, len: usize) {
        let mut builder = loom::model::Builder::new();
        builder.max_branches = 1_000_000;
        builder.preemption_bound.get_or_insert(2);
        builder.check(move || {
            let bitmap = Arc::new(vec![AtomicU32::new(0)]);
            let lines = Arc::new(vec![line()]);
            let wides = Arc::new(vec![wide()]);
            let locks = Arc::new(vec![InlineLock::default()]);
            let runs = Arc::new(AtomicU32::new(0));
            let done = Arc::new(AtomicBool::new(false));
            let servers: Vec<_> = (0..workers)
                .map(|_| {
                    let (bitmap, lines, locks) = (bitmap.clone(), lines.clone(), locks.clone());
                    let wides = wides.clone();
                    let (runs, done) = (runs.clone(), done.clone());
                    thread::spawn(move || {
                        let locks = (workers > 1).then_some(&locks[..]);
                        let mut serve =
                            |call: Call, req: &[u8], _body: &[u8], rep: &mut [u8; INLINE_BYTES]| {
                                Some(answer(&runs, call.opcode, req, rep))
                            };
                        let mut scratch = Scratch::new();
                        while !done.load(Ordering::Acquire) {
                            let area = InlineArea {
                                bitmap: &bitmap,
                                lines: &lines,
                                wide: &wides,
                                bulk: BulkAreas::NONE,
                                wake: None,
                            };
                            serve_pending(&area, locks, None, &mut scratch, &mut serve);
                            thread::yield_now();
                        }
                    })
                })
                .collect();
            let armed = AtomicBool::new(false);
            let client = ClientInline::new(
                &bitmap,
                &lines,
                &wides,
                true,
                0,
                &Yield,
                &armed,
                BulkAreas::NONE,
            );
            for call in 1..=calls {
                let mut reply = vec![0u8; len];
                let mut request = vec![0u8; len];
                request[..8].copy_from_slice(&(call * 10).to_le_bytes());
                if len > HEAD_BYTES {
                    request[len - 8..].copy_from_slice(&(call * 10 + 1).to_le_bytes());
                }
                let status = client.call_inline(7, &request, &mut reply);
                assert_eq!(status, Some(Ok(status::OK)));
                // Its own reply, complete: never the previous call's, never half written.
                let word = |at: usize| u64::from_le_bytes(reply[at..at + 8].try_into().unwrap());
                assert_eq!(word(0), call * 10 + 7);
                if len > HEAD_BYTES {
                    assert_eq!(word(len - 8), call * 10 + 8);
                    assert!(reply[8..len - 8].iter().all(|&b| b == 0));
                } else {
                    assert!(reply[8..].iter().all(|&b| b == 0));
                }
            }
            done.store(true, Ordering::Release);
            for s in servers {
                s.join().unwrap();
            }
            // Each request was answered exactly once.
            assert_eq!(runs.load(Ordering::Relaxed), calls as u32);
            assert!(lines[0].at_rest());
        });
    }

    /// The monitor's idle disarm (`disarm_idle`) against a client claiming the port, as
    /// `ShmClient` claims (`try_claim`), reads the bit (`is_armed`) and sets it on its first
    /// inline call if it found it clear: whatever the interleaving, while the client holds its
    /// claim the bit is set (else its request would never be polled).
    #[test]
    fn the_monitor_never_disarms_a_port_a_client_holds() {
        use crate::owner::{pack, release, try_claim};
        loom::model(|| {
            let owner = Arc::new(AtomicU64::new(pack(5, 0)));
            // Armed by an earlier claim; the port is free, its line at rest.
            let bitmap = Arc::new(vec![AtomicU32::new(1)]);
            let lines = Arc::new(vec![line()]);
            let monitor = {
                let (owner, bitmap, lines) = (owner.clone(), bitmap.clone(), lines.clone());
                thread::spawn(move || {
                    if is_armed(&bitmap, 0) {
                        disarm_idle(&owner, &bitmap, &lines[0], 0, 99);
                    }
                })
            };
            let mine = loop {
                if let Some(mine) = try_claim(&owner, 7) {
                    break mine;
                }
                thread::yield_now();
            };
            if !is_armed(&bitmap, 0) {
                bitmap[0].fetch_or(1, Ordering::Relaxed);
            }
            monitor.join().unwrap();
            assert!(is_armed(&bitmap, 0), "a held port's bit was cleared");
            assert!(release(&owner, mine));
        });
    }

    #[test]
    fn one_worker_answers_two_calls_in_turn() {
        run(1, 2);
    }

    /// A call whose request and reply take the head line and two wide lines: the reply's wide
    /// lines are read only once their tags say they are this call's, whatever the order in
    /// which they and the head's reply word become visible.
    #[test]
    fn one_worker_answers_two_wide_calls_in_turn() {
        run_len(1, 2, HEAD_BYTES + WIDE_BYTES + 16);
    }

    /// Two workers make one pass each while the client hands a request over: never are both
    /// answering it, and an answer is the right one. (Exhaustive to the preemption bound; the
    /// spinning version with two workers does not fit a CI run.)
    #[test]
    fn two_workers_never_answer_one_request_twice() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound.get_or_insert(3);
        builder.check(|| {
            let bitmap = Arc::new(vec![AtomicU32::new(1)]);
            let lines = Arc::new(vec![line()]);
            let wides = Arc::new(vec![wide()]);
            let locks = Arc::new(vec![InlineLock::default()]);
            let runs = Arc::new(AtomicU32::new(0));
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (bitmap, lines, locks, runs) =
                        (bitmap.clone(), lines.clone(), locks.clone(), runs.clone());
                    let wides = wides.clone();
                    thread::spawn(move || {
                        let mut serve =
                            |call: Call, req: &[u8], _body: &[u8], rep: &mut [u8; INLINE_BYTES]| {
                                Some(answer(&runs, call.opcode, req, rep))
                            };
                        let area = InlineArea {
                            bitmap: &bitmap,
                            lines: &lines,
                            wide: &wides,
                            bulk: BulkAreas::NONE,
                            wake: None,
                        };
                        serve_pending(
                            &area,
                            Some(&locks[..]),
                            None,
                            &mut Scratch::new(),
                            &mut serve,
                        )
                    })
                })
                .collect();
            // The client's hand-over, as `ClientInline::post` makes it.
            let line = &lines[0];
            line.write_payload(&40u64.to_le_bytes());
            line.words[word::REQUEST_LEN].store(lens::pack(8, 8, 0, false), Ordering::Relaxed);
            line.words[word::CLIENT].store(7 << 32 | 1, Ordering::Release);
            let answered: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
            assert!(answered <= 1, "one request answered {answered} times");
            assert_eq!(runs.load(Ordering::Relaxed), answered);
            let reply = line.words[word::SERVER].load(Ordering::Acquire);
            if answered == 1 {
                assert_eq!(seq(reply), 1);
                assert_eq!(line.words[word::PAYLOAD].load(Ordering::Relaxed), 47);
            } else {
                assert_eq!(seq(reply), 0);
            }
        });
    }
}
