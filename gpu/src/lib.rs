//! ferry on GPUs: the region where a kernel and its host meet, the server threads that answer the
//! kernel's calls, and the loader `rpc-gpu-run` that runs a GPU program.
//!
//! # What a program calls
//!
//! - Running a GPU program: the loader, `rpc-gpu-run PROGRAM.ptx [ARGS]` (its `--help` lists
//!   the launch size, server threads, limits), serves the host services (`LibcHost`) and exits
//!   with the program's code.
//! - A host program of one's own: [`cuda`]'s `Program::load` then `run` (the launch, the region
//!   sized for it, the server threads), serving `LibcHost` and services of one's own bound to
//!   handlers (`Tally::server(h).and(Libc::server(host.for_program()))`).
//! - Testing device code without a GPU: `ferry_device::sim` against the same servers.
//!
//! # Modules
//!
//! - [`cuda`]: CUDA through cudarc, loaded at run time. The region lives in mapped pinned host
//!   memory (the GPU reaches it across PCIe, the host in its own memory); the client's lock
//!   bitmap lives in device memory (only warps touch it); the server's in host memory.
//! - [`region`]: [`GpuRegion`]: the region, both lock bitmaps, the port count (by default the
//!   device's resident warps, so no warp waits for another's port) and the descriptor the kernel
//!   reads at start.
//! - [`server`]: server threads that serve a region while a kernel runs and drain it when it ends;
//!   generic over where the region lives, so tests run device code on CPU threads against it.
//!   Derived services bound to handlers (`Tally::server(h).and(Libc::server(host.for_program()))`)
//!   are [`Handler`]s; [`serve_region`] serves them while the caller launches its own kernels.
//! - [`host`]: the host side of the `Libc` service (a no-op, print, files, exit and abort, malloc
//!   from reserved memory, a clock, `system` when turned on): `ferry_libc`'s host server,
//!   re-exported.
//! - [`launch`]: [`Program`]: load a program, run its entry kernel while serving the caller's
//!   services, `malloc` from device memory reserved before launch; [`run_program`], the loader's
//!   core, runs it with `Libc`.
//! - [`copy`]: [`copy::CudaCopy`], the copy engine's path for the host services' copies between
//!   files and device memory (`Libc::ReadToDevice`, `Libc::WriteFromDevice`).
//! - [`hsa`]: AMD's HSA runtime, loaded at run time (`libhsa-runtime64`): fine-grained memory.
//!
//! Nothing of CUDA or HSA is needed to build; without a driver the calls return
//! [`Error::NoDriver`].

#![deny(missing_docs)]

mod batch;
pub mod copy;
pub mod cuda;
pub mod hsa;
pub mod launch;
pub mod region;
pub mod server;

/// The host side of the `Libc` service (`ferry_libc_host`): [`LibcHost`] and its configuration,
/// with the service's definition.
pub use ferry_libc_host as host;

/// The protocol and the service runtime, for a GPU host program that depends on this crate
/// alone: `#[derive(RpcOpcodes)]` and `#[derive(Schema)]` find it here.
pub use ferry_rpc;
pub use ferry_rpc::service::{Bytes, Text};
pub use ferry_rpc::{wire, RpcOpcodes, Schema};

pub use ferry_libc_host::{ExitPolicy, LibcConfig, LibcHost};
pub use launch::{
    bulk_share_for, default_server_threads, run_program, Program, RunConfig, RunReport,
};
pub use region::{GpuRegion, PortCount};
pub use server::{serve, serve_region, serve_with, Handler, ServeStats, ServerPort};

use std::time::Duration;

/// What can go wrong on the host side of a GPU transport.
#[derive(Debug)]
pub enum Error {
    /// No driver (or no device): the library is missing or sees no GPU.
    NoDriver(String),
    /// A driver call failed.
    Cuda {
        /// The driver function.
        call: &'static str,
        /// Its result code.
        code: i32,
        /// The driver's description (and the JIT log, for module loads).
        message: String,
    },
    /// An HSA runtime call failed.
    Hsa {
        /// The runtime function.
        call: &'static str,
        /// Its status code.
        code: u32,
    },
    /// The region could not be laid out.
    Layout(ferry_rpc::LayoutError),
    /// The program is not what the loader expects (no entry kernel, no descriptor).
    Program(String),
    /// The kernel did not finish in time.
    Timeout(Duration),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NoDriver(why) => write!(f, "no GPU driver: {why}"),
            Error::Cuda {
                call,
                code,
                message,
            } => write!(f, "{call} failed ({code}): {message}"),
            Error::Hsa { call, code } => write!(f, "{call} failed (HSA status {code:#x})"),
            Error::Layout(e) => write!(f, "region layout: {e}"),
            Error::Program(why) => write!(f, "program: {why}"),
            Error::Timeout(t) => write!(f, "the kernel did not finish within {t:?}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ferry_rpc::LayoutError> for Error {
    fn from(e: ferry_rpc::LayoutError) -> Self {
        Error::Layout(e)
    }
}
