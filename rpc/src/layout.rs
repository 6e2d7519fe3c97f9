//! The region: what lies where in the memory both sides share.
//!
//! For `P` ports and `L` lanes per packet the region is, in order, each part aligned to 64 bytes
//! (the word lines to 128, a GPU's cache line):
//!
//! ```text
//! offset 0               client outbox  (the server's inbox): mailbox words, see `mailbox`
//! client_outbox + ...    server outbox  (the client's inbox): the same number of words
//! packets                P packets, each one header slot + L lane slots of 64 bytes:
//!                        [ header | slot 0 | slot 1 | ... | slot L-1 ]
//! bulk                   optional (`Layout::with_bulk`): P bulk areas, one per port, each L lane
//!                        shares of B bytes: [ lane 0's B bytes | ... | lane L-1's B bytes ]
//! words                  optional (`Layout::with_words`): the word lines of small calls, see
//!                        `words`: P head words, P / 32 bell words and P / 1024 summit
//!                        words, then per port a request line and a reply line
//! ```
//!
//! A port's bulk area belongs to whichever side holds the port's packet, exactly as the packet's
//! slots do: it moves with the packet and needs no rule of its own. Streams use it for everything
//! longer than a slot (see `stream`), so a large payload crosses in one handoff per B bytes
//! instead of one per 64.
//!
//! Lock bitmaps are *not* in the region: each side keeps its own, private (`Locks`).
//!
//! The header slot of a packet holds, as little-endian `u64` words (`HeaderWord`): the lane mask
//! of the warp that opened the port, the opcode, a status the sending side may set, and the stream
//! control word the receiver of a stream uses to refuse it. The remaining words are reserved and
//! zero.

use crate::mailbox::MailboxKind;

/// Bytes in one slot: the unit of a packet, one per lane, and the size of the header.
pub const SLOT_BYTES: usize = 64;

/// The most bytes of a request, and of a reply, that a call beside the packets carries (an
/// `InlineCall`: a shared-memory port's inline lines, a GPU's word lines). A path may carry fewer
/// (a GPU's word lines carry [`WORD_BYTES`] a lane): its calls answer `None` for what it cannot
/// carry, and the caller uses the packets.
pub const INLINE_BYTES: usize = 256;

// ---- the word lines' geometry (`crate::words`) ----

/// The most request bytes, and the most reply bytes, one lane's call carries on a word line.
pub const WORD_BYTES: usize = 16;

/// Words of payload per lane each way (4 bytes of payload each).
pub const WORDS: usize = WORD_BYTES / 4;

/// Ports that share a bell word: a client rings its port's group's bell after the head, and a
/// server pass reads the heads only of the groups whose bell rang (see [`crate::words`]). A
/// group is a lock word's ports, so a server's range of ports is whole groups.
pub const BELL_PORTS: u32 = PORT_GRANULE;

/// Bells that share a summit word: a client rings its group's summit after its bell, and a pass
/// reads the bells only under the summits that rang (see [`crate::words`]): an idle pass over
/// thousands of ports reads a few words.
pub const SUMMIT_BELLS: u32 = 32;

/// Words (`u64`) of a 128-byte line: each row of a word line starts on a line of its own
/// (see [`crate::words`]).
pub const ROW: usize = 16;

/// The alignment of the word lines (`crate::words`) from the region's base: a GPU's cache line.
pub(crate) const WORD_LINE_BYTES: usize = ROW * 8;

/// The smallest port count, and the granule: port counts are multiples of 32 (one lock word).
pub const PORT_GRANULE: u32 = 32;

/// The largest port count a region may have.
pub const MAX_PORTS: u32 = 1 << 20;

/// The largest lane count of a packet: lane masks are 64 bits wide.
pub const MAX_LANES: u32 = 64;

/// The largest bulk share of one lane, in bytes (1 GiB).
pub const MAX_BULK_SHARE: u64 = 1 << 30;

/// One 64-byte slot: a lane's share of a packet, or a packet's header.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// The slot's contents as eight native-endian words.
    pub words: [u64; 8],
}

const _: () = assert!(core::mem::size_of::<Slot>() == SLOT_BYTES);
const _: () = assert!(core::mem::align_of::<Slot>() == SLOT_BYTES);

impl Slot {
    /// The slot as bytes.
    pub fn as_bytes(&self) -> &[u8; SLOT_BYTES] {
        // SAFETY: `Slot` is `repr(C)`, 64 bytes of `u64`s with no padding, so it is valid to view
        // as 64 initialised bytes with the same lifetime.
        unsafe { &*(self as *const Slot).cast::<[u8; SLOT_BYTES]>() }
    }

    /// The slot as mutable bytes.
    pub fn as_bytes_mut(&mut self) -> &mut [u8; SLOT_BYTES] {
        // SAFETY: as in `as_bytes`; every byte pattern is a valid `Slot`, so writes through the
        // byte view cannot make it invalid.
        unsafe { &mut *(self as *mut Slot).cast::<[u8; SLOT_BYTES]>() }
    }
}

/// Which word of a packet's header slot holds what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum HeaderWord {
    /// Lane mask of the warp that opened the port (bit `i`: slot `i` carries data).
    Mask = 0,
    /// The opcode the client opened the port with (the low 32 bits); the high 32 bits are the
    /// length of a derived call's fixed arguments plus one, 0 if the client did not say it
    /// (`Port::set_request_len`).
    Opcode = 1,
    /// A status the sending side may set before a send (services use it for errors).
    Status = 2,
    /// Stream control: the receiver of a stream writes `STREAM_REJECTED` here to refuse it.
    Stream = 3,
}

/// Why a region layout could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The port count is zero, not a multiple of 32, or above `MAX_PORTS`.
    Ports(u32),
    /// The lane count is zero or above `MAX_LANES`.
    Lanes(u32),
    /// The region uses another mailbox representation than the one asked for.
    Mailbox(MailboxKind),
    /// A lane's bulk share (bytes) is not a multiple of 64 up to `MAX_BULK_SHARE`, or the region
    /// with it would not fit in memory.
    Bulk(u64),
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutError::Ports(p) => write!(
                f,
                "port count {p} is not a multiple of {PORT_GRANULE} between {PORT_GRANULE} and {MAX_PORTS}"
            ),
            LayoutError::Lanes(l) => write!(f, "lane count {l} is not between 1 and {MAX_LANES}"),
            LayoutError::Mailbox(k) => write!(f, "the region's mailboxes are {k:?}, not the kind asked for"),
            LayoutError::Bulk(b) => write!(
                f,
                "bulk share of {b} bytes per lane is not a multiple of {SLOT_BYTES} up to {MAX_BULK_SHARE}, or the region would not fit in memory"
            ),
        }
    }
}

impl core::error::Error for LayoutError {}

/// Where everything lies in a region of `ports` ports and `lanes` lanes per packet.
///
/// Both sides compute the same layout from the same three inputs; the side that creates the region
/// chooses them at run time and publishes them (a transport writes them into its file header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    ports: u32,
    lanes: u32,
    mailbox: MailboxKind,
    mailbox_words: usize,
    server_outbox: usize,
    packets: usize,
    bulk: usize,
    bulk_share: usize,
    /// Offset of the word lines (`with_words`), or 0: none.
    words: usize,
    size: usize,
}

const fn align_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

impl Layout {
    /// The layout for `ports` ports of `lanes` lanes with the given mailbox representation.
    pub const fn new(ports: u32, lanes: u32, mailbox: MailboxKind) -> Result<Layout, LayoutError> {
        if ports == 0 || !ports.is_multiple_of(PORT_GRANULE) || ports > MAX_PORTS {
            return Err(LayoutError::Ports(ports));
        }
        if lanes == 0 || lanes > MAX_LANES {
            return Err(LayoutError::Lanes(lanes));
        }
        let mailbox_words = mailbox.words(ports) as usize;
        let box_bytes = align_up(mailbox_words * 4, SLOT_BYTES);
        let server_outbox = box_bytes;
        let packets = server_outbox + box_bytes;
        // Cannot overflow: ports <= 2^20, lanes + 1 <= 65, 64 bytes: under 2^33.
        let size = packets + ports as usize * (lanes as usize + 1) * SLOT_BYTES;
        Ok(Layout {
            ports,
            lanes,
            mailbox,
            mailbox_words,
            server_outbox,
            packets,
            bulk: size,
            bulk_share: 0,
            words: 0,
            size,
        })
    }

    /// This layout with a bulk area per port of `share` bytes for each lane (a multiple of 64, at
    /// most [`MAX_BULK_SHARE`]; 0: none), laid after the packets.
    pub const fn with_bulk(self, share: u64) -> Result<Layout, LayoutError> {
        if !share.is_multiple_of(SLOT_BYTES as u64) || share > MAX_BULK_SHARE {
            return Err(LayoutError::Bulk(share));
        }
        let per_port = share * self.lanes as u64;
        let Some(bytes) = per_port.checked_mul(self.ports as u64) else {
            return Err(LayoutError::Bulk(share));
        };
        let Some(size) = (self.bulk as u64).checked_add(bytes) else {
            return Err(LayoutError::Bulk(share));
        };
        if size > isize::MAX as u64 {
            return Err(LayoutError::Bulk(share));
        }
        if self.words != 0 {
            // The word lines come last: add the bulk areas first.
            return Err(LayoutError::Bulk(share));
        }
        Ok(Layout {
            bulk_share: share as usize,
            size: size as usize,
            ..self
        })
    }

    /// This layout with word lines for small calls (see [`crate::words`]), laid after the bulk
    /// areas: `ports` head words, then for each port a request line and a reply line sized for
    /// its lanes. Bulk areas, if any, must be added before.
    pub const fn with_words(self) -> Layout {
        if self.words != 0 {
            return self;
        }
        // Every line of a port starts a 128-byte line (`crate::words::ROW` words), and so every
        // row of it does.
        let words = align_up(self.size, WORD_LINE_BYTES);
        let heads = self.heads_bytes();
        let lines = self.ports as usize * self.word_line_words() * 8;
        Layout {
            words,
            size: words + heads + lines,
            ..self
        }
    }

    /// Whether the layout has word lines ([`with_words`](Self::with_words)).
    pub const fn has_words(&self) -> bool {
        self.words != 0
    }

    /// Offset of the word lines' head words (0 if there are none).
    pub const fn words_offset(&self) -> usize {
        self.words
    }

    /// Words (`u64`) in the head array: a head word per port, then a bell word per group of
    /// [`crate::words::BELL_PORTS`] ports, then a summit word per [`crate::words::SUMMIT_BELLS`]
    /// bells (see [`crate::words`]), padded to a 128-byte line.
    pub const fn head_words(&self) -> usize {
        if self.words == 0 {
            0
        } else {
            self.heads_bytes() / 8
        }
    }

    /// Bytes of the head array (heads, then bells, then summits), whole 128-byte lines.
    const fn heads_bytes(&self) -> usize {
        align_up(
            (self.ports as usize + self.bell_words() + self.summit_words()) * 8,
            WORD_LINE_BYTES,
        )
    }

    /// Bell words of the word lines: one per group of [`crate::words::BELL_PORTS`] ports (they
    /// follow the heads).
    pub(crate) const fn bell_words(&self) -> usize {
        (self.ports as usize).div_ceil(BELL_PORTS as usize)
    }

    /// Summit words of the word lines: one per [`crate::words::SUMMIT_BELLS`] bells (they follow
    /// the bells).
    pub(crate) const fn summit_words(&self) -> usize {
        self.bell_words().div_ceil(SUMMIT_BELLS as usize)
    }

    /// Words of a row of a word line (word `j` of every lane): one per lane, rounded up to
    /// whole 128-byte lines ([`crate::words::ROW`] words).
    pub const fn row_words(&self) -> usize {
        align_up(self.lanes as usize, ROW)
    }

    /// Words of one port's request line: the call's 3 meta words padded to a line, then
    /// [`crate::words::WORDS`] rows of request words.
    pub const fn request_line_words(&self) -> usize {
        ROW + WORDS * self.row_words()
    }

    /// Words of one port's reply line: the served word padded to a line, then
    /// [`crate::words::WORDS`] rows of reply words (as many words as a request line).
    pub const fn reply_line_words(&self) -> usize {
        self.request_line_words()
    }

    /// Words of one port's two lines.
    pub const fn word_line_words(&self) -> usize {
        self.request_line_words() + self.reply_line_words()
    }

    /// Offset of the first port's bulk area (the end of the packets).
    pub const fn bulk_offset(&self) -> usize {
        self.bulk
    }

    /// Bytes of each lane's share of a port's bulk area (0: the region has no bulk areas).
    pub const fn bulk_share(&self) -> usize {
        self.bulk_share
    }

    /// Slots (64-byte units) in all the bulk areas together.
    pub const fn bulk_slots(&self) -> usize {
        self.ports as usize * self.lanes as usize * (self.bulk_share / SLOT_BYTES)
    }

    /// Number of ports.
    pub const fn ports(&self) -> u32 {
        self.ports
    }

    /// Lanes (slots) per packet.
    pub const fn lanes(&self) -> u32 {
        self.lanes
    }

    /// The mailbox representation.
    pub const fn mailbox(&self) -> MailboxKind {
        self.mailbox
    }

    /// `u32` words in each direction's mailbox array.
    pub const fn mailbox_words(&self) -> usize {
        self.mailbox_words
    }

    /// Offset of the client's outbox (the server's inbox). Always 0.
    pub const fn client_outbox_offset(&self) -> usize {
        0
    }

    /// Offset of the server's outbox (the client's inbox).
    pub const fn server_outbox_offset(&self) -> usize {
        self.server_outbox
    }

    /// Offset of the first packet.
    pub const fn packets_offset(&self) -> usize {
        self.packets
    }

    /// Slots in one packet: the header and one per lane.
    pub const fn slots_per_packet(&self) -> usize {
        self.lanes as usize + 1
    }

    /// Total bytes of the region.
    pub const fn size(&self) -> usize {
        self.size
    }

    /// `u32` announce words of a client's memory (`Process::with_announce_words`): two per lane
    /// of every port (the word a service writes, then the count of values the lane asked for).
    pub const fn announce_words(&self) -> usize {
        2 * self.ports as usize * self.lanes as usize
    }

    /// `u32` lock words each side needs for its private lock bitmap.
    pub const fn lock_words(&self) -> usize {
        (self.ports / PORT_GRANULE) as usize
    }
}
