//! A probe of what cache-line layouts cost between two CPUs, with no protocol beyond the lines:
//! the floor under an inline call of each size, and under several workers.
//!
//! Two threads pinned to two CPUs exchange requests and replies through lines placed as a
//! variant says (the head line, where the sequence words are, and the "wide" lines a longer
//! request or reply also needs), with plain stores, a release store to hand over and an acquire
//! poll to take; each row a median of rounds that run every variant in turn. Variants: where the
//! wide lines lie (another page, the head's 128-byte buddy, right after it), whether the server
//! polls them with the head, `cldemote` on either side, `prefetchw` ahead of a write, the wide
//! lines written with `movnti` or `movdir64b`, the head handed over first, and work (a spin of
//! a given length) on either side between receiving and answering. The throughput part runs
//! 8 and 12 client threads, each with a head line of its own, against 1, 2, 4 and 8 worker
//! threads (each polling its share of the lines), the lines 64 or 128 bytes apart, every thread
//! on a CPU of its own (on a machine of 16 CPUs or more).
//!
//! `cargo run --release -p ferry-shm --example line_floor -- [CPU_A,CPU_B] [TRIPS] [ROUNDS]`
//! (`BENCHMARKS.md` has its figures on the 16-core hosts.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use ferry_shm::cache::demote;

const WORDS: usize = 64 * 1024 / 8;

/// 64 KiB of lines, page aligned.
#[repr(C, align(4096))]
struct Region([AtomicU64; WORDS]);

impl Region {
    fn new() -> Box<Self> {
        let layout = std::alloc::Layout::new::<Self>();
        // SAFETY: `layout` is `Region`'s (not zero-sized); all-zero bytes are a valid
        // `[AtomicU64; N]`, so the allocation is an initialised `Region` that the box then owns.
        unsafe {
            let p = std::alloc::alloc_zeroed(layout) as *mut Self;
            if p.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(p)
        }
    }
    fn line(&self, i: usize) -> &[AtomicU64] {
        &self.0[i * 8..i * 8 + 8]
    }
}

/// Request payload words in the head, besides its sequence words (32 bytes).
const HEAD_WORDS: usize = 4;

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).expect("pin");
}

#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    /// Wide lines of the request and of the reply (line indices; the head is line 0).
    req: &'static [usize],
    rep: &'static [usize],
    /// The server polls the request's wide tags with the head, in one look.
    parallel: bool,
    /// `cldemote` as ferry does: both sides demote the request's wide lines (the client after
    /// writing, the server after reading), and the server the head and reply lines after
    /// replying.
    demote: bool,
    /// The client takes the request's wide lines for writing (`prefetchw`) after each reply.
    client_pfw: bool,
    /// How the client writes the wide lines: 0 plain stores, 1 `movnti` + `sfence`, 2
    /// `movdir64b` + `sfence`.
    store: u8,
    /// The client hands the head over first, then the wide lines (the server polls them all).
    head_first: bool,
    /// Work (spin iterations) the server does between taking the request and replying, and the
    /// client between a reply and its next request.
    server_work: u64,
    client_work: u64,
    /// The server takes the head for writing (`prefetchw`) before its work.
    server_pfw: bool,
}

fn prefetchw(at: &AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint; no architectural effect.
    unsafe {
        std::arch::asm!("prefetchw [{a}]", a = in(reg) at as *const AtomicU64, options(nostack, preserves_flags, readonly));
    }
}

/// Writes the 8 words of line `l` with `movnti` (`store` 1) or one `movdir64b` (2), then `sfence`.
fn store_line(l: &[AtomicU64], words: &[u64; 8], store: u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `l` is a live, 64-byte aligned line of 8 words; both instructions write exactly
    // it; `sfence` orders them before the later stores.
    unsafe {
        let dst = l.as_ptr() as *mut u64;
        if store == 1 {
            for (i, w) in words.iter().enumerate() {
                std::arch::asm!("movnti [{d}], {v}", d = in(reg) dst.add(i), v = in(reg) *w, options(nostack, preserves_flags));
            }
        } else {
            std::arch::asm!("movdir64b {d}, [{s}]", d = in(reg) dst, s = in(reg) words.as_ptr(), options(nostack, preserves_flags));
        }
        std::arch::asm!("sfence", options(nostack, preserves_flags));
    }
}

static ITERS_PER_NS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

fn work(iters: u64) {
    let mut x = 0u64;
    for i in 0..iters {
        x = std::hint::black_box(x.wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Spin iterations a nanosecond on this CPU, measured once.
fn iters_per_ns() -> f64 {
    *ITERS_PER_NS.get_or_init(|| {
        let n = 50_000_000;
        let t = Instant::now();
        work(n);
        n as f64 / t.elapsed().as_nanos() as f64
    })
}

fn iters_for(ns: u64) -> u64 {
    (ns as f64 * iters_per_ns()) as u64
}

const FAR: usize = 64; // 4 KiB away: another page

fn v(name: &'static str, req: &'static [usize], rep: &'static [usize]) -> Variant {
    Variant {
        name,
        req,
        rep,
        parallel: false,
        demote: false,
        client_pfw: false,
        store: 0,
        head_first: false,
        server_work: 0,
        client_work: 0,
        server_pfw: false,
    }
}

fn variants() -> Vec<Variant> {
    let par = |mut x: Variant| {
        x.parallel = true;
        x
    };
    let dem = |mut x: Variant| {
        x.demote = true;
        x
    };
    vec![
        v("head only, 32 B", &[], &[]),
        dem(v("head only, demote after reply", &[], &[])),
        v("40 B: wide far, serial", &[FAR], &[]),
        dem(v(
            "40 B: wide far, serial, demotes (ferry now)",
            &[FAR],
            &[],
        )),
        par(v("40 B: wide far, polled with head", &[FAR], &[])),
        v("40 B: wide = head's 128-B buddy, serial", &[1], &[]),
        dem(v("40 B: buddy, serial, demotes", &[1], &[])),
        par(v("40 B: buddy, polled with head", &[1], &[])),
        v("40 B: wide next pair (line 2), serial", &[2], &[]),
        v(
            "256 B: 4 wide far, serial",
            &[FAR, FAR + 2, FAR + 4, FAR + 6],
            &[],
        ),
        dem(v(
            "256 B: 4 wide far, serial, demotes",
            &[FAR, FAR + 2, FAR + 4, FAR + 6],
            &[],
        )),
        par(v(
            "256 B: 4 wide far, polled",
            &[FAR, FAR + 2, FAR + 4, FAR + 6],
            &[],
        )),
        v(
            "256 B: 4 wide after head (1..5), serial",
            &[1, 2, 3, 4],
            &[],
        ),
        par(v(
            "256 B: 4 wide after head (1..5), polled",
            &[1, 2, 3, 4],
            &[],
        )),
        Variant {
            client_pfw: true,
            ..v("40 B: far, client prefetchw after reply", &[FAR], &[])
        },
        Variant {
            client_pfw: true,
            ..dem(v("40 B: far, client prefetchw, demotes", &[FAR], &[]))
        },
        Variant {
            store: 1,
            ..v("40 B: far, wide by movnti", &[FAR], &[])
        },
        Variant {
            store: 2,
            ..v("40 B: far, wide by movdir64b", &[FAR], &[])
        },
        Variant {
            head_first: true,
            ..par(v("40 B: far, head first, all polled", &[FAR], &[]))
        },
        Variant {
            server_work: iters_for(25),
            ..v("head only, server works 25 ns", &[], &[])
        },
        Variant {
            server_work: iters_for(25),
            ..dem(v("head only, server works 25 ns, demote", &[], &[]))
        },
        Variant {
            server_work: iters_for(25),
            server_pfw: true,
            ..v("head only, server prefetchw, works 25 ns", &[], &[])
        },
        Variant {
            client_work: iters_for(25),
            ..v("head only, client works 25 ns", &[], &[])
        },
        Variant {
            client_work: iters_for(25),
            server_work: iters_for(25),
            ..v("head only, both work 25 ns", &[], &[])
        },
        Variant {
            client_work: iters_for(25),
            server_work: iters_for(25),
            ..dem(v("head only, both work 25 ns, demote", &[], &[]))
        },
        Variant {
            client_work: iters_for(25),
            server_work: iters_for(25),
            server_pfw: true,
            ..v("head only, both work 25 ns, server prefetchw", &[], &[])
        },
        v("64 B each way: wide far", &[FAR], &[FAR]),
        dem(v("64 B each way: wide far, demotes", &[FAR], &[FAR])),
        v("64 B each way: buddy", &[1], &[1]),
        par(v("64 B each way: buddy, polled", &[1], &[1])),
    ]
}

/// One run of `trips` calls of variant `x` between CPUs `a` (client) and `b` (server): ns a call.
fn call_run(x: Variant, a: usize, b: usize, trips: u64) -> f64 {
    let r = Region::new();
    let r = &*r;
    std::thread::scope(|s| {
        s.spawn(move || {
            pin(b);
            let head = r.line(0);
            for seq in 1..=trips {
                loop {
                    let mut ok = head[0].load(Ordering::Acquire) == seq;
                    if x.parallel || x.head_first {
                        for &w in x.req {
                            ok &= r.line(w)[0].load(Ordering::Acquire) == seq;
                        }
                    }
                    if ok {
                        break;
                    }
                    std::hint::spin_loop();
                }
                if x.server_pfw {
                    prefetchw(&head[0]);
                }
                work(x.server_work);
                let mut sum = 0u64;
                for i in 0..HEAD_WORDS {
                    sum = sum.wrapping_add(head[4 + i].load(Ordering::Relaxed));
                }
                for &w in x.req {
                    let l = r.line(w);
                    assert_eq!(l[0].load(Ordering::Acquire), seq, "{}", x.name);
                    for word in &l[1..8] {
                        sum = sum.wrapping_add(word.load(Ordering::Relaxed));
                    }
                    if x.demote && !x.rep.contains(&w) {
                        demote(&l[0]);
                    }
                }
                head[4].store(sum, Ordering::Relaxed);
                for &w in x.rep {
                    let l = r.line(w);
                    for word in &l[1..8] {
                        word.store(sum, Ordering::Relaxed);
                    }
                    l[0].store(seq | 1 << 32, Ordering::Release);
                }
                head[2].store(seq, Ordering::Release);
                if x.demote {
                    demote(&head[0]);
                    for &w in x.rep {
                        demote(&r.line(w)[0]);
                    }
                }
            }
        });
        pin(a);
        let head = r.line(0);
        let start = Instant::now();
        let put_head = |seq: u64| {
            for i in 0..HEAD_WORDS {
                head[4 + i].store(seq, Ordering::Relaxed);
            }
            head[0].store(seq, Ordering::Release);
        };
        for seq in 1..=trips {
            if x.head_first {
                put_head(seq);
            }
            for &w in x.req {
                let l = r.line(w);
                if x.store != 0 {
                    store_line(l, &[seq; 8], x.store);
                } else {
                    for word in &l[1..8] {
                        word.store(seq, Ordering::Relaxed);
                    }
                    l[0].store(seq, Ordering::Release);
                }
                if x.demote {
                    demote(&l[0]);
                }
            }
            if !x.head_first {
                put_head(seq);
            }
            loop {
                let mut ok = head[2].load(Ordering::Acquire) == seq;
                for &w in x.rep {
                    ok &= r.line(w)[0].load(Ordering::Acquire) == seq | 1 << 32;
                }
                if ok {
                    break;
                }
                std::hint::spin_loop();
            }
            let mut sum = head[4].load(Ordering::Relaxed);
            for &w in x.rep {
                for word in &r.line(w)[1..8] {
                    sum = sum.wrapping_add(word.load(Ordering::Relaxed));
                }
            }
            std::hint::black_box(sum);
            if x.client_pfw {
                for &w in x.req {
                    prefetchw(&r.line(w)[0]);
                }
            }
            work(x.client_work);
        }
        start.elapsed().as_nanos() as f64 / trips as f64
    })
}

/// One word, ping-ponged: the floor.
fn pingpong(a: usize, b: usize, trips: u64) -> f64 {
    let r = Region::new();
    let r = &*r;
    std::thread::scope(|s| {
        s.spawn(move || {
            pin(b);
            let w = &r.0[0];
            for seq in 1..=trips {
                while w.load(Ordering::Acquire) != 2 * seq - 1 {
                    std::hint::spin_loop();
                }
                w.store(2 * seq, Ordering::Release);
            }
        });
        pin(a);
        let w = &r.0[0];
        let start = Instant::now();
        for seq in 1..=trips {
            w.store(2 * seq - 1, Ordering::Release);
            while w.load(Ordering::Acquire) != 2 * seq {
                std::hint::spin_loop();
            }
        }
        start.elapsed().as_nanos() as f64 / trips as f64
    })
}

/// Calls/s of `clients` client threads (CPUs `cpus[..clients]`), each on a head line of its own
/// `stride` lines apart, served by `workers` threads (the next CPUs), worker `w` polling the
/// lines `w, w + workers, ...` in turn.
fn throughput(cpus: &[usize], clients: usize, workers: usize, stride: usize, calls: u64) -> f64 {
    let r = Region::new();
    let r = &*r;
    let stop = AtomicBool::new(false);
    let stop = &stop;
    std::thread::scope(|s| {
        for w in 0..workers {
            let cpu = cpus[clients + w];
            s.spawn(move || {
                pin(cpu);
                let mine: Vec<usize> = (w..clients).step_by(workers).collect();
                let mut next = vec![1u64; mine.len()];
                while !stop.load(Ordering::Relaxed) {
                    for (k, &c) in mine.iter().enumerate() {
                        let head = r.line(c * stride);
                        if head[0].load(Ordering::Acquire) == next[k] {
                            let v = head[4].load(Ordering::Relaxed);
                            head[4].store(v + 1, Ordering::Relaxed);
                            head[2].store(next[k], Ordering::Release);
                            next[k] += 1;
                        }
                    }
                }
            });
        }
        let start = Instant::now();
        let mut hs = Vec::new();
        for (c, &cpu) in cpus.iter().enumerate().take(clients) {
            hs.push(s.spawn(move || {
                pin(cpu);
                let head = r.line(c * stride);
                for seq in 1..=calls {
                    head[4].store(seq, Ordering::Relaxed);
                    head[0].store(seq, Ordering::Release);
                    while head[2].load(Ordering::Acquire) != seq {
                        std::hint::spin_loop();
                    }
                }
            }));
        }
        for h in hs {
            h.join().expect("client");
        }
        let t = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        (clients as u64 * calls) as f64 / t
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ncpu = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (a, b) = args
        .get(1)
        .and_then(|s| s.split_once(','))
        .map(|(a, b)| (a.parse().expect("cpu"), b.parse().expect("cpu")))
        .unwrap_or((ncpu.saturating_sub(2), ncpu - 1));
    let trips: u64 = args.get(2).map_or(200_000, |s| s.parse().expect("trips"));
    let rounds: usize = args.get(3).map_or(7, |s| s.parse().expect("rounds"));
    println!("line_floor: CPUs {a} (client) and {b} (server), {trips} trips, {rounds} rounds");
    let movdir = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" movdir64b"));
    let vs: Vec<Variant> = variants()
        .into_iter()
        .filter(|x| x.store != 2 || movdir)
        .collect();
    println!(
        "work: {:.2} iterations a ns; movdir64b: {movdir}",
        iters_per_ns()
    );
    let mut pp = Vec::new();
    let mut t: Vec<Vec<f64>> = vec![Vec::new(); vs.len()];
    for _ in 0..rounds {
        pp.push(pingpong(a, b, trips));
        for (i, x) in vs.iter().enumerate() {
            t[i].push(call_run(*x, a, b, trips));
        }
    }
    let floor = median(pp.clone());
    println!("| lines | ns (median) | × ping-pong | runs |");
    println!("|---|---:|---:|---|");
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join("/")
    };
    println!("| one word ping-pong | {floor:.1} | 1.00 | {} |", show(&pp));
    for (i, x) in vs.iter().enumerate() {
        let m = median(t[i].clone());
        println!(
            "| {} | {m:.1} | {:.2} | {} |",
            x.name,
            m / floor,
            show(&t[i])
        );
    }
    if ncpu >= 16 {
        let cpus: Vec<usize> = (0..ncpu).collect();
        let calls = trips * 5;
        println!("\n| clients | workers | stride | M calls/s (median) | runs |");
        println!("|---:|---:|---:|---:|---|");
        for clients in [8usize, 12] {
            for stride in [1usize, 2] {
                for workers in [1usize, 2, 4, 8] {
                    if clients + workers > ncpu {
                        continue;
                    }
                    let v: Vec<f64> = (0..rounds.min(5))
                        .map(|_| throughput(&cpus, clients, workers, stride, calls) / 1e6)
                        .collect();
                    println!(
                        "| {clients} | {workers} | {} B | {:.2} | {} |",
                        stride * 64,
                        median(v.clone()),
                        v.iter()
                            .map(|x| format!("{x:.2}"))
                            .collect::<Vec<_>>()
                            .join("/")
                    );
                }
            }
        }
    }
}
