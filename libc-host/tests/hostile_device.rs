//! The host's file and process services against a hostile (or buggy) device program, and as a
//! user meets them: forged and stale handles, hostile lengths and offsets, bad paths, the one
//! rule the host enforces on paths (a file held for exclusive use is never written, emptied,
//! removed or renamed: `HostError::Busy`), clients that die holding files, clients that share
//! handle numbers, floods of opens, exit codes. Each test says what it attacks and what must hold.
//!
//! The services are driven as the host crate's own tests drive them, with no GPU: through
//! `LibcHost::for_caller` (the `LibcServer` a transport's dispatch reaches, one client id per
//! client), and over the wire through an in-process region (`ferry_rpc::HeapRegion`, served by
//! `LibcHost::dispatch` on a thread) where a request is made by hand to lie about itself. Files
//! live in directories this file makes under `/tmp` and removes.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_libc_host::{
    batch_per_message, end_message, mode, opcode, ExitPolicy, Handle, HostError, Libc, LibcConfig,
    LibcHost, LibcServer, OpenRefusals, IO_CHUNK, IO_LIMIT, PATH_LIMIT, PROGRAM, SEEK_CUR,
    SEEK_END, SEEK_SET, STDERR, STDOUT,
};
use ferry_rpc::service::{status, Error, Handler, Service, Status, INLINE_BYTES};
use ferry_rpc::stream::STREAM_REJECTED;
use ferry_rpc::words::{InlineLanes, WORD_BYTES};
use ferry_rpc::{Client, HeaderWord, HeapRegion, PerPort, Process, Single, Slot, Stalled, Wait};
use ferry_testkit::Watchdog;

// ---------------------------------------------------------------------------------------------
// What the tests share.

/// A directory of its own under `/tmp`, removed (with what is in it) when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = PathBuf::from(format!(
            "/tmp/ferry-hostile-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    /// `name` in the directory, as the text a device sends.
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }

    /// A file of the user's: `name`, holding `data`.
    fn user_file(&self, name: &str, data: &[u8]) -> String {
        let path = self.path(name);
        std::fs::write(&path, data).unwrap();
        path
    }

    /// The names in the directory.
    fn names(&self) -> BTreeSet<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Output the host writes, kept for the test to read.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

/// A host whose output goes to `out` and `err`, with room for `files` handles, `per_client` a
/// client.
fn host_with(out: &Capture, err: &Capture, files: usize, per_client: usize) -> LibcHost {
    LibcHost::new(LibcConfig {
        stdout: Box::new(out.clone()),
        stderr: Box::new(err.clone()),
        max_files: files,
        max_files_per_client: per_client,
        ..LibcConfig::default()
    })
}

/// A host with the default limits (256 files, 64 a client), its output kept.
fn host() -> LibcHost {
    host_with(&Capture::default(), &Capture::default(), 256, 64)
}

/// `BadHandle`, as any call's result.
fn bad<T>() -> Result<T, HostError> {
    Err(HostError::BadHandle)
}

/// The host's answer `e`, as the device sees it.
fn app<T>(e: HostError) -> Result<T, Error<HostError>> {
    Err(Error::App(e))
}

/// What `read` gave, as bytes.
fn read(c: &impl LibcServer, h: Handle, len: u32) -> Result<Vec<u8>, HostError> {
    c.read(h, len).map(|d| d.as_ref().to_vec())
}

fn gets(c: &impl LibcServer, h: Handle, len: u32) -> Result<Vec<u8>, HostError> {
    c.gets(h, len).map(|d| d.as_ref().to_vec())
}

fn read_at(c: &impl LibcServer, h: Handle, at: u64, len: u32) -> Result<Vec<u8>, HostError> {
    c.read_at(h, at, len).map(|d| d.as_ref().to_vec())
}

/// `w` as C's `fopen` says it.
fn w() -> u32 {
    mode::from_c("w").unwrap()
}

/// This process's descriptors open on the file at `path` (or on what was its file before it was
/// replaced or removed, which the kernel names `PATH (deleted)`).
fn descriptors_of(path: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| {
            let target = target.to_string_lossy();
            target == path || target == format!("{path} (deleted)")
        })
        .count()
}

/// Clients a test has declared gone (`client_alive` is a plain `fn`: it reads this).
static GONE: Mutex<BTreeSet<u64>> = Mutex::new(BTreeSet::new());

fn alive(client: u64) -> bool {
    !GONE.lock().unwrap().contains(&client)
}

fn watchdog(name: &'static str) -> Watchdog {
    Watchdog::new(name, Duration::from_secs(120))
}

// ---------------------------------------------------------------------------------------------
// Handles.

/// Attacks: every call that takes a handle, given a handle never handed out (0, 12345,
/// u64::MAX, 0xFFFF_FFFF), one already closed, one whose generation or shard bits were changed,
/// another client's, and the output streams (1, 2) where a file is needed; closing the output
/// streams. Must hold: each is `BadHandle` (never another file, never a panic); the other
/// client's file is untouched; standard output still works after `close(STDOUT)`.
#[test]
fn forged_closed_foreign_and_output_handles_are_refused_on_every_call() {
    let dir = Dir::new("handles");
    let out = Capture::default();
    let host = host_with(&out, &Capture::default(), 256, 64);
    let (me, them) = (host.for_caller(11), host.for_caller(12));
    let theirs_path = dir.user_file("theirs", b"their data");
    let theirs = them.open(mode::READ | mode::WRITE, &theirs_path).unwrap();
    let theirs_shared = them.open(mode::READ, &theirs_path).unwrap();
    let mine = me.open(mode::READ | mode::WRITE, &dir.path("mine")).err();
    assert_eq!(mine, Some(HostError::NotFound));
    let closed = me.open(w(), &dir.path("closed")).unwrap();
    me.close(closed).unwrap();

    let mut forged = vec![
        Handle(0),
        Handle(12345),
        Handle(u64::MAX),
        Handle(0xFFFF_FFFF),
        Handle(1 << 32),
        closed,
        Handle(closed.0 ^ (1 << 32)),
        Handle(closed.0 + 1),
        Handle(closed.0 + 16),
        theirs,
        theirs_shared,
        Handle(theirs.0 ^ (1 << 33)),
    ];
    // A stream's number with a generation: not the stream.
    forged.push(Handle(STDOUT.0 | 1 << 32));
    for h in forged.iter().copied() {
        assert_eq!(read(&me, h, 10), bad(), "read {h:?}");
        assert_eq!(gets(&me, h, 10), bad(), "gets {h:?}");
        assert_eq!(me.write(h, b"x"), bad(), "write {h:?}");
        assert_eq!(read_at(&me, h, 0, 10), bad(), "read_at {h:?}");
        assert_eq!(me.write_at(h, 0, b"x"), bad(), "write_at {h:?}");
        assert_eq!(me.size(h), bad(), "size {h:?}");
        assert_eq!(me.seek(h, 0, SEEK_SET), bad(), "seek {h:?}");
        assert_eq!(me.tell(h), bad(), "tell {h:?}");
        assert_eq!(me.flush(h), bad(), "flush {h:?}");
        assert_eq!(me.close(h), bad(), "close {h:?}");
    }
    // The output streams are for writing and flushing only.
    for h in [STDOUT, STDERR] {
        assert_eq!(read(&me, h, 10), bad());
        assert_eq!(gets(&me, h, 10), bad());
        assert_eq!(read_at(&me, h, 0, 10), bad());
        assert_eq!(me.write_at(h, 0, b"x"), bad());
        assert_eq!(me.size(h), bad());
        assert_eq!(me.seek(h, 0, SEEK_SET), bad());
        assert_eq!(me.tell(h), bad());
        assert_eq!(me.close(h), bad(), "the host's {h:?} cannot be closed");
    }
    assert_eq!(me.write(STDOUT, b"still here\n"), Ok(11));
    assert_eq!(me.flush(STDOUT), Ok(()));
    assert_eq!(out.bytes(), b"still here\n");
    // Between processes there is no device memory, whatever the handle.
    assert_eq!(
        me.read_to_device(theirs, 0, 0x1000, 16, 0, 0),
        Err(HostError::NoDeviceMemory)
    );
    // Theirs is untouched and still theirs.
    assert_eq!(them.tell(theirs), Ok(0));
    assert_eq!(read(&them, theirs_shared, 100).unwrap(), b"their data");
    assert_eq!(std::fs::read(&theirs_path).unwrap(), b"their data");
    assert_eq!(host.open_files(), 2);
}

/// Attacks: client ids that share handle numbers. One serving thread opens for two clients in
/// turn, so a slot one client closed is reused for the other under the same low bits. Must
/// hold: a handle names its client's file only: the old number is refused for both clients,
/// and neither reaches the other's file.
#[test]
fn a_reused_slot_never_lets_one_client_reach_the_others_file() {
    let dir = Dir::new("slots");
    let host = host();
    let (x, y) = (host.for_caller(21), host.for_caller(22));
    let xs = x.open(w(), &dir.path("x")).unwrap();
    x.write(xs, b"x's").unwrap();
    x.close(xs).unwrap();
    let ys = y
        .open(mode::READ | mode::WRITE | mode::CREATE, &dir.path("y"))
        .unwrap();
    assert_eq!(
        ys.0 & 0xFFFF_FFFF,
        xs.0 & 0xFFFF_FFFF,
        "the slot was reused (same low bits)"
    );
    assert_ne!(ys, xs, "under a new generation");
    for c in [x, y] {
        assert_eq!(c.write(xs, b"!"), Err(HostError::BadHandle));
        assert_eq!(c.close(xs), Err(HostError::BadHandle));
    }
    assert_eq!(x.write(ys, b"forged"), Err(HostError::BadHandle));
    assert_eq!(read(&x, ys, 10), Err(HostError::BadHandle));
    assert_eq!(x.close(ys), Err(HostError::BadHandle));
    y.write(ys, b"y's").unwrap();
    y.close(ys).unwrap();
    assert_eq!(std::fs::read(dir.path("x")).unwrap(), b"x's");
    assert_eq!(std::fs::read(dir.path("y")).unwrap(), b"y's");
    assert_eq!(host.open_files(), 0);
}

/// Attacks: clients on several threads at once, each writing its own file through handles
/// whose numbers the others see (they are published as soon as opened) and try to read, write,
/// seek and close. Must hold: every foreign attempt is `BadHandle`; every file holds exactly its
/// client's lines, in order; no handle is left open.
#[test]
fn concurrent_clients_keep_their_own_files_whatever_numbers_they_guess() {
    let _w = watchdog("concurrent clients");
    let dir = Dir::new("concurrent");
    let host = host();
    const CLIENTS: u64 = 4;
    const ROUNDS: usize = 100;
    let published: Mutex<Vec<Handle>> = Mutex::new(Vec::new());
    let foreign_ok = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for id in 0..CLIENTS {
            let (host, dir, published, foreign_ok) = (&host, &dir, &published, &foreign_ok);
            s.spawn(move || {
                let c = host.for_caller(100 + id);
                let path = dir.path(&format!("client{id}"));
                let first = c.open(w(), &path).unwrap();
                c.close(first).unwrap();
                for round in 0..ROUNDS {
                    let h = c.open(mode::from_c("a").unwrap(), &path).unwrap();
                    published.lock().unwrap().push(h);
                    let guesses: Vec<Handle> = published.lock().unwrap().clone();
                    for g in guesses.into_iter().filter(|&g| g != h) {
                        let tries = [
                            c.write(g, b"intruder\n").is_ok(),
                            read(&c, g, 4).is_ok(),
                            c.seek(g, 0, SEEK_SET).is_ok(),
                            c.close(g).is_ok(),
                        ];
                        // One of ours from an earlier round (closed) or another client's: none
                        // may work.
                        let worked = tries.iter().filter(|&&t| t).count();
                        foreign_ok.fetch_add(worked, Ordering::Relaxed);
                    }
                    let line = format!("client {id} round {round}\n");
                    assert_eq!(c.write(h, line.as_bytes()), Ok(line.len() as u32));
                    c.close(h).unwrap();
                }
            });
        }
    });
    assert_eq!(
        foreign_ok.load(Ordering::Relaxed),
        0,
        "a foreign handle worked"
    );
    for id in 0..CLIENTS {
        let want: String = (0..ROUNDS)
            .map(|round| format!("client {id} round {round}\n"))
            .collect();
        let got = std::fs::read_to_string(dir.path(&format!("client{id}"))).unwrap();
        assert_eq!(got, want, "client {id}'s file");
    }
    assert_eq!(host.open_files(), 0);
}

/// Attacks: one handle closed from many threads at once (a buggy program closing twice, racing
/// itself), then the quota. Must hold: exactly one close of each handle succeeds, the others
/// are `BadHandle`; the room each close gives back is given once, so the client can open
/// exactly its quota again, no more and no fewer.
#[test]
fn racing_closes_of_one_handle_give_its_room_back_once() {
    let _w = watchdog("racing closes");
    let dir = Dir::new("closes");
    let host = host_with(&Capture::default(), &Capture::default(), 1000, 16);
    let c = host.for_caller(31);
    let path = dir.user_file("f", b"data");
    for round in 0..20 {
        let handles: Vec<Handle> = (0..16)
            .map(|i| match i % 2 {
                0 => c.open(mode::READ, &path).unwrap(),
                _ => c.open(mode::READ | mode::WRITE, &path).unwrap(),
            })
            .collect();
        assert_eq!(c.open(mode::READ, &path), Err(HostError::TooManyOpen));
        let closed = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (handles, closed, host) = (&handles, &closed, &host);
                s.spawn(move || {
                    let c = host.for_caller(31);
                    for &h in handles {
                        if c.close(h).is_ok() {
                            closed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(closed.load(Ordering::Relaxed), 16, "round {round}");
        assert_eq!(host.open_files(), 0, "round {round}");
    }
    // The quota is whole: 16 open, the 17th refused.
    let again: Vec<Handle> = (0..16)
        .map(|_| c.open(mode::READ, &path).unwrap())
        .collect();
    assert_eq!(c.open(mode::READ, &path), Err(HostError::TooManyOpen));
    for h in again {
        c.close(h).unwrap();
    }
    assert_eq!(descriptors_of(&path), 0);
}

// ---------------------------------------------------------------------------------------------
// Lengths and offsets.

/// Attacks: read and line lengths of 0 and u32::MAX, offsets of u64::MAX, i64::MAX and
/// i64::MAX + 1, writes whose end overflows, empty writes, seeks to i64::MIN and i64::MAX from
/// every origin and to unknown origins, on a handle with a descriptor of its own and on one
/// sharing a read-only descriptor. Must hold: lengths are clamped (`IO_LIMIT`, `IO_CHUNK`),
/// refusals are `Invalid` (or an empty read past the end), never a panic; a refused seek moves
/// nothing; the file keeps its bytes and size.
#[test]
fn hostile_lengths_and_offsets_are_clamped_or_refused_and_move_nothing() {
    let dir = Dir::new("lengths");
    let host = host();
    let c = host.for_caller(41);
    let data: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut lines = data.clone();
    lines[1500] = b'\n';
    let path = dir.user_file("data", &lines);
    let own = c.open(mode::READ | mode::WRITE, &path).unwrap();
    let shared = c.open(mode::READ, &path).unwrap();

    for h in [own, shared] {
        assert_eq!(read(&c, h, 0).unwrap(), b"", "a read of nothing");
        assert_eq!(gets(&c, h, 0).unwrap(), b"", "a line of nothing");
        assert_eq!(c.tell(h), Ok(0));
        // As much as there is, at most the calls' limits.
        let line = gets(&c, h, u32::MAX).unwrap();
        assert_eq!(line.len(), IO_CHUNK, "a line is one chunk at most");
        let rest = read(&c, h, u32::MAX).unwrap();
        assert_eq!(rest.len(), lines.len() - IO_CHUNK);
        assert!(rest.len() <= IO_LIMIT);
        assert_eq!(read(&c, h, u32::MAX).unwrap(), b"", "the end");
        assert_eq!(
            read_at(&c, h, 0, u32::MAX).unwrap(),
            lines,
            "read_at clamps"
        );
        assert_eq!(read_at(&c, h, 0, 0).unwrap(), b"");
        // Offsets no file holds: refused, or nothing (the end), never a panic.
        for at in [u64::MAX, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX - 5] {
            match read_at(&c, h, at, 10) {
                Ok(got) => assert!(got.is_empty(), "{at:#x}"),
                Err(e) => assert_eq!(e, HostError::Invalid, "{at:#x}"),
            }
        }
        assert_eq!(read_at(&c, h, u64::MAX, 0).unwrap(), b"");
        // Seeks: to 10, then every refusal leaves it there.
        assert_eq!(c.seek(h, 10, SEEK_SET), Ok(10));
        for (offset, whence) in [
            (-1, SEEK_SET),
            (i64::MIN, SEEK_SET),
            (i64::MIN, SEEK_CUR),
            (-11, SEEK_CUR),
            (i64::MAX, SEEK_CUR),
            (i64::MAX, SEEK_END),
            (i64::MIN, SEEK_END),
            (-(lines.len() as i64) - 1, SEEK_END),
            (0, 3),
            (0, u32::MAX),
        ] {
            assert_eq!(
                c.seek(h, offset, whence),
                Err(HostError::Invalid),
                "seek({offset}, {whence}) on {h:?}"
            );
            assert_eq!(c.tell(h), Ok(10), "seek({offset}, {whence}) moved it");
        }
        assert_eq!(c.seek(h, -10, SEEK_CUR), Ok(0));
        assert_eq!(c.seek(h, 0, SEEK_END), Ok(lines.len() as u64));
        assert_eq!(c.size(h), Ok(lines.len() as u64));
    }
    // Writes: nothing, and ends past what an offset holds.
    assert_eq!(c.write(own, b""), Ok(0));
    assert_eq!(c.write_at(own, 5, b""), Ok(0));
    for at in [u64::MAX, u64::MAX - 1, u64::MAX - 2, i64::MAX as u64 + 1] {
        assert_eq!(
            c.write_at(own, at, b"xyz"),
            Err(HostError::Invalid),
            "write_at {at:#x}"
        );
    }
    // The shared descriptor is read-only: a write through it fails and moves nothing.
    assert_eq!(c.seek(shared, 0, SEEK_SET), Ok(0));
    assert!(c.write(shared, b"nope").is_err());
    assert!(c.write_at(shared, 0, b"nope").is_err());
    assert_eq!(c.tell(shared), Ok(0));
    c.close(own).unwrap();
    c.close(shared).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        lines,
        "the file is unchanged"
    );
}

// ---------------------------------------------------------------------------------------------
// Paths.

/// Attacks: paths the host must not take as they are: empty, with a NUL inside, with C's
/// terminating NUL, a component longer than the file system's names, a path of 10 000 bytes
/// (a direct call, past the wire's `PATH_LIMIT`), a missing directory, a trailing slash after a
/// file, directories (`.`, the directory itself) for reading and writing; removing a
/// directory; renames split at 0, past the end, or with a NUL in either path. Must hold: each is
/// an error the device sees (`Invalid` for NUL and empty paths and bad splits, `NotAFile` for
/// directories), and nothing is created, removed or renamed.
#[test]
fn bad_paths_are_refused_and_create_remove_or_rename_nothing() {
    let dir = Dir::new("paths");
    let host = host();
    let c = host.for_caller(51);
    let keep = dir.user_file("keep", b"keep");
    std::fs::create_dir(dir.0.join("sub")).unwrap();
    let before = dir.names();
    let create = mode::from_c("w+").unwrap();
    for m in [mode::READ, create, mode::from_c("a").unwrap()] {
        assert_eq!(c.open(m, ""), Err(HostError::Invalid));
        assert_eq!(
            c.open(m, &format!("{}\0evil", dir.path("x"))),
            Err(HostError::Invalid)
        );
        assert_eq!(
            c.open(m, &format!("{}\0", dir.path("x"))),
            Err(HostError::Invalid),
            "C's terminating NUL"
        );
        assert_eq!(
            c.open(m, &format!("{keep}\0")),
            Err(HostError::Invalid),
            "an existing file with C's NUL"
        );
        assert!(c.open(m, &dir.path(&"n".repeat(300))).is_err());
        let huge = format!("{}/{}", dir.0.display(), "d/".repeat(5000));
        assert!(c.open(m, &huge).is_err());
        assert_eq!(
            c.open(m, &dir.path("missing/dir/file")),
            Err(HostError::NotFound)
        );
        assert!(c.open(m, &format!("{keep}/")).is_err(), "a file is no dir");
        assert!(c.open(m, &format!("{keep}/x")).is_err());
        for d in [dir.path("."), dir.path("sub"), dir.path("sub/"), "/".into()] {
            assert_eq!(c.open(m, &d), Err(HostError::NotAFile), "{d} mode {m}");
        }
    }
    assert_eq!(c.remove(""), Err(HostError::Invalid));
    assert_eq!(
        c.remove(&format!("{keep}\0")),
        Err(HostError::Invalid),
        "remove with C's NUL"
    );
    assert!(c.remove(&dir.path("sub")).is_err(), "a directory");
    assert!(c.remove(&format!("{keep}/")).is_err());
    assert!(c.remove(&dir.path(&"n".repeat(300))).is_err());
    let pair = format!("{keep}{}", dir.path("moved"));
    for split in [0, u32::MAX, pair.len() as u32 + 1, pair.len() as u32] {
        assert_eq!(c.rename(split, &pair), Err(HostError::Invalid), "{split}");
    }
    let with_nul = format!("{keep}{}\0", dir.path("moved"));
    assert_eq!(
        c.rename(keep.len() as u32, &with_nul),
        Err(HostError::Invalid)
    );
    let from_nul = format!("{keep}\0{}", dir.path("moved"));
    assert_eq!(
        c.rename(keep.len() as u32 + 1, &from_nul),
        Err(HostError::Invalid)
    );
    assert_eq!(dir.names(), before, "nothing created, removed or renamed");
    assert_eq!(std::fs::read(&keep).unwrap(), b"keep");
    assert_eq!(host.open_files(), 0);
}

/// Attacks: every open the host refuses, aimed at a file of the user's with a mode that would
/// empty it: modes it does not know (bits past `mode::ALL`, no read or write bit), truncation
/// without writing or with appending, an exclusive create of an existing file, an open past
/// the client's quota, an open of a file held for exclusive use, through a hard link too.
/// Must hold: each is refused with its error and the user's file keeps every byte (an open
/// that fails must never have emptied anything first).
#[test]
fn refused_opens_never_empty_a_users_file() {
    let dir = Dir::new("refused");
    let host = host_with(&Capture::default(), &Capture::default(), 256, 2);
    let c = host.for_caller(61);
    let precious = dir.user_file("precious", b"the user's only copy");
    let link = dir.path("link");
    std::fs::hard_link(&precious, &link).unwrap();
    let intact = || assert_eq!(std::fs::read(&precious).unwrap(), b"the user's only copy");
    for path in [&precious, &link] {
        for m in [
            mode::TRUNCATE,
            mode::TRUNCATE | mode::READ,
            mode::TRUNCATE | mode::CREATE | mode::READ,
            mode::TRUNCATE | mode::WRITE | mode::APPEND,
            mode::TRUNCATE | mode::WRITE | 64,
            mode::TRUNCATE | mode::WRITE | 1 << 31,
            u32::MAX,
        ] {
            assert_eq!(c.open(m, path), Err(HostError::Invalid), "mode {m:#x}");
            intact();
        }
        let exclusive = mode::WRITE | mode::CREATE | mode::TRUNCATE | mode::EXCLUSIVE;
        assert_eq!(c.open(exclusive, path), Err(HostError::Exists));
        intact();
    }
    // Past the quota (2): refused before the file is looked at.
    let held = [
        c.open(w(), &dir.path("one")).unwrap(),
        c.open(w(), &dir.path("two")).unwrap(),
    ];
    assert_eq!(c.open(w(), &precious), Err(HostError::TooManyOpen));
    assert_eq!(c.open(w(), &dir.path("three")), Err(HostError::TooManyOpen));
    assert!(
        !Path::new(&dir.path("three")).exists(),
        "a refused open creates nothing"
    );
    intact();
    for h in held {
        c.close(h).unwrap();
    }
    // Held for exclusive use by another program: never emptied, through either name.
    let holder = std::fs::File::open(&precious).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
    for path in [&precious, &link] {
        for m in ["w", "w+", "a", "a+", "r+"] {
            let m = mode::from_c(m).unwrap();
            assert_eq!(c.open(m, path), Err(HostError::Busy), "mode {m:#x}");
            intact();
        }
    }
    drop(holder);
    assert_eq!(host.open_files(), 0);
}

/// Attacks: `mode::EXCLUSIVE` without `mode::CREATE` (a raw mode a device may send; C's `x`
/// always comes with `w`'s create). `mode`'s docs: `CREATE` creates the file, `EXCLUSIVE` fails
/// if it exists "(with CREATE)". Must hold: a mode without `CREATE` creates nothing: a missing
/// file is `NotFound`, as `O_EXCL` without `O_CREAT` is on Linux.
#[test]
fn exclusive_without_create_creates_nothing() {
    let dir = Dir::new("excl");
    let host = host();
    let c = host.for_caller(71);
    let path = dir.path("never-asked-for");
    let opened = c.open(mode::WRITE | mode::EXCLUSIVE, &path);
    let created = Path::new(&path).exists();
    if let Ok(h) = opened {
        c.close(h).unwrap();
    }
    assert_eq!(opened.err(), Some(HostError::NotFound));
    assert!(!created, "a file was created by a mode without CREATE");
}

/// Attacks: `write_at` (`pwrite`) on a handle opened for appending (`"a"`, `"a+"`). `Libc::WriteAt`
/// says it "writes the bytes at `offset`" and replies how many were written. Must hold: the
/// bytes land at the offset asked for, or the call is refused; never a success reply for bytes
/// written somewhere else (the host refuses it: `Invalid`).
#[test]
fn write_at_on_an_append_handle_lands_at_its_offset_or_is_refused() {
    let dir = Dir::new("append");
    let host = host();
    let c = host.for_caller(72);
    let path = dir.user_file("log", b"hello");
    let h = c.open(mode::from_c("a").unwrap(), &path).unwrap();
    let wrote = c.write_at(h, 0, b"J");
    c.close(h).unwrap();
    let now = std::fs::read(&path).unwrap();
    match wrote {
        Ok(n) => {
            assert_eq!(n, 1);
            assert_eq!(
                now, b"Jello",
                "the byte went elsewhere, reported as written at 0"
            );
        }
        Err(e) => {
            assert_eq!(e, HostError::Invalid);
            assert_eq!(now, b"hello");
        }
    }
}

/// Attacks: the one rule the host enforces on paths — a file another program holds for
/// exclusive use (`flock`, as every live ferry server holds its region file) is never opened
/// for writing, emptied, removed or renamed — reached by other names: a symbolic link, a hard
/// link, `dir/../file`, doubled slashes, a link in a parent directory; renames onto it and
/// away from it. Also links to the kernel's interface files and devices. Must hold: every
/// writing open, remove and rename of the file under any name is `Busy`; removing or renaming
/// a symbolic link acts on the link only; the file keeps its bytes, size and inode; a reading
/// open still works; links to `/proc/self/mem` and `/dev/zero` are `NotAFile`.
#[test]
fn the_busy_rule_holds_under_every_name_of_the_file() {
    let dir = Dir::new("busy");
    let host = host();
    let c = host.for_caller(81);
    let region = dir.user_file("region", b"a live server's memory");
    let inode = std::fs::metadata(&region).unwrap().ino();
    let holder = std::fs::File::open(&region).unwrap();
    rustix::fs::flock(&holder, rustix::fs::FlockOperation::LockExclusive).unwrap();
    std::fs::create_dir(dir.0.join("sub")).unwrap();
    std::os::unix::fs::symlink(&region, dir.0.join("sym")).unwrap();
    std::os::unix::fs::symlink(&dir.0, dir.0.join("sub/up")).unwrap();
    std::fs::hard_link(&region, dir.0.join("hard")).unwrap();
    let names = [
        region.clone(),
        dir.path("sym"),
        dir.path("hard"),
        dir.path("sub/../region"),
        format!("{}//region", dir.0.display()),
        dir.path("sub/up/region"),
        dir.path("sub/up/sym"),
    ];
    let intact = || {
        let meta = std::fs::metadata(&region).unwrap();
        assert_eq!(meta.ino(), inode, "the region file was replaced");
        assert_eq!(std::fs::read(&region).unwrap(), b"a live server's memory");
    };
    for name in &names {
        for m in ["w", "w+", "a", "a+", "r+", "wx"] {
            let m = mode::from_c(m).unwrap();
            let got = c.open(m, name);
            let want = match m & mode::EXCLUSIVE {
                0 => HostError::Busy,
                _ => HostError::Exists,
            };
            assert_eq!(got, Err(want), "open {name} mode {m:#x}");
            intact();
        }
        let r = c.open(mode::READ, name).unwrap();
        assert_eq!(read(&c, r, 100).unwrap(), b"a live server's memory");
        c.close(r).unwrap();
    }
    let other = dir.user_file("other", b"other");
    for name in names.iter().filter(|n| !n.ends_with("sym")) {
        assert_eq!(c.remove(name), Err(HostError::Busy), "remove {name}");
        let pair = format!("{name}{}", dir.path("away"));
        assert_eq!(c.rename(name.len() as u32, &pair), Err(HostError::Busy));
        let onto = format!("{other}{name}");
        assert_eq!(c.rename(other.len() as u32, &onto), Err(HostError::Busy));
        intact();
    }
    assert!(Path::new(&other).exists());
    // A symbolic link is its own file: renamed or removed, the file it names stays.
    let sym = dir.path("sym");
    let pair = format!("{sym}{}", dir.path("sym2"));
    assert_eq!(c.rename(sym.len() as u32, &pair), Ok(()));
    assert_eq!(c.remove(&dir.path("sym2")), Ok(()));
    intact();
    // Renaming onto a link replaces the link, not what it names.
    std::os::unix::fs::symlink(&region, &sym).unwrap();
    let onto = format!("{other}{sym}");
    assert_eq!(c.rename(other.len() as u32, &onto), Ok(()));
    assert_eq!(std::fs::read(&sym).unwrap(), b"other");
    intact();
    // Links to what is no file of data.
    std::os::unix::fs::symlink("/proc/self/mem", dir.0.join("mem")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.0.join("zero")).unwrap();
    for name in ["mem", "zero"] {
        for m in [mode::READ, mode::READ | mode::WRITE, w()] {
            assert_eq!(c.open(m, &dir.path(name)), Err(HostError::NotAFile));
        }
    }
    drop(holder);
    assert_eq!(host.open_files(), 0);
}

// ---------------------------------------------------------------------------------------------
// Clients that die, floods of opens.

/// Attacks: a client that dies holding files (writable ones with data written, read-only
/// handles sharing one descriptor), whose handle numbers another client then presents. Must
/// hold: before the reclaim the others cannot use them; the reclaim closes every descriptor
/// it held (none leaked to the next client), loses none of the bytes it wrote and empties no
/// file; the new client gets handles of its own and the old numbers stay refused; a table full
/// of a dead client's files makes room for a live one's open.
#[test]
fn a_dead_clients_files_are_closed_kept_and_never_reach_the_next_client() {
    let dir = Dir::new("dead");
    let host = LibcHost::new(LibcConfig {
        stdout: Box::new(Capture::default()),
        stderr: Box::new(Capture::default()),
        max_files: 12,
        max_files_per_client: 12,
        client_alive: alive,
        ..LibcConfig::default()
    });
    let (dead, next) = (host.for_caller(9001), host.for_caller(9002));
    let input = dir.user_file("input", b"shared input");
    let written: Vec<String> = (0..3).map(|i| dir.path(&format!("out{i}"))).collect();
    let mut held = Vec::new();
    for (i, path) in written.iter().enumerate() {
        let h = dead.open(w(), path).unwrap();
        dead.write(h, format!("written by the dead client {i}").as_bytes())
            .unwrap();
        held.push(h);
    }
    for _ in 0..5 {
        held.push(dead.open(mode::READ, &input).unwrap());
    }
    assert_eq!(descriptors_of(&input), 1, "five handles, one descriptor");
    GONE.lock().unwrap().insert(9001);
    for &h in &held {
        assert_eq!(next.write(h, b"x"), Err(HostError::BadHandle));
        assert_eq!(read(&next, h, 1), Err(HostError::BadHandle));
    }
    let reclaimed = host.reclaim_gone();
    assert_eq!((reclaimed.clients, reclaimed.files), (1, 8));
    assert_eq!(host.open_files(), 0);
    assert_eq!(descriptors_of(&input), 0, "its shared descriptor closed");
    for (i, path) in written.iter().enumerate() {
        assert_eq!(descriptors_of(path), 0, "its descriptor of {path} closed");
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            format!("written by the dead client {i}"),
            "nothing it wrote is lost"
        );
    }
    // The next client: its own handles, the old numbers refused to it and to the dead id.
    let mine: Vec<Handle> = written
        .iter()
        .map(|p| next.open(mode::READ, p).unwrap())
        .collect();
    for &h in &held {
        assert!(
            !mine.contains(&h),
            "a dead client's number handed out again"
        );
        assert_eq!(read(&next, h, 1), Err(HostError::BadHandle));
        assert_eq!(read(&dead, h, 1), Err(HostError::BadHandle));
        assert_eq!(dead.close(h), Err(HostError::BadHandle));
    }
    for h in mine {
        next.close(h).unwrap();
    }
    // A table full of a dead client's files: a live client's open frees them first.
    let doomed = host.for_caller(9003);
    let full: Vec<Handle> = (0..12)
        .map(|i| doomed.open(w(), &dir.path(&format!("doomed{i}"))).unwrap())
        .collect();
    assert_eq!(
        next.open(w(), &dir.path("late")),
        Err(HostError::TooManyOpen)
    );
    GONE.lock().unwrap().insert(9003);
    let late = next.open(w(), &dir.path("late")).unwrap();
    assert_eq!(host.open_files(), 1);
    assert_eq!(doomed.close(full[0]), Err(HostError::BadHandle));
    next.close(late).unwrap();
}

/// Attacks: a flood of opens of new files by one client, then by more clients than the table
/// holds, some read-only, some creating. Must hold: past the client's quota and past the table
/// every open is `TooManyOpen` (counted by cause), no refused open creates a file, the other
/// clients keep their room, and once the files are closed every client opens its quota again.
#[test]
fn a_flood_of_opens_is_refused_and_the_host_recovers() {
    let dir = Dir::new("flood");
    let host = host_with(&Capture::default(), &Capture::default(), 256, 64);
    let input = dir.user_file("input", b"in");
    let mut open: Vec<(u64, Handle)> = Vec::new();
    for client in 1..=4u64 {
        let c = host.for_caller(client);
        for i in 0..64 {
            let h = match i % 4 {
                0 => c.open(mode::READ, &input).unwrap(),
                _ => c.open(w(), &dir.path(&format!("c{client}-{i}"))).unwrap(),
            };
            open.push((client, h));
        }
        for _ in 0..100 {
            assert_eq!(c.open(mode::READ, &input), Err(HostError::TooManyOpen));
        }
        assert_eq!(
            c.open(w(), &dir.path(&format!("c{client}-over"))),
            Err(HostError::TooManyOpen)
        );
    }
    let fifth = host.for_caller(5);
    assert_eq!(
        fifth.open(w(), &dir.path("c5")),
        Err(HostError::TooManyOpen)
    );
    assert_eq!(
        host.refusals(),
        OpenRefusals {
            // The fourth client's refusals found the table full too (256 = 4 × 64): counted
            // as the table's.
            table: 101 + 1,
            client: 3 * 101,
            descriptors: 0
        }
    );
    let names = dir.names();
    assert!(
        names.iter().all(|n| !n.ends_with("-over") && n != "c5"),
        "{names:?}"
    );
    assert_eq!(host.open_files(), 256);
    for (client, h) in open {
        host.for_caller(client).close(h).unwrap();
    }
    assert_eq!(host.open_files(), 0);
    assert_eq!(descriptors_of(&input), 0);
    for client in 1..=5u64 {
        let c = host.for_caller(client);
        let again: Vec<Handle> = (0..64)
            .map(|_| c.open(mode::READ, &input).unwrap())
            .collect();
        for h in again {
            c.close(h).unwrap();
        }
    }
}

/// Set in the child process a test that changes this process's limits runs in.
const CHILD: &str = "FERRY_HOSTILE_DEVICE_CHILD";

/// Attacks: a flood of opens with the host's quotas out of the way, until the host process has
/// no descriptor left (`RLIMIT_NOFILE`); then creating, removing and renaming at the limit.
/// Must hold: opens are `NoDescriptors` (not a crash, not a hang, not an I/O error), a refused
/// create leaves no file, remove and rename are refused rather than done unchecked, every file
/// already open still reads and writes, and a close makes room again. (In a child process: it
/// lowers the process's limit.)
#[test]
fn at_the_descriptor_limit_refused_calls_do_nothing_and_the_host_recovers() {
    if !ferry_testkit::in_child(
        "at_the_descriptor_limit_refused_calls_do_nothing_and_the_host_recovers",
        CHILD,
    ) {
        return;
    }
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let dir = Dir::new("nofile");
    let host = host_with(&Capture::default(), &Capture::default(), 1 << 16, 1 << 16);
    let c = host.for_caller(1);
    let victim = dir.user_file("victim", b"keep");
    // Opened before the limit: the test itself has no descriptor to spare at it.
    let victim_now = std::fs::File::open(&victim).unwrap();
    let victim_intact = || {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 16];
        let n = victim_now.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf[..n], b"keep");
        assert!(Path::new(&victim).exists());
    };
    let hard = getrlimit(Resource::Nofile).maximum;
    let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(open_now + 40),
            maximum: hard,
        },
    )
    .unwrap();
    let mut open = Vec::new();
    let refused = loop {
        match c.open(w(), &dir.path(&format!("f{}", open.len()))) {
            Ok(h) => open.push(h),
            Err(e) => break e,
        }
        assert!(open.len() < 1000, "no limit reached");
    };
    assert_eq!(refused, HostError::NoDescriptors);
    let n = open.len();
    assert!(
        !Path::new(&dir.path(&format!("f{n}"))).exists(),
        "a refused create made a file"
    );
    for _ in 0..50 {
        assert_eq!(c.open(mode::READ, &victim), Err(HostError::NoDescriptors));
    }
    assert_eq!(c.remove(&victim), Err(HostError::NoDescriptors));
    let pair = format!("{victim}{}", dir.path("moved"));
    assert_eq!(
        c.rename(victim.len() as u32, &pair),
        Err(HostError::NoDescriptors)
    );
    victim_intact();
    for &h in &open {
        assert_eq!(c.write(h, b"still"), Ok(5));
        assert_eq!(read_at(&c, h, 0, 10), Err(HostError::Io), "write-only");
        assert_eq!(c.size(h), Ok(5));
    }
    assert_eq!(host.refusals().descriptors, 51);
    assert_eq!(host.refused_opens(), 0, "not the host's limits");
    c.close(open.pop().unwrap()).unwrap();
    let r = c.open(mode::READ, &victim).unwrap();
    assert_eq!(read(&c, r, 10).unwrap(), b"keep");
}

// ---------------------------------------------------------------------------------------------
// Printing and exit.

/// Attacks: exit codes from two clients, extreme codes, abort, and calls after them. Must
/// hold: the first code is kept (as documented: the first one wins, whichever client), abort
/// is recorded, and the host keeps serving (recording ends nothing).
#[test]
fn exit_codes_and_abort_are_recorded_and_serving_goes_on() {
    let dir = Dir::new("exit");
    let out = Capture::default();
    let host = host_with(&out, &Capture::default(), 256, 64);
    assert_eq!(host.exit_code(), None);
    host.for_caller(1).exit(i32::MIN);
    host.for_caller(2).exit(0);
    host.for_caller(1).exit(3);
    assert_eq!(host.exit_code(), Some(i32::MIN), "the first code wins");
    assert!(!host.aborted());
    host.for_caller(2).abort();
    assert!(host.aborted());
    let c = host.for_caller(2);
    let h = c.open(w(), &dir.path("after")).unwrap();
    assert_eq!(c.write(h, b"after exit"), Ok(10));
    c.close(h).unwrap();
    c.print(b"printed after exit\n");
    assert_eq!(out.bytes(), b"printed after exit\n");
}

/// Attacks: prints of bytes that are no text (NUL, invalid UTF-8, a lone `\r`, no newline),
/// empty prints, and prints held back per message (`batch_per_message`) from two clients
/// interleaved with writes to the output handles. Must hold: every byte arrives verbatim, in
/// the order served, standard error apart.
#[test]
fn prints_of_any_bytes_arrive_verbatim_and_in_order() {
    let (out, err) = (Capture::default(), Capture::default());
    let host = host_with(&out, &err, 256, 64);
    let (a, b) = (host.for_caller(1), host.for_caller(2));
    a.print(b"");
    a.print(b"nul\0inside ");
    b.print(&[0xff, 0xfe, b'\r']);
    a.e_print(b"to stderr\n");
    assert_eq!(b.write(STDOUT, b"|handle|"), Ok(8));
    batch_per_message();
    a.print(b"held ");
    a.print(b"together\n");
    assert_eq!(a.write(STDERR, b"err handle\n"), Ok(11));
    end_message();
    let mut want = b"nul\0inside ".to_vec();
    want.extend_from_slice(&[0xff, 0xfe, b'\r']);
    want.extend_from_slice(b"|handle|held together\n");
    assert_eq!(out.bytes(), want);
    assert_eq!(err.bytes(), b"to stderr\nerr handle\n");
}

/// Attacks: a client's open files and `system` (turned on, for clients trusted to run
/// commands): does a command the host runs inherit the descriptors of the files clients hold?
/// And commands with a NUL, empty ones; `getenv` (turned on) with names no variable has. Must
/// hold: no descriptor of a client's file reaches the command (descriptors are close-on-exec);
/// a NUL or an empty command is `Invalid`; a bad name is `Invalid`, a missing one `NotFound`.
#[test]
fn commands_the_host_runs_inherit_no_clients_file_and_bad_arguments_are_refused() {
    let dir = Dir::new("system");
    let host = LibcHost::new(LibcConfig {
        stdout: Box::new(Capture::default()),
        stderr: Box::new(Capture::default()),
        allow_system: true,
        give_environment: true,
        ..LibcConfig::default()
    });
    let c = host.for_caller(1);
    let secret = dir.user_file("secret", b"a client's file");
    let h = c.open(mode::READ | mode::WRITE, &secret).unwrap();
    let shared = c.open(mode::READ, &secret).unwrap();
    let listing = dir.path("listing");
    let command = format!("ls -l /proc/$$/fd > {listing} 2>&1");
    assert_eq!(c.system(&command), Ok(0));
    let seen = std::fs::read_to_string(&listing).unwrap();
    assert!(
        !seen.contains(&secret),
        "the command holds a client's file: {seen}"
    );
    assert_eq!(c.system("exit 7"), Ok(7));
    assert_eq!(c.system("kill -9 $$"), Ok(-1), "killed by a signal");
    assert_eq!(c.system(""), Err(HostError::Invalid));
    assert_eq!(c.system("true\0; touch /tmp/x"), Err(HostError::Invalid));
    for name in ["", "A=B", "PATH\0"] {
        assert_eq!(
            c.get_env(name).map(|v| v.as_ref().to_string()),
            Err(HostError::Invalid),
            "{name:?}"
        );
    }
    assert_eq!(
        c.get_env("FERRY_HOSTILE_SURELY_NOT_SET")
            .map(|v| v.as_ref().to_string()),
        Err(HostError::NotFound)
    );
    c.close(h).unwrap();
    c.close(shared).unwrap();
}

/// The variable that makes a run of this test binary the host that `exit` or `abort` ends:
/// `exit PATH` or `abort PATH`.
const ENDING: &str = "FERRY_HOSTILE_DEVICE_ENDING";

/// Attacks: `exit` and `abort` under `ExitPolicy::Process` (the host process ends), with output
/// still buffered in the host's writer. Must hold: the process ends with the program's code
/// (`abort`: SIGABRT), and what was printed before is flushed, not lost.
#[test]
fn exit_and_abort_under_the_process_policy_end_the_host_with_output_flushed() {
    if let Ok(spec) = std::env::var(ENDING) {
        let (how, path) = spec.split_once(' ').unwrap();
        let file = std::fs::File::create(path).unwrap();
        let host = LibcHost::new(LibcConfig {
            stdout: Box::new(std::io::BufWriter::with_capacity(1 << 16, file)),
            exit: ExitPolicy::Process,
            ..LibcConfig::default()
        });
        let c = host.for_caller(1);
        c.print(b"last words\n");
        match how {
            "exit" => c.exit(42),
            _ => c.abort(),
        }
        // Never reached: the process is gone.
        std::process::exit(99);
    }
    let dir = Dir::new("ending");
    for how in ["exit", "abort"] {
        let path = dir.path(how);
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "exit_and_abort_under_the_process_policy_end_the_host_with_output_flushed",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENDING, format!("{how} {path}"))
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        match how {
            "exit" => assert_eq!(run.status.code(), Some(42), "{run:?}"),
            _ => assert_eq!(run.status.signal(), Some(6), "{run:?}"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), b"last words\n", "{how}");
    }
}

// ---------------------------------------------------------------------------------------------
// Over the wire: requests that lie.

/// Waits by spinning, then yielding; gives up after 30 s, so a lost handoff fails the test.
#[derive(Clone, Copy, Default)]
struct Patient;

std::thread_local! {
    static WAITING_SINCE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

impl Wait for Patient {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if polls < 64 {
            std::hint::spin_loop();
            return Ok(());
        }
        let now = Instant::now();
        let since = WAITING_SINCE.with(|s| {
            if polls == 64 || s.get().is_none() {
                s.set(Some(now));
            }
            s.get().unwrap()
        });
        if now - since > Duration::from_secs(30) {
            return Err(Stalled);
        }
        std::thread::yield_now();
        Ok(())
    }
}

type Device<'r> = Process<'r, Client, Single, PerPort, Patient>;

/// Runs `test` as device code on a client of an in-process region (4 KiB a lane of bulk area)
/// that a thread serves through `LibcHost::dispatch` as client `caller`; returns what `test`
/// returned and the status of every call served.
fn on_wire<R: Send>(
    host: &LibcHost,
    caller: u64,
    test: impl FnOnce(&Device<'_>) -> R + Send,
) -> (R, Vec<u32>) {
    let region: HeapRegion = HeapRegion::with_bulk(32, 1, 4096).unwrap();
    let stop = AtomicBool::new(false);
    let served = Mutex::new(Vec::new());
    let got = std::thread::scope(|s| {
        let (region, stop, served) = (&region, &stop, &served);
        let server = s.spawn(move || {
            let server = region.server_with(Single, Patient).unwrap();
            while !stop.load(Ordering::Relaxed) {
                match server.try_open(()) {
                    Some(mut port) => {
                        let done = host.dispatch(caller, &mut port).expect("served");
                        served.lock().unwrap().push(done.status);
                    }
                    None => std::thread::yield_now(),
                }
            }
        });
        /// Stops the server when the test is over, a failed test too (else the scope waits).
        struct Stop<'s>(&'s AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let stopping = Stop(stop);
        let client = region.client_with(Single, Patient).unwrap();
        let got = test(&client);
        drop(stopping);
        server.join().unwrap();
        got
    });
    (got, served.into_inner().unwrap())
}

/// A call made by hand: says its fixed arguments are `q` bytes (`None`: says nothing, as no
/// generated client does), then `fill` writes the request's one packet as it likes (a stream's
/// length in the first word, whatever it says); returns the reply's status. A stream the server
/// refuses mid-way is handed back first (the header's stream word says so): the reply follows.
fn raw_call(
    device: &Device<'_>,
    opcode: u32,
    q: Option<usize>,
    fill: impl FnMut(&mut Slot, u32),
) -> u32 {
    let mut port = device.open(opcode).unwrap();
    if let Some(q) = q {
        port.set_request_len(q);
    }
    port.send(fill).unwrap();
    port.recv(|_, _| {}).unwrap();
    if port.header(HeaderWord::Stream) == STREAM_REJECTED {
        port.recv(|_, _| {}).unwrap();
    }
    port.status()
}

/// A streamed request sent whole by hand: `request` (fixed arguments, said to be `q` bytes,
/// then the stream's bytes) as one stream, unchecked by any client; returns the reply's status.
fn raw_stream(device: &Device<'_>, opcode: u32, q: usize, request: &[u8]) -> u32 {
    let mut port = device.open(opcode).unwrap();
    port.set_request_len(q);
    match port.send_n(|_| request) {
        Ok(()) | Err(ferry_rpc::Error::Rejected) => {}
        Err(e) => panic!("send: {e:?}"),
    }
    port.recv(|_, _| {}).unwrap();
    port.status()
}

/// Attacks: requests made by hand that lie: a write whose stream announces u64::MAX bytes, or
/// one byte past the call's limit, an open whose path is over `PATH_LIMIT` or not UTF-8, a path
/// with a NUL, requests too short for their fixed arguments, an unknown opcode, a one-way print
/// far over its limit. Must hold: each is refused with a status (or `Invalid`) before any
/// handler acts; the file is unchanged, nothing is created; the server keeps serving the same
/// device.
#[test]
fn lying_requests_on_the_wire_are_refused_before_any_handler_acts() {
    let _w = watchdog("lying requests");
    let dir = Dir::new("wire");
    let (out, err) = (Capture::default(), Capture::default());
    let host = host_with(&out, &err, 256, 64);
    let file = dir.user_file("file", b"untouched");
    let h = host
        .for_caller(7)
        .open(mode::READ | mode::WRITE, &file)
        .unwrap();
    let before = dir.names();
    let ((), statuses) = on_wire(&host, 7, |device| {
        let libc = Libc::client(device);
        // A write announcing more than any buffer: the first word of its one packet.
        let announce = |len: u64| {
            raw_call(device, opcode::WRITE, Some(8), |slot, _| {
                slot.words[0] = len;
                slot.words[1] = h.0;
            })
        };
        for len in [u64::MAX, 1 << 40, (8 + IO_LIMIT + 1) as u64] {
            assert_eq!(announce(len), status::REJECTED, "announced {len}");
        }
        // The same through the stream as sent: one byte over the limit.
        let over = [&h.0.to_le_bytes()[..], &vec![b'x'; IO_LIMIT + 1]].concat();
        assert_eq!(
            raw_stream(device, opcode::WRITE, 8, &over),
            status::REJECTED
        );
        // Fixed arguments of another length than the call's, or of no length said.
        let write = [&h.0.to_le_bytes()[..], b"lie"].concat();
        for q in [0, 4, 16, 11] {
            assert_eq!(
                raw_stream(device, opcode::WRITE, q, &write),
                status::BAD_REQUEST
            );
        }
        assert_eq!(
            raw_call(device, opcode::WRITE, None, |slot, _| {
                slot.words[0] = 11;
                slot.words[1] = h.0;
            }),
            status::BAD_REQUEST
        );
        // A stream shorter than the fixed arguments it says it carries.
        assert_eq!(
            raw_stream(device, opcode::WRITE, 8, &[1, 2, 3]),
            status::BAD_REQUEST
        );
        assert_eq!(
            raw_stream(device, opcode::OPEN, 4, &[1]),
            status::BAD_REQUEST
        );
        assert_eq!(
            raw_stream(device, opcode::RENAME, 4, &[9]),
            status::BAD_REQUEST
        );
        // Paths: over the limit (no client check), not UTF-8, with a NUL, empty.
        let w = mode::from_c("w").unwrap().to_le_bytes();
        let long = [&w[..], dir.path(&"y".repeat(PATH_LIMIT)).as_bytes()].concat();
        assert_eq!(raw_stream(device, opcode::OPEN, 4, &long), status::REJECTED);
        let not_utf8 = [&w[..], dir.path("z").as_bytes(), &[0xff, 0xfe]].concat();
        assert_eq!(
            raw_stream(device, opcode::OPEN, 4, &not_utf8),
            status::BAD_REQUEST
        );
        assert_eq!(
            raw_stream(device, opcode::REMOVE, 0, &[0xc0, 0x80]),
            status::BAD_REQUEST
        );
        let with_nul = format!("{}\0", dir.path("z"));
        assert_eq!(
            libc.open(mode::from_c("w").unwrap(), &with_nul),
            app(HostError::Invalid)
        );
        assert_eq!(
            raw_stream(device, opcode::OPEN, 4, &w),
            status::OK,
            "an empty path"
        );
        assert_eq!(libc.open(mode::READ, ""), app(HostError::Invalid));
        // An opcode the host does not serve.
        assert_eq!(
            raw_call(device, 0x0bad_c0de, Some(8), |slot, _| slot.words[0] = 1),
            status::UNKNOWN_OPCODE
        );
        // A write of what the host was told, at last: served.
        let fine = [&h.0.to_le_bytes()[..], b"!"].concat();
        assert_eq!(raw_stream(device, opcode::WRITE, 8, &fine), status::OK);
        // A one-way print far over its limit: nobody waits for the answer.
        let huge = vec![b'p'; 100_000];
        let mut port = device.open(opcode::PRINT).unwrap();
        assert_eq!(port.send_n(|_| &huge[..]), Err(ferry_rpc::Error::Rejected));
        drop(port);
        // Still serving, the file as it was.
        let back = libc.read_at(h, 0, 100).unwrap();
        assert_eq!(
            back, b"!ntouched",
            "only the one write the host was told of"
        );
        libc.print(b"served\n").unwrap();
        assert_eq!(libc.noop(41), Ok(42));
    });
    assert!(
        !statuses.contains(&status::SERVER_ERROR),
        "a handler failed: {statuses:?}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"!ntouched");
    assert_eq!(dir.names(), before, "nothing created");
    assert_eq!(out.bytes(), b"served\n", "the refused print wrote nothing");
    assert!(err.bytes().is_empty());
    host.for_caller(7).close(h).unwrap();
}

/// Attacks: the typed client over the wire with every hostile argument the calls' types allow
/// (handles never handed out, the output streams, another client's; lengths of u32::MAX; seeks
/// to the extremes; offsets past what a file holds; a reply larger than the device's buffer).
/// Must hold: each error crosses as the host's `HostError` (or the client's own refusal of a
/// reply it has no room for), never a transport failure, and the same device's next call is
/// served.
#[test]
fn hostile_arguments_on_the_wire_get_typed_errors_and_serving_goes_on() {
    let _w = watchdog("typed errors");
    let dir = Dir::new("typed");
    let host = host();
    let data: Vec<u8> = (0..(IO_LIMIT + 5000) as u32)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let file = dir.user_file("big", &data);
    let theirs = host.for_caller(99).open(mode::READ, &file).unwrap();
    let ((), statuses) = on_wire(&host, 8, |device| {
        let libc = Libc::client(device);
        for h in [Handle(0), Handle(u64::MAX), theirs] {
            assert_eq!(libc.read(h, 10), app(HostError::BadHandle));
            assert_eq!(libc.close(h), app(HostError::BadHandle));
            assert_eq!(libc.size(h), app(HostError::BadHandle));
        }
        assert_eq!(libc.read(STDOUT, 10), app(HostError::BadHandle));
        assert_eq!(libc.close(STDERR), app(HostError::BadHandle));
        let f = libc.open(mode::READ, &file).unwrap();
        let got = libc.read(f, u32::MAX).unwrap();
        assert_eq!(got.len(), IO_LIMIT, "clamped to the call's limit");
        assert!(got == data[..IO_LIMIT], "the bytes of the file");
        assert_eq!(libc.gets(f, u32::MAX).map(|l| l.len()), Ok(IO_CHUNK));
        assert_eq!(libc.seek(f, i64::MIN, SEEK_CUR), app(HostError::Invalid));
        assert_eq!(libc.seek(f, i64::MAX, SEEK_END), app(HostError::Invalid));
        assert_eq!(libc.seek(f, 0, 77), app(HostError::Invalid));
        assert_eq!(libc.read_at(f, u64::MAX, 10), app(HostError::Invalid));
        let mut small = [0u8; 8];
        assert_eq!(
            libc.read_into(f, 100, &mut small).map(|r| r.len()),
            Err(Error::Status(Status::ReplyTooLarge { len: 100, limit: 8 }))
        );
        let h = libc
            .open(mode::from_c("w+").unwrap(), &dir.path("w"))
            .unwrap();
        assert_eq!(
            libc.write_at(h, u64::MAX - 1, b"abc"),
            app(HostError::Invalid)
        );
        assert_eq!(libc.write(h, b""), Ok(0));
        assert_eq!(libc.size(h), Ok(0));
        assert_eq!(libc.malloc(u64::MAX), app(HostError::OutOfMemory));
        assert_eq!(libc.free(0x1000), app(HostError::BadPointer));
        assert_eq!(libc.get_env("HOME"), app(HostError::Disabled));
        assert_eq!(libc.system("true"), app(HostError::Disabled));
        assert_eq!(libc.close(h), Ok(()));
        assert_eq!(libc.close(f), Ok(()));
        assert_eq!(libc.noop(1), Ok(2));
    });
    assert!(!statuses.contains(&status::SERVER_ERROR), "{statuses:?}");
    assert_eq!(host.open_files(), 1, "only the other client's");
    assert_eq!(std::fs::read(&file).unwrap(), data);
}

/// Attacks: inline calls (a few cache lines, served by `LibcHost`'s `Handler::handle_inline`)
/// with every opcode the host serves and others, requests and streamed bodies of every length
/// up to an inline line's and past it, of random bytes. Paths only ever name this test's
/// directory (a random path could name a user's file): bodies of path calls are paths in it, or
/// bytes that are no text. Must hold: no panic; a call is either declined (`None`) or answered
/// with a reply no longer than the line; nothing outside the directory is touched.
#[test]
fn inline_requests_of_any_bytes_never_panic() {
    let _w = watchdog("inline fuzz");
    let dir = Dir::new("inline");
    let host = host();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let paths = [dir.path("a"), dir.path("b")];
    let path_calls = [opcode::OPEN, opcode::REMOVE, opcode::RENAME];
    let mut opcodes: Vec<u32> = <Libc as Service>::OPCODES.to_vec();
    opcodes.extend([0, 1, u32::MAX, 0x8000_0000]);
    let mut answered = 0;
    for round in 0..20_000 {
        let opcode = opcodes[round % opcodes.len()];
        let len = (next() % (INLINE_BYTES as u64 + 16)) as usize;
        let request: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let body: Vec<u8> = if path_calls.contains(&opcode) {
            match next() % 3 {
                0 => paths[(next() % 2) as usize].clone().into_bytes(),
                1 => paths.concat().into_bytes(),
                _ => vec![0xff, 0xfe, b'/'],
            }
        } else {
            (0..next() % 80).map(|_| next() as u8).collect()
        };
        if opcode == opcode::RENAME && request.len() >= 4 && body.first() == Some(&b'/') {
            // A split anywhere but at a path's end names paths outside the directory.
            continue;
        }
        let mut reply = [0u8; INLINE_BYTES];
        let got =
            Handler::<PerPort, Patient>::handle_inline(&host, opcode, &request, &body, &mut reply);
        if let Some((_, n)) = got {
            assert!(
                n <= INLINE_BYTES,
                "opcode {opcode:#x}: a reply of {n} bytes"
            );
            answered += 1;
        }
    }
    assert!(answered > 0, "no inline call was answered");
    let names = dir.names();
    assert!(names.iter().all(|n| n == "a" || n == "b"), "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// Word lines: a GPU server thread's small calls.

/// One lane's call on a word line, served as a GPU server thread's word pass serves it
/// (`ferry_rpc::service::serve_lanes`, which calls `Handler::handle_inline_lanes`: for
/// `LibcHost`, every call as `PROGRAM`'s); the lane's status and reply words.
fn word_call(host: &LibcHost, opcode: u32, request: &[u8]) -> (u32, [u8; WORD_BYTES]) {
    let mut requests = [[0u8; WORD_BYTES]; 1];
    requests[0][..request.len()].copy_from_slice(request);
    let mut replies = [[0u8; WORD_BYTES]; 1];
    let mut statuses = [0u32; 1];
    let mut lanes = InlineLanes::new(1, request.len(), &requests, &mut replies, &mut statuses);
    Handler::<PerPort, Patient>::handle_inline_lanes(host, opcode, &mut lanes);
    (lanes.status(0), *lanes.reply(0))
}

/// Attacks (as a user): a GPU program that opens files (an open carries its path: through the
/// packets) and closes them (a lone lane's close fits a word line), served by the loader's
/// server threads: each calls `batch_per_message` once and `end_message` after every packet it
/// serves (gpu/src/server.rs); a call on word lines is a message the host ends itself. Here one
/// thread serves the closes on word lines, as such a thread does, and goes on serving words
/// only. Must hold:
/// a file closed is room in the program's quota again: with every handle closed
/// (`open_files() == 0`), an open is not `TooManyOpen`.
#[test]
fn closes_served_on_word_lines_give_their_room_back() {
    let _w = watchdog("word-line closes");
    let dir = Dir::new("words");
    let host = host_with(&Capture::default(), &Capture::default(), 4, 4);
    let program = host.for_program();
    assert_eq!(program.caller(), PROGRAM);
    let paths: Vec<String> = (0..4).map(|i| dir.path(&format!("f{i}"))).collect();
    // The packets' thread (this one): each open a message of its own, ended.
    let handles: Vec<Handle> = paths
        .iter()
        .map(|p| program.open(w(), p).unwrap())
        .collect();
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (opened, open_files) = std::thread::scope(|s| {
        let (host, handles) = (&host, &handles);
        let words = s.spawn(move || {
            // A server thread of the GPU loader: messages batched, word passes not ended.
            batch_per_message();
            let statuses: Vec<(u32, u8)> = handles
                .iter()
                .map(|h| {
                    let (status, reply) = word_call(host, opcode::CLOSE, &h.0.to_ne_bytes());
                    (status, reply[0])
                })
                .collect();
            closed_tx.send(statuses).unwrap();
            // Still serving (word lines only) while the program goes on.
            let _ = done_rx.recv();
            end_message();
        });
        let statuses = closed_rx.recv().unwrap();
        assert!(
            statuses
                .iter()
                .all(|&(status, tag)| status == status::OK && tag == 0),
            "the closes: {statuses:?}"
        );
        let open_files = host.open_files();
        let opened = program.open(w(), &paths[0]);
        if let Ok(h) = opened {
            program.close(h).unwrap();
        }
        done_tx.send(()).unwrap();
        words.join().unwrap();
        (opened, open_files)
    });
    assert_eq!(open_files, 0, "every handle closed");
    assert!(opened.is_ok(), "an open with no file open: {opened:?}");
}

/// Attacks (as a user): a GPU program that asks a file's size again after the file grew (a
/// file another program appends to), each time on a word line (a lone lane's `size` fits one),
/// served by one of the loader's server threads (which ends messages after packets; the host
/// ends a word-line call's message itself). Must
/// hold: the second answer is the file's size then, not the first answer kept from an earlier
/// call (sizes asked by the lanes of one message may share one look; two calls apart may not).
#[test]
fn sizes_asked_on_word_lines_are_the_files_size_now() {
    let _w = watchdog("word-line sizes");
    let dir = Dir::new("sizes");
    let path = dir.user_file("growing", b"1234");
    let host = host();
    let (first, second) = std::thread::scope(|s| {
        s.spawn(|| {
            batch_per_message();
            // The open came through the packets: a message of its own, ended.
            let h = host.for_program().open(mode::READ, &path).unwrap();
            end_message();
            let size = |h: Handle| {
                let (status, reply) = word_call(&host, opcode::SIZE, &h.0.to_ne_bytes());
                assert_eq!((status, reply[0]), (status::OK, 0), "size answered");
                u64::from_ne_bytes(reply[1..9].try_into().unwrap())
            };
            let first = size(h);
            // Another program appends to the file.
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(b"5678")
                .unwrap();
            let second = size(h);
            end_message();
            host.for_program().close(h).unwrap();
            end_message();
            (first, second)
        })
        .join()
        .unwrap()
    });
    assert_eq!(first, 4);
    assert_eq!(second, 8, "the size the file has now");
}
