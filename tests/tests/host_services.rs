//! The host services a GPU program expects (`ferry_libc::Libc`), with no GPU: the device API
//! (`ferry_device::host`) on host threads against `ferry_libc_host::LibcHost` served over the
//! shared-memory transport, between threads and between processes. Every service, and its errors:
//! a missing file, a bad handle, a read past the end, hostile lengths, exit with a code, clients'
//! ownership and quotas. (The same host on simulated warps, where lanes of one message ask for
//! different things, is tested in process in `gpu/tests/libc.rs`.)

// A device call must take a client of any lifetime, which a function path does not: closures.
#![allow(clippy::redundant_closure)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_device::host::{self, mode, opcode, Handle, HostError, Libc, LibcError, Printer};
use ferry_libc_host::{
    Announce, Arena, HeapQuota, LibcConfig, LibcHost, IO_CHUNK, IO_LIMIT, STDOUT,
};
use ferry_rpc::service::{status, Error, Site, Status};
use ferry_shm::{
    Caller, Claimed, ClaimedProcess, ClientConfig, Handler, ServerConfig, ServerPort, ShmClient,
};
use ferry_shm::{ServerWait, ShmMailbox, ShmServer, Shutdown};
use ferry_tests::{app, captured, unique_path, Capture, Scratch};

/// Fails a test of this file that runs for over two minutes.
fn watchdog(name: &'static str) -> ferry_tests::Watchdog {
    ferry_tests::Watchdog::new(name, Duration::from_secs(120))
}

/// `host` served over shared memory: each call for the client process that makes it
/// (`Caller::caller`), with `Libc` listed by name and fingerprint, so that clients that expect it
/// attach. `before` runs first on every call (a test's hook).
struct ShmLibc {
    host: Arc<LibcHost>,
    before: Box<dyn Fn(&ServerPort<'_, '_>) + Send + Sync>,
    /// Whether the monitor's `reclaim` reaches the host (off: a gone client's files and blocks
    /// wait for an open or a `malloc` that finds no room).
    reclaim: bool,
}

impl Handler<ShmMailbox, ServerWait> for ShmLibc {
    fn handle(&self, port: &mut ServerPort<'_, '_>) -> Result<(), ferry_rpc::Error> {
        (self.before)(port);
        self.host.dispatch(port.caller(), port).map(|_| ())
    }

    fn services(&self) -> Vec<(&'static str, u64)> {
        vec![(Libc::NAME, Libc::FINGERPRINT)]
    }

    fn reclaim(&self) {
        if self.reclaim {
            self.host.reclaim_gone();
        }
    }
}

/// A server of `host` over a shared-memory file, `before` running first on every call.
fn shm_server_with(
    host: &Arc<LibcHost>,
    before: impl Fn(&ServerPort<'_, '_>) + Send + Sync + 'static,
) -> (ShmServer, PathBuf) {
    serve(host, true, before)
}

/// A server of `host` over a shared-memory file, its monitor freeing what gone clients hold if
/// `reclaim` says so, `before` running first on every call.
fn serve(
    host: &Arc<LibcHost>,
    reclaim: bool,
    before: impl Fn(&ServerPort<'_, '_>) + Send + Sync + 'static,
) -> (ShmServer, PathBuf) {
    let path = unique_path("libc");
    let handler = ShmLibc {
        host: Arc::clone(host),
        before: Box::new(before),
        reclaim,
    };
    let config = ServerConfig {
        ports: 32,
        workers: 2,
        ..ServerConfig::default()
    };
    (ShmServer::start(&path, config, handler).unwrap(), path)
}

/// A server of `host` over a shared-memory file.
fn shm_server(host: &Arc<LibcHost>) -> (ShmServer, PathBuf) {
    shm_server_with(host, |_| {})
}

/// Device code on a host thread: each call of the device API runs on a port claimed from the
/// shared-memory file.
struct Dev(ShmClient);

impl Dev {
    fn attach(path: &Path) -> Dev {
        Dev::attach_with(path, Duration::from_secs(30))
    }

    /// A client that gives a call up after `deadline`.
    fn attach_with(path: &Path, deadline: Duration) -> Dev {
        let config = ClientConfig::default().service::<Libc>().deadline(deadline);
        Dev(ShmClient::attach(path, config).unwrap())
    }

    /// Runs `f` (device code) on one claimed port, as the client process of that port; a call
    /// that fails mid-way abandons the port.
    fn on<R>(
        &self,
        f: impl FnOnce(&ClaimedProcess<'_>) -> Result<R, LibcError>,
    ) -> Result<R, LibcError> {
        Site::call(&self.0, None, |claim: &Claimed<'_>| {
            f(Claimed::process(claim))
        })
    }
}

fn drain(server: ShmServer) {
    let Shutdown { drained, stats, .. } = server.shutdown(Duration::from_secs(30));
    assert!(drained);
    assert_eq!(stats.failed, 0);
}

#[test]
fn prints_from_many_threads_lose_nothing_and_keep_lines_whole_and_in_order() {
    let _w = watchdog("prints");
    const THREADS: usize = 4;
    const LINES: usize = 2000;
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let path = &path;
            s.spawn(move || {
                // One device thread: it holds its port for the whole program.
                Dev::attach(path)
                    .on(|p| {
                        let out = Printer::new(p);
                        for i in 0..LINES {
                            let pad = "x".repeat((i * 7 + t) % 120);
                            ferry_device::println!(&out, "t{t} line {i} {pad}")?;
                            if i % 100 == 0 {
                                ferry_device::eprintln!(&out, "t{t} note {i}")?;
                            }
                        }
                        Ok(())
                    })
                    .unwrap();
            });
        }
    });
    drain(server);
    let text = out.text();
    let mut next = [0usize; THREADS];
    for line in text.lines() {
        let mut words = line.split(' ');
        let t: usize = words.next().unwrap()[1..].parse().unwrap();
        assert_eq!(words.next(), Some("line"));
        let i: usize = words.next().unwrap().parse().unwrap();
        assert_eq!(i, next[t], "thread {t}'s lines in order");
        assert_eq!(words.next().unwrap(), "x".repeat((i * 7 + t) % 120));
        next[t] += 1;
    }
    assert_eq!(next, [LINES; THREADS], "every line arrived");
    assert_eq!(text.lines().count(), THREADS * LINES);
    assert_eq!(err.text().lines().count(), THREADS * LINES / 100);
    // Each short line was one message.
    assert_eq!(host.count(opcode::PRINT), (THREADS * LINES) as u64);
}

#[test]
fn long_prints_are_cut_at_newlines_and_arrive_whole() {
    let _w = watchdog("long prints");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    // 300 lines in one print: several messages, each ending at a line end.
    let lines: Vec<String> = (0..300).map(|i| format!("row {i:04} {}", i * i)).collect();
    let block = lines.join("\n");
    let long: String = (0..5000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let (empty, sent) = dev
        .on(|p| {
            let out = Printer::new(p);
            // Printing nothing sends nothing.
            let empty = (ferry_device::print!(&out, "")?, host.count(opcode::PRINT));
            let sent = ferry_device::println!(&out, "{block}")?;
            // One line far longer than a message: split, in order, nothing lost.
            ferry_device::print!(&out, "{long}\n")?;
            Ok((empty, sent))
        })
        .unwrap();
    assert_eq!(empty, (0, 0));
    assert_eq!(sent, block.len() + 1);
    drain(server);
    assert_eq!(out.text(), format!("{block}\n{long}\n"));
    let messages = host.count(opcode::PRINT) as usize;
    assert!(
        messages > (block.len() + long.len()) / host::PRINT_CHUNK,
        "{messages}"
    );
    assert!(err.text().is_empty());
}

#[test]
fn files_round_trip_and_every_error_is_typed() {
    let _w = watchdog("files");
    let dir = Scratch::new("files");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    let (a, b) = (dir.path("a.txt"), dir.path("b.txt"));

    // A missing file.
    let r = dev.on(|p| host::open(p, &a, mode::READ));
    assert_eq!(r, app(HostError::NotFound));
    assert_eq!(
        dev.on(|p| host::open(p, &a, 0)),
        app(HostError::Invalid),
        "no read or write bit"
    );
    assert_eq!(
        dev.on(|p| host::open(p, "", mode::READ)),
        app(HostError::Invalid)
    );
    let long_path = "/".repeat(host::PATH_LIMIT + 1);
    assert_eq!(
        dev.on(|p| host::open(p, &long_path, mode::READ)),
        app(HostError::TooLong)
    );

    // Write (more than one chunk), formatted write, tell, seek, read back.
    let f = dev
        .on(|p| host::open(p, &a, mode::from_c("w+").unwrap()))
        .unwrap();
    let data: Vec<u8> = (0..2000u32).map(|i| b'0' + (i % 10) as u8).collect();
    assert_eq!(dev.on(|p| host::write(p, f, &data)).unwrap(), 2000);
    dev.on(|p| ferry_device::fprint!(&Printer::new(p), f, "\nsecond {}\nthird\n", 2))
        .unwrap();
    let end = 2000 + "\nsecond 2\nthird\n".len() as u64;
    assert_eq!(dev.on(|p| host::tell(p, f)).unwrap(), end);
    dev.on(|p| host::flush(p, f)).unwrap();
    assert_eq!(dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap(), 0);
    let mut buf = vec![0u8; 4000];
    let n = dev.on(|p| host::read(p, f, &mut buf)).unwrap();
    assert_eq!(n as u64, end);
    assert_eq!(&buf[..2000], &data[..]);
    // A read past the end: zero bytes, no error.
    assert_eq!(dev.on(|p| host::read(p, f, &mut buf)).unwrap(), 0);
    assert_eq!(
        dev.on(|p| host::seek(p, f, 100, host::SEEK_END)).unwrap(),
        end + 100
    );
    assert_eq!(dev.on(|p| host::read(p, f, &mut buf)).unwrap(), 0);
    // Lines.
    assert_eq!(
        dev.on(|p| host::seek(p, f, 2000, host::SEEK_SET)).unwrap(),
        2000
    );
    let mut line = [0u8; 64];
    for want in ["\n", "second 2\n", "third\n"] {
        let n = dev.on(|p| host::gets(p, f, &mut line)).unwrap();
        assert_eq!(std::str::from_utf8(&line[..n]).unwrap(), want);
    }
    assert_eq!(
        dev.on(|p| host::gets(p, f, &mut line)).unwrap(),
        0,
        "end of file"
    );
    // gets stops when the buffer is full, and the rest of the line is still there.
    dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap();
    let mut small = [0u8; 5];
    assert_eq!(dev.on(|p| host::gets(p, f, &mut small)).unwrap(), 5);
    assert_eq!(dev.on(|p| host::tell(p, f)).unwrap(), 5);
    // Bad seeks.
    assert_eq!(
        dev.on(|p| host::seek(p, f, -1, host::SEEK_SET)),
        app(HostError::Invalid)
    );
    assert_eq!(dev.on(|p| host::seek(p, f, 0, 9)), app(HostError::Invalid));
    assert_eq!(
        dev.on(|p| host::seek(p, f, -100_000, host::SEEK_CUR)),
        app(HostError::Invalid)
    );
    dev.on(|p| host::close(p, f)).unwrap();

    // Bad handles: closed, forged, zero, the output streams where a file is needed.
    for h in [
        f,
        Handle(f.0 ^ 1 << 32),
        Handle(12345),
        Handle(0),
        Handle(u64::MAX),
    ] {
        assert_eq!(
            dev.on(|p| host::read(p, h, &mut buf)),
            app(HostError::BadHandle)
        );
        assert_eq!(
            dev.on(|p| host::write(p, h, b"x")),
            app(HostError::BadHandle)
        );
        assert_eq!(dev.on(|p| host::tell(p, h)), app(HostError::BadHandle));
        assert_eq!(dev.on(|p| host::close(p, h)), app(HostError::BadHandle));
    }
    assert_eq!(
        dev.on(|p| host::read(p, STDOUT, &mut buf)),
        app(HostError::BadHandle)
    );
    // ... but writing to standard output through its handle works.
    assert_eq!(
        dev.on(|p| host::write(p, STDOUT, b"via handle\n")).unwrap(),
        11
    );
    dev.on(|p| host::flush(p, STDOUT)).unwrap();

    // Read-only files refuse writes; exclusive create refuses an existing file.
    let r = dev.on(|p| host::open(p, &a, mode::READ)).unwrap();
    assert_eq!(dev.on(|p| host::write(p, r, b"x")), app(HostError::Io));
    dev.on(|p| host::close(p, r)).unwrap();
    assert_eq!(
        dev.on(|p| host::open(p, &a, mode::from_c("wx").unwrap())),
        app(HostError::Exists)
    );
    // Append.
    let ap = dev
        .on(|p| host::open(p, &a, mode::from_c("a").unwrap()))
        .unwrap();
    dev.on(|p| host::write(p, ap, b"tail")).unwrap();
    dev.on(|p| host::close(p, ap)).unwrap();
    assert!(std::fs::read(&a).unwrap().ends_with(b"third\ntail"));

    // Rename and remove, and their missing files.
    dev.on(|p| host::rename(p, &a, &b)).unwrap();
    assert_eq!(
        dev.on(|p| host::open(p, &a, mode::READ)),
        app(HostError::NotFound)
    );
    assert_eq!(
        dev.on(|p| host::rename(p, &a, &b)),
        app(HostError::NotFound)
    );
    assert_eq!(dev.on(|p| host::rename(p, &b, "")), app(HostError::Invalid));
    let long_to = "/".repeat(host::PATH_LIMIT + 1);
    assert_eq!(
        dev.on(|p| host::rename(p, &b, &long_to)),
        app(HostError::TooLong)
    );
    dev.on(|p| host::remove(p, &b)).unwrap();
    assert_eq!(dev.on(|p| host::remove(p, &b)), app(HostError::NotFound));
    assert_eq!(dev.on(|p| host::remove(p, "")), app(HostError::Invalid));
    assert!(!Path::new(&b).exists());
    // Special files do not open.
    assert_eq!(
        dev.on(|p| host::open(p, "/dev/zero", mode::READ)),
        app(HostError::NotAFile)
    );
    assert_eq!(
        dev.on(|p| host::open(p, dir.0.to_str().unwrap(), mode::READ)),
        app(HostError::NotAFile)
    );

    assert_eq!(host.open_files(), 0);
    drain(server);
    assert_eq!(out.text(), "via handle\n");
    assert!(err.text().is_empty());
}

#[test]
fn large_files_cross_in_pieces_of_the_bulk_area_from_many_threads() {
    let _w = watchdog("large files");
    let dir = Scratch::new("large");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let file = dir.path("big");
    let data: Vec<u8> = (0..(3 << 20) + 12_345u32)
        .map(|i| (i ^ i >> 9) as u8)
        .collect();
    // One thread writes the file, then reads it back whole.
    let dev = Dev::attach(&path);
    let f = dev
        .on(|p| host::open(p, &file, mode::from_c("w+").unwrap()))
        .unwrap();
    assert_eq!(dev.on(|p| host::write(p, f, &data)), Ok(data.len()));
    dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap();
    let mut back = vec![0u8; data.len() + 100];
    assert_eq!(dev.on(|p| host::read(p, f, &mut back)), Ok(data.len()));
    assert!(back[..data.len()] == data[..], "the bytes read back differ");
    dev.on(|p| host::close(p, f)).unwrap();
    assert!(
        std::fs::read(&file).unwrap() == data,
        "the file on disk differs"
    );
    // In pieces of the port's bulk area (a lane's share of it), not of IO_CHUNK: one write per
    // piece, one read per piece and one that finds the end.
    let pieces = data.len().div_ceil(ferry_shm::DEFAULT_BULK) as u64;
    assert_eq!(host.count(opcode::WRITE), pieces);
    assert_eq!(host.count(opcode::READ), pieces + 1);
    // Four threads at once, each reading its own quarter through its own handle.
    let quarter = data.len() / 4;
    std::thread::scope(|s| {
        for t in 0..4 {
            let (path, file, data) = (&path, &file, &data);
            s.spawn(move || {
                let dev = Dev::attach(path);
                let f = dev.on(|p| host::open(p, file, mode::READ)).unwrap();
                let at = t * quarter;
                let end = if t == 3 { data.len() } else { at + quarter };
                dev.on(|p| host::seek(p, f, at as i64, host::SEEK_SET))
                    .unwrap();
                let mut mine = vec![0u8; end - at];
                assert_eq!(dev.on(|p| host::read(p, f, &mut mine)), Ok(end - at));
                assert!(mine[..] == data[at..end], "thread {t} read other bytes");
                dev.on(|p| host::close(p, f)).unwrap();
            });
        }
    });
    assert_eq!(host.open_files(), 0);
    drain(server);
    assert!(out.text().is_empty() && err.text().is_empty());
}

#[test]
fn reads_and_writes_at_an_offset_leave_the_position_and_size_is_the_files() {
    let _w = watchdog("at");
    let dir = Scratch::new("at");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let file = dir.path("at");
    let data: Vec<u8> = (0..700_000u32).map(|i| ((i * 31) >> 3) as u8).collect();
    let dev = Dev::attach(&path);
    let f = dev
        .on(|p| host::open(p, &file, mode::from_c("w+").unwrap()))
        .unwrap();
    assert_eq!(dev.on(|p| host::size(p, f)), Ok(0));
    // Written back to front at offsets: the position stays at 0 throughout.
    for (i, piece) in data.chunks(100_000).enumerate().rev() {
        let at = (i * 100_000) as u64;
        assert_eq!(dev.on(|p| host::write_at(p, f, at, piece)), Ok(piece.len()));
    }
    assert_eq!(dev.on(|p| host::tell(p, f)), Ok(0));
    assert_eq!(dev.on(|p| host::size(p, f)), Ok(data.len() as u64));
    // Eight threads read one handle at once (a handle is the process's), each its own eighth,
    // with no seek between them.
    let eighth = data.len() / 8;
    std::thread::scope(|s| {
        for t in 0..8 {
            let (path, data) = (&path, &data);
            s.spawn(move || {
                let dev = Dev::attach(path);
                let mut mine = vec![0u8; eighth];
                let at = (t * eighth) as u64;
                assert_eq!(dev.on(|p| host::read_at(p, f, at, &mut mine)), Ok(eighth));
                assert!(mine[..] == data[t * eighth..(t + 1) * eighth], "thread {t}");
            });
        }
    });
    // At and past the end: nothing; a write past the end extends the file.
    let mut buf = [0u8; 16];
    let end = data.len() as u64;
    assert_eq!(dev.on(|p| host::read_at(p, f, end, &mut buf)), Ok(0));
    // (An offset past what a file offset holds is no offset: C's pread says EINVAL.)
    assert_eq!(
        dev.on(|p| host::read_at(p, f, u64::MAX, &mut buf)),
        app(HostError::Invalid)
    );
    assert_eq!(dev.on(|p| host::read_at(p, f, end - 4, &mut buf)), Ok(4));
    assert_eq!(dev.on(|p| host::write_at(p, f, end + 10, b"xy")), Ok(2));
    assert_eq!(dev.on(|p| host::size(p, f)), Ok(end + 12));
    // An offset whose end does not fit a file offset, a handle never handed out.
    assert_eq!(
        dev.on(|p| host::write_at(p, f, u64::MAX - 1, b"abc")),
        app(HostError::Invalid)
    );
    assert_eq!(
        dev.on(|p| host::size(p, Handle(0x77))),
        app(HostError::BadHandle)
    );
    assert_eq!(dev.on(|p| host::tell(p, f)), Ok(0));
    // Between processes there is no device memory to copy to.
    let libc = Libc::client(&dev.0);
    assert_eq!(
        libc.read_to_device(f, 0, 0x1000, 16, 0, 0),
        app(HostError::NoDeviceMemory)
    );
    dev.on(|p| host::close(p, f)).unwrap();
    drain(server);
}

/// A model of a device's memory for the copy-engine calls: `size` bytes at a device address
/// `base` that is no host address; a range outside them is refused before anything is copied.
/// Its announce words are real memory of this process (the client's, as a GPU's would be the
/// device's): `words`.
struct ModelDevice {
    base: u64,
    memory: Mutex<Vec<u8>>,
    /// The pieces the copies were made in.
    pieces: AtomicU32,
    /// The memory announces may name: the clients' announce words.
    words: &'static [AtomicU32],
    /// Each announce, in order: the word's index and the value.
    announced: Mutex<Vec<(usize, u32)>>,
}

impl ModelDevice {
    fn new(base: u64, size: usize) -> ModelDevice {
        ModelDevice {
            base,
            memory: Mutex::new(vec![0u8; size]),
            pieces: AtomicU32::new(0),
            words: Box::leak((0..64).map(|_| AtomicU32::new(0)).collect()),
            announced: Mutex::new(Vec::new()),
        }
    }

    /// The index of the announce word at `address`, if it is one.
    fn word(&self, address: u64) -> Result<usize, HostError> {
        let start = self.words.as_ptr() as u64;
        let at = address.checked_sub(start).ok_or(HostError::BadAddress)?;
        match at % 4 == 0 && ((at / 4) as usize) < self.words.len() {
            true => Ok((at / 4) as usize),
            false => Err(HostError::BadAddress),
        }
    }

    /// `copy`'s outcome, its end announced at `done` whatever it is (a word that is not one of
    /// the announce words: refused, nothing copied).
    fn announced(
        &self,
        done: Option<Announce>,
        copy: impl FnOnce() -> Result<u64, HostError>,
    ) -> Result<u64, HostError> {
        if let Some(done) = done {
            self.word(done.address)?;
        }
        let result = copy();
        if let Some(done) = done {
            self.announce_now(done);
        }
        result
    }

    fn announce_now(&self, done: Announce) {
        let i = self.word(done.address).unwrap();
        self.announced.lock().unwrap().push((i, done.value));
        self.words[i].store(done.value, Ordering::Release);
    }
}

impl ModelDevice {
    fn range(&self, address: u64, len: u64) -> Result<std::ops::Range<usize>, HostError> {
        let size = self.memory.lock().unwrap().len() as u64;
        let start = address
            .checked_sub(self.base)
            .ok_or(HostError::BadAddress)?;
        match start.checked_add(len) {
            Some(end) if end <= size => Ok(start as usize..end as usize),
            _ => Err(HostError::BadAddress),
        }
    }
}

impl ferry_libc_host::DeviceCopy for ModelDevice {
    fn fill(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        read: &(dyn Fn(u64, &mut [u8]) -> std::io::Result<usize> + Sync),
    ) -> Result<u64, HostError> {
        self.announced(done, || self.fill_unannounced(address, len, read))
    }

    fn drain(
        &self,
        address: u64,
        len: u64,
        done: Option<Announce>,
        write: &(dyn Fn(u64, &[u8]) -> std::io::Result<()> + Sync),
    ) -> Result<u64, HostError> {
        self.announced(done, || self.drain_unannounced(address, len, write))
    }

    fn announce(&self, done: Announce) -> Result<(), HostError> {
        self.word(done.address)?;
        self.announce_now(done);
        Ok(())
    }
}

impl ModelDevice {
    fn fill_unannounced(
        &self,
        address: u64,
        len: u64,
        read: &(dyn Fn(u64, &mut [u8]) -> std::io::Result<usize> + Sync),
    ) -> Result<u64, HostError> {
        let range = self.range(address, len)?;
        let mut staging = vec![0u8; 64 << 10];
        let mut done = 0;
        while done < range.len() {
            let want = (range.len() - done).min(staging.len());
            let n = read(done as u64, &mut staging[..want]).map_err(|_| HostError::Io)?;
            if n == 0 {
                break;
            }
            let at = range.start + done;
            self.memory.lock().unwrap()[at..at + n].copy_from_slice(&staging[..n]);
            self.pieces.fetch_add(1, Ordering::Relaxed);
            done += n;
        }
        Ok(done as u64)
    }

    fn drain_unannounced(
        &self,
        address: u64,
        len: u64,
        write: &(dyn Fn(u64, &[u8]) -> std::io::Result<()> + Sync),
    ) -> Result<u64, HostError> {
        let range = self.range(address, len)?;
        // Back to front: the host's writes go where `at` says, in any order.
        let pieces: Vec<usize> = range.clone().step_by(64 << 10).collect();
        for &piece in pieces.iter().rev() {
            let end = (piece + (64 << 10)).min(range.end);
            let bytes = self.memory.lock().unwrap()[piece..end].to_vec();
            write((piece - range.start) as u64, &bytes).map_err(|_| HostError::Io)?;
            self.pieces.fetch_add(1, Ordering::Relaxed);
        }
        Ok(len)
    }
}

#[test]
fn files_cross_to_and_from_device_memory_through_the_hosts_copy_engine() {
    let _w = watchdog("device copies");
    let dir = Scratch::new("device");
    let device = Arc::new(ModelDevice::new(0x7f00_0000_0000, 1 << 20));
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(LibcConfig {
        device: Some(device.clone()),
        ..captured(&out, &err)
    }));
    let (server, path) = shm_server(&host);
    let file = dir.path("in");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i ^ i >> 7) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let dev = Dev::attach(&path);
    let libc = Libc::client(&dev.0);
    let f = dev.on(|p| host::open(p, &file, mode::READ)).unwrap();
    let base = device.base;
    // The whole file, one call, in the copy engine's pieces; then a part of it elsewhere.
    assert_eq!(
        libc.read_to_device(f, 0, base + 64, data.len() as u64, 0, 0),
        Ok(data.len() as u64)
    );
    assert!(device.memory.lock().unwrap()[64..64 + data.len()] == data[..]);
    assert_eq!(device.pieces.load(Ordering::Relaxed), 5);
    assert_eq!(
        libc.read_to_device(f, 1000, base + 700_000, 5000, 0, 0),
        Ok(5000)
    );
    assert!(device.memory.lock().unwrap()[700_000..705_000] == data[1000..6000]);
    // Asking for more than the file holds: the rest of the file. Past its end: nothing.
    assert_eq!(
        libc.read_to_device(f, 299_000, base + 800_000, (1 << 20) - 800_000, 0, 0),
        Ok(1000)
    );
    assert!(device.memory.lock().unwrap()[800_000..801_000] == data[299_000..]);
    assert_eq!(libc.read_to_device(f, 400_000, base, 100, 0, 0), Ok(0));
    // Ranges that are not the device's memory: refused, nothing copied.
    let before = device.pieces.load(Ordering::Relaxed);
    for (address, len) in [
        (base - 1, 10),
        (base + (1 << 20) - 5, 10),
        (u64::MAX - 5, 100),
        (base, u64::MAX),
        (0x1000, 16),
    ] {
        assert_eq!(
            libc.read_to_device(f, 0, address, len, 0, 0),
            app(HostError::BadAddress),
            "{address:#x} + {len}"
        );
    }
    assert_eq!(device.pieces.load(Ordering::Relaxed), before);
    // And back: device memory to a new file, at an offset.
    let copy = dir.path("out");
    let g = dev
        .on(|p| host::open(p, &copy, mode::from_c("w+").unwrap()))
        .unwrap();
    assert_eq!(
        libc.write_from_device(g, 10, base + 64, data.len() as u64, 0, 0),
        Ok(data.len() as u64)
    );
    let written = std::fs::read(&copy).unwrap();
    assert_eq!(written.len(), 10 + data.len());
    assert!(written[10..] == data[..]);
    assert_eq!(
        libc.write_from_device(g, 0, base + (1 << 20), 1, 0, 0),
        app(HostError::BadAddress)
    );
    assert_eq!(
        libc.write_from_device(g, u64::MAX, base, 2, 0, 0),
        app(HostError::Invalid)
    );
    dev.on(|p| host::close(p, f)).unwrap();
    dev.on(|p| host::close(p, g)).unwrap();
    drain(server);
}

#[test]
fn getenv_gives_the_hosts_environment_only_where_the_host_says_so() {
    let _w = watchdog("getenv");
    let mut buf = vec![0u8; ferry_libc::ENV_LIMIT];
    // By default the host keeps its environment to itself.
    let host = Arc::new(LibcHost::new(captured(
        &Capture::default(),
        &Capture::default(),
    )));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    assert_eq!(
        dev.on(|p| host::getenv(p, "PATH", &mut buf).map(|v| v.len())),
        app(HostError::Disabled)
    );
    drain(server);
    // Turned on (as the loader does for its program).
    let host = Arc::new(LibcHost::new(LibcConfig {
        give_environment: true,
        ..captured(&Capture::default(), &Capture::default())
    }));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    let want = std::env::var("PATH").expect("tests run with a PATH");
    let got = dev.on(|p| host::getenv(p, "PATH", &mut buf).map(str::to_string));
    if want.len() <= ferry_libc::ENV_LIMIT {
        assert_eq!(got, Ok(want.clone()));
    } else {
        assert_eq!(got, app(HostError::TooLong));
    }
    assert_eq!(
        dev.on(|p| host::getenv(p, "FERRY_SURELY_NOT_SET_9F3A2", &mut buf).map(|v| v.len())),
        app(HostError::NotFound)
    );
    for bad in ["", "A=B", "NUL\0"] {
        assert_eq!(
            dev.on(|p| host::getenv(p, bad, &mut buf).map(|v| v.len())),
            app(HostError::Invalid),
            "{bad:?}"
        );
    }
    let long = "N".repeat(ferry_libc::ENV_LIMIT + 1);
    assert_eq!(
        dev.on(|p| host::getenv(p, &long, &mut buf).map(|v| v.len())),
        app(HostError::TooLong)
    );
    // A value longer than the caller's buffer: refused by the caller, not overrun.
    if !want.is_empty() && want.len() <= ferry_libc::ENV_LIMIT {
        let mut tiny = [0u8; 1];
        assert!(matches!(
            dev.on(|p| host::getenv(p, "PATH", &mut tiny).map(|v| v.len())),
            Err(Error::Status(Status::ReplyTooLarge { .. }))
        ));
    }
    drain(server);
}

#[test]
fn too_many_open_files_is_an_error_not_a_leak() {
    let _w = watchdog("too many");
    let dir = Scratch::new("many");
    let host = Arc::new(LibcHost::new(LibcConfig {
        max_files: 3,
        ..captured(&Capture::default(), &Capture::default())
    }));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    let file = dir.path("f");
    let w = mode::from_c("w").unwrap();
    let hs: Vec<Handle> = (0..3)
        .map(|_| dev.on(|p| host::open(p, &file, w)).unwrap())
        .collect();
    assert_eq!(
        dev.on(|p| host::open(p, &file, w)),
        app(HostError::TooManyOpen)
    );
    assert_eq!(host.refused_opens(), 1);
    dev.on(|p| host::close(p, hs[1])).unwrap();
    let again = dev.on(|p| host::open(p, &file, w)).unwrap();
    assert_ne!(again, hs[1], "a reused slot gets a new handle");
    assert_eq!(dev.on(|p| host::close(p, hs[1])), app(HostError::BadHandle));
    drain(server);
}

#[test]
fn hostile_lengths_are_refused_and_the_server_keeps_serving() {
    let _w = watchdog("hostile");
    let dir = Scratch::new("hostile");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    let file = dir.path("h");
    let f = dev
        .on(|p| host::open(p, &file, mode::from_c("w+").unwrap()))
        .unwrap();
    dev.on(|p| host::write(p, f, &vec![7u8; IO_LIMIT + 1000]))
        .unwrap();
    dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap();
    // Streams over each call's limit, straight through the generated client on the
    // shared-memory handle: refused before any handler runs.
    let libc = Libc::client(&dev.0);
    let huge = vec![b'a'; 100_000];
    let text = "a".repeat(100_000);
    let rejected = Error::Status(Status::Rejected);
    assert_eq!(libc.print(&huge), Err(Error::Status(Status::Rejected)));
    assert_eq!(libc.e_print(&huge), Err(Error::Status(Status::Rejected)));
    assert_eq!(libc.write(f, &vec![b'a'; IO_LIMIT + 1]), Err(rejected));
    assert_eq!(libc.open(mode::READ, &text), Err(rejected));
    assert_eq!(libc.rename(1, &text), Err(rejected));
    assert_eq!(libc.system(&text), Err(rejected));
    // The generated client refuses those before sending; the server refuses them too, from a
    // client that does not check (a raw one-way stream, one handoff through the bulk area).
    dev.0
        .call(opcode::PRINT, |port| port.send_n(|_| &huge[..]))
        .unwrap();
    // Requests too short to carry their fixed arguments, and a path that is not UTF-8, sent as
    // raw streams: the server cannot decode them and says so; no handler runs.
    let raw = |opcode: u32, request: &[u8]| {
        dev.0
            .call(opcode, |port| {
                port.send_n(|_| request)?;
                port.recv(|_, _| {})?;
                Ok(port.status())
            })
            .unwrap()
    };
    assert_eq!(raw(opcode::OPEN, &[1]), status::BAD_REQUEST);
    assert_eq!(raw(opcode::WRITE, &[1, 2, 3]), status::BAD_REQUEST);
    assert_eq!(raw(opcode::RENAME, &[1]), status::BAD_REQUEST);
    let not_utf8 = [&mode::READ.to_le_bytes()[..], &[b'/', 0xff, 0xfe]].concat();
    assert_eq!(raw(opcode::OPEN, &not_utf8), status::BAD_REQUEST);
    // A rename split past the end of its text, or inside a character.
    assert_eq!(libc.rename(99, "a"), app(HostError::Invalid));
    assert_eq!(libc.rename(1, "éa"), app(HostError::Invalid));
    // A read of u32::MAX bytes gets the call's limit at most (the file holds more), and a line
    // one chunk at most.
    let mut reply = vec![0u8; IO_LIMIT + 100];
    assert_eq!(
        libc.read_into(f, u32::MAX, &mut reply).map(|r| r.len()),
        Ok(IO_LIMIT)
    );
    assert_eq!(
        libc.gets_into(f, u32::MAX, &mut reply).map(|r| r.len()),
        Ok(IO_CHUNK)
    );
    // A reply longer than the caller's buffer is refused by the caller, not overrun, and the
    // port is left at rest (the next call on the same handle is served).
    dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap();
    let mut tiny = [0u8; 8];
    assert_eq!(
        libc.read_into(f, 100, &mut tiny),
        Err(Error::Status(Status::ReplyTooLarge { len: 100, limit: 8 }))
    );
    assert_eq!(dev.on(|p| host::tell(p, f)), Ok(100));
    // Allocations the heap cannot hold, frees of addresses never handed out.
    assert_eq!(
        dev.on(|p| host::malloc(p, u64::MAX)),
        app(HostError::OutOfMemory)
    );
    assert_eq!(
        dev.on(|p| host::free(p, 0x1234 as *mut u8)),
        app(HostError::BadPointer)
    );
    // Still serving.
    assert!(dev.on(|p| host::clock(p)).is_ok());
    dev.on(|p| host::close(p, f)).unwrap();
    drain(server);
    assert!(out.text().is_empty() && err.text().is_empty());
    // The raw print was still one served (refused) message; the typed ones never left.
    assert_eq!(host.count(opcode::PRINT), 1);
}

#[test]
fn exit_abort_clock_and_system() {
    let _w = watchdog("exit");
    let (out, err) = (Capture::default(), Capture::default());
    let host = Arc::new(LibcHost::new(captured(&out, &err)));
    let (server, path) = shm_server(&host);
    let dev = Dev::attach(&path);
    assert_eq!(host.exit_code(), None);
    dev.on(|p| host::exit(p, 3)).unwrap();
    assert_eq!(host.exit_code(), Some(3));
    dev.on(|p| host::exit(p, 5)).unwrap();
    assert_eq!(host.exit_code(), Some(3), "the first exit wins");
    assert!(!host.aborted());
    dev.on(|p| host::abort(p)).unwrap();
    assert!(host.aborted());
    let c1 = dev.on(|p| host::clock(p)).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    let c2 = dev.on(|p| host::clock(p)).unwrap();
    assert!(c2.monotonic_ns > c1.monotonic_ns);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(c2.realtime_ns <= now && c2.realtime_ns > now - 3_600_000_000_000);
    // `system` is off unless turned on.
    assert_eq!(
        dev.on(|p| host::system(p, "exit 7")),
        app(HostError::Disabled)
    );
    drain(server);
    assert_eq!(host.count(Libc::Exit { code: 0 }.opcode()), 2);

    let on = Arc::new(LibcHost::new(LibcConfig {
        allow_system: true,
        ..captured(&out, &err)
    }));
    let (server, path) = shm_server(&on);
    let dev = Dev::attach(&path);
    assert_eq!(dev.on(|p| host::system(p, "exit 7")).unwrap(), 7);
    assert_eq!(dev.on(|p| host::system(p, "")), app(HostError::Invalid));
    let long = "x".repeat(host::SYSTEM_LIMIT + 1);
    assert_eq!(dev.on(|p| host::system(p, &long)), app(HostError::TooLong));
    drain(server);
}

#[test]
fn malloc_hands_out_disjoint_blocks_of_reserved_memory() {
    let _w = watchdog("malloc");
    const SIZE: usize = 1 << 16;
    let mut arena = vec![0u8; SIZE].into_boxed_slice();
    let base = arena.as_mut_ptr() as usize;
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: base as u64,
            size: SIZE as u64,
        }),
        // The test's threads are one client process, which takes the whole heap below.
        max_heap_per_client: HeapQuota::Whole,
        ..captured(&Capture::default(), &Capture::default())
    }));
    let (server, path) = shm_server(&host);
    let full = host.heap_free().unwrap();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let path = &path;
            s.spawn(move || {
                let dev = Dev::attach(path);
                let blocks: Vec<(usize, usize)> = (0..20)
                    .map(|i| {
                        let size = 16 + (i * 37 + t as usize * 11) % 300;
                        let p = dev.on(|p| host::malloc(p, size as u64)).unwrap() as usize;
                        assert_eq!(p % 16, 0);
                        assert!(p >= base && p + size <= base + SIZE);
                        // SAFETY: the block lies inside `arena` (checked above), which outlives
                        // the scope; the host hands each block to one caller only, so no other
                        // thread touches these bytes until it is freed.
                        unsafe { std::ptr::write_bytes(p as *mut u8, t + 1, size) };
                        (p, size)
                    })
                    .collect();
                for &(p, size) in &blocks {
                    // SAFETY: as above; still allocated to this thread.
                    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, size) };
                    assert!(
                        bytes.iter().all(|&b| b == t + 1),
                        "another block overlapped"
                    );
                    dev.on(|d| host::free(d, p as *mut u8)).unwrap();
                }
            });
        }
    });
    assert_eq!(host.heap_free(), Some(full), "every block came back");
    let dev = Dev::attach(&path);
    // A double free is refused. (Checked with no other thread allocating: one that got the freed
    // block meanwhile would make the second free a valid one.)
    let p = dev.on(|d| host::malloc(d, 64)).unwrap();
    dev.on(|d| host::free(d, p)).unwrap();
    assert_eq!(dev.on(|d| host::free(d, p)), app(HostError::BadPointer));
    let all = dev.on(|p| host::malloc(p, full)).unwrap();
    assert_eq!(dev.on(|p| host::malloc(p, 1)), app(HostError::OutOfMemory));
    dev.on(|p| host::free(p, all)).unwrap();
    dev.on(|p| host::free(p, std::ptr::null_mut())).unwrap();
    drain(server);
    drop(arena);
}

/// Waits up to `limit` for `thread` to end; whether it did.
fn ends_within<T>(thread: &std::thread::JoinHandle<T>, limit: Duration) -> bool {
    let since = Instant::now();
    while !thread.is_finished() && since.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
    thread.is_finished()
}

/// Issue 13, 3: a FIFO with no writer, opened by as many clients as the server has workers, once
/// held every worker (a blocking open), so other clients stalled and shutdown waited for writers.
#[test]
fn opening_a_fifo_is_refused_at_once_and_pins_no_worker() {
    let _w = watchdog("fifo");
    let dir = Scratch::new("fifo");
    let fifo = dir.path("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo");
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 1 << 16,
        }),
        ..captured(&Capture::default(), &Capture::default())
    }));
    // Two workers, two FIFO opens at once.
    let (server, path) = shm_server(&host);
    let openers: Vec<_> = (0..2)
        .map(|_| {
            let (path, fifo) = (path.clone(), fifo.clone());
            std::thread::spawn(move || Dev::attach(&path).on(|p| host::open(p, &fifo, mode::READ)))
        })
        .collect();
    let refused_soon = openers
        .iter()
        .all(|t| ends_within(t, Duration::from_secs(10)));
    // Another client's call is served meanwhile.
    let other = Dev::attach_with(&path, Duration::from_secs(3));
    let block = other.on(|p| host::malloc(p, 64));
    // Other special files: a FIFO for writing with no reader, a device, a directory.
    let special = [
        other.on(|p| host::open(p, &fifo, mode::WRITE)),
        other.on(|p| host::open(p, "/dev/zero", mode::READ)),
        other.on(|p| host::open(p, dir.0.to_str().unwrap(), mode::READ)),
    ];
    drop(other);
    let shutdown = std::thread::spawn(move || server.shutdown(Duration::from_secs(1)));
    let shut_soon = ends_within(&shutdown, Duration::from_secs(10));
    // Whatever happened, let blocked opens finish (opening a FIFO for reading and writing never
    // waits, and gives it a writer) before the checks.
    let writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let opened: Vec<_> = openers.into_iter().map(|t| t.join().unwrap()).collect();
    let Shutdown { stats, .. } = shutdown.join().unwrap();
    drop(writer);
    assert!(
        refused_soon,
        "the FIFO opens waited for a writer: {opened:?}"
    );
    assert_eq!(opened, [app(HostError::NotAFile), app(HostError::NotAFile)]);
    assert!(block.is_ok(), "another client's malloc: {block:?}");
    assert_eq!(special, [app(HostError::NotAFile); 3]);
    assert!(shut_soon, "shutdown(1 s) did not return");
    assert_eq!(stats.failed + stats.panicked, 0);
    assert_eq!(host.open_files(), 0);
}

/// Issue 13, 3: shutdown's deadline holds even while a handler does not return.
#[test]
fn shutdown_returns_by_its_deadline_while_a_handler_is_stuck() {
    let _w = watchdog("stuck handler");
    let host = Arc::new(LibcHost::new(captured(
        &Capture::default(),
        &Capture::default(),
    )));
    // The clock call blocks its worker until the gate opens.
    let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let entered = Arc::new(AtomicU32::new(0));
    let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
    let (server, path) = shm_server_with(&host, move |port| {
        if port.opcode() == opcode::CLOCK {
            e.fetch_add(1, Ordering::SeqCst);
            let (open, wake) = &*g;
            let mut open = open.lock().unwrap();
            while !*open {
                open = wake.wait(open).unwrap();
            }
        }
    });
    let p = path.clone();
    let caller = std::thread::spawn(move || Dev::attach(&p).on(|p| host::clock(p)).is_ok());
    while entered.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let shutdown = std::thread::spawn(move || server.shutdown(Duration::from_secs(1)));
    let shut_soon = ends_within(&shutdown, Duration::from_secs(10));
    {
        let (open, wake) = &*gate;
        *open.lock().unwrap() = true;
        wake.notify_all();
    }
    let Shutdown {
        drained,
        stuck_workers,
        ..
    } = shutdown.join().unwrap();
    let _ = caller.join().unwrap();
    assert!(shut_soon, "shutdown(1 s) waited for the stuck handler");
    assert!(!drained, "a call was still in flight");
    assert_eq!(stuck_workers, 1, "the stuck worker was left running");
}

/// The environment variable that makes a run of this test binary the second client process of
/// `files_and_blocks_belong_to_their_client_process`: `PATH HANDLE ADDRESS`.
const PEER: &str = "FERRY_LIBC_PEER";

/// The second client of `files_and_blocks_belong_to_their_client_process`: tries the first
/// client's file and block, fills its quota and most of the heap, and exits holding them.
fn peer(spec: &str) {
    let args: Vec<&str> = spec.split(' ').collect();
    let (path, handle, address) = (
        Path::new(args[0]),
        Handle(args[1].parse().unwrap()),
        args[2].parse::<u64>().unwrap() as *mut u8,
    );
    let dev = Dev::attach(path);
    let mut buf = [0u8; 16];
    let read = dev.on(|p| host::read(p, handle, &mut buf));
    let write = dev.on(|p| host::write(p, handle, b"x"));
    let close = dev.on(|p| host::close(p, handle));
    let free = dev.on(|p| host::free(p, address));
    let file = args[3];
    let w = mode::from_c("w").unwrap();
    let mine: Vec<_> = (0..3).map(|_| dev.on(|p| host::open(p, file, w))).collect();
    // Past the quota (the table, 5, still has room: the first client holds one file, this one
    // three), straight through the generated client on the handle.
    let over = Libc::client(&dev.0).open(w, file);
    let block = dev.on(|p| host::malloc(p, 3 << 10));
    println!(
        "peer: read {read:?} write {write:?} close {close:?} free {free:?} opened {} \
         over {over:?} malloc {}",
        mine.iter().filter(|h| h.is_ok()).count(),
        block.is_ok()
    );
}

/// Issue 13, 4: handles and heap blocks belong to the client process that made them; each client
/// has a quota of open files; a dead client's files and blocks are freed when room runs out
/// (here with the monitor's reclaim off, which would free them sooner).
#[test]
fn files_and_blocks_belong_to_their_client_process() {
    if let Ok(spec) = std::env::var(PEER) {
        return peer(&spec);
    }
    let _w = watchdog("owners");
    let dir = Scratch::new("owners");
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 4 << 10,
        }),
        max_files: 5,
        max_files_per_client: 3,
        // (The heap's quota is tested on its own.)
        max_heap_per_client: HeapQuota::Whole,
        client_alive: |id| ferry_shm::owner::holder_alive(id as u32),
        ..captured(&Capture::default(), &Capture::default())
    }));
    // The monitor leaves the gone peer's files and blocks: they come back by the pressure below.
    let (server, path) = serve(&host, false, |_| {});
    let dev = Dev::attach(&path);
    let secret = dir.path("secret");
    let f = dev
        .on(|p| host::open(p, &secret, mode::from_c("w+").unwrap()))
        .unwrap();
    dev.on(|p| host::write(p, f, b"secret")).unwrap();
    dev.on(|p| host::seek(p, f, 0, host::SEEK_SET)).unwrap();
    let block = dev.on(|p| host::malloc(p, 16)).unwrap();
    // Another client process tries them.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "files_and_blocks_belong_to_their_client_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            PEER,
            format!(
                "{} {} {} {}",
                path.display(),
                f.0,
                block as u64,
                dir.path("theirs")
            ),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // (The test harness prints the test's name on the same line.)
    let said = stdout
        .lines()
        .find_map(|l| l.split_once("peer: ").map(|(_, said)| said));
    assert_eq!(
        said,
        Some(
            "read Err(App(BadHandle)) write Err(App(BadHandle)) close Err(App(BadHandle)) \
             free Err(App(BadPointer)) opened 3 over Err(App(TooManyOpen)) malloc true"
        ),
        "{stdout}"
    );
    // Ours are intact.
    let mut buf = [0u8; 16];
    assert_eq!(dev.on(|p| host::read(p, f, &mut buf)), Ok(6));
    assert_eq!(&buf[..6], b"secret");
    // The peer exited holding three files and most of the heap. The table (5) fills: the next
    // open frees the dead peer's files; the heap is full: the next malloc frees its block.
    assert_eq!(host.open_files(), 4);
    let w = mode::from_c("w").unwrap();
    let more = [
        dev.on(|p| host::open(p, &dir.path("more1"), w)),
        dev.on(|p| host::open(p, &dir.path("more2"), w)),
    ];
    assert!(more.iter().all(Result::is_ok), "{more:?}");
    assert_eq!(host.open_files(), 3);
    // Our own quota (3) holds: the table (5) has room, so the refusal is the quota's.
    let over = dev.on(|p| host::open(p, &dir.path("more3"), w));
    assert_eq!(over, app(HostError::TooManyOpen));
    assert!(
        !Path::new(&dir.path("more3")).exists(),
        "a refused open creates nothing"
    );
    let big = dev.on(|p| host::malloc(p, 3 << 10));
    assert!(big.is_ok(), "{big:?}");
    for h in [Ok(f), more[0], more[1]] {
        dev.on(|p| host::close(p, h.unwrap())).unwrap();
    }
    dev.on(|p| host::free(p, block)).unwrap();
    dev.on(|p| host::free(p, big.unwrap())).unwrap();
    assert_eq!(host.open_files(), 0);
    assert_eq!(host.heap_free(), Some(4 << 10));
    drain(server);
}

/// Device code whose copies the host announces (as the GPU loader's regions have it): the call
/// waits on the client's own announce word, which the device model sets once the bytes are in
/// place, and reads the reply after. Every way a copy call ends is announced, so no wait is left
/// without its value; an announce address that is not the device's memory is refused and nothing
/// is copied or announced.
#[test]
fn copies_the_host_announces_end_on_the_clients_own_word() {
    let _w = watchdog("announced copies");
    let dir = Scratch::new("announce");
    let path = dir.path("in");
    let data: Vec<u8> = (0..200_000u32)
        .map(|i| ((i * 7) ^ (i >> 9)) as u8)
        .collect();
    std::fs::write(&path, &data).unwrap();
    let out_path = dir.path("out");
    // The client's "device memory": a buffer of this process the model maps onto its own.
    let mut buf = vec![0u8; 256 << 10];
    let base = buf.as_ptr() as u64;
    let device = Arc::new(ModelDevice::new(base, buf.len()));
    let host = LibcHost::new(LibcConfig {
        device: Some(device.clone()),
        ..LibcConfig::default()
    });
    let region = ferry_rpc::HeapRegion::<ferry_rpc::PerPort>::new(32, 1).unwrap();
    let client = region
        .client()
        .with_announce_words(&device.words[..64])
        .unwrap();
    assert!(client.announces());
    // The server is made on its own thread, at its first pass.
    let mut server = None;
    let serve = || match server.get_or_insert_with(|| region.server()).try_open(()) {
        Some(mut port) => {
            let _ = host.dispatch(ferry_libc_host::PROGRAM, &mut port);
            true
        }
        None => false,
    };
    let announced = || device.announced.lock().unwrap().clone();
    ferry_tests::serving_while(serve, || {
        let p = &client;
        let f = host::open(p, &path, mode::READ).unwrap();
        let n = data.len();
        assert_eq!(host::read_to_device(p, f, 0, &mut buf[..n]), Ok(n));
        assert!(device.memory.lock().unwrap()[..n] == data[..]);
        let first = announced();
        assert_eq!(first.len(), 1);
        let (word, value) = first[0];
        assert_ne!(value, 0);
        assert_eq!(device.words[word].load(Ordering::Relaxed), value);
        // The next call on the word asks for a new value; so does every way a call can end.
        assert_eq!(
            host::read_to_device(p, f, 1000, &mut buf[n..n + 5000]),
            Ok(5000)
        );
        assert!(device.memory.lock().unwrap()[n..n + 5000] == data[1000..6000]);
        assert_eq!(host::read_to_device(p, f, n as u64, &mut buf[..100]), Ok(0));
        assert_eq!(
            host::read_to_device(p, Handle(0x77), 0, &mut buf[..100]),
            app(HostError::BadHandle)
        );
        let mut elsewhere = [0u8; 16];
        assert_eq!(
            host::read_to_device(p, f, 0, &mut elsewhere),
            app(HostError::BadAddress)
        );
        let g = host::open(p, &out_path, mode::from_c("w").unwrap()).unwrap();
        assert_eq!(host::write_from_device(p, g, 0, &buf[..n]), Ok(n));
        assert_eq!(
            host::write_from_device(p, g, u64::MAX, &buf[..2]),
            app(HostError::Invalid)
        );
        let all = announced();
        assert_eq!(all.len(), 7, "one announce per copy call: {all:?}");
        for pair in all.windows(2) {
            if pair[0].0 == pair[1].0 {
                assert_ne!(pair[0].1, pair[1].1, "a new value on the same word");
            }
        }
        // A request naming an announce address outside the device's memory: refused, nothing
        // copied, nothing announced (the generated call sends what it is given).
        let libc = Libc::client(p);
        let before = device.pieces.load(Ordering::Relaxed);
        let stray = elsewhere.as_ptr() as u64;
        assert_eq!(
            libc.read_to_device(f, 0, base, 100, stray, 9),
            app(HostError::BadAddress)
        );
        assert_eq!(
            libc.write_from_device(g, 0, base, 100, stray + 1, 9),
            app(HostError::BadAddress)
        );
        assert_eq!(device.pieces.load(Ordering::Relaxed), before);
        assert_eq!(announced().len(), 7);
        host::close(p, f).unwrap();
        host::close(p, g).unwrap();
    });
    assert!(std::fs::read(&out_path).unwrap() == data);
}

/// A server that does not serve the copy calls (no `Libc` on it) refuses them with a status and
/// announces nothing: the client's wait on its announce word ends at the refusal, not never.
/// And each arming asks for a new value, announced or not, so a late announce of a call given up
/// on cannot end the next one.
#[test]
fn an_announced_call_ends_at_a_refusal_and_never_reuses_a_value() {
    let _w = watchdog("announce refused");
    let region = ferry_rpc::HeapRegion::<ferry_rpc::PerPort>::new(32, 1).unwrap();
    let words: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    let client = region.client().with_announce_words(&words).unwrap();
    // Arming twice without an announce in between: two values, neither 0.
    {
        let port = client.open(opcode::READ_TO_DEVICE).unwrap();
        let (a, first) = port.arm_announce().unwrap();
        let (b, second) = port.arm_announce().unwrap();
        assert_eq!(a, b, "the same lane's word");
        assert!(first != 0 && second != 0 && first != second);
    }
    let mut server = None;
    let serve = || match server.get_or_insert_with(|| region.server()).try_open(()) {
        Some(mut port) => {
            let unknown = ferry_rpc::service::status::UNKNOWN_OPCODE as u64;
            port.set_header(ferry_rpc::HeaderWord::Status, unknown);
            true
        }
        None => false,
    };
    ferry_tests::serving_while(serve, || {
        let mut buf = [0u8; 64];
        let got = host::read_to_device(&client, Handle(1), 0, &mut buf);
        assert!(
            matches!(got, Err(Error::Status(Status::UnknownOpcode { .. }))),
            "{got:?}"
        );
        let got = host::write_from_device(&client, Handle(1), 0, &buf);
        assert!(matches!(got, Err(Error::Status(_))), "{got:?}");
    });
    assert!(words
        .iter()
        .step_by(2)
        .all(|w| w.load(Ordering::Relaxed) == 0));
}

/// The environment variable that makes a run of this test binary the attacking client of
/// `a_live_region_file_is_never_emptied_removed_or_renamed_by_a_client`: `PATH OTHER DECOY MOVED`.
const ATTACKER: &str = "FERRY_LIBC_ATTACKER";

/// The attacking client: asks the host to open the server's own file for writing in every way
/// (and another live server's), to remove it, to rename it away and to rename a file onto its
/// name; prints what each answered, then reads the file (which harms nothing).
fn attacker(spec: &str) {
    let args: Vec<&str> = spec.split(' ').collect();
    let (path, other, decoy, moved) = (args[0], args[1], args[2], args[3]);
    let dev = Dev::attach(Path::new(path));
    let mut said = Vec::new();
    for m in ["w", "w+", "a", "a+", "r+"] {
        let r = dev.on(|p| host::open(p, path, mode::from_c(m).unwrap()));
        said.push(format!("{m} {:?}", r.map(|_| ())));
    }
    let r = dev.on(|p| host::open(p, other, mode::from_c("w").unwrap()));
    said.push(format!("other {:?}", r.map(|_| ())));
    said.push(format!("remove {:?}", dev.on(|p| host::remove(p, path))));
    said.push(format!(
        "away {:?}",
        dev.on(|p| host::rename(p, path, moved))
    ));
    said.push(format!(
        "onto {:?}",
        dev.on(|p| host::rename(p, decoy, path))
    ));
    let f = dev.on(|p| host::open(p, path, mode::READ)).unwrap();
    let mut magic = [0u8; 8];
    dev.on(|p| host::read(p, f, &mut magic)).unwrap();
    dev.on(|p| host::close(p, f)).unwrap();
    println!(
        "attacker: {} read {}",
        said.join(", "),
        String::from_utf8_lossy(&magic)
    );
}

/// Issue 34, 4: a client once emptied the server's own shared-memory file through the host
/// services (`open` with `w`), and the server, that client and every other client died of
/// SIGBUS. No client can now open a live region file for writing, remove it, rename it, or
/// rename another file onto its name; the server and a bystander client keep serving, the file
/// keeps its size and its name. (Without the open's check this test process dies of SIGBUS.)
#[test]
fn a_live_region_file_is_never_emptied_removed_or_renamed_by_a_client() {
    if let Ok(spec) = std::env::var(ATTACKER) {
        return attacker(&spec);
    }
    use std::os::unix::fs::MetadataExt;
    let _w = watchdog("live region");
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 1 << 16,
        }),
        client_alive: |id| ferry_shm::owner::holder_alive(id as u32),
        ..captured(&Capture::default(), &Capture::default())
    }));
    let (server, path) = shm_server(&host);
    // Another live server's file (this process serves it too).
    let other = unique_path("other");
    let echo = |port: &mut ServerPort<'_, '_>| port.recv_and_send(|slot, _| slot.words[0] += 1);
    let other_server = ShmServer::start(&other, ServerConfig::default(), echo).unwrap();
    let look = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.len())
    };
    let (before, other_before) = (look(&path), look(&other));
    // The bystander: a client in this process, holding a block.
    let bystander = Dev::attach(&path);
    let block = bystander.on(|p| host::malloc(p, 64)).unwrap();
    // A user's file beside the region (the same file system, so a rename could work).
    let (decoy, moved) = (unique_path("decoy"), unique_path("moved"));
    std::fs::write(&decoy, b"a user's file").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_live_region_file_is_never_emptied_removed_or_renamed_by_a_client",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            ATTACKER,
            format!(
                "{} {} {} {}",
                path.display(),
                other.display(),
                decoy.display(),
                moved.display()
            ),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the attacker: {:?}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let said = stdout
        .lines()
        .find_map(|l| l.split_once("attacker: ").map(|(_, said)| said));
    let busy = "Err(App(Busy))";
    assert_eq!(
        said,
        Some(
            format!(
                "w {busy}, w+ {busy}, a {busy}, a+ {busy}, r+ {busy}, other {busy}, \
                 remove {busy}, away {busy}, onto {busy} read FERRYSHM"
            )
            .as_str()
        ),
        "{stdout}"
    );
    // The files are whole and where they were; the user's file too.
    assert_eq!(look(&path), before);
    assert_eq!(look(&other), other_before);
    assert_eq!(std::fs::read(&decoy).unwrap(), b"a user's file");
    assert!(!moved.exists());
    // The server and the bystander keep working; ordinary files still open for writing.
    assert!(bystander.on(|p| host::clock(p)).is_ok());
    bystander.on(|p| host::free(p, block)).unwrap();
    let dir = Scratch::new("region");
    let f = bystander
        .on(|p| host::open(p, &dir.path("mine"), mode::from_c("w").unwrap()))
        .unwrap();
    bystander.on(|p| host::close(p, f)).unwrap();
    let stats = server.stats();
    assert_eq!(stats.failed + stats.panicked, 0, "{stats:?}");
    drop(bystander);
    drain(server);
    assert!(!path.exists(), "the server removed its own file");
    assert!(other_server.shutdown(Duration::from_secs(5)).drained);
    let _ = std::fs::remove_file(&decoy);
}

/// The environment variable that makes a run of this test binary the greedy client of
/// `one_client_cannot_take_the_heap_from_the_others`: the server's path.
const HOG: &str = "FERRY_LIBC_HOG";

/// The greedy client: allocates 1 KiB blocks until refused, says how many it got, and holds them
/// until it is killed.
fn hog(path: &str) {
    let dev = Dev::attach(Path::new(path));
    let mut blocks = 0;
    let refused = loop {
        match dev.on(|p| host::malloc(p, 1 << 10)) {
            Ok(_) => blocks += 1,
            Err(e) => break e,
        }
    };
    println!("hog: {blocks} {refused:?}");
    std::thread::sleep(Duration::from_secs(600));
}

/// What `peer` says after `word`, in the first line that holds it (the test harness prints the
/// test's name on the same line).
fn said_by(peer: &ferry_tests::Peer, word: &str) -> String {
    loop {
        if let Some((_, said)) = peer.line().split_once(word) {
            return said.to_string();
        }
    }
}

/// Issue 34, 5: one client could take the whole heap, and every other client's `malloc` failed
/// until it died. Each client now holds at most its quota (by default a quarter of the heap):
/// a live client that takes all it can leaves the others theirs.
#[test]
fn one_client_cannot_take_the_heap_from_the_others() {
    if let Ok(path) = std::env::var(HOG) {
        return hog(&path);
    }
    let _w = watchdog("heap quota");
    const HEAP: u64 = 64 << 10;
    let host = Arc::new(LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: HEAP,
        }),
        client_alive: |id| ferry_shm::owner::holder_alive(id as u32),
        ..captured(&Capture::default(), &Capture::default())
    }));
    let (server, path) = shm_server(&host);
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "one_client_cannot_take_the_heap_from_the_others",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HOG, &path);
    let hog = ferry_tests::Peer::start(command);
    assert_eq!(said_by(&hog, "hog: "), "16 App(OutOfMemory)", "a quarter");
    assert_eq!(host.heap_free(), Some(HEAP - (16 << 10)));
    // This process, another client, gets its own quarter while the hog lives and holds its.
    let dev = Dev::attach(&path);
    let mine = dev.on(|p| host::malloc(p, 16 << 10)).unwrap();
    assert_eq!(
        dev.on(|p| host::malloc(p, 16)),
        app(HostError::OutOfMemory),
        "past its own quarter"
    );
    dev.on(|p| host::free(p, mine)).unwrap();
    // Once the hog is gone its blocks come back (the monitor's reclaim).
    hog.kill();
    ferry_tests::eventually("the hog's blocks come back", || {
        host.heap_free() == Some(HEAP)
    });
    drop(dev);
    drain(server);
}
