//! The `Libc` host services (`ferry_device::host`) with no GPU: the device API on a host thread and on
//! simulated warps (`ferry_device::sim::SimWarp`), against `ferry_gpu::host::LibcHost` served by
//! `ferry_gpu::serve` over a heap region, as the loader serves a kernel. Every call, its typed
//! errors (the host's `HostError`, the server's refusals), lanes that ask for different things in
//! one message, and the files and blocks each client owns.

// A device call must take a client of any lifetime, which a function path does not: closures.
#![allow(clippy::redundant_closure)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ferry_core::service::{Error, Status};
use ferry_core::{HeapRegion, Lanes, Mailbox, PerPort, Port, Server, Single, SpinLimit, Wait};
use ferry_device::host::{self, mode, opcode, Handle, HostError, Libc, Printer, Target};
use ferry_device::sim::{SimWarp, Yield};
use ferry_gpu::host::{Arena, LibcConfig, LibcHost, IO_CHUNK, STDOUT};
use ferry_gpu::{serve, Handler};
use ferry_tests::{unique_path, Capture, Watchdog};

/// A one-lane client on a host thread, as the tests call the device API.
type HostThread<'a> = ferry_core::ClientProcess<'a, Single, PerPort, SpinLimit>;

fn watchdog(name: &'static str) -> Watchdog {
    Watchdog::new(name, Duration::from_secs(120))
}

fn captured(out: &Capture, err: &Capture) -> LibcConfig {
    LibcConfig {
        stdout: Box::new(out.clone()),
        stderr: Box::new(err.clone()),
        ..LibcConfig::default()
    }
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "ferry-gpu-libc-{tag}-{}",
            unique_path("d").file_name().unwrap().to_str().unwrap()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `host`, serving every call of a region as client `caller`.
struct As<'h>(&'h LibcHost, u64);

impl<M: Mailbox, W: Wait> Handler<M, W> for As<'_> {
    fn handle(
        &self,
        port: &mut Port<'_, '_, Server, Single, M, W>,
    ) -> Result<(), ferry_core::Error> {
        self.0.dispatch(self.1, port).map(|_| ())
    }
}

/// Runs `body` on a host thread with a client of a region `host` serves as client `caller`.
fn on_host<R>(host: &LibcHost, caller: u64, body: impl FnOnce(&HostThread<'_>) -> R) -> R {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let (r, _) = serve(
        region.region(),
        region.server_locks(),
        1,
        &As(host, caller),
        || body(&region.client_with(Single, SpinLimit(1 << 30)).unwrap()),
    )
    .unwrap();
    r
}

/// Runs `warps` simulated warps of `lanes` lanes against `host`; `body(client, warp)` runs in
/// every lane, as a kernel's main does.
fn on_warps<F>(warps: u32, lanes: u32, host: &LibcHost, body: F)
where
    F: Fn(&ferry_device::Client<'_, SimWarp, Yield>, u32) + Sync,
{
    let region = HeapRegion::new(32, lanes).unwrap();
    let desc = ferry_device::sim::descriptor(&region);
    serve(region.region(), region.server_locks(), 2, host, || {
        std::thread::scope(|s| {
            for w in 0..warps {
                for lane in SimWarp::lanes(lanes) {
                    let body = &body;
                    s.spawn(move || {
                        // SAFETY: `desc` names `region`, alive and protocol-only for the scope.
                        let client = unsafe { desc.client(lane, Yield) }.unwrap().with_cursor(w);
                        body(&client, w);
                    });
                }
            }
        })
    })
    .unwrap();
}

const fn app<T>(e: HostError) -> Result<T, Error<HostError>> {
    Err(Error::App(e))
}

#[test]
fn files_round_trip_and_every_error_is_typed() {
    let _w = watchdog("files");
    let dir = Scratch::new("files");
    let (out, err) = (Capture::default(), Capture::default());
    let host = LibcHost::new(captured(&out, &err));
    let (a, b) = (dir.path("a.txt"), dir.path("b.txt"));
    on_host(&host, 1, |p| {
        // A missing file, a mode with no read or write bit, a path over the limit.
        assert_eq!(host::open(p, &a, mode::READ), app(HostError::NotFound));
        assert_eq!(host::open(p, &a, 0), app(HostError::Invalid));
        assert_eq!(host::open(p, "", mode::READ), app(HostError::Invalid));
        let long_path = "/".repeat(host::PATH_LIMIT + 1);
        assert_eq!(
            host::open(p, &long_path, mode::READ),
            app(HostError::TooLong)
        );

        // Write (more than one chunk), formatted write, tell, seek, read back.
        let f = host::open(p, &a, mode::from_c("w+").unwrap()).unwrap();
        let data: Vec<u8> = (0..2000u32).map(|i| b'0' + (i % 10) as u8).collect();
        assert_eq!(host::write(p, f, &data), Ok(2000));
        ferry_device::fprint!(&Printer::new(p), f, "\nsecond {}\nthird\n", 2).unwrap();
        let end = 2000 + "\nsecond 2\nthird\n".len() as u64;
        assert_eq!(host::tell(p, f), Ok(end));
        host::flush(p, f).unwrap();
        assert_eq!(host::seek(p, f, 0, host::SEEK_SET), Ok(0));
        let mut buf = vec![0u8; 4000];
        assert_eq!(host::read(p, f, &mut buf), Ok(end as usize));
        assert_eq!(&buf[..2000], &data[..]);
        // A read past the end: zero bytes, no error.
        assert_eq!(host::read(p, f, &mut buf), Ok(0));
        assert_eq!(host::seek(p, f, 100, host::SEEK_END), Ok(end + 100));
        assert_eq!(host::read(p, f, &mut buf), Ok(0));
        // Lines.
        assert_eq!(host::seek(p, f, 2000, host::SEEK_SET), Ok(2000));
        let mut line = [0u8; 64];
        for want in ["\n", "second 2\n", "third\n"] {
            let n = host::gets(p, f, &mut line).unwrap();
            assert_eq!(std::str::from_utf8(&line[..n]).unwrap(), want);
        }
        assert_eq!(host::gets(p, f, &mut line), Ok(0), "end of file");
        // gets stops when the buffer is full, and the rest of the line is still there.
        host::seek(p, f, 0, host::SEEK_SET).unwrap();
        let mut small = [0u8; 5];
        assert_eq!(host::gets(p, f, &mut small), Ok(5));
        assert_eq!(host::tell(p, f), Ok(5));
        // Bad seeks.
        assert_eq!(
            host::seek(p, f, -1, host::SEEK_SET),
            app(HostError::Invalid)
        );
        assert_eq!(host::seek(p, f, 0, 9), app(HostError::Invalid));
        assert_eq!(
            host::seek(p, f, -100_000, host::SEEK_CUR),
            app(HostError::Invalid)
        );
        host::close(p, f).unwrap();

        // Bad handles: closed, forged, zero, the output streams where a file is needed.
        for h in [
            f,
            Handle(f.0 ^ 1 << 32),
            Handle(12345),
            Handle(0),
            Handle(u64::MAX),
        ] {
            assert_eq!(host::read(p, h, &mut buf), app(HostError::BadHandle));
            assert_eq!(host::write(p, h, b"x"), app(HostError::BadHandle));
            assert_eq!(host::tell(p, h), app(HostError::BadHandle));
            assert_eq!(host::close(p, h), app(HostError::BadHandle));
        }
        assert_eq!(host::read(p, STDOUT, &mut buf), app(HostError::BadHandle));
        // ... but writing to standard output through its handle works.
        assert_eq!(host::write(p, STDOUT, b"via handle\n"), Ok(11));
        host::flush(p, STDOUT).unwrap();

        // Read-only files refuse writes; exclusive create refuses an existing file.
        let r = host::open(p, &a, mode::READ).unwrap();
        assert_eq!(host::write(p, r, b"x"), app(HostError::Io));
        host::close(p, r).unwrap();
        assert_eq!(
            host::open(p, &a, mode::from_c("wx").unwrap()),
            app(HostError::Exists)
        );
        // Append.
        let ap = host::open(p, &a, mode::from_c("a").unwrap()).unwrap();
        host::write(p, ap, b"tail").unwrap();
        host::close(p, ap).unwrap();
        assert!(std::fs::read(&a).unwrap().ends_with(b"third\ntail"));

        // Rename and remove, and their missing files.
        host::rename(p, &a, &b).unwrap();
        assert_eq!(host::open(p, &a, mode::READ), app(HostError::NotFound));
        assert_eq!(host::rename(p, &a, &b), app(HostError::NotFound));
        assert_eq!(host::rename(p, &b, ""), app(HostError::Invalid));
        assert_eq!(
            host::rename(p, &b, &"/".repeat(host::PATH_LIMIT + 1)),
            app(HostError::TooLong)
        );
        host::remove(p, &b).unwrap();
        assert_eq!(host::remove(p, &b), app(HostError::NotFound));
        assert_eq!(host::remove(p, ""), app(HostError::Invalid));
        assert!(!Path::new(&b).exists());
        // Special files do not open.
        assert_eq!(
            host::open(p, "/dev/zero", mode::READ),
            app(HostError::NotAFile)
        );
        assert_eq!(
            host::open(p, dir.0.to_str().unwrap(), mode::READ),
            app(HostError::NotAFile)
        );
    });
    assert_eq!(host.open_files(), 0);
    assert_eq!(out.text(), "via handle\n");
    assert!(err.text().is_empty());
}

#[test]
fn hostile_requests_through_the_generated_client_are_refused_and_serving_goes_on() {
    let _w = watchdog("hostile");
    let dir = Scratch::new("hostile");
    let host = LibcHost::new(captured(&Capture::default(), &Capture::default()));
    let file = dir.path("h");
    on_host(&host, 1, |p| {
        let libc = Libc::client(p);
        let f = host::open(p, &file, mode::from_c("w+").unwrap()).unwrap();
        host::write(p, f, &[7u8; 1000]).unwrap();
        host::seek(p, f, 0, host::SEEK_SET).unwrap();
        // Streams over each call's limit: refused before any handler runs.
        let huge = vec![b'a'; 100_000];
        let text = "a".repeat(100_000);
        assert_eq!(libc.print(&huge), Err(Error::Status(Status::Rejected)));
        assert_eq!(libc.e_print(&huge), Err(Error::Status(Status::Rejected)));
        let rejected = Error::Status(Status::Rejected);
        assert_eq!(libc.write(f, &huge), Err(rejected));
        assert_eq!(libc.open(mode::READ, &text), Err(rejected));
        assert_eq!(libc.rename(1, &text), Err(rejected));
        assert_eq!(libc.system(&text), Err(rejected));
        // A rename split past the end, or inside a character.
        assert_eq!(libc.rename(99, "a"), app(HostError::Invalid));
        assert_eq!(libc.rename(1, "éa"), app(HostError::Invalid));
        // A read of u32::MAX bytes gets one chunk at most.
        let mut reply = vec![0u8; 4 * IO_CHUNK];
        assert_eq!(
            libc.read_into(f, u32::MAX, &mut reply).map(|r| r.len()),
            Ok(IO_CHUNK)
        );
        // A reply longer than the caller's buffer is refused by the caller, not overrun, and
        // the port is left at rest.
        host::seek(p, f, 0, host::SEEK_SET).unwrap();
        let mut tiny = [0u8; 8];
        assert_eq!(
            libc.read_into(f, 100, &mut tiny),
            Err(Error::Status(Status::ReplyTooLarge { len: 100, limit: 8 }))
        );
        // Allocations the heap cannot hold (there is none), frees of addresses never handed out.
        assert_eq!(host::malloc(p, 16), app(HostError::OutOfMemory));
        assert_eq!(host::free(p, 0x1234 as *mut u8), app(HostError::BadPointer));
        assert_eq!(host::free(p, std::ptr::null_mut()), Ok(()));
        // Still serving.
        assert!(host::clock(p).is_ok());
        host::close(p, f).unwrap();
    });
    assert_eq!(host.open_files(), 0);
    // Each refused call was still one served message.
    assert_eq!(host.count(opcode::PRINT), 1);
}

#[test]
fn exit_abort_clock_and_system() {
    let _w = watchdog("exit");
    let host = LibcHost::new(captured(&Capture::default(), &Capture::default()));
    on_host(&host, 1, |p| {
        assert_eq!(host.exit_code(), None);
        host::exit(p, 3).unwrap();
        assert_eq!(host.exit_code(), Some(3));
        host::exit(p, 5).unwrap();
        assert_eq!(host.exit_code(), Some(3), "the first exit wins");
        assert!(!host.aborted());
        host::abort(p).unwrap();
        assert!(host.aborted());
        let c1 = host::clock(p).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let c2 = host::clock(p).unwrap();
        assert!(c2.monotonic_ns > c1.monotonic_ns);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(c2.realtime_ns <= now && c2.realtime_ns > now - 3_600_000_000_000);
        // `system` is off unless turned on.
        assert_eq!(host::system(p, "exit 7"), app(HostError::Disabled));
    });
    assert_eq!(host.count(Libc::Exit { code: 0 }.opcode()), 2);

    let on = LibcHost::new(LibcConfig {
        allow_system: true,
        ..captured(&Capture::default(), &Capture::default())
    });
    on_host(&on, 1, |p| {
        assert_eq!(host::system(p, "exit 7"), Ok(7));
        assert_eq!(host::system(p, ""), app(HostError::Invalid));
        let long = "x".repeat(host::SYSTEM_LIMIT + 1);
        assert_eq!(host::system(p, &long), app(HostError::TooLong));
    });
}

#[test]
fn malloc_hands_out_blocks_of_reserved_memory_that_come_back() {
    let _w = watchdog("malloc");
    let host = LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 4 << 10,
        }),
        ..captured(&Capture::default(), &Capture::default())
    });
    let full = host.heap_free().unwrap();
    on_host(&host, 1, |p| {
        let a = host::malloc(p, 100).unwrap() as u64;
        let b = host::malloc(p, 1).unwrap() as u64;
        assert!(a.is_multiple_of(16) && b.is_multiple_of(16) && a != b);
        assert!((1 << 20..(1 << 20) + (4 << 10)).contains(&a));
        host::free(p, a as *mut u8).unwrap();
        assert_eq!(host::free(p, a as *mut u8), app(HostError::BadPointer));
        host::free(p, b as *mut u8).unwrap();
        let all = host::malloc(p, full).unwrap();
        assert_eq!(host::malloc(p, 1), app(HostError::OutOfMemory));
        host::free(p, all).unwrap();
    });
    assert_eq!(host.heap_free(), Some(full));
}

#[test]
fn files_and_blocks_belong_to_their_client_and_quotas_count_per_client() {
    let _w = watchdog("clients");
    let dir = Scratch::new("clients");
    let host = LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 1 << 10,
        }),
        max_files: 3,
        max_files_per_client: 2,
        // Client 3 is gone.
        client_alive: |id| id != 3,
        ..captured(&Capture::default(), &Capture::default())
    });
    let file = dir.path("f");
    let w = mode::from_c("w").unwrap();
    // Client 3 (soon gone) takes a file and most of the heap.
    let (dead_file, dead_block) = on_host(&host, 3, |p| {
        (
            host::open(p, &file, w).unwrap(),
            host::malloc(p, 1000).unwrap(),
        )
    });
    on_host(&host, 1, |one| {
        on_host(&host, 2, |two| {
            let f1 = host::open(one, &file, w).unwrap();
            let f2 = host::open(one, &file, w).unwrap();
            // Client 1's quota is full.
            assert_eq!(host::open(one, &file, w), app(HostError::TooManyOpen));
            // (The table was full when client 1 asked: client 3, gone, had its file closed for
            // room, and client 1 was then refused by its own quota.) Client 2 still has room.
            let g = host::open(two, &file, w).unwrap();
            // Another client's handle is no handle.
            assert_eq!(host::write(two, f1, b"x"), app(HostError::BadHandle));
            assert_eq!(host::close(two, f1), app(HostError::BadHandle));
            assert_eq!(host::write(one, g, b"x"), app(HostError::BadHandle));
            assert_eq!(host::close(one, dead_file), app(HostError::BadHandle));
            // Another client's block is not freed; a dead client's comes back when room is short.
            let b = host::malloc(one, 16).unwrap();
            assert_eq!(host::free(two, b), app(HostError::BadPointer));
            assert_eq!(host::free(one, dead_block), app(HostError::BadPointer));
            let big = host::malloc(two, 900).unwrap();
            host::free(two, big).unwrap();
            host::free(one, b).unwrap();
            host::close(one, f1).unwrap();
            host::close(one, f2).unwrap();
            host::close(two, g).unwrap();
        })
    });
    assert_eq!(host.open_files(), 0);
    assert_eq!(host.heap_free(), Some(1 << 10));
}

#[test]
fn a_warp_prints_all_its_lanes_in_one_message_each_lane_whole_and_in_order() {
    let _w = watchdog("warp prints");
    const WARPS: u32 = 2;
    const LANES: u32 = 8;
    const LINES: u32 = 50;
    let (out, err) = (Capture::default(), Capture::default());
    let host = LibcHost::new(captured(&out, &err));
    on_warps(WARPS, LANES, &host, |client, w| {
        let lane = client.lanes().lane_id();
        let out = Printer::new(client);
        for i in 0..LINES {
            // Lanes print lines of different lengths, each shorter than a message.
            let pad = "y".repeat(((lane * 97 + i * 13) % 480) as usize);
            ferry_device::println!(&out, "w{w} l{lane} i{i} {pad}").unwrap();
        }
        // A long text in one print: several messages, cut at line ends, in order.
        if lane == 0 {
            ferry_device::eprint!(&out, "{}", "e\n".repeat(400)).unwrap();
        } else {
            ferry_device::eprint!(&out, "").unwrap();
        }
    });
    let text = out.text();
    let mut next = [[0u32; LANES as usize]; WARPS as usize];
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (w, l, i): (usize, usize, u32) = (
            f[0][1..].parse().unwrap(),
            f[1][1..].parse().unwrap(),
            f[2][1..].parse().unwrap(),
        );
        assert_eq!(i, next[w][l], "warp {w} lane {l} in order");
        assert_eq!(f[3], "y".repeat(((l as u32 * 97 + i * 13) % 480) as usize));
        next[w][l] += 1;
    }
    assert_eq!(next, [[LINES; LANES as usize]; WARPS as usize]);
    // One message carries all lanes of a warp: one message per line of the warp.
    assert_eq!(host.count(opcode::PRINT), (WARPS * LINES) as u64);
    assert_eq!(err.text(), "e\n".repeat(400 * WARPS as usize));
    assert_eq!(host.count(opcode::E_PRINT), 2 * WARPS as u64);
}

#[test]
fn a_warp_writes_and_reads_files_of_different_lengths_per_lane() {
    let _w = watchdog("warp files");
    let dir = Scratch::new("warp");
    let (out, err) = (Capture::default(), Capture::default());
    let host = LibcHost::new(LibcConfig {
        heap: Some(Arena {
            base: 1 << 20,
            size: 1 << 16,
        }),
        ..captured(&out, &err)
    });
    let failures = Mutex::new(Vec::new());
    let addresses = Mutex::new(Vec::new());
    let check = |what: &str, lane: u32, ok: bool| {
        if !ok {
            failures
                .lock()
                .unwrap()
                .push(format!("lane {lane}: {what}"));
        }
    };
    let renamed = AtomicU32::new(0);
    on_warps(1, 8, &host, |c, _| {
        let lane = c.lanes().lane_id();
        let name = dir.path(&format!("lane{lane}"));
        // Lane 3 asks for a missing file, lane 5 for a path over the limit (which would have the
        // server refuse every lane's stream, were it sent); the others create theirs. Nobody is
        // left waiting, and nobody's mistake fails another's open.
        let (path, m) = match lane {
            3 => (name.clone(), mode::READ),
            5 => ("/".repeat(host::PATH_LIMIT + 1), mode::READ),
            _ => (name.clone(), mode::from_c("w+").unwrap()),
        };
        let f = host::open(c, &path, m);
        let bad = lane == 3 || lane == 5;
        match lane {
            3 => check("open", lane, f == app(HostError::NotFound)),
            5 => check("open", lane, f == app(HostError::TooLong)),
            _ => check("open", lane, f.is_ok()),
        }
        let f = f.unwrap_or(Handle(0));
        // Lengths from 0 to several chunks: the lanes loop different numbers of times.
        let len = lane as usize * 333;
        let data: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + lane) as u8).collect();
        let wrote = host::write(c, f, &data);
        check(
            "write",
            lane,
            if bad {
                wrote == app(HostError::BadHandle)
            } else {
                wrote == Ok(len)
            },
        );
        let r = Printer::new(c).print_fmt(Target::File(f), format_args!("\nlane {lane}\n"), false);
        check("fprint", lane, bad || r.is_ok());
        let _ = host::seek(c, f, 0, host::SEEK_SET);
        let mut buf = vec![0u8; len + 64];
        let got = host::read(c, f, &mut buf);
        let want = [&data[..], format!("\nlane {lane}\n").as_bytes()].concat();
        check(
            "read",
            lane,
            if bad {
                got == app(HostError::BadHandle)
            } else {
                got == Ok(want.len()) && buf[..want.len()] == want[..]
            },
        );
        // Lines of different counts per lane.
        let _ = host::seek(c, f, len as i64, host::SEEK_SET);
        let mut line = [0u8; 32];
        let first = host::gets(c, f, &mut line);
        check("gets", lane, bad || first == Ok(1));
        let second = host::gets(c, f, &mut line);
        check(
            "gets again",
            lane,
            bad || second.map(|n| &line[..n]) == Ok(format!("lane {lane}\n").as_bytes()),
        );
        // Every lane allocates at once; the addresses differ.
        let p = host::malloc(c, 100).unwrap() as u64;
        check(
            "malloc",
            lane,
            (1 << 20..(1 << 20) + (1 << 16)).contains(&p),
        );
        addresses.lock().unwrap().push(p);
        c.lanes().sync(c.lanes().active_mask());
        check("free", lane, host::free(c, p as *mut u8).is_ok());
        let _ = host::close(c, f);
        // Every lane renames (or, lane 3 and 5, fails to rename) its file at once.
        let to = dir.path(&format!("renamed{lane}"));
        let r = host::rename(c, &name, &to);
        if r.is_ok() {
            renamed.fetch_add(1, Ordering::Relaxed);
        }
        check("rename", lane, bad == (r == app(HostError::NotFound)));
    });
    assert_eq!(failures.into_inner().unwrap(), Vec::<String>::new());
    let mut addresses = addresses.into_inner().unwrap();
    addresses.sort_unstable();
    addresses.dedup();
    assert_eq!(addresses.len(), 8, "every lane got its own block");
    assert_eq!(renamed.load(Ordering::Relaxed), 6);
    assert_eq!(host.open_files(), 0);
    assert_eq!(host.heap_free(), Some(1 << 16));
    assert!(out.text().is_empty() && err.text().is_empty());
}
