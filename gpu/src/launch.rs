//! Running a program: load it, give it a region and a heap, launch its entry kernel, serve it
//! until it ends.
//!
//! [`Program`] does it for any services: load the PTX ([`Program::load`]), bind the services
//! (`Tally::server(mine).and(Libc::server(program.libc().for_program()))`), [`run`](Program::run).
//! [`run_program`] (the loader, `rpc-gpu-run`) runs one with the loader's service: the `Libc`
//! calls (`ferry_libc::Libc`, served by the program's [`LibcHost`]).
//!
//! `malloc` is served from device memory reserved before launch ([`RunConfig::heap`] bytes): the
//! host only hands out addresses inside it. Growing device memory while a kernel runs can
//! deadlock on NVIDIA (an allocation may wait for the running kernel), so nothing is allocated
//! after launch.
//!
//! ```no_run
//! use ferry_rpc::RpcOpcodes;
//! use ferry_gpu::cuda::Cuda;
//! use ferry_gpu::host::Libc;
//! use ferry_gpu::{ExitPolicy, Program, RunConfig};
//!
//! #[derive(RpcOpcodes)]
//! pub enum Tally {
//!     #[rpc(response = u64)]
//!     Add { n: u64 },
//! }
//!
//! #[derive(Default)]
//! struct Sum(std::sync::atomic::AtomicU64);
//!
//! impl TallyServer for Sum {
//!     fn add(&self, n: u64) -> u64 {
//!         self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n
//!     }
//! }
//!
//! let cuda = Cuda::new(0)?;
//! let config = RunConfig { exit: ExitPolicy::Record, ..RunConfig::default() };
//! let program = Program::load(&cuda, &std::fs::read("tally.ptx")?, &config)?;
//! let services = Tally::server(Sum::default()).and(Libc::server(program.libc().for_program()));
//! let report = program.run(&["tally".to_string()], &services)?;
//! println!("exit {}, sum {:?}", report.code, services.0.handler().0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::c_void;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_libc::Libc;
use ferry_libc_host::ExitPolicy;
use ferry_rpc::service::{Service, Services};
use ferry_rpc::PerPort;

use crate::copy::{CudaCopy, Helpers};
use crate::cuda::{Cuda, DeviceMemory, Function, Module};
use crate::host::{Arena, CallCounts, LibcConfig, LibcHost};
use crate::region::{GpuRegion, PortCount};
use crate::server::{serve_with, Handler, ServeStats, ServerWait};
use crate::Error;

/// [`RunConfig::max_files`]'s default (`ferry_libc_host::PROGRAM_MAX_FILES`, as a program
/// run on CPU threads gets).
pub const DEFAULT_MAX_FILES: usize = crate::host::PROGRAM_MAX_FILES;

/// The default heap `malloc` serves from: `ferry_libc_host::PROGRAM_HEAP` bytes of device
/// memory (a program run on CPU threads gets as much host memory).
pub const DEFAULT_HEAP: usize = crate::host::PROGRAM_HEAP;

/// The server threads a run gets by default ([`RunConfig::server_threads`]): half the CPUs this
/// process may run on (`std::thread::available_parallelism`, which counts its CPU affinity and
/// cgroup quota), at least 1 and at most 8. Each thread spins while it serves, so half leaves the
/// other half to the copy engine's file threads, the program's output and the rest of the
/// machine; past 8, more threads rarely serve more, as the bus, not the threads, caps the calls
/// of most launches (`--server-threads` sets any count).
pub fn default_server_threads() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus / 2).clamp(1, 8) as u32
}

/// Mapped host memory the loader gives the bulk areas by default ([`bulk_share_for`]): 512 MiB.
pub const BULK_BUDGET: u64 = 512 << 20;

/// The largest lane share of a bulk area the loader chooses by default: 4 KiB and a slot, so that
/// a stack buffer's 4 KiB crosses in one call with its reply's tag or its request's arguments
/// (larger reads into device memory take the copy engine).
pub const MAX_DEFAULT_BULK: u32 = 4096 + 64;

/// The bulk share per lane a region of `ports` ports gets by default ([`RunConfig::bulk`]): as
/// much of [`BULK_BUDGET`] as each lane's share of it, a multiple of 64, at most
/// [`MAX_DEFAULT_BULK`] and at least a slot more than `ferry_libc::IO_CHUNK` (512 bytes, what a
/// call moves without one).
pub fn bulk_share_for(ports: u32) -> u32 {
    let lanes = ports.max(1) as u64 * crate::region::WARP_LANES as u64;
    let share = (BULK_BUDGET / lanes / 64 * 64) as u32;
    share.clamp(ferry_libc::IO_CHUNK as u32 + 64, MAX_DEFAULT_BULK)
}

/// The register cap the loader gives the JIT when none is asked for: `None` (the compiler's
/// choice, at most 255 a thread) where a block of `threads` threads can have 255 each within the
/// device's `registers_per_block`, else as many as each can have, a multiple of 8 (64 for blocks
/// of 1024 threads on a device of 65 536 registers a block). Without it, a kernel compiled to
/// more registers than that refuses to launch at that block size.
pub fn registers_for(registers_per_block: u32, threads: u32) -> Option<u32> {
    let each = registers_per_block / threads.max(1) / 8 * 8;
    (each < 255).then_some(each.max(16))
}

/// The default stack per GPU thread: 16 KiB. A program's frames hold its buffers (a 4 KiB read
/// buffer is usual) and, under the register cap a block of 1024 threads needs
/// ([`registers_for`]), the registers the compiler spills; `core::fmt`'s indirect calls keep the
/// compiler from bounding the stack. The driver reserves it for every resident thread.
pub const DEFAULT_STACK: usize = 16 << 10;

/// The program's output, shared with the caller of [`run_program`] (which flushes it at the
/// end), written under one lock.
struct SharedOut<O>(Arc<Mutex<O>>);

impl<O> Clone for SharedOut<O> {
    fn clone(&self) -> Self {
        SharedOut(self.0.clone())
    }
}

impl<O: Write> Write for SharedOut<O> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// The documented entry kernel: `_start(argc: u32, argv: *const *const u8, ret: *mut i32)`.
pub const ENTRY: &str = "_start";

/// How to run a program.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Blocks in the grid.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Ports of the region (default `PortCount::default()`, which the loader takes as one per
    /// warp of the launch, at most one per resident warp of the device, and one more: each warp
    /// then keeps its port, and a small launch's region is small).
    pub ports: PortCount,
    /// Bytes of each lane's share of a port's bulk area (`GpuRegion::with_options`), up to which
    /// a lane's file read or write crosses in one handoff (`None`: [`bulk_share_for`] the
    /// region's ports; 0: no bulk areas, streams cross in packets).
    pub bulk: Option<u32>,
    /// Server threads (default [`default_server_threads`]: half the machine's CPUs, at most 8).
    pub server_threads: u32,
    /// Register cap for the JIT (`None`: the compiler's choice where a block of `threads` can
    /// have it, else [`registers_for`] the block, so that every launch shape launches).
    pub max_registers: Option<u32>,
    /// How long the kernel may run.
    pub timeout: Duration,
    /// What the program's exit call does (default `Record`: the first code is kept and the run
    /// ends with the kernel, every call answered).
    pub exit: ExitPolicy,
    /// Bytes of device memory reserved before launch for `malloc` (0: none, every `malloc`
    /// fails with out of memory).
    pub heap: usize,
    /// Stack bytes per GPU thread (`None`: the driver's default, 1 KiB, which formatting with
    /// buffers on the stack, as `println!` and the file calls do, can overflow).
    pub stack: Option<usize>,
    /// The most file handles the program holds at once (the host's file table; an open past it
    /// is `HostError::TooManyOpen`, counted in [`RunReport::refused_opens`]). Read-only opens of
    /// one file share a few descriptors of this process (one per server thread), each handle with its own position; other
    /// opens take a descriptor each, bounded by this process's `RLIMIT_NOFILE` (an open past
    /// it is `HostError::NoDescriptors`, counted in [`RunReport::refused_descriptors`]; the
    /// loader raises the limit to its hard limit first).
    pub max_files: usize,
    /// The longest pause, in nanoseconds, between two polls of a warp waiting for a reply (0:
    /// the device library's default, `ferry_device::GpuWait`). Thousands of warps polling host
    /// memory at once share the bus with the replies and the copy engine; a longer pause leaves
    /// them more of it at the cost of a later wake-up.
    pub max_sleep_ns: u32,
    /// Whether the region has word lines (`GpuRegion::new`; default): a lone lane's small calls
    /// then cross in words that carry their own sequence. Off: every call takes the packets
    /// (`GpuRegion::without_word_lines`).
    pub word_lines: bool,
    /// Whether whole warps' small calls take the word lines too (`GpuRegion::set_words_for_warps`;
    /// default off: only a lone lane's do). Worth it with many server threads.
    pub words_for_warps: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            blocks: 1,
            threads: 32,
            ports: PortCount::default(),
            bulk: None,
            server_threads: default_server_threads(),
            max_registers: None,
            timeout: Duration::from_secs(600),
            exit: ExitPolicy::Record,
            heap: DEFAULT_HEAP,
            stack: Some(DEFAULT_STACK),
            max_files: DEFAULT_MAX_FILES,
            max_sleep_ns: 0,
            word_lines: true,
            words_for_warps: false,
        }
    }
}

/// How a run went.
#[derive(Debug)]
pub struct RunReport {
    /// The program's exit code: the first `exit` call's code (134 if it aborted), else thread
    /// 0's return.
    pub code: i32,
    /// Server counts.
    pub stats: ServeStats,
    /// `Libc` calls served (one per message), by `Libc::OPCODES` index, then opcodes none of the
    /// services served has, and handshakes.
    pub libc_calls: CallCounts,
    /// Ports of the region.
    pub ports: u32,
    /// Kernel time (launch to end), as the host saw it.
    pub elapsed: Duration,
    /// The loader's own start-up before the launch: loading the module (the driver compiles a
    /// PTX the first time it sees it), the region, the heap and the copy staging.
    pub startup: Duration,
    /// Of which loading the module.
    pub module_load: Duration,
    /// Opens refused because the program had [`RunConfig::max_files`] files open.
    pub refused_opens: u64,
    /// Opens refused because this process had no file descriptor left (its `RLIMIT_NOFILE`,
    /// or the system's).
    pub refused_descriptors: u64,
}

/// A program loaded on a device, with its region, its `malloc` heap and its [`LibcHost`], ready
/// to run while serving the caller's services (see the module docs).
pub struct Program<'c> {
    cuda: &'c Cuda,
    config: RunConfig,
    // Dropped in this order: the host (which only names heap addresses), the heap, the region,
    // the entry, the module.
    libc: LibcHost,
    _heap: Option<DeviceMemory>,
    region: GpuRegion,
    /// Where the copy engine counts its copies' helper threads.
    helpers: Helpers,
    /// Time spent in `load_with`, and of it in loading the module.
    startup: Duration,
    module_load: Duration,
    entry: Function,
    _module: Module,
}

impl std::fmt::Debug for Program<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("config", &self.config)
            .field("ports", &self.region.layout().ports())
            .finish_non_exhaustive()
    }
}

impl<'c> Program<'c> {
    /// Loads the PTX program `ptx` on `cuda`'s device for launches as `config` says: its region,
    /// its heap ([`RunConfig::heap`], reserved now), and a [`LibcHost`] printing to this
    /// process's standard output and error, exiting as [`RunConfig::exit`] says, with the whole
    /// file table ([`RunConfig::max_files`] handles) and the whole heap for the program (its
    /// only client).
    pub fn load(cuda: &'c Cuda, ptx: &[u8], config: &RunConfig) -> Result<Self, Error> {
        Self::load_with(
            cuda,
            ptx,
            config,
            LibcConfig {
                max_files: config.max_files,
                max_files_per_client: usize::MAX,
                ..LibcConfig::default()
            },
        )
    }

    /// As [`load`](Self::load), with the [`LibcHost`] configured by `libc`, except its heap
    /// (the one reserved here, all of it the program's: the region's only client,
    /// [`HeapQuota::Whole`](ferry_libc_host::HeapQuota::Whole)) and its exit policy
    /// ([`RunConfig::exit`]).
    pub fn load_with(
        cuda: &'c Cuda,
        ptx: &[u8],
        config: &RunConfig,
        libc: LibcConfig,
    ) -> Result<Self, Error> {
        let started = Instant::now();
        let registers = config
            .max_registers
            .or_else(|| registers_for(cuda.registers_per_block, config.threads));
        let module = cuda.load_module(ptx, registers)?;
        let module_load = started.elapsed();
        let entry = module.function(ENTRY).map_err(|_| {
            Error::Program(format!(
                "no entry kernel `{ENTRY}(argc, argv, ret)`: define it with `ferry_device::entry!`"
            ))
        })?;
        if let Some(bytes) = config.stack {
            cuda.set_stack_size(bytes)?;
        }
        let warps = config.blocks as u64 * config.threads.div_ceil(32) as u64;
        let ports = match config.ports {
            // A port per warp of the launch (at most per resident warp) and one more.
            PortCount::ResidentWarps { cap } => PortCount::Exactly(
                (warps.min(cuda.resident_warps() as u64) as u32)
                    .saturating_add(1)
                    .min(cap),
            ),
            exactly => exactly,
        };
        let bulk = config
            .bulk
            .unwrap_or_else(|| bulk_share_for(ports.resolve(cuda.resident_warps())));
        let mut region = GpuRegion::with_options(cuda, ports, config.word_lines, bulk)?;
        // Each warp keeps its port between calls when every warp of the launch has one.
        region.keep_ports_for(warps);
        region.set_max_sleep_ns(config.max_sleep_ns);
        region.set_words_for_warps(config.words_for_warps);
        // The host services always have a copy engine's path here (below), and it announces.
        region.set_announce(true);
        region.install(cuda, &module)?;
        // The heap, reserved before launch (nothing is allocated while a kernel runs).
        let heap = match config.heap {
            0 => None,
            bytes => Some(cuda.alloc_device(bytes)?),
        };
        // The copy engine's path for files to and from device memory, unless the caller gave
        // one: staging for each server thread, made now.
        // Its helper threads are counted where the serving threads look (a copy path the caller
        // gave counts none).
        let (device, helpers) = match libc.device {
            Some(d) => (d, Helpers::default()),
            None => {
                let copy = CudaCopy::new(cuda, config.server_threads as usize)?;
                let helpers = copy.helpers().clone();
                (
                    Arc::new(copy) as Arc<dyn ferry_libc_host::DeviceCopy>,
                    helpers,
                )
            }
        };
        let libc = LibcHost::new(LibcConfig {
            heap: heap.as_ref().map(|h| Arena {
                base: h.ptr(),
                size: h.len() as u64,
            }),
            // The program is the region's only client: a share of the heap would only make it
            // smaller (`RunConfig::heap` sizes it).
            max_heap_per_client: ferry_libc_host::HeapQuota::Whole,
            exit: config.exit,
            device: Some(device),
            ..libc
        });
        Ok(Program {
            cuda,
            config: config.clone(),
            libc,
            _heap: heap,
            region,
            helpers,
            entry,
            _module: module,
            module_load,
            startup: started.elapsed(),
        })
    }

    /// The program's C-library host: serve it as `Libc::server(program.libc().for_program())`;
    /// after a run, its [`exit_code`](LibcHost::exit_code) and files.
    pub fn libc(&self) -> &LibcHost {
        &self.libc
    }

    /// The region the program's calls arrive on.
    pub fn region(&self) -> &GpuRegion {
        &self.region
    }

    /// Runs the entry kernel with `args` (the program's name first) while serving `services`
    /// (`Tally::server(mine).and(Libc::server(program.libc().for_program()))`) from
    /// [`RunConfig::server_threads`] threads, until it ends and every call it made is answered.
    /// The report's code is the `Libc` exit call's code if the program made one (134 if it
    /// aborted), else the OR of every thread's return value (`ferry_device::program`'s rule).
    pub fn run<S: Services + Handler<PerPort, ServerWait>>(
        &self,
        args: &[String],
        services: &S,
    ) -> Result<RunReport, Error> {
        if let Some(collision) = ferry_rpc::service::opcode_collision(services) {
            return Err(Error::Program(collision.to_string()));
        }
        let cuda = self.cuda;
        let config = &self.config;
        // argv: the strings, NUL-terminated, then the array of their device addresses.
        let mut strings = Vec::new();
        let mut offsets = Vec::new();
        for a in args {
            offsets.push(strings.len());
            strings.extend_from_slice(a.as_bytes());
            strings.push(0);
        }
        let pad = strings.len().next_multiple_of(8);
        strings.resize(pad, 0);
        let argv_mem = cuda.alloc_device(pad + 8 * args.len().max(1))?;
        let base = argv_mem.ptr();
        for o in &offsets {
            strings.extend_from_slice(&(base + *o as u64).to_le_bytes());
        }
        cuda.copy_to_device(base, &strings)?;
        // Zeroed: the threads OR their non-zero returns into it.
        let ret = cuda.alloc_device(4)?;
        cuda.copy_to_device(ret.ptr(), &[0u8; 4])?;

        let mut argc = args.len() as u32;
        let mut argv = base + pad as u64;
        let mut ret_ptr = ret.ptr();
        let entry = self.entry;
        let (ran, stats) = serve_with(
            self.region.region(),
            self.region.server_locks(),
            config.server_threads,
            services,
            &self.helpers,
            || -> Result<Duration, Error> {
                let mut params: [*mut c_void; 3] = [
                    (&raw mut argc).cast(),
                    (&raw mut argv).cast(),
                    (&raw mut ret_ptr).cast(),
                ];
                // SAFETY: `_start` takes (u32, u64 pointer, u64 pointer) — the entry's documented
                // signature; argv and ret are device allocations that outlive the wait below, and
                // the region the descriptor names lives as long as `self`, after the kernel ends;
                // the heap too.
                unsafe { entry.launch(config.blocks, config.threads, &mut params)? };
                cuda.wait(config.timeout)
            },
        )?;
        let elapsed = ran?;
        let mut code = [0u8; 4];
        cuda.copy_from_device(&mut code, ret.ptr())?;
        let code = self
            .libc
            .exit_code()
            // An abort the policy recorded: what a shell reports for SIGABRT.
            .or(self.libc.aborted().then_some(134))
            .unwrap_or(i32::from_le_bytes(code));
        let libc_calls = core::array::from_fn(|i| match <Libc as Service>::OPCODES.get(i) {
            Some(&op) => stats.count(op),
            None => stats
                .by_opcode
                .iter()
                .filter(|&&(op, _)| !services.has_opcode(op))
                .map(|&(_, n)| n)
                .sum(),
        });
        Ok(RunReport {
            code,
            libc_calls,
            stats,
            ports: self.region.layout().ports(),
            elapsed,
            startup: self.startup,
            module_load: self.module_load,
            refused_opens: self.libc.refused_opens(),
            refused_descriptors: self.libc.refusals().descriptors,
        })
    }
}

/// Runs the PTX program `ptx` with `args` (the program's name first), serving the loader's
/// service (see the module docs) and printing to `out` (the `Libc` service's standard output; its
/// standard error is this process's).
pub fn run_program<O: Write + Send + 'static>(
    cuda: &Cuda,
    ptx: &[u8],
    args: &[String],
    config: &RunConfig,
    out: O,
) -> Result<RunReport, Error> {
    let out = SharedOut(Arc::new(Mutex::new(out)));
    let program = Program::load_with(
        cuda,
        ptx,
        config,
        LibcConfig {
            stdout: Box::new(out.clone()),
            // The program is the region's only client: the whole file table is its quota.
            max_files: config.max_files,
            max_files_per_client: usize::MAX,
            // A program's environment is its loader's, as a process's is its parent's.
            give_environment: true,
            ..LibcConfig::default()
        },
    )?;
    let run = program.run(args, &Libc::server(program.libc().for_program()));
    let flushed = out.clone().flush();
    let report = run?;
    flushed.map_err(|e| Error::Program(format!("writing the program's output: {e}")))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    //! The loader's service without a GPU: a heap region served by `serve`, called from a host
    //! thread with the device-side calls.

    use super::*;
    use crate::server::serve;
    use ferry_libc::opcode;
    use ferry_rpc::service::status;
    use ferry_rpc::{HeapRegion, PerPort, Single, SpinLimit};

    #[test]
    fn the_loader_serves_libc_and_refuses_other_opcodes() {
        let libc = LibcHost::new(LibcConfig::default());
        let services = Libc::server(libc.for_program());
        let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
        let (result, stats) = serve(region.region(), region.server_locks(), 1, &services, || {
            let client = region.client_with(Single, SpinLimit(1 << 30)).unwrap();
            // The no-op answers its value plus one.
            let noop = ferry_device::host::noop(&client, 41);
            // Another `Libc` call: the clock.
            let clock = ferry_device::host::clock(&client);
            // An opcode the service does not have: an error status, not a hang.
            let mut port = client.open(0x0BAD_C0DE).unwrap();
            port.send_and_recv(|s, _| s.words[0] = 1, |_, _| {})
                .unwrap();
            let unknown = port.status();
            drop(port);
            (noop, clock.is_ok(), unknown)
        })
        .unwrap();
        assert_eq!(result.0, Ok(42));
        assert!(result.1, "the clock call reached LibcHost");
        assert_eq!(result.2, status::UNKNOWN_OPCODE);
        assert_eq!(stats.count(opcode::NOOP), 1);
        assert_eq!(stats.count(opcode::CLOCK), 1, "{stats:?}");
        assert_eq!(stats.count(0x0BAD_C0DE), 1);
        assert_eq!(stats.calls(), 3);
    }
}
