//! `#[derive(RpcOpcodes)]`: typed services over the ferry mailbox protocol.
//!
//! A service is an enum with one variant per call. Attributes name what crosses each way; the
//! derive generates the opcodes, a client extension trait with one typed method per call, a server
//! trait with one handler per call plus the dispatch that serves it, and the schema fingerprint.
//! Use it through `rpc-core` (feature `derive`, `rpc_core::RpcOpcodes`) or directly.
//!
//! # A whole service
//!
//! ```
//! use rpc_core::service::{CallError, Service};
//! use rpc_core::{HeapRegion, Single, SpinLimit};
//! use rpc_derive::RpcOpcodes;
//! use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
//! use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
//!
//! /// A fixed-size request: zerocopy, at most one 64-byte slot.
//! #[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
//! #[repr(C)]
//! pub struct Add {
//!     pub counter: u32,
//!     pub delta: u32,
//! }
//!
//! #[derive(RpcOpcodes)]
//! pub enum Counter {
//!     /// Adds to a counter; returns its new value.
//!     #[rpc(request = Add, response = u64)]
//!     Add,
//!     /// Counts the bytes of a message of any length.
//!     #[rpc(request = [u8], response = u64, limit = 4096)]
//!     Measure,
//!     /// A counter's name, as text of any length.
//!     #[rpc(request = u32, response = str)]
//!     Name,
//!     /// Resets a counter; the client does not wait.
//!     #[rpc(request = u32, oneway)]
//!     Reset,
//! }
//!
//! #[derive(Default)]
//! struct Counters([AtomicU64; 2]);
//!
//! impl CounterServer for Counters {
//!     fn add(&self, r: Add) -> u64 {
//!         self.0[r.counter as usize % 2].fetch_add(r.delta as u64, Ordering::Relaxed) + r.delta as u64
//!     }
//!     fn measure(&self, message: &[u8]) -> u64 {
//!         message.len() as u64
//!     }
//!     fn name(&self, counter: u32) -> impl AsRef<str> {
//!         format!("counter number {counter}")
//!     }
//!     fn reset(&self, counter: u32) {
//!         self.0[counter as usize % 2].store(0, Ordering::Relaxed);
//!     }
//! }
//!
//! let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
//! let counters = Counters::default();
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         // The server: serve calls until told to stop. Streamed requests land in `buffers`.
//!         let server = region.server();
//!         let mut buffers = Vec::new();
//!         while !stop.load(Ordering::Relaxed) {
//!             if counters.serve_one(&server, &mut buffers).unwrap().is_none() {
//!                 std::thread::yield_now();
//!             }
//!         }
//!     });
//!     // A client that gives up (`Error::Stalled`) rather than spin forever on a dead server.
//!     let client = region.client_with(Single, SpinLimit(u32::MAX)).unwrap();
//!     // Compare schemas first (transports do this when the two sides connect).
//!     rpc_core::service::handshake::<Counter, _, _, _>(&client).unwrap();
//!     assert_eq!(client.add(Add { counter: 1, delta: 5 }).unwrap(), 5);
//!     assert_eq!(client.add(Add { counter: 1, delta: 2 }).unwrap(), 7);
//!     assert_eq!(client.measure(&[0; 1000]).unwrap(), 1000);
//!     assert_eq!(client.measure(&[0; 5000]), Err(CallError::Rejected));
//!     let mut buf = [0u8; 64];
//!     assert_eq!(client.name(1, &mut buf).unwrap(), "counter number 1");
//!     client.reset(1).unwrap();
//!     stop.store(true, Ordering::Relaxed);
//! });
//! assert_ne!(Counter::FINGERPRINT, 0);
//! assert_eq!(<Counter as Service>::OPCODES.len(), 4);
//! ```
//!
//! # What crosses
//!
//! Each variant is a unit variant with `#[rpc(...)]`:
//!
//! | setting | meaning |
//! |---|---|
//! | `request = T` | the request is a `T`: zerocopy (`FromBytes + IntoBytes + Immutable + KnownLayout`), at most 64 bytes, in one slot; `()` for none |
//! | `request = [u8]` / `request = str` | bytes or UTF-8 text of any length, streamed (`send_n`) |
//! | `response = T`, `[u8]`, `str` | the same for the response |
//! | `oneway` | no response: the client returns once the request is sent, without waiting |
//! | `opcode = N` | this call's opcode, instead of the scheme's |
//! | `limit = N` | the most bytes one lane may stream in a request (default 64 KiB) |
//!
//! On the enum: `#[rpc(service = "name")]` renames the service (hashed into opcodes and the
//! fingerprint); `#[rpc(class = N)]` switches to the class scheme.
//!
//! # Opcodes
//!
//! By default an opcode is `0x8000_0000 | fnv1a_32("{service}::{Variant}") & 0x7FFF_FFFF`
//! (`rpc_core::service::hash_opcode`): stable under reordering and additions. With `class = N`
//! (below `0x8000`) call `i` in declaration order gets `N << 16 | i`
//! (`rpc_core::service::class_opcode`): the top bit is clear, so the schemes never collide; append
//! calls to keep opcodes stable. Opcodes `0xFFFF_FF00` and up are the protocol's (the handshake is
//! `u32::MAX`). Two calls with the same opcode are a compile error.
//!
//! # What is generated, for `enum Kv`
//!
//! - `Kv::opcode(&self)`, `Kv::from_opcode(u32)`, `Kv::FINGERPRINT`, and
//!   `impl rpc_core::service::Service for Kv` (`NAME`, `FINGERPRINT`, `OPCODES`).
//! - `trait KvClient`, implemented for every `rpc_core::service::CallSite`: every client
//!   `rpc_core::Process<Client, L, M, W>`, and a transport's handle that makes a process only for
//!   calls that need the packets (`transport_shm::Claimed`). One method per call taking the
//!   request (`T`, `&[u8]` or `&str`) and, for a streamed response, a buffer to receive it into;
//!   it returns `Result<_, CallError>`. (Being implemented for every `CallSite`, the trait cannot
//!   also be implemented by hand for a type of another crate, such as `Arc<Mock>`; a mock can
//!   implement it for a local type.) On a GPU every active lane calls
//!   the method together, each with its own request, and gets its own response.
//! - `trait KvServer`: one handler per call (`fn get(&self, request: T) -> U`; a streamed
//!   response is returned as `impl AsRef<[u8]>` or `impl AsRef<str>`), called once per active lane
//!   of the call, in lane order, with `&self` so server threads can share one service; and the
//!   provided `dispatch(port, buffers)` and `serve_one(server, buffers)`.
//!
//! # Errors
//!
//! A server that does not know an opcode answers `status::UNKNOWN_OPCODE` and keeps serving: the
//! client gets `CallError::UnknownOpcode`, never a hang, whatever kind of call it made. A request
//! stream over the call's `limit` is refused (`CallError::Rejected`), text that is not UTF-8 is
//! `CallError::BadRequest`; in both cases no handler runs. A response stream longer than the
//! caller's buffer is refused by the client (`CallError::Port(Error::TooLarge { .. })`). Misuse
//! of the derive itself is a compile error pointing at the offending attribute, variant or type.
//!
//! The generated code names only `core` and `rpc_core`, so a `no_std` crate can derive services.
//!
//! # How the macro is built
//!
//! parse (`attr`: `#[rpc]` settings) → model (`ast`: calls, wire shapes, opcodes) → check
//! (`valid`: every misuse a spanned error) → generate (`expand`); on error `fallback` emits the
//! errors plus stand-ins for the generated items so the user sees the misuse, not its echoes.

mod ast;
mod attr;
mod expand;
mod fallback;
mod valid;

/// Derives a typed service from an enum with one variant per call (see the crate docs).
#[proc_macro_derive(RpcOpcodes, attributes(rpc))]
pub fn derive_rpc_opcodes(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::derive(input.into()).into()
}
