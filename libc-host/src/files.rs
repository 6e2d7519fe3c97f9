//! The file table: every client's handles, in shards, and the room the limits leave.
//!
//! Server threads serving at once each open into a shard of their own ([`serving_share`]) and
//! find a handle's file in the shard the handle names, so a program whose every thread opens,
//! reads and closes a file does not have all the server threads queue on one lock. The limits
//! ([`FileLimits`]) are counted apart, in a [`Quota`]; a server thread serving a message of many
//! lanes takes room for them in one step and gives back what it did not use when the message is
//! served ([`end_message`]).

use std::cell::RefCell;
use std::fs::File;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use rustc_hash::FxHashMap as HashMap;

use super::{HostError, FIRST_FILE};

/// Shards of the table: one per serving thread, up to this many. Each holds its own read-only
/// descriptors of the files its thread opened ([`ShareKey`]): every call on a descriptor writes
/// its count in the kernel (a process of many threads takes a reference per call), and threads
/// calling on descriptors of their own do not wait for each other's cache lines.
pub(super) const SHARDS: usize = 16;

/// The most handles one shard can name: a handle's low half is `FIRST_FILE` plus its slot's
/// index times [`SHARDS`] plus its shard.
const MAX_SLOTS: usize = ((u32::MAX as u64 - FIRST_FILE) / SHARDS as u64) as usize;

/// Room a serving thread takes at once for a message's opens: its lanes (a warp's 32).
const MESSAGE_LANES: usize = 32;

/// The calling thread's shard (`0 .. SHARDS`), dealt to threads in turn.
pub(super) fn serving_share() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::thread_local! {
        static SHARE: usize = (NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS as u64) as usize;
    }
    SHARE.with(|s| *s)
}

/// What a shared read-only descriptor is shared by, in its shard: one client's read-only handles
/// of one file (its device and inode number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct ShareKey {
    pub owner: u64,
    pub dev: u64,
    pub ino: u64,
}

/// The file a handle names, and where it reads from.
pub(super) struct OpenFile {
    /// The descriptor: the handle's own, or (`shared`) its client's one read-only descriptor of
    /// the file in the shard. Calls that read or write at an offset take a reference to it and
    /// let go of the shard's lock: no descriptor is duplicated for a call (at the process's limit
    /// of descriptors a duplicate could not be made, and every read of an open file would fail).
    pub file: Arc<File>,
    /// For a handle on a shared descriptor: the share, and the handle's own position. Nothing
    /// moves the shared descriptor's offset: reads on the handle are `pread`s at its position.
    pub shared: Option<(ShareKey, u64)>,
    /// Opened for appending: every write goes to the end of the file, wherever it was asked
    /// for (`pwrite` on such a descriptor ignores its offset).
    pub append: bool,
}

/// One slot of a shard. The generation moves on at every close, so a handle to a closed file
/// never names the slot's next file.
struct FileSlot {
    generation: u32,
    /// The client that opened the file (meaningless while the slot is empty).
    owner: u64,
    open: Option<OpenFile>,
}

impl FileSlot {
    /// Empties the slot; its handle is never valid again.
    fn vacate(&mut self) -> Option<OpenFile> {
        // Generation 0 is skipped so no handle is ever 0 in its top half by accident of wrapping.
        self.generation = self.generation.wrapping_add(1).max(1);
        self.open.take()
    }
}

/// A client's read-only descriptor of a file, and how many of its handles use it.
struct Share {
    file: Arc<File>,
    handles: usize,
}

/// The limits of the file table, in handles: all clients together, and each client.
#[derive(Clone, Copy, Debug)]
pub(super) struct FileLimits {
    pub total: usize,
    pub per_client: usize,
}

/// Which limit of the file table refused an open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Limit {
    /// [`LibcConfig::max_files`](super::LibcConfig::max_files): the handles of all clients
    /// together.
    Table = 0,
    /// [`LibcConfig::max_files_per_client`](super::LibcConfig::max_files_per_client): the
    /// client's handles.
    Client = 1,
}

/// One shard: the handles its serving thread opened, and the read-only descriptors shared among
/// them. Opening, closing and counting a client's handles take constant time, however many are
/// open.
pub(super) struct Files {
    /// Which shard this is (a handle names its shard).
    shard: usize,
    slots: Vec<FileSlot>,
    /// Empty slots, reused before the shard grows.
    vacant: Vec<usize>,
    /// Handles open in the shard, all clients together.
    open: usize,
    /// Handles each client holds in the shard (clients holding none have no entry).
    held: HashMap<u64, usize>,
    /// The shared read-only descriptors.
    shares: HashMap<ShareKey, Share>,
}

impl Files {
    fn new(shard: usize) -> Files {
        Files {
            shard,
            slots: Vec::new(),
            vacant: Vec::new(),
            open: 0,
            held: HashMap::default(),
            shares: HashMap::default(),
        }
    }

    /// Which shard this is.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// The slot of `caller`'s file `handle`.
    fn index_of(&self, handle: u64, caller: u64) -> Result<usize, HostError> {
        let (generation, low) = ((handle >> 32) as u32, handle & 0xFFFF_FFFF);
        low.checked_sub(FIRST_FILE)
            .filter(|i| i % SHARDS as u64 == self.shard as u64)
            .map(|i| (i / SHARDS as u64) as usize)
            .filter(|&i| {
                self.slots.get(i).is_some_and(|s| {
                    s.generation == generation && s.owner == caller && s.open.is_some()
                })
            })
            .ok_or(HostError::BadHandle)
    }

    /// The file `caller` opened under `handle`, to read.
    pub fn get_ref(&self, handle: u64, caller: u64) -> Result<&OpenFile, HostError> {
        let index = self.index_of(handle, caller)?;
        self.slots[index].open.as_ref().ok_or(HostError::BadHandle)
    }

    /// The file `caller` opened under `handle`.
    pub fn get(&mut self, handle: u64, caller: u64) -> Result<&mut OpenFile, HostError> {
        let index = self.index_of(handle, caller)?;
        self.slots[index].open.as_mut().ok_or(HostError::BadHandle)
    }

    /// Puts `open` in an empty slot for `caller` (whose room the quota gave); its handle, or
    /// `Err` if the shard can name no more handles.
    fn place(&mut self, open: OpenFile, caller: u64) -> Result<u64, Limit> {
        let index = match self.vacant.pop() {
            Some(index) => index,
            None if self.slots.len() >= MAX_SLOTS => return Err(Limit::Table),
            None => {
                self.slots.push(FileSlot {
                    generation: 1,
                    owner: caller,
                    open: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.open = Some(open);
        slot.owner = caller;
        self.open += 1;
        *self.held.entry(caller).or_insert(0) += 1;
        let low = FIRST_FILE + (index * SHARDS + self.shard) as u64;
        Ok((slot.generation as u64) << 32 | low)
    }

    /// Adds `caller`'s file, on a descriptor of its own (`append`: opened for appending).
    pub fn insert(&mut self, file: File, caller: u64, append: bool) -> Result<u64, Limit> {
        let open = OpenFile {
            file: Arc::new(file),
            shared: None,
            append,
        };
        self.place(open, caller)
    }

    /// A new handle, at position 0, on the shared descriptor `key` names, if there is one.
    pub fn share(&mut self, key: ShareKey) -> Option<Result<u64, Limit>> {
        let share = self.shares.get_mut(&key)?;
        let open = OpenFile {
            file: Arc::clone(&share.file),
            shared: Some((key, 0)),
            append: false,
        };
        share.handles += 1;
        let placed = self.place(open, key.owner);
        if placed.is_err() {
            self.unshare(key);
        }
        Some(placed)
    }

    /// A handle on `file`, just opened read-only, which `key`'s later read-only opens in this
    /// shard then share; or, if another open made a share of the same file meanwhile, a handle
    /// on that one. What is handed back is `file` if it is not used, to be closed outside the
    /// shard's lock.
    pub fn insert_shared(
        &mut self,
        key: ShareKey,
        file: File,
    ) -> (Result<u64, Limit>, Option<File>) {
        if let Some(shared) = self.share(key) {
            return (shared, Some(file));
        }
        let file = Arc::new(file);
        self.shares.insert(
            key,
            Share {
                file: Arc::clone(&file),
                handles: 1,
            },
        );
        let open = OpenFile {
            file,
            shared: Some((key, 0)),
            append: false,
        };
        let placed = self.place(open, key.owner);
        if placed.is_err() {
            self.unshare(key);
        }
        (placed, None)
    }

    /// Counts one handle of the share `key` out; the share goes with its last handle.
    fn unshare(&mut self, key: ShareKey) {
        if let Some(share) = self.shares.get_mut(&key) {
            share.handles -= 1;
            if share.handles == 0 {
                self.shares.remove(&key);
            }
        }
    }

    /// Counts one handle of `owner` and of its share (if any) out; the handle's descriptor, to be
    /// dropped outside the shard's lock (it closes there if this was its last handle).
    fn release(&mut self, open: OpenFile, owner: u64) -> Arc<File> {
        self.open -= 1;
        if let Some(held) = self.held.get_mut(&owner) {
            *held -= 1;
            if *held == 0 {
                self.held.remove(&owner);
            }
        }
        if let Some((key, _)) = open.shared {
            // (Not the last reference if the share goes: the handle's is returned.)
            self.unshare(key);
        }
        open.file
    }

    /// Takes `caller`'s file `handle` out of the shard: its descriptor, to be dropped outside
    /// the shard's lock.
    pub fn close(&mut self, handle: u64, caller: u64) -> Result<Arc<File>, HostError> {
        let index = self.index_of(handle, caller)?;
        let open = self.slots[index].vacate().ok_or(HostError::BadHandle)?;
        self.vacant.push(index);
        Ok(self.release(open, caller))
    }

    /// Takes the files of the clients in `gone` out of the shard: their owners and descriptors,
    /// to be dropped outside the shard's lock.
    fn take_of(&mut self, gone: &[u64]) -> Vec<(u64, Arc<File>)> {
        if !gone.iter().any(|c| self.held.contains_key(c)) {
            return Vec::new();
        }
        let mut taken = Vec::new();
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.open.is_none() || !gone.contains(&slot.owner) {
                continue;
            }
            let owner = slot.owner;
            if let Some(open) = slot.vacate() {
                self.vacant.push(index);
                taken.push((owner, self.release(open, owner)));
            }
        }
        taken
    }
}

/// The room the limits leave: handles open (and room taken for opens under way), all clients
/// together and each client.
struct Quota {
    limits: FileLimits,
    total: AtomicUsize,
    clients: RwLock<HashMap<u64, AtomicUsize>>,
}

impl Quota {
    /// Takes room for between 1 and `want` handles of `caller`: how many, or the limit that
    /// leaves none.
    fn take(&self, caller: u64, want: usize) -> Result<usize, Limit> {
        let total = self.limits.total;
        let got = take_from(&self.total, total, want).ok_or(Limit::Table)?;
        let per_client = self.limits.per_client;
        let known = read(&self.clients)
            .get(&caller)
            .map(|held| take_from(held, per_client, got));
        let client = known.unwrap_or_else(|| {
            let mut clients = write(&self.clients);
            let held = clients.entry(caller).or_insert_with(|| AtomicUsize::new(0));
            take_from(held, per_client, got)
        });
        let Some(taken) = client else {
            self.total.fetch_sub(got, Ordering::Relaxed);
            return Err(Limit::Client);
        };
        self.total.fetch_sub(got - taken, Ordering::Relaxed);
        Ok(taken)
    }

    /// Gives back room for `n` handles of `caller`.
    fn give(&self, caller: u64, n: usize) {
        if n == 0 {
            return;
        }
        self.total.fetch_sub(n, Ordering::Relaxed);
        // A client taken out by `forget` meanwhile has no count left to give back to.
        if let Some(held) = read(&self.clients).get(&caller) {
            held.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

/// Takes between 1 and `want` from what `count` leaves below `limit`: how many, or `None`.
fn take_from(count: &AtomicUsize, limit: usize, want: usize) -> Option<usize> {
    let mut now = count.load(Ordering::Relaxed);
    loop {
        let got = want.min(limit.saturating_sub(now));
        if got == 0 {
            return None;
        }
        match count.compare_exchange_weak(now, now + got, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(got),
            Err(seen) => now = seen,
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

/// Room a thread took for a message's opens and has not used (or that closes gave back), by
/// quota and client: given back at [`end_message`].
struct Taken {
    quota: Arc<Quota>,
    caller: u64,
    left: usize,
}

std::thread_local! {
    /// The room this thread holds for the message it serves ([`super::batch_per_message`]).
    static TAKEN: RefCell<Vec<Taken>> = const { RefCell::new(Vec::new()) };
}

/// Gives back the room the calling thread took for the message it served and did not use.
pub(super) fn end_message() {
    let taken = TAKEN.with(|t| std::mem::take(&mut *t.borrow_mut()));
    for t in taken {
        t.quota.give(t.caller, t.left);
    }
}

/// The file table: its shards, and the room its limits leave.
pub(super) struct FileTable {
    shards: Box<[RwLock<Files>]>,
    quota: Arc<Quota>,
}

impl FileTable {
    pub fn new(limits: FileLimits) -> FileTable {
        FileTable {
            shards: (0..SHARDS).map(|s| RwLock::new(Files::new(s))).collect(),
            quota: Arc::new(Quota {
                limits,
                total: AtomicUsize::new(0),
                clients: RwLock::default(),
            }),
        }
    }

    /// The shard `handle` names (any shard, if it names none: its lookup then fails).
    fn shard_of(&self, handle: u64) -> &RwLock<Files> {
        let low = handle & 0xFFFF_FFFF;
        let shard = low.wrapping_sub(FIRST_FILE) % SHARDS as u64;
        &self.shards[shard as usize]
    }

    /// The shard of `handle`, to look it up.
    pub fn read(&self, handle: u64) -> RwLockReadGuard<'_, Files> {
        read(self.shard_of(handle))
    }

    /// The shard of `handle`, to change it.
    pub fn write(&self, handle: u64) -> RwLockWriteGuard<'_, Files> {
        write(self.shard_of(handle))
    }

    /// The calling thread's shard, to open into.
    pub fn mine(&self) -> RwLockWriteGuard<'_, Files> {
        write(&self.shards[serving_share()])
    }

    /// Takes room for one handle of `caller`; with `message`, from room taken for the lanes of
    /// the message the thread serves (taken now if there is none left), given back at
    /// [`end_message`].
    pub fn take(&self, caller: u64, message: bool) -> Result<(), Limit> {
        if !message {
            return self.quota.take(caller, 1).map(drop);
        }
        let had = self.held(caller, |held| match held {
            Some(held) if held.left > 0 => {
                held.left -= 1;
                true
            }
            _ => false,
        });
        if had {
            return Ok(());
        }
        let got = self.quota.take(caller, MESSAGE_LANES)?;
        self.hold(caller, got - 1);
        Ok(())
    }

    /// Gives back room for one handle of `caller` (an open that failed, a close); with
    /// `message`, to the room the thread holds for its message.
    pub fn give(&self, caller: u64, message: bool) {
        match message {
            true => self.hold(caller, 1),
            false => self.quota.give(caller, 1),
        }
    }

    /// Adds `n` to the room the calling thread holds for `caller` until [`end_message`].
    fn hold(&self, caller: u64, n: usize) {
        let added = self.held(caller, |held| held.map(|held| held.left += n).is_some());
        if !added {
            TAKEN.with(|t| {
                t.borrow_mut().push(Taken {
                    quota: Arc::clone(&self.quota),
                    caller,
                    left: n,
                })
            });
        }
    }

    /// `f` of the room the calling thread holds for `caller` in this table, if any.
    fn held<R>(&self, caller: u64, f: impl FnOnce(Option<&mut Taken>) -> R) -> R {
        TAKEN.with(|t| {
            let mut t = t.borrow_mut();
            f(t.iter_mut()
                .find(|t| t.caller == caller && Arc::ptr_eq(&t.quota, &self.quota)))
        })
    }

    /// Handles open now, all clients together.
    pub fn open(&self) -> usize {
        self.shards.iter().map(|s| read(s).open).sum()
    }

    /// The clients that hold files or room (each once, in order).
    pub fn holders(&self) -> Vec<u64> {
        let mut holders: Vec<u64> = read(&self.quota.clients).keys().copied().collect();
        for shard in self.shards.iter() {
            holders.extend(read(shard).held.keys().copied());
        }
        holders.sort_unstable();
        holders.dedup();
        holders
    }

    /// Takes the files of the clients in `gone` out of the table, and forgets their counts:
    /// their descriptors, to be dropped outside the shards' locks.
    pub fn take_of(&self, gone: &[u64]) -> Vec<Arc<File>> {
        let mut taken = Vec::new();
        for shard in self.shards.iter() {
            let files = write(shard).take_of(gone);
            self.quota.total.fetch_sub(files.len(), Ordering::Relaxed);
            taken.extend(files.into_iter().map(|(_, file)| file));
        }
        let mut clients = write(&self.quota.clients);
        for client in gone {
            clients.remove(client);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn null() -> File {
        File::open("/dev/null").unwrap()
    }

    /// Opens as the host does: room, then a slot in the calling thread's shard.
    fn insert(table: &FileTable, caller: u64) -> Result<u64, Limit> {
        table.take(caller, false)?;
        let placed = table.mine().insert(null(), caller, false);
        if placed.is_err() {
            table.give(caller, false);
        }
        placed
    }

    fn close(table: &FileTable, handle: u64, caller: u64) -> Result<(), HostError> {
        table.write(handle).close(handle, caller)?;
        table.give(caller, false);
        Ok(())
    }

    const LIMITS: FileLimits = FileLimits {
        total: 4,
        per_client: 4,
    };

    #[test]
    fn stale_and_forged_handles_are_refused() {
        let table = FileTable::new(LIMITS);
        let h = insert(&table, 1).unwrap();
        assert!(table.read(h).get_ref(h, 1).is_ok());
        let bad = |h: u64, caller: u64| table.write(h).get(h, caller).err();
        assert_eq!(bad(h, 2), Some(HostError::BadHandle), "not the caller's");
        assert_eq!(close(&table, h, 2).err(), Some(HostError::BadHandle));
        assert_eq!(bad(h ^ (1 << 32), 1), Some(HostError::BadHandle));
        assert_eq!(bad(h + 1, 1), Some(HostError::BadHandle), "another shard");
        assert_eq!(
            bad(h + SHARDS as u64, 1),
            Some(HostError::BadHandle),
            "the next slot"
        );
        for forged in [0, 1, 2, u64::MAX, 0xFFFF_FFFF, 1 << 32] {
            assert_eq!(bad(forged, 1), Some(HostError::BadHandle), "{forged:#x}");
        }
        close(&table, h, 1).unwrap();
        assert_eq!(bad(h, 1), Some(HostError::BadHandle));
        let h2 = insert(&table, 1).unwrap();
        assert_ne!(h2, h, "the slot is reused under a new generation");
        assert_eq!(bad(h, 1), Some(HostError::BadHandle));
        assert_eq!(close(&table, h, 1).err(), Some(HostError::BadHandle));
        assert_eq!(table.open(), 1);
    }

    #[test]
    fn quotas_count_per_client_and_a_dead_clients_files_come_back() {
        let table = FileTable::new(FileLimits {
            total: 3,
            per_client: 2,
        });
        let a = insert(&table, 1).unwrap();
        insert(&table, 1).unwrap();
        assert_eq!(insert(&table, 1), Err(Limit::Client), "client 1's quota");
        let c = insert(&table, 2).unwrap();
        assert_eq!(insert(&table, 2), Err(Limit::Table), "the whole table");
        assert_eq!(table.holders(), [1, 2]);
        // Client 1 is gone: its two files close, client 2's stays.
        assert_eq!(table.take_of(&[1]).len(), 2);
        assert_eq!(table.holders(), [2]);
        assert_eq!(table.open(), 1);
        assert_eq!(
            table.read(a).get_ref(a, 1).err(),
            Some(HostError::BadHandle)
        );
        assert!(table.read(c).get_ref(c, 2).is_ok());
        insert(&table, 2).unwrap();
        assert_eq!(insert(&table, 2), Err(Limit::Client));
        // Client 1's room came back with it.
        insert(&table, 1).unwrap();
        assert_eq!(insert(&table, 3), Err(Limit::Table));
    }

    #[test]
    fn a_message_takes_room_once_and_gives_back_what_it_did_not_use() {
        let table = FileTable::new(FileLimits {
            total: 40,
            per_client: 40,
        });
        // A message of 5 lanes: room for a warp taken at the first, 27 given back at its end.
        for _ in 0..5 {
            table.take(1, true).unwrap();
            table.mine().insert(null(), 1, false).unwrap();
        }
        assert_eq!(table.quota.total.load(Ordering::Relaxed), MESSAGE_LANES);
        end_message();
        assert_eq!(table.quota.total.load(Ordering::Relaxed), 5);
        // Near the limit a message gets what is left, and its lanes past it are refused.
        for _ in 0..35 {
            table.take(1, true).unwrap();
        }
        assert_eq!(table.take(1, true), Err(Limit::Table));
        end_message();
        assert_eq!(table.quota.total.load(Ordering::Relaxed), 40);
        // Closes in a message give their room back at its end.
        table.give(1, true);
        assert_eq!(table.quota.total.load(Ordering::Relaxed), 40);
        end_message();
        assert_eq!(table.quota.total.load(Ordering::Relaxed), 39);
    }

    #[test]
    fn threads_open_into_shards_of_their_own_and_close_each_others_handles() {
        let table = FileTable::new(FileLimits {
            total: 1 << 20,
            per_client: 1 << 20,
        });
        let handles: Vec<Vec<u64>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| s.spawn(|| (0..100).map(|_| insert(&table, 7).unwrap()).collect()))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let shard = |h: u64| ((h & 0xFFFF_FFFF) - FIRST_FILE) % SHARDS as u64;
        for hs in &handles {
            assert!(
                hs.iter().all(|&h| shard(h) == shard(hs[0])),
                "one thread, one shard"
            );
        }
        assert_eq!(table.open(), 400);
        // Closed from another thread than the one that opened them.
        std::thread::scope(|s| {
            for hs in handles.iter().rev() {
                let table = &table;
                s.spawn(move || hs.iter().for_each(|&h| close(table, h, 7).unwrap()));
            }
        });
        assert_eq!(table.open(), 0);
        assert_eq!(table.quota.total.load(Ordering::Relaxed), 0);
    }
}
