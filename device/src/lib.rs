//! The GPU side of ferry: what a kernel needs to call its host.
//!
//! # What a program calls
//!
//! A GPU program is a `no_std` crate whose `main` every thread runs: [`entry!`]`(main)`, with
//! [`program::Args`] (the command line) and the thread's place in the launch; its host calls are
//! [`host`]'s functions (`print!`/`println!`, [`host::open`] with [`host::mode`],
//! [`host::read_at`], [`host::write_at`], [`host::close`], [`host::malloc`], [`host::getenv`],
//! exit codes), made through [`program::client`] (one type, [`program::Client`], on every
//! target), and a service of one's own through `Name::client(&client)`. [`sync::LastOut`] finds
//! the grid's last thread out. `ferry-ptx build` compiles the crate to PTX and `rpc-gpu-run`
//! (package `ferry-gpu`) runs it; `sim::run_program` (feature `sim`: build these docs with
//! `--features sim` to see it) runs the same program on CPU threads in a test. The README's "GPU
//! programs" is a complete one.
//!
//! # Modules
//!
//! - [`lanes`]: the lanes of a warp (NVIDIA, inline PTX) or wavefront (AMD), behind
//!   [`ferry_rpc::Lanes`]: lane id, active mask, ballot, broadcast, sync;
//! - [`descriptor`]: where the host tells the kernel about the region (the `FERRY_RPC` global the
//!   loader fills before launch), and the client each warp builds from it at kernel start: the
//!   host/device contract, defined once in `ferry_rpc::descriptor` for both sides;
//! - [`host`]: what a GPU program expects from a C library (a no-op, print, files, exit, malloc,
//!   clock, `system`), as the derived service [`host::Libc`] (defined in `ferry-libc`, shared with
//!   the host) and its device-side API;
//! - [`wait`]: how a warp waits for the host (spin, then sleep);
//! - `amdgpu`: the same for AMD GPUs (the descriptor global and a wavefront's client), built
//!   but never run here;
//! - [`program`]: what a program's `main` sees on every target: [`Args`], the thread's place in
//!   the launch, `client()`, a block barrier, and the entry-point macro [`entry!`];
//! - [`sync`]: atomics ordered as written on NVPTX too (its read-modify-writes carry no fence
//!   otherwise), and a grid-wide "last one out";
//! - `nvptx`: the hardware's thread and block indices, the global timer, sleep and the panic
//!   handler, for NVPTX builds only;
//! - `sim` (feature `sim`): a simulated warp of CPU threads whose lanes can diverge, so the same
//!   device code, branches and all, runs on the host against a real server in tests; and
//!   `sim::run_program`, which runs a whole program on CPU threads against the real host
//!   services.
//!
//! On the host the crate builds as an ordinary `no_std` library with one-lane clients
//! ([`ferry_rpc::Single`]); the host's transport writes the same [`descriptor::Descriptor`]
//! (`ferry_rpc::descriptor`) so both sides agree on where the region is.

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
// LLVM's AMDGPU intrinsics (the wavefront lanes) are reached through `link_llvm_intrinsics`.
#![cfg_attr(target_arch = "amdgpu", feature(link_llvm_intrinsics))]
#![cfg_attr(target_arch = "amdgpu", allow(internal_features))]

#[cfg(all(feature = "sim", not(test)))]
extern crate std;

#[cfg(target_arch = "amdgpu")]
pub mod amdgpu;
pub mod host;
pub mod lanes;
#[cfg(target_arch = "nvptx64")]
pub mod nvptx;
pub mod program;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;
pub mod wait;

pub use ferry_rpc;
pub use ferry_rpc::descriptor;
pub use ferry_rpc::descriptor::{Client, Descriptor};
pub use ferry_rpc::service::{Bytes, Text};
pub use ferry_rpc::{wire, RpcOpcodes, Schema};
pub use wait::GpuWait;

#[cfg(any(target_arch = "nvptx64", feature = "sim"))]
pub use program::client;
pub use program::Args;
