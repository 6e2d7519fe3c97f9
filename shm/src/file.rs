//! The file: created exclusively by the server, attached and checked by clients, mapped by both.
//!
//! **Creating.** The server writes the whole file under a temporary name (`O_CREAT | O_EXCL |
//! O_NOFOLLOW`, mode 0600 set again with `fchmod` so no umask widens or narrows it), takes an
//! exclusive `flock` on it, and only then publishes it with `link(2)`, which fails if the name
//! exists and never follows a symbolic link there. So every file visible under the name is either
//! complete and locked by its live server, or stale.
//!
//! The file's pages are reserved when it is created (`fallocate`): a file system without room for
//! it fails the server's start with [`ShmError::NoRoom`], naming the size needed, instead of
//! letting the first touch of a page that has no backing kill the server and its clients.
//!
//! **Stale files.** If the name exists, the server opens it (`O_NOFOLLOW`) and tries the lock
//! without blocking. Held: a live server serves it, and creating fails with
//! [`ShmError::AlreadyServing`]. Free: the new server, holding the old file's lock so no third
//! server can judge it at the same time, reads its header. Only a ferry file (the magic, a format
//! version ferry wrote) whose server is gone (the kernel drops a dead process's locks, and the
//! process its header names is not running) is replaced: the server checks that the name still
//! names that very file (device and inode), unlinks it and publishes its own. Anything else under
//! the name (a user's file under a mistyped name, another program's file) is left as it is, and
//! creating fails with [`ShmError::NotStale`].
//!
//! **Attaching.** A client opens the name (`O_NOFOLLOW`), reads the header with `pread` and checks
//! every field against the file's real size ([`Geometry::decode`]) before mapping it; then it checks
//! that the server is alive and serving. A file truncated by a hostile process *after* it was
//! mapped would fault on access (`SIGBUS`); files are 0600, so only the same user can do that.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ferry_rpc::Region;

use crate::ShmMailbox;
use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, CWD};

use crate::error::ShmError;
use crate::header::{
    Geometry, FORMAT_VERSION, HEADER_SIZE, MAGIC, SERVICE_ENTRY, STATE_OFFSET, STATE_SERVING,
    STATE_STOPPED,
};
use crate::owner::process_alive;
use crate::sync::{AtomicU32, AtomicU64};
use ferry_rpc::service::SERVICE_NAME_BYTES;

/// The directory a bare name is placed in.
pub const DEFAULT_DIR: &str = "/dev/shm";

/// The path for `name`: itself if it contains a `/`, else `/dev/shm/ferry-<name>`.
pub fn path_for(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        Path::new(DEFAULT_DIR).join(format!("ferry-{name}"))
    }
}

fn io(op: &'static str, path: &Path, e: impl Into<std::io::Error>) -> ShmError {
    ShmError::Io {
        op,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// The services table of a file and its calls table (see `header`): the entries' bytes for
/// `services`, each a name (at most `SERVICE_NAME_BYTES`, checked by the derive and by the
/// server's start), a fingerprint and the length of its calls' text, then those texts (`calls`,
/// one per service, in order; missing ones empty), padded to a multiple of 64.
pub(crate) fn table_bytes(services: &[(&str, u64)], calls: &[String]) -> Vec<u8> {
    let mut out = vec![0u8; services.len() * SERVICE_ENTRY];
    let text = |i: usize| calls.get(i).map_or("", |t| t.as_str());
    for (i, (entry, (name, fingerprint))) in out
        .chunks_exact_mut(SERVICE_ENTRY)
        .zip(services)
        .enumerate()
    {
        let n = name.len().min(SERVICE_NAME_BYTES);
        entry[..n].copy_from_slice(&name.as_bytes()[..n]);
        entry[SERVICE_NAME_BYTES..SERVICE_NAME_BYTES + 8]
            .copy_from_slice(&fingerprint.to_le_bytes());
        entry[SERVICE_NAME_BYTES + 8..SERVICE_NAME_BYTES + 12]
            .copy_from_slice(&(text(i).len() as u32).to_le_bytes());
    }
    for i in 0..services.len() {
        out.extend_from_slice(text(i).as_bytes());
    }
    out.resize(
        services.len() * SERVICE_ENTRY
            + (out.len() - services.len() * SERVICE_ENTRY).div_ceil(64) * 64,
        0,
    );
    out
}

/// The hash of a services table and its calls table, kept in the header (so the header's
/// checksum protects them).
pub(crate) fn table_hash(table: &[u8]) -> u64 {
    ferry_rpc::service::fnv1a_64(ferry_rpc::service::FNV64_OFFSET, table)
}

/// The entries of a services table of `services` entries followed by its calls table (`table`,
/// whose hash is `hash`), with each service's calls' text; `None` if the bytes do not hash to it
/// or an entry is malformed (a name or a text that is not UTF-8, bytes after a name's end, a
/// non-zero reserved word, texts longer than the calls table, padding that is not zero).
fn parse_table(table: &[u8], hash: u64, services: usize) -> Option<Vec<(String, u64, String)>> {
    if table_hash(table) != hash {
        return None;
    }
    let (entries, mut texts) = table.split_at_checked(services * SERVICE_ENTRY)?;
    let parsed = entries
        .chunks_exact(SERVICE_ENTRY)
        .map(|entry| {
            let name = &entry[..SERVICE_NAME_BYTES];
            let len = name
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(SERVICE_NAME_BYTES);
            let fp_end = SERVICE_NAME_BYTES + 8;
            if name[len..].iter().any(|&b| b != 0) || entry[fp_end + 4..].iter().any(|&b| b != 0) {
                return None;
            }
            let name = std::str::from_utf8(&name[..len]).ok()?.to_string();
            let fp = u64::from_le_bytes(
                entry[SERVICE_NAME_BYTES..fp_end]
                    .try_into()
                    .expect("8 bytes"),
            );
            let text_len =
                u32::from_le_bytes(entry[fp_end..fp_end + 4].try_into().expect("4 bytes"));
            let (text, rest) = texts.split_at_checked(text_len as usize)?;
            texts = rest;
            let text = std::str::from_utf8(text).ok()?.to_string();
            Some((name, fp, text))
        })
        .collect::<Option<Vec<_>>>()?;
    texts.iter().all(|&b| b == 0).then_some(parsed)
}

/// A mapped ferry file.
#[derive(Debug)]
pub(crate) struct Mapped {
    map: memmap2::MmapRaw,
    geometry: Geometry,
    /// Where the ports' bulk areas lie in `map`.
    bulk: crate::inline::BulkAreas,
    /// Where the head lines and the wide lines start in `map` (found once: a claim's inline path
    /// reaches its port's on every call).
    lines_at: usize,
    wide_at: usize,
    /// The services table, as read (clients) or written (the server).
    services: Vec<(String, u64)>,
    /// Each service's calls, as the calls table has them (one `CallInfo::line` a line).
    calls: Vec<String>,
    path: PathBuf,
    /// Keeps the server's `flock` for as long as the mapping lives.
    file: File,
}

impl Mapped {
    fn new(
        file: File,
        geometry: Geometry,
        (services, calls): (Vec<(String, u64)>, Vec<String>),
        path: &Path,
    ) -> Result<Mapped, ShmError> {
        let map = memmap2::MmapOptions::new()
            .len(geometry.file_size())
            .map_raw(&file)
            .map_err(|e| io("mapping", path, e))?;
        Ok(Mapped {
            bulk: Self::find_bulk_areas(&map, &geometry),
            lines_at: geometry.inline_lines_offset(),
            wide_at: geometry.inline_wide_offset(),
            map,
            services,
            calls,
            geometry,
            path: path.to_path_buf(),
            file,
        })
    }

    pub(crate) fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn services(&self) -> &[(String, u64)] {
        &self.services
    }

    /// Each service's calls (in the order of [`services`](Self::services)), one line each.
    pub(crate) fn calls(&self) -> &[String] {
        &self.calls
    }

    /// The services table as 32-bit words (the monitor puts back what a stray write changed).
    pub(crate) fn table_words(&self) -> &[AtomicU32] {
        let g = &self.geometry;
        // SAFETY: the services table and the calls table are the file's last
        // `services * SERVICE_ENTRY + calls_bytes` bytes from `services_offset` (64-byte
        // aligned), inside the mapping (checked by `Geometry::decode` or computed by
        // `Geometry::new`); every process accesses their words atomically once mapped.
        unsafe {
            std::slice::from_raw_parts(
                self.map
                    .as_ptr()
                    .add(g.services_offset())
                    .cast::<AtomicU32>(),
                (g.services() as usize * SERVICE_ENTRY + g.calls_bytes()) / 4,
            )
        }
    }

    /// The ferry-rpc region inside the file. (Under loom, whose model of inline lines maps no file,
    /// ferry-rpc has no raw regions.)
    #[cfg(loom)]
    pub(crate) fn region(&self) -> Region<'_, ShmMailbox> {
        unreachable!("the loom model maps no file")
    }

    /// The ferry-rpc region inside the file.
    #[cfg(not(loom))]
    pub(crate) fn region(&self) -> Region<'_, ShmMailbox> {
        let g = &self.geometry;
        // SAFETY: the mapping is `file_size` bytes, page aligned, alive as long as `self`;
        // `region_offset` is a multiple of 64 and `region_offset + layout.size() <= owners_offset
        // <= file_size` (both checked by `Geometry::decode`, or computed by `Geometry::new`); the
        // region's memory is reached only through ferry-rpc `Region`s, here and in the peer.
        let region =
            unsafe { Region::from_raw(self.map.as_mut_ptr().add(g.region_offset()), *g.layout()) };
        region.expect("the geometry's layout matches itself")
    }

    /// Where the ports' bulk areas lie (lane 0's share of each), for inline calls: found once,
    /// when the file is mapped (a claim's inline path reads it on every call).
    pub(crate) fn bulk_areas(&self) -> crate::inline::BulkAreas {
        self.bulk
    }

    /// Where `map`'s bulk areas lie for `geometry` (none under loom, whose model maps no file).
    fn find_bulk_areas(map: &memmap2::MmapRaw, geometry: &Geometry) -> crate::inline::BulkAreas {
        let layout = geometry.layout();
        if cfg!(loom) || layout.bulk_share() == 0 {
            return crate::inline::BulkAreas::NONE;
        }
        crate::inline::BulkAreas {
            // SAFETY: the bulk areas are the region's last `bulk_slots() * 64` bytes, at
            // `bulk_offset()` within it, inside the mapping (as for `region`).
            base: unsafe {
                map.as_mut_ptr()
                    .add(geometry.region_offset() + layout.bulk_offset())
            },
            share: layout.bulk_share(),
            stride: layout.lanes() as usize * layout.bulk_share(),
        }
    }

    /// The owner words, one per port.
    pub(crate) fn owners(&self) -> &[AtomicU64] {
        let g = &self.geometry;
        // SAFETY: `owners_offset` is 64-byte aligned and `owners_offset + 8 * ports <=
        // inline_offset <= file_size` (checked or computed as above), so the slice lies inside the
        // live mapping; `AtomicU64` accepts any bit pattern, and every process reaches these words
        // only atomically.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(g.owners_offset()).cast::<AtomicU64>(),
                g.layout().ports() as usize,
            )
        }
    }

    /// The inline bitmap: one bit per port, 32 ports per word (see `inline`).
    pub(crate) fn inline_bitmap(&self) -> &[AtomicU32] {
        let g = &self.geometry;
        // SAFETY: `inline_offset` is 64-byte aligned and `inline_offset + inline::area_size(ports)
        // == file_size` (checked or computed as above); the bitmap's `ports / 32` words are the
        // area's first bytes, inside the live mapping; every process reaches them only atomically.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(g.inline_offset()).cast::<AtomicU32>(),
                g.layout().ports() as usize / 32,
            )
        }
    }

    /// The ready bitmap: one bit per port, set by a worker that answered a waking request (see
    /// `inline::ring`).
    pub(crate) fn inline_ready(&self) -> &[AtomicU32] {
        let g = &self.geometry;
        let ports = g.layout().ports();
        // SAFETY: the ready bitmap's `ports / 32` words start `inline::ready_offset(ports)` (a
        // multiple of 64) into the inline area, after the wide lines and before the doorbell, inside
        // the live mapping (`inline_offset + inline::area_size(ports) <= file_size`, checked or
        // computed as above); every process reaches them only atomically.
        unsafe {
            std::slice::from_raw_parts(
                self.map
                    .as_ptr()
                    .add(g.inline_offset() + crate::inline::ready_offset(ports))
                    .cast::<AtomicU32>(),
                ports as usize / 32,
            )
        }
    }

    /// The doorbell the async clients' reactors sleep on (see `inline::ring`).
    pub(crate) fn doorbell(&self) -> &crate::inline::Doorbell {
        let g = &self.geometry;
        let ports = g.layout().ports();
        // SAFETY: the doorbell's line starts `inline::doorbell_offset(ports)` (a multiple of 64)
        // into the inline area, inside the live mapping (as above); a `Doorbell` is 64 bytes of
        // atomics, valid for any bits, reached only atomically.
        unsafe {
            &*self
                .map
                .as_ptr()
                .add(g.inline_offset() + crate::inline::doorbell_offset(ports))
                .cast::<crate::inline::Doorbell>()
        }
    }

    /// The head lines, one per port (see `inline`).
    #[inline(always)]
    pub(crate) fn inline_lines(&self) -> &[crate::inline::Line] {
        // SAFETY: the head lines start `inline::lines_offset(ports)` (a multiple of 64) into the
        // inline area, at `lines_at` in the mapping, one per port, before the wide lines; a `Line`
        // is 64 bytes of `AtomicU64`.
        unsafe { self.per_port(self.lines_at) }
    }

    /// The wide lines, [`WIDE_LINES`](crate::inline::WIDE_LINES) per port (see `inline`).
    #[inline(always)]
    pub(crate) fn inline_wide(&self) -> &[crate::inline::Wide] {
        // SAFETY: the wide lines start `inline::wide_offset(ports)` (a multiple of 64) into the
        // inline area, at `wide_at` in the mapping, after the head lines, one `Wide` per port
        // before the ready bitmap, inside the area (`inline::area_size`); a `Wide` is
        // `WIDE_LINES` lines of `AtomicU64`.
        unsafe { self.per_port(self.wide_at) }
    }

    /// One `T` per port, from byte `at` of the mapping on.
    ///
    /// # Safety
    ///
    /// `at` is aligned for `T`, and one `T` per port from there lies inside the inline area
    /// (`inline::area_size`); `T` is made of atomics only (valid for any bits, as every process
    /// reaches them only atomically).
    #[inline(always)]
    unsafe fn per_port<T>(&self, at: usize) -> &[T] {
        // SAFETY: the inline area lies inside the live mapping (`inline_offset +
        // inline::area_size(ports) <= file_size`, checked by `Geometry::decode` or computed by
        // `Geometry::new`), and the caller keeps the slice inside it, aligned, of atomics.
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_ptr().add(at).cast::<T>(),
                self.geometry.layout().ports() as usize,
            )
        }
    }

    /// The header as 32-bit words, the state word among them (the monitor puts back what a stray
    /// write changed).
    pub(crate) fn header_words(&self) -> &[AtomicU32] {
        // SAFETY: the header is the mapping's first `HEADER_SIZE` bytes (the file is at least
        // that long: checked by `Geometry::decode` or written by `create`), page aligned; every
        // process reads it with `pread` before mapping and, once mapped, accesses its words only
        // atomically.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU32>(), HEADER_SIZE / 4)
        }
    }

    /// The header's state word.
    pub(crate) fn state(&self) -> &AtomicU32 {
        // SAFETY: offset 84 is 4-byte aligned and inside the header, inside the mapping; the state
        // word is only accessed atomically, by every process.
        unsafe { &*self.map.as_ptr().add(STATE_OFFSET).cast::<AtomicU32>() }
    }

    /// Whether the name still names this very file.
    pub(crate) fn still_named(&self) -> bool {
        same_file(&self.file, &self.path)
    }
}

fn same_file(file: &File, path: &Path) -> bool {
    match (
        rustix::fs::fstat(file),
        rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW),
    ) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

fn open_existing(path: &Path) -> Result<File, ShmError> {
    match rustix::fs::openat(
        CWD,
        path,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => {
            let file = File::from(fd);
            let stat = rustix::fs::fstat(&file).map_err(|e| io("inspecting", path, e))?;
            if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                != rustix::fs::FileType::RegularFile
            {
                return Err(ShmError::NotRegular(path.to_path_buf()));
            }
            Ok(file)
        }
        Err(rustix::io::Errno::LOOP) => Err(ShmError::Symlink(path.to_path_buf())),
        Err(e) => Err(io("opening", path, e)),
    }
}

/// What `create` found under the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    /// The name was free.
    Fresh,
    /// A stale file of a dead server was replaced.
    ReplacedStale,
}

/// Creates a temporary file beside `path` (`O_EXCL`, 0600). Its name has a fixed length, whatever
/// the final name's (any name that fits the directory can be served): `.ferry-` and 16 hex
/// digits of this process's id, the clock and a counter, then `.tmp`; a name taken already (by a
/// leftover of a crashed server, say) is passed over for the next.
fn create_temporary(path: &Path) -> Result<(PathBuf, rustix::fd::OwnedFd), ShmError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = (u64::from(std::process::id()) << 40) ^ nanos.rotate_left(17) ^ n;
        let tmp = path.with_file_name(format!(".ferry-{tag:016x}.tmp"));
        match rustix::fs::openat(
            CWD,
            &tmp,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(rustix::io::Errno::EXIST) => last = Some(tmp),
            Err(e) => return Err(io("creating", &tmp, e)),
        }
    }
    let tmp = last.unwrap_or_else(|| path.to_path_buf());
    Err(io("creating", &tmp, rustix::io::Errno::EXIST))
}

/// Creates, fills, locks and publishes the file for `geometry` at `path`, with the services table
/// of `services` and their `calls` (whose bytes, `table_bytes(services, calls)`, are `table`).
pub(crate) fn create(
    path: &Path,
    geometry: &Geometry,
    (services, calls): (&[(&str, u64)], &[String]),
    table: &[u8],
) -> Result<(Mapped, Created), ShmError> {
    if path.file_name().is_none() {
        return Err(io("creating", path, std::io::ErrorKind::InvalidInput));
    }
    let (tmp, fd) = create_temporary(path)?;
    let file = File::from(fd);
    let result = fill_and_publish(&file, &tmp, path, geometry, table);
    // The temporary name goes whatever happened; the published name (a hard link) stays.
    let _ = rustix::fs::unlinkat(CWD, &tmp, AtFlags::empty());
    let created = result?;
    let services = services.iter().map(|&(n, f)| (n.to_string(), f)).collect();
    let tables = (services, calls.to_vec());
    Ok((Mapped::new(file, *geometry, tables, path)?, created))
}

fn fill_and_publish(
    file: &File,
    tmp: &Path,
    path: &Path,
    geometry: &Geometry,
    table: &[u8],
) -> Result<Created, ShmError> {
    rustix::fs::fchmod(file, Mode::from_raw_mode(0o600)).map_err(|e| io("chmod", tmp, e))?;
    rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive)
        .map_err(|e| io("locking", tmp, e))?;
    reserve(file, tmp, path, geometry.file_size() as u64)?;
    file.write_all_at(&geometry.encode(), 0)
        .map_err(|e| io("writing the header of", tmp, e))?;
    file.write_all_at(table, geometry.services_offset() as u64)
        .map_err(|e| io("writing the services table of", tmp, e))?;
    let mut created = Created::Fresh;
    for _ in 0..8 {
        match rustix::fs::linkat(CWD, tmp, CWD, path, AtFlags::empty()) {
            Ok(()) => return Ok(created),
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(io("publishing", path, e)),
        }
        let old = match open_existing(path) {
            Ok(f) => f,
            // Gone in between (its server shut down): try again.
            Err(ShmError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                continue
            }
            Err(e) => return Err(e),
        };
        match rustix::fs::flock(&old, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(ShmError::AlreadyServing {
                    path: path.to_path_buf(),
                    pid: read_pid(&old),
                })
            }
            Err(e) => return Err(io("locking", path, e)),
        }
        // We hold the old file's lock: no other new server can judge it now. Only a file proven
        // to be a ferry file whose server is gone is ours to replace; anything else (a user's
        // file under a mistyped name, another program's) is left untouched.
        check_stale(&old, path)?;
        // Remove it only if the name still names it (another server may have replaced it
        // already).
        if same_file(&old, path) {
            rustix::fs::unlinkat(CWD, path, AtFlags::empty())
                .map_err(|e| io("removing the stale", path, e))?;
            created = Created::ReplacedStale;
        }
    }
    Err(ShmError::AlreadyServing {
        path: path.to_path_buf(),
        pid: None,
    })
}

/// Sizes the file to `size` bytes with every page reserved, so that a file system without room
/// for it fails here, with [`ShmError::NoRoom`], rather than at the first touch of an unbacked
/// page (a `SIGBUS` in the server and its clients, long after start). A file system that cannot
/// reserve (`fallocate` unsupported) gets each page written instead.
fn reserve(file: &File, tmp: &Path, path: &Path, size: u64) -> Result<(), ShmError> {
    let no_room = || ShmError::NoRoom {
        path: path.to_path_buf(),
        bytes: size,
    };
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::NOSPC) | Err(rustix::io::Errno::FBIG) => return Err(no_room()),
        Err(rustix::io::Errno::OPNOTSUPP) => {}
        Err(e) => return Err(io("reserving the pages of", tmp, e)),
    }
    rustix::fs::ftruncate(file, size).map_err(|e| io("sizing", tmp, e))?;
    const PAGE: u64 = 4096;
    let zeros = [0u8; PAGE as usize];
    let mut at = 0;
    while at < size {
        let n = PAGE.min(size - at) as usize;
        file.write_all_at(&zeros[..n], at).map_err(|e| {
            if matches!(e.raw_os_error(), Some(c) if c == rustix::io::Errno::NOSPC.raw_os_error()) {
                no_room()
            } else {
                io("writing the pages of", tmp, e)
            }
        })?;
        at += PAGE;
    }
    Ok(())
}

/// Checks that `old`, whose lock this side holds, is a stale ferry file: its first bytes are
/// the ferry magic and a format version ferry has written, and, where its header is whole and of
/// this version, the server it names is not running. Anything else is
/// [`ShmError::NotStale`]: a file ferry did not write is never replaced.
fn check_stale(old: &File, path: &Path) -> Result<(), ShmError> {
    let size = rustix::fs::fstat(old)
        .map_err(|e| io("inspecting", path, e))?
        .st_size as u64;
    let (head, got) = read_head(old, path)?;
    let refuse = |why: &str| ShmError::NotStale {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if got < 12 || head[0..8] != MAGIC {
        return Err(refuse("it is not a ferry shared-memory file"));
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version == 0 || version > FORMAT_VERSION {
        return Err(refuse(&format!(
            "its format version {version} is not one this ferry knows"
        )));
    }
    if version == FORMAT_VERSION {
        // A whole header names its server: one still running is not gone, even with its lock
        // free (a file it no longer locks, held open by a process of its own).
        if let Ok(g) = Geometry::decode(&head[..got], size, None) {
            if process_alive(g.server_pid(), g.server_start()) {
                return Err(ShmError::AlreadyServing {
                    path: path.to_path_buf(),
                    pid: Some(g.server_pid()),
                });
            }
        }
    }
    Ok(())
}

/// The file's first bytes, up to a header's worth, and how many it has.
fn read_head(file: &File, path: &Path) -> Result<([u8; HEADER_SIZE], usize), ShmError> {
    let mut head = [0u8; HEADER_SIZE];
    let mut got = 0;
    while got < HEADER_SIZE {
        match file.read_at(&mut head[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io("reading the header of", path, e)),
        }
    }
    Ok((head, got))
}

fn read_pid(file: &File) -> Option<u32> {
    let mut h = [0u8; HEADER_SIZE];
    file.read_exact_at(&mut h, 0).ok()?;
    Some(u32::from_le_bytes(h[80..84].try_into().ok()?))
}

/// Attaches to the file at `path`, checking its header, its real size, its services table (and
/// that it lists each of `expected`, by name and fingerprint), and its server's liveness.
pub(crate) fn attach(path: &Path, expected: &[(&'static str, u64)]) -> Result<Mapped, ShmError> {
    let file = open_existing(path)?;
    let size = rustix::fs::fstat(&file)
        .map_err(|e| io("inspecting", path, e))?
        .st_size as u64;
    let (head, got) = read_head(&file, path)?;
    let geometry =
        Geometry::decode(&head[..got], size, None).map_err(|error| ShmError::Header {
            path: path.to_path_buf(),
            error,
        })?;
    let entries = geometry.services() as usize;
    let mut table = vec![0u8; entries * SERVICE_ENTRY + geometry.calls_bytes()];
    file.read_exact_at(&mut table, geometry.services_offset() as u64)
        .map_err(|e| io("reading the services table of", path, e))?;
    let parsed = parse_table(&table, geometry.fingerprint(), entries);
    let parsed = parsed.ok_or_else(|| ShmError::Header {
        path: path.to_path_buf(),
        error: crate::header::HeaderError {
            field: "services_hash",
            found: geometry.fingerprint(),
            expected: "the hash of a well-formed services table and calls table (corrupted)".into(),
        },
    })?;
    let (services, calls): (Vec<(String, u64)>, Vec<String>) = parsed
        .into_iter()
        .map(|(name, fp, text)| ((name, fp), text))
        .unzip();
    for &(service, expected) in expected {
        let served = services.iter().find(|(n, _)| n == service).map(|&(_, f)| f);
        if served != Some(expected) {
            return Err(ShmError::NotServed {
                path: path.to_path_buf(),
                service,
                expected,
                served,
            });
        }
    }
    let mapped = Mapped::new(file, geometry, (services, calls), path)?;
    let state = mapped.state().load(crate::sync::Ordering::Acquire);
    if state == STATE_STOPPED || !process_alive(geometry.server_pid(), geometry.server_start()) {
        return Err(ShmError::NoServer {
            path: path.to_path_buf(),
            pid: geometry.server_pid(),
        });
    }
    if state != STATE_SERVING {
        return Err(ShmError::ShuttingDown);
    }
    Ok(mapped)
}
