//! Streams: any number of bytes per lane, across as many packets as the longest lane needs.
//!
//! ```text
//! packet 1, per lane:  [ len: u64 | bytes 0..56 ]
//! packet k > 1:        [ bytes 56 + 64 (k-2) .. 56 + 64 (k-1) ]
//! ```
//!
//! Every packet after the first waits for the receiver's acknowledgement (its next `recv` hands
//! the packet back). The receiver bounds every length before accepting anything: a lane that
//! announces more than the receiver's limit (or more than its sink takes) gets the stream refused.
//! If more packets would follow, the receiver writes `STREAM_REJECTED` into the header's stream
//! word and hands the packet back; the sender reads that word each time it gets the packet back,
//! stops, and reports [`Error::Rejected`]. Either way both sides end the
//! stream in step, with the port usable for a reply, and nothing is allocated for a hostile length.

use crate::lanes::Lanes;
use crate::layout::{HeaderWord, MAX_LANES, SLOT_BYTES};
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::Side;
use crate::wait::Wait;
use crate::Error;

/// Bytes of data in a stream's first packet per lane (after the 8-byte length).
pub const FIRST_CHUNK: usize = SLOT_BYTES - 8;

/// Value of the header's stream word when the receiver refused the stream.
pub const STREAM_REJECTED: u64 = 1;

/// Packets a stream of `len` bytes takes.
pub const fn packets_for(len: u64) -> u64 {
    1 + len
        .saturating_sub(FIRST_CHUNK as u64)
        .div_ceil(SLOT_BYTES as u64)
}

/// Where `recv_n` puts what it receives.
pub trait StreamSink {
    /// Lane `lane` announced `len` bytes (already checked against the limit). Returning `false`
    /// refuses the stream (for example: no room for that many bytes).
    fn start(&mut self, lane: u32, len: u64) -> bool;
    /// Bytes `offset .. offset + bytes.len()` of lane `lane`'s stream.
    fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]);
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
        self.buf[at..at + bytes.len()].copy_from_slice(bytes);
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
        out[..n].copy_from_slice(&a[offset..offset + n]);
        at = n;
    }
    if at < out.len() {
        let from = offset + at - a.len();
        let n = out.len() - at;
        out[at..].copy_from_slice(&b[from..from + n]);
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
        let mut packets = 0u64;
        self.ensure_owned()?;
        self.set_header(HeaderWord::Stream, 0);
        self.send(|slot, lane| {
            let parts = source(lane);
            let len = parts.0.len() + parts.1.len();
            slot.words[0] = len as u64;
            let first = len.min(FIRST_CHUNK);
            copy_parts(&mut slot.as_bytes_mut()[8..8 + first], parts, 0);
            packets = packets.max(packets_for(len as u64));
        })?;
        let mut sent = 1u64;
        while self.lanes().ballot(self.exec_mask(), sent < packets) != 0 {
            self.ensure_owned()?;
            if self.header(HeaderWord::Stream) == STREAM_REJECTED {
                // The refusal is the packet we now hold and have read: a following `recv` hands
                // it back before waiting for a reply.
                self.mark_consumed();
                return Err(Error::Rejected);
            }
            let offset = FIRST_CHUNK + (sent as usize - 1) * SLOT_BYTES;
            self.send(|slot, lane| {
                let parts = source(lane);
                let len = parts.0.len() + parts.1.len();
                if offset < len {
                    let n = (len - offset).min(SLOT_BYTES);
                    copy_parts(&mut slot.as_bytes_mut()[..n], parts, offset);
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
        let mut lens = [0u64; MAX_LANES as usize];
        let mut packets = 0u64;
        let mut failure: Option<Error> = None;
        self.recv(|slot, lane| {
            let len = slot.words[0];
            lens[lane as usize] = len;
            packets = packets.max(packets_for(len));
            if failure.is_some() {
                return;
            }
            if len > limit {
                failure = Some(Error::TooLarge { lane, len, limit });
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
                self.give_packet();
            }
            return Err(failure.unwrap_or(Error::LaneFailed {
                lane: failed.trailing_zeros(),
            }));
        }
        let mut received = 1u64;
        while self.lanes().ballot(exec, received < packets) != 0 {
            let offset = (FIRST_CHUNK + (received as usize - 1) * SLOT_BYTES) as u64;
            self.recv(|slot, lane| {
                let len = lens[lane as usize];
                if offset < len {
                    let n = (len - offset).min(SLOT_BYTES as u64) as usize;
                    sink.chunk(lane, offset, &slot.as_bytes()[..n]);
                }
            })?;
            received += 1;
        }
        Ok(())
    }
}
