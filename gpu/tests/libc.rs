//! The `Libc` host services (`ferry_libc_host::LibcHost`) on simulated warps
//! (`ferry_device::sim::SimWarp`), served by `ferry_gpu::serve` over a heap region, as the loader
//! serves a kernel: lanes of one message that ask for different things, print in one message,
//! read and write different lengths, allocate at once. (Each call and its errors from one thread,
//! and clients' ownership and quotas between processes, are tested over shared memory in
//! `tests/tests/host_services.rs`.)

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use ferry_device::host::{self, mode, opcode, Handle, HostError, Printer, Target};
use ferry_device::sim::{SimWarp, Yield};
use ferry_gpu::host::{Arena, LibcConfig, LibcHost};
use ferry_gpu::serve;
use ferry_rpc::{HeapRegion, Lanes};
use ferry_tests::{app, captured, Capture, Scratch, Watchdog};

fn watchdog(name: &'static str) -> Watchdog {
    Watchdog::new(name, Duration::from_secs(120))
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
    // A warp's lines by (line, lane): each message's lanes in lane order, messages in order.
    let mut last: [Option<(u32, usize)>; WARPS as usize] = [None; WARPS as usize];
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (w, l, i): (usize, usize, u32) = (
            f[0][1..].parse().unwrap(),
            f[1][1..].parse().unwrap(),
            f[2][1..].parse().unwrap(),
        );
        assert_eq!(i, next[w][l], "warp {w} lane {l} in order");
        assert!(last[w] < Some((i, l)), "warp {w}: lanes in lane order");
        last[w] = Some((i, l));
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

/// This process's descriptors open on the file at `path`.
fn descriptors_of(path: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.as_os_str() == path)
        .count()
}

/// An input of `len` bytes in `dir`: its path and its bytes.
fn input(dir: &Scratch, len: usize) -> (String, Vec<u8>) {
    let path = dir.path("input");
    let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    (path, data)
}

/// The loader's file limits (the program is the one client) with room for `files` handles.
fn program_host(files: usize, out: &Capture, err: &Capture) -> LibcHost {
    LibcHost::new(LibcConfig {
        max_files: files,
        max_files_per_client: usize::MAX,
        ..captured(out, err)
    })
}

/// Issue 35, item 3: every thread of a launch opens the same input read-only, reads its slice
/// and closes. Every lane's open travels in its warp's one message, and every lane gets a handle
/// of its own (with its own position) on one descriptor; lanes that ask for a missing file fail
/// alone, and their closes of no handle harm nobody.
#[test]
fn every_lane_of_many_warps_opens_one_input_on_one_descriptor() {
    let _w = watchdog("one input");
    const WARPS: u32 = 4;
    const LANES: u32 = 32;
    const SLICE: usize = 48;
    let dir = Scratch::new("input");
    let (path, data) = input(&dir, (WARPS * LANES) as usize * SLICE);
    let missing = dir.path("missing");
    let (out, err) = (Capture::default(), Capture::default());
    let host = program_host(256, &out, &err);
    let opened = Barrier::new((WARPS * LANES) as usize);
    let descriptors = Mutex::new(Vec::new());
    let (read, failures) = (AtomicU32::new(0), Mutex::new(Vec::new()));
    on_warps(WARPS, LANES, &host, |c, w| {
        let lane = c.lanes().lane_id();
        let me = (w * LANES + lane) as usize;
        let bad = lane % 8 == 7;
        let f = host::open(c, if bad { &missing } else { &path }, mode::READ);
        let fail = |what: &str| failures.lock().unwrap().push(format!("{me}: {what}"));
        let as_asked = if bad {
            f == app(HostError::NotFound)
        } else {
            f.is_ok()
        };
        if !as_asked {
            fail("open");
        }
        let f = f.unwrap_or(Handle(0));
        opened.wait();
        if me == 0 {
            descriptors.lock().unwrap().push(descriptors_of(&path));
        }
        opened.wait();
        let at = me * SLICE;
        let mut slice = [0u8; SLICE];
        let got = host::read_at(c, f, at as u64, &mut slice);
        // The same slice again, through the handle's own position.
        let sought = host::seek(c, f, at as i64, host::SEEK_SET);
        let mut again = [0u8; SLICE];
        let second = host::read(c, f, &mut again);
        let tell = host::tell(c, f);
        if bad {
            if got != app(HostError::BadHandle) || host::close(c, f) != app(HostError::BadHandle) {
                fail("a failed open's handle");
            }
            return;
        }
        let want = &data[at..at + SLICE];
        if got == Ok(SLICE) && slice == want && second == Ok(SLICE) && again == want {
            read.fetch_add(1, Ordering::Relaxed);
        } else {
            fail("read");
        }
        if sought != Ok(at as u64) || tell != Ok((at + SLICE) as u64) {
            fail("position");
        }
        if host::close(c, f).is_err() {
            fail("close");
        }
    });
    assert_eq!(failures.into_inner().unwrap(), Vec::<String>::new());
    assert_eq!(read.load(Ordering::Relaxed), WARPS * LANES / 8 * 7);
    assert_eq!(
        descriptors.into_inner().unwrap(),
        [1],
        "every lane's handle on one descriptor"
    );
    assert_eq!(host.open_files(), 0);
    assert_eq!(descriptors_of(&path), 0, "closed with the last handle");
    assert_eq!(host.refusals().total(), 0);
}

/// Set in the child process a test that lowers its limit of descriptors runs in.
const CHILD: &str = "FERRY_GPU_LIBC_TEST_CHILD";

/// Whether this is the child process of the test `name`; if not, runs it in one.
fn in_child(name: &str) -> bool {
    ferry_testkit::in_child(name, CHILD)
}

/// A limit of descriptors that leaves `free` of them (or one more) to open: a new descriptor
/// takes the lowest free number, and only numbers below the limit are free to take.
fn limit_leaving(free: usize) -> u64 {
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    // (The listing's own descriptor is among them, free again once it is done.)
    (0..).filter(|n| !open.contains(n)).nth(free).unwrap()
}

/// Issue 35, item 3's run that counted nothing: more threads than descriptors, each opening the
/// one input, reading its slice, closing. Before, each open took a descriptor, so the first
/// few filled the process's table (the rest were refused), and then every read of those that had
/// opened failed too: a read at an offset duplicated its handle's descriptor, and none was left
/// until a thread closed, which came after its read. Now the opens share one descriptor and a
/// read takes none: every lane reads.
#[test]
fn more_threads_than_descriptors_all_read_one_input() {
    if !in_child("more_threads_than_descriptors_all_read_one_input") {
        return;
    }
    let _w = watchdog("descriptor limit");
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    const WARPS: u32 = 2;
    const LANES: u32 = 32;
    const SLICE: usize = 16;
    let dir = Scratch::new("limit");
    let (path, data) = input(&dir, (WARPS * LANES) as usize * SLICE);
    let (out, err) = (Capture::default(), Capture::default());
    let host = program_host(256, &out, &err);
    // Room for a few descriptors more: fewer than the threads.
    let limit = Rlimit {
        current: Some(limit_leaving(8)),
        maximum: getrlimit(Resource::Nofile).maximum,
    };
    setrlimit(Resource::Nofile, limit).unwrap();
    let (read, failures) = (AtomicU32::new(0), Mutex::new(Vec::new()));
    on_warps(WARPS, LANES, &host, |c, w| {
        let me = (w * LANES + c.lanes().lane_id()) as usize;
        let f = host::open(c, &path, mode::READ);
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                failures.lock().unwrap().push(format!("{me}: open {e:?}"));
                Handle(0)
            }
        };
        let mut slice = [0u8; SLICE];
        match host::read_at(c, f, (me * SLICE) as u64, &mut slice) {
            Ok(SLICE) if slice == data[me * SLICE..][..SLICE] => {
                read.fetch_add(1, Ordering::Relaxed);
            }
            other => failures
                .lock()
                .unwrap()
                .push(format!("{me}: read {other:?}")),
        }
        let _ = host::close(c, f);
    });
    let failures = failures.into_inner().unwrap();
    assert_eq!(
        read.load(Ordering::Relaxed),
        WARPS * LANES,
        "lanes counted; failures {failures:?}"
    );
    assert_eq!(host.refusals().total(), 0);
    assert_eq!(host.open_files(), 0);
}

/// Issue 35, items 2 and 3: a launch's warps start at their home ports, spread over every server
/// thread's range, so several threads serve it at once. Each thread writes a message's prints
/// under one lock before the port goes back (a warp's lines stay in order, none is lost), looks
/// a path its lanes all open up once, and opens its own shared descriptor of the input (at most
/// one a thread); every handle reads its own slice, and the last close closes them all.
#[test]
fn several_server_threads_serve_one_launch_each_message_whole() {
    let _w = watchdog("several server threads");
    const PORTS: u32 = 128;
    const THREADS: u32 = 4;
    const WARPS: u32 = 8;
    const LANES: u32 = 8;
    const LINES: u32 = 20;
    const SLICE: usize = 40;
    let dir = Scratch::new("threads");
    let (path, data) = input(&dir, (WARPS * LANES) as usize * SLICE);
    let (out, err) = (Capture::default(), Capture::default());
    let host = program_host(1024, &out, &err);
    let region = HeapRegion::new(PORTS, LANES).unwrap();
    let desc = ferry_device::sim::descriptor(&region);
    let opened = Barrier::new((WARPS * LANES) as usize);
    let (descriptors, failures) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    let (_, stats) = serve(
        region.region(),
        region.server_locks(),
        THREADS,
        &host,
        || {
            std::thread::scope(|s| {
                for w in 0..WARPS {
                    for lane in SimWarp::lanes(LANES) {
                        let (path, data, opened) = (&path, &data, &opened);
                        let (descriptors, failures) = (&descriptors, &failures);
                        s.spawn(move || {
                            let home = ferry_device::descriptor::home_port(w, PORTS);
                            // SAFETY: `desc` names `region`, alive and protocol-only for the scope.
                            let c = unsafe { desc.client(lane, Yield) }
                                .unwrap()
                                .with_cursor(home);
                            let l = c.lanes().lane_id();
                            let me = (w * LANES + l) as usize;
                            let fail =
                                |what: &str| failures.lock().unwrap().push(format!("{me}: {what}"));
                            let f = host::open(&c, path, mode::READ);
                            opened.wait();
                            if me == 0 {
                                descriptors.lock().unwrap().push(descriptors_of(path));
                            }
                            opened.wait();
                            let Ok(f) = f else {
                                return fail("open");
                            };
                            let mut slice = [0u8; SLICE];
                            let got = host::read_at(&c, f, (me * SLICE) as u64, &mut slice);
                            if got != Ok(SLICE) || slice[..] != data[me * SLICE..(me + 1) * SLICE] {
                                fail("read");
                            }
                            let printer = Printer::new(&c);
                            for i in 0..LINES {
                                if ferry_device::println!(&printer, "w{w} l{l} i{i}").is_err() {
                                    fail("print");
                                }
                            }
                            if host::close(&c, f).is_err() {
                                fail("close");
                            }
                        });
                    }
                }
            })
        },
    )
    .unwrap();
    assert_eq!(failures.into_inner().unwrap(), Vec::<String>::new());
    let busy = stats.per_thread.iter().filter(|&&n| n > 0).count();
    assert!(
        busy >= 2,
        "the launch reached one server thread: {:?}",
        stats.per_thread
    );
    let shared = descriptors.into_inner().unwrap()[0];
    assert!(
        (1..=THREADS as usize).contains(&shared),
        "{shared} descriptors for {} read-only handles",
        WARPS * LANES
    );
    assert_eq!(descriptors_of(&path), 0, "closed with the last handle");
    let mut next = [[0u32; LANES as usize]; WARPS as usize];
    for line in out.text().lines() {
        let f: Vec<u32> = line.split(' ').map(|x| x[1..].parse().unwrap()).collect();
        let (w, l, i) = (f[0] as usize, f[1] as usize, f[2]);
        assert_eq!(i, next[w][l], "warp {w} lane {l}: lines in order");
        next[w][l] += 1;
    }
    assert_eq!(
        next, [[LINES; LANES as usize]; WARPS as usize],
        "no line lost"
    );
    assert!(err.text().is_empty(), "{}", err.text());
}
