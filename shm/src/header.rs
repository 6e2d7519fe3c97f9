//! The file header: what a client checks before it touches a single port.
//!
//! ```text
//! offset  size  field          meaning
//!      0     8  magic          b"FERRYSHM"
//!      8     4  version        FORMAT_VERSION; the layout of everything below depends on it
//!     12     4  header_size    HEADER_SIZE
//!     16     4  ports          port count (a multiple of 32, ferry_rpc::Layout checks it)
//!     20     4  lanes          slots per packet
//!     24     4  mailbox        ferry_rpc::MailboxKind wire number (Packed = 1)
//!     28     4  bulk           bytes of each port's bulk area (ferry_rpc::Layout::with_bulk;
//!                              a multiple of 64, 0: none), the region's last part
//!     32     8  region_offset  where the ferry_rpc region starts (64-byte aligned)
//!     40     8  region_size    ferry_rpc::Layout::size()
//!     48     8  owners_offset  where the owner words start (64-byte aligned), see `owner`
//!     56     8  owners_size    8 bytes per port
//!     64     8  file_size      the whole file; must equal the file's real size
//!     72     8  services_hash  FNV-1a 64 of the services table (below), which it so protects
//!     80     4  server_pid     the serving process
//!     84     4  state          SERVING / DRAINING / STOPPED, the one mutable word (atomic)
//!     88     8  checksum       FNV-1a 64 of bytes 0..84 and 96..128
//!     96     8  server_start   the serving process's start time (`owner::start_time`), 0 if
//!                              unknown: with the pid it tells the server from a later process
//!                              given the same pid
//!    104     8  inline_offset  where the inline area starts (64-byte aligned), see `inline`
//!    112     4  flags          bit 0: the server answers inline calls; other bits zero
//!    116     4  services       entries in the services table (at most MAX_SERVICES)
//!    120     4  calls          bytes of the calls table (a multiple of 64, at most MAX_CALLS_BYTES)
//!    124     4  reserved       zero
//! ```
//!
//! The **services table** follows the inline area (at the next 64-byte boundary), one 64-byte
//! entry per service the server serves: its name (UTF-8, at most
//! `ferry_rpc::service::SERVICE_NAME_BYTES`, zero-padded to 48 bytes), then its schema fingerprint
//! (`u64`), then the length of its calls' text (`u32`, below) and 4 zero bytes. A client that
//! expects a service finds it here by name and compares fingerprints before its first call.
//!
//! The **calls table** follows the services table: for each service in the table's order, the
//! text of its calls (`ferry_rpc::service::CallInfo::line`, one per line), whose length in bytes
//! is the `u32` in its entry's last 8 bytes (the other 4 zero); zero bytes pad it to a multiple of
//! 64. `services_hash` covers both tables. Tools read it (`ferry ls`, `ferry call`).
//!
//! All integers are little-endian. [`Geometry::decode`] is a pure function over the header's bytes
//! and the file's real size, so it is fuzzed directly (`tests/header_fuzz.rs`): whatever the bytes,
//! it returns a geometry whose every part lies inside the file, or an error naming the field.

use ferry_rpc::{Layout, LayoutError, Mailbox};

use crate::ShmMailbox;

/// The file's first eight bytes.
pub const MAGIC: [u8; 8] = *b"FERRYSHM";
/// The header format this crate writes and reads.
pub const FORMAT_VERSION: u32 = 7;
/// The most services one file's table lists.
pub const MAX_SERVICES: u32 = 64;
/// The most bytes of a file's calls table.
pub const MAX_CALLS_BYTES: u32 = 1 << 20;
/// Bytes of one services table entry.
pub const SERVICE_ENTRY: usize = 64;
/// Bytes of the header; the region starts at the next 64-byte boundary.
pub const HEADER_SIZE: usize = 128;
/// Byte offset of the mutable `state` word.
pub(crate) const STATE_OFFSET: usize = 84;
/// The header's bytes after the state word and the checksum, also covered by the checksum.
const TAIL: usize = 96;

/// The server is serving: clients may start calls.
pub const STATE_SERVING: u32 = 1;
/// The server is draining: calls in flight finish, new ones are refused.
pub const STATE_DRAINING: u32 = 2;
/// The server stopped (or is stopping); nothing will be served.
pub const STATE_STOPPED: u32 = 3;

const fn align64(n: u64) -> u64 {
    n.div_ceil(64) * 64
}

/// A header field that did not check out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderError {
    /// The field, as named in the header table.
    pub field: &'static str,
    /// What was found.
    pub found: u64,
    /// What was expected, in words.
    pub expected: String,
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "header field `{}` is {} (0x{:x}), expected {}",
            self.field, self.found, self.found, self.expected
        )
    }
}

impl std::error::Error for HeaderError {}

fn bad(field: &'static str, found: u64, expected: impl Into<String>) -> HeaderError {
    HeaderError {
        field,
        found,
        expected: expected.into(),
    }
}

/// The checksum of a header: FNV-1a 64 (ferry-rpc's) of its fixed fields, all but the state word
/// and the checksum itself. It catches corruption, it does not authenticate.
fn checksum(h: &[u8]) -> u64 {
    use ferry_rpc::service::fnv1a_64;
    fnv1a_64(
        fnv1a_64(ferry_rpc::service::FNV64_OFFSET, &h[..STATE_OFFSET]),
        &h[TAIL..HEADER_SIZE],
    )
}

/// Where everything lies in a ferry shared-memory file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    layout: Layout,
    fingerprint: u64,
    server_pid: u32,
    server_start: u64,
    flags: u32,
    region_offset: u64,
    owners_offset: u64,
    inline_offset: u64,
    services: u32,
    services_offset: u64,
    /// Bytes of the calls table.
    calls: u32,
    file_size: u64,
}

/// `flags` bit: the server answers inline calls (`inline`).
pub const FLAG_INLINE: u32 = 1;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Geometry {
    /// The geometry of a file for `ports` ports of `lanes` lanes whose services table hashes to
    /// `fingerprint` (no services until [`with_services`](Self::with_services)), served by
    /// process `server_pid`.
    pub fn new(
        ports: u32,
        lanes: u32,
        fingerprint: u64,
        server_pid: u32,
    ) -> Result<Geometry, LayoutError> {
        Ok(Self::laid_out(
            Layout::new(ports, lanes, <ShmMailbox as Mailbox>::KIND)?,
            fingerprint,
            server_pid,
        ))
    }

    /// The same geometry with a bulk area of `share` bytes per port and lane (see
    /// `ferry_rpc::Layout::with_bulk`), which moves everything after the region.
    pub fn with_bulk(self, share: u64) -> Result<Geometry, LayoutError> {
        let layout = Layout::new(
            self.layout.ports(),
            self.layout.lanes(),
            self.layout.mailbox(),
        )?
        .with_bulk(share)?;
        Ok(Self::laid_out(layout, self.fingerprint, self.server_pid)
            .with_server_start(self.server_start)
            .with_inline(self.serves_inline())
            .with_services(self.services)
            .with_calls(self.calls as usize))
    }

    /// Bytes of each port's bulk area per lane (0: none).
    pub fn bulk(&self) -> usize {
        self.layout.bulk_share()
    }

    fn laid_out(layout: Layout, fingerprint: u64, server_pid: u32) -> Geometry {
        let ports = layout.ports();
        let region_offset = align64(HEADER_SIZE as u64);
        let owners_offset = align64(region_offset + layout.size() as u64);
        let inline_offset = align64(owners_offset + ports as u64 * 8);
        let services_offset = align64(inline_offset + crate::inline::area_size(ports) as u64);
        let file_size = services_offset;
        Geometry {
            services: 0,
            calls: 0,
            services_offset,
            layout,
            fingerprint,
            server_pid,
            server_start: 0,
            flags: 0,
            region_offset,
            owners_offset,
            inline_offset,
            file_size,
        }
    }

    /// The same geometry, recording `start` as the serving process's start time
    /// (`owner::start_time`; 0: unknown).
    pub fn with_server_start(mut self, start: u64) -> Geometry {
        self.server_start = start;
        self
    }

    /// The same geometry with a services table of `count` entries (at most [`MAX_SERVICES`]).
    pub fn with_services(mut self, count: u32) -> Geometry {
        self.services = count.min(MAX_SERVICES);
        self.sized()
    }

    /// The same geometry with a calls table of `bytes` (rounded up to a multiple of 64, at most
    /// [`MAX_CALLS_BYTES`]).
    pub fn with_calls(mut self, bytes: usize) -> Geometry {
        self.calls = (align64(bytes as u64) as u32).min(MAX_CALLS_BYTES);
        self.sized()
    }

    /// The file's size for its tables.
    fn sized(mut self) -> Geometry {
        self.file_size =
            self.services_offset + self.services as u64 * SERVICE_ENTRY as u64 + self.calls as u64;
        self
    }

    /// Bytes of the calls table (after the services table).
    pub fn calls_bytes(&self) -> usize {
        self.calls as usize
    }

    /// Entries in the services table.
    pub fn services(&self) -> u32 {
        self.services
    }

    /// Byte offset of the services table in the file.
    pub fn services_offset(&self) -> usize {
        self.services_offset as usize
    }

    /// The region's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The hash of the services table.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The serving process's id.
    pub fn server_pid(&self) -> u32 {
        self.server_pid
    }

    /// The same geometry, saying whether the server answers inline calls ([`FLAG_INLINE`]).
    pub fn with_inline(mut self, serves: bool) -> Geometry {
        self.flags = if serves { FLAG_INLINE } else { 0 };
        self
    }

    /// Whether the server answers inline calls.
    pub fn serves_inline(&self) -> bool {
        self.flags & FLAG_INLINE != 0
    }

    /// Byte offset of the inline area (its bitmap, then a head line per port, then each port's
    /// wide lines) in the file.
    pub fn inline_offset(&self) -> usize {
        self.inline_offset as usize
    }

    /// Byte offset in the file of port 0's head line (64 bytes per port follow).
    pub fn inline_lines_offset(&self) -> usize {
        self.inline_offset as usize + crate::inline::lines_offset(self.layout.ports())
    }

    /// Byte offset in the file of port 0's wide lines (`64 × WIDE_LINES` bytes per port
    /// follow, after every port's head line).
    pub fn inline_wide_offset(&self) -> usize {
        self.inline_offset as usize + crate::inline::wide_offset(self.layout.ports())
    }

    /// The serving process's start time (`owner::start_time`; 0: unknown).
    pub fn server_start(&self) -> u64 {
        self.server_start
    }

    /// Byte offset of the region in the file.
    pub fn region_offset(&self) -> usize {
        self.region_offset as usize
    }

    /// Byte offset of the owner words in the file.
    pub fn owners_offset(&self) -> usize {
        self.owners_offset as usize
    }

    /// The file's size in bytes.
    pub fn file_size(&self) -> usize {
        self.file_size as usize
    }

    /// The header bytes for this geometry, state `SERVING`.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut h = [0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        h[16..20].copy_from_slice(&self.layout.ports().to_le_bytes());
        h[20..24].copy_from_slice(&self.layout.lanes().to_le_bytes());
        h[24..28].copy_from_slice(&(self.layout.mailbox() as u32).to_le_bytes());
        h[28..32].copy_from_slice(&(self.layout.bulk_share() as u32).to_le_bytes());
        h[32..40].copy_from_slice(&self.region_offset.to_le_bytes());
        h[40..48].copy_from_slice(&(self.layout.size() as u64).to_le_bytes());
        h[48..56].copy_from_slice(&self.owners_offset.to_le_bytes());
        h[56..64].copy_from_slice(&(self.layout.ports() as u64 * 8).to_le_bytes());
        h[64..72].copy_from_slice(&self.file_size.to_le_bytes());
        h[72..80].copy_from_slice(&self.fingerprint.to_le_bytes());
        h[80..84].copy_from_slice(&self.server_pid.to_le_bytes());
        h[84..88].copy_from_slice(&STATE_SERVING.to_le_bytes());
        h[96..104].copy_from_slice(&self.server_start.to_le_bytes());
        h[104..112].copy_from_slice(&self.inline_offset.to_le_bytes());
        h[112..116].copy_from_slice(&self.flags.to_le_bytes());
        h[116..120].copy_from_slice(&self.services.to_le_bytes());
        h[120..124].copy_from_slice(&self.calls.to_le_bytes());
        let sum = checksum(&h);
        h[88..96].copy_from_slice(&sum.to_le_bytes());
        h
    }

    /// Reads and checks a header: `bytes` are the file's first bytes (at most its whole
    /// contents), `real_size` the file's size as the file system reports it, `fingerprint` the
    /// services-table hash the caller expects (`None`: any; the table itself is checked against
    /// the hash when it is read, `file::attach`). Every field is checked against the others and
    /// against `real_size` before anything is computed from it.
    pub fn decode(
        bytes: &[u8],
        real_size: u64,
        fingerprint: Option<u64>,
    ) -> Result<Geometry, HeaderError> {
        if real_size < HEADER_SIZE as u64 || bytes.len() < HEADER_SIZE {
            return Err(bad(
                "file_size",
                real_size.min(bytes.len() as u64),
                format!("at least the {HEADER_SIZE}-byte header (truncated file)"),
            ));
        }
        let b = &bytes[..HEADER_SIZE];
        if b[0..8] != MAGIC {
            return Err(bad(
                "magic",
                u64_at(b, 0),
                "\"FERRYSHM\" (not a ferry shared-memory file)",
            ));
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION {
            return Err(bad(
                "version",
                version.into(),
                format!("{FORMAT_VERSION} (written by another ferry version)"),
            ));
        }
        let sum = u64_at(b, 88);
        let want = checksum(b);
        if sum != want {
            return Err(bad(
                "checksum",
                sum,
                format!("{want} (the header is corrupted)"),
            ));
        }
        let header_size = u32_at(b, 12);
        if header_size as usize != HEADER_SIZE {
            return Err(bad(
                "header_size",
                header_size.into(),
                HEADER_SIZE.to_string(),
            ));
        }
        let ports = u32_at(b, 16);
        let lanes = u32_at(b, 20);
        let mailbox = u32_at(b, 24);
        if mailbox != <ShmMailbox as Mailbox>::KIND as u32 {
            return Err(bad(
                "mailbox",
                mailbox.into(),
                format!(
                    "{} (one mailbox bit per port)",
                    <ShmMailbox as Mailbox>::KIND as u32
                ),
            ));
        }
        if b[124..].iter().any(|&x| x != 0) {
            return Err(bad("reserved", 0, "zero"));
        }
        let calls = u32_at(b, 120);
        if !calls.is_multiple_of(64) || calls > MAX_CALLS_BYTES {
            return Err(bad(
                "calls",
                calls.into(),
                format!("a multiple of 64, at most {MAX_CALLS_BYTES}"),
            ));
        }
        let services = u32_at(b, 116);
        if services > MAX_SERVICES {
            return Err(bad(
                "services",
                services.into(),
                format!("at most {MAX_SERVICES}"),
            ));
        }
        let fp = u64_at(b, 72);
        let server_pid = u32_at(b, 80);
        let bulk = u32_at(b, 28);
        let geometry = match Geometry::new(ports, lanes, fp, server_pid) {
            Ok(g) => match g
                .with_server_start(u64_at(b, 96))
                .with_inline(u32_at(b, 112) & FLAG_INLINE != 0)
                .with_services(services)
                .with_calls(calls as usize)
                .with_bulk(bulk.into())
            {
                Ok(g) => g,
                Err(_) => {
                    return Err(bad(
                        "bulk",
                        bulk.into(),
                        "a multiple of 64 that keeps the region within memory",
                    ))
                }
            },
            Err(LayoutError::Lanes(l)) => {
                return Err(bad("lanes", l.into(), "between 1 and 64"));
            }
            Err(_) => {
                return Err(bad(
                    "ports",
                    ports.into(),
                    "a multiple of 32 between 32 and 2^20",
                ));
            }
        };
        let fields: [(&'static str, u64, u64); 6] = [
            ("region_offset", u64_at(b, 32), geometry.region_offset),
            ("region_size", u64_at(b, 40), geometry.layout.size() as u64),
            ("owners_offset", u64_at(b, 48), geometry.owners_offset),
            ("owners_size", u64_at(b, 56), ports as u64 * 8),
            ("inline_offset", u64_at(b, 104), geometry.inline_offset),
            ("file_size", u64_at(b, 64), geometry.file_size),
        ];
        for (field, found, want) in fields {
            if found != want {
                return Err(bad(
                    field,
                    found,
                    format!("{want} (from ports = {ports}, lanes = {lanes}, bulk = {bulk})"),
                ));
            }
        }
        let flags = u32_at(b, 112);
        if flags & !FLAG_INLINE != 0 || (flags & FLAG_INLINE != 0 && lanes != 1) {
            return Err(bad(
                "flags",
                flags.into(),
                "bit 0 only, and only with one lane (inline calls are single-lane)",
            ));
        }
        if real_size != geometry.file_size {
            return Err(bad(
                "file_size",
                geometry.file_size,
                format!("the file's real size, {real_size} bytes (truncated or extended file)"),
            ));
        }
        if server_pid == 0 || server_pid > i32::MAX as u32 {
            return Err(bad("server_pid", server_pid.into(), "a process id"));
        }
        if let Some(want) = fingerprint {
            if fp != want {
                return Err(bad(
                    "fingerprint",
                    fp,
                    format!("{want:#018x} (the services table is not the one expected)"),
                ));
            }
        }
        let state = u32_at(b, STATE_OFFSET);
        if !(STATE_SERVING..=STATE_STOPPED).contains(&state) {
            return Err(bad("state", state.into(), "1, 2 or 3"));
        }
        Ok(geometry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Geometry, [u8; HEADER_SIZE]) {
        let g = Geometry::new(64, 1, 0xfeed, 1234)
            .unwrap()
            .with_server_start(5678);
        (g, g.encode())
    }

    #[test]
    fn round_trip() {
        let (g, h) = sample();
        assert_eq!(
            Geometry::decode(&h, g.file_size() as u64, Some(0xfeed)),
            Ok(g)
        );
        assert_eq!(g.region_offset() % 64, 0);
        assert_eq!(g.owners_offset() % 64, 0);
        assert!(g.owners_offset() >= g.region_offset() + g.layout().size());
        assert!(g.inline_offset() >= g.owners_offset() + 64 * 8);
        assert_eq!(g.inline_offset() % 64, 0);
        // With no services the table is empty: the file ends where it would start.
        assert_eq!(g.services(), 0);
        assert_eq!(g.services_offset() % 64, 0);
        assert!(g.services_offset() >= g.inline_lines_offset() + 64 * 64);
        assert_eq!(g.file_size(), g.services_offset());
        let g = g.with_inline(true);
        let decoded = Geometry::decode(&g.encode(), g.file_size() as u64, None).unwrap();
        assert!(decoded.serves_inline());
        assert_eq!(decoded, g);
        // A table of three services: three entries at the end of the file, counted in the header.
        let g = g.with_services(3);
        assert_eq!(g.file_size(), g.services_offset() + 3 * SERVICE_ENTRY);
        let h = g.encode();
        assert_eq!(u32_at(&h, 116), 3);
        let decoded = Geometry::decode(&h, g.file_size() as u64, None).unwrap();
        assert_eq!(decoded.services(), 3);
        assert_eq!(decoded, g);
        // Bulk areas: the region grows by one area per port, everything after it moves.
        let b = g.with_bulk(4096).unwrap();
        assert_eq!(b.bulk(), 4096);
        assert_eq!(b.layout().size(), g.layout().size() + 64 * 4096);
        assert_eq!(b.file_size(), g.file_size() + 64 * 4096);
        assert_eq!(b.services(), 3);
        assert!(b.serves_inline());
        let decoded = Geometry::decode(&b.encode(), b.file_size() as u64, None).unwrap();
        assert_eq!(decoded, b);
        // A header claiming a bulk area its file lacks is refused by the sizes that follow.
        let mut h = g.encode();
        h[28..32].copy_from_slice(&4096u32.to_le_bytes());
        refix(&mut h);
        let err = Geometry::decode(&h, g.file_size() as u64, None).unwrap_err();
        assert_eq!(err.field, "region_size", "{err}");
        // Not a multiple of 64.
        h[28..32].copy_from_slice(&100u32.to_le_bytes());
        refix(&mut h);
        let err = Geometry::decode(&h, g.file_size() as u64, None).unwrap_err();
        assert_eq!(err.field, "bulk", "{err}");
        assert!(g.with_bulk(100).is_err());
        assert!(g.with_bulk(ferry_rpc::MAX_BULK_SHARE + 64).is_err());
    }

    fn refix(h: &mut [u8; HEADER_SIZE]) {
        let sum = checksum(h);
        h[88..96].copy_from_slice(&sum.to_le_bytes());
    }

    #[test]
    fn each_field_is_named() {
        let (g, good) = sample();
        let size = g.file_size() as u64;
        let cases: [(usize, usize, &str); 17] = [
            (12, 4, "header_size"),
            (16, 4, "ports"),
            (20, 4, "lanes"),
            (24, 4, "mailbox"),
            (28, 4, "bulk"),
            (32, 8, "region_offset"),
            (40, 8, "region_size"),
            (48, 8, "owners_offset"),
            (56, 8, "owners_size"),
            (64, 8, "file_size"),
            (80, 4, "server_pid"),
            (84, 4, "state"),
            (104, 8, "inline_offset"),
            (112, 4, "flags"),
            (116, 4, "services"),
            (120, 4, "calls"),
            (124, 4, "reserved"),
        ];
        for (at, len, field) in cases {
            let mut h = good;
            // Zero or all-ones: one of them differs from the good value.
            let fill = if h[at..at + len].iter().all(|&x| x == 0) {
                0xff
            } else {
                0
            };
            h[at..at + len].fill(fill);
            refix(&mut h);
            let err = Geometry::decode(&h, size, Some(0xfeed)).unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
        let mut h = good;
        h[8] = FORMAT_VERSION as u8 + 1;
        assert_eq!(
            Geometry::decode(&h, size, None).unwrap_err().field,
            "version"
        );
        let mut h = good;
        h[0] = b'X';
        assert_eq!(Geometry::decode(&h, size, None).unwrap_err().field, "magic");
        for at in [17, 97] {
            // A fixed field before the state word, and the server's start time after it.
            let mut h = good;
            h[at] ^= 1;
            assert_eq!(
                Geometry::decode(&h, size, None).unwrap_err().field,
                "checksum"
            );
        }
        // Inline calls are single-lane: the flag on a wider region is refused.
        let wide = Geometry::new(64, 2, 0xfeed, 1234)
            .unwrap()
            .with_inline(true);
        let err = Geometry::decode(&wide.encode(), wide.file_size() as u64, None).unwrap_err();
        assert_eq!(err.field, "flags", "{err}");
        let err = Geometry::decode(&good, size, Some(0xbeef)).unwrap_err();
        assert_eq!(err.field, "fingerprint");
        assert!(err.to_string().contains("services table"), "{err}");
        // A count of services the file has no room for (one entry more than it was sized for),
        // and one over the most a table lists.
        let mut h = good;
        h[116..120].copy_from_slice(&1u32.to_le_bytes());
        refix(&mut h);
        assert_eq!(
            Geometry::decode(&h, size, None).unwrap_err().field,
            "file_size"
        );
        let mut h = good;
        h[116..120].copy_from_slice(&(MAX_SERVICES + 1).to_le_bytes());
        refix(&mut h);
        assert_eq!(
            Geometry::decode(&h, size, None).unwrap_err().field,
            "services"
        );
        // The count is covered by the checksum.
        let mut h = good;
        h[116] ^= 1;
        assert_eq!(
            Geometry::decode(&h, size, None).unwrap_err().field,
            "checksum"
        );
        let err = Geometry::decode(&good, size - 8, None).unwrap_err();
        assert_eq!(err.field, "file_size");
        let err = Geometry::decode(&good[..40], size, None).unwrap_err();
        assert!(err.expected.contains("truncated"), "{err}");
    }
}
