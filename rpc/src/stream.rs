//! Streams: any number of bytes per lane, across as many packets as the longest lane needs.
//!
//! Without bulk areas (the region's layout has none):
//!
//! ```text
//! packet 1, per lane:  [ len: u64 | bytes 0..56 ]
//! packet k > 1:        [ bytes 56 + 64 (k-2) .. 56 + 64 (k-1) ]
//! ```
//!
//! With a bulk share of `B` bytes per lane (`Layout::with_bulk`), a lane whose stream is longer
//! than 56 bytes moves it through its share of the port's bulk area, `B` bytes per packet; its
//! slot carries only the length:
//!
//! ```text
//! packet 1, per lane:  slot [ len: u64 | - ]      area share [ bytes 0..B ]
//! packet k > 1:        slot unused                area share [ bytes B (k-1) .. B k ]
//! ```
//!
//! (A stream of up to 56 bytes stays in the slot either way.) Both sides compute how many packets
//! a length takes from the length and `B`, which both read from the layout, so nothing about the
//! area's use travels: a sender cannot make a receiver read past its share, whatever it writes.
//!
//! Every packet after the first waits for the receiver's acknowledgement (its next `recv` hands
//! the packet back). The receiver bounds every length before accepting anything: a lane that
//! announces more than the receiver's limit (or more than its sink takes) gets the stream refused.
//! If more packets would follow, the receiver writes `STREAM_REJECTED` into the header's stream
//! word and hands the packet back; the sender reads that word each time it gets the packet back,
//! stops, and reports [`Error::Rejected`]. Either way both sides end the
//! stream in step, with the port usable for a reply, and nothing is allocated for a hostile length.
//!
//! A stream that fits in one packet of the bulk area may be read where it lies instead of copied:
//! the sink says so ([`StreamSink::view`]), and [`Port::bulk_view`] then lends the bytes for as
//! long as this side holds the packet (a borrow of the port, so it cannot outlive the hold).

use crate::lanes::Lanes;
use crate::layout::{HeaderWord, Slot, MAX_LANES, SLOT_BYTES};
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::Side;
use crate::sync::SharedCell;
use crate::wait::Wait;
use crate::Error;

/// Bytes of data in a stream's first packet per lane (after the 8-byte length).
pub const FIRST_CHUNK: usize = SLOT_BYTES - 8;

/// Value of the header's stream word when the receiver refused the stream.
pub const STREAM_REJECTED: u64 = 1;

/// Packets a stream of `len` bytes takes, with a bulk share of `share` bytes per lane (0: none).
pub const fn packets_for(len: u64, share: u64) -> u64 {
    if share == 0 || len <= FIRST_CHUNK as u64 {
        1 + len
            .saturating_sub(FIRST_CHUNK as u64)
            .div_ceil(SLOT_BYTES as u64)
    } else {
        len.div_ceil(share)
    }
}

/// Where packet `k` (from 0) of a stream puts its bytes: the offset in the stream of its first
/// byte and the most it carries, for a lane whose stream is `len` bytes long.
#[inline(always)]
const fn chunk_of(k: u64, len: u64, share: u64) -> (u64, u64) {
    if share == 0 || len <= FIRST_CHUNK as u64 {
        if k == 0 {
            (0, FIRST_CHUNK as u64)
        } else {
            (
                FIRST_CHUNK as u64 + (k - 1) * SLOT_BYTES as u64,
                SLOT_BYTES as u64,
            )
        }
    } else {
        (k * share, share)
    }
}

/// Whether a lane's stream of `len` bytes travels through its bulk share.
#[inline(always)]
const fn in_bulk(len: u64, share: u64) -> bool {
    share != 0 && len > FIRST_CHUNK as u64
}

/// Writes `n` bytes of `parts` from `offset` on at the start of a lane's bulk share.
#[inline(always)]
fn area_put(area: &[SharedCell<Slot>], parts: (&[u8], &[u8]), offset: usize, n: usize) {
    debug_assert!(n <= area.len() * SLOT_BYTES);
    #[cfg(not(loom))]
    {
        // SAFETY: `area` is this lane's share, contiguous `SharedCell<Slot>`s (transparent
        // `UnsafeCell`s, so writing through a pointer from a shared slice is allowed) of
        // `area.len() * 64 >= n` bytes; this side holds the packet, and with it the area, and
        // this lane alone touches its share.
        let out = unsafe { core::slice::from_raw_parts_mut(area.as_ptr() as *mut u8, n) };
        copy_parts(out, parts, offset);
    }
    #[cfg(loom)]
    for (i, cell) in area.iter().enumerate().take(n.div_ceil(SLOT_BYTES)) {
        let m = (n - i * SLOT_BYTES).min(SLOT_BYTES);
        // SAFETY: as above, one slot at a time, so loom checks each access.
        cell.with_mut(|s| {
            copy_parts(
                &mut unsafe { &mut *s }.as_bytes_mut()[..m],
                parts,
                offset + i * SLOT_BYTES,
            )
        });
    }
}

/// Hands the first `n` bytes of a lane's bulk share to `sink` as the stream's bytes from `offset`.
#[inline(always)]
fn area_get(
    area: &[SharedCell<Slot>],
    n: usize,
    sink: &mut impl StreamSink,
    lane: u32,
    offset: u64,
) {
    debug_assert!(n <= area.len() * SLOT_BYTES);
    #[cfg(not(loom))]
    {
        // SAFETY: as in `area_put`, read-only; `n` is bounded by the share's length.
        let bytes = unsafe { core::slice::from_raw_parts(area.as_ptr() as *const u8, n) };
        sink.chunk(lane, offset, bytes);
    }
    #[cfg(loom)]
    for (i, cell) in area.iter().enumerate().take(n.div_ceil(SLOT_BYTES)) {
        let m = (n - i * SLOT_BYTES).min(SLOT_BYTES);
        // SAFETY: as in `area_put`, one slot at a time.
        cell.with(|s| {
            sink.chunk(
                lane,
                offset + (i * SLOT_BYTES) as u64,
                &unsafe { &*s }.as_bytes()[..m],
            )
        });
    }
}

/// Where `recv_n` puts what it receives.
pub trait StreamSink {
    /// Lane `lane` announced `len` bytes (already checked against the limit). Returning `false`
    /// refuses the stream (for example: no room for that many bytes).
    fn start(&mut self, lane: u32, len: u64) -> bool;
    /// Bytes `offset .. offset + bytes.len()` of lane `lane`'s stream.
    fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]);
    /// Lane `lane`'s whole stream, `len` bytes (already checked against the limit), lies in the
    /// port's bulk area, where [`Port::bulk_view`] can lend it until this side hands the packet
    /// back. Return `true` to read it there (the sink then gets neither `start` nor `chunk` for
    /// this lane and must remember that the lane's bytes are in place); `false` (the default)
    /// to receive them through `start` and `chunk` as usual.
    fn view(&mut self, lane: u32, len: u64) -> bool {
        let _ = (lane, len);
        false
    }
}

/// A sink for one lane's stream into a caller's buffer (a GPU lane, a host client).
#[derive(Debug)]
pub struct SliceSink<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> SliceSink<'b> {
    /// A sink that accepts up to `buf.len()` bytes.
    pub fn new(buf: &'b mut [u8]) -> Self {
        SliceSink { buf, len: 0 }
    }
    /// The bytes received.
    pub fn received(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// How many bytes were received.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether nothing was received.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl StreamSink for SliceSink<'_> {
    fn start(&mut self, _lane: u32, len: u64) -> bool {
        if len > self.buf.len() as u64 {
            return false;
        }
        self.len = len as usize;
        true
    }
    fn chunk(&mut self, _lane: u32, offset: u64, bytes: &[u8]) {
        let at = offset as usize;
        crate::far::copy_from_far(&mut self.buf[at..at + bytes.len()], bytes);
    }
}

/// A sink with one growable buffer per lane (index = lane).
#[cfg(feature = "alloc")]
impl StreamSink for alloc::vec::Vec<alloc::vec::Vec<u8>> {
    fn start(&mut self, lane: u32, len: u64) -> bool {
        let lane = lane as usize;
        if self.len() <= lane {
            self.resize_with(lane + 1, alloc::vec::Vec::new);
        }
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        self[lane].clear();
        // The length was bounded by the receiver's limit before we get here.
        self[lane].resize(len, 0);
        true
    }
    fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]) {
        let at = offset as usize;
        self[lane as usize][at..at + bytes.len()].copy_from_slice(bytes);
    }
}

/// Fills `out` with the bytes of `a ++ b` from `offset` on (`out` must not run past their end).
#[inline(always)]
fn copy_parts(out: &mut [u8], (a, b): (&[u8], &[u8]), offset: usize) {
    let mut at = 0;
    if offset < a.len() {
        let n = (a.len() - offset).min(out.len());
        crate::far::copy_to_far(&mut out[..n], &a[offset..offset + n]);
        at = n;
    }
    if at < out.len() {
        let from = offset + at - a.len();
        let n = out.len() - at;
        crate::far::copy_to_far(&mut out[at..], &b[from..from + n]);
    }
}

impl<S: Side, L: Lanes, M: Mailbox, W: Wait> Port<'_, '_, S, L, M, W> {
    /// Sends `source(lane)` for each of this lane's slots, any length, across as many packets as
    /// the longest needs. Returns [`Error::Rejected`] if the receiver refused it.
    pub fn send_n<'s>(&mut self, mut source: impl FnMut(u32) -> &'s [u8]) -> Result<(), Error> {
        self.send_parts(|lane| (&[], source(lane)))
    }

    /// Sends, for each of this lane's slots, the bytes of `source(lane).0` followed by those of
    /// `source(lane).1` as one stream (a typed call's fixed arguments before its streamed one),
    /// without joining them first. Otherwise as [`send_n`](Self::send_n).
    pub fn send_parts<'s>(
        &mut self,
        mut source: impl FnMut(u32) -> (&'s [u8], &'s [u8]),
    ) -> Result<(), Error> {
        let share = self.bulk_share() as u64;
        let mut packets = 0u64;
        self.ensure_owned_shared()?;
        self.set_header(HeaderWord::Stream, 0);
        let index = self.index();
        let region = *self.region();
        self.send_shared(|slot, lane| {
            let parts = source(lane);
            let len = (parts.0.len() + parts.1.len()) as u64;
            slot.words[0] = len;
            if in_bulk(len, share) {
                let n = len.min(share) as usize;
                area_put(region.bulk(index, lane), parts, 0, n);
            } else {
                let first = (len as usize).min(FIRST_CHUNK);
                copy_parts(&mut slot.as_bytes_mut()[8..8 + first], parts, 0);
            }
            packets = packets.max(packets_for(len, share));
        })?;
        let mut sent = 1u64;
        while self.lanes().ballot(self.exec_mask(), sent < packets) != 0 {
            self.ensure_owned_shared()?;
            if self.header(HeaderWord::Stream) == STREAM_REJECTED {
                // The refusal is the packet we now hold and have read: a following `recv` hands
                // it back before waiting for a reply.
                self.mark_consumed();
                return Err(Error::Rejected);
            }
            self.send_shared(|slot, lane| {
                let parts = source(lane);
                let len = (parts.0.len() + parts.1.len()) as u64;
                let (offset, most) = chunk_of(sent, len, share);
                if offset < len {
                    let n = (len - offset).min(most) as usize;
                    if in_bulk(len, share) {
                        area_put(region.bulk(index, lane), parts, offset as usize, n);
                    } else {
                        copy_parts(&mut slot.as_bytes_mut()[..n], parts, offset as usize);
                    }
                }
            })?;
            sent += 1;
        }
        Ok(())
    }

    /// Receives a stream into `sink`, refusing it if any lane announces more than `limit` bytes
    /// or its sink refuses the length. On refusal the sender is told (if it has more to send) and
    /// this returns [`Error::TooLarge`] or [`Error::Sink`]; other lanes of a refused stream return
    /// [`Error::LaneFailed`].
    pub fn recv_n(&mut self, limit: u64, sink: &mut impl StreamSink) -> Result<(), Error> {
        let share = self.bulk_share() as u64;
        let index = self.index();
        let region = *self.region();
        let mut lens = [0u64; MAX_LANES as usize];
        let mut packets = 0u64;
        let mut failure: Option<Error> = None;
        self.recv_shared(|slot, lane| {
            let len = slot.words[0];
            lens[lane as usize] = len;
            packets = packets.max(packets_for(len, share));
            if failure.is_some() {
                return;
            }
            if len > limit {
                failure = Some(Error::TooLarge { lane, len, limit });
            } else if in_bulk(len, share) {
                // Whole in one packet: the sink may read it where it lies.
                if cfg!(not(loom)) && len <= share && sink.view(lane, len) {
                    return;
                }
                if !sink.start(lane, len) {
                    failure = Some(Error::Sink { lane });
                } else {
                    let n = len.min(share) as usize;
                    area_get(region.bulk(index, lane), n, sink, lane, 0);
                }
            } else if !sink.start(lane, len) {
                failure = Some(Error::Sink { lane });
            } else {
                let first = (len as usize).min(FIRST_CHUNK);
                sink.chunk(lane, 0, &slot.as_bytes()[8..8 + first]);
            }
        })?;
        let exec = self.exec_mask();
        let failed = self.lanes().ballot(exec, failure.is_some());
        if failed != 0 {
            let more = self.lanes().ballot(exec, packets > 1) != 0;
            if more {
                self.set_header(HeaderWord::Stream, STREAM_REJECTED);
                self.give_shared();
            }
            return Err(failure.unwrap_or(Error::LaneFailed {
                lane: failed.trailing_zeros(),
            }));
        }
        let mut received = 1u64;
        while self.lanes().ballot(exec, received < packets) != 0 {
            self.recv_shared(|slot, lane| {
                let len = lens[lane as usize];
                let (offset, most) = chunk_of(received, len, share);
                if offset < len {
                    let n = (len - offset).min(most) as usize;
                    if in_bulk(len, share) {
                        area_get(region.bulk(index, lane), n, sink, lane, offset);
                    } else {
                        sink.chunk(lane, offset, &slot.as_bytes()[..n]);
                    }
                }
            })?;
            received += 1;
        }
        Ok(())
    }

    /// Bytes of lane `lane`'s share of this port's bulk area (0: the region has none).
    pub fn bulk_share(&self) -> usize {
        self.region().layout().bulk_share()
    }

    /// The first `len` bytes of lane `lane`'s share of the port's bulk area, where a stream the
    /// sink took as a view ([`StreamSink::view`]) lies; `None` if this side does not hold the
    /// packet, the lane is outside the packet, or `len` exceeds the share. The borrow of the port
    /// keeps this side holding the packet (and so the area) while the bytes are read.
    ///
    /// The other side writes the area only while it holds the packet; a peer that breaks the
    /// protocol and writes it anyway can change what is read here (as it could a slot's), never
    /// where: the slice stays inside the share.
    #[cfg(not(loom))]
    pub fn bulk_view(&self, lane: u32, len: usize) -> Option<&[u8]> {
        if !self.owns_packet() || lane >= self.region().layout().lanes() || len > self.bulk_share()
        {
            return None;
        }
        let area = self.region().bulk(self.index(), lane);
        // SAFETY: the share is `bulk_share()` contiguous bytes of `SharedCell`s inside the
        // mapped region, which outlives the port; `len` is at most that; this side holds the
        // packet and cannot hand it over while `&self` is borrowed.
        Some(unsafe { core::slice::from_raw_parts(area.as_ptr() as *const u8, len) })
    }
}
