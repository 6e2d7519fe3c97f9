//! Ports: an open, locked port and the operations that move its packet between the sides.
//!
//! A port holds one ownership token, the packet. `send` waits until it holds the token, fills the
//! slots and hands the token over; `recv` waits for the token and reads the slots. Two `recv`s in a
//! row first hand the token back, empty, so the sender may send again: that acknowledgement is what
//! lets a stream of packets flow (`send_n`/`recv_n`). Closing (or dropping) a port unlocks it; a
//! server that closes a port whose packet it still holds hands it back to the client first, so the
//! port comes to rest owned by the client.

use crate::lanes::Lanes;
use crate::layout::{HeaderWord, Slot};
use crate::mailbox::Mailbox;
use crate::process::{Client, Process, Region, Side, NONE};
use crate::sync::{fence, Ordering, SharedCell};
use crate::wait::Wait;
use crate::Error;

/// An open port. Closing is done by [`Port::close`] or by dropping it; either unlocks the port, so
/// a port cannot be leaked by forgetting to close it, and cannot be used after closing.
///
/// Every active lane of the group that opened the port holds a `Port` and must call each operation
/// together with the others (on a GPU: convergently).
#[must_use = "dropping a port closes it"]
pub struct Port<'p, 'a, S: Side, L: Lanes, M: Mailbox, W: Wait> {
    process: &'p Process<'a, S, L, M, W>,
    index: u32,
    /// This side's outbox bit for the port.
    out: u32,
    /// The lanes executing this port's operations (this side's active mask at open).
    exec_mask: u64,
    /// The lanes whose slots carry data (the client's active mask, from the header).
    packet_mask: u64,
    /// The opcode from the header.
    opcode: u32,
    /// Whether this side holds the packet.
    owns: bool,
    /// Whether this side already read the packet it holds (so the next `recv` must hand it back
    /// before waiting for a new one).
    consumed: bool,
    /// A status to write into the header with the next send.
    next_status: Option<u32>,
}

impl<'p, 'a, S: Side, L: Lanes, M: Mailbox, W: Wait> Port<'p, 'a, S, L, M, W> {
    pub(crate) fn new(
        process: &'p Process<'a, S, L, M, W>,
        index: u32,
        out: u32,
        exec_mask: u64,
    ) -> Self {
        Port {
            process,
            index,
            out,
            exec_mask,
            packet_mask: exec_mask,
            opcode: 0,
            owns: true,
            consumed: false,
            next_status: None,
        }
    }

    /// The process that opened the port.
    #[inline(always)]
    pub(crate) fn process(&self) -> &'p Process<'a, S, L, M, W> {
        self.process
    }

    /// Sets the opcode a call on the port carries (a word call's: its header is not written).
    pub(crate) fn set_opcode(&mut self, opcode: u32) {
        self.opcode = opcode;
    }

    /// The port's index in the region.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The opcode the client opened the port with.
    pub fn opcode(&self) -> u32 {
        self.opcode
    }

    /// Says, before the first `send`, that this call's fixed arguments are `len` bytes (a
    /// client; the generated calls do it), so that the server refuses a request whose length is
    /// not its call's: the opcode word's upper half carries `len + 1`, 0 when not said (the open
    /// writes the whole word, so no earlier call's length is ever left there).
    #[inline(always)]
    pub fn set_request_len(&mut self, len: usize) {
        let said = (len as u64).min(u32::MAX as u64 - 1) + 1;
        self.set_header(HeaderWord::Opcode, self.opcode as u64 | said << 32);
    }

    /// The length of the fixed arguments the client said its call has
    /// ([`set_request_len`](Self::set_request_len)), `None` if it said none. Meaningful on a
    /// server after the open, while it holds the packet.
    pub fn request_len(&self) -> Option<u32> {
        (self.read_header(HeaderWord::Opcode) >> 32)
            .checked_sub(1)
            .map(|n| n as u32)
    }

    /// The lanes whose slots carry data (bit `i`: slot `i`).
    pub fn lane_mask(&self) -> u64 {
        self.packet_mask
    }

    /// The lanes executing this port's operations on this side.
    pub fn exec_mask(&self) -> u64 {
        self.exec_mask
    }

    /// The lanes of this side.
    pub fn lanes(&self) -> &L {
        self.process.lanes()
    }

    /// The region the port is in.
    pub(crate) fn region(&self) -> &Region<'a, M> {
        self.process.region()
    }

    /// The waiting policy of the process that opened the port. A transport may keep there what
    /// it knows of the port's other side (the shared-memory server's policy knows the port's
    /// owner word, from which it tells a handler who is calling).
    pub fn wait_policy(&self) -> &W {
        self.process.wait_policy()
    }

    /// Whether this side holds the packet now.
    pub fn owns_packet(&self) -> bool {
        self.owns
    }

    /// Reads header word `word`. Meaningful only after a `recv` (the other side's value) or before
    /// a `send` (this side's), while this side holds the packet.
    pub fn header(&self, word: HeaderWord) -> u64 {
        debug_assert!(self.owns);
        self.read_header(word)
    }

    /// Header word `word`, read whether or not `owns` says this side holds the packet (it must:
    /// `await_announced` reads it once it has seen the other side's flip, before `take`).
    fn read_header(&self, word: HeaderWord) -> u64 {
        // SAFETY: this side holds the packet (ownership protocol), so nobody writes the header
        // concurrently; the pointer is to a live, initialised `Slot` in the region.
        self.process
            .region()
            .header(self.index)
            .with(|h| unsafe { (*h).words[word as usize] })
    }

    /// Writes header word `word` (from the first lane), to travel with the next `send`. Only the
    /// status word is meant for users; the protocol writes the others.
    pub fn set_header(&mut self, word: HeaderWord, value: u64) {
        debug_assert!(self.owns);
        if self.process.lanes().is_first_lane(self.exec_mask) {
            // SAFETY: as in `header`; this side holds the packet, and only the first lane writes.
            self.process
                .region()
                .header(self.index)
                .with_mut(|h| unsafe { store_header_word(&mut (*h).words[word as usize], value) });
        }
    }

    /// The status the other side sent with the last packet this side received.
    pub fn status(&self) -> u32 {
        self.header(HeaderWord::Status) as u32
    }

    /// Writes the status set for this send into the header. On a host, where reading the header
    /// costs nothing, only a status that differs from the word's value is stored: a server that
    /// replies OK to a request whose header already says OK leaves the header's line clean, so a
    /// GPU reading the reply's status across PCIe finds it in memory rather than in a CPU's cache.
    #[inline(always)]
    fn put_status(&mut self) {
        if let Some(status) = self.next_status.take() {
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            if self.header(HeaderWord::Status) == status as u64 {
                return;
            }
            self.set_header(HeaderWord::Status, status as u64);
        }
    }

    /// Sets the status sent with the next packet (written into the header by that `send`).
    pub fn set_status(&mut self, status: u32) {
        self.next_status = Some(status);
    }

    pub(crate) fn write_open_header(&mut self, opcode: u32) {
        self.opcode = opcode;
        let mask = self.exec_mask;
        if self.process.lanes().is_first_lane(mask) {
            // SAFETY: the client holds the packet (it owns it at open) and only the first lane
            // writes the header.
            self.process
                .region()
                .header(self.index)
                .with_mut(|h| unsafe {
                    let w = &mut (*h).words;
                    store_header_word(&mut w[HeaderWord::Mask as usize], mask);
                    store_header_word(&mut w[HeaderWord::Opcode as usize], opcode as u64);
                    store_header_word(&mut w[HeaderWord::Status as usize], 0);
                    store_header_word(&mut w[HeaderWord::Stream as usize], 0);
                });
        }
    }

    pub(crate) fn read_open_header(&mut self) {
        let lanes = self.process.region().layout().lanes();
        let all = if lanes == 64 {
            u64::MAX
        } else {
            (1u64 << lanes) - 1
        };
        // A corrupt mask cannot make us touch slots that do not exist.
        self.packet_mask = self.header(HeaderWord::Mask) & all;
        self.opcode = self.header(HeaderWord::Opcode) as u32;
    }

    /// Waits until this side holds the packet.
    fn wait_owned(&mut self) -> Result<(), Error> {
        let lanes = self.process.lanes();
        let mut ok = 1;
        if lanes.is_first_lane(self.exec_mask) {
            let mut polls = 0u32;
            while !self.process.owns(self.index, self.out) {
                if self.process.wait_policy().pause(polls).is_err() {
                    ok = 0;
                    break;
                }
                polls = polls.saturating_add(1);
            }
        }
        if lanes.broadcast(self.exec_mask, ok) == 0 {
            return Err(Error::Stalled);
        }
        // SYNC (take ownership): pairs with the other side's release fence before its flip, which
        // the first lane observed; every lane fences before touching its slot.
        fence(Ordering::Acquire);
        if lanes.is_first_lane(self.exec_mask) {
            self.process.note_owned(self.index, self.out);
        }
        self.owns = true;
        self.consumed = false;
        Ok(())
    }

    /// Hands the packet to the other side.
    fn give(&mut self) {
        // SYNC (give ownership): every lane's slot accesses happen before the flip the other side
        // will observe; the lane sync makes all lanes' accesses precede the first lane's flip.
        fence(Ordering::Release);
        let lanes = self.process.lanes();
        lanes.sync(self.exec_mask);
        self.out ^= 1;
        if lanes.is_first_lane(self.exec_mask) {
            self.process.flip_outbox(self.index, self.out);
        }
        self.owns = false;
        self.consumed = false;
    }

    /// Calls `f` on each slot this lane handles: on a GPU its own, on a host every slot of the
    /// packet's mask.
    #[inline(always)]
    fn each_slot(&self, mut f: impl FnMut(&SharedCell<Slot>, u32)) {
        let lanes = self.process.lanes();
        let step = lanes.lane_size();
        let region = self.process.region();
        let mut lane = lanes.lane_id();
        while lane < region.layout().lanes() {
            if self.packet_mask & (1 << lane) != 0 {
                f(region.slot(self.index, lane), lane);
            }
            lane += step;
        }
    }

    /// Waits for the packet, then lets `fill` write each of this lane's slots (given the lane
    /// index), then hands the packet over.
    pub fn send(&mut self, mut fill: impl FnMut(&mut Slot, u32)) -> Result<(), Error> {
        self.ensure_owned()?;
        self.put_status();
        // SAFETY: this side holds the packet and each lane touches only its own slots.
        self.each_slot(|cell, lane| cell.with_mut(|s| fill(unsafe { &mut *s }, lane)));
        self.give();
        Ok(())
    }

    /// Waits for a packet from the other side, then lets `read` see each of this lane's slots.
    pub fn recv(&mut self, mut read: impl FnMut(&Slot, u32)) -> Result<(), Error> {
        self.take()?;
        // SAFETY: this side holds the packet and each lane touches only its own slots.
        self.each_slot(|cell, lane| cell.with(|s| read(unsafe { &*s }, lane)));
        self.consumed = true;
        Ok(())
    }

    /// Sends with `fill`, then receives with `read`: one call's round trip.
    pub fn send_and_recv(
        &mut self,
        fill: impl FnMut(&mut Slot, u32),
        read: impl FnMut(&Slot, u32),
    ) -> Result<(), Error> {
        self.send(fill)?;
        self.recv(read)
    }

    /// Receives a packet, lets `work` turn each slot into its reply in place, and sends it back
    /// (with the status [`set_status`](Self::set_status) set, as `send` does).
    pub fn recv_and_send(&mut self, mut work: impl FnMut(&mut Slot, u32)) -> Result<(), Error> {
        self.take()?;
        self.put_status();
        // SAFETY: this side holds the packet and each lane touches only its own slots.
        self.each_slot(|cell, lane| cell.with_mut(|s| work(unsafe { &mut *s }, lane)));
        self.give();
        Ok(())
    }

    /// [`send`](Self::send) through the hand-over steps emitted once on a GPU (see
    /// [`give_shared`](Self::give_shared)): for the streams and the runtime's shared calls.
    #[inline(always)]
    pub(crate) fn send_shared(
        &mut self,
        mut fill: impl FnMut(&mut Slot, u32),
    ) -> Result<(), Error> {
        self.ensure_owned_shared()?;
        self.put_status();
        // SAFETY: this side holds the packet and each lane touches only its own slots.
        self.each_slot(|cell, lane| cell.with_mut(|s| fill(unsafe { &mut *s }, lane)));
        self.give_shared();
        Ok(())
    }

    /// [`recv`](Self::recv) through the hand-over steps emitted once on a GPU, as
    /// [`send_shared`](Self::send_shared).
    #[inline(always)]
    pub(crate) fn recv_shared(&mut self, mut read: impl FnMut(&Slot, u32)) -> Result<(), Error> {
        self.take_shared()?;
        // SAFETY: this side holds the packet and each lane touches only its own slots.
        self.each_slot(|cell, lane| cell.with(|s| read(unsafe { &*s }, lane)));
        self.consumed = true;
        Ok(())
    }

    /// [`give`](Self::give) as one function on a GPU. The paths not compiled where a call is
    /// written (the streams, the runtime's shared calls) hand packets over through these, so a
    /// program carries one copy of each step (hundreds of instructions with the port's held
    /// word) instead of one per place; a call compiled in place keeps its own.
    #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
    pub(crate) fn give_shared(&mut self) {
        self.give();
    }

    /// [`take`](Self::take) through [`give_shared`](Self::give_shared) and
    /// [`ensure_owned_shared`](Self::ensure_owned_shared).
    #[inline(always)]
    fn take_shared(&mut self) -> Result<(), Error> {
        if self.owns && self.consumed {
            self.give_shared();
        }
        self.ensure_owned_shared()
    }

    /// [`ensure_owned`](Self::ensure_owned) as one function on a GPU (see
    /// [`give_shared`](Self::give_shared)).
    #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
    pub(crate) fn ensure_owned_shared(&mut self) -> Result<(), Error> {
        self.ensure_owned()
    }

    /// Makes sure this side holds an unread packet: hands back one already read, then waits.
    fn take(&mut self) -> Result<(), Error> {
        if self.owns && self.consumed {
            self.give();
        }
        if !self.owns {
            self.wait_owned()?;
        }
        Ok(())
    }

    pub(crate) fn mark_consumed(&mut self) {
        self.consumed = true;
    }

    /// Waits until this side holds the packet, read or not (a sender does not care).
    pub(crate) fn ensure_owned(&mut self) -> Result<(), Error> {
        if !self.owns {
            self.wait_owned()?;
        }
        Ok(())
    }

    /// Closes the port: a server hands back a packet it still holds, then the port is unlocked.
    pub fn close(self) {
        // Drop does the work.
    }
}

/// Writes a header word of a packet this side owns.
///
/// On a CPU, a word that already holds `value` is not written: a port reused for the same opcode
/// then leaves its header line shared in both sides' caches instead of pulling it over to the
/// writer and back on every call, which costs more than anything else a call adds to the handoff
/// (`BENCHMARKS-history.md`, ferry-rpc's first round). On a GPU the header is in host memory,
/// where a read costs a trip across the bus and a write is posted, so the word is always written.
#[inline(always)]
fn store_header_word(word: &mut u64, value: u64) {
    #[cfg(not(target_arch = "nvptx64"))]
    if *word == value {
        return;
    }
    *word = value;
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> Drop for Port<'_, '_, S, L, M, W> {
    fn drop(&mut self) {
        if S::RETURN_ON_CLOSE && self.owns {
            self.give();
        }
        let lanes = self.process.lanes();
        // SYNC (close): every lane's accesses to the port happen before the first lane's unlock
        // (and before the next call's, on a port kept).
        lanes.sync(self.exec_mask);
        if lanes.is_first_lane(self.exec_mask) {
            self.process.release(
                self.index,
                self.owns.then_some(self.out),
                // Lane 0 is in the group (and so its first lane).
                self.exec_mask & 1 != 0,
            );
        }
    }
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> core::fmt::Debug for Port<'_, '_, S, L, M, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Port")
            .field("index", &self.index)
            .field("opcode", &self.opcode)
            .field("lane_mask", &self.packet_mask)
            .field("owns", &self.owns)
            .finish()
    }
}

impl<L: Lanes, M: Mailbox, W: Wait> Port<'_, '_, crate::Client, L, M, W> {
    /// Closes a port on which only word calls were made since it was opened (a generated word
    /// call's): as dropping it, but, where the last call was `answered`, unlocked as
    /// [`Process::release_words`] does, with no fence (a call given up on may still have stores on
    /// their way: its port is released as any other, fenced).
    #[inline(always)]
    pub(crate) fn close_words(self, answered: bool) {
        let process = self.process;
        let lanes = process.lanes();
        let mask = self.exec_mask;
        // SYNC (close): every lane's accesses to the port happen before the first lane's unlock
        // (and before the next call's, on a port kept).
        lanes.sync(mask);
        if lanes.is_first_lane(mask) {
            // Lane 0 is in the group (and so its first lane).
            let lead = mask & 1 != 0;
            match answered {
                true => process.release_words(self.index, self.out, lead),
                false => process.release(self.index, self.owns.then_some(self.out), lead),
            }
        }
        // (Its lock is released above: the drop would release it again.)
        core::mem::forget(self);
    }

    /// Arms this lane's announce word on this port for the next call
    /// ([`Process::with_announce_words`](crate::Process::with_announce_words)): returns the word's
    /// address as this side's memory has it and the value the service is to write there once
    /// the call's work is done, both to be sent in the request; `None` if the handle has no
    /// announce words. Each arming asks for the next value of a count this lane keeps beside the
    /// word (never 0, and never a value an earlier call on this port and lane asked for until the
    /// count wraps at 2³²), so a write left over from an earlier call, one given up on included,
    /// is never taken for this one's. Call it after `open` and before `send`, then
    /// [`Self::await_announced`] before `recv`.
    #[inline(always)]
    pub fn arm_announce(&self) -> Option<(u64, u32)> {
        let lane = self.process.lanes().lane_id();
        let (word, armed) = self.process.announce_word(self.index, lane)?;
        // Only this lane of this port's holder touches the count; the service writes only the
        // word, and only when told to by a request the holder sends after this.
        let value = armed.load(Ordering::Relaxed).wrapping_add(1).max(1);
        armed.store(value, Ordering::Relaxed);
        Some((word as *const crate::sync::AtomicU32 as usize as u64, value))
    }

    /// Waits until every active lane's announce word holds the value [`Self::arm_announce`]
    /// gave it (`value`: this lane's), polling this side's own memory with the wait policy;
    /// [`Error::Stalled`] if the policy gives up. Returns at once if the handle has no announce
    /// words.
    ///
    /// A server that does not serve the call (an unknown opcode, a server error) replies with
    /// that status and announces nothing: so now and then (after 64 polls, then every 1024) the
    /// first lane looks at the reply, and a reply whose status is not OK ends the wait (the
    /// caller's `recv` then reads it). A served call's reply may come before its announce (a
    /// service that replies once its work is started): the wait goes on.
    ///
    /// When it returns, every active lane's announce has come, and (a warp's lanes synchronised)
    /// what the service's work wrote before any of them is visible to every lane.
    pub fn await_announced(&self, value: u32) -> Result<(), Error> {
        let lanes = self.process.lanes();
        let Some((word, _)) = self.process.announce_word(self.index, lanes.lane_id()) else {
            return Ok(());
        };
        let mask = self.exec_mask;
        let mut polls = 0u32;
        let mut look = 64u32;
        loop {
            let pending = word.load(Ordering::Relaxed) != value;
            if lanes.ballot(mask, pending) == 0 {
                break;
            }
            if polls == look {
                look = polls.saturating_add(1024);
                let mut refused = 0;
                if lanes.is_first_lane(mask) && self.process.owns(self.index, self.out) {
                    // SYNC (take ownership): as in `wait_owned`, before the header is read (the
                    // reply is in: the other side flipped the packet back to this side).
                    fence(Ordering::Acquire);
                    let status = self.read_header(HeaderWord::Status);
                    refused = (status as u32 != crate::status::OK) as u32;
                }
                if lanes.broadcast(mask, refused) != 0 {
                    return Ok(());
                }
            }
            let mut ok = 1;
            if lanes.is_first_lane(mask) && self.process.wait_policy().pause(polls).is_err() {
                ok = 0;
            }
            if lanes.broadcast(mask, ok) == 0 {
                return Err(Error::Stalled);
            }
            polls = polls.saturating_add(1);
        }
        // SYNC (announced): pairs with the service's release before its write of the value (a
        // copy engine's write after the copy's bytes); what the call's work wrote before this
        // lane's announce is visible to this lane.
        fence(Ordering::Acquire);
        // SYNC (announced, the warp): every lane saw its own announce before the barrier; after
        // it, every lane sees what each of them saw.
        lanes.sync(mask);
        Ok(())
    }
}

// ---- opening a port: the handle finds one (`process`), the port is made here ----

impl<'a, L: Lanes, M: Mailbox, W: Wait> Process<'a, Client, L, M, W> {
    /// Opens a port for a call on its word line ([`Port::call_words`]): as
    /// [`open`](Self::open), but the packet's header is left as it is (the call does not travel
    /// in the packet), so make only word calls on the port it returns (a `send` would carry
    /// the header of an earlier call). Generated clients do this by themselves for calls that
    /// fit a word line.
    // (Inlined whole: a handle whose address escapes to a call lives in local memory on a GPU,
    // and its every field access is then a memory access.)
    #[inline(always)]
    pub fn open_for_words(&self, opcode: u32) -> Result<Port<'_, 'a, Client, L, M, W>, Error> {
        let (found, mask) = self.find_open()?;
        Ok(self.port_for_words(found, opcode, mask))
    }

    /// The port `found` (from [`find_for_words`](Self::find_for_words)) opened for word calls
    /// by the lanes of `mask`.
    #[inline(always)]
    pub(crate) fn port_for_words(
        &self,
        found: u32,
        opcode: u32,
        mask: u64,
    ) -> Port<'_, 'a, Client, L, M, W> {
        let mut port = Port::new(self, found >> 1, found & 1, mask);
        port.set_opcode(opcode);
        // SYNC (open): the first lane's take of the port happens before every lane's accesses
        // to it.
        self.lanes().sync(mask);
        port
    }
}

impl<'a, S: Side, L: Lanes, M: Mailbox, W: Wait> Process<'a, S, L, M, W> {
    /// Opens a port this side owns, if one is free now.
    ///
    /// A client passes the opcode, which goes into the packet's header; a server passes `()` and
    /// reads the opcode from the port. Every active lane must call this together with the same
    /// argument (on a GPU: convergently).
    pub fn try_open(&self, arg: S::Open) -> Option<Port<'_, 'a, S, L, M, W>> {
        self.try_open_within(arg, u32::MAX)
    }

    /// As [`try_open`](Self::try_open), looking at no more than `lock_words` lock words (32
    /// ports each) of this handle's range, from where the last search started: the next call
    /// goes on after them. A server thread with other work between its searches (a pass over
    /// the word lines) so bounds the time of each on a region of thousands of ports, and still
    /// looks at every port in turn.
    pub fn try_open_within(
        &self,
        arg: S::Open,
        lock_words: u32,
    ) -> Option<Port<'_, 'a, S, L, M, W>> {
        let (found, mask) = self.find_within(lock_words);
        if found == NONE {
            return None;
        }
        let mut port = Port::new(self, found >> 1, found & 1, mask);
        match S::open_opcode(arg) {
            // The client writes the call's header.
            Some(opcode) => port.write_open_header(opcode),
            // The server reads it.
            None => port.read_open_header(),
        }
        // SYNC (open): the first lane's take of the port happens before every lane's accesses
        // to it.
        self.lanes().sync(mask);
        Some(port)
    }

    /// Opens a port, waiting under the wait policy until one is free (a client: a port not in use;
    /// a server: a port with a request).
    pub fn open(&self, arg: S::Open) -> Result<Port<'_, 'a, S, L, M, W>, Error> {
        let mut polls = 0u32;
        loop {
            if let Some(port) = self.try_open(arg) {
                return Ok(port);
            }
            self.wait_policy().pause(polls)?;
            polls = polls.saturating_add(1);
        }
    }
}
