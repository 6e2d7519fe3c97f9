//! The ferry mailbox protocol: remote calls across memory two sides share but no runtime.
//!
//! # What a program calls
//!
//! - A service: a plain enum with `#[derive(RpcOpcodes)]` (feature `derive`; the guide is in
//!   `ferry-derive`'s docs): one variant per call. The derive generates `Name::client(&site)`
//!   (a method per call, on any transport's call site: a client [`Process`] of a region in
//!   process or on a GPU warp, `ferry_shm::ShmClient` between processes),
//!   `Name::async_client(&site)` (the same calls as `async fn`s, where a transport can wait
//!   without a thread), the handler traits `NameServer` and `NameAsyncServer`, and
//!   `Name::server(handler)` / `Name::async_server(handler, spawn)`, what a transport's server
//!   serves ([`service`]).
//! - A type of your own that crosses: [`wire`](macro@wire) on it.
//! - Errors: a call returns [`service::Error`] (the handler's own error, the server's refusal,
//!   or the transport's failure).
//! - Regions and raw ports, for a transport of your own or a call written by hand: below.
//!
//! # The protocol
//!
//! A region of shared memory is split into *ports*. Each port is a *packet* — a header and one
//! 64-byte *slot* per *lane* — whose ownership passes between a client and a server by flipping
//! one mailbox bit per side (`mailbox`). Threads of one side race for ports through a private
//! lock bitmap (`process`); an open [`Port`] moves the packet with `send`/`recv` and streams any
//! number of bytes with `send_n`/`recv_n` (`stream`). A GPU warp opens one port for all its lanes
//! (`lanes`). This crate is `no_std` and needs no allocator; with the `alloc` feature it adds
//! [`HeapRegion`] for regions in the heap.
//!
//! ```
//! use ferry_rpc::HeapRegion;
//!
//! let region = HeapRegion::<ferry_rpc::PerPort>::new(32, 1).unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         // The server: wait for one request, add one, reply.
//!         let server = region.server();
//!         let mut port = server.open(()).unwrap();
//!         assert_eq!(port.opcode(), 7);
//!         port.recv_and_send(|slot, _lane| slot.words[0] += 1).unwrap();
//!     });
//!     let client = region.client();
//!     let mut port = client.open(7).unwrap();
//!     let mut reply = 0;
//!     port.send_and_recv(|slot, _| slot.words[0] = 41, |slot, _| reply = slot.words[0]).unwrap();
//!     assert_eq!(reply, 42);
//! });
//! ```
//!
//! Modules, each owning one mechanism:
//! - `layout`: where everything lies in a region;
//! - `mailbox`: the ownership bits, and why one word per port;
//! - `lanes`: who executes an operation together;
//! - `process`: one side's handle, the locks, the port search;
//! - `port`: the open port and the handoff;
//! - `stream`: streams of any size;
//! - `wait`: what to do while the other side holds the packet;
//! - `sync`: the atomics facade (swapped for loom under `--cfg loom`).
//!
//! How one typed call crosses, hop by hop, on each transport: [`life_of_a_call`].

#![cfg_attr(not(test), no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(all(feature = "std", not(test)))]
extern crate std;

// Lets code derived inside this crate (its tests and doctests) name it as users do.
extern crate self as ferry_rpc;

// (The loom models build no GPU client: a region there is made from the models' own memory.)
#[cfg(not(loom))]
pub mod descriptor;
mod error;
pub mod far;
#[cfg(feature = "alloc")]
mod heap;
pub mod lanes;
pub mod layout;
pub mod mailbox;
pub mod port;
pub mod process;
pub mod status;
pub mod stream;
pub mod sync;
pub mod wait;
pub mod words;

pub use error::Error;
#[cfg(feature = "alloc")]
pub use heap::HeapRegion;
pub use lanes::{Lanes, Single};
pub use layout::{HeaderWord, Layout, LayoutError, Slot, MAX_BULK_SHARE};
pub use mailbox::{Mailbox, MailboxKind, Packed, PerPort};
pub use port::Port;
pub use process::{Client, ClientProcess, Held, Process, Region, Server, ServerProcess, Side};
pub use stream::{SliceSink, StreamSink};
pub use wait::{Spin, SpinLimit, Stalled, Wait};

pub mod service;

#[doc = include_str!("../docs/life-of-a-call.md")]
pub mod life_of_a_call {}

/// `#[wire]` (with the `derive` feature): a type of one's own made ready to cross as a call's
/// fixed argument, reply or error (zerocopy's derives through this crate's `zerocopy`, a `repr`,
/// `Schema`).
#[cfg(feature = "derive")]
pub use ferry_derive::wire;
#[cfg(feature = "derive")]
pub use ferry_derive::RpcOpcodes;
/// `#[derive(Schema)]` (with the `derive` feature) and the trait it implements: the structure of
/// a type that crosses in a service call, hashed into the service's fingerprint.
#[cfg(feature = "derive")]
pub use ferry_derive::Schema;
#[doc(hidden)]
pub use service::__private;
pub use service::Schema;
/// The crate whose traits an argument, reply or error type derives to cross the wire
/// (`TryFromBytes`, `IntoBytes`, `Immutable`, `KnownLayout`): `#[wire]` derives them through this
/// path, so a crate that does not depend on zerocopy itself needs nothing more. Deriving them by
/// hand through it takes `#[zerocopy(crate = "ferry_shm::ferry_rpc::zerocopy")]` on the type (or
/// the path through whichever ferry crate it depends on).
pub use zerocopy;

/// Expands to its input where this crate has `alloc` (the generated clients' methods that return
/// `String` or `Vec<u8>`), to nothing otherwise. Not a stable API: used by the derive.
#[cfg(feature = "alloc")]
#[doc(hidden)]
#[macro_export]
macro_rules! __rpc_if_alloc {
    ($($item:tt)*) => { $($item)* };
}

/// Expands to its input where this crate has `alloc`, to nothing otherwise (here: nothing).
#[cfg(not(feature = "alloc"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __rpc_if_alloc {
    ($($item:tt)*) => {};
}

/// Expands to its input where this crate has `std` (the generated async server), to nothing
/// otherwise. Not a stable API: used by the derive.
#[cfg(feature = "std")]
#[doc(hidden)]
#[macro_export]
macro_rules! __rpc_if_std {
    ($($item:tt)*) => { $($item)* };
}

/// Expands to its input where this crate has `std`, to nothing otherwise (here: nothing).
#[cfg(not(feature = "std"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __rpc_if_std {
    ($($item:tt)*) => {};
}

/// Whether every byte pattern is a value of each of the (concrete) types given: `true` only where
/// each is zerocopy's `FromBytes` (see `__private::Infallible`). What a derived server asks of a
/// call's fixed arguments.
#[doc(hidden)]
#[macro_export]
macro_rules! __rpc_infallible {
    ($($ty:ty),* $(,)?) => {{
        #[allow(unused_imports)]
        use $crate::__private::{IsFallible as _, IsInfallible as _};
        true $( && (&$crate::__private::Infallible::<$ty>::new()).infallible() )*
    }};
}

/// Diagnostic stamps of a word pass, for a host program built with `--cfg ferry_trace` on x86-64
/// (`ferry-gpu-bench --word-timing` prints them; BENCHMARKS.md, command B): the time stamp
/// counter at each step of the pass that served a call (points 0 to 9, as `words.rs` stamps
/// them; point 8 says whether a request word was missing at the first look). A server thread
/// writes them; one thread reads them between its passes. Not built otherwise.
#[cfg(all(ferry_trace, target_arch = "x86_64"))]
#[doc(hidden)]
pub mod trace {
    use core::sync::atomic::{AtomicU64, Ordering};
    /// The time stamp counter at each point.
    pub static STAMPS: [AtomicU64; 10] = [const { AtomicU64::new(0) }; 10];
    /// Stamps point `k`.
    #[inline(always)]
    pub fn stamp(k: usize) {
        // SAFETY: `rdtsc` reads a counter; it has no preconditions.
        STAMPS[k].store(unsafe { core::arch::x86_64::_rdtsc() }, Ordering::Relaxed);
    }
    /// Sets point `k` to `v`.
    pub fn set(k: usize, v: u64) {
        STAMPS[k].store(v, Ordering::Relaxed);
    }
}
#[cfg(all(ferry_trace, target_arch = "x86_64"))]
macro_rules! trace_stamp {
    ($k:expr) => {
        crate::trace::stamp($k)
    };
}
#[cfg(not(all(ferry_trace, target_arch = "x86_64")))]
macro_rules! trace_stamp {
    ($k:expr) => {};
}
pub(crate) use trace_stamp;
