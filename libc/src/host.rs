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
//! - **files**: a table of open files; the device gets opaque handles `generation << 32 | index + 3`
//!   (1 and 2 are standard output and error), checked on every call: an id never handed out, one
//!   whose file was closed (its slot's generation moved on), or one another client opened, is
//!   [`HostError::BadHandle`]. Only regular files of data open ([`HostError::NotAFile`]; not the
//!   kernel's interface files under `/proc` and `/sys`, which look regular): a FIFO, a device or a
//!   socket could make the serving thread wait on a party the client chose. Each client may hold
//!   [`LibcConfig::max_files_per_client`] files open, all of them [`LibcConfig::max_files`].
//!   A file another program holds locked for exclusive use (`flock`), as every live ferry
//!   server holds its shared-memory file, is not opened for writing, removed, renamed or
//!   renamed onto ([`HostError::Busy`]; `w` empties a file only after that check): a region
//!   file emptied under its server kills the server and its clients (`SIGBUS`), and one
//!   unnamed or replaced leaves new clients nowhere to attach. What is left: `system`, when
//!   turned on, can do anything; a directory above a region file can still be renamed (its
//!   server then leaves the file where it went when it stops: it removes only a name that
//!   still names its file);
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
//! file calls take the table's lock, the other file calls; the output streams block while the
//! host's own standard output or error is full (the user's setup, not the client's); and
//! `system`, off by default, waits for its command (see [`LibcConfig::allow_system`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ferry_rpc::service::{with_stream_buffers, Handler, Served, Service};
use ferry_rpc::{Lanes, Mailbox, Port, Server, Single, Wait};

// The definition, so that a host program finds everything it serves here.
pub use crate::{
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

/// The files a GPU program may have open at once by default, on the GPU and on CPU threads
/// alike.
pub const PROGRAM_MAX_FILES: usize = 256;

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
    /// Whether [`Libc::GetEnv`] reads this process's environment (off unless the user turns it
    /// on: the loader does, a GPU program's environment being its loader's). Off, every
    /// `getenv` is [`HostError::Disabled`].
    pub give_environment: bool,
    /// The most files open at once, all clients together (the file table's size). An open past
    /// it is [`HostError::TooManyOpen`].
    pub max_files: usize,
    /// The most files one client holds open at once (a GPU program is one client; over shared
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

/// One slot of the file table. The generation moves on at every close, so a handle to a closed
/// file never names the slot's next file.
struct FileSlot {
    generation: u32,
    /// The client that opened the file (meaningless while the slot is empty).
    owner: u64,
    file: Option<File>,
}

impl FileSlot {
    /// Empties the slot; its handle is never valid again.
    fn vacate(&mut self) -> Option<File> {
        // Generation 0 is skipped so no handle is ever 0 in its top half by accident of wrapping.
        self.generation = self.generation.wrapping_add(1).max(1);
        self.file.take()
    }
}

#[derive(Default)]
struct Files {
    slots: Vec<FileSlot>,
    open: usize,
}

/// The limits of the file table: all clients together, and each client.
#[derive(Clone, Copy)]
struct FileLimits {
    total: usize,
    per_client: usize,
}

impl Files {
    /// The file `caller` opened under `handle`.
    fn get(&mut self, handle: u64, caller: u64) -> Result<&mut File, HostError> {
        let (generation, index) = ((handle >> 32) as u32, handle & 0xFFFF_FFFF);
        let slot = index
            .checked_sub(FIRST_FILE)
            .and_then(|i| self.slots.get_mut(i as usize))
            .filter(|s| s.generation == generation && s.owner == caller)
            .ok_or(HostError::BadHandle)?;
        slot.file.as_mut().ok_or(HostError::BadHandle)
    }

    /// Whether `caller` may open one more file; `Err` carries the limit reached.
    fn room(&self, caller: u64, limits: FileLimits) -> Result<(), usize> {
        if self.open >= limits.total {
            return Err(limits.total);
        }
        let held = self
            .slots
            .iter()
            .filter(|s| s.file.is_some() && s.owner == caller)
            .count();
        if held >= limits.per_client {
            return Err(limits.per_client);
        }
        Ok(())
    }

    /// Adds `caller`'s file; `Err` carries the limit reached.
    fn insert(&mut self, file: File, caller: u64, limits: FileLimits) -> Result<u64, usize> {
        self.room(caller, limits)?;
        let index = match self.slots.iter().position(|s| s.file.is_none()) {
            Some(i) => i,
            None => {
                self.slots.push(FileSlot {
                    generation: 1,
                    owner: caller,
                    file: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.file = Some(file);
        slot.owner = caller;
        self.open += 1;
        Ok((slot.generation as u64) << 32 | (index as u64 + FIRST_FILE))
    }

    /// Takes `caller`'s file `handle` out of the table, to be closed.
    fn close(&mut self, handle: u64, caller: u64) -> Result<File, HostError> {
        self.get(handle, caller)?;
        let slot = &mut self.slots[((handle & 0xFFFF_FFFF) - FIRST_FILE) as usize];
        self.open -= 1;
        slot.vacate().ok_or(HostError::BadHandle)
    }

    /// The clients that hold files (each once).
    fn holders(&self) -> Vec<u64> {
        let mut holders: Vec<u64> = Vec::new();
        for slot in &self.slots {
            if slot.file.is_some() && !holders.contains(&slot.owner) {
                holders.push(slot.owner);
            }
        }
        holders
    }

    /// Takes the files of the clients in `gone` out of the table, to be closed.
    fn take_of(&mut self, gone: &[u64]) -> Vec<File> {
        let mut taken = Vec::new();
        for slot in &mut self.slots {
            if slot.file.is_some() && gone.contains(&slot.owner) {
                taken.extend(slot.vacate());
                self.open -= 1;
            }
        }
        taken
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
            used: HashMap::new(),
            held: HashMap::new(),
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
    stdout: Mutex<Box<dyn Write + Send>>,
    stderr: Mutex<Box<dyn Write + Send>>,
    files: Mutex<Files>,
    heap: Option<Mutex<Heap>>,
    exit: ExitPolicy,
    exit_code: Mutex<Option<i32>>,
    aborted: AtomicBool,
    allow_system: bool,
    give_environment: bool,
    file_limits: FileLimits,
    /// Opens refused because a file table was full.
    refused_opens: AtomicU64,
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
    match e.kind() {
        io::ErrorKind::NotFound => HostError::NotFound,
        io::ErrorKind::PermissionDenied => HostError::Denied,
        io::ErrorKind::AlreadyExists => HostError::Exists,
        io::ErrorKind::InvalidInput => HostError::Invalid,
        _ => HostError::Io,
    }
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
            stdout: Mutex::new(config.stdout),
            stderr: Mutex::new(config.stderr),
            files: Mutex::default(),
            heap: config
                .heap
                .map(|a| Mutex::new(Heap::with_quota(a, config.max_heap_per_client))),
            exit: config.exit,
            exit_code: Mutex::new(None),
            aborted: AtomicBool::new(false),
            allow_system: config.allow_system,
            give_environment: config.give_environment,
            refused_opens: AtomicU64::new(0),
            file_limits: FileLimits {
                total: config.max_files,
                per_client: config.max_files_per_client,
            },
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
        let served = with_stream_buffers(|buffers| Libc::dispatch(&call, port, buffers))?;
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

    /// Files open now.
    pub fn open_files(&self) -> usize {
        self.lock_files().open
    }

    /// How many opens were refused because the file table, or the client's share of it, was
    /// full ([`HostError::TooManyOpen`]): a loader tells its user to raise the limit.
    pub fn refused_opens(&self) -> u64 {
        self.refused_opens.load(Ordering::Relaxed)
    }

    fn refuse_open(&self) -> HostError {
        self.refused_opens.fetch_add(1, Ordering::Relaxed);
        HostError::TooManyOpen
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
        let mut holders = self.lock_files().holders();
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
        let closed = self.lock_files().take_of(&gone);
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

    fn lock_files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flush_outputs(&self) {
        let _ = self.stdout.lock().map(|mut o| o.flush());
        let _ = self.stderr.lock().map(|mut o| o.flush());
    }

    fn output(&self, handle: Handle) -> Option<&Mutex<Box<dyn Write + Send>>> {
        match handle {
            STDOUT => Some(&self.stdout),
            STDERR => Some(&self.stderr),
            _ => None,
        }
    }

    /// Whether `caller` may open one more file, after freeing what clients gone hold if the
    /// table or its quota is full; `Err` carries the limit reached.
    fn file_room(&self, caller: u64) -> Result<(), usize> {
        if self.lock_files().room(caller, self.file_limits).is_ok() {
            return Ok(());
        }
        self.reclaim_gone();
        self.lock_files().room(caller, self.file_limits)
    }

    /// `caller`'s file `handle`, as a descriptor of its own, for a call that reads or writes at
    /// an offset outside the table's lock (a large copy does not hold up the other file calls).
    fn file_at(&self, caller: u64, handle: Handle) -> Result<File, HostError> {
        let mut files = self.lock_files();
        files
            .get(handle.0, caller)?
            .try_clone()
            .map_err(|e| io_error(&e))
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
        let mut files = self.lock_files();
        let file = files.get(handle.0, caller)?;
        let mut data = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match file.read(&mut data[got..]) {
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
                if extra > 0 {
                    file.seek(SeekFrom::Current(-(extra as i64)))
                        .map_err(|e| io_error(&e))?;
                }
                got = nl + 1;
            }
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
        _ => Ok(()),
    }
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
    if truncate && (!writes || (m & mode::APPEND != 0 && m & mode::EXCLUSIVE == 0)) {
        return Err(HostError::Invalid);
    }
    let path = path_of(path)?;
    let mut o = OpenOptions::new();
    o.read(m & mode::READ != 0)
        .write(m & mode::WRITE != 0)
        .append(m & mode::APPEND != 0);
    if m & mode::EXCLUSIVE != 0 {
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

impl LibcServer for ForCaller<'_> {
    fn noop(&self, value: u64) -> u64 {
        value.wrapping_add(1)
    }

    fn print(&self, text: &[u8]) {
        let mut out = self.stdout.lock().unwrap_or_else(|e| e.into_inner());
        // One-way: nobody to tell about a failed write.
        let _ = out.write_all(text);
    }

    fn e_print(&self, text: &[u8]) {
        let mut out = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(text);
    }

    fn open(&self, mode: u32, path: &str) -> Result<Handle, HostError> {
        // Room first, so that a refused open creates and truncates nothing.
        self.file_room(self.caller)
            .map_err(|_| self.refuse_open())?;
        let file = open_regular(mode, path)?;
        // (Another open of this client, or of any when the table is nearly full, may have taken
        // the room meanwhile: the file is then closed, refused as above.)
        let inserted = self
            .lock_files()
            .insert(file, self.caller, self.file_limits);
        inserted.map(Handle).map_err(|_| self.refuse_open())
    }

    fn read(&self, handle: Handle, len: u32) -> Result<impl AsRef<[u8]>, HostError> {
        self.read_data(self.caller, handle, len, false)
    }

    fn gets(&self, handle: Handle, len: u32) -> Result<impl AsRef<[u8]>, HostError> {
        self.read_data(self.caller, handle, len, true)
    }

    fn write(&self, handle: Handle, data: &[u8]) -> Result<u32, HostError> {
        if let Some(out) = self.output(handle) {
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            out.write_all(data).map_err(|e| io_error(&e))?;
        } else {
            let mut files = self.lock_files();
            files
                .get(handle.0, self.caller)?
                .write_all(data)
                .map_err(|e| io_error(&e))?;
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
        let file = self.file_at(self.caller, handle)?;
        let mut data = vec![0u8; (len as usize).min(IO_LIMIT)];
        let mut got = 0;
        while got < data.len() {
            match file.read_at(&mut data[got..], offset.saturating_add(got as u64)) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error(&e)),
            }
        }
        data.truncate(got);
        Ok(data)
    }

    fn write_at(&self, handle: Handle, offset: u64, data: &[u8]) -> Result<u32, HostError> {
        if offset.checked_add(data.len() as u64).is_none() {
            return Err(HostError::Invalid);
        }
        let file = self.file_at(self.caller, handle)?;
        file.write_all_at(data, offset).map_err(|e| io_error(&e))?;
        // At most the call's limit, IO_LIMIT bytes.
        Ok(data.len() as u32)
    }

    fn size(&self, handle: Handle) -> Result<u64, HostError> {
        let mut files = self.lock_files();
        let file = files.get(handle.0, self.caller)?;
        file.metadata().map(|m| m.len()).map_err(|e| io_error(&e))
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
            Some(_) => self.file_at(self.caller, handle),
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
        let mut files = self.lock_files();
        let file = files.get(handle.0, self.caller)?;
        file.seek(to).map_err(|e| io_error(&e))
    }

    fn tell(&self, handle: Handle) -> Result<u64, HostError> {
        let mut files = self.lock_files();
        let file = files.get(handle.0, self.caller)?;
        file.stream_position().map_err(|e| io_error(&e))
    }

    fn flush(&self, handle: Handle) -> Result<(), HostError> {
        if let Some(out) = self.output(handle) {
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            return out.flush().map_err(|e| io_error(&e));
        }
        let mut files = self.lock_files();
        let file = files.get(handle.0, self.caller)?;
        file.flush().map_err(|e| io_error(&e))
    }

    fn close(&self, handle: Handle) -> Result<(), HostError> {
        // The file is dropped (closed) outside the table's lock.
        let closed = self.lock_files().close(handle.0, self.caller);
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
        if !self.give_environment {
            return Err(HostError::Disabled);
        }
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(HostError::Invalid);
        }
        match std::env::var(name) {
            Ok(v) if v.len() <= ENV_LIMIT => Ok(v),
            Ok(_) | Err(std::env::VarError::NotUnicode(_)) => Err(HostError::TooLong),
            Err(std::env::VarError::NotPresent) => Err(HostError::NotFound),
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
        let served = Libc::dispatch_inline(&self.for_program(), opcode, request, body, reply)?;
        let i = self.count_index(opcode);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        Some(served)
    }

    /// Every lane of a call that came on a GPU's word lines, in one dispatch: counted once, as
    /// [`dispatch`](Self::dispatch) counts a call however many lanes it carries.
    fn handle_inline_lanes(&self, opcode: u32, lanes: &mut ferry_rpc::service::InlineLanes<'_>) {
        Libc::dispatch_inline_lanes(&self.for_program(), opcode, lanes);
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
mod tests {
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

    const LIMITS: FileLimits = FileLimits {
        total: 4,
        per_client: 4,
    };

    #[test]
    fn stale_and_forged_handles_are_refused() {
        let mut files = Files::default();
        let f = File::open("/dev/null").unwrap();
        let h = files.insert(f, 1, LIMITS).unwrap();
        assert!(files.get(h, 1).is_ok());
        assert_eq!(
            files.get(h, 2).err(),
            Some(HostError::BadHandle),
            "not the caller's"
        );
        assert_eq!(files.close(h, 2).err(), Some(HostError::BadHandle));
        assert_eq!(
            files.get(h ^ (1 << 32), 1).err(),
            Some(HostError::BadHandle)
        );
        assert_eq!(files.get(h + 1, 1).err(), Some(HostError::BadHandle));
        assert_eq!(files.get(0, 1).err(), Some(HostError::BadHandle));
        assert_eq!(files.get(u64::MAX, 1).err(), Some(HostError::BadHandle));
        files.close(h, 1).unwrap();
        assert_eq!(files.get(h, 1).err(), Some(HostError::BadHandle));
        let h2 = files
            .insert(File::open("/dev/null").unwrap(), 1, LIMITS)
            .unwrap();
        assert_ne!(h2, h, "the slot is reused under a new generation");
        assert_eq!(files.get(h, 1).err(), Some(HostError::BadHandle));
        assert_eq!(files.close(h, 1).err(), Some(HostError::BadHandle));
    }

    #[test]
    fn quotas_count_per_client_and_a_dead_clients_files_come_back() {
        let limits = FileLimits {
            total: 3,
            per_client: 2,
        };
        let mut files = Files::default();
        let null = || File::open("/dev/null").unwrap();
        let a = files.insert(null(), 1, limits).unwrap();
        files.insert(null(), 1, limits).unwrap();
        assert_eq!(files.insert(null(), 1, limits), Err(2), "client 1's quota");
        let c = files.insert(null(), 2, limits).unwrap();
        assert_eq!(files.insert(null(), 2, limits), Err(3), "the whole table");
        assert_eq!(files.holders(), [1, 2]);
        // Client 1 is gone: its two files close, client 2's stays.
        assert_eq!(files.take_of(&[1]).len(), 2);
        assert_eq!(files.holders(), [2]);
        assert_eq!(files.open, 1);
        assert_eq!(files.get(a, 1).err(), Some(HostError::BadHandle));
        assert!(files.get(c, 2).is_ok());
        files.insert(null(), 2, limits).unwrap();
    }
}
