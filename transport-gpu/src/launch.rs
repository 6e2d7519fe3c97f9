//! Running a program: load it, give it a region, launch its entry kernel, serve it until it ends.

use std::ffi::c_void;
use std::io::Write;
use std::time::Duration;

use crate::cuda::Cuda;
use crate::region::{GpuRegion, PortCount};
use crate::server::{serve, ServeStats};
use crate::services::{ExitPolicy, HostServices};
use crate::Error;

/// The documented entry kernel: `_start(argc: u32, argv: *const *const u8, ret: *mut i32)`.
pub const ENTRY: &str = "_start";

/// How to run a program.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Blocks in the grid.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// Ports of the region.
    pub ports: PortCount,
    /// Server threads.
    pub server_threads: u32,
    /// Register cap for the JIT (`None`: the compiler's choice).
    pub max_registers: Option<u32>,
    /// How long the kernel may run.
    pub timeout: Duration,
    /// What the program's exit call does.
    pub exit: ExitPolicy,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            blocks: 1,
            threads: 32,
            ports: PortCount::default(),
            server_threads: 1,
            max_registers: None,
            timeout: Duration::from_secs(600),
            exit: ExitPolicy::Process,
        }
    }
}

/// How a run went.
#[derive(Debug)]
pub struct RunReport {
    /// The program's exit code: an `exit` call's code, else the OR of every thread's return.
    pub code: i32,
    /// Server counts.
    pub stats: ServeStats,
    /// Calls served by opcode: `[unknown, no-op, print, exit]`.
    pub calls: [u64; 4],
    /// Ports of the region.
    pub ports: u32,
    /// Kernel time (launch to end), as the host saw it.
    pub elapsed: Duration,
}

/// Runs the PTX program `ptx` with `args` (the program's name first), printing to `out`.
pub fn run_program<O: Write + Send>(
    cuda: &Cuda,
    ptx: &[u8],
    args: &[String],
    config: &RunConfig,
    out: O,
) -> Result<RunReport, Error> {
    let module = cuda.load_module(ptx, config.max_registers)?;
    let entry = module.function(ENTRY).map_err(|_| {
        Error::Program(format!(
            "no entry kernel `{ENTRY}(argc, argv, ret)`: define it with `device::entry!`"
        ))
    })?;
    let region = GpuRegion::new(cuda, config.ports)?;
    region.install(cuda, &module)?;

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
    let ret = cuda.alloc_device(4)?;

    let services = HostServices::new(out, config.exit);
    let mut argc = args.len() as u32;
    let mut argv = base + pad as u64;
    let mut ret_ptr = ret.ptr();
    let (ran, stats) = serve(
        region.region(),
        region.server_locks(),
        config.server_threads,
        &services,
        || -> Result<Duration, Error> {
            let mut params: [*mut c_void; 3] = [
                (&raw mut argc).cast(),
                (&raw mut argv).cast(),
                (&raw mut ret_ptr).cast(),
            ];
            // SAFETY: `_start` takes (u32, u64 pointer, u64 pointer) — the entry's documented
            // signature; argv and ret are device allocations that outlive the wait below, and the
            // region the descriptor names lives until `region` drops, after the kernel ends.
            unsafe { entry.launch(config.blocks, config.threads, &mut params)? };
            cuda.wait(config.timeout)
        },
    )?;
    let elapsed = ran?;
    let mut code = [0u8; 4];
    cuda.copy_from_device(&mut code, ret.ptr())?;
    let code = services.exit_code().unwrap_or(i32::from_le_bytes(code));
    Ok(RunReport {
        code,
        stats,
        calls: services.counts(),
        ports: region.layout().ports(),
        elapsed,
    })
}
