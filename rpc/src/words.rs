//! Word lines: small calls in words that carry their own sequence number, for a GPU calling its
//! host across PCIe.
//!
//! A call through the packets costs a GPU three serial reads of host memory after its send: the
//! inbox (is the reply there?), then the reply's slots, then the header's status, each a trip
//! across the bus. A word line cuts that to one. Every 8-byte word of a call carries the call's
//! sequence number beside its payload: a request word is `payload (32 bits) | sequence (32)`, a
//! reply word `payload (32) | status (8) | sequence (low 24 bits)`. A reader that sees the
//! sequence it waits for has the payload (and the status) written with it, in the same load, so
//! no flag has to be read first and no fence has to order the payload before a flag. This is the
//! "LL" protocol of NCCL.
//!
//! **Why a torn read cannot pass for a reply.** Each word is written with one aligned 8-byte store
//! and read with one aligned 8-byte load, which are single-copy atomic on the CPUs and GPUs this
//! runs on (x86-64 and AArch64 aligned 64-bit accesses; NVPTX and AMDGPU 64-bit global accesses,
//! which cross PCIe as one transaction of a naturally aligned 8 bytes), or as one element of an
//! aligned 16-byte vector access on NVPTX (a lone lane's pairs, below: each element of a vector
//! access is single-copy atomic on its own, and each carries its own sequence): a load returns the
//! whole old word or the whole new one, never half of each. A word whose sequence is the one
//! awaited was therefore written, payload included, by this call's writer. A word is never reused
//! with the same sequence while anyone waits for it: the port's sequence goes up by one per call
//! (its client holds the port's lock); a request word would need 2³² calls on its port to come back
//! to a number. A reply word carries 24 bits of it: the server writes the words of the call's lanes
//! and reply length, and every word of the port's reply line (whichever layout below last used it)
//! when the call does not follow the last one it served and once every 2¹⁶ calls, so no reply word
//! is 2²⁴ calls older than the call that reads it. (This starts from reply lines zeroed with the
//! region: sequence 0, a multiple of 2¹⁶. A client would have to give up on about 2²⁴ − 2¹⁶ calls
//! in a row on one port, each after its wait policy's limit and none of them served, to find a
//! stale reply: a GPU never gives up.)
//!
//! **Layout** (`Layout::with_words`), for `P` ports of `L` lanes, `W` = [`WORDS`] words each way,
//! rows of `R` = `L` rounded up to [`ROW`] words (whole 128-byte lines):
//!
//! ```text
//! heads                  P words, one per port: opcode | seq  (the server scans these)
//! bells                  P / 32 words, one per group of 32 ports: port | seq of the call that
//!                        rang it last
//! summits                P / 1024 words, one per 32 bells: the same, for the call that rang
//!                        any of them last (the server reads these first)
//! per port, request      mask low | seq, mask high | seq (read and written only where a group has
//!                        more than 32 lanes), lengths | seq, padding to ROW words, then the
//!                        lanes' words (below)
//! per port, reply        served | seq (the server's own record), padding to ROW words, then the
//!                        lanes' words: payload | status byte | low 24 bits of seq
//! a group's words        word j of lane i at ROW + j × R + i (a warp's stores of word j are one
//!                        coalesced run)
//! a lone lane's words    word j of lane i at ROW + i × W + j (its words next to each other,
//!                        16-byte aligned: moved two at a time by one vector access, one request
//!                        across the bus; a poll with two requests in flight is answered later)
//! ```
//!
//! Every row starts a 128-byte line of its own (offsets from the region's base, which a GPU
//! region has page-aligned), and no row shares a line with the meta words or the served word: a
//! GPU's load requests of one poll that touch the same line go across the bus one after the
//! other, not together, and a warp's word 1 of lane 0 once shared a line with its word 0 of lane
//! 31 (`BENCHMARKS-history.md`, "Values calls, kept sequences, inlined calls"). What costs is the
//! requests, not the lines: a lone lane's words share a line but go in one vector request per two
//! words ("Stores and loads across the bus").
//!
//! **A call** (client side, every active lane together, on a port it opened and so owns: no
//! packet call is in flight on it):
//! 1. The first lane takes the port's next sequence number from the client's own memory
//!    (its port word, `Process::with_port_words`, or `Process::with_word_seqs`; on a GPU device
//!    memory, so no host read), or from the handle itself when it kept the port since its last
//!    word call or took the sequence with the port's lock (a port word's atomic returns it), and
//!    shares it.
//! 2. RELEASE fence: what the lanes wrote before the call is visible to whoever reads the
//!    request (a handler may read memory the call names). A call that passes values only
//!    ([`Memory::ValuesOnly`]) skips it, and the acquire fence of step 4.
//! 3. Each lane stores its request words; the first lane stores the meta words, then the head,
//!    then its group's bell. No fence between them: the server checks every word's sequence.
//! 4. With a clock in the wait policy (`Wait::clock_ns`: a GPU's), the lanes first wait until the
//!    reply is likely written: a poll is a read across the bus, and one that goes out just before
//!    the reply is written comes back without it, the next a whole trip later. The wait is learned
//!    by the handle from its calls (`learn_first_poll`: a little shorter after a first poll that
//!    found the reply, longer after one that did not when the reply came soon after). Each lane
//!    polls its own reply words, all loads issued together (a lone lane's two at a time with one
//!    vector load; one trip across the bus per poll), until every one carries the sequence (only
//!    the first for a status other than OK, which carries no reply); then an ACQUIRE fence, so
//!    whatever the handler made visible before replying is visible after. A lone lane polls its own
//!    words until they come. In a group, after a few such polls (a lone warp's reply is there by
//!    then) only the first lane polls, one word, the served word the server writes after every
//!    lane's: every lane polling its words would fill the bus when thousands of warps wait at once.
//!    Then each lane still without its words polls them again. A group gives up together
//!    ([`Error::Stalled`] in every lane) if the wait policy gave up on any lane.
//!
//! **The server** first has the CPU fetch the lines of the last port it served (its head, its meta
//! words and the first two rows of its request words: the client that called last is the likeliest
//! to call again, and its lines are misses once it has), then reads the summits. A summit that
//! changed names the port that rang it last: that port's call is served at once, before any bell is
//! read. Then the server reads the bells under the summits that changed: a summit that holds what
//! it held when the server last found every group under it done with spares the reading of its 32
//! bells, and a group whose bell holds what it held when the server last found every head of the
//! group done with is skipped, so an idle pass over thousands of ports costs one load per 1024 of
//! them (and the swept group's, below). A client rings its group's bell after its head, and its
//! summit after its bell. Each head of the other groups is compared with the last head it saw on
//! that port (a copy of its own); a head whose sequence differs from the port's served word is a
//! request. A bell is only a hint: the head and the bell are stored without a fence between them,
//! so a server may see a bell before its head, find nothing new and settle the group. So every pass
//! also sweeps one group whatever its bell says (each group in turn), and a pass after one that
//! served many calls reads every head and no bell (under load nearly every group has rung): a head
//! seen after its bell waits at most one sweep of the groups, never forever. For each request it
//! reads the meta words and every lane's request words (acquire loads checking their sequence, all
//! of them in one look with no branch per word, and only if one has not arrived a few more loads of
//! each; a word still not there leaves the port to the next pass, so no port waits for another; a
//! head that moved on is a client that gave up and called again: that call is dropped), serves
//! every lane in one dispatch (`Handler::handle_inline_lanes`: a derived service decodes the opcode
//! once), and then writes the reply words in one burst (release stores), then the served word. The
//! burst matters: the client polls those lines, and each of its reads takes a line the server is
//! writing away from it. A handler that cannot serve the call this way answers [`DECLINED`]: the
//! client then makes the call through the packets.
//!
//! The packets and the word lines of one port never carry a call at once: a word call is made on
//! a port whose packet the client holds, and it leaves the packet there.

use crate::lanes::{lanes_in, Lanes};
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::{Client, Process, Server};
use crate::status::OK;
use crate::sync::{fence, load_pair, prefetch, store_pair, AtomicU64, Ordering};
use crate::wait::Wait;
use crate::Error;

// The word lines' geometry is the region layout's; the default lanes are the handle's.
use crate::layout::INLINE_BYTES;
pub use crate::layout::{BELL_PORTS, ROW, SUMMIT_BELLS, WORDS, WORD_BYTES};
pub use crate::process::WORD_LANES;

/// Where word `j` of `lane` is in a request or reply line whose rows are `row` words long, for a
/// call of one lane (`alone`) or of a group. A group's word `j` of every lane is one run of row
/// `j` (a warp's stores of word `j` coalesce); a lone lane's [`WORDS`] words are next to each
/// other, 16-byte aligned, so it moves them two at a time with one vector access (one request
/// across the bus: a poll with two requests in flight is answered later, `BENCHMARKS.md`).
#[inline(always)]
const fn at(row: usize, alone: bool, j: usize, lane: usize) -> usize {
    at32(row as u32, alone, j as u32, lane as u32) as usize
}

/// [`at`] in 32-bit arithmetic (rows, lanes and words are all below 2⁸; on a GPU a 64-bit
/// multiply and add take twice the instructions).
#[inline(always)]
const fn at32(row: u32, alone: bool, j: u32, lane: u32) -> u32 {
    match alone {
        true => ROW as u32 + lane * WORDS as u32 + j,
        false => ROW as u32 + j * row + lane,
    }
}

/// The lane and word a call's layout ([`at`]) puts at position `p` of a line's words (past the
/// meta row); a lane number past the region's lanes is padding.
#[inline(always)]
const fn lane_and_word(row: usize, alone: bool, p: usize) -> (usize, usize) {
    match alone {
        true => (p / WORDS, p % WORDS),
        false => (p % row, p / row),
    }
}

/// A port's two word lines as one lane of a call sees them, checked once when made: every word
/// [`at`] gives this lane (word `j < WORDS`, either layout) and every meta word lie inside both
/// lines, so a call reads and writes them with no check of its own (on a GPU a check is a compare
/// and a branch on the call's path, and a call would make a dozen).
#[derive(Clone, Copy)]
struct LaneLines<'a> {
    req: &'a [AtomicU64],
    rep: &'a [AtomicU64],
    row: u32,
    lane: u32,
}

/// Which of a port's two word lines ([`LaneLines`]).
#[derive(Clone, Copy)]
enum Line {
    Request,
    Reply,
}

impl<'a> LaneLines<'a> {
    /// `port`'s lines in `region`, for lane `lane`.
    ///
    /// # Panics
    ///
    /// If the region has no word lines, or no words for `lane` (a lane past its layout's).
    #[inline(always)]
    fn new<M: Mailbox>(region: &crate::process::Region<'a, M>, port: u32, lane: u32) -> Self {
        let (req, rep) = region.word_lines(port);
        let row = region.layout().row_words();
        let len = ROW + WORDS * row;
        assert!(
            (lane as usize) < row && req.len() >= len && rep.len() >= len,
            "lane {lane} has no words on port {port}'s word lines"
        );
        LaneLines {
            req,
            rep,
            row: row as u32,
            lane,
        }
    }

    /// Position of word `j % WORDS` of this lane in either line, in a lone lane's layout or a
    /// group's ([`at`]).
    #[inline(always)]
    fn position(&self, alone: bool, j: usize) -> usize {
        at32(self.row, alone, (j % WORDS) as u32, self.lane) as usize
    }

    /// The request line or the reply line (each checked by `new`).
    #[inline(always)]
    fn line(&self, which: Line) -> &'a [AtomicU64] {
        match which {
            Line::Request => self.req,
            Line::Reply => self.rep,
        }
    }

    /// Word `j % WORDS` of this lane in line `which`.
    #[inline(always)]
    fn word(&self, which: Line, alone: bool, j: usize) -> &'a AtomicU64 {
        let line = self.line(which);
        debug_assert!(j < WORDS && line.len() >= ROW + WORDS * self.row as usize);
        // SAFETY: `new` checked `lane < row` and that both lines hold `ROW + WORDS * row` words.
        // With `j < WORDS` (the `% WORDS` above), a lone lane's position `ROW + lane * WORDS + j`
        // is at most `ROW + (row - 1) * WORDS + WORDS - 1`, and a group's `ROW + j * row + lane`
        // at most `ROW + (WORDS - 1) * row + row - 1`: both below `ROW + WORDS * row`.
        unsafe { line.get_unchecked(self.position(alone, j)) }
    }

    /// A lone lane's words `j & !1` and the one after it in line `which`: 16-byte aligned where
    /// the line is (a region's layout starts lines on 128-byte boundaries; `sync::load_pair` and
    /// `store_pair` need the 16 on NVPTX).
    #[inline(always)]
    fn pair(&self, which: Line, j: usize) -> &'a [AtomicU64] {
        let line = self.line(which);
        let at = self.position(true, j & !1);
        debug_assert!(at + 2 <= line.len());
        // SAFETY: as in `word`: the even word `j & !1 <= WORDS - 2` of a lone lane and the one
        // after it are both at most `ROW + (row - 1) * WORDS + WORDS - 1`, inside the line.
        unsafe { line.get_unchecked(at..at + 2) }
    }

    /// Meta word `k % ROW` of line `which` (the request's mask and lengths, the reply's served
    /// word).
    #[inline(always)]
    fn meta(&self, which: Line, k: usize) -> &'a AtomicU64 {
        let line = self.line(which);
        debug_assert!(line.len() >= ROW);
        // SAFETY: `new` checked that both lines hold at least `ROW` words.
        unsafe { line.get_unchecked(k % ROW) }
    }
}

/// The status a server answers on a word line when its handler cannot serve the call there (it
/// serves no inline calls, or not this one): nothing was executed; the client makes the call
/// through the packets.
pub const DECLINED: u32 = u32::MAX - 1;

/// Polls of all its words by every lane of a waiting call before only the first lane polls (one
/// word): enough for a lone warp's reply, few enough that thousands of waiting warps do not fill
/// the bus with reads.
const FULL_POLLS: u32 = 3;

/// A word: `payload` with `seq`.
#[inline(always)]
const fn word(payload: u32, seq: u32) -> u64 {
    payload as u64 | (seq as u64) << 32
}

/// A bell word: the port that rang it and its call's sequence (never 0: sequences start at 1).
#[inline(always)]
const fn bell(port: u32, seq: u32) -> u64 {
    (port as u64) << 32 | seq as u64
}

/// The port that rang a bell (or a summit).
#[inline(always)]
const fn bell_port(bell: u64) -> u32 {
    (bell >> 32) as u32
}

/// The bits of a call's sequence a reply word carries (24: the rest holds the status).
const REPLY_SEQ: u32 = 0xFF_FFFF;

/// The status byte of a reply word meaning [`DECLINED`].
const DECLINED_BYTE: u32 = 0xFF;

/// A reply word: `payload`, the lane's `status` (a byte: [`DECLINED`] as `0xFF`, statuses that
/// do not fit as `SERVER_ERROR`) and the low 24 bits of `seq`.
#[inline(always)]
const fn reply_word(payload: u32, status: u32, seq: u32) -> u64 {
    let status = match status {
        DECLINED => DECLINED_BYTE,
        s if s < DECLINED_BYTE => s,
        _ => crate::status::SERVER_ERROR,
    };
    payload as u64 | (status as u64) << 32 | ((seq & REPLY_SEQ) as u64) << 40
}

/// The status a reply word carries.
#[inline(always)]
const fn reply_status(word: u64) -> u32 {
    match (word >> 32) as u32 & 0xFF {
        DECLINED_BYTE => DECLINED,
        s => s,
    }
}

/// The sequence bits a reply word carries.
#[inline(always)]
const fn reply_seq(word: u64) -> u32 {
    (word >> 40) as u32
}

/// The sequence a word carries.
#[inline(always)]
const fn seq_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// Payload word `j` of `bytes` (little-endian, zero past the end).
///
/// (A copy, not a byte-by-byte build: on an H200 the byte-by-byte form made a lone lane's word
/// call faster and every generated call through the packets, whose code it shares, slower by
/// more; `BENCHMARKS-history.md`, "Word lines, second pass".)
#[inline(always)]
fn payload(bytes: &[u8], j: usize) -> u32 {
    let mut b = [0u8; 4];
    let from = (4 * j).min(bytes.len());
    let to = (4 * j + 4).min(bytes.len());
    b[..to - from].copy_from_slice(&bytes[from..to]);
    u32::from_le_bytes(b)
}

/// Writes payload word `j` into `bytes` (as much of it as fits).
#[inline(always)]
fn put_payload(bytes: &mut [u8], j: usize, value: u32) {
    let from = (4 * j).min(bytes.len());
    let to = (4 * j + 4).min(bytes.len());
    bytes[from..to].copy_from_slice(&value.to_le_bytes()[..to - from]);
}

/// Writes a lane's reply words `got` into `reply` (its bytes, as many as it holds): the first
/// `written` words' payloads where the status is OK, zeros past them and for any other status.
/// Returns the status.
#[inline(always)]
fn put_reply(got: &[u64; WORDS], written: usize, reply: &mut [u8]) -> u32 {
    let status = reply_status(got[0]);
    for (j, &w) in got.iter().enumerate().take(reply.len().div_ceil(4)) {
        let value = if status == OK && j < written {
            w as u32
        } else {
            0
        };
        put_payload(reply, j, value);
    }
    status
}

/// What a word call's handler does with the caller's memory, which decides the fences the
/// caller pays around the call.
///
/// The words themselves need no fence: each carries its call's sequence, so a reader takes no
/// word of another call for one of this call's (above). The fences order *other* memory: the
/// caller's writes before the call (a handler may read memory the call names, such as a string
/// to print) and the handler's writes before its reply (a copy into the caller's memory). On a
/// GPU calling its host, the release fence before the request is a trip across the bus of its
/// own (`BENCHMARKS-history.md`, "Values calls, kept sequences, inlined calls").
///
/// Only calls whose request and reply fit a word line ([`WORD_BYTES`] a lane) travel on one; a
/// values call that does not fit goes through the packets, fenced as any other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Memory {
    /// The handler may read memory the call names, or write memory the caller reads after the
    /// call: a release fence before the request, an acquire fence after the reply. The default,
    /// and the only safe choice for a call that passes an address.
    #[default]
    Fenced,
    /// The call passes values only: its handler reads none of the caller's memory and writes
    /// none of it (directly or through a copy), so neither fence is needed. A call declared so
    /// whose handler does reach the caller's memory may read the caller's old bytes there, or
    /// leave the caller reading stale ones: the declaration is the caller's promise
    /// (`#[rpc(values)]` on a call of a derived service).
    ValuesOnly,
}

/// A word call on its way: what [`Port::recv_words`] needs to wait for its reply.
#[derive(Clone, Copy, Debug)]
pub struct WordCall {
    seq: u32,
    /// The call's reply length in words (the first lane's): the server writes no more of the
    /// call's words (a full rewrite of the line writes the others with another status).
    reply_words: u8,
    /// Whether the reply is followed by an acquire fence ([`Memory::Fenced`]).
    fenced: bool,
    /// The wait policy's clock when the call was sent (`Wait::clock_ns`; 0 without one).
    sent: u32,
}

/// How much longer a word call's client waits before its first poll after a first poll that went
/// out too early and a reply that came within [`FULL_POLLS`] more (`learn_first_poll`), in ns.
const FIRST_POLL_UP: u32 = 128;

/// The longest a word call's client waits before its first poll, in ns.
const FIRST_POLL_MAX: u32 = 4096;

/// Learns from a word call's wait (the same in every lane of its group) how long the next call
/// waits after its send before its first poll (`delay`, in ns): a poll is a read across the bus,
/// and one that goes out before the reply is written is answered one read later, while a poll
/// that waited a little longer would have found it.
///
/// - The first poll `found` the whole reply: the wait may be longer than it needs; the next is a
///   little shorter (by 4 ns and 1/128 of it), so it keeps looking for the shortest that works.
/// - It did not, and the reply came `soon` after (within [`FULL_POLLS`] more polls): the wait was
///   too short; the next is [`FIRST_POLL_UP`] longer, to at most [`FIRST_POLL_MAX`]. The wait
///   settles where the first poll goes out too early once in 30 calls (a wait near 0) to once
///   in 12 (near 1 µs).
/// - The reply came later than that (a busy server, a slow handler): nothing is learned (such a
///   reply says nothing of when a fast one comes).
///
/// One wait serves all of a handle's word calls: a handler a little slower than the others
/// (its reply within a few polls) lengthens the others' wait too, and a caller that does other
/// work between its send and its receive finds every reply at the first poll and drives the
/// wait to 0 (which then costs nothing, as the wait counts from the send).
#[inline(always)]
fn learn_first_poll(delay: &core::cell::Cell<u32>, found: bool, soon: bool) {
    let d = delay.get();
    if found {
        delay.set(d.saturating_sub(d / 128 + 4));
    } else if soon {
        delay.set((d + FIRST_POLL_UP).min(FIRST_POLL_MAX));
    }
}

impl<'a, L: Lanes, M: Mailbox, W: Wait> Process<'a, Client, L, M, W> {
    /// Whether this handle can make calls on word lines: the region has them and the handle has
    /// its sequence words ([`with_word_seqs`](Self::with_word_seqs), or its port words:
    /// [`with_port_words`](Self::with_port_words)).
    #[inline(always)]
    pub fn has_words(&self) -> bool {
        self.word_calls()
    }
}

impl<L: Lanes, M: Mailbox, W: Wait> Port<'_, '_, Client, L, M, W> {
    /// Sends this lane's `request` (at most [`WORD_BYTES`]) on the port's word line, asking for
    /// `reply_len` bytes back (at most [`WORD_BYTES`]); every active lane calls it together, with
    /// the same lengths. The port must hold its packet (as it does once opened); the call does not
    /// move it.
    ///
    /// The first lane's lengths are the call's (a lane with a longer request is cut to them, a
    /// shorter one padded with zeros): the generated clients pass the same lengths on every lane.
    ///
    /// # Panics
    ///
    /// If a length is over [`WORD_BYTES`] or the process has no word lines
    /// ([`Process::has_words`]).
    pub fn send_words(&mut self, request: &[u8], reply_len: usize) -> WordCall {
        self.send_words_with(request, reply_len, Memory::Fenced)
    }

    /// As [`send_words`](Self::send_words), with the fences `memory` asks for: none for a call
    /// that passes values only ([`Memory::ValuesOnly`]), which then costs one trip across the bus
    /// less on a GPU. Every active lane passes the same `memory`.
    ///
    /// # Panics
    ///
    /// As [`send_words`](Self::send_words).
    pub fn send_words_with(
        &mut self,
        request: &[u8],
        reply_len: usize,
        memory: Memory,
    ) -> WordCall {
        assert!(request.len() <= WORD_BYTES && reply_len <= WORD_BYTES);
        let process = self.process();
        let index = self.index();
        assert!(process.word_calls(), "the process has no word lines");
        let lanes = process.lanes();
        let mask = self.exec_mask();
        // A lone lane's words lie next to each other (`at`).
        let alone = mask.count_ones() == 1;
        let first = lanes.is_first_lane(mask);
        let mut seq = 0;
        if first {
            // Only the lock holder touches the port's sequence word (stored after the fence
            // below, which would otherwise wait for this store too). A port this handle kept
            // since its last word call needs no read: the handle remembers what it sent.
            seq = process.next_seq(index);
        }
        let seq = lanes.broadcast(mask, seq);
        // The first lane's lengths are the call's: every lane stores that many words (its own
        // bytes, zero past their end), at least one, so the server finds every word it waits
        // for and every lane's earlier writes are published by a word the server reads.
        let own = request.len() as u32 | (reply_len as u32) << 8;
        let lengths = lanes.broadcast(mask, own);
        // This lane's own length where it is the call's (always, from a generated client: a
        // length the compiler knows), else the first lane's.
        let words = match lengths == own {
            true => request.len().div_ceil(4).max(1),
            false => ((lengths & 0xff) as usize).div_ceil(4).max(1),
        };
        let region = process.region();
        let lines = LaneLines::new(region, index, lanes.lane_id());
        let line = Line::Request;
        let fenced = memory == Memory::Fenced;
        if fenced {
            // SYNC (word request, release): this lane's earlier writes happen before the
            // server's acquire load of any word stored below.
            fence(Ordering::Release);
        }
        // SYNC (none needed for a values call): its handler reads none of this lane's memory,
        // and its words carry their own sequence.
        if first {
            process.sent_seq(index, seq);
        }
        // A lane whose length is the call's (always, from a generated client) stores a count
        // the compiler knows: a straight run of stores. (`words` is the first lane's count in the
        // other branch only; computed above, as measured: written in the branch, the calls of the
        // occupancy program compiled to more code.)
        if lengths == own {
            store_request(
                &lines,
                alone,
                request,
                seq,
                request.len().div_ceil(4).max(1),
            );
        } else {
            store_request(&lines, alone, request, seq, words);
        }
        if first {
            lines
                .meta(line, 0)
                .store(word(mask as u32, seq), Ordering::Relaxed);
            // Lanes past 32 exist only where a group has more (an AMD wavefront of 64).
            if region.layout().lanes() > 32 {
                lines
                    .meta(line, 1)
                    .store(word((mask >> 32) as u32, seq), Ordering::Relaxed);
            }
            lines
                .meta(line, 2)
                .store(word(lengths, seq), Ordering::Relaxed);
            region.heads()[index as usize].store(word(self.opcode(), seq), Ordering::Relaxed);
            // The group's bell: a value no call rang before (this port, this sequence).
            region.bells()[(index / BELL_PORTS) as usize]
                .store(bell(index, seq), Ordering::Relaxed);
            // And its summit, the same value.
            region.summits()[(index / (BELL_PORTS * SUMMIT_BELLS)) as usize]
                .store(bell(index, seq), Ordering::Relaxed);
        }
        WordCall {
            seq,
            reply_words: ((lengths >> 8 & 0xff) as usize).div_ceil(4).min(WORDS) as u8,
            fenced,
            sent: process.wait_policy().clock_ns().unwrap_or(0),
        }
    }

    /// Waits for the reply to `call` and writes this lane's bytes of it into `reply` (its
    /// length as given to [`send_words`](Self::send_words)); returns the server's status for
    /// this lane ([`DECLINED`]: nothing was executed). Every active lane calls it together.
    /// [`Error::Stalled`] if the wait policy gave up.
    ///
    /// # Panics
    ///
    /// If `reply` is longer than [`WORD_BYTES`].
    pub fn recv_words(&mut self, call: WordCall, reply: &mut [u8]) -> Result<u32, Error> {
        let process = self.process();
        let region = process.region();
        let lines = LaneLines::new(region, self.index(), process.lanes().lane_id());
        let line = Line::Reply;
        assert!(
            reply.len() <= WORD_BYTES,
            "a word line carries {WORD_BYTES} bytes a lane"
        );
        // At least one word: it carries the status. The count is the caller's length (known where
        // the call is compiled), so the loads below unroll into registers and go out together;
        // a count known only at run time would index `got` in local memory and wait for each load
        // before issuing the next (a trip across the bus each).
        let words = reply.len().div_ceil(4).max(1);
        // Of those, the words the server writes: the call's reply length (the first lane's). A
        // lane that asked for more gets zeros past it.
        let written = (call.reply_words as usize).max(1);
        let mut got = [0u64; WORDS];
        let expect = call.seq & REPLY_SEQ;
        let lanes = process.lanes();
        let mask = self.exec_mask();
        let alone = mask.count_ones() == 1;
        // The words to wait for: those of the call's reply this lane asked for.
        let need = words.min(written);
        // One poll of this lane: every word at once (independent loads, one trip; a lone
        // lane's two at a time, one request each). A status other than OK carries no reply:
        // only the first word is waited for.
        let poll = |got: &mut [u64; WORDS]| {
            if alone {
                if need >= 2 {
                    (got[0], got[1]) = load_pair(lines.pair(line, 0));
                } else {
                    got[0] = lines.word(line, true, 0).load(Ordering::Relaxed);
                }
                if need >= 3 {
                    (got[2], got[3]) = load_pair(lines.pair(line, 2));
                }
            } else {
                for (j, g) in got.iter_mut().enumerate() {
                    if j < words {
                        *g = lines.word(line, false, j).load(Ordering::Relaxed);
                    }
                }
            }
            reply_seq(got[0]) == expect
                && (reply_status(got[0]) != OK || (1..need).all(|j| reply_seq(got[j]) == expect))
        };
        let wait = process.wait_policy();
        let mut polls = 0u32;
        // With a clock, the first poll goes out only when the reply is likely there (the wait
        // is learned from the calls before: `learn_first_poll`). A poll is a read across the
        // bus: one that goes out just before the reply is written comes back without it, and
        // the next read is a whole trip later.
        let clocked = wait.clock_ns().is_some();
        let delay = process.first_poll();
        if clocked {
            let mut wait_ns = delay.get();
            if !alone {
                // Every lane waits the first lane's time and learns from there: a call of some
                // of the group's lanes (a lone lane's) leaves the lanes' copies apart.
                wait_ns = lanes.broadcast(mask, wait_ns);
                delay.set(wait_ns);
            }
            // (At most `wait_ns` looks at the clock, each longer than a nanosecond: a clock that
            // does not move cannot hold the call here.)
            for _ in 0..wait_ns {
                match wait.clock_ns() {
                    Some(now) if now.wrapping_sub(call.sent) < wait_ns => crate::sync::spin_hint(),
                    _ => break,
                }
            }
        }
        let mut done = poll(&mut got);
        if alone {
            let first = done;
            // A lone lane polls its own words to the end: they are as few as the served word,
            // and arrive first.
            while !done {
                if wait.pause(polls).is_err() {
                    return Err(Error::Stalled);
                }
                polls = polls.saturating_add(1);
                done = poll(&mut got);
            }
            if clocked {
                learn_first_poll(delay, first, polls <= FULL_POLLS);
            }
        } else {
            // A lone warp's reply comes within a few polls of every word by every lane. (Every
            // lane takes each turn of the loop, so the ballot stays whole; only a lane still
            // waiting pauses, so `ok` is false only where `done` is false: a lane the wait policy
            // gave up on is one without its reply. `polls` counts this lane's own pauses, as
            // `Wait` expects.)
            // (One ballot a turn: whether a lane still waits. A lane the policy gave up on
            // polls and pauses no more but keeps the loop going to its turn limit, and the group
            // then always takes the slow path below, where it gives up with the rest.)
            let mut ok = true;
            let mut turns = 0;
            let mut waiting = lanes.ballot(mask, !done);
            let first = waiting == 0;
            while waiting != 0 && turns < FULL_POLLS {
                if !done && ok {
                    ok = wait.pause(polls).is_ok();
                    polls = polls.saturating_add(1);
                    if ok {
                        done = poll(&mut got);
                    }
                }
                turns += 1;
                waiting = lanes.ballot(mask, !done);
            }
            // (From ballots: every lane learns the same.)
            if clocked {
                learn_first_poll(delay, first, waiting == 0);
            }
            if waiting != 0 {
                // Under load: only the first lane polls, one word (the served word, written after
                // every lane's), so waiting warps do not fill the bus with reads.
                let mut waited = 1;
                if lanes.is_first_lane(mask) {
                    while seq_of(lines.meta(line, 0).load(Ordering::Relaxed)) != call.seq {
                        if wait.pause(polls).is_err() {
                            waited = 0;
                            break;
                        }
                        polls = polls.saturating_add(1);
                    }
                }
                ok &= lanes.broadcast(mask, waited) != 0;
                // Then each lane reads its words, there by now or about to be.
                while ok && !done {
                    done = poll(&mut got);
                    if !done && wait.pause(polls).is_err() {
                        ok = false;
                    }
                    polls = polls.saturating_add(1);
                }
                // The group gives up together if any lane has no reply.
                if lanes.ballot(mask, !ok) != 0 {
                    return Err(Error::Stalled);
                }
            }
        }
        // (Every lane has its reply here.)
        if call.fenced {
            // SYNC (word reply, acquire): pairs with the server's release stores of these words,
            // so what the handler did before replying is visible from here on.
            fence(Ordering::Acquire);
        }
        // SYNC (none needed for a values call): its handler wrote none of this lane's memory,
        // and its reply is in the words just read.
        Ok(put_reply(&got, written, reply))
    }

    /// [`send_words`](Self::send_words) then [`recv_words`](Self::recv_words): one small call.
    pub fn call_words(&mut self, request: &[u8], reply: &mut [u8]) -> Result<u32, Error> {
        self.call_words_with(request, reply, Memory::Fenced)
    }

    /// [`send_words_with`](Self::send_words_with) then [`recv_words`](Self::recv_words).
    pub fn call_words_with(
        &mut self,
        request: &[u8],
        reply: &mut [u8],
        memory: Memory,
    ) -> Result<u32, Error> {
        let call = self.send_words_with(request, reply.len(), memory);
        self.recv_words(call, reply)
    }
}

/// This lane's first `words` request words of `request` (zero past its end) with `seq`, on its
/// request line: a lone lane's two at a time, a group's lane one at a time.
// (Loops over every word, the call's only stored: each index is then known where the call is
// compiled, and the request's bytes stay in registers.)
#[inline(always)]
fn store_request(lines: &LaneLines<'_>, alone: bool, request: &[u8], seq: u32, words: usize) {
    let line = Line::Request;
    if alone {
        // Two words at a time (one store across the bus).
        for j in (0..WORDS).step_by(2) {
            let first = word(payload(request, j), seq);
            if j + 1 < words {
                store_pair(
                    lines.pair(line, j),
                    first,
                    word(payload(request, j + 1), seq),
                );
            } else if j < words {
                lines.word(line, true, j).store(first, Ordering::Relaxed);
            }
        }
    } else {
        for j in 0..WORDS {
            if j < words {
                let w = word(payload(request, j), seq);
                lines.word(line, false, j).store(w, Ordering::Relaxed);
            }
        }
    }
}

/// The lanes of one call that came on a GPU's word lines (`ferry_rpc::words`), served together:
/// a derived service decodes the opcode once and serves every lane in one loop
/// (`Handler::handle_inline_lanes`), where serving them one by one would dispatch per lane.
/// Each lane's request is at most [`WORD_BYTES`], and so is its reply.
#[derive(Debug)]
pub struct InlineLanes<'a> {
    mask: u64,
    request_len: usize,
    requests: &'a [[u8; WORD_BYTES]],
    replies: &'a mut [[u8; WORD_BYTES]],
    statuses: &'a mut [u32],
}

impl<'a> InlineLanes<'a> {
    /// The lanes in `mask` (bit `i`: lane `i`, lanes past the arrays' length ignored), each with
    /// the first `request_len` bytes of its request (at most `WORD_BYTES`); every lane of the call
    /// starts with a zeroed reply and the status [`DECLINED`] (the other
    /// lanes' are not touched). A server makes these; a test of a handler
    /// can too, and read what it did with [`status`](Self::status) and [`reply`](Self::reply).
    pub fn new(
        mask: u64,
        request_len: usize,
        requests: &'a [[u8; WORD_BYTES]],
        replies: &'a mut [[u8; WORD_BYTES]],
        statuses: &'a mut [u32],
    ) -> Self {
        let n = requests
            .len()
            .min(replies.len())
            .min(statuses.len())
            .min(64);
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut lanes = InlineLanes {
            mask: mask & all,
            request_len: request_len.min(WORD_BYTES),
            requests,
            replies,
            statuses,
        };
        match lanes.mask == all {
            // Every lane: straight fills (a warp's call, nearly always).
            true => {
                lanes.replies[..n].fill([0; WORD_BYTES]);
                lanes.statuses[..n].fill(DECLINED);
            }
            false => {
                for lane in lanes_in(lanes.mask) {
                    lanes.replies[lane] = [0; WORD_BYTES];
                }
                lanes.decline();
            }
        }
        lanes
    }

    /// The lanes of the call (bit `i`: lane `i`).
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// Serves every lane of the call in turn: `serve(request, reply)` gets the lane's request
    /// bytes and writes its reply at the start of `reply` (zeroed by [`new`](Self::new); the
    /// client reads as many bytes as it asked for), returning the lane's status, or `None` to
    /// decline the lane's call (the client then makes it through the packets). Call it once: a
    /// second call sees the first one's replies.
    #[inline(always)]
    pub fn serve(&mut self, mut serve: impl FnMut(&[u8], &mut [u8; WORD_BYTES]) -> Option<u32>) {
        for lane in lanes_in(self.mask) {
            let request = &self.requests[lane][..self.request_len];
            self.statuses[lane] = serve(request, &mut self.replies[lane]).unwrap_or(DECLINED);
        }
    }

    /// Lane `lane`'s status: for a lane of the call, what its handler returned, or
    /// [`DECLINED`]; for another, what the caller's array held.
    ///
    /// # Panics
    ///
    /// If `lane` is past the arrays given to [`new`](Self::new).
    pub fn status(&self, lane: usize) -> u32 {
        self.statuses[lane]
    }

    /// Lane `lane`'s reply bytes (for a lane of the call, zero past the reply's end).
    ///
    /// # Panics
    ///
    /// If `lane` is past the arrays given to [`new`](Self::new).
    pub fn reply(&self, lane: usize) -> &[u8; WORD_BYTES] {
        &self.replies[lane]
    }

    /// Whether the call was declined on every lane (nothing was executed).
    pub fn declined(&self) -> bool {
        lanes_in(self.mask).all(|lane| self.statuses[lane] == DECLINED)
    }

    /// Declines the call on every lane: nothing is executed, the client makes it through the
    /// packets.
    pub fn decline(&mut self) {
        for lane in lanes_in(self.mask) {
            self.statuses[lane] = DECLINED;
        }
    }

    /// Answers `status` (with a zeroed reply) on every lane of the call still
    /// [`DECLINED`]: what a server does for the lanes a handler that
    /// failed part-way (a panic) had not answered.
    pub fn fail_unanswered(&mut self, status: u32) {
        for lane in lanes_in(self.mask) {
            if self.statuses[lane] == DECLINED {
                self.replies[lane] = [0; WORD_BYTES];
                self.statuses[lane] = status;
            }
        }
    }
}

/// A word-line handler for [`Process::serve_words`] made of a function serving one lane's call:
/// `handle(opcode, request, reply)` writes the reply at the start of `reply` and returns the
/// status and the reply's length, or `None` to decline the call (as
/// `Handler::handle_inline`).
pub fn lane_by_lane(
    mut handle: impl FnMut(u32, &[u8], &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)>,
) -> impl FnMut(u32, &mut InlineLanes<'_>) {
    move |opcode, lanes| {
        lanes.serve(|request, reply| {
            let mut out = [0u8; INLINE_BYTES];
            let (status, _) = handle(opcode, request, &mut out)?;
            reply.copy_from_slice(&out[..WORD_BYTES]);
            Some(status)
        })
    }
}

/// What one served word call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordServed {
    /// The port.
    pub port: u32,
    /// The call's opcode.
    pub opcode: u32,
    /// The lanes served (bit `i`: lane `i`).
    pub mask: u64,
    /// Whether every lane's call was declined (`DECLINED`: nothing executed; the client makes it
    /// again through the packets), so it is not a call served.
    pub declined: bool,
}

/// Packets a server thread serves at most between two passes over the word lines while packets
/// keep coming (with none, it passes every time it looks): a lone lane's word call is then not
/// starved by a stream of packet calls.
pub const PASS_EVERY: u32 = 64;

/// A server thread's memory for its passes over the word lines: each port's last head
/// ([`Process::serve_words`]'s `seen`) and the packets served since the last pass.
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct WordScan {
    seen: alloc::vec::Vec<u64>,
    packets: u32,
    /// Whether the next pass reads every head ([`WordScan::read_every_head`]).
    every_head: bool,
    /// The room for a call's lanes, set up by the first pass that serves a call.
    buffers: Option<Buffers>,
}

#[cfg(feature = "alloc")]
impl WordScan {
    /// The memory for `server`'s range of ports.
    pub fn new<L: Lanes, M: Mailbox, W: Wait>(server: &Process<'_, Server, L, M, W>) -> Self {
        WordScan {
            seen: alloc::vec![0; server.seen_words()],
            packets: 0,
            every_head: false,
            buffers: None,
        }
    }

    /// Counts a packet call served; true if a pass over the word lines is due all the same
    /// ([`PASS_EVERY`]).
    pub fn packet_served(&mut self) -> bool {
        self.packets += 1;
        self.packets >= PASS_EVERY
    }

    /// Makes the next pass read every head, whatever the bells say (as a pass after one that
    /// served many calls does): for a server draining the region, whose last pass must have looked
    /// at every port.
    pub fn read_every_head(&mut self) {
        self.every_head = true;
    }

    /// One pass of `server` over its word lines ([`Process::serve_words`]); returns how many
    /// calls it served.
    pub fn pass<L: Lanes, M: Mailbox, W: Wait>(
        &mut self,
        server: &Process<'_, Server, L, M, W>,
        handle: impl FnMut(u32, &mut InlineLanes<'_>),
        served: impl FnMut(WordServed),
    ) -> usize {
        self.packets = 0;
        let words = server.seen_words();
        if self.seen.len() != words {
            // Another range than the one this memory was made for: start again from nothing
            // seen (every head is compared with the port's served word, so nothing is served
            // twice).
            self.seen = alloc::vec![0; words];
        }
        if core::mem::take(&mut self.every_head) {
            self.seen[words - 1] = 1;
        }
        server.scan_words(&mut self.seen, &mut self.buffers, handle, served)
    }
}

/// The summits over `groups` groups of bells from port `start` (a multiple of [`BELL_PORTS`]).
const fn summits_over(start: u32, groups: usize) -> usize {
    if groups == 0 {
        return 0;
    }
    let first = (start / BELL_PORTS) as usize;
    (first + groups - 1) / SUMMIT_BELLS as usize - first / SUMMIT_BELLS as usize + 1
}

/// What a pass records as a group's last bell when it left one of the group's heads for later.
const UNSETTLED: u64 = u64::MAX;

/// What a pass records for a bell (or a summit) it read as `read` (`None`: a busy pass read none)
/// over what it recorded before, `last`: the value read if everything under it was `settled`; the
/// record unchanged if nothing was read; else [`UNSETTLED`], which no bell holds (its port would
/// be 2³² - 1), so the next pass looks under it again, whatever it holds then.
const fn settle(settled: bool, read: Option<u64>, last: u64) -> u64 {
    match (settled, read) {
        (true, Some(read)) => read,
        (true, None) => last,
        (false, _) => UNSETTLED,
    }
}

/// The fewest calls a pass serves for the next to read every head instead of the bells (and at
/// least one for every four groups of the range): one caller at a time leaves the bells on.
pub const BUSY_CALLS: usize = 4;

/// A pass's room for one call's lanes: their requests, replies and statuses.
#[derive(Debug)]
struct Buffers {
    requests: [[u8; WORD_BYTES]; crate::layout::MAX_LANES as usize],
    replies: [[u8; WORD_BYTES]; crate::layout::MAX_LANES as usize],
    statuses: [u32; crate::layout::MAX_LANES as usize],
}

impl Buffers {
    fn new() -> Self {
        Buffers {
            requests: [[0; WORD_BYTES]; crate::layout::MAX_LANES as usize],
            replies: [[0; WORD_BYTES]; crate::layout::MAX_LANES as usize],
            statuses: [0; crate::layout::MAX_LANES as usize],
        }
    }
}

/// Why a pass left a port's head alone.
enum Skip {
    /// Nothing to serve: the head of a call already served, or of one its client gave up on.
    Done,
    /// Some of the call's words have not arrived yet.
    Pending,
}

/// Every word of a port's reply line is rewritten at least once in this many calls on the port
/// (see `serve_port`): a power of two below 2^24, the reply words' sequence bits.
const REFRESH: u32 = 1 << 16;

/// Loads of one request word before a pass moves on and comes back to the port later.
#[cfg(not(loom))]
const ARRIVAL_POLLS: u32 = 256;
#[cfg(loom)]
const ARRIVAL_POLLS: u32 = 2;

impl<'a, L: Lanes, M: Mailbox, W: Wait> Process<'a, Server, L, M, W> {
    /// Looks once over the word lines of this handle's ports and serves every request it finds
    /// with `handle(opcode, lanes)`, which serves every lane of the call
    /// ([`InlineLanes::serve`]; a handler's `handle_inline_lanes`, or [`lane_by_lane`] for a
    /// function of one lane's call) or declines it (the client then makes it through the
    /// packets), telling `served` of each call served. `seen` is this handle's memory of what
    /// it saw (zero at first; keep it between calls, and give it to this handle only):
    /// [`seen_words`](Self::seen_words) words, each port's last head, each group's last bell,
    /// which group the next pass sweeps, the last port served and whether the next pass reads
    /// every head (the last word: set it to 1 for that; [`WordScan::read_every_head`]). Returns
    /// how many calls it served (0 if none, or the region has no word lines).
    ///
    /// A pass reads one bell word per group of [`BELL_PORTS`] ports, and the heads of a group
    /// only when its bell changed since a pass last found every head of the group done with,
    /// or when the pass sweeps it (one group a pass, in turn, whatever its bell says: a bell is
    /// a hint, see the module's text). A pass after one that served many calls (at least
    /// [`BUSY_CALLS`], and one for every four groups) reads every head and no bell. It serves
    /// all it finds rather than one: a busy server pays a pass for many calls. A pass that is
    /// not busy first has the CPU fetch the lines of the last port it served (its head, its
    /// request's meta words and first two rows of words: loads of lines nobody wrote since cost
    /// next to nothing), so a client calling again is read in the time of one miss, not of the
    /// summit's and then its own. Call it from one thread (a server handle has one lane).
    ///
    /// # Panics
    ///
    /// If `seen` is shorter than [`seen_words`](Self::seen_words).
    pub fn serve_words(
        &self,
        seen: &mut [u64],
        handle: impl FnMut(u32, &mut InlineLanes<'_>),
        served: impl FnMut(WordServed),
    ) -> usize {
        // The lanes' requests and replies, set up at the first call the pass serves (an idle
        // pass sets up nothing) and used for every call after it.
        self.scan_words(seen, &mut None, handle, served)
    }

    /// [`serve_words`](Self::serve_words) with the room for a call's lanes kept by the caller
    /// (`buffers`: set up at the first call served, kept for the next passes).
    fn scan_words(
        &self,
        seen: &mut [u64],
        buffers: &mut Option<Buffers>,
        mut handle: impl FnMut(u32, &mut InlineLanes<'_>),
        mut served: impl FnMut(WordServed),
    ) -> usize {
        let region = *self.region();
        let (heads, bells) = (region.heads(), region.bells());
        if heads.is_empty() {
            return 0;
        }
        let range = self.port_range();
        let ports = range.len();
        let groups = ports.div_ceil(BELL_PORTS as usize);
        assert!(
            seen.len() >= self.seen_words(),
            "serve_words needs {} words of memory, got {}",
            self.seen_words(),
            seen.len()
        );
        let (last_heads, rest) = seen.split_at_mut(ports);
        let (rung, rest) = rest.split_at_mut(groups);
        let (tops, rest) = rest.split_at_mut(summits_over(range.start, groups));
        let swept = (rest[0] % groups as u64) as usize;
        rest[0] = rest[0].wrapping_add(1);
        // After a pass that served calls on many groups, the next reads every head and no bell:
        // under such load most groups have rung, and the bells would only add loads.
        let busy = rest[2] != 0;
        // The last port served (plus one; 0: none). Its lines are fetched now, beside the
        // summit's load below: the client that called last is the likeliest to call next, and
        // its lines are a miss when it has (the other side wrote them), which would otherwise
        // wait for the summit's miss to name the port.
        let hot = u32::try_from(rest[1].wrapping_sub(1)).ok();
        if let Some(port) = hot.filter(|port| !busy && range.contains(port)) {
            self.prefetch_call(port);
        }
        let first_group = (range.start / BELL_PORTS) as usize;
        let mut count = 0;
        let mut last_served = None;
        let mut served = |call: WordServed| {
            last_served = Some(call.port);
            served(call)
        };
        // Summits first: the bells under a summit that holds what it held when a pass last found
        // every group under it settled are not read (the swept group's summit excepted).
        let summits = region.summits();
        let first_summit = first_group / SUMMIT_BELLS as usize;
        for (t, top) in tops.iter_mut().enumerate() {
            let s = first_summit + t;
            // This range's groups under summit `s`.
            let lo = (s * SUMMIT_BELLS as usize).max(first_group) - first_group;
            let hi = ((s + 1) * SUMMIT_BELLS as usize).min(first_group + groups) - first_group;
            // SYNC (none needed): a summit is a hint, as a bell is (stored after it, relaxed).
            let summit = match busy {
                true => None,
                false => Some(summits[s].load(Ordering::Relaxed)),
            };
            crate::trace_stamp!(1);
            // Settled since: only the swept group is looked at, if it is under this summit.
            let quiet = summit == Some(*top);
            if let (Some(summit), false) = (summit, quiet) {
                // The summit names the port that rang it last: that call is served first, its
                // head read now and its lines fetched with it, before any bell is read (each
                // is a line the other side wrote: a miss, and a lone call's would otherwise
                // follow each other). Its group's pass below finds its head done with. A
                // summit naming a port outside this range or this summit is a hint ignored.
                let port = bell_port(summit);
                if range.contains(&port) && port / (BELL_PORTS * SUMMIT_BELLS) == s as u32 {
                    self.prefetch_call(port);
                    crate::trace_stamp!(2);
                    let i = (port - range.start) as usize;
                    let head = heads[port as usize].load(Ordering::Relaxed);
                    crate::trace_stamp!(3);
                    let done = head == last_heads[i]
                        || self.serve_moved(
                            i,
                            head,
                            last_heads,
                            buffers,
                            &mut handle,
                            &mut served,
                            &mut count,
                        );
                    if !done {
                        // Left for later (its words not all there, or its lock held): its group
                        // is looked at below whatever its bell says, and stays unsettled until
                        // the call is served.
                        rung[i / BELL_PORTS as usize] = UNSETTLED;
                    }
                }
            }
            if quiet && !(lo..hi).contains(&swept) {
                continue;
            }
            let mut all_settled = true;
            for (g, rung) in rung[..hi].iter_mut().enumerate().skip(lo) {
                if quiet && g != swept {
                    continue;
                }
                // SYNC (none needed): a bell is a hint that a head of its group may have moved (a
                // client stores the head, then the bell, both relaxed). A head that becomes visible
                // after its bell is found when its group is swept, within `groups` passes.
                let bell = match busy {
                    true => None,
                    false => Some(bells[first_group + g].load(Ordering::Relaxed)),
                };
                crate::trace_stamp!(2);
                if bell == Some(*rung) && g != swept {
                    continue;
                }
                let settled = self.pass_group(
                    g,
                    bell,
                    last_heads,
                    buffers,
                    &mut handle,
                    &mut served,
                    &mut count,
                );
                *rung = settle(settled, bell, *rung);
                all_settled &= *rung != UNSETTLED;
            }
            *top = settle(all_settled, summit, *top);
        }
        rest[2] = u64::from(count >= BUSY_CALLS.max(groups / 4));
        if let Some(port) = last_served {
            rest[1] = u64::from(port) + 1;
        }
        count
    }

    /// Looks at group `g` (of this handle's range) in a pass of [`serve_words`](Self::serve_words),
    /// its bell read as `bell` (`None`: a busy pass): serves the calls whose heads moved, telling
    /// `served` of each and counting them in `count`; returns whether every head of the group is
    /// done with (only then is its bell settled).
    #[allow(clippy::too_many_arguments)]
    fn pass_group(
        &self,
        g: usize,
        bell: Option<u64>,
        last_heads: &mut [u64],
        buffers: &mut Option<Buffers>,
        handle: &mut impl FnMut(u32, &mut InlineLanes<'_>),
        served: &mut impl FnMut(WordServed),
        count: &mut usize,
    ) -> bool {
        let heads = self.region().heads();
        let range = self.port_range();
        let ports = range.len();
        let first_group = (range.start / BELL_PORTS) as usize;
        if let Some(bell) = bell {
            // The bell names the port that rang it: its head, meta words and request words
            // are fetched together now, not each after the one before (a call's lines were
            // written by the other side: each is a miss).
            let port = bell_port(bell);
            if port / BELL_PORTS == (first_group + g) as u32 && range.contains(&port) {
                self.prefetch_call(port);
            }
        }
        // Whether every head of the group is done with: only then is its bell settled.
        let mut settled = true;
        let first = g * BELL_PORTS as usize;
        let group = first..(first + BELL_PORTS as usize).min(ports);
        // The group's heads that moved, all read first (loads that do not wait on each
        // other, where serving a call between two would keep the next from being issued),
        // then served in turn.
        // (The heads are kept as they are read, with no array cleared first: a pass over an
        // idle group is these loads and compares alone.)
        let group_heads =
            &heads[range.start as usize + group.start..range.start as usize + group.end];
        let read: [u64; BELL_PORTS as usize] = core::array::from_fn(|k| match group_heads.get(k) {
            Some(head) => head.load(Ordering::Relaxed),
            None => 0,
        });
        let mut moved = 0u64;
        for (k, (&head, &last)) in read.iter().zip(&last_heads[group.clone()]).enumerate() {
            moved |= u64::from(head != last) << k;
        }
        crate::trace_stamp!(3);
        for k in crate::lanes::lanes_in(moved) {
            settled &= self.serve_moved(
                group.start + k,
                read[k],
                last_heads,
                buffers,
                handle,
                served,
                count,
            );
        }
        settled
    }

    /// Serves the call whose head `head` (read from port `i` of this handle's range) moved
    /// since the last look, telling `served` and counting it in `count`; returns whether the
    /// head is done with (false: the port is left for the next pass).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn serve_moved(
        &self,
        i: usize,
        head: u64,
        last_heads: &mut [u64],
        buffers: &mut Option<Buffers>,
        handle: &mut impl FnMut(u32, &mut InlineLanes<'_>),
        served: &mut impl FnMut(WordServed),
        count: &mut usize,
    ) -> bool {
        let port = self.port_range().start + i as u32;
        if !self.is_sole() && !self.lock_port(port) {
            // Another handle of this side is on the port: the next pass looks again.
            return false;
        }
        let buffers = buffers.get_or_insert_with(Buffers::new);
        let call = self.serve_port(port, head, handle, buffers);
        if !self.is_sole() {
            self.unlock(port);
        }
        match call {
            Ok(call) => {
                last_heads[i] = head;
                *count += 1;
                served(call);
                true
            }
            // Not a request (the head of a call already served), or one its client gave up
            // on: this head is done with.
            Err(Skip::Done) => {
                last_heads[i] = head;
                true
            }
            // Some of its words have not arrived: the next pass looks again.
            Err(Skip::Pending) => false,
        }
    }

    /// Asks the CPU for the lines of `port`'s head, its request's meta words and its first two
    /// rows of request words ([`prefetch`]).
    #[inline(always)]
    fn prefetch_call(&self, port: u32) {
        let region = self.region();
        let (req, _) = region.word_lines(port);
        prefetch(&region.heads()[port as usize]);
        prefetch(&req[0]);
        // Every 64 bytes of the two rows (a CPU's cache line; a lone lane's words lie in the
        // first row).
        let row = region.layout().row_words();
        for k in (0..2 * row).step_by(8) {
            prefetch(&req[ROW + k]);
        }
    }

    /// The words of memory [`serve_words`](Self::serve_words) keeps for this handle's range of
    /// ports: one per port, one per group of [`BELL_PORTS`] ports, one per summit over them, and
    /// three.
    pub fn seen_words(&self) -> usize {
        let range = self.port_range();
        let groups = range.len().div_ceil(BELL_PORTS as usize);
        range.len() + groups + summits_over(range.start, groups) + 3
    }

    /// Serves the request `head` announces on `port`, if it is one and all its words are
    /// there; never waits long (a server thread serves many ports).
    fn serve_port(
        &self,
        port: u32,
        head: u64,
        handle: &mut impl FnMut(u32, &mut InlineLanes<'_>),
        buffers: &mut Buffers,
    ) -> Result<WordServed, Skip> {
        let region = *self.region();
        let (req, rep) = region.word_lines(port);
        let seq = seq_of(head);
        // Only this handle writes the served word while it holds the port.
        let last = seq_of(rep[0].load(Ordering::Relaxed));
        if last == seq {
            return Err(Skip::Done);
        }
        let heads = region.heads();
        // SYNC (word request, acquire): pairs with the client's release fence before its
        // stores (none for a values call: its words carry all it passes); each load looks for
        // the word of this call a few times.
        let wait_for = |w: &AtomicU64| -> Result<u64, Skip> {
            for _ in 0..ARRIVAL_POLLS {
                let v = w.load(Ordering::Acquire);
                if seq_of(v) == seq {
                    return Ok(v);
                }
                // The client gave up on this call and made another: drop this one.
                if seq_of(heads[port as usize].load(Ordering::Relaxed)) != seq {
                    return Err(Skip::Done);
                }
                crate::sync::spin_hint();
            }
            // Not there yet (the head can arrive before the lanes' words): nothing was served;
            // the next pass tries again. A client that never writes them costs a few loads a
            // pass, and no other port waits for it.
            Err(Skip::Pending)
        };
        let n = region.layout().lanes() as usize;
        let row = region.layout().row_words();
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mask_lo = wait_for(&req[0])? as u32 as u64;
        let mask_hi = match n > 32 {
            true => wait_for(&req[1])? as u32 as u64,
            false => 0,
        };
        // A corrupt mask cannot make us touch lanes that do not exist.
        let mask = (mask_lo | mask_hi << 32) & all;
        // The layout of the call's words (`at`): a lone lane's next to each other.
        let alone = mask.count_ones() == 1;
        let lengths = wait_for(&req[2])? as u32;
        crate::trace_stamp!(4);
        let (req_len, rep_len) = ((lengths & 0xff) as usize, (lengths >> 8 & 0xff) as usize);
        let opcode = head as u32;
        // Hostile lengths are refused, not read past the line.
        let fits = req_len <= WORD_BYTES && rep_len <= WORD_BYTES;
        // Read every lane's request words (a warp's stores of word j are one run of the line),
        // serve every lane, then write the replies in one burst: the client polls these lines,
        // and each of its reads takes a line the server is writing away from it.
        let Buffers {
            requests,
            replies,
            statuses,
        } = buffers;
        // (A call of no lanes executes nothing either.)
        let mut declined = mask == 0;
        if fits {
            // Every byte a lane's handler sees is written below (its request's words), and
            // `InlineLanes::new` zeroes the call's replies: the buffers need no clearing.
            // At least one word a lane, as every lane stores: its acquire load is what orders that
            // lane's earlier writes before the handler (a call without arguments too).
            // One look at every word first, with no branch per word: under load they are all
            // there. Only if one is not does each word get its own wait.
            let request_words = req_len.div_ceil(4).max(1);
            let mut missing = 0;
            for j in 0..request_words {
                if alone {
                    for lane in lanes_in(mask) {
                        let w = req[at(row, alone, j, lane)].load(Ordering::Acquire);
                        missing |= seq_of(w) ^ seq;
                        requests[lane][4 * j..4 * j + 4].copy_from_slice(&(w as u32).to_le_bytes());
                    }
                } else {
                    // A group's word `j` of every lane is one run of row `j`: read straight
                    // through it, the words of lanes outside the call too (not used; the
                    // sequence is checked for the call's lanes only).
                    let words = &req[at(row, false, j, 0)..at(row, false, j, n)];
                    for (lane, (w, request)) in words.iter().zip(&mut requests[..n]).enumerate() {
                        let w = w.load(Ordering::Acquire);
                        let in_call = ((mask >> lane) as u32 & 1).wrapping_neg();
                        missing |= (seq_of(w) ^ seq) & in_call;
                        request[4 * j..4 * j + 4].copy_from_slice(&(w as u32).to_le_bytes());
                    }
                }
            }
            crate::trace_stamp!(5);
            #[cfg(all(ferry_trace, target_arch = "x86_64"))]
            crate::trace::set(8, u64::from(missing != 0));
            if missing != 0 {
                for j in 0..request_words {
                    for lane in lanes_in(mask) {
                        let w = wait_for(&req[at(row, alone, j, lane)])? as u32;
                        requests[lane][4 * j..4 * j + 4].copy_from_slice(&w.to_le_bytes());
                    }
                }
            }
            // Every lane in one dispatch: the handler decodes the opcode once.
            let mut call = InlineLanes::new(
                mask,
                req_len,
                &requests[..n],
                &mut replies[..n],
                &mut statuses[..n],
            );
            crate::trace_stamp!(6);
            handle(opcode, &mut call);
            declined = call.declined();
            crate::trace_stamp!(7);
        }
        // SYNC (word reply, release): each word's store publishes what the handler did before it.
        // The call's lanes get the words of its reply (at least the first, which carries the
        // status). A reply word left alone keeps the sequence of the call that wrote it last, and
        // its 24 bits must not come round to a later call's: so every word of the line (every
        // lane's, padding too: either layout's words) is rewritten when this call does not follow
        // the last one served on the port (a call its client gave up on came between) and every
        // `REFRESH` calls, which keeps every word less than `REFRESH` calls old (`REFRESH` < 2^24).
        let full = seq.wrapping_sub(last) != 1 || seq.is_multiple_of(REFRESH);
        let words = rep_len.div_ceil(4).clamp(1, WORDS);
        // The bytes of word `j` the call asked for (a reply longer than that is cut to it: the
        // bytes past its end are not sent).
        let kept = |j: usize| match rep_len.saturating_sub(4 * j) {
            0 => 0,
            b @ 1..=3 => (1u32 << (8 * b)) - 1,
            _ => u32::MAX,
        };
        // Word `j` of `lane`'s reply: a lane of the call gets its reply; another (a whole line
        // rewritten: padding too, as the other layout's words may lie there) a zero word with
        // a status no call of its own had, as a client of this call never reads it.
        let payload_of = |lane: usize, j: usize| {
            let bytes = &replies[lane];
            u32::from_le_bytes([
                bytes[4 * j],
                bytes[4 * j + 1],
                bytes[4 * j + 2],
                bytes[4 * j + 3],
            ])
        };
        let value = |lane: usize, j: usize| match lane < n && fits && mask & 1 << lane != 0 {
            true => reply_word(payload_of(lane, j) & kept(j), statuses[lane], seq),
            false => reply_word(0, crate::status::BAD_REQUEST, seq),
        };
        if full {
            // Every word of the line, once each (a word written twice could be read between).
            for p in 0..WORDS * row {
                let (lane, j) = lane_and_word(row, alone, p);
                rep[ROW + p].store(value(lane, j), Ordering::Release);
            }
        } else if fits && !alone {
            // A group's word `j` of every lane is one run of row `j`: written straight through,
            // the lanes outside the call too, with the word a whole line's rewrite gives them
            // (no call of theirs reads it).
            let other = reply_word(0, crate::status::BAD_REQUEST, seq);
            for j in 0..words {
                let kept = kept(j);
                let line = &rep[at(row, false, j, 0)..at(row, false, j, n)];
                for (lane, w) in line.iter().enumerate() {
                    let v = match mask >> lane & 1 {
                        0 => other,
                        _ => reply_word(payload_of(lane, j) & kept, statuses[lane], seq),
                    };
                    w.store(v, Ordering::Release);
                }
            }
        } else if fits {
            for j in 0..words {
                let kept = kept(j);
                for lane in lanes_in(mask) {
                    let w = reply_word(payload_of(lane, j) & kept, statuses[lane], seq);
                    rep[at(row, alone, j, lane)].store(w, Ordering::Release);
                }
            }
        } else {
            let w = reply_word(0, crate::status::BAD_REQUEST, seq);
            for j in 0..words {
                for lane in lanes_in(mask) {
                    rep[at(row, alone, j, lane)].store(w, Ordering::Release);
                }
            }
        }
        rep[0].store(word(0, seq), Ordering::Release);
        crate::trace_stamp!(9);
        Ok(WordServed {
            port,
            opcode,
            mask,
            declined,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{HeapRegion, Single, Spin, SpinLimit};
    use std::sync::atomic::AtomicBool;

    /// Serves `region`'s word lines with `handle` on a thread while `body` runs.
    fn serving<R>(
        region: &HeapRegion,
        handle: impl Fn(u32, &[u8], &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)> + Sync,
        body: impl FnOnce() -> R,
    ) -> (R, u64) {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let server = s.spawn(|| {
                let server = region.server_with(Single, SpinLimit(1 << 20)).unwrap();
                let mut seen = vec![0u64; server.seen_words()];
                let mut served = 0;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    match server.serve_words(&mut seen, lane_by_lane(&handle), |_| {}) {
                        0 => std::hint::spin_loop(),
                        n => served += n as u64,
                    }
                }
                served
            });
            // Stops the server even if the body panics, so the test fails instead of hanging.
            struct Stop<'a>(&'a AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Release);
                }
            }
            let guard = Stop(&stop);
            let r = body();
            drop(guard);
            (r, server.join().unwrap())
        })
    }

    fn plus_one(opcode: u32, req: &[u8], rep: &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)> {
        match opcode {
            7 => {
                let v = u64::from_le_bytes(req[..8].try_into().unwrap());
                rep[..8].copy_from_slice(&(v + 1).to_le_bytes());
                Some((0, 8))
            }
            9 => None,
            _ => Some((crate::status::UNKNOWN_OPCODE, 0)),
        }
    }

    /// Answers opcode 3 with its 4-byte request repeated over the 16 reply bytes asked for.
    fn repeat(opcode: u32, req: &[u8], rep: &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)> {
        assert_eq!(opcode, 3);
        for k in 0..4 {
            rep[4 * k..4 * k + 4].copy_from_slice(&req[..4]);
        }
        Some((0, 16))
    }

    #[test]
    fn reply_words_are_rewritten_often_enough_that_their_sequence_bits_never_come_round() {
        // Eight lanes a port; the client is one lane (lane 0): the other lanes' reply words are
        // outside every call, written only when the server rewrites the whole line.
        let region = HeapRegion::<crate::PerPort>::with_words(32, 8).unwrap();
        serving(&region, repeat, || {
            let client = region.client_with(Single, Spin).unwrap();
            let seqs = client.word_seqs();
            // The sequence bits of every reply word of the port (index j × n + lane), after a
            // call of `reply_len` bytes made with sequence `seq`.
            let call = |seq: u32, reply_len: usize| {
                let mut port = client.open_for_words(3).unwrap();
                let index = port.index();
                seqs[index as usize].store(seq.wrapping_sub(1), Ordering::Relaxed);
                let mut reply = [0u8; 16];
                let status = port.call_words(&seq.to_le_bytes(), &mut reply[..reply_len]);
                assert_eq!(status, Ok(0));
                for k in 0..reply_len / 4 {
                    assert_eq!(reply[4 * k..4 * k + 4], seq.to_le_bytes());
                }
                let (_, line) = region.region().word_lines(index);
                // The client returns once its own words are in; the server writes the other
                // lanes' words, then the served word: wait for that before looking.
                while seq_of(line[0].load(Ordering::Acquire)) != seq {
                    std::hint::spin_loop();
                }
                // Every word of the line past its meta row, padding included (a lone lane's
                // words lie where a group's padding is).
                let row = region.layout().row_words();
                let bits: Vec<u32> = (0..WORDS * row)
                    .map(|p| reply_seq(line[ROW + p].load(Ordering::Relaxed)))
                    .collect();
                bits
            };
            // Word `p` of the line carries `want(p)`.
            let check = |bits: Vec<u32>, want: &dyn Fn(usize) -> u32| {
                for (p, &b) in bits.iter().enumerate() {
                    assert_eq!(b, want(p) & REPLY_SEQ, "word {p} of the line");
                }
            };
            // Lane 0's first `words` words (a lone lane's lie first, next to each other) carry
            // `new`, every other word `old`.
            let lane0 = |words: usize, new: u32, old: u32| {
                move |p: usize| if p < words { new } else { old }
            };
            // The first call on a fresh port follows the line's zeroed words (sequence 0): it
            // writes its own lane's words only, as calls that follow each other do.
            check(call(1, 16), &lane0(4, 1, 0));
            check(call(2, 4), &|p| match p {
                0 => 2,
                1..=3 => 1,
                _ => 0,
            });
            // A call that does not follow the last one served (its client gave up on the ones
            // between) rewrites every word of every lane.
            check(call(1000, 4), &lane0(0, 0, 1000));
            // And every `REFRESH` calls, so no word is ever `REFRESH` calls older than the call.
            let at = 5 * REFRESH;
            check(call(at - 2, 4), &lane0(0, 0, at - 2));
            check(call(at - 1, 4), &lane0(1, at - 1, at - 2));
            check(call(at, 4), &lane0(0, 0, at));
            check(call(at + 1, 4), &lane0(1, at + 1, at));
            // The sequence wraps at 2^32 like any other step (and 0 is a refresh).
            check(call(u32::MAX - 1, 4), &lane0(0, 0, u32::MAX - 1));
            check(call(u32::MAX, 4), &lane0(1, u32::MAX, u32::MAX - 1));
            check(call(0, 4), &lane0(0, 0, 0));
        });
    }

    #[test]
    fn calls_cross_in_words_and_each_gets_its_own_reply() {
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        let (results, served) = serving(&region, plus_one, || {
            let client = region.client_with(Single, Spin).unwrap();
            assert!(client.has_words());
            (0..1000u64)
                .map(|i| {
                    let mut port = client.open_for_words(7).unwrap();
                    let mut reply = [0u8; 8];
                    let status = port.call_words(&i.to_le_bytes(), &mut reply).unwrap();
                    (status, u64::from_le_bytes(reply))
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(served, 1000);
        for (i, (status, v)) in results.into_iter().enumerate() {
            assert_eq!((status, v), (0, i as u64 + 1));
        }
    }

    #[test]
    fn every_length_up_to_the_line_and_odd_ones_round_trip() {
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        let echo = |_: u32, req: &[u8], rep: &mut [u8; INLINE_BYTES]| {
            rep[..req.len()].copy_from_slice(req);
            Some((0, req.len()))
        };
        serving(&region, echo, || {
            let client = region.client_with(Single, Spin).unwrap();
            for len in 0..=WORD_BYTES {
                let request: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37) | 1).collect();
                let mut reply = vec![0xEEu8; len];
                let mut port = client.open_for_words(1).unwrap();
                assert_eq!(port.call_words(&request, &mut reply), Ok(0));
                assert_eq!(reply, request, "length {len}");
            }
        });
    }

    #[test]
    fn unknown_opcodes_declined_calls_and_hostile_lengths_get_statuses() {
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        serving(&region, plus_one, || {
            let client = region.client_with(Single, Spin).unwrap();
            let mut reply = [0u8; 8];
            let mut port = client.open_for_words(3).unwrap();
            let unknown = crate::status::UNKNOWN_OPCODE;
            assert_eq!(port.call_words(&[0; 8], &mut reply), Ok(unknown));
            drop(port);
            let mut port = client.open_for_words(9).unwrap();
            assert_eq!(port.call_words(&[0; 8], &mut reply), Ok(DECLINED));
            drop(port);
            // A client that writes lengths past the line: refused, nothing read past it. Written
            // by hand, as `send_words` would, with the lengths before the head.
            let mut port = client.open_for_words(7).unwrap();
            let r = region.region();
            let (line, _) = r.word_lines(port.index());
            let seq = client.word_seqs()[port.index() as usize].load(Ordering::Relaxed) + 1;
            client.word_seqs()[port.index() as usize].store(seq, Ordering::Relaxed);
            line[0].store(word(1, seq), Ordering::Relaxed);
            line[1].store(word(0, seq), Ordering::Relaxed);
            line[2].store(word(200 | 250 << 8, seq), Ordering::Relaxed);
            r.heads()[port.index() as usize].store(word(7, seq), Ordering::Release);
            let status = port.recv_words(
                WordCall {
                    seq,
                    reply_words: 2,
                    fenced: true,
                    sent: 0,
                },
                &mut reply,
            );
            assert_eq!(status, Ok(crate::status::BAD_REQUEST));
            drop(port);
            // The port still works.
            let mut port = client.open_for_words(7).unwrap();
            assert_eq!(port.call_words(&5u64.to_le_bytes(), &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), 6);
        });
    }

    #[test]
    fn a_client_that_gives_up_is_not_answered_late_and_the_port_goes_on() {
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        let client = region.client_with(Single, SpinLimit(1000)).unwrap();
        // No server yet: the call stalls.
        let mut port = client.open_for_words(7).unwrap();
        let mut reply = [0u8; 8];
        assert_eq!(
            port.call_words(&1u64.to_le_bytes(), &mut reply),
            Err(Error::Stalled)
        );
        drop(port);
        // The server starts: the stalled call is served (nobody reads its reply); the next call
        // on the port gets its own reply, never the stale one.
        serving(&region, plus_one, || {
            let client = region.client_with(Single, Spin).unwrap();
            for i in 10..20u64 {
                let mut port = client.open_for_words(7).unwrap();
                assert_eq!(port.call_words(&i.to_le_bytes(), &mut reply), Ok(0));
                assert_eq!(u64::from_le_bytes(reply), i + 1);
            }
        });
    }

    /// Lanes that say they are one lane wide but give a lane number past any region's: a broken
    /// `Lanes` implementation (the trait is unsafe to implement).
    struct LyingLanes;

    // SAFETY: not uniform (its lane number is past its size): for the test below only, which
    // checks that a call refuses such a lane before it indexes a line.
    unsafe impl Lanes for LyingLanes {
        fn lane_size(&self) -> u32 {
            1
        }
        fn lane_id(&self) -> u32 {
            40
        }
        fn active_mask(&self) -> u64 {
            1
        }
        fn broadcast(&self, _: u64, value: u32) -> u32 {
            value
        }
        fn ballot(&self, _: u64, predicate: bool) -> u64 {
            predicate as u64
        }
        fn sync(&self, _: u64) {}
        fn is_first_lane(&self, _: u64) -> bool {
            true
        }
    }

    #[test]
    #[should_panic(expected = "lane 40 has no words")]
    fn a_lane_past_the_lines_is_refused_before_any_word_is_touched() {
        // The lines are checked once per call, then indexed without a check: a lane number past
        // them must stop the call there, not write past the line.
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        let client = region.client_with(LyingLanes, Spin).unwrap();
        let mut port = client.open_for_words(7).unwrap();
        let mut reply = [0u8; 8];
        let _ = port.call_words(&1u64.to_le_bytes(), &mut reply);
    }

    #[test]
    fn many_threads_on_many_ports() {
        let region = HeapRegion::<crate::PerPort>::with_words(32, 1).unwrap();
        let (_, served) = serving(&region, plus_one, || {
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let region = &region;
                    s.spawn(move || {
                        let client = region.client_with(Single, Spin).unwrap();
                        for i in 0..500u64 {
                            let v = t << 32 | i;
                            let mut reply = [0u8; 8];
                            let mut port = client.open_for_words(7).unwrap();
                            assert_eq!(port.call_words(&v.to_le_bytes(), &mut reply), Ok(0));
                            assert_eq!(u64::from_le_bytes(reply), v + 1);
                        }
                    });
                }
            })
        });
        assert_eq!(served, 2000);
    }
}

#[cfg(all(test, not(loom)))]
mod arrival {
    use super::*;
    use crate::{HeapRegion, PerPort, Single, Spin};

    /// A handler of one lane's `u64`: the value plus one.
    fn plus_one(_: u32, req: &[u8], rep: &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)> {
        let v = u64::from_le_bytes(req[..8].try_into().unwrap());
        rep[..8].copy_from_slice(&(v + 1).to_le_bytes());
        Some((0, 8))
    }

    /// The reply to the hand-written call `seq` of [`write_without_bell`] on `port`, as a `u64`.
    fn reply_to<L: Lanes, W: Wait>(
        port: &mut crate::port::Port<'_, '_, crate::process::Client, L, PerPort, W>,
        seq: u32,
    ) -> u64 {
        let call = WordCall {
            seq,
            reply_words: 2,
            fenced: true,
            sent: 0,
        };
        let mut reply = [0u8; 8];
        assert_eq!(port.recv_words(call, &mut reply), Ok(0));
        u64::from_le_bytes(reply)
    }

    /// Writes a lone lane's whole call of opcode 7 on `port` (`value` as a `u64`, 8 bytes each
    /// way), its head too, but not its bell.
    fn write_without_bell(region: &HeapRegion<PerPort>, port: u32, seq: u32, value: u32) {
        write_words(region, port, seq, value);
        write_head(region, port, seq);
    }

    /// Writes the meta words (lane 0 alone, 8 bytes each way) and the head of a call of opcode 7
    /// on `port`, but not its request words or its bell.
    fn write_head(region: &HeapRegion<PerPort>, port: u32, seq: u32) {
        let r = region.region();
        let (line, _) = r.word_lines(port);
        line[0].store(word(1, seq), Ordering::Relaxed);
        line[2].store(word(8 | 8 << 8, seq), Ordering::Relaxed);
        r.heads()[port as usize].store(word(7, seq), Ordering::Release);
    }

    /// Writes a lone lane's request words on `port`: `value` as a `u64`.
    fn write_words(region: &HeapRegion<PerPort>, port: u32, seq: u32, value: u32) {
        let r = region.region();
        let (line, _) = r.word_lines(port);
        let row = r.layout().row_words();
        line[at(row, true, 0, 0)].store(word(value, seq), Ordering::Relaxed);
        line[at(row, true, 1, 0)].store(word(0, seq), Ordering::Relaxed);
    }

    #[test]
    fn a_call_under_a_summit_is_served_by_the_next_pass_and_an_idle_pass_reads_no_bell_under_a_quiet_one(
    ) {
        // 4096 ports: 128 groups of 32, four summits of 32 groups.
        let region = HeapRegion::<PerPort>::with_words(4096, 1).unwrap();
        let server = region.server();
        let mut seen = vec![0u64; server.seen_words()];
        let mut pass = || server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {});
        // Idle passes settle every summit (they sweep groups 0, 1 and 2).
        assert_eq!([pass(), pass(), pass()], [0, 0, 0]);
        // Port 3000 (group 93, summit 2): a call as a client makes it, head, bell and summit,
        // is served by the very next pass, which sweeps group 3.
        let client = region.client_with(Single, Spin).unwrap().with_cursor(3000);
        let mut port = client.open_for_words(7).unwrap();
        assert_eq!(port.index(), 3000);
        let call = port.send_words(&5u64.to_le_bytes(), 8);
        assert_eq!(pass(), 1);
        let mut reply = [0u8; 8];
        assert_eq!(port.recv_words(call, &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 6);
        drop(port);
        // A bell rung under a summit that was not: the bells under a quiet summit are not read,
        // so the head waits for its group's sweep (group 40, summit 1).
        let r = region.region();
        let quiet = region.client_with(Single, Spin).unwrap().with_cursor(1290);
        let mut port = quiet.open_for_words(7).unwrap();
        assert_eq!(port.index(), 1290);
        let seq = 1;
        quiet.word_seqs()[1290].store(seq, Ordering::Relaxed);
        write_without_bell(&region, 1290, seq, 9);
        r.bells()[1290 / BELL_PORTS as usize].store(bell(1290, seq), Ordering::Relaxed);
        // The passes that sweep groups 4 to 39 find nothing; the one that sweeps group 40 serves
        // it.
        for _ in 4..40 {
            assert_eq!(pass(), 0);
        }
        assert_eq!(pass(), 1);
        assert_eq!(reply_to(&mut port, seq), 10);
    }

    #[test]
    fn a_rung_bell_is_served_at_once_and_a_head_without_one_when_its_group_is_swept() {
        let region = HeapRegion::<PerPort>::with_words(128, 1).unwrap();
        let server = region.server();
        let mut seen = vec![0u64; server.seen_words()];
        let mut pass = || server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {});
        // An idle pass (it sweeps the first of the four groups of 32 ports).
        assert_eq!(pass(), 0);
        // Port 100 (the fourth group): every word of a call, its head too, but no bell, as when
        // a client's bell is seen before its head.
        let silent = region.client_with(Single, Spin).unwrap().with_cursor(100);
        let mut port = silent.open_for_words(7).unwrap();
        assert_eq!(port.index(), 100);
        let seq = 1;
        silent.word_seqs()[100].store(seq, Ordering::Relaxed);
        write_without_bell(&region, 100, seq, 9);
        // The next passes sweep the second, third and fourth groups: the last finds it.
        assert_eq!([pass(), pass(), pass()], [0, 0, 1]);
        let mut reply = [0u8; 8];
        assert_eq!(reply_to(&mut port, seq), 10);
        // An idle pass (it sweeps the first group).
        assert_eq!(pass(), 0);
        // Port 70 (the third group): a call as a client makes it, bell and all, is served by
        // that pass although its group is not the one swept.
        let rung = region.client_with(Single, Spin).unwrap().with_cursor(70);
        let mut other = rung.open_for_words(7).unwrap();
        assert_eq!(other.index(), 70);
        let call = other.send_words(&41u64.to_le_bytes(), 8);
        assert_eq!(pass(), 1);
        assert_eq!(other.recv_words(call, &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 42);
        // Nothing more: passes over settled groups serve nothing twice (nine: the next pass
        // then sweeps the fourth group, and the one after it the first).
        for _ in 0..9 {
            assert_eq!(pass(), 0);
        }
        // Load: a pass that serves four calls (here one in each group) makes the next read every
        // head, so a head without a bell in a group it does not sweep is served at once.
        let callers: Vec<_> = [1, 33, 65, 97]
            .map(|p| region.client_with(Single, Spin).unwrap().with_cursor(p))
            .into();
        let mut calls: Vec<_> = callers
            .iter()
            .map(|caller| {
                let mut port = caller.open_for_words(7).unwrap();
                let call = port.send_words(&u64::from(port.index()).to_le_bytes(), 8);
                (port, call)
            })
            .collect();
        assert_eq!(pass(), 4);
        for (port, call) in &mut calls {
            assert_eq!(port.recv_words(*call, &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), u64::from(port.index()) + 1);
        }
        let seq = 2;
        silent.word_seqs()[100].store(seq, Ordering::Relaxed);
        write_without_bell(&region, 100, seq, 19);
        assert_eq!(pass(), 1);
        assert_eq!(reply_to(&mut port, seq), 20);
    }

    #[test]
    fn a_group_swept_while_a_call_is_arriving_is_looked_at_again_by_the_next_pass() {
        let region = HeapRegion::<PerPort>::with_words(128, 1).unwrap();
        let server = region.server();
        let mut seen = vec![0u64; server.seen_words()];
        let mut pass = || server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {});
        // An idle pass (it sweeps the first of the four groups).
        assert_eq!(pass(), 0);
        let client = region.client_with(Single, Spin).unwrap().with_cursor(100);
        let mut port = client.open_for_words(7).unwrap();
        let r = region.region();
        let (line, _) = r.word_lines(100);
        let (row, seq) = (r.layout().row_words(), 1);
        client.word_seqs()[100].store(seq, Ordering::Relaxed);
        // Port 100's bell is seen before its head: the pass finds the group's heads as they
        // were and settles it on the new bell.
        r.bells()[3].store(bell(100, seq), Ordering::Relaxed);
        assert_eq!(pass(), 0);
        // The head and meta words come, not yet the lane's words. The next pass sweeps the third
        // group; the one after sweeps the fourth and finds the call still arriving.
        line[0].store(word(1, seq), Ordering::Relaxed);
        line[2].store(word(8 | 8 << 8, seq), Ordering::Relaxed);
        r.heads()[100].store(word(7, seq), Ordering::Release);
        assert_eq!([pass(), pass()], [0, 0]);
        // Its words come: the next pass (it sweeps the first group) serves it, the bell being
        // what it was.
        line[at(row, true, 0, 0)].store(word(4, seq), Ordering::Relaxed);
        line[at(row, true, 1, 0)].store(word(0, seq), Ordering::Relaxed);
        assert_eq!(pass(), 1);
        assert_eq!(reply_to(&mut port, seq), 5);
    }

    #[test]
    fn a_draining_pass_reads_every_head_whatever_the_bells_say() {
        let region = HeapRegion::<PerPort>::with_words(128, 1).unwrap();
        let server = region.server();
        let mut scan = WordScan::new(&server);
        assert_eq!(scan.pass(&server, lane_by_lane(plus_one), |_| {}), 0);
        // A call on port 100 whose bell is not there: the next pass would not look at its group
        // (it sweeps the second), but told to read every head, it serves the call.
        let client = region.client_with(Single, Spin).unwrap().with_cursor(100);
        let mut port = client.open_for_words(7).unwrap();
        client.word_seqs()[100].store(1, Ordering::Relaxed);
        write_without_bell(&region, 100, 1, 1);
        scan.read_every_head();
        assert_eq!(scan.pass(&server, lane_by_lane(plus_one), |_| {}), 1);
        let call = WordCall {
            seq: 1,
            reply_words: 2,
            fenced: true,
            sent: 0,
        };
        let mut reply = [0u8; 8];
        assert_eq!(port.recv_words(call, &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 2);
    }

    #[test]
    fn a_call_its_summit_names_before_its_words_and_bell_are_seen_is_served_by_the_next_pass() {
        // 4096 ports: 128 groups; the call's group (5) is not one the next passes sweep.
        let region = HeapRegion::<PerPort>::with_words(4096, 1).unwrap();
        let server = region.server();
        let mut seen = vec![0u64; server.seen_words()];
        let r = region.region();
        let port = 5 * BELL_PORTS + 3;
        let seq = 1;
        // Its head, meta words and summit are there; its request words and its bell not yet.
        write_head(&region, port, seq);
        r.summits()[0].store(bell(port, seq), Ordering::Relaxed);
        assert_eq!(
            server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {}),
            0
        );
        // The words arrive (the bell still not): the next pass serves the call, not the sweep
        // of its group 123 passes later.
        write_words(&region, port, seq, 9);
        let row = r.layout().row_words();
        assert_eq!(
            server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {}),
            1
        );
        let (_, rep) = r.word_lines(port);
        assert_eq!(
            reply_seq(rep[at(row, true, 0, 0)].load(Ordering::Relaxed)),
            seq
        );
        assert_eq!(rep[at(row, true, 0, 0)].load(Ordering::Relaxed) as u32, 10);
    }

    #[test]
    fn a_head_before_its_words_waits_for_the_next_pass_and_blocks_nothing() {
        let region = HeapRegion::<PerPort>::with_words(32, 1).unwrap();
        let client = region.client_with(Single, Spin).unwrap();
        let server = region.server();
        let mut seen = vec![0u64; server.seen_words()];
        // A call whose head and meta words are there, its request words not yet.
        let port = client.open_for_words(7).unwrap();
        let seq = 1;
        client.word_seqs()[port.index() as usize].store(seq, Ordering::Relaxed);
        write_head(&region, port.index(), seq);
        // A second call on another port, complete.
        let mut other = client.open_for_words(7).unwrap();
        let call = other.send_words(&41u64.to_le_bytes(), 8);
        // One pass: the complete call is served, the other left for later.
        assert_eq!(
            server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {}),
            1
        );
        let mut reply = [0u8; 8];
        assert_eq!(other.recv_words(call, &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 42);
        assert_eq!(
            server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {}),
            0
        );
        // Its words arrive: the next pass serves it.
        write_words(&region, port.index(), seq, 9);
        assert_eq!(
            server.serve_words(&mut seen, lane_by_lane(plus_one), |_| {}),
            1
        );
        let mut port = port;
        assert_eq!(
            port.recv_words(
                WordCall {
                    seq,
                    reply_words: 2,
                    fenced: true,
                    sent: 0,
                },
                &mut reply,
            ),
            Ok(0)
        );
        assert_eq!(u64::from_le_bytes(reply), 10);
    }
}

#[cfg(all(test, not(loom)))]
mod first_poll {
    use super::*;
    use crate::{HeapRegion, PerPort, Single, Stalled};
    use core::cell::{Cell, RefCell};

    /// A wait policy whose clock moves `step` ns each time it is read, and whose every pause
    /// calls `pause` (here: a pass of the server, so a call made on one thread is answered
    /// after a poll that found nothing).
    struct Stepping<'f> {
        now: Cell<u32>,
        step: u32,
        pause: &'f dyn Fn(),
    }

    impl Wait for Stepping<'_> {
        fn pause(&self, _: u32) -> Result<(), Stalled> {
            (self.pause)();
            Ok(())
        }
        fn clock_ns(&self) -> Option<u32> {
            self.now.set(self.now.get().wrapping_add(self.step));
            Some(self.now.get())
        }
    }

    fn plus_one(_: u32, req: &[u8], rep: &mut [u8; INLINE_BYTES]) -> Option<(u32, usize)> {
        let v = u64::from_le_bytes(req[..8].try_into().unwrap());
        rep[..8].copy_from_slice(&(v + 1).to_le_bytes());
        Some((0, 8))
    }

    #[test]
    fn a_first_poll_too_early_makes_the_next_wait_longer_one_that_finds_the_reply_shorter() {
        let region = HeapRegion::<PerPort>::with_words(32, 1).unwrap();
        let server = region.server().exclusive().ok().unwrap();
        let seen = RefCell::new(vec![0u64; server.seen_words()]);
        let serve = || {
            server.serve_words(&mut seen.borrow_mut(), lane_by_lane(plus_one), |_| {});
        };
        // The pauses serve only from the `late`-th of a call on (0: the first).
        let (pauses, late) = (Cell::new(0u32), Cell::new(0u32));
        let pause = || {
            pauses.set(pauses.get() + 1);
            if pauses.get() > late.get() {
                serve();
            }
        };
        let wait = Stepping {
            now: Cell::new(0),
            step: 10,
            pause: &pause,
        };
        let client = region.client_with(Single, wait).unwrap();
        let delay = || client.first_poll().get();
        let call = |value: u64, served_first: bool| {
            pauses.set(0);
            let mut port = client.open_for_words(1).unwrap();
            let sent = port.send_words(&value.to_le_bytes(), 8);
            if served_first {
                serve();
            }
            let mut reply = [0u8; 8];
            assert_eq!(port.recv_words(sent, &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), value + 1);
        };
        // No wait yet: the first poll finds nothing, the next finds the reply: wait longer.
        assert_eq!(delay(), 0);
        call(1, false);
        assert_eq!(delay(), FIRST_POLL_UP);
        // Served before the first poll (after the wait, on the clock): a little shorter.
        call(2, true);
        assert_eq!(delay(), FIRST_POLL_UP - FIRST_POLL_UP / 128 - 4);
        // A reply long after the first poll (a slow server): nothing learned.
        let before = delay();
        late.set(FULL_POLLS + 2);
        call(3, false);
        assert_eq!(delay(), before);
        // Never past the longest wait.
        late.set(0);
        for v in 4..100 {
            call(v, false);
        }
        assert_eq!(delay(), FIRST_POLL_MAX);
        // And back down, a call at a time, once the replies come before the first poll.
        for v in 100..1000 {
            call(v, true);
        }
        assert!(delay() < FIRST_POLL_MAX / 4, "{}", delay());
    }

    #[test]
    fn a_clock_that_does_not_move_does_not_hold_a_call() {
        let region = HeapRegion::<PerPort>::with_words(32, 1).unwrap();
        let server = region.server().exclusive().ok().unwrap();
        let seen = RefCell::new(vec![0u64; server.seen_words()]);
        let pause = || {
            server.serve_words(&mut seen.borrow_mut(), lane_by_lane(plus_one), |_| {});
        };
        let wait = Stepping {
            now: Cell::new(7),
            step: 0,
            pause: &pause,
        };
        let client = region.client_with(Single, wait).unwrap();
        client.first_poll().set(FIRST_POLL_MAX);
        let mut port = client.open_for_words(1).unwrap();
        let mut reply = [0u8; 8];
        assert_eq!(port.call_words(&41u64.to_le_bytes(), &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 42);
    }
}
