//! Running a program: load it, give it a region and a heap, launch its entry kernel, serve it
//! until it ends.
//!
//! The loader serves two services on one region, routed by opcode: the minimal calls of
//! `device::services` ([`NOOP`], [`PRINT`], [`EXIT`]: small class opcodes) go to
//! [`HostServices`], everything else (the `device::host::Libc` calls, whose hash opcodes have the
//! top bit set, the protocol's handshake, unknown opcodes) to [`LibcHost`]'s generated dispatch,
//! which answers unknown opcodes itself. Both print to the same output, under one lock.
//!
//! `malloc` is served from device memory reserved before launch ([`RunConfig::heap`] bytes): the
//! host only hands out addresses inside it. Growing device memory while a kernel runs can
//! deadlock on NVIDIA (an allocation may wait for the running kernel), so nothing is allocated
//! after launch.

use std::ffi::c_void;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use device::services::{EXIT, NOOP, PRINT};
use rpc_core::service::Service;

use crate::cuda::Cuda;
use crate::host::{Arena, CallCounts, Libc, LibcConfig, LibcHost};
use crate::region::{GpuRegion, PortCount};
use crate::server::{serve, Handler, ServeStats, ServerPort};
use crate::services::{ExitPolicy, HostServices};
use crate::Error;

/// Whether `opcode` is one of the minimal services' (served by [`HostServices`]).
const fn is_minimal(opcode: u32) -> bool {
    matches!(opcode, NOOP | PRINT | EXIT)
}

// No `Libc` call may take a minimal opcode: the router would send it to the wrong service.
const _: () = {
    let ops = <Libc as Service>::OPCODES;
    let mut i = 0;
    while i < ops.len() {
        assert!(
            !is_minimal(ops[i]),
            "a Libc opcode collides with a minimal one"
        );
        i += 1;
    }
};

/// The default heap `malloc` serves from: 64 MiB of device memory.
pub const DEFAULT_HEAP: usize = 64 << 20;

/// The default stack per GPU thread: 8 KiB.
pub const DEFAULT_STACK: usize = 8 << 10;

/// One output shared by both services, written under one lock.
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

/// The loader's handler: routes each request by opcode (see the module docs).
struct Router<O: Write + Send> {
    minimal: HostServices<SharedOut<O>>,
    libc: LibcHost,
}

impl<O: Write + Send> Handler for Router<O> {
    fn handle(&self, port: &mut ServerPort<'_, '_>) {
        if is_minimal(port.opcode()) {
            self.minimal.handle(port);
        } else {
            self.libc.handle(port);
        }
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
    /// Bytes of device memory reserved before launch for `malloc` (0: none, every `malloc`
    /// fails with out of memory).
    pub heap: usize,
    /// Stack bytes per GPU thread (`None`: the driver's default, 1 KiB, which formatting with
    /// buffers on the stack, as `println!` and the file calls do, can overflow).
    pub stack: Option<usize>,
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
            heap: DEFAULT_HEAP,
            stack: Some(DEFAULT_STACK),
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
    /// Minimal calls served by opcode: `[unknown (always 0: the loader routes unknown opcodes to
    /// the Libc dispatch), no-op, print, exit]`.
    pub calls: [u64; 4],
    /// `Libc` calls served (one per message), by `Libc::OPCODES` index, then unknown opcodes and
    /// handshakes.
    pub libc_calls: CallCounts,
    /// Ports of the region.
    pub ports: u32,
    /// Kernel time (launch to end), as the host saw it.
    pub elapsed: Duration,
}

/// Runs the PTX program `ptx` with `args` (the program's name first), printing to `out` (both
/// services' standard output; the `Libc` service's standard error is this process's).
pub fn run_program<O: Write + Send + 'static>(
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
    if let Some(bytes) = config.stack {
        cuda.set_stack_size(bytes)?;
    }
    let mut region = GpuRegion::new(cuda, config.ports)?;
    // Each warp keeps its port between calls when every warp of the launch has one.
    region.keep_ports_for(config.blocks as u64 * config.threads.div_ceil(32) as u64);
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

    // The heap, reserved before launch and freed after the kernel ended (`heap` drops last).
    let heap = match config.heap {
        0 => None,
        bytes => Some(cuda.alloc_device(bytes)?),
    };
    let out = SharedOut(Arc::new(Mutex::new(out)));
    let router = Router {
        minimal: HostServices::new(out.clone(), config.exit),
        libc: LibcHost::new(LibcConfig {
            stdout: Box::new(out.clone()),
            heap: heap.as_ref().map(|h| Arena {
                base: h.ptr(),
                size: h.len() as u64,
            }),
            exit: config.exit,
            // The program is the region's only client: the whole file table is its quota.
            max_files_per_client: usize::MAX,
            ..LibcConfig::default()
        }),
    };
    let mut argc = args.len() as u32;
    let mut argv = base + pad as u64;
    let mut ret_ptr = ret.ptr();
    let (ran, stats) = serve(
        region.region(),
        region.server_locks(),
        config.server_threads,
        &router,
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
    let flushed = out.clone().flush();
    let elapsed = ran?;
    let mut code = [0u8; 4];
    cuda.copy_from_device(&mut code, ret.ptr())?;
    let code = router
        .minimal
        .exit_code()
        .or(router.libc.exit_code())
        // An abort the policy recorded: what a shell reports for SIGABRT.
        .or(router.libc.aborted().then_some(134))
        .unwrap_or(i32::from_le_bytes(code));
    flushed.map_err(|e| Error::Program(format!("writing the program's output: {e}")))?;
    drop(heap);
    Ok(RunReport {
        code,
        stats,
        calls: router.minimal.counts(),
        libc_calls: router.libc.counts(),
        ports: region.layout().ports(),
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    //! The router without a GPU: a heap region served by `serve` with the loader's router, called
    //! from a host thread with both services' device-side calls.

    use super::*;
    use rpc_core::service::status;
    use rpc_core::{HeapRegion, PerPort, Single, SpinLimit};

    #[test]
    fn requests_go_to_the_service_that_owns_their_opcode() {
        let out = SharedOut(Arc::new(Mutex::new(Vec::<u8>::new())));
        let router = Router {
            minimal: HostServices::new(out.clone(), ExitPolicy::Record),
            libc: LibcHost::new(LibcConfig::default()),
        };
        let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
        let (result, _) = serve(region.region(), region.server_locks(), 1, &router, || {
            let client = region.client_with(Single, SpinLimit(1 << 30)).unwrap();
            // A minimal call: the no-op answers its value plus one.
            let noop = device::services::noop(&client, 41);
            // A `Libc` call: the clock.
            let clock = device::host::clock(&client);
            // An opcode neither service has: an error status, not a hang.
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
        assert_eq!(
            router.minimal.counts()[NOOP as usize],
            1,
            "one no-op served"
        );
        let libc = router.libc.counts();
        assert_eq!(
            libc.iter().sum::<u64>(),
            2,
            "the clock and the unknown opcode: {libc:?}"
        );
        assert_eq!(
            *libc.last().unwrap(),
            1,
            "one unknown opcode counted by LibcHost"
        );
    }
}
