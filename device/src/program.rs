//! What a GPU program's `main` sees, on every target: its [`Args`], the calling thread's place in
//! the launch, and `client()`, its handle for calling the host (on NVPTX, and on the host with
//! feature `sim`).
//!
//! A program is written once against this module and runs two ways:
//! - **on the GPU**, built for `nvptx64-nvidia-cuda` and run by the loader `rpc-gpu-run`: the
//!   [`entry!`](crate::entry) macro wraps `main` in the entry kernel, the indices are the
//!   hardware's, and `client()` is the warp's;
//! - **on the CPU**, in the program crate's own tests (feature `sim`):
//!   `sim::run_program` runs `main` on one host thread per GPU thread
//!   of a launch you choose, against the real host services (`ferry_libc_host::LibcHost`); each
//!   thread's indices are those it would have on the GPU, and its `client()` calls alone (a GPU
//!   thread's calls are its own either way: the warp only packs them together).
//!
//! ```
//! use ferry_device::host::Printer;
//! use ferry_device::program::{self, Args};
//!
//! ferry_device::entry!(main);
//!
//! /// Prints a line from every thread; thread 0 names the file it was given.
//! pub fn main(args: Args) -> i32 {
//!     let client = program::client();
//!     let out = Printer::new(&client);
//!     let me = program::global_thread_id();
//!     let _ = ferry_device::println!(&out, "hello from thread {me}");
//!     if me == 0 {
//!         let name = args.get_str(1).unwrap_or("(none)");
//!         let _ = ferry_device::println!(&out, "the file: {name}");
//!     }
//!     0
//! }
//!
//! // On the CPU (the program crate's test): 2 blocks of 4 threads against the host services.
//! # #[cfg(feature = "sim")] {
//! let run = ferry_device::sim::run_program(main, &["hello", "data.txt"], 2, 4).unwrap();
//! assert_eq!(run.code, 0);
//! assert!(run.stdout.contains("hello from thread 7\n"));
//! assert!(run.stdout.contains("the file: data.txt\n"));
//! # }
//! ```
//!
//! Outside both (a host build calling `main` directly) a thread is thread 0 of a launch of one,
//! and `client()` panics: there is no host to call.
//!
//! # The exit code
//!
//! The rule, the same on the GPU (`rpc-gpu-run`, `ferry_gpu::Program::run`) and on the CPU
//! (`sim::run_program`):
//! - if a thread called [`host::exit`](crate::host::exit), the code of the first such call the
//!   host served (134 if a thread called [`host::abort`](crate::host::abort) first);
//! - else the OR of every thread's return value from `main` (as LLVM libc's GPU start code
//!   makes it): 0 only if every thread returned 0, so a program none of whose failures calls
//!   `exit` still cannot end with 0 while one of its threads failed. Codes that are bit flags
//!   (one bit per kind of failure) keep their meaning through the OR.

/// The program's arguments, as the loader passes them (the program's name first).
#[derive(Clone, Copy, Debug)]
pub struct Args {
    argc: u32,
    argv: *const *const u8,
}

impl Args {
    /// Arguments from the entry kernel's parameters.
    ///
    /// # Safety
    ///
    /// `argv` must point to `argc` pointers to NUL-terminated strings, valid while the `Args`
    /// (and anything borrowed from it) is used.
    pub unsafe fn new(argc: u32, argv: *const *const u8) -> Args {
        Args { argc, argv }
    }

    /// How many arguments (the program's name first).
    pub fn len(&self) -> u32 {
        self.argc
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.argc == 0
    }

    /// Argument `i`'s bytes without its NUL, if there is one.
    pub fn get(&self, i: u32) -> Option<&[u8]> {
        if i >= self.argc {
            return None;
        }
        // SAFETY: `i < argc` and `Args::new`'s contract makes `argv[i]` a valid string pointer.
        let p = unsafe { *self.argv.add(i as usize) };
        let mut n = 0;
        // SAFETY: the string is NUL-terminated (contract), so every byte up to the NUL is valid.
        while unsafe { *p.add(n) } != 0 {
            n += 1;
        }
        // SAFETY: `p .. p + n` are the string's bytes, valid as long as `self` (contract).
        Some(unsafe { core::slice::from_raw_parts(p, n) })
    }

    /// Argument `i` as text, if there is one and it is UTF-8 (the loaders pass only UTF-8
    /// arguments: `rpc-gpu-run` and `sim::run_program` take them as Rust strings). One function
    /// on a GPU: the UTF-8 check is emitted once, not at each argument read.
    #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
    pub fn get_str(&self, i: u32) -> Option<&str> {
        core::str::from_utf8(self.get(i)?).ok()
    }

    /// The arguments as text, in order (one that is not UTF-8 as an empty string).
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.argc).map(|i| self.get_str(i).unwrap_or(""))
    }

    /// Argument `i` parsed as a decimal `u32`, if it is one.
    pub fn get_u32(&self, i: u32) -> Option<u32> {
        self.get_str(i)?.parse().ok()
    }
}

/// Defines the program's entry: on a GPU, the entry kernel `_start(argc, argv, ret)` around
/// `main: fn(Args) -> i32` (the crate needs `#![feature(abi_ptx)]` there); on other targets,
/// nothing but a check of `main`'s type (`sim::run_program` calls `main` itself).
///
/// Every GPU thread runs `main`; every thread that returns non-zero ORs its value into the
/// kernel's `ret`, which the loader makes the exit code unless a thread called `exit` (the rule:
/// [the module docs](crate::program#the-exit-code)). The program ends when its threads do, and
/// every call they made is answered first, so no output is lost.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        /// The program's entry kernel, launched by the loader.
        ///
        /// # Safety
        ///
        /// Launched by a host that set up the descriptor, with `argv` holding `argc` strings and
        /// `ret` a valid `i32` in device memory.
        #[cfg(target_arch = "nvptx64")]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn _start(argc: u32, argv: *const *const u8, ret: *mut i32) {
            // SAFETY: the loader passes `argc` valid strings in `argv` (the kernel's contract).
            let args = unsafe { $crate::program::Args::new(argc, argv) };
            let code: i32 = $main(args);
            if code != 0 {
                // SAFETY: `ret` is a valid, aligned `i32` in device memory the loader zeroed
                // before launch (the kernel's contract), accessed only atomically while the
                // kernel runs.
                unsafe { ::core::sync::atomic::AtomicI32::from_ptr(ret) }
                    .fetch_or(code, ::core::sync::atomic::Ordering::Relaxed);
            }
        }

        #[cfg(not(target_arch = "nvptx64"))]
        const _: fn($crate::program::Args) -> i32 = $main;
    };
}

/// Where the calling thread is in the launch (on the CPU: as `sim::run_program` set it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The thread's index in its block.
    pub thread: u32,
    /// The block's index in the grid.
    pub block: u32,
    /// Threads per block.
    pub threads: u32,
    /// Blocks in the grid.
    pub blocks: u32,
}

impl Place {
    /// Thread 0 of a launch of one thread.
    pub const ALONE: Place = Place {
        thread: 0,
        block: 0,
        threads: 1,
        blocks: 1,
    };
}

#[cfg(all(not(target_arch = "nvptx64"), feature = "sim"))]
pub(crate) mod cpu;

#[cfg(target_arch = "nvptx64")]
fn place() -> Place {
    use crate::nvptx;
    Place {
        thread: nvptx::thread_idx(),
        block: nvptx::block_idx(),
        threads: nvptx::block_dim(),
        blocks: nvptx::grid_dim(),
    }
}

#[cfg(all(not(target_arch = "nvptx64"), feature = "sim"))]
fn place() -> Place {
    cpu::place()
}

#[cfg(all(not(target_arch = "nvptx64"), not(feature = "sim")))]
fn place() -> Place {
    Place::ALONE
}

/// This thread's index in its block.
#[inline(always)]
pub fn thread_idx() -> u32 {
    place().thread
}

/// This block's index in the grid.
#[inline(always)]
pub fn block_idx() -> u32 {
    place().block
}

/// Threads per block.
#[inline(always)]
pub fn block_dim() -> u32 {
    place().threads
}

/// Blocks in the grid.
#[inline(always)]
pub fn grid_dim() -> u32 {
    place().blocks
}

/// This thread's index in the (one-dimensional) grid.
#[inline(always)]
pub fn global_thread_id() -> u32 {
    let p = place();
    p.block * p.threads + p.thread
}

/// Threads in the whole launch.
#[inline(always)]
pub fn global_threads() -> u32 {
    let p = place();
    p.blocks * p.threads
}

/// This warp's index in the grid (warps of 32 threads, each block's counted in order).
#[inline(always)]
pub fn global_warp_id() -> u32 {
    let p = place();
    p.block * p.threads.div_ceil(32) + p.thread / 32
}

/// Waits until every thread of this block has reached this call (`bar.sync 0` on a GPU; on the
/// CPU, a barrier of the block's threads). Every thread of the block must call it, the same
/// number of times: one that returns without calling leaves the others waiting (on a GPU, the
/// behaviour is undefined).
#[inline(always)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier of the block's threads; every thread reaches it (the caller's contract).
    unsafe {
        core::arch::asm!("bar.sync 0;", options(nostack))
    };
    #[cfg(all(not(target_arch = "nvptx64"), feature = "sim"))]
    cpu::block_barrier();
}

/// The type of [`client()`]'s handle, one name on every target (a warp's client on NVPTX, a CPU
/// thread's under `sim::run_program`): a program's own function that calls the host takes
/// `&program::Client` and passes it to the `host` functions.
///
/// ```
/// use ferry_device::host::{self, Handle};
/// use ferry_device::program;
///
/// /// The first byte of `file`, read by every thread that calls it.
/// fn first_byte(client: &program::Client, file: Handle) -> Option<u8> {
///     let mut b = [0u8; 1];
///     match host::read_at(client, file, 0, &mut b) {
///         Ok(1) => Some(b[0]),
///         _ => None,
///     }
/// }
/// ```
pub type Client = TargetClient;

#[cfg(target_arch = "nvptx64")]
type TargetClient = crate::Client<'static, crate::lanes::Warp, crate::GpuWait>;
#[cfg(all(not(target_arch = "nvptx64"), feature = "sim"))]
type TargetClient = crate::Client<'static, ferry_rpc::Single, cpu::ProgramWait>;
#[cfg(all(not(target_arch = "nvptx64"), not(feature = "sim")))]
type TargetClient = crate::Client<'static, ferry_rpc::Single, crate::GpuWait>;

/// This thread's handle for calling the host (the warp's on a GPU, the thread's own on the
/// CPU). Call it once, convergently, at the start of `main`.
///
/// On a GPU, traps if no host set the program up; on the CPU, panics outside
/// `sim::run_program`.
///
/// On NVPTX the warp's search for a port starts at its own
/// ([`home_port`](crate::descriptor::home_port) of its global warp index): with as many ports as
/// resident warps, no warp waits for another's port, and the warps of any launch are spread over
/// every server thread's ports.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn client() -> Client {
    use crate::nvptx;
    // SAFETY: the host writes the descriptor before launch and never while the kernel runs.
    let desc = unsafe { core::ptr::read(&raw const nvptx::FERRY_RPC) };
    // SAFETY: a set-up descriptor (checked by `client`) comes from a host that keeps the region
    // and lock memory alive and protocol-only for the whole launch (the transport's contract).
    match unsafe { desc.client(crate::lanes::Warp, crate::GpuWait::for_descriptor(&desc)) } {
        Ok(c) => {
            let ports = c.region().layout().ports();
            c.with_cursor(crate::descriptor::home_port(nvptx::global_warp_id(), ports))
        }
        Err(_) => nvptx::trap(),
    }
}

/// This thread's handle for calling the host (the warp's on a GPU, the thread's own on the
/// CPU). Call it once, convergently, at the start of `main`.
///
/// On a GPU, traps if no host set the program up; on the CPU, panics outside
/// `sim::run_program`.
#[cfg(all(not(target_arch = "nvptx64"), feature = "sim"))]
pub fn client() -> Client {
    cpu::client()
}

/// This thread's handle for calling the host, in a host build without feature `sim`: there is
/// no host to call, so it panics (saying so). A program's code still compiles for the host this
/// way (a library's own tests, `cargo doc`); run it with feature `sim` (`sim::run_program`) to
/// serve its calls.
///
/// # Panics
///
/// Always.
#[cfg(all(not(target_arch = "nvptx64"), not(feature = "sim")))]
pub fn client() -> Client {
    panic!(
        "ferry_device::program::client(): no host serves this build's calls \
         (build for nvptx64 and run with rpc-gpu-run, or enable feature `sim` and use \
         sim::run_program)"
    )
}

/// The OR of every thread's code, sent to the host with one [`host::exit`](crate::host::exit)
/// call by the last thread to finish. The exit code is the same as without it (the OR of the
/// returns: [the rule](crate::program#the-exit-code)); what it adds is the exit call, for a host
/// that acts on it (`ExitPolicy::Process` ends its process there). Put one in a `static` and end
/// `main` with `return CODE.finish(&client, code)`. On the CPU (`sim::run_program`) it starts
/// from zero again for the next run.
///
/// ```ignore
/// static CODE: program::ExitOr = program::ExitOr::new();
///
/// fn main(args: Args) -> i32 {
///     let client = program::client();
///     let failed = if check(&client) { 0 } else { 4 };
///     CODE.finish(&client, failed)
/// }
/// ```
#[derive(Debug, Default)]
pub struct ExitOr {
    bits: core::sync::atomic::AtomicU32,
    done: crate::sync::LastOut,
}

impl ExitOr {
    /// No code yet.
    pub const fn new() -> ExitOr {
        ExitOr {
            bits: core::sync::atomic::AtomicU32::new(0),
            done: crate::sync::LastOut::new(),
        }
    }

    /// ORs this thread's `code` into the program's; the last of the launch's threads to call it
    /// calls `exit` with the OR if any thread's code was not 0. Returns `code`, for `main` to
    /// return. Every thread of the launch must call it once.
    pub fn finish<L: ferry_rpc::Lanes, M: ferry_rpc::Mailbox, W: ferry_rpc::Wait>(
        &self,
        client: &crate::host::HostClient<'_, L, M, W>,
        code: i32,
    ) -> i32 {
        self.bits
            .fetch_or(code as u32, core::sync::atomic::Ordering::Relaxed);
        // `arrive` orders every thread's OR before the last thread's read below.
        if self.done.arrive(global_threads()) {
            let all = self.bits.swap(0, core::sync::atomic::Ordering::Relaxed) as i32;
            self.done.reset();
            if all != 0 {
                let _ = crate::host::exit(client, all);
            }
        }
        code
    }
}

#[cfg(all(test, not(feature = "sim"), not(target_arch = "nvptx64")))]
mod no_host {
    #[test]
    #[should_panic(expected = "no host serves this build's calls")]
    fn client_without_a_host_panics_saying_so() {
        let _ = super::client();
    }
}
