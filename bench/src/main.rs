//! `ferry-gpu-bench`: the GPU benchmark, every figure in one run, medians.
//!
//! ```text
//! ferry-gpu-bench BENCH.ptx [FLOOR_CUDA.ptx] [--iters N] [--calls N] [--servers 1,2,4,8] [--reps N]
//!                 [--bulk-mib N]
//! ferry-gpu-bench BENCH.ptx FLOOR_CUDA.ptx --ab old=OLD/bench.ptx,new=NEW/bench.ptx [--reps N]
//! ```
//!
//! 1. The floor: one GPU thread ping-pongs a flag with a host thread through mapped pinned memory,
//!    in Rust PTX (`bench.ptx`'s `pingpong`) and in CUDA C++ (`gpu/bench/floor.cu`, compiled with
//!    nvcc to PTX on the GPU machine); the same host echo thread serves both.
//! 2. A no-op call's round trip from one warp (`call_latency`), through the protocol, against one
//!    server thread, with 64 ports and with the default port count (one per resident warp).
//! 3. The same call written out step by step (`call_phases`, 64 ports), the global timer read
//!    between the steps: the median of each step, to show where a call's time goes.
//! 4. Throughput: every resident warp calls at once (`call_throughput`, registers capped at 32 so
//!    2048 threads fit an SM), by number of server threads.
//!
//! 5. Bulk (`--bulk-mib N`, default 256; 0 skips): a file of N MiB read into device memory by one
//!    call of lane 0 of one warp (`bulk_read`: the host's copy engine through pinned staging), and
//!    written back from it (`bulk_write`); then every resident warp reading its own 64 KiB slice at
//!    once; each against `cuMemcpyHtoD`/`DtoH` of the same bytes from pinned memory in the same
//!    run. Then `read_at` as a program writes it (`chunk_read`: each lane its part, into device
//!    memory, which `read_at` hands to the copy engine) on a 16 MiB file. Every byte moved is
//!    compared with the file.
//!
//! `--ab` instead compares builds of the bench program in one process: each no-op row on word
//! lines, and the warps' throughput on them, for every build in turn (`ab_compare`).
//!
//! Per-iteration times come from the kernels' `%globaltimer` stamps every 100 iterations; each
//! figure is the median over batches (latency) or over repetitions (throughput).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry_gpu::cuda::{Cuda, Function, Module};
use ferry_gpu::ferry_rpc::{Error as ProtocolError, Mailbox, Port, Server, Single, Wait};
use ferry_gpu::Handler;
use ferry_gpu::{serve, serve_with, Error, GpuRegion, LibcConfig, LibcHost, PortCount};

const STAMP_EVERY: u32 = 100;

/// Whether the latency rows time the host's handler of each call (`--host-spans`, printed to
/// stderr): two clock reads and a lock per call on the reply's path, before its reply is
/// written, so the rows are measured without them unless asked.
static HOST_SPANS: AtomicBool = AtomicBool::new(false);
const TIMEOUT: Duration = Duration::from_secs(120);

/// How a row names a `--max-sleep-ns` value (nothing for the default).
fn sleep_label(ns: u32) -> String {
    match ns {
        0 => String::new(),
        ns => format!(", warps sleep up to {ns} ns between polls"),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// Per-iteration nanoseconds of each batch, from the kernel's stamps.
fn batches(
    cuda: &Cuda,
    stamps: &ferry_gpu::cuda::DeviceMemory,
    iters: u32,
) -> Result<Vec<f64>, Error> {
    let n = (iters / STAMP_EVERY + 1) as usize;
    let mut raw = vec![0u8; n * 8];
    cuda.copy_from_device(&mut raw, stamps.ptr())?;
    let t: Vec<u64> = raw
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    Ok(t.windows(2)
        .map(|w| w[1].saturating_sub(w[0]) as f64 / STAMP_EVERY as f64)
        .collect())
}

/// The flag ping-pong floor of `kernel`: median ns per round trip.
fn floor(cuda: &Cuda, kernel: Function, iters: u32) -> Result<f64, Error> {
    floor_lines(cuda, kernel, iters, 1)
}

/// [`floor`] with the echo's value written to `lines` words 128 bytes apart (the
/// `pingpong_split_*` kernels poll each).
fn floor_lines(cuda: &Cuda, kernel: Function, iters: u32, lines: usize) -> Result<f64, Error> {
    let flags = cuda.alloc_mapped(64 + 128 * lines.max(1))?;
    let stamps = cuda.alloc_device((iters / STAMP_EVERY + 1) as usize * 8)?;
    // SAFETY: `flags` is 128 bytes of mapped memory, 64-byte aligned (page-aligned allocation):
    // `ping` at 0, `pong` at 64, each an aligned u32 shared with the kernel only atomically.
    let (ping, pong) = unsafe {
        (
            &*(flags.host() as *const AtomicU32),
            &*(flags.host().add(64) as *const AtomicU32),
        )
    };
    // SAFETY: `flags` holds `lines` words 128 bytes apart from `pong`, each aligned and shared
    // with the kernel only atomically.
    let others: Vec<&AtomicU32> = (1..lines)
        .map(|k| unsafe { &*(flags.host().add(64 + 128 * k) as *const AtomicU32) })
        .collect();
    let stop = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = 0;
            while last != iters && !stop.load(Ordering::Relaxed) {
                let v = ping.load(Ordering::Acquire);
                if v != last {
                    for other in &others {
                        other.store(v, Ordering::Release);
                    }
                    pong.store(v, Ordering::Release);
                    last = v;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut p_ping = flags.device();
        let mut p_pong = flags.device() + 64;
        let mut n = iters;
        let mut p_stamps = stamps.ptr();
        let mut params: [*mut c_void; 4] = [
            (&raw mut p_ping).cast(),
            (&raw mut p_pong).cast(),
            (&raw mut n).cast(),
            (&raw mut p_stamps).cast(),
        ];
        // SAFETY: `pingpong(u32*, u32*, u32, u64*)`: the flags and stamps outlive the wait.
        let r = unsafe { kernel.launch(1, 1, &mut params) }.and_then(|()| cuda.wait(TIMEOUT));
        stop.store(true, Ordering::Relaxed);
        r
    });
    result?;
    Ok(median(&mut batches(cuda, &stamps, iters)?))
}

/// One warp's no-op call: median ns per call, with `ports` ports.
fn call_latency(
    cuda: &Cuda,
    module: &Module,
    ports: PortCount,
    iters: u32,
) -> Result<(f64, u32), Error> {
    call_latency_of(cuda, module, "call_latency", ports, iters, false)
}

/// `call_latency` through the kernel `name` (the same signature).
fn call_latency_of(
    cuda: &Cuda,
    module: &Module,
    name: &str,
    ports: PortCount,
    iters: u32,
    words: bool,
) -> Result<(f64, u32), Error> {
    let kernel = module.function(name)?;
    // With word lines, every small call takes them, a whole warp's too.
    let region = match words {
        true => {
            let mut region = GpuRegion::new(cuda, ports)?;
            region.set_words_for_warps(true);
            region
        }
        false => GpuRegion::without_word_lines(cuda, ports)?,
    };
    region.install(cuda, module)?;
    let stamps = cuda.alloc_device((iters / STAMP_EVERY + 1) as usize * 8)?;
    let errors = cuda.alloc_device(4)?;
    let launch = || launch_one_warp(cuda, &kernel, iters, stamps.ptr(), errors.ptr());
    if HOST_SPANS.load(Ordering::Relaxed) {
        let services = Timed {
            inner: quiet_host(),
            spans: std::sync::Mutex::new(Vec::with_capacity(iters as usize)),
        };
        let (r, _) = serve(region.region(), region.server_locks(), 1, &services, launch)?;
        r?;
        let (mut inside, mut between) = services.medians();
        eprintln!(
            "{name}, {} ports, {}: host handler {:.0} ns, from one handler's end to the next's start {:.0} ns (medians)",
            region.layout().ports(),
            match words {
                true => "word lines",
                false => "packets",
            },
            median(&mut inside),
            median(&mut between)
        );
    } else {
        let (r, _) = serve(
            region.region(),
            region.server_locks(),
            1,
            &quiet_host(),
            launch,
        )?;
        r?;
    }
    Ok((
        median(&mut batches(cuda, &stamps, iters)?),
        read_u32(cuda, errors.ptr())?,
    ))
}

/// Launches `kernel`, a `(iters: u32, buffer: T*, errors: u32*)` kernel of the bench program, on
/// one warp and waits for it (what the wait returns).
fn launch_one_warp(
    cuda: &Cuda,
    kernel: &Function,
    iters: u32,
    buffer: u64,
    errors: u64,
) -> Result<Duration, Error> {
    let (mut n, mut buffer, mut errors) = (iters, buffer, errors);
    let mut params: [*mut c_void; 3] = [
        (&raw mut n).cast(),
        (&raw mut buffer).cast(),
        (&raw mut errors).cast(),
    ];
    // SAFETY: the kernel takes `(u32, T*, u32*)` (the callers' kernels do); the callers keep the
    // buffers and the region alive until the wait returns.
    unsafe { kernel.launch(1, 32, &mut params) }.and_then(|()| cuda.wait(TIMEOUT))
}

/// The `u32` at `ptr` in device memory (a kernel's error count).
fn read_u32(cuda: &Cuda, ptr: u64) -> Result<u32, Error> {
    let mut e = [0u8; 4];
    cuda.copy_from_device(&mut e, ptr)?;
    Ok(u32::from_le_bytes(e))
}

/// The `Libc` host the benchmark kernels call (their no-ops), its output thrown away.
fn quiet_host() -> LibcHost {
    LibcHost::new(LibcConfig {
        stdout: Box::new(std::io::sink()),
        stderr: Box::new(std::io::sink()),
        ..LibcConfig::default()
    })
}

/// A handler that records when each call's handling started and ended (one server thread).
struct Timed<H> {
    inner: H,
    spans: std::sync::Mutex<Vec<(Instant, Instant)>>,
}

impl<M: Mailbox, W: Wait, H: Handler<M, W>> Handler<M, W> for Timed<H> {
    fn handle(&self, port: &mut Port<'_, '_, Server, Single, M, W>) -> Result<(), ProtocolError> {
        let start = Instant::now();
        let handled = self.inner.handle(port);
        let end = Instant::now();
        if let Ok(mut spans) = self.spans.lock() {
            spans.push((start, end));
        }
        handled
    }

    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; ferry_gpu::ferry_rpc::service::INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        self.inner.handle_inline(opcode, request, body, reply)
    }

    /// A word-line call: every lane of it in one span, as a packet's.
    fn handle_inline_lanes(
        &self,
        opcode: u32,
        lanes: &mut ferry_gpu::ferry_rpc::service::InlineLanes<'_>,
    ) {
        let start = Instant::now();
        self.inner.handle_inline_lanes(opcode, lanes);
        let end = Instant::now();
        if let Ok(mut spans) = self.spans.lock() {
            spans.push((start, end));
        }
    }

    fn serves_inline(&self) -> bool {
        self.inner.serves_inline()
    }
}

impl<H> Timed<H> {
    /// Nanoseconds inside each handler, and from each handler's end to the next one's start.
    fn medians(&self) -> (Vec<f64>, Vec<f64>) {
        let spans = self.spans.lock().map(|s| s.clone()).unwrap_or_default();
        let inside = spans
            .iter()
            .map(|(s, e)| (*e - *s).as_nanos() as f64)
            .collect();
        let between = spans
            .windows(2)
            .map(|w| (w[1].0 - w[0].1).as_nanos() as f64)
            .collect();
        (inside, between)
    }
}

/// Runs `kernel` (one of the word-call kernels of `--word-timing`: `call_phases_values` and its
/// lane-0 variant, whose timer stamps between steps add ~0.3 µs to the rest; `call_values_one_word`
/// and its lane-0 variant, whose 4-byte requests the no-op refuses as bad requests, so their
/// handler column times a refusal; `call_values_two_in_one_out`) on 64 ports against a server
/// loop of its own, which times each call: the medians, in nanoseconds, of the
/// pass that found it up to its handler (the scan and the request words' reads), of the handler,
/// of the replies' writing (the handler's end to the served word written), and of the rest of the
/// round trip (the served word written to the start of the pass that finds the next call: the
/// reply crossing, the GPU's next call, the request crossing).
fn word_timing(
    cuda: &Cuda,
    module: &Module,
    kernel: &str,
    iters: u32,
) -> Result<[f64; 4], Box<dyn std::error::Error>> {
    use ferry_gpu::ferry_rpc::{PerPort, ServerProcess, Spin};
    let function = module.function(kernel)?;
    let region = GpuRegion::new(cuda, PortCount::Exactly(64))?;
    region.install(cuda, module)?;
    let phases = cuda.alloc_device(iters as usize * 4 * 4)?;
    let errors = cuda.alloc_device(4)?;
    let host = quiet_host();
    let stop = AtomicBool::new(false);
    let mut times: Vec<[Instant; 4]> = Vec::with_capacity(iters as usize);
    #[cfg(all(ferry_trace, target_arch = "x86_64"))]
    let mut traces: Vec<[u64; 10]> = Vec::with_capacity(iters as usize);
    let launched = std::thread::scope(|s| {
        let server = s.spawn(|| {
            let server = ServerProcess::new(region.region(), region.server_locks(), Single, Spin)
                .expect("the region's own locks")
                .exclusive()
                .ok()
                .expect("no other server");
            let mut seen = vec![0u64; server.seen_words()];
            let handled = std::cell::Cell::new([Instant::now(); 2]);
            while !stop.load(Ordering::Acquire) {
                let pass = Instant::now();
                #[cfg(all(ferry_trace, target_arch = "x86_64"))]
                ferry_gpu::ferry_rpc::trace::stamp(0);
                server.serve_words(
                    &mut seen,
                    |opcode, lanes| {
                        let start = Instant::now();
                        Handler::<PerPort, Spin>::handle_inline_lanes(&host, opcode, lanes);
                        handled.set([start, Instant::now()]);
                    },
                    |_| {
                        let [start, end] = handled.get();
                        times.push([pass, start, end, Instant::now()]);
                        #[cfg(all(ferry_trace, target_arch = "x86_64"))]
                        traces.push(core::array::from_fn::<u64, 10, _>(|k| {
                            ferry_gpu::ferry_rpc::trace::STAMPS[k].load(Ordering::Relaxed)
                        }));
                    },
                );
            }
        });
        let r = launch_one_warp(cuda, &function, iters, phases.ptr(), errors.ptr());
        stop.store(true, Ordering::Release);
        server.join().map_err(|_| "the timing server panicked")?;
        Ok::<_, Box<dyn std::error::Error>>(r)
    });
    launched??;
    let wrong = read_u32(cuda, errors.ptr())?;
    if wrong != 0 {
        return Err(format!("{kernel}: {wrong} wrong replies").into());
    }
    let ns = |d: Duration| d.as_nanos() as f64;
    #[cfg(all(ferry_trace, target_arch = "x86_64"))]
    {
        // SAFETY: rdtsc has no preconditions.
        let tsc = || unsafe { core::arch::x86_64::_rdtsc() };
        let (t0, c0) = (Instant::now(), tsc());
        std::thread::sleep(Duration::from_millis(20));
        let ghz = (tsc() - c0) as f64 / ns(t0.elapsed());
        // Each step: its name and the stamps it lies between (`ferry_rpc::trace`).
        let steps = [
            ("pass start→summit", 0, 1),
            ("summit→bell", 1, 2),
            ("bell→heads read", 2, 3),
            ("heads→meta read", 3, 4),
            ("meta→request words", 4, 5),
            ("request words→handler start", 5, 6),
            ("handler", 6, 7),
            ("handler end→served word", 7, 9),
        ];
        let mut row = String::new();
        for (name, a, b) in steps {
            let mut v: Vec<f64> = traces
                .iter()
                .map(|t| t[b].wrapping_sub(t[a]) as i64 as f64 / ghz)
                .collect();
            row += &format!("{name} {:.0}; ", median(&mut v));
        }
        let missing = traces.iter().filter(|t| t[8] != 0).count();
        println!("| trace {kernel} (TSC {ghz:.2} GHz, {} calls, {missing} with a request word missing at the first look) | {row} |", traces.len());
    }
    let mut request: Vec<f64> = times.iter().map(|t| ns(t[1] - t[0])).collect();
    let mut handler: Vec<f64> = times.iter().map(|t| ns(t[2] - t[1])).collect();
    let mut replies: Vec<f64> = times.iter().map(|t| ns(t[3] - t[2])).collect();
    let mut rest: Vec<f64> = times.windows(2).map(|w| ns(w[1][0] - w[0][3])).collect();
    Ok([
        median(&mut request),
        median(&mut handler),
        median(&mut replies),
        median(&mut rest),
    ])
}

/// Steps timed by `call_phases`, in its order.
const PHASES: [&str; 5] = [
    "open (a kept port), the request's length in the header",
    "send: slot stores, release fence, flip",
    "poll until the reply, acquire fence",
    "reply load (until it arrives)",
    "status load (a dependent read) and close",
];

/// The steps of a call on the word line (`call_phases_words`).
const WORD_PHASES: [&str; 4] = [
    "open (a kept port), the request's length in the header",
    "send: sequence, release fence, word stores",
    "poll the lane's reply words until they carry the sequence, acquire fence",
    "close",
];

/// The steps of a values-only call on the word line (`call_phases_values`).
const VALUE_PHASES: [&str; 4] = [
    "open (a kept port), the request's length in the header",
    "send: sequence, word stores (no fence)",
    "poll the lane's reply words until they carry the sequence (no fence)",
    "close",
];

/// The steps of a values-only call on the word line by a client that opens its port for each
/// call (`call_phases_values_open`).
const OPEN_VALUE_PHASES: [&str; 4] = [
    "open (the lock, the port's state)",
    "send: sequence, word stores (no fence)",
    "poll the lane's reply words until they carry the sequence (no fence)",
    "close (the unlock)",
];

/// The steps of `lock_phases`: a port's lock, then an open and a close, with no call.
const LOCK_PHASES: [&str; 4] = [
    "lock alone (try_hold: atomic, acquire fence)",
    "unlock alone (release fence, atomic)",
    "open_for_words (lock, port state)",
    "close (unlock)",
];

/// The steps of `open_probe`: an open's instructions on device words no other thread touches.
const OPEN_PROBE: [&str; 10] = [
    "atom.acquire.gpu.or",
    "two ld.relaxed.gpu after it",
    "atom.relaxed.gpu.or",
    "two ld.relaxed.gpu after it",
    "fence.acq_rel.gpu",
    "st.release.gpu",
    "atom.acquire.gpu.or again",
    "three dependent ld.local after it",
    "atom.relaxed.gpu.or again",
    "three dependent ld.local after it",
];

/// The steps of `open_real_probe`: a real open beside its instructions on the same words.
const OPEN_REAL: [&str; 9] = [
    "open_for_words (port not kept)",
    "a values call on it",
    "close",
    "atom.acquire.gpu.or.b64 of its port word",
    "st.release.gpu.u64 (the unlock)",
    "atom.acquire.gpu.or.b64 again",
    "fence.acq_rel.gpu, st.relaxed (a bitmap's unlock)",
    "open_for_words again, no call before it",
    "close",
];

/// The steps of `warp_open_probe`: a port word's lock taken by the first lane, beside a real open.
const WARP_OPEN: [&str; 4] = [
    "the first lane's atom.acquire.gpu.or.b64, broadcast",
    "the first lane's st.release.gpu.u64, lane sync",
    "open_for_words (port not kept)",
    "close",
];

/// `kernel` (`call_phases` or `call_phases_words`, timing `steps` steps) on 64 ports: the median
/// nanoseconds of each step, and the wrong replies.
fn call_phases(
    cuda: &Cuda,
    module: &Module,
    iters: u32,
    kernel: &str,
    steps: &[&str],
) -> Result<(Vec<f64>, u32), Error> {
    let words = kernel.starts_with("call_phases_words")
        || kernel.starts_with("call_phases_values")
        || kernel == "lock_phases"
        || kernel == "open_real_probe"
        || kernel.starts_with("warp_open_probe");
    let kernel = module.function(kernel)?;
    let region = match words {
        true => GpuRegion::new(cuda, PortCount::Exactly(64))?,
        false => GpuRegion::without_word_lines(cuda, PortCount::Exactly(64))?,
    };
    region.install(cuda, module)?;
    let phases = cuda.alloc_device(iters as usize * steps.len() * 4)?;
    let errors = cuda.alloc_device(4)?;
    let services = quiet_host();
    let (r, _) = serve(region.region(), region.server_locks(), 1, &services, || {
        launch_one_warp(cuda, &kernel, iters, phases.ptr(), errors.ptr())
    })?;
    r?;
    let mut raw = vec![0u8; iters as usize * steps.len() * 4];
    cuda.copy_from_device(&mut raw, phases.ptr())?;
    let words: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let medians = (0..steps.len())
        .map(|k| {
            let mut v: Vec<f64> = words
                .chunks(steps.len())
                .map(|call| call[k] as f64)
                .collect();
            median(&mut v)
        })
        .collect();
    Ok((medians, read_u32(cuda, errors.ptr())?))
}

/// Every warp calls `calls` times: (warp-calls per second, wrong replies).
fn throughput(
    cuda: &Cuda,
    region: &GpuRegion,
    kernel: Function,
    grid: u32,
    block: u32,
    calls: u32,
    servers: u32,
) -> Result<(f64, u32), Error> {
    let errors = cuda.alloc_device(4)?;
    let host = quiet_host();
    // As the loader serves a program: the derived service, counted by the server's stats.
    let services = ferry_gpu::host::Libc::server(host.for_program());
    let (r, stats) = serve(
        region.region(),
        region.server_locks(),
        servers,
        &services,
        || {
            let mut n = calls;
            let mut p_errors = errors.ptr();
            let mut params: [*mut c_void; 2] = [(&raw mut n).cast(), (&raw mut p_errors).cast()];
            let start = Instant::now();
            // SAFETY: `call_throughput(u32, u32*)`: `errors` and the region outlive the wait.
            unsafe { kernel.launch(grid, block, &mut params) }
                .and_then(|()| cuda.wait(TIMEOUT))
                .map(|_| start.elapsed())
        },
    )?;
    let elapsed = r?;
    let warp_calls = grid as u64 * (block as u64 / 32) * calls as u64;
    if stats.calls() != warp_calls {
        return Err(Error::Program(format!(
            "served {} calls, expected {warp_calls}",
            stats.calls()
        )));
    }
    Ok((
        warp_calls as f64 / elapsed.as_secs_f64(),
        read_u32(cuda, errors.ptr())?,
    ))
}

/// One bulk figure: what moved, its bandwidth, and the baseline's in the same run.
struct BulkRow {
    what: String,
    bytes: u64,
    secs: f64,
    baseline_secs: f64,
    baseline: &'static str,
    /// Where the host's copies spent their time in this row's runs (rows with copies only).
    host: Option<ferry_gpu::copy::CopyStats>,
}

/// A file of `bytes` bytes in /dev/shm, each byte a function of its offset.
fn bulk_file(tag: &str, bytes: usize) -> Result<(std::path::PathBuf, Vec<u8>), Error> {
    let path = std::path::PathBuf::from(format!(
        "/dev/shm/ferry-gpu-bench-{tag}-{}",
        std::process::id()
    ));
    let data: Vec<u8> = (0..bytes)
        .map(|i| (i ^ (i >> 11) ^ (i >> 23)) as u8)
        .collect();
    std::fs::write(&path, &data).map_err(|e| Error::Program(format!("{}: {e}", path.display())))?;
    Ok((path, data))
}

/// Reads `path` into `s`'s pinned memory, or writes that memory to `path`, on `threads` threads
/// each taking a contiguous part: by 4 MiB calls, or with `mapped` through a shared mapping of
/// the file (a write makes the file's pages first, so that the threads only fill them). A write
/// keeps what the file holds (its pages) unless `fresh`, which empties it first. The seconds it
/// took.
fn file_alone(
    s: &Staged,
    path: &std::path::Path,
    write: bool,
    fresh: bool,
    threads: usize,
    mapped: bool,
) -> Result<f64, Error> {
    use std::os::unix::fs::FileExt;
    let how = if mapped { " (mapped)" } else { "" };
    let io = |e: std::io::Error| Error::Program(format!("{}{how}: {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .create(write)
        .truncate(write && fresh)
        .open(path)
        .map_err(io)?;
    let host = s.host();
    let part = host.len().div_ceil(threads);
    let start = Instant::now();
    let map = match mapped {
        false => None,
        true => {
            if write {
                let size = host.len() as u64;
                rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size)
                    .map_err(|e| io(e.into()))?;
            }
            // The file is this benchmark's own, not changed by anyone else while mapped.
            let options = memmap2::MmapOptions::new().len(host.len()).clone();
            let map = match write {
                true => options.map_raw(&file),
                false => options.map_raw_read_only(&file),
            };
            Some(map.map_err(io)?)
        }
    };
    let base = map.as_ref().map(|m| m.as_mut_ptr() as usize);
    std::thread::scope(|scope| {
        let parts: Vec<_> = host
            .chunks_mut(part)
            .enumerate()
            .map(|(i, mine)| {
                let file = &file;
                scope.spawn(move || -> std::io::Result<()> {
                    if let Some(base) = base {
                        let at = (base + i * part) as *mut u8;
                        // SAFETY: this thread's part of the mapping, disjoint from the others',
                        // inside the mapping's `host.len()` bytes.
                        let theirs = unsafe { std::slice::from_raw_parts_mut(at, mine.len()) };
                        match write {
                            true => theirs.copy_from_slice(mine),
                            false => mine.copy_from_slice(theirs),
                        }
                        return Ok(());
                    }
                    for (j, piece) in mine.chunks_mut(4 << 20).enumerate() {
                        let at = (i * part + j * (4 << 20)) as u64;
                        match write {
                            true => file.write_all_at(piece, at)?,
                            false => file.read_exact_at(piece, at)?,
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        parts.into_iter().try_for_each(|p| {
            p.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("panicked")))
        })
    })
    .map_err(io)?;
    drop(map);
    Ok(start.elapsed().as_secs_f64())
}

/// Copies `s`'s device memory into the file at `path` with no CPU copy: the file (emptied first
/// if `fresh`, then sized) is mapped shared, the mapping registered with the driver
/// (`cuMemHostRegister`), the copy engine writes the file's pages (`cuMemcpyDtoH`), and the
/// mapping is unregistered. The seconds of each step: registering, copying, unregistering.
fn file_by_registration(
    s: &Staged,
    path: &std::path::Path,
    fresh: bool,
) -> Result<[f64; 3], Error> {
    use cudarc::driver::sys;
    let io = |e: std::io::Error| Error::Program(format!("{} (registered): {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(fresh)
        .open(path)
        .map_err(io)?;
    let len = s.data.len();
    file.set_len(len as u64).map_err(io)?;
    // The file is this benchmark's own, not changed by anyone else while mapped.
    let map = memmap2::MmapOptions::new()
        .len(len)
        .map_raw(&file)
        .map_err(io)?;
    let driver = |what: &str, r: sys::CUresult| match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        e => Err(Error::Program(format!("{what}: {e:?}"))),
    };
    let t0 = Instant::now();
    // SAFETY: `map` is `len` bytes of this process's memory, mapped until after the unregister
    // below.
    driver("cuMemHostRegister", unsafe {
        sys::cuMemHostRegister_v2(map.as_mut_ptr().cast(), len, 0)
    })?;
    let t1 = Instant::now();
    // SAFETY: `map` is `len` bytes, registered; `s.dev` is `len` bytes of device memory.
    let copied = driver("cuMemcpyDtoH", unsafe {
        sys::cuMemcpyDtoH_v2(map.as_mut_ptr().cast(), s.dev.ptr(), len)
    });
    let t2 = Instant::now();
    // SAFETY: registered above.
    let unregistered = driver("cuMemHostUnregister", unsafe {
        sys::cuMemHostUnregister(map.as_mut_ptr().cast())
    });
    let t3 = Instant::now();
    copied?;
    unregistered?;
    drop(map);
    Ok([
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t3 - t2).as_secs_f64(),
    ])
}

/// Runs a bulk kernel (`bulk_read`, `bulk_write`, `chunk_read`) over `warps` warps with `slice`
/// bytes each of `buffer`, serving it with `host` on `servers` threads: the kernel's time.
#[allow(clippy::too_many_arguments)]
fn bulk_kernel(
    cuda: &Cuda,
    module: &Module,
    name: &str,
    host: &LibcHost,
    helpers: &ferry_gpu::copy::Helpers,
    handle: u64,
    buffer: u64,
    slice: u64,
    warps: u32,
    servers: u32,
    sleep: u32,
    announce: bool,
) -> Result<f64, Error> {
    let kernel = module.function(name)?;
    let mut region = GpuRegion::new(cuda, PortCount::default())?;
    region.set_max_sleep_ns(sleep);
    region.set_announce(announce);
    region.install(cuda, module)?;
    let errors = cuda.alloc_device(4)?;
    let (block, grid) = if warps >= 32 {
        (1024, warps / 32)
    } else {
        (32 * warps, 1)
    };
    let (r, _) = serve_with(
        region.region(),
        region.server_locks(),
        servers,
        host,
        helpers,
        || {
            let (mut h, mut b, mut s, mut e) = (handle, buffer, slice, errors.ptr());
            let mut params: [*mut c_void; 4] = [
                (&raw mut h).cast(),
                (&raw mut b).cast(),
                (&raw mut s).cast(),
                (&raw mut e).cast(),
            ];
            let start = Instant::now();
            // SAFETY: `(u64, u8*, u64, u32*)`: the buffer holds `slice` bytes per warp, the file is
            // open on `host`, and the buffer, region and errors outlive the wait.
            unsafe { kernel.launch(grid, block, &mut params) }
                .and_then(|()| cuda.wait(TIMEOUT))
                .map(|_| start.elapsed())
        },
    )?;
    let elapsed = r?;
    let wrong = read_u32(cuda, errors.ptr())?;
    if wrong != 0 {
        return Err(Error::Program(format!(
            "{name}: {wrong} warps' calls moved the wrong number of bytes"
        )));
    }
    Ok(elapsed.as_secs_f64())
}

/// Whether device memory at `ptr` holds `data`.
fn device_holds(cuda: &Cuda, ptr: u64, data: &[u8]) -> Result<bool, Error> {
    let mut back = vec![0u8; data.len()];
    cuda.copy_from_device(&mut back, ptr)?;
    Ok(back == data)
}

/// A file of some size for the bulk rows, its bytes in pinned host memory, and device memory of
/// the same size.
struct Staged {
    path: std::path::PathBuf,
    data: Vec<u8>,
    pinned: ferry_gpu::cuda::MappedMemory,
    dev: ferry_gpu::cuda::DeviceMemory,
}

impl Staged {
    fn new(cuda: &Cuda, tag: &str, bytes: usize) -> Result<Staged, Error> {
        let (path, data) = bulk_file(tag, bytes)?;
        let pinned = cuda.alloc_mapped(bytes)?;
        let staged = Staged {
            path,
            data,
            pinned,
            dev: cuda.alloc_device(bytes)?,
        };
        staged.host().copy_from_slice(&staged.data);
        Ok(staged)
    }

    /// The pinned copy.
    #[allow(clippy::mut_from_ref)]
    fn host(&self) -> &mut [u8] {
        // SAFETY: `pinned` is `data.len()` bytes of host memory owned here; the benchmark uses
        // it from one thread, one copy at a time.
        unsafe { std::slice::from_raw_parts_mut(self.pinned.host(), self.data.len()) }
    }

    /// One `cuMemcpyHtoD` of the bytes from pinned memory, in seconds.
    fn htod(&self, cuda: &Cuda) -> Result<f64, Error> {
        let t = Instant::now();
        cuda.copy_to_device(self.dev.ptr(), self.host())?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// One `cuMemcpyDtoH` of the bytes to pinned memory, in seconds.
    fn dtoh(&self, cuda: &Cuda) -> Result<f64, Error> {
        let t = Instant::now();
        cuda.copy_from_device(self.host(), self.dev.ptr())?;
        Ok(t.elapsed().as_secs_f64())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The bulk rows (section 5 of the module docs).
/// What the bulk rows measure: the file's MiB, repetitions, server threads, the warps' pauses,
/// the warp counts of the slice rows, and the thread counts of the file-alone rows.
struct BulkPlan<'a> {
    mib: usize,
    reps: usize,
    servers: u32,
    sleeps: &'a [u32],
    warp_counts: &'a [u32],
    file_threads: &'a [usize],
}

fn bulk(
    cuda: &Cuda,
    module: &Module,
    capped: &Module,
    plan: &BulkPlan<'_>,
) -> Result<Vec<BulkRow>, Box<dyn std::error::Error>> {
    let BulkPlan {
        mib,
        reps,
        servers,
        sleeps,
        warp_counts,
        file_threads,
    } = *plan;
    use ferry_gpu::host::{mode, LibcServer};
    let copy = std::sync::Arc::new(ferry_gpu::copy::CudaCopy::new(cuda, servers as usize)?);
    let host = LibcHost::new(LibcConfig {
        stdout: Box::new(std::io::sink()),
        stderr: Box::new(std::io::sink()),
        device: Some(copy.clone()),
        ..LibcConfig::default()
    });
    let program = host.for_program();
    let time = |f: &mut dyn FnMut() -> Result<f64, Error>| -> Result<f64, Error> {
        let mut v = Vec::new();
        for _ in 0..reps {
            v.push(f()?);
        }
        Ok(median(&mut v))
    };
    // `kernel` over `warps` warps of `module`, `slice` bytes each, reading `s`'s file into its
    // device memory (zeroed before each run, compared with the file after): the median time.
    // Whether the copies are announced in the warps' memory (`GpuRegion::set_announce`).
    let announce = std::cell::Cell::new(true);
    let read = |s: &Staged,
                module: &Module,
                kernel: &str,
                slice: usize,
                warps: u32,
                runs: usize,
                sleep| {
        let file = program.open(mode::READ, s.path.to_str().unwrap_or_default())?;
        let zero = vec![0u8; s.data.len()];
        let mut v = Vec::new();
        for _ in 0..runs {
            cuda.copy_to_device(s.dev.ptr(), &zero)?;
            v.push(bulk_kernel(
                cuda,
                module,
                kernel,
                &host,
                copy.helpers(),
                file.0,
                s.dev.ptr(),
                slice as u64,
                warps,
                servers,
                sleep,
                announce.get(),
            )?);
        }
        program.close(file)?;
        if !device_holds(cuda, s.dev.ptr(), &s.data)? {
            return Err(format!("{kernel}: device memory differs from the file").into());
        }
        Ok::<f64, Box<dyn std::error::Error>>(median(&mut v))
    };
    let row = |what: String, s: &Staged, secs: f64, baseline_secs: f64, baseline| {
        let host = copy.take_stats();
        BulkRow {
            what,
            bytes: s.data.len() as u64,
            secs,
            baseline_secs,
            baseline,
            host: (host.copies > 0).then_some(host),
        }
    };
    copy.take_stats();
    let mut rows = Vec::new();

    // One warp's lane 0 reads a whole file, then writes it back.
    let whole = Staged::new(cuda, "whole", mib << 20)?;
    let htod = time(&mut || whole.htod(cuda))?;
    let dtoh = time(&mut || whole.dtoh(cuda))?;
    for on in [false, true] {
        announce.set(on);
        let secs = read(&whole, module, "bulk_read", mib << 20, 1, reps, 0)?;
        rows.push(row(
            format!(
                "one call (lane 0 of one warp) reads a {mib} MiB file into device memory{}",
                match on {
                    true => ", the end announced",
                    false => ", waiting for the reply",
                }
            ),
            &whole,
            secs,
            htod,
            "cuMemcpyHtoD from pinned memory",
        ));
    }
    let out_path = whole.path.with_extension("out");
    // To a new file (emptied before each run, outside the kernel's time), then over the file
    // just written (its pages there already).
    for fresh in [true, false] {
        let secs = time(&mut || {
            let how = mode::WRITE | mode::CREATE | if fresh { mode::TRUNCATE } else { 0 };
            let host_err = |e| Error::Program(format!("{}: {e:?}", out_path.display()));
            let out = program
                .open(how, out_path.to_str().unwrap_or_default())
                .map_err(host_err)?;
            let (h, ptr, n) = (out.0, whole.dev.ptr(), (mib << 20) as u64);
            let secs = bulk_kernel(
                cuda,
                module,
                "bulk_write",
                &host,
                copy.helpers(),
                h,
                ptr,
                n,
                1,
                servers,
                0,
                true,
            );
            program.close(out).map_err(host_err)?;
            secs
        })?;
        let written = std::fs::read(&out_path)?;
        if written != whole.data {
            return Err("bulk_write: the file differs from device memory".into());
        }
        rows.push(row(
            format!(
                "one call writes {mib} MiB of device memory {}",
                match fresh {
                    true => "to a new file",
                    false => "over an existing file",
                }
            ),
            &whole,
            secs,
            dtoh,
            "cuMemcpyDtoH to pinned memory",
        ));
    }
    let _ = std::fs::remove_file(&out_path);
    // No CPU copy at all: the copy engine writes the file's pages through a registered mapping
    // (a new file, then over it), each step's time apart.
    for fresh in [true, false] {
        if fresh {
            let _ = std::fs::remove_file(&out_path);
        }
        let mut steps = Vec::new();
        let secs = time(&mut || {
            let t = file_by_registration(&whole, &out_path, fresh)?;
            steps.push(t);
            Ok(t.iter().sum())
        });
        let which = match fresh {
            true => "a new",
            false => "an existing",
        };
        match secs {
            Ok(secs) => {
                if std::fs::read(&out_path)? != whole.data {
                    return Err("registered mapping: the file differs from device memory".into());
                }
                let mid = |k: usize| {
                    let mut v: Vec<f64> = steps.iter().map(|t| t[k] * 1e3).collect();
                    median(&mut v)
                };
                rows.push(row(
                    format!(
                        "no CPU copy: {mib} MiB of device memory copied into {which} file's pages, \
                         its mapping registered with the driver (register / copy / unregister \
                         {:.1} / {:.1} / {:.1} ms)",
                        mid(0),
                        mid(1),
                        mid(2)
                    ),
                    &whole,
                    secs,
                    dtoh,
                    "cuMemcpyDtoH to pinned memory",
                ));
            }
            Err(e) => {
                println!("| bulk: no CPU copy into {which} file's pages: refused ({e}) | | |")
            }
        }
    }
    let _ = std::fs::remove_file(&out_path);
    // The file side alone, no GPU: what the copies above can reach at most on this host, by
    // system calls and through a mapping of the file.
    for &threads in file_threads {
        for (mapped, how) in [(false, "read/write calls"), (true, "a shared mapping")] {
            let alone =
                |path, write, fresh| file_alone(&whole, path, write, fresh, threads, mapped);
            let secs = time(&mut || alone(&whole.path, false, false))?;
            rows.push(row(
                format!("no GPU: the {mib} MiB file read into pinned memory on {threads} threads, {how}"),
                &whole,
                secs,
                htod,
                "cuMemcpyHtoD from pinned memory",
            ));
            // A new file (its pages made as it is written), then over the file just written
            // (its pages there already).
            for fresh in [true, false] {
                let secs = time(&mut || {
                    if fresh {
                        let _ = std::fs::remove_file(&out_path);
                    }
                    alone(&out_path, true, fresh)
                })?;
                let back = std::fs::read(&out_path)?;
                if back != whole.data {
                    return Err(format!("file alone ({how}): the file differs from memory").into());
                }
                rows.push(row(
                    format!(
                        "no GPU: pinned memory written {} {mib} MiB file on {threads} threads, {how}",
                        match fresh {
                            true => "to a new",
                            false => "over an existing",
                        }
                    ),
                    &whole,
                    secs,
                    dtoh,
                    "cuMemcpyDtoH to pinned memory",
                ));
            }
            let _ = std::fs::remove_file(&out_path);
        }
    }
    drop(whole);

    // Every resident warp (or as many as `--bulk-warps` says) reads its own 64 KiB slice at once.
    let slice = 64usize << 10;
    for &warps in warp_counts {
        let slices = Staged::new(cuda, "slices", warps as usize * slice)?;
        let htod = time(&mut || slices.htod(cuda))?;
        // Every lane its own thirty-second of the warp's slice: 32 copies a call (once).
        if capped.function("bulk_read_lanes").is_ok() {
            let secs = read(&slices, capped, "bulk_read_lanes", slice, warps, 1, 0)?;
            rows.push(row(
                format!(
                    "{warps} warps, every lane its own 2 KiB of the warp's 64 KiB slice (32 copies a call, {} MiB), {servers} server threads, announced",
                    slices.data.len() >> 20
                ),
                &slices,
                secs,
                htod,
                "cuMemcpyHtoD from pinned memory",
            ));
        }
        for (&sleep, on) in sleeps.iter().flat_map(|s| [(s, false), (s, true)]) {
            announce.set(on);
            let secs = read(&slices, capped, "bulk_read", slice, warps, reps, sleep)?;
            announce.set(true);
            rows.push(row(
                format!(
                    "{warps} warps each read their own 64 KiB slice ({} MiB), {servers} server threads{}{}",
                    slices.data.len() >> 20,
                    sleep_label(sleep),
                    match on {
                        true => ", the end announced in device memory",
                        false => ", waiting for the reply",
                    }
                ),
                &slices,
                secs,
                htod,
                "cuMemcpyHtoD from pinned memory",
            ));
        }
    }

    // `read_at` into device memory, each lane its part, on 16 MiB (once): a lane's part is larger
    // than a call through the region carries, so `read_at` hands it to the copy engine.
    let chunks = Staged::new(cuda, "chunks", 16 << 20)?;
    let htod = time(&mut || chunks.htod(cuda))?;
    let secs = read(&chunks, module, "chunk_read", 16 << 20, 1, 1, 0)?;
    rows.push(row(
        "one warp reads a 16 MiB file with read_at into device memory (each lane its 32nd)".into(),
        &chunks,
        secs,
        htod,
        "cuMemcpyHtoD from pinned memory",
    ));
    Ok(rows)
}

/// `--copy-probe`: the driver's cost of many small announced copies from host threads, no
/// kernel: `n` copies of `size` bytes from pinned memory to device memory, each followed by a
/// 4-byte write of device memory in stream order; issued one by one from 1 and 8 threads (each
/// its own stream), and in batches (`cuMemcpyBatchAsync` + `cuStreamBatchMemOp`) from one
/// thread. Prints the time per copy.
fn copy_probe(cuda: &Cuda, n: usize, size: usize) -> Result<(), Error> {
    use cudarc::driver::sys;
    let host = cuda.alloc_mapped(n * size)?;
    let dev = cuda.alloc_device(n * size)?;
    let words = cuda.alloc_device(n * 4)?;
    let ok = |r: sys::CUresult, what: &str| -> Result<(), Error> {
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(Error::Program(format!("{what}: {e:?}"))),
        }
    };
    let (d, w) = (dev.ptr(), words.ptr());
    cuda.make_current()?;
    let mut context = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the context was just made current.
    ok(unsafe { sys::cuCtxGetCurrent(&mut context) }, "context")?;
    let (context, hp) = (context as usize, host.host() as usize);
    let one_by_one = |threads: usize| -> Result<f64, Error> {
        let t = Instant::now();
        std::thread::scope(|s| {
            let parts: Vec<_> = (0..threads)
                .map(|k| {
                    s.spawn(move || -> Result<(), Error> {
                        // SAFETY: the probe's context, alive for the probe.
                        let current = unsafe { sys::cuCtxSetCurrent(context as sys::CUcontext) };
                        ok(current, "context")?;
                        let mut stream = std::ptr::null_mut();
                        // SAFETY: valid out-pointer; 1 = non-blocking.
                        ok(unsafe { sys::cuStreamCreate(&mut stream, 1) }, "stream")?;
                        for i in (k..n).step_by(threads) {
                            let off = (i * size) as u64;
                            // SAFETY: in-bounds ranges of this probe's own allocations.
                            unsafe {
                                ok(
                                    sys::cuMemcpyHtoDAsync_v2(
                                        d + off,
                                        (hp + i * size) as *const c_void,
                                        size,
                                        stream,
                                    ),
                                    "copy",
                                )?;
                                ok(
                                    sys::cuStreamWriteValue32_v2(stream, w + 4 * i as u64, 1, 0),
                                    "write",
                                )?;
                            }
                        }
                        // SAFETY: this thread's stream.
                        unsafe {
                            ok(sys::cuStreamSynchronize(stream), "sync")?;
                            sys::cuStreamDestroy_v2(stream);
                        }
                        Ok(())
                    })
                })
                .collect();
            parts
                .into_iter()
                .try_for_each(|p| p.join().unwrap_or(Err(Error::Program("panicked".into()))))
        })?;
        Ok(t.elapsed().as_secs_f64())
    };
    let batched = |batch: usize| -> Result<f64, Error> {
        cuda.make_current()?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; 1 = non-blocking.
        ok(unsafe { sys::cuStreamCreate(&mut stream, 1) }, "stream")?;
        let t = Instant::now();
        for first in (0..n).step_by(batch) {
            let m = batch.min(n - first);
            let mut dsts: Vec<u64> = (first..first + m).map(|i| d + (i * size) as u64).collect();
            let mut srcs: Vec<u64> = (first..first + m)
                .map(|i| host.host() as u64 + (i * size) as u64)
                .collect();
            let mut sizes = vec![size; m];
            // SAFETY: zeroed attributes are a valid value; fields set below.
            let mut attr: sys::CUmemcpyAttributes = unsafe { std::mem::zeroed() };
            attr.srcAccessOrder = sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
            let mut idx = 0usize;
            let mut ops: Vec<sys::CUstreamBatchMemOpParams> = (first..first + m)
                .map(|i| {
                    // SAFETY: zeroed params are a valid value; fields set below.
                    let mut p: sys::CUstreamBatchMemOpParams = unsafe { std::mem::zeroed() };
                    p.writeValue.operation =
                        sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32;
                    p.writeValue.address = w + 4 * i as u64;
                    p.writeValue.__bindgen_anon_1.value = 1;
                    p
                })
                .collect();
            // SAFETY: arrays of `m` entries; in-bounds ranges of this probe's allocations.
            unsafe {
                ok(
                    sys::cuMemcpyBatchAsync_v2(
                        dsts.as_mut_ptr(),
                        srcs.as_mut_ptr(),
                        sizes.as_mut_ptr(),
                        m,
                        &mut attr,
                        &mut idx,
                        1,
                        stream,
                    ),
                    "batch copy",
                )?;
                ok(
                    sys::cuStreamBatchMemOp_v2(stream, m as u32, ops.as_mut_ptr(), 0),
                    "batch write",
                )?;
            }
        }
        // SAFETY: this probe's stream.
        unsafe {
            ok(sys::cuStreamSynchronize(stream), "sync")?;
            sys::cuStreamDestroy_v2(stream);
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let htod = {
        let t = Instant::now();
        // SAFETY: the probe's own allocations, `n * size` bytes each.
        let data = unsafe { std::slice::from_raw_parts(host.host(), n * size) };
        cuda.copy_to_device(d, data)?;
        t.elapsed().as_secs_f64()
    };
    println!("| copy probe: {n} copies of {size} B, one cuMemcpyHtoD of all | {:.2} µs per copy | {:.2} GB/s |", htod / n as f64 * 1e6, (n * size) as f64 / htod / 1e9);
    for threads in [1, 8] {
        let secs = one_by_one(threads)?;
        println!("| copy probe: one by one (copy + write), {threads} threads | {:.2} µs per copy | {:.2} GB/s |", secs / n as f64 * 1e6, (n * size) as f64 / secs / 1e9);
    }
    for batch in [64, 128] {
        let secs = batched(batch)?;
        println!("| copy probe: batches of {batch} (cuMemcpyBatchAsync + cuStreamBatchMemOp), 1 thread | {:.2} µs per copy | {:.2} GB/s |", secs / n as f64 * 1e6, (n * size) as f64 / secs / 1e9);
    }
    Ok(())
}

/// Prints the bulk rows, then where the host's copies spent their time in each.
fn print_bulk(rows: &[BulkRow]) {
    for r in rows {
        let gbps = |secs: f64| r.bytes as f64 / secs / 1e9;
        println!(
            "| bulk: {} | {:.2} GB/s ({:.2} ms) | {:.2} of {} ({:.2} GB/s) |",
            r.what,
            gbps(r.secs),
            r.secs * 1e3,
            r.baseline_secs / r.secs,
            r.baseline,
            gbps(r.baseline_secs)
        );
    }
    let with_host: Vec<_> = rows.iter().filter_map(|r| Some((r, r.host?))).collect();
    if with_host.is_empty() {
        return;
    }
    println!("\n| bulk row: the host's copies (sums over the row's runs) | copies | µs per copy: checks / file (all threads) / waiting for the copy engine / queueing and issuing / whole copy |");
    println!("|---|---|---|");
    for (r, h) in with_host {
        let per = |ns: u64| ns as f64 / h.copies as f64 / 1e3;
        println!(
            "| {} | {} | {:.1} / {:.1} / {:.1} / {:.1} / {:.1} |",
            r.what,
            h.copies,
            per(h.check_ns),
            per(h.file_ns),
            per(h.wait_ns),
            per(h.issue_ns),
            per(h.total_ns)
        );
    }
}

/// The least and the greatest of `v` (non-empty).
fn spread(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// `--ab label=path,...`: builds of the bench program (an older tree and this one, say) measured
/// in one process, each row's kernel of every build in turn, `reps` times, with the CUDA C++
/// floor and the warps' word-line throughput (15 server threads): medians per build. Runs of
/// one process vary less than separate runs of one build on this machine, so a change is judged
/// this way.
fn ab_compare(
    cuda: &Cuda,
    cpp: Option<&Module>,
    spec: &str,
    iters: u32,
    reps: usize,
    calls: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut mods = Vec::new();
    for item in spec.split(',') {
        let (label, path) = item.split_once('=').ok_or("--ab label=path,...")?;
        let m = cuda.load_module(&std::fs::read(path)?, None)?;
        let capped = cuda.load_module(&std::fs::read(path)?, Some(32))?;
        mods.push((label.to_string(), m, capped));
    }
    let all = PortCount::default();
    let p64 = PortCount::Exactly(64);
    let ks: [(&str, PortCount, &str); 7] = [
        ("call_latency_lane0_kept", p64, "lane 0 alone, port kept"),
        (
            "call_latency_words_lane0_values",
            p64,
            "lane 0 alone, port kept, Port::call_words_with",
        ),
        ("call_latency_lane0", p64, "lane 0 alone, opened per call"),
        (
            "call_latency_lane0",
            all,
            "lane 0 alone, opened per call, every port",
        ),
        ("call_latency_kept", p64, "one warp, port kept"),
        ("call_latency", p64, "one warp, opened per call"),
        ("call_latency", all, "one warp, opened per call, every port"),
    ];
    let mut lat = vec![vec![Vec::new(); mods.len()]; ks.len()];
    let mut floors = Vec::new();
    let mut rates = vec![Vec::new(); mods.len()];
    let mut wrong = 0;
    for _ in 0..reps {
        if let Some(m) = cpp {
            floors.push(floor(cuda, m.function("pingpong")?, iters)?);
        }
        for (k, (name, ports, _)) in ks.iter().enumerate() {
            for (v, (_, m, _)) in mods.iter().enumerate() {
                if m.function(name).is_err() {
                    continue;
                }
                let (l, e) = call_latency_of(cuda, m, name, *ports, iters, true)?;
                lat[k][v].push(l);
                wrong += e;
            }
        }
        for (v, (_, _, capped)) in mods.iter().enumerate() {
            let kernel = capped.function("call_throughput")?;
            let per_sm = kernel.blocks_per_sm(1024)?;
            let grid = cuda.sms * per_sm;
            let mut region = GpuRegion::new(cuda, PortCount::default())?;
            region.keep_ports_for((grid * 1024 / 32) as u64);
            region.set_words_for_warps(true);
            region.install(cuda, capped)?;
            let (rate, e) = throughput(cuda, &region, kernel, grid, 1024, calls, 15)?;
            rates[v].push(rate / 1e6);
            wrong += e;
        }
    }
    let f = median(&mut floors);
    println!(
        "| A/B: no-op calls on word lines ({reps} repetitions, one process) | {} |",
        mods.iter()
            .map(|m| m.0.clone())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("| floor, CUDA C++ flag ping-pong | {:.0} ns |", f);
    // Each cell: the median over the repetitions, its ratio to the floor, the repetitions' range.
    for (k, (_, _, what)) in ks.iter().enumerate() {
        let cells: Vec<String> = lat[k]
            .iter_mut()
            .map(|v| match v.is_empty() {
                true => "-".into(),
                false => {
                    let m = median(v);
                    let (lo, hi) = spread(v);
                    format!("{m:.0} ns {:.2}x ({lo:.0}–{hi:.0})", m / f)
                }
            })
            .collect();
        println!("| A/B {what} | {} |", cells.join(" | "));
    }
    let cells: Vec<String> = rates
        .iter_mut()
        .map(|v| {
            let (lo, hi) = spread(v);
            format!("{:.2} M ({lo:.2}–{hi:.2})", median(v))
        })
        .collect();
    println!(
        "| A/B warps on word lines, 15 threads | {} |",
        cells.join(" | ")
    );
    println!("wrong replies: {wrong}");
    Ok(())
}

/// The floor's exchange and a kept port's no-op word call (one warp; lane 0 alone) with the first
/// poll of the reply delayed by a few hundred ns after the send (the bench program's
/// `pingpong_delay_*` and `words_delay_*` kernels), alternated over `reps` (`--delay-probe`).
fn delay_probe(cuda: &Cuda, rust: &Module, iters: u32, reps: usize) -> Result<(), Error> {
    let floors = [
        "pingpong",
        "pingpong_delay_300",
        "pingpong_delay_600",
        "pingpong_delay_900",
        "pingpong_delay_1200",
    ];
    let delays = [0, 600, 900, 1200, 1500, 1800];
    let calls: Vec<String> = ["warp", "lane0"]
        .iter()
        .flat_map(|who| delays.iter().map(move |d| format!("words_delay_{who}_{d}")))
        .collect();
    let mut runs = vec![Vec::new(); floors.len() + calls.len()];
    let mut wrong = 0;
    for _ in 0..reps {
        for (k, name) in floors.iter().enumerate() {
            runs[k].push(floor(cuda, rust.function(name)?, iters)?);
        }
        for (k, name) in calls.iter().enumerate() {
            let (l, e) = call_latency_of(cuda, rust, name, PortCount::Exactly(64), iters, true)?;
            runs[floors.len() + k].push(l);
            wrong += e;
        }
    }
    let names = floors.iter().map(|s| s.to_string()).chain(calls);
    probe_table(
        &format!("the first poll delayed after the send ({reps} repetitions)"),
        names.zip(&mut runs),
    );
    println!("wrong replies: {wrong}");
    Ok(())
}

/// Prints a probe's table: each row's median over the repetitions, their range, and its ratio to
/// the first row's median (the floor).
fn probe_table<'r>(title: &str, rows: impl IntoIterator<Item = (String, &'r mut Vec<f64>)>) {
    let mut rows: Vec<_> = rows.into_iter().collect();
    let Some(base) = rows.first_mut().map(|(_, r)| median(r)) else {
        return;
    };
    println!("| {title} | ns, median (range) | × the floor |");
    println!("|---|---|---|");
    for (name, r) in rows {
        let (lo, hi) = spread(r);
        let m = median(r);
        println!("| {name} | {m:.0} ({lo:.0}–{hi:.0}) | {:.2} |", m / base);
    }
}

/// The floor's exchange with its poll kept several reads deep, of one word (the bench program's
/// `pingpong_piped_*` kernels) or of one word in each of several lines the echo writes
/// (`pingpong_split_*`), beside the floor itself, alternated over `reps` (`--poll-probe`).
fn poll_probe(cuda: &Cuda, rust: &Module, iters: u32, reps: usize) -> Result<(), Error> {
    // (The kernel, and the lines the echo writes.)
    let kernels = [
        ("pingpong", 1),
        ("pingpong_piped_2x600", 1),
        ("pingpong_piped_4x300", 1),
        ("pingpong_split_2x0", 2),
        ("pingpong_split_2x400", 2),
        ("pingpong_split_2x600", 2),
        ("pingpong_split_4x300", 4),
        ("pingpong_split_4x200", 4),
    ];
    let mut runs = vec![Vec::new(); kernels.len()];
    for _ in 0..reps {
        for (k, &(name, lines)) in kernels.iter().enumerate() {
            runs[k].push(floor_lines(cuda, rust.function(name)?, iters, lines)?);
        }
    }
    probe_table(
        &format!("flag ping-pong, the poll kept K reads deep, G ns apart ({reps} repetitions)"),
        kernels
            .iter()
            .map(|(name, _)| name.to_string())
            .zip(&mut runs),
    );
    Ok(())
}

/// All resident warps' no-op calls with their ports kept, on word lines and through the packets,
/// for each server thread count (`--throughput-only`): the server's side of the throughput alone,
/// for comparing host programs against the same PTX.
fn throughput_only(
    cuda: &Cuda,
    bench_ptx: &str,
    servers: &[u32],
    reps: usize,
    calls: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let capped = cuda.load_module(&std::fs::read(bench_ptx)?, Some(32))?;
    let kernel = capped.function("call_throughput")?;
    let per_sm = kernel.blocks_per_sm(1024)?;
    let grid = cuda.sms * per_sm;
    let warps = grid * 1024 / 32;
    let mut region = GpuRegion::new(cuda, PortCount::default())?;
    region.keep_ports_for(warps as u64);
    let mut wrong = 0;
    println!("| all {warps} warps x {calls} calls, ports kept ({reps} repetitions) | server threads | M warp-calls/s, median (range) |");
    println!("|---|---|---|");
    for words in [true, false] {
        region.set_words_for_warps(words);
        region.install(cuda, &capped)?;
        for &s in servers {
            let mut r = Vec::new();
            for _ in 0..reps {
                let (rate, e) = throughput(cuda, &region, kernel, grid, 1024, calls, s)?;
                wrong += e;
                r.push(rate / 1e6);
            }
            let (lo, hi) = spread(&r);
            let path = match words {
                true => "on word lines",
                false => "through the packets",
            };
            println!("| {path} | {s} | {:.2} ({lo:.2}–{hi:.2}) |", median(&mut r));
        }
    }
    println!("wrong replies: {wrong}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut ptx = Vec::new();
    let (mut iters, mut calls, mut reps) = (20_000u32, 200u32, 3usize);
    let mut bulk_mib = 256usize;
    let mut sleeps = vec![0u32];
    let mut servers = vec![1u32, 2, 4, 8];
    let mut copy_probe_on = false;
    let mut word_timing_on = false;
    let mut delay_probe_on = false;
    let mut ab = String::new();
    let mut throughput_only_on = false;
    let mut poll_probe_on = false;
    let (mut bulk_only, mut bulk_warps, mut file_threads) =
        (false, Vec::<u32>::new(), vec![ferry_gpu::copy::READERS]);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--iters" => iters = value()?.parse()?,
            "--calls" => calls = value()?.parse()?,
            "--reps" => reps = value()?.parse()?,
            "--bulk-mib" => bulk_mib = value()?.parse()?,
            "--bulk-only" => bulk_only = true,
            "--copy-probe" => copy_probe_on = true,
            "--word-timing" => word_timing_on = true,
            "--ab" => ab = value()?,
            "--throughput-only" => throughput_only_on = true,
            "--poll-probe" => poll_probe_on = true,
            "--delay-probe" => delay_probe_on = true,
            "--host-spans" => HOST_SPANS.store(true, Ordering::Relaxed),
            "--bulk-warps" => {
                bulk_warps = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--file-threads" => {
                file_threads = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--max-sleep-ns" => {
                sleeps = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--servers" => {
                servers = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            _ => ptx.push(a),
        }
    }
    let Some(bench_ptx) = ptx.first() else {
        return Err("usage: ferry-gpu-bench BENCH.ptx [FLOOR_CUDA.ptx] [--iters N] [--calls N] [--servers 1,2,4,8] [--reps N] [--bulk-mib N] [--bulk-only] [--bulk-warps 64,8448] [--file-threads 8,16] [--max-sleep-ns 0,32768] [--ab label=BENCH.ptx,...] [--throughput-only] [--poll-probe] [--host-spans]".into());
    };
    let cuda = Cuda::new(0)?;
    println!(
        "device: {} (sm_{}{}), {} SMs x {} threads = {} resident warps",
        cuda.name,
        cuda.capability.0,
        cuda.capability.1,
        cuda.sms,
        cuda.threads_per_sm,
        cuda.resident_warps()
    );
    let rust = cuda.load_module(&std::fs::read(bench_ptx)?, None)?;
    if word_timing_on {
        for kernel in [
            "call_phases_values",
            "call_phases_values_lane0",
            "call_values_one_word",
            "call_values_one_word_lane0",
            "call_values_two_in_one_out",
        ] {
            for _ in 0..reps {
                let [q, h, r, rest] = word_timing(&cuda, &rust, kernel, iters)?;
                println!(
                    "| word timing, {kernel}: pass to handler (request read) / handler / reply words written / the rest of the round trip | {q:.0} / {h:.0} / {r:.0} / {rest:.0} ns |"
                );
            }
        }
        return Ok(());
    }
    if poll_probe_on {
        return Ok(poll_probe(&cuda, &rust, iters, reps)?);
    }
    if delay_probe_on {
        return Ok(delay_probe(&cuda, &rust, iters, reps)?);
    }
    if throughput_only_on {
        return throughput_only(&cuda, bench_ptx, &servers, reps, calls);
    }
    if copy_probe_on {
        for _ in 0..2 {
            copy_probe(&cuda, cuda.resident_warps() as usize, 64 << 10)?;
        }
        return Ok(());
    }
    if bulk_warps.is_empty() {
        bulk_warps.push(cuda.resident_warps());
    }
    if bulk_only {
        let capped = cuda.load_module(&std::fs::read(bench_ptx)?, Some(32))?;
        let threads = servers.iter().copied().max().unwrap_or(1);
        let rows = bulk(
            &cuda,
            &rust,
            &capped,
            &BulkPlan {
                mib: bulk_mib,
                reps,
                servers: threads,
                sleeps: &sleeps,
                warp_counts: &bulk_warps,
                file_threads: &file_threads,
            },
        )?;
        print_bulk(&rows);
        return Ok(());
    }
    let cpp = match ptx.get(1) {
        Some(p) => Some(cuda.load_module(&std::fs::read(p)?, None)?),
        None => None,
    };

    if !ab.is_empty() {
        return ab_compare(&cuda, cpp.as_ref(), &ab, iters, reps, calls);
    }
    // 1 + 2: floors and one warp's call, interleaved over repetitions.
    let (mut f_rust, mut f_cpp, mut lat64, mut lat_all) = (vec![], vec![], vec![], vec![]);
    // The same on word lines (every small call takes them, a warp's too), and lane 0 alone on
    // them with every port.
    let (mut words64, mut words_all, mut words_lane0_all) = (vec![], vec![], vec![]);
    let mut wrong = 0;
    for _ in 0..reps {
        f_rust.push(floor(&cuda, rust.function("pingpong")?, iters)?);
        if let Some(m) = &cpp {
            f_cpp.push(floor(&cuda, m.function("pingpong")?, iters)?);
        }
        let (l, e) = call_latency(&cuda, &rust, PortCount::Exactly(64), iters)?;
        lat64.push(l);
        wrong += e;
        let (l, e) = call_latency(&cuda, &rust, PortCount::default(), iters)?;
        lat_all.push(l);
        wrong += e;
        for (ports, kernel, runs) in [
            (PortCount::Exactly(64), "call_latency", &mut words64),
            (PortCount::default(), "call_latency", &mut words_all),
            (
                PortCount::default(),
                "call_latency_lane0",
                &mut words_lane0_all,
            ),
        ] {
            let (l, e) = call_latency_of(&cuda, &rust, kernel, ports, iters, true)?;
            runs.push(l);
            wrong += e;
        }
    }
    let all_ports = PortCount::default().resolve(cuda.resident_warps());
    // 2b: the same call by a client that keeps its port; 2c: by lane 0 of the warp alone (one
    // slot each way instead of 32). A program without the kernel skips it.
    let mut optional = |name: &str, words: bool| -> Result<Vec<f64>, Error> {
        let mut runs = vec![];
        if rust.function(name).is_ok() {
            for _ in 0..reps {
                let ports = PortCount::Exactly(64);
                let (l, e) = call_latency_of(&cuda, &rust, name, ports, iters, words)?;
                runs.push(l);
                wrong += e;
            }
        }
        Ok(runs)
    };
    let mut lat_kept = optional("call_latency_kept", false)?;
    let mut words_kept = optional("call_latency_kept", true)?;
    let mut lat_lane0 = optional("call_latency_lane0", false)?;
    // 2d: lane 0 alone on a region with word lines (`ferry_rpc::words`), which it then takes
    // (a whole warp takes the packets: `Process::word_lanes`).
    let mut words_lane0 = optional("call_latency_lane0", true)?;
    // 2e: lane 0 alone keeping its port, through the packets and on the word line.
    let mut lane0_kept = optional("call_latency_lane0_kept", false)?;
    let mut words_lane0_kept = optional("call_latency_lane0_kept", true)?;
    // 2f: the same on the word line directly, with and without the fences.
    let mut words_fenced = optional("call_latency_words_lane0_fenced", true)?;
    let mut words_values = optional("call_latency_words_lane0_values", true)?;
    let (f_rust, f_cpp) = (median(&mut f_rust), median(&mut f_cpp));
    let (lat64, lat_all) = (median(&mut lat64), median(&mut lat_all));
    // 3: the call step by step, through the packets and on the word line (a program without
    // the kernel skips it).
    let mut steps = Vec::new();
    for (kernel, names, path) in [
        ("call_phases", &PHASES[..], "through the packets"),
        ("call_phases_words", &WORD_PHASES[..], "on the word line"),
        (
            "call_phases_words_lane0",
            &WORD_PHASES[..],
            "on the word line, lane 0 alone",
        ),
        (
            "call_phases_values",
            &VALUE_PHASES[..],
            "on the word line, values only (no fences)",
        ),
        (
            "call_phases_values_lane0",
            &VALUE_PHASES[..],
            "on the word line, values only, lane 0 alone",
        ),
        (
            "call_phases_values_open",
            &OPEN_VALUE_PHASES[..],
            "on the word line, values only, port opened per call",
        ),
        (
            "call_phases_values_lane0_open",
            &OPEN_VALUE_PHASES[..],
            "on the word line, values only, lane 0 alone, port opened per call",
        ),
        (
            "lock_phases",
            &LOCK_PHASES[..],
            "with no call, lane 0 alone",
        ),
        (
            "open_probe",
            &OPEN_PROBE[..],
            "of the open's instructions alone, lane 0",
        ),
        (
            "open_real_probe",
            &OPEN_REAL[..],
            "of a real open beside its instructions on the same words, lane 0",
        ),
        (
            "warp_open_probe",
            &WARP_OPEN[..],
            "of a port word's lock by a warp's first lane, beside a real open",
        ),
        (
            "warp_open_probe_lane0",
            &WARP_OPEN[..],
            "of a port word's lock by lane 0 alone, beside a real open",
        ),
    ] {
        if rust.function(kernel).is_ok() {
            let (p, e) = call_phases(&cuda, &rust, iters, kernel, names)?;
            wrong += e;
            steps.push((path, names, p));
        }
    }

    // 4: throughput at full occupancy.
    let capped = cuda.load_module(&std::fs::read(bench_ptx)?, Some(32))?;
    let kernel = capped.function("call_throughput")?;

    let block = 1024;
    let per_sm = kernel.blocks_per_sm(block)?;
    let grid = cuda.sms * per_sm;
    let warps = grid * block / 32;
    println!(
        "call_throughput: {} registers, {per_sm} blocks of {block} per SM: {grid} blocks, {warps} warps resident",
        kernel.registers()?
    );
    let mut region = GpuRegion::new(&cuda, PortCount::default())?;
    // Every warp opens a port per call, then keeps it (as the loader sets it up when the region
    // has a port per warp); then every warp keeps its port and makes its calls on the word lines
    // (`GpuRegion::set_words_for_warps`).
    let mut rates = Vec::new();
    let paths = sleeps
        .iter()
        .flat_map(|s| [(s, false, false), (s, true, false), (s, true, true)]);
    for (&sleep, keep, words) in paths {
        let kept = region.keep_ports_for(if keep { warps as u64 } else { u64::MAX });
        if keep && !kept {
            continue;
        }
        region.set_words_for_warps(words);
        region.set_max_sleep_ns(sleep);
        region.install(&cuda, &capped)?;
        for &s in &servers {
            let mut r = Vec::new();
            for _ in 0..reps {
                let (rate, e) = throughput(&cuda, &region, kernel, grid, block, calls, s)?;
                wrong += e;
                eprintln!(
                    "throughput (keep ports: {keep}, word lines: {words}, max sleep {sleep} ns), \
                     {s} server threads: {rate:.0} warp-calls/s"
                );
                r.push(rate);
            }
            rates.push((sleep, keep, words, s, median(&mut r)));
        }
    }

    println!("\n| measure (medians, {reps} repetitions) | value | ratio |");
    println!("|---|---|---|");
    println!(
        "| floor, CUDA C++ flag ping-pong | {:.2} µs | 1.00 |",
        f_cpp / 1e3
    );
    println!(
        "| floor, Rust PTX flag ping-pong | {:.2} µs | {:.2}x CUDA C++ |",
        f_rust / 1e3,
        f_rust / f_cpp
    );
    println!(
        "| no-op call, one warp, 64 ports | {:.2} µs | {:.2}x CUDA C++ floor |",
        lat64 / 1e3,
        lat64 / f_cpp
    );
    println!(
        "| no-op call, one warp, {} ports | {:.2} µs | {:.2}x CUDA C++ floor |",
        region.layout().ports(),
        lat_all / 1e3,
        lat_all / f_cpp
    );
    let words_label =
        format!("one warp, {all_ports} ports, on word lines (the no-op passes values: no fences)");
    let lane0_label = format!(
        "lane 0 of a warp alone, {all_ports} ports, on word lines (the no-op passes values: no fences)"
    );
    for (what, runs) in [
        (
            "one warp, 64 ports, on word lines (the no-op passes values: no fences)",
            &mut words64,
        ),
        (words_label.as_str(), &mut words_all),
        (lane0_label.as_str(), &mut words_lane0_all),
        ("one warp, 64 ports, client keeps its port", &mut lat_kept),
        (
            "one warp, 64 ports, client keeps its port, on word lines (the no-op passes values: no fences)",
            &mut words_kept,
        ),
        ("lane 0 of a warp alone, 64 ports", &mut lat_lane0),
        (
            "lane 0 of a warp alone, 64 ports, on word lines (the no-op passes values: no fences)",
            &mut words_lane0,
        ),
        (
            "lane 0 of a warp alone, 64 ports, port kept",
            &mut lane0_kept,
        ),
        (
            "lane 0 of a warp alone, 64 ports, port kept, on word lines (the no-op passes values: no fences)",
            &mut words_lane0_kept,
        ),
        (
            "lane 0 alone, port kept, word line called directly, with the fences of a call naming memory",
            &mut words_fenced,
        ),
        (
            "lane 0 alone, port kept, word line called directly, values only (no fences)",
            &mut words_values,
        ),
    ] {
        if !runs.is_empty() {
            let m = median(runs);
            println!(
                "| no-op call, {what} | {:.2} µs | {:.2}x CUDA C++ floor |",
                m / 1e3,
                m / f_cpp
            );
        }
    }
    for (path, names, p) in &steps {
        let total: f64 = p.iter().sum();
        for (name, ns) in names.iter().zip(p) {
            println!(
                "| step of a call {path} (64 ports, port kept): {name} | {:.2} µs | {:.2} of the steps' sum {:.2} µs |",
                ns / 1e3,
                ns / total,
                total / 1e3
            );
        }
    }
    for &(sleep, keep, words, s, r) in &rates {
        let how = match (keep, words) {
            (false, _) => "open per call",
            (true, false) => "ports kept",
            (true, true) => "ports kept, every call on word lines",
        };
        // The first row of the same kind: the fewest server threads.
        let first = rates
            .iter()
            .find(|q| (q.0, q.1, q.2) == (sleep, keep, words))
            .map_or(r, |q| q.4);
        println!(
            "| all {warps} warps x {calls} calls ({how}), {s} server threads{} | {r:.0} warp-calls/s | {:.2}x {} thread |",
            sleep_label(sleep),
            r / first,
            servers[0]
        );
    }
    // 5: bulk (a program without the kernels skips it).
    let bulk_rows = if bulk_mib > 0 && rust.function("bulk_read").is_ok() {
        let threads = servers.iter().copied().max().unwrap_or(1);
        bulk(
            &cuda,
            &rust,
            &capped,
            &BulkPlan {
                mib: bulk_mib,
                reps,
                servers: threads,
                sleeps: &sleeps,
                warp_counts: &bulk_warps,
                file_threads: &file_threads,
            },
        )?
    } else {
        Vec::new()
    };
    print_bulk(&bulk_rows);
    println!("wrong replies: {wrong}");
    if wrong != 0 {
        return Err("some replies were wrong".into());
    }
    Ok(())
}
