//! The host side of [`Libc`]: the [`LibcServer`] a GPU program's C-library calls reach.
//!
//! [`LibcHost`] serves the trait `#[derive(RpcOpcodes)]` generated from [`Libc`] through the
//! generated dispatch, over any transport: [`LibcHost::dispatch`] takes any server port (a GPU
//! region's, a shared-memory file's) and the id of the client calling on it, and `LibcHost` is
//! a [`Handler`] on any transport (every call for one client, [`PROGRAM`]: a GPU program).
//!
//! To serve it with other services on one region, bind the host to its client:
//! [`LibcHost::for_program`] (a GPU region's one program) or [`LibcHost::for_caller`] give a
//! [`ForCaller`], which implements [`LibcServer`], so `Libc::server(host.for_program())` serves it
//! (`Tally::server(mine).and(Libc::server(host.for_program()))`). Calls served that way are counted
//! by the server (`ferry_gpu::ServeStats::by_opcode`), not by [`LibcHost::counts`],
//! which counts the calls [`LibcHost::dispatch`] serves.
//!
//! What it owns:
//! - **output**: standard output and error writers; each lane's printed bytes are written whole,
//!   lanes in order, under the writer's lock;
//! - **files**: a table of open files, in shards (each serving thread opens into its own, so
//!   threads serving at once do not queue on one lock); the device gets opaque handles
//!   `generation << 32 | slot × 16 + shard + 3` (1 and 2 are standard output and error), checked
//!   on every call: an id never handed out, one
//!   whose file was closed (its slot's generation moved on), or one another client opened, is
//!   [`HostError::BadHandle`]. Only regular files of data open ([`HostError::NotAFile`]; not the
//!   kernel's interface files under `/proc` and `/sys`, which look regular): a FIFO, a device or a
//!   socket could make the serving thread wait on a party the client chose. Each client may hold
//!   [`LibcConfig::max_files_per_client`] handles, all of them [`LibcConfig::max_files`]
//!   ([`HostError::TooManyOpen`]). A file another program holds locked for exclusive use
//!   (`flock`), as every live ferry server holds its shared-memory file, is not opened for
//!   writing, removed, renamed or renamed onto ([`HostError::Busy`]; `w` empties a file only after that check): a region
//!   file emptied under its server kills the server and its clients (`SIGBUS`), and one
//!   unnamed or replaced leaves new clients nowhere to attach. What is left: `system`, when
//!   turned on, can do anything; a directory above a region file can still be renamed (its
//!   server then leaves the file where it went when it stops: it removes only a name that
//!   still names its file);
//! - **shared read-only descriptors**: a client's read-only opens ([`mode::READ`] alone) of one
//!   file share one descriptor of this process per serving thread (at most 16 for the file:
//!   threads on descriptors of their own do not contend for one in the kernel), so that every
//!   thread of a GPU program may open the same input: each handle keeps its own position (its reads are `pread`s at it; `seek`
//!   and `tell` move and tell it; nothing moves the descriptor's offset), and the descriptor
//!   closes with the file's last handle (or its client's end, [`LibcHost::reclaim_gone`]).
//!   A read-only open looks the path up first (`stat`, following links as `open` does) and
//!   shares only if the path names, at that moment, the very file the client's descriptor holds
//!   (the same device and inode: a descriptor held keeps its inode's number from being reused)
//!   and this process may read it (`faccessat`): so it sees the same file a fresh open would. A
//!   file changed in place is that file, seen as a fresh descriptor sees it; a file replaced
//!   (renamed over, removed and made again) is another inode, opened afresh, while the handles
//!   of the old one go on reading the old one; a file no longer readable is opened afresh, and
//!   refused. (A network file system that checks for changes at each open, as NFS's
//!   close-to-open consistency does, is not asked again for a shared one.) Opens that can write
//!   get descriptors of their own, never shared (the checks above apply to them as before), as
//!   does every open of another client. Descriptors, unlike handles, are the operating system's:
//!   an open that finds none left (this process's `RLIMIT_NOFILE`, or the system's table) is
//!   [`HostError::NoDescriptors`], told apart from the host's own limits, and each kind of
//!   refusal is counted ([`LibcHost::refusals`]). A call on an open file takes no descriptor:
//!   reads and writes at an offset use the handle's own (no duplicate is made);
//! - **the heap**: memory the host reserved before launch ([`Arena`]), handed out as addresses
//!   `base + offset` that this side computes and never dereferences; a block is the client's that
//!   allocated it, and only that client may free it. Each client may hold
//!   [`LibcConfig::max_heap_per_client`] of it (a quarter by default; the GPU loader gives its
//!   one program the whole heap);
//! - **exit and abort**: recorded, or the end of this process ([`ExitPolicy`]);
//! - **a clock**; and **`system`**, refused ([`HostError::Disabled`]) unless
//!   [`LibcConfig::allow_system`];
//! - **copies between files and device memory** ([`Libc::ReadToDevice`],
//!   [`Libc::WriteFromDevice`]) through a [`DeviceCopy`] the transport gives
//!   ([`LibcConfig::device`]; `ferry_gpu`'s moves the bytes with the GPU's copy engine through
//!   pinned staging buffers): the host hands the device's address to the driver, which refuses
//!   a range that is not the device's memory, and never dereferences it itself.
//!
//! Every length the device sends is bounded: streamed requests by the calls' `limit`s (a longer
//! stream is refused before any handler runs), read lengths clamped to [`IO_LIMIT`], allocation
//! sizes checked against the arena. Every failure is a [`HostError`] in the reply, never a panic.
//!
//! **Clients.** What a call opens or allocates belongs to the client [`LibcHost::dispatch`] was
//! given. A client that is gone does not hold its files and blocks for long: the transport's
//! server calls [`Handler::reclaim`] now and then (`ferry_shm`'s monitor, every
//! `reclaim_interval`), which frees the files and blocks of every client that
//! [`LibcConfig::client_alive`] says is gone ([`LibcHost::reclaim_gone`]), so they come back
//! within about one interval of its end (a handler that serves the host by hand, passing each
//! call's client to [`LibcHost::dispatch`], forwards it: `fn reclaim(&self) {
//! self.host.reclaim_gone(); }`); and an open that finds the table or the client's quota full,
//! or a `malloc` that finds no room, does the same first.
//!
//! **Waiting.** A call waits only on the host's own resources, never on a party the client picked:
//! opens are non-blocking (`O_NONBLOCK`, cleared once the file is known to be regular) and never
//! take a controlling terminal (`O_NOCTTY`); reads, writes, seeks and flushes reach regular files
//! only, so they wait on the disk, not on a writer or reader. What remains: a file system that
//! does not answer (a hung network mount, a FUSE server) stalls the calls on its files and, since
//! file calls take their shard of the table's lock, the other file calls of that shard (the
//! handles one serving thread opened); the output streams block while the
//! host's own standard output or error is full (the user's setup, not the client's); and
//! `system`, off by default, waits for its command (see [`LibcConfig::allow_system`]).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Deref;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

mod ahead;
mod files;

use files::{FileLimits, FileTable, Limit, ShareKey};

use ferry_rpc::service::{with_stream_buffers, Dispatch, Handler, Served, Service};
use ferry_rpc::{Lanes, Mailbox, Port, Server, Single, Wait};

// The definition, so that a host program finds everything it serves here.
pub use ferry_libc::{
    mode, opcode, ClockReading, Handle, HostError, Libc, LibcClient, LibcError, LibcServer,
    ENV_LIMIT, IO_CHUNK, IO_LIMIT, PATH_LIMIT, PRINT_CHUNK, SEEK_CUR, SEEK_END, SEEK_SET, STDERR,
    STDOUT, SYSTEM_LIMIT,
};

/// Who calls on a GPU region's ports: the one program running on the GPU, as the caller id
/// [`LibcHost::dispatch`] is given by a server that does not tell its clients apart. A region
/// serves one program, so every call served there has this id.
pub const PROGRAM: u64 = 1;

/// What to do when the program asks to exit or abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitPolicy {
    /// Flush the output and end this process with the program's code at once (lines other
    /// warps still have in flight are lost, as with C's `exit` from another thread).
    Process,
    /// Record the code (the first one wins) and answer the call; the run ends when the program
    /// does (the loader `rpc-gpu-run`, tests, embedders).
    Record,
}

/// The first handle index of a file (0 is never a handle, 1 and 2 are the output streams).
const FIRST_FILE: u64 = 3;

/// Memory reserved before launch, from which `malloc` hands out blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arena {
    /// The address of the first byte, as the device sees it.
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Device memory that [`Libc::ReadToDevice`] and [`Libc::WriteFromDevice`] copy to and from:
/// a GPU's, through its driver and copy engine (`ferry_gpu` gives one), or a test's model of it.
///
/// An implementation hands the device's addresses to whatever validates them (the driver) and
/// never dereferences one in host memory; it refuses a range that is not the device's memory
/// with [`HostError::BadAddress`] before copying anything, and answers a failure of `read` or
/// `write` (the file's side) with [`HostError::Io`].
///
/// **Announcing.** A call may name an [`Announce`]: a word of device memory and a value. The
/// implementation then checks the word first ([`HostError::BadAddress`], nothing copied and
/// nothing announced, if it is not 4 aligned bytes of the device's memory) and, whatever the
/// copy's outcome, writes the value there once the copy is over: for `fill`, after the bytes
/// are in place in device memory (an implementation may return before that: the client waits
/// for the value, not for the reply); for `drain`, after the bytes were read out. It writes each
/// checked word once, on every way out, errors included; only a device that takes no write at
/// all (its driver gone) leaves one unwritten, and then the call's error says so.
pub trait DeviceCopy: Send + Sync {
    /// Fills device memory from `address` on with the source's bytes: `read(at, buf)` fills
    /// `buf` with the bytes `at ..` of the source (counted from the transfer's start) and
    /// returns how many it put there (fewer only at the source's end, 0 past it). `read` may be
    /// called from several threads at once, for different parts. Stops after `len` bytes or at
    /// the source's end; returns the bytes copied. Announces the end at `done` if given.
    fn fill(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        read: &(dyn Fn(u64, &mut [u8]) -> io::Result<usize> + Sync),
    ) -> Result<u64, HostError>;

    /// Passes the `len` bytes of device memory from `address` on to `write(at, bytes)` (`at`
    /// counted from the transfer's start), in pieces, possibly from several threads at once;
    /// returns the bytes passed. Announces the end at `done` if given.
    fn drain(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        write: &(dyn Fn(u64, &[u8]) -> io::Result<()> + Sync),
    ) -> Result<u64, HostError>;

    /// Announces the end of a call that ended before any copy (a file handle that names no
    /// file): writes `done.value` to the word at `done.address`, or [`HostError::BadAddress`]
    /// if that is not 4 aligned bytes of the device's memory.
    fn announce(&self, done: Announce) -> Result<(), HostError>;
}

/// Where and what a copy announces when it is over (see [`DeviceCopy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announce {
    /// The address of a 32-bit word of device memory.
    pub address: u64,
    /// The value to write there.
    pub value: u32,
}

impl Announce {
    /// The announce a request names: `None` for address 0.
    pub fn named(address: u64, value: u32) -> Option<Announce> {
        (address != 0).then_some(Announce { address, value })
    }
}

/// The alignment of every block `malloc` hands out.
pub const HEAP_ALIGN: u64 = 16;

/// How much of the heap one client may hold at once ([`LibcConfig::max_heap_per_client`]): a
/// `malloc` that would take its client past it is [`HostError::OutOfMemory`], however much of
/// the heap is free. Blocks count by the bytes they take (sizes rounded up to [`HEAP_ALIGN`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapQuota {
    /// At most this many bytes.
    Bytes(u64),
    /// At most the heap's size divided by this (`Share(4)`: a quarter of it; 0 counts as 1).
    Share(u64),
    /// The whole heap: no quota (a GPU region's one program, the only client there is).
    Whole,
}

impl HeapQuota {
    /// The most bytes one client may hold of a heap of `size` bytes.
    pub fn bytes(self, size: u64) -> u64 {
        match self {
            HeapQuota::Bytes(bytes) => bytes,
            HeapQuota::Share(n) => size / n.max(1),
            HeapQuota::Whole => u64::MAX,
        }
    }
}

/// [`LibcConfig::max_heap_per_client`]'s default: a quarter of the heap (as 64 of the 256
/// files are each client's by default).
pub const DEFAULT_HEAP_QUOTA: HeapQuota = HeapQuota::Share(4);

/// The heap a GPU program's `malloc` serves from by default, the same on the GPU (`ferry_gpu`'s
/// loader, in device memory) and on CPU threads (`ferry_device::sim::run_program`, in host
/// memory): 64 MiB.
pub const PROGRAM_HEAP: usize = 64 << 20;

/// The file handles a GPU program may hold at once by default, on the GPU and on CPU threads
/// alike: more than a GPU runs threads at once, so that every thread of the largest launch may
/// hold a few (a handle is a slot of the host's table; read-only handles of one file share a
/// few descriptors, so the process's descriptor limit bounds the distinct files, not the handles).
pub const PROGRAM_MAX_FILES: usize = 1 << 20;

/// How the host serves the calls.
pub struct LibcConfig {
    /// Where [`Libc::Print`] goes.
    pub stdout: Box<dyn Write + Send>,
    /// Where [`Libc::EPrint`] goes.
    pub stderr: Box<dyn Write + Send>,
    /// The reserved heap (`None`: every `malloc` is out of memory).
    pub heap: Option<Arena>,
    /// What exit and abort do.
    pub exit: ExitPolicy,
    /// Whether [`Libc::System`] runs commands (off unless the user turns it on). The call waits
    /// for the command, however long it runs, holding one serving thread: turn it on only for
    /// clients trusted to run commands on this host.
    pub allow_system: bool,
    /// Whether [`Libc::GetEnv`] reads this process's environment as it is when the host is made
    /// (off unless the user turns it on: the loader does, a GPU program's environment being its
    /// loader's, as a child's is its parent's at its start). Off, every `getenv` is
    /// [`HostError::Disabled`].
    pub give_environment: bool,
    /// The most file handles open at once, all clients together (the file table's size). An
    /// open past it is [`HostError::TooManyOpen`]. A handle is a slot of the table: read-only
    /// handles of one file share a descriptor (see the module docs), so this bounds this
    /// process's descriptors only for the others; the operating system's own limit
    /// (`RLIMIT_NOFILE`) still applies ([`HostError::NoDescriptors`]).
    pub max_files: usize,
    /// The most file handles one client holds at once (a GPU program is one client; over shared
    /// memory, each client process is one), so that no client takes the whole table. An open
    /// past it is [`HostError::TooManyOpen`].
    pub max_files_per_client: usize,
    /// The most of the heap one client holds at once, so that no client takes the whole heap
    /// and leaves the others none: a `malloc` past it is [`HostError::OutOfMemory`]. Default
    /// [`DEFAULT_HEAP_QUOTA`], a quarter of the heap. A GPU region serves one program, which
    /// the loader (`ferry_gpu::Program`) gives the whole heap ([`HeapQuota::Whole`]).
    pub max_heap_per_client: HeapQuota,
    /// Whether the client with an id [`LibcHost::dispatch`] was given is still alive (`false`
    /// only when it is surely gone for good: what it holds is freed). The files and
    /// blocks of clients this says are gone are freed by [`LibcHost::reclaim_gone`]: now and
    /// then by the transport's server (`ferry_shm`'s monitor, every `reclaim_interval`, through
    /// [`Handler::reclaim`]), and whenever an open finds the file table or the client's quota
    /// full, or a `malloc` finds no room. The default says every client is alive: right for a
    /// GPU program, served while it runs. Over shared memory, pass
    /// `|id| ferry_shm::owner::holder_alive(id as u32)`.
    pub client_alive: fn(u64) -> bool,
    /// The device memory [`Libc::ReadToDevice`] and [`Libc::WriteFromDevice`] copy to and from
    /// (`None`: they answer [`HostError::NoDeviceMemory`]). `ferry_gpu`'s loader gives its GPU's.
    pub device: Option<Arc<dyn DeviceCopy>>,
}

impl Default for LibcConfig {
    /// This process's standard output and error, no heap (a quarter of it a client when one is
    /// given), exit recorded, `system` off, 256 files, 64 a client, every client alive.
    fn default() -> Self {
        LibcConfig {
            stdout: Box::new(io::stdout()),
            stderr: Box::new(io::stderr()),
            heap: None,
            exit: ExitPolicy::Record,
            allow_system: false,
            give_environment: false,
            max_files: 256,
            max_files_per_client: 64,
            max_heap_per_client: DEFAULT_HEAP_QUOTA,
            client_alive: |_| true,
            device: None,
        }
    }
}

/// A host's standard output or error.
type Output = Arc<Mutex<Box<dyn Write + Send>>>;

/// Text held back for outputs, each output's in the order it was served.
type Held = Vec<(Output, Vec<u8>)>;

/// A path looked up, and the device and inode of the readable regular file it named, if any.
type LookedUp = Option<(String, Option<(u64, u64)>)>;

std::thread_local! {
    /// The prints this thread served and holds back until the end of the message
    /// ([`batch_per_message`]), by output: `None` while it writes each at once.
    static HELD: core::cell::RefCell<Option<Held>> =
        const { core::cell::RefCell::new(None) };
    /// The last path a read-only open of this message looked up, and what it found
    /// ([`batch_per_message`]; forgotten at [`end_message`]).
    static LOOKED_UP: core::cell::RefCell<LookedUp> =
        const { core::cell::RefCell::new(None) };
    /// The size of the last shared descriptor a size call of this message read, by its shard
    /// and share ([`batch_per_message`]; forgotten at [`end_message`]).
    static SIZED: core::cell::RefCell<Option<((usize, ShareKey), u64)>> =
        const { core::cell::RefCell::new(None) };
}

/// Whether the calling thread serves messages whole ([`batch_per_message`]).
fn serving_messages() -> bool {
    HELD.with(|h| h.borrow().is_some())
}

/// Makes the calling thread, a server thread, do once a message (up to a warp's 32 lanes) what the
/// message's lanes share, until it calls [`end_message`], which it does once a message is served
/// and before its port goes back, so that server threads serving at once do not queue on shared
/// state lane by lane:
/// - it holds back the text of the prints ([`Libc::Print`], [`Libc::EPrint`]) it serves and
///   writes it under one lock of the output; a client still finds its text written when its port
///   comes back (what `host::Printer` orders its lines by);
/// - the lanes' read-only opens of one path look it up once (`stat` and `faccessat`, see the
///   module docs): opens of one message are made at one moment.
pub fn batch_per_message() {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            *h = Some(Vec::new());
        }
    });
}

/// Writes what the calling thread held back ([`batch_per_message`]), each output's text
/// under one lock, in the order it was served.
pub fn end_message() {
    LOOKED_UP.with(|l| l.borrow_mut().take());
    SIZED.with(|l| l.borrow_mut().take());
    ahead::end_message();
    files::end_message();
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        let Some(held) = h.as_mut() else {
            return;
        };
        for (out, text) in held.iter_mut().filter(|(_, t)| !t.is_empty()) {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = o.write_all(text);
            text.clear();
        }
        // Outputs of hosts that are gone.
        held.retain(|(out, _)| Arc::strong_count(out) > 1);
    });
}

/// Writes `text` to `out`, or holds it back if this thread does ([`batch_per_message`]).
fn write_output(out: &Output, text: &[u8]) {
    let held = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let Some(held) = h.as_mut() else {
            return false;
        };
        match held.iter_mut().find(|(o, _)| Arc::ptr_eq(o, out)) {
            Some((_, t)) => t.extend_from_slice(text),
            None => held.push((Arc::clone(out), text.to_vec())),
        }
        true
    });
    if !held {
        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = o.write_all(text);
    }
}

/// Why [`Heap::malloc`] has no block for a client (to the client, all are
/// [`HostError::OutOfMemory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refused {
    /// Larger than the whole heap.
    TooLarge,
    /// The block would take the client past its quota.
    Quota,
    /// No free block is that large.
    NoRoom,
}

impl From<Refused> for HostError {
    fn from(_: Refused) -> HostError {
        HostError::OutOfMemory
    }
}

/// First-fit allocation of offsets in an [`Arena`]; the memory itself is never touched here.
#[derive(Debug)]
struct Heap {
    arena: Arena,
    /// Free blocks: offset → length, never two adjacent.
    free: BTreeMap<u64, u64>,
    /// Blocks handed out: offset → (length, the client that allocated it).
    used: HashMap<u64, (u64, u64)>,
    /// Bytes each client holds (clients holding none have no entry).
    held: HashMap<u64, u64>,
    /// The most bytes one client may hold ([`LibcConfig::max_heap_per_client`]).
    quota: u64,
}

impl Heap {
    /// A heap of `arena` where each client holds at most `quota`.
    fn with_quota(arena: Arena, quota: HeapQuota) -> Heap {
        let mut heap = Heap::new(arena);
        heap.quota = quota.bytes(heap.arena.size);
        heap
    }

    /// A heap of `arena` with no quota.
    fn new(arena: Arena) -> Heap {
        // Start at the first aligned address inside the arena.
        let skip = arena.base.wrapping_neg() % HEAP_ALIGN;
        let size = arena.size.saturating_sub(skip) / HEAP_ALIGN * HEAP_ALIGN;
        let arena = Arena {
            base: arena.base + skip.min(arena.size),
            size,
        };
        let mut free = BTreeMap::new();
        if size > 0 {
            free.insert(0, size);
        }
        Heap {
            arena,
            free,
            used: HashMap::default(),
            held: HashMap::default(),
            quota: u64::MAX,
        }
    }

    /// A block of at least `size` bytes for `caller`.
    fn malloc(&mut self, size: u64, caller: u64) -> Result<u64, Refused> {
        let size = size
            .max(1)
            .checked_next_multiple_of(HEAP_ALIGN)
            .filter(|&size| size <= self.arena.size)
            .ok_or(Refused::TooLarge)?;
        let held = self.held.get(&caller).copied().unwrap_or(0);
        if held.saturating_add(size) > self.quota {
            return Err(Refused::Quota);
        }
        let (&offset, &len) = self
            .free
            .iter()
            .find(|(_, &len)| len >= size)
            .ok_or(Refused::NoRoom)?;
        self.free.remove(&offset);
        if len > size {
            self.free.insert(offset + size, len - size);
        }
        self.used.insert(offset, (size, caller));
        *self.held.entry(caller).or_insert(0) += size;
        Ok(self.arena.base + offset)
    }

    /// Takes the block at `offset` (`len` bytes, `owner`'s) back.
    fn take_back(&mut self, offset: u64, len: u64, owner: u64) {
        self.used.remove(&offset);
        if let Some(held) = self.held.get_mut(&owner) {
            *held -= len;
            if *held == 0 {
                self.held.remove(&owner);
            }
        }
        self.release(offset, len);
    }

    /// Frees `caller`'s block at `address`; another client's block is refused (and stays).
    fn free(&mut self, address: u64, caller: u64) -> Result<(), HostError> {
        let offset = address.wrapping_sub(self.arena.base);
        match self.used.get(&offset) {
            Some(&(len, owner)) if owner == caller => {
                self.take_back(offset, len, owner);
                Ok(())
            }
            _ => Err(HostError::BadPointer),
        }
    }

    /// The clients that hold blocks.
    fn holders(&self) -> impl Iterator<Item = u64> + '_ {
        self.held.keys().copied()
    }

    /// Frees every block of the clients in `gone`; the bytes freed.
    fn free_of(&mut self, gone: &[u64]) -> u64 {
        if !self.held.keys().any(|c| gone.contains(c)) {
            return 0;
        }
        let blocks: Vec<(u64, u64, u64)> = self
            .used
            .iter()
            .filter(|(_, (_, owner))| gone.contains(owner))
            .map(|(&offset, &(len, owner))| (offset, len, owner))
            .collect();
        let mut freed = 0;
        for (offset, len, owner) in blocks {
            self.take_back(offset, len, owner);
            freed += len;
        }
        freed
    }

    /// Returns the block `offset..offset + len` to the free list, merged with its neighbours.
    fn release(&mut self, offset: u64, mut len: u64) {
        let mut start = offset;
        // Merge with the free block after, then the one before.
        if let Some(next) = self.free.remove(&(offset + len)) {
            len += next;
        }
        if let Some((&prev, &plen)) = self.free.range(..offset).next_back() {
            if prev + plen == offset {
                self.free.remove(&prev);
                start = prev;
                len += plen;
            }
        }
        self.free.insert(start, len);
    }
}

/// What [`LibcHost::reclaim_gone`] freed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// Clients found gone that held files or blocks.
    pub clients: usize,
    /// Their files, closed.
    pub files: usize,
    /// The bytes of their heap blocks, freed.
    pub bytes: u64,
}

/// Opens refused for want of room so far, by cause ([`LibcHost::refusals`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenRefusals {
    /// The file table was full: [`LibcConfig::max_files`] handles open, all clients together
    /// ([`HostError::TooManyOpen`]).
    pub table: u64,
    /// The client held [`LibcConfig::max_files_per_client`] handles
    /// ([`HostError::TooManyOpen`]).
    pub client: u64,
    /// This process had no descriptor left ([`HostError::NoDescriptors`]): its limit,
    /// `RLIMIT_NOFILE` ([`descriptor_limit`]), or the system's.
    pub descriptors: u64,
}

impl OpenRefusals {
    /// Every open refused.
    pub fn total(&self) -> u64 {
        self.table + self.client + self.descriptors
    }
}

/// This process's limit of open descriptors (the soft `RLIMIT_NOFILE`; `None`: none).
pub fn descriptor_limit() -> Option<u64> {
    use rustix::process::{getrlimit, Resource};
    getrlimit(Resource::Nofile).current
}

/// Raises this process's limit of open descriptors (the soft `RLIMIT_NOFILE`) to the most it
/// may be (the hard limit, or the system's most where that is unlimited), as a host serving
/// many files starts; returns the limit now (`None`: none). A limit that cannot be raised stays
/// as it was.
pub fn raise_descriptor_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    // An unlimited hard limit still leaves the soft one at most the system's `nr_open`.
    let most = now.maximum.or_else(|| {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|n| n.trim().parse().ok())
    });
    if let (Some(most), Some(current)) = (most, now.current) {
        if most > current {
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(most),
                    maximum: now.maximum,
                },
            );
        }
    }
    descriptor_limit()
}

/// Slots of the table that finds a served opcode's counter.
const COUNT_SLOTS: usize = 256;

/// An opcode's slot in that table: its bytes folded together (the hash opcodes differ in all of
/// them).
#[inline(always)]
fn fold(opcode: u32) -> usize {
    let x = opcode ^ (opcode >> 16);
    ((x ^ (x >> 8)) & (COUNT_SLOTS as u32 - 1)) as usize
}

/// What each call was served, by [`Libc::OPCODES`] index; the last entry counts unknown opcodes
/// and handshakes.
pub type CallCounts = [u64; Libc::CALLS + 1];

/// The host's C-library services (see the module docs).
pub struct LibcHost {
    stdout: Output,
    stderr: Output,
    /// The file table, in shards: each shard read-locked by the calls that only look a handle
    /// up (reads and writes at an offset, sizes), write-locked by the rest.
    files: FileTable,
    heap: Option<Mutex<Heap>>,
    exit: ExitPolicy,
    exit_code: Mutex<Option<i32>>,
    aborted: AtomicBool,
    allow_system: bool,
    /// The environment `getenv` answers from, taken when the host was made (`None`: off): read
    /// without the process environment's lock, by every server thread at once.
    environment: Option<HashMap<String, Result<String, HostError>>>,
    /// Opens refused for want of room, by cause: [`Limit::Table`], [`Limit::Client`], then
    /// descriptors ([`HostError::NoDescriptors`]).
    refused: [AtomicU64; 3],
    client_alive: fn(u64) -> bool,
    device: Option<Arc<dyn DeviceCopy>>,
    start: Instant,
    counts: [AtomicU64; Libc::CALLS + 1],
    /// Where a served call is counted: `slots[fold(opcode)]` is 1 + the opcode's index in
    /// `Libc::OPCODES` (0: none), checked against the opcode itself; an opcode whose slot
    /// another took is found by search (`COUNT_SLOTS` is far above the call count, so rarely).
    count_slots: [u8; COUNT_SLOTS],
}

impl std::fmt::Debug for LibcHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibcHost")
            .field("exit", &self.exit)
            .field("allow_system", &self.allow_system)
            .finish_non_exhaustive()
    }
}

/// The error the device gets for a failed I/O call.
/// `result`, announcing the call's end at `done` first if it is an error (a copy call that ends
/// before its copy; the copy announces the others).
fn announced_unless<T>(
    device: &Arc<dyn DeviceCopy>,
    done: Option<Announce>,
    result: Result<T, HostError>,
) -> Result<T, HostError> {
    match (result, done) {
        (Err(e), Some(done)) => Err(device.announce(done).err().unwrap_or(e)),
        (result, _) => result,
    }
}

fn io_error(e: &io::Error) -> HostError {
    if e.raw_os_error().is_some_and(out_of_descriptors) {
        return HostError::NoDescriptors;
    }
    match e.kind() {
        io::ErrorKind::NotFound => HostError::NotFound,
        io::ErrorKind::PermissionDenied => HostError::Denied,
        io::ErrorKind::AlreadyExists => HostError::Exists,
        io::ErrorKind::InvalidInput => HostError::Invalid,
        _ => HostError::Io,
    }
}

/// Whether the OS error `code` says this process has no descriptor to give: its own limit is
/// reached (EMFILE, `RLIMIT_NOFILE`) or the system's (ENFILE).
fn out_of_descriptors(code: i32) -> bool {
    use rustix::io::Errno;
    code == Errno::MFILE.raw_os_error() || code == Errno::NFILE.raw_os_error()
}

/// A path from the device's text: not empty, no NUL.
fn path_of(text: &str) -> Result<&Path, HostError> {
    if text.is_empty() || text.contains('\0') {
        return Err(HostError::Invalid);
    }
    Ok(Path::new(text))
}

impl LibcHost {
    /// Services as `config` says.
    pub fn new(config: LibcConfig) -> LibcHost {
        LibcHost {
            stdout: Arc::new(Mutex::new(config.stdout)),
            stderr: Arc::new(Mutex::new(config.stderr)),
            files: FileTable::new(FileLimits {
                total: config.max_files,
                per_client: config.max_files_per_client,
            }),
            heap: config
                .heap
                .map(|a| Mutex::new(Heap::with_quota(a, config.max_heap_per_client))),
            exit: config.exit,
            exit_code: Mutex::new(None),
            aborted: AtomicBool::new(false),
            allow_system: config.allow_system,
            environment: config.give_environment.then(|| {
                std::env::vars_os()
                    .filter_map(|(k, v)| {
                        let value = match v.into_string() {
                            Ok(v) if v.len() <= ENV_LIMIT => Ok(v),
                            _ => Err(HostError::TooLong),
                        };
                        Some((k.into_string().ok()?, value))
                    })
                    .collect()
            }),
            refused: Default::default(),
            client_alive: config.client_alive,
            device: config.device,
            start: Instant::now(),
            counts: Default::default(),
            count_slots: {
                let mut slots = [0u8; COUNT_SLOTS];
                for (i, &opcode) in <Libc as Service>::OPCODES.iter().enumerate() {
                    let slot = &mut slots[fold(opcode)];
                    if *slot == 0 {
                        *slot = i as u8 + 1;
                    }
                }
                slots
            },
        }
    }

    /// Serves the call waiting on `port` through the generated dispatch (any transport), for the
    /// client `caller`, and counts it. What the call opens or allocates belongs to `caller`, and
    /// only calls for the same `caller` reach it. `caller` names the client process or program
    /// making the call, the same for all its calls: a GPU region's server passes [`PROGRAM`] (its
    /// calls all come from one program), a shared-memory server `ferry_shm::Caller::caller`
    /// of the port (the calling process; then set [`LibcConfig::client_alive`] to match, and
    /// have the handler's [`Handler::reclaim`] call [`reclaim_gone`](Self::reclaim_gone)).
    pub fn dispatch<L: Lanes, M: Mailbox, W: Wait>(
        &self,
        caller: u64,
        port: &mut Port<'_, '_, Server, L, M, W>,
    ) -> Result<Served, ferry_rpc::Error> {
        let call = self.for_caller(caller);
        let served =
            with_stream_buffers(|buffers| <Libc as Dispatch<_>>::dispatch(&call, port, buffers))?;
        let i = self.count_index(served.opcode);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        Ok(served)
    }

    /// The index in [`counts`](Self::counts) of a served call's opcode (the last: unknown).
    #[inline]
    fn count_index(&self, opcode: u32) -> usize {
        let opcodes = <Libc as Service>::OPCODES;
        match self.count_slots[fold(opcode)] {
            0 => Libc::CALLS,
            slot if opcodes[slot as usize - 1] == opcode => slot as usize - 1,
            _ => opcodes
                .iter()
                .position(|&o| o == opcode)
                .unwrap_or(Libc::CALLS),
        }
    }

    /// The host acting for client `caller`, as a [`LibcServer`]: `Libc::server(host.for_caller(id))`
    /// serves the calls with other services; what they open or allocate belongs to `caller` (see
    /// [`dispatch`](Self::dispatch)). Calls served through it are not counted in
    /// [`counts`](Self::counts).
    pub fn for_caller(&self, caller: u64) -> ForCaller<'_> {
        ForCaller { host: self, caller }
    }

    /// The host acting for the one program a GPU region serves ([`PROGRAM`]):
    /// `Tally::server(mine).and(Libc::server(host.for_program()))`.
    pub fn for_program(&self) -> ForCaller<'_> {
        self.for_caller(PROGRAM)
    }

    /// Calls served through [`dispatch`](Self::dispatch) (one per message, however many lanes it
    /// carried), by [`Libc::OPCODES`] index, then unknown opcodes and handshakes.
    pub fn counts(&self) -> CallCounts {
        core::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed))
    }

    /// Calls served with `opcode`: one of [`opcode`] (`opcode::PRINT`), or a call's own
    /// (`Libc::Exit { code: 0 }.opcode()`); any other counts with unknown opcodes and handshakes.
    pub fn count(&self, opcode: u32) -> u64 {
        let i = <Libc as Service>::OPCODES
            .iter()
            .position(|&o| o == opcode)
            .unwrap_or(Libc::CALLS);
        self.counts[i].load(Ordering::Relaxed)
    }

    /// The exit code the program asked for (with [`ExitPolicy::Record`]; the first one wins).
    pub fn exit_code(&self) -> Option<i32> {
        *self.exit_code.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the program called abort (with [`ExitPolicy::Record`]).
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }

    /// File handles open now, all clients together (read-only handles of one file share a
    /// descriptor: this process may hold fewer descriptors than handles).
    pub fn open_files(&self) -> usize {
        self.files.open()
    }

    /// How many opens were refused because the file table, or the client's share of it, was
    /// full ([`HostError::TooManyOpen`]): a loader tells its user to raise the limit. (Opens
    /// refused for want of descriptors, and each limit apart: [`refusals`](Self::refusals).)
    pub fn refused_opens(&self) -> u64 {
        let r = self.refusals();
        r.table + r.client
    }

    /// The opens refused for want of room so far, by cause: which of the host's limits of
    /// handles, or the process's of descriptors. A loader reports them to its user, with what
    /// raises each limit.
    pub fn refusals(&self) -> OpenRefusals {
        let [table, client, descriptors] =
            self.refused.each_ref().map(|n| n.load(Ordering::Relaxed));
        OpenRefusals {
            table,
            client,
            descriptors,
        }
    }

    /// Counts an open refused by `limit`; the error the client gets.
    fn refuse_open(&self, limit: Limit) -> HostError {
        self.refused[limit as usize].fetch_add(1, Ordering::Relaxed);
        HostError::TooManyOpen
    }

    /// `result`, an open's, with a refusal for want of descriptors counted.
    fn counted<T>(&self, result: Result<T, HostError>) -> Result<T, HostError> {
        if result.as_ref().err() == Some(&HostError::NoDescriptors) {
            self.refused[2].fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Bytes of the heap free now (`None` without a heap).
    pub fn heap_free(&self) -> Option<u64> {
        let heap = self.heap.as_ref()?;
        let heap = heap.lock().unwrap_or_else(|e| e.into_inner());
        Some(heap.free.values().sum())
    }

    /// Frees the files and heap blocks of every client that [`LibcConfig::client_alive`] says is
    /// gone; what it freed. The transport's server calls it now and then ([`Handler::reclaim`]:
    /// `ferry_shm`'s monitor every `reclaim_interval`, so a gone client's files are closed and
    /// its blocks free within about one interval, plus the time the looks at the clients take),
    /// and the host itself when an open or a `malloc` finds no room.
    ///
    /// It holds the file table's and the heap's locks only to list who holds something and to
    /// take back what the gone ones held: each client holding a file or a block is looked at
    /// (`client_alive`, one call per client) with no lock held, and the files are closed after
    /// the table's lock is let go. Each client holding something costs one look a call. (A call
    /// of a gone client still being served may open or allocate after the look: the next call
    /// frees that too.)
    pub fn reclaim_gone(&self) -> Reclaimed {
        let mut holders = self.files.holders();
        if let Some(heap) = &self.heap {
            let heap = heap.lock().unwrap_or_else(|e| e.into_inner());
            for client in heap.holders() {
                if !holders.contains(&client) {
                    holders.push(client);
                }
            }
        }
        let gone: Vec<u64> = holders
            .into_iter()
            .filter(|&c| !(self.client_alive)(c))
            .collect();
        if gone.is_empty() {
            return Reclaimed::default();
        }
        let closed = self.files.take_of(&gone);
        let bytes = self.heap.as_ref().map_or(0, |heap| {
            heap.lock()
                .unwrap_or_else(|e| e.into_inner())
                .free_of(&gone)
        });
        // The files are closed here, outside the table's lock.
        Reclaimed {
            clients: gone.len(),
            files: closed.len(),
            bytes,
        }
    }

    fn flush_outputs(&self) {
        let _ = self.stdout.lock().map(|mut o| o.flush());
        let _ = self.stderr.lock().map(|mut o| o.flush());
    }

    fn output(&self, handle: Handle) -> Option<&Output> {
        match handle {
            STDOUT => Some(&self.stdout),
            STDERR => Some(&self.stderr),
            _ => None,
        }
    }

    /// Takes room for one more file of `caller` (with `message`, from the room taken for the
    /// message the thread serves), after freeing what clients gone hold if the table or its
    /// quota is full; `Err` says which limit it reached.
    fn take_room(&self, caller: u64, message: bool) -> Result<(), Limit> {
        if self.files.take(caller, message).is_ok() {
            return Ok(());
        }
        self.reclaim_gone();
        self.files.take(caller, message)
    }

    /// `caller`'s file `handle`'s descriptor, for a call that reads or writes at an offset
    /// outside the table's lock (a large copy does not hold up the other file calls). A
    /// reference, not a duplicate: a call takes no descriptor of the process's (at its limit, a
    /// duplicate would fail every read of a file that is open). Closing the handle meanwhile
    /// closes the descriptor once the call is over.
    fn file_at(&self, caller: u64, handle: Handle) -> Result<Arc<File>, HostError> {
        let files = self.files.read(handle.0);
        Ok(Arc::clone(&files.get_ref(handle.0, caller)?.file))
    }

    /// [`file_at`](Self::file_at) for a write at an offset: [`HostError::Invalid`] for a handle
    /// opened for appending, where the system would put the bytes at the end of the file, not
    /// at the offset asked for.
    fn file_to_write_at(&self, caller: u64, handle: Handle) -> Result<Arc<File>, HostError> {
        let files = self.files.read(handle.0);
        let open = files.get_ref(handle.0, caller)?;
        match open.append {
            true => Err(HostError::Invalid),
            false => Ok(Arc::clone(&open.file)),
        }
    }

    /// Reads at most `len` bytes (at most [`IO_LIMIT`], with `line` [`IO_CHUNK`]) of `caller`'s
    /// file `handle`; with `line`, stops after a newline (and gives back what was read past it).
    fn read_data(
        &self,
        caller: u64,
        handle: Handle,
        len: u32,
        line: bool,
    ) -> Result<Vec<u8>, HostError> {
        let len = (len as usize).min(if line { IO_CHUNK } else { IO_LIMIT });
        let mut files = self.files.write(handle.0);
        let open = files.get(handle.0, caller)?;
        let mut data = vec![0u8; len];
        let mut got = 0;
        // A handle on a shared descriptor reads at its own position, which moves by what it keeps.
        let mut position = open.shared.map(|(_, at)| at);
        let file = &*open.file;
        while got < len {
            let read = match position {
                Some(at) => file.read_at(&mut data[got..], at.saturating_add(got as u64)),
                None => (&*file).read(&mut data[got..]),
            };
            match read {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&e)),
            }
            if line && data[..got].contains(&b'\n') {
                break;
            }
        }
        if line {
            if let Some(nl) = data[..got].iter().position(|&b| b == b'\n') {
                // Give back what was read past the newline.
                let extra = got - (nl + 1);
                if extra > 0 && position.is_none() {
                    (&*file)
                        .seek(SeekFrom::Current(-(extra as i64)))
                        .map_err(|e| io_error(&e))?;
                }
                got = nl + 1;
            }
        }
        if let (Some(at), Some((_, kept))) = (position.as_mut(), open.shared.as_mut()) {
            *at = at.saturating_add(got as u64);
            *kept = *at;
        }
        data.truncate(got);
        Ok(data)
    }
}

/// The host acting for one client ([`LibcHost::for_caller`], [`LibcHost::for_program`]): a
/// [`LibcServer`], so `Libc::server(host.for_program())` serves it with other services.
#[derive(Clone, Copy, Debug)]
pub struct ForCaller<'h> {
    host: &'h LibcHost,
    caller: u64,
}

impl ForCaller<'_> {
    /// The client the calls are served for.
    pub fn caller(&self) -> u64 {
        self.caller
    }
}

impl Deref for ForCaller<'_> {
    type Target = LibcHost;

    fn deref(&self) -> &LibcHost {
        self.host
    }
}

/// Whether another open file description holds `file` locked for exclusive use (`flock`), as a
/// live ferry server holds its shared-memory file from before it is published until it is gone.
///
/// It asks for a shared lock without waiting: refused, someone holds an exclusive one (this
/// process too: `flock` locks belong to open file descriptions, and `file` is one of its own);
/// granted, it is let go at once (a new server judging a stale file takes its lock without
/// waiting, and would see a live server for that moment). A file system without `flock` holds
/// no server's file (a server locks its file or does not start).
fn locked_exclusively(file: &impl rustix::fd::AsFd) -> bool {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            let _ = flock(file, FlockOperation::Unlock);
            false
        }
        Err(e) => e == rustix::io::Errno::WOULDBLOCK,
    }
}

/// Refuses ([`HostError::Busy`]) a path that names a regular file held locked for exclusive
/// use ([`locked_exclusively`]): one that `remove` and `rename` must not unname (a live ferry
/// server's file: new clients could no longer attach, and a file renamed onto its name would be
/// another's). Anything else passes, left to the call itself: a missing path, a symbolic link
/// (unlinked or renamed itself, never what it names), a directory, a special file (never
/// opened here: `open` has side effects on some devices), a file this host cannot open.
fn refuse_locked(path: &Path) -> Result<(), HostError> {
    use rustix::fs::{openat, statat, AtFlags, FileType, Mode, OFlags, CWD};
    let Ok(stat) = statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(());
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(());
    }
    // Read-only, or write-only for a file this host may not read: neither changes the file.
    // (NOFOLLOW, NONBLOCK, NOCTTY: the path may have changed since the look above.)
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let opened = openat(CWD, path, OFlags::RDONLY | flags, Mode::empty())
        .or_else(|_| openat(CWD, path, OFlags::WRONLY | flags, Mode::empty()));
    match opened {
        Ok(fd) if locked_exclusively(&fd) => Err(HostError::Busy),
        // Without a descriptor the file cannot be looked at: refused, not let through.
        Err(e) if out_of_descriptors(e.raw_os_error()) => Err(HostError::NoDescriptors),
        _ => Ok(()),
    }
}

/// The device and inode of the regular file `path` names now, if this process may open it for
/// reading: what a read-only open looks up to share its client's descriptor of that file
/// (see the module docs). `None` where only a fresh open can say what happens (nothing there,
/// not a regular file, not readable: the open then fails with its own error).
/// [`readable_identity`], once a message for a path its lanes all open ([`batch_per_message`]).
fn looked_up(path: &Path) -> Option<(u64, u64)> {
    let batching = HELD.with(|h| h.borrow().is_some());
    if !batching {
        return readable_identity(path);
    }
    let text = path.as_os_str().to_str()?;
    let known = LOOKED_UP.with(|l| match &*l.borrow() {
        Some((p, found)) if p == text => Some(*found),
        _ => None,
    });
    if let Some(found) = known {
        return found;
    }
    let found = readable_identity(path);
    LOOKED_UP.with(|l| *l.borrow_mut() = Some((text.to_string(), found)));
    found
}

fn readable_identity(path: &Path) -> Option<(u64, u64)> {
    use rustix::fs::{accessat, stat, Access, AtFlags, FileType, CWD};
    // Both follow symbolic links, as the open does.
    let st = stat(path).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    accessat(CWD, path, Access::READ_OK, AtFlags::EACCESS).ok()?;
    // (The fields' types are the platform's: u64 on x86-64, narrower on others.)
    #[allow(clippy::unnecessary_cast)]
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// Opens `path` with mode `m` if it is a regular file, without waiting on anyone (see the module
/// docs). A mode that can write refuses a file held for exclusive use ([`HostError::Busy`]:
/// [`locked_exclusively`], a live ferry server's file), and empties the file
/// ([`mode::TRUNCATE`]) only once that check has passed.
/// Whether `file` lies on one of the kernel's interface file systems (proc, sys, debugfs,
/// tracefs, securityfs, configfs, cgroup, bpf, efivarfs), or on a file system that cannot be told.
fn kernel_interface(file: &File) -> bool {
    const KERNEL: [i64; 10] = [
        0x9fa0,      // proc
        0x6265_6572, // sysfs
        0x6462_6720, // debugfs
        0x7472_6163, // tracefs
        0x7363_6673, // securityfs
        0x6265_6570, // configfs
        0x0027_e0eb, // cgroup
        0x6367_7270, // cgroup2
        0xcafe_4a11, // bpf
        0xde5e_81e4, // efivarfs
    ];
    match rustix::fs::fstatfs(file) {
        // (`f_type`'s type is the platform's: i64 on x86-64, narrower on others.)
        #[allow(clippy::unnecessary_cast)]
        Ok(fs) => KERNEL.contains(&(fs.f_type as i64)),
        Err(_) => true,
    }
}

fn open_regular(m: u32, path: &str) -> Result<File, HostError> {
    if m & !mode::ALL != 0 || m & (mode::READ | mode::WRITE) == 0 {
        return Err(HostError::Invalid);
    }
    let truncate = m & mode::TRUNCATE != 0;
    let writes = m & (mode::WRITE | mode::APPEND) != 0;
    // What `OpenOptions` refuses with O_TRUNC (which is not asked of it: the file is truncated
    // below, after the check): truncating without writing, or appending, unless the file is
    // new.
    // `EXCLUSIVE` means "create it, and fail if it exists": nothing without `CREATE`.
    let create_new = m & mode::EXCLUSIVE != 0 && m & mode::CREATE != 0;
    if truncate && (!writes || (m & mode::APPEND != 0 && !create_new)) {
        return Err(HostError::Invalid);
    }
    let path = path_of(path)?;
    let mut o = OpenOptions::new();
    o.read(m & mode::READ != 0)
        .write(m & mode::WRITE != 0)
        .append(m & mode::APPEND != 0);
    if create_new {
        o.create_new(true);
    } else {
        o.create(m & mode::CREATE != 0);
    }
    // A FIFO opened without O_NONBLOCK waits for its other end; O_NOCTTY keeps a terminal from
    // becoming this process's controlling terminal.
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
    o.custom_flags(flags.bits() as i32);
    let file = o.open(path).map_err(|e| match e.raw_os_error() {
        // What only special files answer: a FIFO opened for writing with no reader, a device
        // with no driver behind it, a socket (ENXIO); a directory opened for writing (EISDIR).
        Some(n) if n == rustix::io::Errno::NXIO.raw_os_error() => HostError::NotAFile,
        Some(n) if n == rustix::io::Errno::ISDIR.raw_os_error() => HostError::NotAFile,
        _ => io_error(&e),
    })?;
    // fstat of what was opened, not a second look up of the path.
    if !file.metadata().map_err(|e| io_error(&e))?.is_file() {
        return Err(HostError::NotAFile);
    }
    // Files of the kernel's own file systems look regular but are interfaces to processes and
    // the kernel, not data: `/proc/self/mem` opened for writing would write into this server's
    // memory. None is opened, for reading or writing.
    if kernel_interface(&file) {
        return Err(HostError::NotAFile);
    }
    // Nothing that writes (nor the truncation) reaches a file held for exclusive use: a live
    // server's file, whose server and clients would die of SIGBUS at their next access past its
    // new end. (It is this file, as opened, that is checked: no second look up of the path.)
    if writes && locked_exclusively(&file) {
        return Err(HostError::Busy);
    }
    if truncate {
        file.set_len(0).map_err(|e| io_error(&e))?;
    }
    // A regular file: blocking mode back, so reads and writes behave as everywhere else.
    let status = rustix::fs::fcntl_getfl(&file).map_err(|_| HostError::Io)?;
    rustix::fs::fcntl_setfl(&file, status - rustix::fs::OFlags::NONBLOCK)
        .map_err(|_| HostError::Io)?;
    Ok(file)
}

impl ForCaller<'_> {
    /// Opens `path` with `mode` for this client, in the calling thread's shard of the table, the
    /// room for it taken.
    fn open_with_room(&self, mode: u32, path: &str) -> Result<Handle, HostError> {
        let caller = self.caller;
        if mode != mode::READ {
            // A mode that can write (or one refused below): a descriptor of its own.
            let file = self.counted(open_regular(mode, path))?;
            let append = mode & mode::APPEND != 0;
            let inserted = self.files.mine().insert(file, caller, append);
            return inserted
                .map(Handle)
                .map_err(|limit| self.refuse_open(limit));
        }
        // Read-only: the descriptor this client already holds of the file the path names now in
        // the thread's shard, if it holds one (see the module docs), else a new one that its
        // later read-only opens there share.
        if let Some((dev, ino)) = path_of(path).ok().and_then(looked_up) {
            let key = ShareKey {
                owner: caller,
                dev,
                ino,
            };
            let shared = self.files.mine().share(key);
            if let Some(shared) = shared {
                return shared.map(Handle).map_err(|limit| self.refuse_open(limit));
            }
        }
        let file = self.counted(open_regular(mode, path))?;
        let opened = file.metadata().map_err(|e| io_error(&e))?;
        let key = ShareKey {
            owner: caller,
            dev: opened.dev(),
            ino: opened.ino(),
        };
        let (inserted, unused) = self.files.mine().insert_shared(key, file);
        // Closed outside the shard's lock.
        drop(unused);
        inserted
            .map(Handle)
            .map_err(|limit| self.refuse_open(limit))
    }
}

impl LibcServer for ForCaller<'_> {
    fn noop(&self, value: u64) -> u64 {
        value.wrapping_add(1)
    }

    fn print(&self, text: &[u8]) {
        // One-way: nobody to tell about a failed write.
        write_output(&self.stdout, text);
    }

    fn e_print(&self, text: &[u8]) {
        write_output(&self.stderr, text);
    }

    fn open(&self, mode: u32, path: &str) -> Result<Handle, HostError> {
        let (caller, message) = (self.caller, serving_messages());
        // Room first, so that a refused open creates and truncates nothing.
        self.take_room(caller, message)
            .map_err(|limit| self.refuse_open(limit))?;
        let opened = self.open_with_room(mode, path);
        if opened.is_err() {
            self.files.give(caller, message);
        }
        opened
    }

    fn read(&self, handle: Handle, len: u32) -> Result<impl AsRef<[u8]>, HostError> {
        self.read_data(self.caller, handle, len, false)
    }

    fn gets(&self, handle: Handle, len: u32) -> Result<impl AsRef<[u8]>, HostError> {
        self.read_data(self.caller, handle, len, true)
    }

    fn write(&self, handle: Handle, data: &[u8]) -> Result<u32, HostError> {
        if let Some(out) = self.output(handle) {
            // After the prints this thread holds back, in the order they were served.
            end_message();
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            out.write_all(data).map_err(|e| io_error(&e))?;
        } else {
            let mut files = self.files.write(handle.0);
            let open = files.get(handle.0, self.caller)?;
            match &mut open.shared {
                // At the handle's position, which moves (a shared descriptor is read-only: the
                // write fails as on a read-only descriptor of the handle's own).
                Some((_, at)) => {
                    open.file
                        .write_all_at(data, *at)
                        .map_err(|e| io_error(&e))?;
                    *at = at.saturating_add(data.len() as u64);
                }
                None => (&*open.file).write_all(data).map_err(|e| io_error(&e))?,
            }
        }
        // At most the call's limit, IO_LIMIT bytes.
        Ok(data.len() as u32)
    }

    fn read_at(
        &self,
        handle: Handle,
        offset: u64,
        len: u32,
    ) -> Result<impl AsRef<[u8]>, HostError> {
        let files = self.files.read(handle.0);
        let open = files.get_ref(handle.0, self.caller)?;
        // The lanes of a message reading one shared descriptor: read together (see `ahead`).
        if let Some((key, _)) = open.shared.filter(|_| serving_messages()) {
            return ahead::read_in_message((files.shard(), key), &open.file, offset, len as usize)
                .map_err(|e| io_error(&e));
        }
        let mut data = vec![0u8; (len as usize).min(IO_LIMIT)];
        let got = ahead::read_full(&open.file, &mut data, offset).map_err(|e| io_error(&e))?;
        data.truncate(got);
        Ok(ahead::Data::Own(data))
    }

    fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> Result<u32, HostError> {
        if offset.checked_add(data.len() as u64).is_none() {
            return Err(HostError::Invalid);
        }
        let file = self.file_to_write_at(self.caller, handle)?;
        file.write_all_at(data, offset).map_err(|e| io_error(&e))?;
        // At most the call's limit, IO_LIMIT bytes.
        Ok(data.len() as u32)
    }

    fn size(&self, handle: Handle) -> Result<u64, HostError> {
        let files = self.files.read(handle.0);
        let open = files.get_ref(handle.0, self.caller)?;
        // The lanes of a message asking the size of one shared descriptor ask at one moment: the
        // first one's answer is theirs.
        let share = open
            .shared
            .filter(|_| serving_messages())
            .map(|(key, _)| (files.shard(), key));
        let known = share.and_then(|share| {
            SIZED.with(|s| s.borrow().filter(|(of, _)| *of == share).map(|(_, n)| n))
        });
        if let Some(size) = known {
            return Ok(size);
        }
        let size = open.file.metadata().map_err(|e| io_error(&e))?.len();
        if let Some(share) = share {
            SIZED.with(|s| *s.borrow_mut() = Some((share, size)));
        }
        Ok(size)
    }

    fn read_to_device(
        &self,
        handle: Handle,
        offset: u64,
        address: u64,
        len: u64,
        done: u64,
        done_value: u32,
    ) -> Result<u64, HostError> {
        let device = self.device.as_ref().ok_or(HostError::NoDeviceMemory)?;
        let done = Announce::named(done, done_value);
        let file = self.file_at(self.caller, handle);
        let file = announced_unless(device, done, file)?;
        device.fill(address, len, done, &|at, buf| {
            let Some(from) = offset.checked_add(at) else {
                return Ok(0);
            };
            loop {
                match file.read_at(buf, from) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    other => return other,
                }
            }
        })
    }

    fn write_from_device(
        &self,
        handle: Handle,
        offset: u64,
        address: u64,
        len: u64,
        done: u64,
        done_value: u32,
    ) -> Result<u64, HostError> {
        let device = self.device.as_ref().ok_or(HostError::NoDeviceMemory)?;
        let done = Announce::named(done, done_value);
        let file = match offset.checked_add(len) {
            None => Err(HostError::Invalid),
            Some(_) => self.file_to_write_at(self.caller, handle),
        };
        let file = announced_unless(device, done, file)?;
        // (`offset + len` fits: checked above.)
        device.drain(address, len, done, &|at, bytes| {
            file.write_all_at(bytes, offset + at)
        })
    }

    fn seek(&self, handle: Handle, offset: i64, whence: u32) -> Result<u64, HostError> {
        let to = match whence {
            SEEK_SET if offset >= 0 => SeekFrom::Start(offset as u64),
            SEEK_CUR => SeekFrom::Current(offset),
            SEEK_END => SeekFrom::End(offset),
            _ => return Err(HostError::Invalid),
        };
        let mut files = self.files.write(handle.0);
        let open = files.get(handle.0, self.caller)?;
        let Some((_, at)) = &mut open.shared else {
            return (&*open.file).seek(to).map_err(|e| io_error(&e));
        };
        // The handle's own position, as `lseek` would move it: never before the start, nor
        // past what a file offset can be.
        let (base, offset) = match to {
            SeekFrom::Start(to) => (0, to as i64),
            SeekFrom::Current(offset) => (*at, offset),
            SeekFrom::End(offset) => {
                let size = open.file.metadata().map_err(|e| io_error(&e))?.len();
                (size, offset)
            }
        };
        let to = i64::try_from(base)
            .ok()
            .and_then(|base| base.checked_add(offset))
            .and_then(|to| u64::try_from(to).ok())
            .ok_or(HostError::Invalid)?;
        *at = to;
        Ok(to)
    }

    fn tell(&self, handle: Handle) -> Result<u64, HostError> {
        let files = self.files.read(handle.0);
        let open = files.get_ref(handle.0, self.caller)?;
        match open.shared {
            Some((_, at)) => Ok(at),
            None => (&*open.file).stream_position().map_err(|e| io_error(&e)),
        }
    }

    fn flush(&self, handle: Handle) -> Result<(), HostError> {
        if let Some(out) = self.output(handle) {
            end_message();
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            return out.flush().map_err(|e| io_error(&e));
        }
        let file = self.file_at(self.caller, handle)?;
        (&*file).flush().map_err(|e| io_error(&e))
    }

    fn close(&self, handle: Handle) -> Result<(), HostError> {
        // The file is dropped (closed) outside the shard's lock.
        let closed = self.files.write(handle.0).close(handle.0, self.caller);
        if closed.is_ok() {
            self.files.give(self.caller, serving_messages());
        }
        closed.map(drop)
    }

    fn remove(&self, path: &str) -> Result<(), HostError> {
        let path = path_of(path)?;
        refuse_locked(path)?;
        std::fs::remove_file(path).map_err(|e| io_error(&e))
    }

    fn rename(&self, from_len: u32, paths: &str) -> Result<(), HostError> {
        // A split inside a character, or past the end, is no pair of paths.
        let (from, to) = paths
            .split_at_checked(from_len as usize)
            .ok_or(HostError::Invalid)?;
        let (from, to) = (path_of(from)?, path_of(to)?);
        // Neither a live server's file moved away, nor another file moved onto its name.
        refuse_locked(from)?;
        refuse_locked(to)?;
        std::fs::rename(from, to).map_err(|e| io_error(&e))
    }

    fn exit(&self, code: i32) {
        match self.exit {
            ExitPolicy::Process => {
                self.flush_outputs();
                let _ = io::stdout().flush();
                std::process::exit(code);
            }
            ExitPolicy::Record => {
                self.exit_code
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(code);
            }
        }
    }

    fn abort(&self) {
        match self.exit {
            ExitPolicy::Process => {
                self.flush_outputs();
                std::process::abort();
            }
            ExitPolicy::Record => self.aborted.store(true, Ordering::Relaxed),
        }
    }

    fn malloc(&self, size: u64) -> Result<u64, HostError> {
        let heap = self.heap.as_ref().ok_or(HostError::OutOfMemory)?;
        let lock = || heap.lock().unwrap_or_else(|e| e.into_inner());
        let first = lock().malloc(size, self.caller);
        // No free block that large: the blocks of clients gone may make one (looked for outside
        // the heap's lock). The caller's own quota, or a size past the whole heap, is final.
        if first == Err(Refused::NoRoom) && self.reclaim_gone().bytes > 0 {
            return lock().malloc(size, self.caller).map_err(Refused::into);
        }
        first.map_err(Refused::into)
    }

    fn free(&self, address: u64) -> Result<(), HostError> {
        if address == 0 {
            return Ok(());
        }
        let heap = self.heap.as_ref().ok_or(HostError::BadPointer)?;
        let mut heap = heap.lock().unwrap_or_else(|e| e.into_inner());
        heap.free(address, self.caller)
    }

    fn clock(&self) -> ClockReading {
        let realtime = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        ClockReading {
            realtime_ns: realtime,
            monotonic_ns: self.start.elapsed().as_nanos() as u64,
        }
    }

    fn get_env(&self, name: &str) -> Result<impl AsRef<str>, HostError> {
        let Some(environment) = &self.environment else {
            return Err(HostError::Disabled);
        };
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(HostError::Invalid);
        }
        match environment.get(name) {
            Some(Ok(v)) => Ok(v.as_str()),
            Some(Err(e)) => Err(*e),
            None => Err(HostError::NotFound),
        }
    }

    fn system(&self, command: &str) -> Result<i32, HostError> {
        if !self.allow_system {
            return Err(HostError::Disabled);
        }
        // An empty command is what a device lane sends in place of one over the limit.
        if command.is_empty() {
            return Err(HostError::Invalid);
        }
        std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .status()
            .map(|s| s.code().unwrap_or(-1))
            .map_err(|e| io_error(&e))
    }
}

/// The host serving every call as [`PROGRAM`]'s (a GPU region's one program), counted by
/// [`LibcHost::counts`], on any transport: `ferry_gpu::serve(.., &host, ..)`. `Libc` is listed by
/// name. A server that tells its clients apart passes each call's client to
/// [`LibcHost::dispatch`] instead (over shared memory: `ferry_shm::Caller::caller`).
impl<M: Mailbox, W: Wait> Handler<M, W> for LibcHost {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_rpc::Error> {
        self.dispatch(PROGRAM, port).map(|_| ())
    }

    /// Small calls that came inline (a GPU's word lines): served for the program and counted as
    /// [`dispatch`](Self::dispatch) counts them.
    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; ferry_rpc::service::INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        let served = <Libc as Dispatch<_>>::dispatch_inline(
            &self.for_program(),
            opcode,
            request,
            body,
            reply,
        )?;
        let i = self.count_index(opcode);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        Some(served)
    }

    /// Every lane of a call that came on a GPU's word lines, in one dispatch: counted once, as
    /// [`dispatch`](Self::dispatch) counts a call however many lanes it carries.
    fn handle_inline_lanes(&self, opcode: u32, lanes: &mut ferry_rpc::service::InlineLanes<'_>) {
        <Libc as Dispatch<_>>::dispatch_inline_lanes(&self.for_program(), opcode, lanes);
        // A call on word lines is a message of its own, served whole here: what its lanes shared
        // (room a close gave back, a size read, a path looked up) ends with it, before its
        // replies go back, on a thread that batches messages (`batch_per_message`) as on any.
        if serving_messages() {
            end_message();
        }
        // A declined call executed nothing: it is counted when the packets bring it. (The
        // generated dispatch declines a call on every lane or on none.)
        if !lanes.declined() {
            let i = self.count_index(opcode);
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn serves_inline(&self) -> bool {
        true
    }

    fn services(&self) -> Vec<(&'static str, u64)> {
        vec![(Libc::NAME, Libc::FINGERPRINT)]
    }

    /// Frees what clients gone hold ([`LibcHost::reclaim_gone`]).
    fn reclaim(&self) {
        self.reclaim_gone();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_kernels_interface_files_are_never_opened() {
        // `/proc/self/mem` opened for writing would let a client write into the host's memory.
        for path in [
            "/proc/self/mem",
            "/proc/self/status",
            "/sys/kernel/mm/transparent_hugepage/enabled",
        ] {
            for m in [mode::READ, mode::READ | mode::WRITE, mode::WRITE] {
                if Path::new(path).exists() {
                    assert_eq!(
                        open_regular(m, path).err(),
                        Some(HostError::NotAFile),
                        "{path}"
                    );
                }
            }
        }
        // A file of data still opens.
        let data = std::env::temp_dir().join(format!("ferry-libc-data-{}", std::process::id()));
        std::fs::write(&data, b"data").unwrap();
        assert!(open_regular(mode::READ | mode::WRITE, data.to_str().unwrap()).is_ok());
        std::fs::remove_file(&data).unwrap();
    }

    #[test]
    fn every_call_is_counted_under_its_own_index_and_others_as_unknown() {
        let host = LibcHost::new(LibcConfig::default());
        for (i, &opcode) in <Libc as Service>::OPCODES.iter().enumerate() {
            assert_eq!(host.count_index(opcode), i, "opcode {opcode:#x}");
        }
        for opcode in [
            0,
            1,
            u32::MAX,
            ferry_rpc::service::HANDSHAKE - 1,
            0x8000_0000,
        ] {
            if !<Libc as Service>::OPCODES.contains(&opcode) {
                assert_eq!(host.count_index(opcode), Libc::CALLS);
            }
        }
        // An opcode whose slot another took is still found.
        let taken = <Libc as Service>::OPCODES[0];
        let twin = (1..)
            .map(|k: u32| taken ^ (k << 8))
            .find(|&t| fold(t) == fold(taken) && !<Libc as Service>::OPCODES.contains(&t))
            .unwrap();
        assert_eq!(host.count_index(twin), Libc::CALLS);
    }

    #[test]
    fn heap_hands_out_disjoint_aligned_blocks_and_merges_on_free() {
        let mut h = Heap::new(Arena {
            base: 0x1003,
            size: 1000,
        });
        // Aligned start 0x1010, 976 usable bytes (61 blocks of 16).
        assert_eq!(h.arena.base, 0x1010);
        assert_eq!(h.arena.size, 976);
        let a = h.malloc(1, 1).unwrap();
        let b = h.malloc(100, 1).unwrap();
        let c = h.malloc(16, 1).unwrap();
        assert_eq!((a, b, c), (0x1010, 0x1020, 0x1090));
        assert_eq!(h.malloc(u64::MAX, 1), Err(Refused::TooLarge));
        assert_eq!(h.malloc(2000, 1), Err(Refused::TooLarge));
        assert_eq!(h.malloc(900, 1), Err(Refused::NoRoom));
        assert_eq!(h.free(b + 1, 1), Err(HostError::BadPointer));
        h.free(b, 1).unwrap();
        assert_eq!(h.free(b, 1), Err(HostError::BadPointer), "double free");
        h.free(a, 1).unwrap();
        h.free(c, 1).unwrap();
        assert_eq!(h.free.len(), 1, "all merged back: {:?}", h.free);
        assert_eq!(h.malloc(976, 1).unwrap(), 0x1010);
    }

    #[test]
    fn blocks_belong_to_their_client_and_a_dead_clients_come_back() {
        let mut h = Heap::new(Arena {
            base: 0x1000,
            size: 64,
        });
        let mine = h.malloc(32, 1).unwrap();
        let theirs = h.malloc(32, 2).unwrap();
        assert_eq!(
            h.free(theirs, 1),
            Err(HostError::BadPointer),
            "not the caller's"
        );
        assert_eq!(h.malloc(16, 1), Err(Refused::NoRoom));
        assert_eq!(
            h.holders().collect::<std::collections::BTreeSet<_>>().len(),
            2
        );
        // Client 2 is gone: its block comes back, client 1's stays.
        assert_eq!(h.free_of(&[2]), 32);
        assert_eq!(h.free_of(&[2]), 0, "nothing more to free");
        assert_eq!(h.holders().collect::<Vec<_>>(), [1]);
        assert_eq!(h.free(theirs, 2), Err(HostError::BadPointer));
        assert_eq!(h.malloc(32, 1), Ok(theirs));
        h.free(mine, 1).unwrap();
    }

    #[test]
    fn a_client_holds_at_most_its_quota_of_the_heap() {
        let arena = Arena {
            base: 0x1000,
            size: 1024,
        };
        assert_eq!(DEFAULT_HEAP_QUOTA.bytes(1024), 256);
        assert_eq!(HeapQuota::Share(0).bytes(1024), 1024);
        let mut h = Heap::with_quota(arena, HeapQuota::Bytes(100));
        // Sizes count rounded up: 7 blocks of 16 bytes would be 112.
        let mine: Vec<u64> = (0..6).map(|_| h.malloc(1, 1).unwrap()).collect();
        assert_eq!(h.malloc(1, 1), Err(Refused::Quota));
        // Another client's share is its own.
        let theirs = h.malloc(96, 2).unwrap();
        assert_eq!(h.malloc(16, 2), Err(Refused::Quota));
        // A freed block makes room in its owner's share only.
        h.free(mine[0], 1).unwrap();
        assert_eq!(h.malloc(16, 2), Err(Refused::Quota));
        h.malloc(16, 1).unwrap();
        // A gone client's share comes back whole.
        assert_eq!(h.free_of(&[2]), 96);
        assert_eq!(
            h.free(theirs, 2),
            Err(HostError::BadPointer),
            "freed with client 2"
        );
        h.malloc(96, 2).unwrap();
        // The whole heap: one client takes all of it.
        let mut whole = Heap::with_quota(arena, HeapQuota::Whole);
        whole.malloc(1024, 1).unwrap();
        assert_eq!(whole.malloc(1, 2), Err(Refused::NoRoom));
    }

    /// A file of the temporary directory holding `data`, removed when dropped.
    pub(super) struct TempFile(pub(super) std::path::PathBuf);

    impl TempFile {
        pub(super) fn new(tag: &str, data: &[u8]) -> TempFile {
            let path = std::env::temp_dir().join(format!(
                "ferry-libc-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::write(&path, data).unwrap();
            TempFile(path)
        }

        fn name(&self) -> &str {
            self.0.to_str().unwrap()
        }

        /// This process's descriptors open on the file (and on what was its file before it was
        /// replaced or removed, which the kernel names `PATH (deleted)`).
        fn descriptors(&self) -> usize {
            let name = self.name();
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| {
                    let target = target.to_string_lossy();
                    target == name || target == format!("{name} (deleted)")
                })
                .count()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A host with room for `files` handles, `per_client` a client.
    fn host_with(files: usize, per_client: usize) -> LibcHost {
        LibcHost::new(LibcConfig {
            max_files: files,
            max_files_per_client: per_client,
            ..LibcConfig::default()
        })
    }

    fn read(c: ForCaller<'_>, h: Handle, len: u32) -> Result<Vec<u8>, HostError> {
        c.read_data(c.caller, h, len, false)
    }

    #[test]
    fn read_only_opens_of_one_file_share_one_descriptor_and_each_handle_has_its_position() {
        let data = b"line one\nline two\nthe rest";
        let file = TempFile::new("share", data);
        let host = host_with(1000, 1000);
        let c = host.for_caller(1);
        let handles: Vec<Handle> = (0..200)
            .map(|_| c.open(mode::READ, file.name()).unwrap())
            .collect();
        let distinct: std::collections::HashSet<_> = handles.iter().collect();
        assert_eq!(distinct.len(), handles.len(), "a handle of its own each");
        assert_eq!(
            file.descriptors(),
            1,
            "one descriptor for every read-only handle"
        );
        assert_eq!(host.open_files(), 200);

        // Positions of their own: reads, lines, seeks and tells on one handle move only it.
        let [a, b, l, d] = [handles[0], handles[1], handles[2], handles[3]];
        assert_eq!(read(c, a, 4).unwrap(), b"line");
        assert_eq!(read(c, b, 2).unwrap(), b"li");
        assert_eq!(read(c, a, 5).unwrap(), b" one\n");
        assert_eq!((c.tell(a), c.tell(b)), (Ok(9), Ok(2)));
        assert_eq!(c.read_data(1, l, 100, true).unwrap(), b"line one\n");
        assert_eq!(c.read_data(1, l, 100, true).unwrap(), b"line two\n");
        assert_eq!(c.tell(l), Ok(18));
        assert_eq!(c.read_at(b, 5, 3).unwrap().as_ref(), b"one");
        assert_eq!(c.tell(b), Ok(2), "read_at leaves the position");
        assert_eq!(c.seek(b, -4, SEEK_END), Ok(data.len() as u64 - 4));
        assert_eq!(read(c, b, 100).unwrap(), b"rest");
        assert_eq!(read(c, b, 100).unwrap(), b"", "the end");
        assert_eq!(c.seek(b, -100, SEEK_CUR), Err(HostError::Invalid));
        assert_eq!(c.seek(b, i64::MAX, SEEK_END), Err(HostError::Invalid));
        assert_eq!(
            c.tell(b),
            Ok(data.len() as u64),
            "a refused seek moves nothing"
        );
        assert_eq!(c.seek(b, 5, SEEK_SET), Ok(5));
        assert_eq!(c.seek(b, 3, SEEK_CUR), Ok(8));
        assert_eq!(c.seek(b, 100, SEEK_SET), Ok(100), "past the end, as lseek");
        assert_eq!(read(c, b, 10).unwrap(), b"");
        assert_eq!(c.tell(d), Ok(0), "the others have not moved");
        assert_eq!(c.size(d), Ok(data.len() as u64));
        assert_eq!(c.flush(d), Ok(()));
        // Read-only: a write fails, as on a read-only descriptor, and moves nothing.
        assert!(c.write(d, b"x").is_err());
        assert_eq!(c.tell(d), Ok(0));

        // The descriptor closes with the last handle.
        for &h in &handles[1..] {
            c.close(h).unwrap();
        }
        assert_eq!(file.descriptors(), 1);
        assert_eq!(read(c, a, 3).unwrap(), b"lin");
        c.close(a).unwrap();
        assert_eq!(file.descriptors(), 0, "closed with its last handle");
        assert_eq!(host.open_files(), 0);
        assert_eq!(c.close(a), Err(HostError::BadHandle));
        assert_eq!(read(c, b, 1), Err(HostError::BadHandle));
        // And a new open makes a new one.
        let again = c.open(mode::READ, file.name()).unwrap();
        assert_eq!(file.descriptors(), 1);
        assert_eq!(read(c, again, 4).unwrap(), b"line");
        c.close(again).unwrap();
        assert_eq!(file.descriptors(), 0);
    }

    #[test]
    fn writable_opens_and_other_clients_have_descriptors_of_their_own() {
        let file = TempFile::new("own", b"abcdefgh");
        let host = host_with(100, 100);
        let (one, two) = (host.for_caller(1), host.for_caller(2));
        let r = [(); 3].map(|_| one.open(mode::READ, file.name()).unwrap());
        assert_eq!(file.descriptors(), 1);
        let rw = one.open(mode::READ | mode::WRITE, file.name()).unwrap();
        let rw2 = one.open(mode::READ | mode::WRITE, file.name()).unwrap();
        assert_eq!(file.descriptors(), 3, "each writable open has its own");
        let theirs = two.open(mode::READ, file.name()).unwrap();
        assert_eq!(file.descriptors(), 4, "another client's share is its own");
        assert_eq!(read(one, theirs, 1), Err(HostError::BadHandle));
        assert_eq!(two.close(r[0]), Err(HostError::BadHandle));
        // Writable handles keep the descriptor's own position.
        assert_eq!(one.write(rw, b"AB"), Ok(2));
        assert_eq!(one.tell(rw), Ok(2));
        assert_eq!(one.tell(rw2), Ok(0));
        assert_eq!(read(one, rw2, 3).unwrap(), b"ABc");
        // The shared handles see the file as it is (one file: a write through another
        // descriptor is there).
        assert_eq!(read(one, r[1], 3).unwrap(), b"ABc");
        assert_eq!(read(two, theirs, 8).unwrap(), b"ABcdefgh");
        for h in [rw, rw2, r[0], r[1]] {
            one.close(h).unwrap();
        }
        assert_eq!(file.descriptors(), 2);
        one.close(r[2]).unwrap();
        two.close(theirs).unwrap();
        assert_eq!(file.descriptors(), 0);
    }

    #[test]
    fn a_read_only_open_shares_only_the_file_a_fresh_open_would_see() {
        let file = TempFile::new("replaced", b"old data");
        let host = host_with(100, 100);
        let c = host.for_caller(1);
        let old = c.open(mode::READ, file.name()).unwrap();
        // Changed in place: the same file, which the shared descriptor sees as it is now.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file.0)
            .unwrap()
            .write_all_at(b"OLD", 0)
            .unwrap();
        let same = c.open(mode::READ, file.name()).unwrap();
        assert_eq!(file.descriptors(), 1, "the same file: shared");
        assert_eq!(read(c, same, 100).unwrap(), b"OLD data");
        // Replaced (a new file renamed over the path): a new open is of the new file, on a
        // descriptor of its own, while the old handles read the old one.
        let next = TempFile::new("replacement", b"new!");
        std::fs::rename(&next.0, &file.0).unwrap();
        let new = c.open(mode::READ, file.name()).unwrap();
        assert_eq!(file.descriptors(), 2);
        assert_eq!(read(c, new, 100).unwrap(), b"new!");
        assert_eq!(read(c, old, 100).unwrap(), b"OLD data");
        c.close(old).unwrap();
        assert_eq!(
            file.descriptors(),
            2,
            "the old file's other handle holds it"
        );
        c.close(same).unwrap();
        assert_eq!(file.descriptors(), 1, "the old file's descriptor closed");
        // Gone: a read-only open fails as a fresh one would, share or not.
        std::fs::remove_file(&file.0).unwrap();
        assert_eq!(c.open(mode::READ, file.name()), Err(HostError::NotFound));
        c.close(new).unwrap();
        // Not readable any more (for a process that permissions bind): refused, share or not.
        let locked = TempFile::new("unreadable", b"secret");
        let shared = c.open(mode::READ, locked.name()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked.0, std::fs::Permissions::from_mode(0o200)).unwrap();
        if !rustix::process::geteuid().is_root() {
            assert_eq!(c.open(mode::READ, locked.name()), Err(HostError::Denied));
        }
        c.close(shared).unwrap();
        // Not a regular file: no share is looked for, and the open says why.
        assert_eq!(
            c.open(mode::READ, std::env::temp_dir().to_str().unwrap()),
            Err(HostError::NotAFile)
        );
    }

    #[test]
    fn shared_handles_count_against_the_limits_which_are_told_apart() {
        let file = TempFile::new("limits", b"data");
        let host = host_with(5, 3);
        let (one, two) = (host.for_caller(1), host.for_caller(2));
        let mine: Vec<Handle> = (0..3)
            .map(|_| one.open(mode::READ, file.name()).unwrap())
            .collect();
        assert_eq!(
            one.open(mode::READ, file.name()),
            Err(HostError::TooManyOpen)
        );
        let theirs: Vec<Handle> = (0..2)
            .map(|_| two.open(mode::READ, file.name()).unwrap())
            .collect();
        assert_eq!(
            two.open(mode::READ, file.name()),
            Err(HostError::TooManyOpen)
        );
        assert_eq!(
            host.refusals(),
            OpenRefusals {
                table: 1,
                client: 1,
                descriptors: 0
            }
        );
        assert_eq!(host.refused_opens(), 2);
        assert_eq!(file.descriptors(), 2, "one a client");
        // A refused open took nothing: a close makes room for one more.
        one.close(mine[0]).unwrap();
        let back = one.open(mode::READ, file.name()).unwrap();
        assert_eq!(read(one, back, 4).unwrap(), b"data");
        for h in [back, mine[1], mine[2]] {
            one.close(h).unwrap();
        }
        for h in theirs {
            two.close(h).unwrap();
        }
        assert_eq!((host.open_files(), file.descriptors()), (0, 0));
    }

    #[test]
    fn a_gone_clients_shared_descriptor_closes_with_its_handles() {
        let file = TempFile::new("gone", b"data");
        let host = LibcHost::new(LibcConfig {
            max_files: 100,
            max_files_per_client: 100,
            client_alive: |client| client != 2,
            ..LibcConfig::default()
        });
        let (one, two) = (host.for_caller(1), host.for_caller(2));
        let mine = [(); 2].map(|_| one.open(mode::READ, file.name()).unwrap());
        let theirs: Vec<Handle> = (0..10)
            .map(|_| two.open(mode::READ, file.name()).unwrap())
            .collect();
        assert_eq!(file.descriptors(), 2);
        assert_eq!(
            host.reclaim_gone(),
            Reclaimed {
                clients: 1,
                files: 10,
                bytes: 0
            }
        );
        assert_eq!(file.descriptors(), 1, "the gone client's descriptor closed");
        assert_eq!(host.open_files(), 2);
        assert_eq!(read(two, theirs[0], 1), Err(HostError::BadHandle));
        assert_eq!(read(one, mine[1], 4).unwrap(), b"data");
        // The gone client's share is gone with it: an open under its id starts afresh.
        let again = two.open(mode::READ, file.name()).unwrap();
        assert_eq!(read(two, again, 4).unwrap(), b"data");
        assert_eq!(host.reclaim_gone().files, 1);
        for h in mine {
            one.close(h).unwrap();
        }
        assert_eq!(file.descriptors(), 0);
    }

    /// Set in the child process a test that changes this process's limits runs in.
    const CHILD: &str = "FERRY_LIBC_TEST_CHILD";

    /// Whether this is the child process of the test `name`; if not, runs it in one.
    fn in_child(name: &str) -> bool {
        ferry_testkit::in_child(name, CHILD)
    }

    #[test]
    fn at_the_descriptor_limit_opens_say_so_and_open_files_still_read() {
        if !in_child("tests::at_the_descriptor_limit_opens_say_so_and_open_files_still_read") {
            return;
        }
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let files: Vec<TempFile> = (0..3)
            .map(|i| TempFile::new(&format!("limit{i}"), format!("file {i}").as_bytes()))
            .collect();
        let host = host_with(1000, 1000);
        let c = host.for_caller(1);
        // A limit that leaves four descriptors (or five: the listing's own is among those
        // open) to open: a new descriptor takes the lowest free number, below the limit.
        let open_now: std::collections::BTreeSet<u64> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        let limit = (0..).filter(|n| !open_now.contains(n)).nth(4).unwrap();
        let hard = getrlimit(Resource::Nofile).maximum;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(limit),
                maximum: hard,
            },
        )
        .unwrap();
        // One read-only handle, then writable opens (a descriptor each) until none is left.
        let first = c.open(mode::READ, files[0].name()).unwrap();
        let mut open = vec![(first, 0)];
        let refused = loop {
            match c.open(mode::READ | mode::WRITE, files[1].name()) {
                Ok(h) => open.push((h, 1)),
                Err(e) => break e,
            }
            assert!(open.len() < 1000, "no limit reached");
        };
        assert!((4..=5).contains(&open.len()), "{} opened", open.len());
        assert_eq!(
            refused,
            HostError::NoDescriptors,
            "the OS's limit, not an I/O error"
        );
        assert_eq!(host.refusals().descriptors, 1);
        assert_eq!(host.refused_opens(), 0, "not the host's limit");
        // Every file open still reads, at an offset, in sequence, in size: no call takes a
        // descriptor of its own.
        for &(h, i) in &open {
            let want = format!("file {i}");
            assert_eq!(
                c.read_at(h, 0, 100).map(|d| d.as_ref().to_vec()),
                Ok(want.clone().into_bytes()),
                "read_at at the limit"
            );
            assert_eq!(read(c, h, 100).unwrap(), want.as_bytes());
            assert_eq!(c.size(h), Ok(want.len() as u64));
        }
        // A read-only open of a file already open shares its descriptor: it takes none.
        let more: Vec<Handle> = (0..50)
            .map(|_| c.open(mode::READ, files[0].name()).unwrap())
            .collect();
        assert_eq!(read(c, more[49], 100).unwrap(), b"file 0");
        // Removing a file takes a descriptor (to see whether a server holds it): refused,
        // never done unlooked at.
        assert_eq!(c.remove(files[2].name()), Err(HostError::NoDescriptors));
        assert!(files[2].0.exists());
        // A close gives one back.
        c.close(open[1].0).unwrap();
        c.open(mode::READ | mode::WRITE, files[2].name()).unwrap();
    }
}
