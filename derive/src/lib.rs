//! `#[derive(RpcOpcodes)]`: typed services over the ferry mailbox protocol.
//!
//! A service is an enum with one variant per call; a variant's fields are the call's arguments,
//! and `#[rpc(...)]` says what comes back. The derive generates the opcodes, a client type with
//! one method per call over any call site, a server trait with one handler per call, the dispatch
//! that serves it (on the enum), and the schema fingerprint. `#[wire]` makes a type of your own
//! one that crosses (a fixed argument, reply or error), in one line: zerocopy's derives, a `repr`,
//! and `#[derive(Schema)]`, the structure that fingerprint hashes. Use them through `ferry-rpc`
//! (feature `derive`, `ferry_rpc::RpcOpcodes`, `ferry_rpc::wire`, `ferry_rpc::Schema`), a
//! transport's re-export, or directly.
//!
//! # A whole service
//!
//! ```
//! use ferry_rpc::service::{Bytes, Error, Service, Status, Text};
//! use ferry_rpc::{HeapRegion, Single, SpinLimit};
//! use ferry_derive::{wire, RpcOpcodes};
//! use std::collections::HashMap;
//! use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
//! use std::sync::Mutex;
//!
//! const MAX_NAME: u64 = 2 * 64;
//!
//! /// Why the store refused: an error type is a fixed value, here a `#[repr(u8)]` enum. `#[wire]`
//! /// makes it cross as its bytes and puts its structure in the fingerprint.
//! #[wire]
//! #[repr(u8)]
//! #[derive(Clone, Copy, Debug, PartialEq, Eq)]
//! pub enum StoreError {
//!     Full = 1,
//!     Missing = 2,
//! }
//!
//! #[derive(RpcOpcodes)]
//! #[rpc(service = "counter")]
//! pub enum Counter {
//!     /// Adds `n`; returns the new total.
//!     #[rpc(response = u64)]
//!     Add { n: u64 },
//!     /// The total.
//!     #[rpc(response = u64)]
//!     Get,
//!     /// Stores bytes under a key (at most the call's `limit`: 64 KiB unless set); how many keys
//!     /// are stored now.
//!     #[rpc(response = u64, error = StoreError)]
//!     Put { key: u32, value: Bytes },
//!     /// A key's name, as text of at most `MAX_NAME` bytes.
//!     #[rpc(response = Text, error = StoreError, limit = MAX_NAME)]
//!     Name { key: u32 },
//!     /// Resets; the client does not wait.
//!     #[rpc(oneway)]
//!     Reset,
//! }
//!
//! #[derive(Default)]
//! struct Store {
//!     total: AtomicU64,
//!     values: Mutex<HashMap<u32, Vec<u8>>>,
//! }
//!
//! impl CounterServer for Store {
//!     fn add(&self, n: u64) -> u64 {
//!         self.total.fetch_add(n, Ordering::Relaxed) + n
//!     }
//!     fn get(&self) -> u64 {
//!         self.total.load(Ordering::Relaxed)
//!     }
//!     fn put(&self, key: u32, value: &[u8]) -> Result<u64, StoreError> {
//!         let mut values = self.values.lock().unwrap();
//!         if values.len() >= 2 && !values.contains_key(&key) {
//!             return Err(StoreError::Full);
//!         }
//!         values.insert(key, value.to_vec());
//!         Ok(values.len() as u64)
//!     }
//!     fn name(&self, key: u32) -> Result<impl AsRef<str>, StoreError> {
//!         let values = self.values.lock().unwrap();
//!         let value = values.get(&key).ok_or(StoreError::Missing)?;
//!         Ok(format!("key {key}: {} bytes", value.len()))
//!     }
//!     fn reset(&self) {
//!         self.total.store(0, Ordering::Relaxed);
//!         self.values.lock().unwrap().clear();
//!     }
//! }
//!
//! let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
//! let store = Store::default();
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     s.spawn(|| {
//!         // The server: serve calls until told to stop. Streamed arguments land in `buffers`.
//!         let server = region.server();
//!         let mut buffers = Vec::new();
//!         while !stop.load(Ordering::Relaxed) {
//!             if Counter::serve_one(&store, &server, &mut buffers).unwrap().is_none() {
//!                 std::thread::yield_now();
//!             }
//!         }
//!     });
//!     // The call site: a client process that gives up rather than spin forever on a dead
//!     // server (a transport's client is a site too).
//!     let site = region.client_with(Single, SpinLimit(u32::MAX)).unwrap();
//!     // Compare schemas first (transports do this when the two sides connect).
//!     ferry_rpc::service::handshake::<Counter, _, _, _>(&site).unwrap();
//!     let c = Counter::client(&site);
//!     assert_eq!(c.add(5), Ok(5));
//!     assert_eq!(c.add(2), Ok(7));
//!     assert_eq!(c.get(), Ok(7));
//!     assert_eq!(c.put(1, b"abc"), Ok(1));
//!     assert_eq!(c.put(2, &[7; 1000]), Ok(2));
//!     // The handler's error, apart from the server's refusals and the transport's failures.
//!     assert_eq!(c.put(3, b"x"), Err(Error::App(StoreError::Full)));
//!     assert_eq!(c.name(2), Ok(String::from("key 2: 1000 bytes")));
//!     assert_eq!(c.name(9), Err(Error::App(StoreError::Missing)));
//!     // Without allocating: into a buffer; a reply longer than it is refused.
//!     let mut buf = [0u8; 64];
//!     assert_eq!(c.name_into(1, &mut buf), Ok("key 1: 3 bytes"));
//!     let mut small = [0u8; 4];
//!     assert_eq!(
//!         c.name_into(1, &mut small),
//!         Err(Error::Status(Status::ReplyTooLarge { len: 14, limit: 4 }))
//!     );
//!     // A one-way call is not waited for: a later call sees it once the server ran it.
//!     c.reset().unwrap();
//!     while c.get() != Ok(0) {
//!         std::thread::yield_now();
//!     }
//!     stop.store(true, Ordering::Relaxed);
//! });
//! assert_ne!(Counter::FINGERPRINT, 0);
//! assert_eq!(<Counter as Service>::OPCODES.len(), 5);
//! assert_eq!(Counter::Add { n: 1 }.opcode(), ferry_rpc::service::hash_opcode("counter", "Add"));
//! ```
//!
//! # Defining calls
//!
//! Each variant is a call. Its fields (named, or a tuple's `arg0`, `arg1`, ...) are the
//! arguments, in order; a unit variant takes none. `#[rpc(...)]` on the variant is optional:
//!
//! | setting | meaning |
//! |---|---|
//! | field `name: T` | a fixed argument: `T` is zerocopy (`IntoBytes + TryFromBytes + Immutable`: integers, `bool`, arrays, `#[repr(C)]` structs, `#[repr(u8)]` enums) and has a `Schema` (the primitives and arrays do; put `#[wire]` on your own types); all fixed arguments are packed without padding into one 64-byte slot |
//! | field `name: Bytes` / `name: Text` | bytes or UTF-8 text of at most the call's `limit` (64 KiB unless set), streamed after the fixed arguments (`ferry_rpc::service::{Bytes, Text}`); at most one per call, its last field |
//! | `response = T` | the reply is a fixed `T` (at most a slot; zerocopy and `Schema`, as an argument); without `response` the call replies `()` and the client still waits for it |
//! | `response = Bytes` / `Text` | the reply is bytes or text of at most the call's `limit` (64 KiB unless set), streamed |
//! | `error = E` | the handler returns `Result<_, E>`; `E` is a fixed zerocopy value with a `Schema`, carried back in a tagged reply (one tag byte, then the value or the error: with a fixed reply, `1 + max(size_of T, size_of E)` must fit a slot) |
//! | `oneway` | no reply: the client returns once the arguments are sent, without waiting; no `response` or `error` |
//! | `values` | the call passes values only: its handler reads none of the caller's memory and writes none of it, so a GPU caller leaves out the fences around the call (one trip across the bus less; `ferry_rpc::words::Memory`); only on a call with fixed arguments and reply, and only a call that fits a word line (16 bytes a lane each way) gains. A promise, written on the handler's method too: a handler that does reach memory the call names may see old bytes there. The client's choice alone: not part of the fingerprint, and the server serves the call as any other |
//! | `hot` | a call made in a hot loop: on a GPU the client's call is compiled into each place it is written, with its sizes known, so the client's handle stays in registers. Every other call goes through one function of the runtime shared by all the calls of its kind (fixed, one-way, streamed), so that a program's code grows by a few instructions per call rather than by a whole call; such a call reaches the handle through memory. Only on a call with fixed arguments and reply. The client's choice alone: not part of the fingerprint |
//! | `opcode = N` | this call's opcode, instead of the scheme's (a discriminant, `Get = 5`, is refused: it is not the opcode) |
//! | `limit = EXPR` | the most bytes a lane may stream, in the argument and in the reply: any `u64` constant expression (`4096`, `MAX_NAME`, `2 * KIB`); default 64 KiB; only on a call that streams |
//!
//! On the enum: `#[rpc(service = "name")]` renames the service (hashed into opcodes and the
//! fingerprint; not empty, at most 48 bytes, no NUL byte); `#[rpc(class = N)]` switches to the
//! class scheme. That fixed arguments and replies are zerocopy, have a `Schema` and fit a slot is
//! checked at compile time, with the error at the type.
//!
//! # Opcodes
//!
//! By default an opcode is `0x8000_0000 | fnv1a_32("{service}::{Variant}") & 0x7FFF_FFFF`
//! (`ferry_rpc::service::hash_opcode`): stable under reordering and additions. With `class = N`
//! (below `0x8000`) call `i` in declaration order gets `N << 16 | i`
//! (`ferry_rpc::service::class_opcode`): the top bit is clear, so the schemes never collide; append
//! calls to keep opcodes stable. Opcodes `0xFFFF_FF00` and up are the protocol's (the handshake is
//! `u32::MAX`). Two calls with the same opcode are a compile error.
//!
//! # What is generated, for `enum Kv`
//!
//! - On `Kv`: `opcode(&self)` (a call's opcode; a call with a `Bytes` or `Text` argument has
//!   no value, find its opcode in `OPCODES`), `Kv::FINGERPRINT`, `Kv::client(site)`,
//!   `Kv::dispatch(&handler, &mut port, &mut buffers)` (serves one call on a port a server
//!   opened), `Kv::serve_one(&handler, &server, &mut buffers)` (opens, dispatches, closes;
//!   `Ok(None)` when no call was waiting). `impl ferry_rpc::service::Service for Kv` (`NAME`,
//!   `FINGERPRINT`, `OPCODES`, `CALLS`) and `impl ferry_rpc::service::Dispatch<H> for Kv`, whose
//!   one generated function, `serve`, is a match over the calls naming each handler once: each
//!   path a call comes by (a port's packet, an inline call, a word line's lanes) serves each
//!   kind of call through it (a transport calls `Dispatch::dispatch_inline` for an inline call).
//! - `struct KvClient<S>`, made by `Kv::client(site)` over any `ferry_rpc::service::Site`: a client
//!   `ferry_rpc::Process` (in-process, or a GPU warp's), a reference to one, or a transport's
//!   client. One method per call, taking the arguments (`&[u8]` for `Bytes`, `&str` for `Text`)
//!   and returning `Result<T, ferry_rpc::service::Error<E>>` (`E` is the call's `error`, else
//!   `Infallible`). A streamed reply has two methods: `name(..)` returns a `Vec<u8>` or `String`
//!   (where ferry-rpc has `alloc`), `name_into(.., &mut buf)` writes into `buf` and returns the
//!   part written (`&mut [u8]` or `&str`). A call with a `Bytes` argument and a fixed reply (or
//!   none) also has `name_with(.., len, fill)` (with `alloc`): `fill` writes the `len` bytes
//!   where they travel, in place in the transport's memory where it carries them there (a
//!   shared-memory port's bulk area: no copy), else into a buffer that is then sent.
//!   `with_deadline(d)` bounds every call's waits on
//!   transports that keep time (a bare process waits under its own wait policy). On a GPU every
//!   active lane calls a method together with the others, each with its own arguments, and gets
//!   its own reply (or its own handler error).
//! - `trait KvServer`: nothing but one handler per call, taking `&self` and the arguments
//!   (`&[u8]`, `&str` for streams) and returning the reply (`T`; `impl AsRef<[u8]>` or
//!   `impl AsRef<str>` for a stream, which may borrow the arguments: an echo returns its
//!   argument as it is, with no copy of its own; nothing for `()` and one-way calls), as
//!   `Result<_, E>` with an `error`. A handler runs once per active lane of a call, in lane
//!   order; `&self` lets server threads share one service.
//!
//! # Errors
//!
//! A call returns `ferry_rpc::service::Error<E>`: `App(E)` is the handler's own error;
//! `Status(..)` is a refusal; `Transport(..)` is the call not completing (a stalled server, a
//! deadline, a lost port). A server that does not know an opcode answers
//! `Status::UnknownOpcode` and keeps serving, whatever kind of call was made: never a hang. A
//! streamed argument over the call's `limit` is `Status::Rejected`; arguments whose bytes are not
//! valid values (a `bool` of 2, an enum's unknown discriminant, text that is not UTF-8) are
//! `Status::BadRequest`: in both cases no handler runs. A reply that does not decode is
//! `Status::BadResponse`; a streamed reply longer than the caller's buffer or the `limit` is
//! `Status::ReplyTooLarge`, and the port is left at rest for the next call. Misuse of the
//! derive itself is a compile error pointing at the offending setting, field or type.
//!
//! # The wire
//!
//! ```text
//!  fixed arguments  : their bytes one after another, unpadded, in one slot (or inline)
//!  a streamed arg   : one stream: the fixed arguments' bytes, then the stream's
//!  reply            : the value's bytes in a slot, or the stream's bytes
//!  with error = E   : a tag byte first (0 Ok, 1 Err), then the value's or the error's bytes
//!  status           : every reply carries one in the packet header (0: served)
//! ```
//!
//! Values are read back with `TryFromBytes`: bytes that are not a valid value never become one.
//!
//! # The fingerprint
//!
//! The fingerprint (`Kv::FINGERPRINT`, `ferry_rpc::service::Fingerprint`) hashes the service name
//! and, per call, its name, opcode, each argument's name, written type and shape, and the reply's
//! and error's written type and shape. A fixed type's shape is its size, its alignment and its
//! `Schema` (`ferry_rpc::service::Schema`): a hash of its structure, down to the primitives. For
//! a struct, its name and each field's name, offset and type's `Schema`; for an enum, its
//! `repr`, and each variant's name, discriminant value and fields. Two sides built from
//! definitions whose types agree in size but not in meaning (two `u64` fields swapped, a field
//! renamed, a discriminant renumbered, a change inside a nested struct) get different
//! fingerprints, so the handshake (`ferry_rpc::service::handshake`) and a transport's attach
//! (`ClientConfig::service` between processes) refuse the pair instead of letting one side read
//! the other's bytes as garbage values.
//!
//! Primitives, arrays and `PhantomData` have a `Schema`; a type of your own gets it from `#[wire]`
//! (or derives it beside zerocopy derives of its own), and one that has none is a compile error at
//! the type, asking for it:
//!
//! ```
//! use ferry_derive::{wire, RpcOpcodes};
//! use ferry_rpc::service::Service;
//!
//! #[wire]
//! #[derive(Clone, Copy)]
//! pub struct Span {
//!     start: u64,
//!     len: u64,
//! }
//!
//! #[derive(RpcOpcodes)]
//! pub enum Ranges {
//!     #[rpc(response = u64)]
//!     End { span: Span },
//! }
//!
//! mod newer {
//!     use ferry_derive::{wire, RpcOpcodes};
//!
//!     /// The same name and size, the two fields swapped.
//!     #[wire]
//!     #[derive(Clone, Copy)]
//!     pub struct Span {
//!         len: u64,
//!         start: u64,
//!     }
//!
//!     #[derive(RpcOpcodes)]
//!     #[rpc(service = "Ranges")]
//!     pub enum Ranges {
//!         #[rpc(response = u64)]
//!         End { span: Span },
//!     }
//! }
//!
//! assert_ne!(Ranges::FINGERPRINT, newer::Ranges::FINGERPRINT);
//! ```
//!
//! The generated code names only `core` and `ferry_rpc`, so a `no_std` crate can derive services.
//!
//! # How the macros are built
//!
//! `RpcOpcodes`: parse (`attr`: `#[rpc]` settings) → model (`ast`: calls, arguments, wire
//! shapes, opcodes) → check (`valid`: every misuse a spanned error) → generate (`expand`); on
//! error `fallback` emits the errors plus stand-ins for the generated items so the user sees the
//! misuse, not its echoes. `Schema` (`schema`) is small enough for one module: read and check,
//! then generate one impl; its fallback is a stand-in impl. `#[wire]` (`wire`) checks the fields
//! (`valid::stranded`, the same check a service's argument gets), adds the derives and a `repr`,
//! and generates `Schema` through `schema`.

mod ast;
mod attr;
mod expand;
mod fallback;
mod krate;
mod schema;
mod valid;
mod wire;

/// Derives a typed service from an enum with one variant per call (see the crate docs).
#[proc_macro_derive(RpcOpcodes, attributes(rpc))]
pub fn derive_rpc_opcodes(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::derive(input.into()).into()
}

/// Derives `ferry_rpc::service::Schema` for a struct or an enum: the hash of its structure that a
/// service's fingerprint takes in for every fixed argument, reply and error (see the crate docs,
/// "The fingerprint").
///
/// It hashes the type's name, size and alignment and, for a struct, each field's name (its index
/// in a tuple struct), offset and type's `Schema`; for an enum, its `#[repr(..)]`, and each
/// variant's name, discriminant value and fields. Every field's type must implement `Schema`
/// itself (primitives, arrays and `PhantomData` do; derive it for your own types); each type
/// parameter gets a `Schema` bound. A union is a compile error. `#[schema(crate = "path")]` names
/// the path to `ferry_rpc`, as `#[rpc(crate = ..)]` does for services. [`macro@wire`] derives it
/// together with the zerocopy derives a type needs to cross; this derive is for a type that
/// derives those itself.
///
/// ```
/// use ferry_derive::Schema;
/// use ferry_rpc::service::Schema as _;
///
/// #[derive(Schema)]
/// #[repr(C)]
/// struct Range {
///     start: u64,
///     end: u64,
/// }
///
/// mod newer {
///     /// The same name, size and field types, the fields swapped.
///     #[derive(ferry_derive::Schema)]
///     #[repr(C)]
///     pub struct Range {
///         pub end: u64,
///         pub start: u64,
///     }
/// }
///
/// #[derive(Schema)]
/// #[repr(u8)]
/// enum Step {
///     Up = 1,
///     Down = 2,
/// }
///
/// assert_ne!(Range::SCHEMA, newer::Range::SCHEMA);
/// assert_ne!(Step::SCHEMA, u8::SCHEMA);
/// ```
#[proc_macro_derive(Schema, attributes(schema))]
pub fn derive_schema(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    schema::derive(input.into()).into()
}

/// Makes a struct or an enum of your own a type that crosses as a call's fixed argument, reply or
/// error: one line instead of zerocopy's derives, their crate path, a `repr` and `Schema`.
///
/// `#[wire]` adds to the item:
///
/// - zerocopy's `TryFromBytes`, `IntoBytes`, `Immutable` and `KnownLayout` derives, through the
///   zerocopy that ferry re-exports (your crate needs no zerocopy dependency of its own; other
///   zerocopy derives you add, such as `FromBytes`, find it too);
/// - `#[repr(C)]` on a struct that has no `repr(C)`, `repr(transparent)` or `repr(packed)`, and
///   `#[repr(u32)]` on an enum that has no `repr(C)` or integer `repr` (write `#[repr(u8)]` for a
///   one-byte enum);
/// - the `Schema` impl (as `#[derive(Schema)]`), so the service's fingerprint covers the type's
///   fields and variants.
///
/// Nothing else: derive `Clone`, `Copy`, `Debug`, `PartialEq` as you want them. An error type
/// also wants `Debug` and `Display` of its own, so that `ferry_rpc::service::Error<E>` is a
/// `std::error::Error` (for `?` into `Box<dyn Error>`); a call works without them. The bytes of a
/// struct are all its value, so it has no padding: order fields from the largest alignment down,
/// or add the padding as fields, else zerocopy's `IntoBytes` says the type has padding.
///
/// Use it through the ferry crate your crate depends on: `#[ferry_shm::wire]`,
/// `#[ferry_device::wire]`, `#[ferry_gpu::wire]` or `#[ferry_rpc::wire]` (the path to the runtime
/// is found as `RpcOpcodes` finds it; `#[wire(crate = "path::to::ferry_rpc")]` names it). A field
/// whose bytes are not its value is a compile error at its type, saying what to write instead:
/// `String` and `&str` are a call's `Text` (its argument or reply, of any length up to the call's
/// `limit`), `Vec<u8>` and `&[u8]` are `Bytes`; references, pointers and boxes cannot cross. So is
/// naming one of the derives it adds again, or putting it on a union.
///
/// ```
/// use ferry_rpc::service::Error;
/// use ferry_rpc::{wire, HeapRegion, RpcOpcodes};
///
/// /// An argument and a reply of one's own.
/// #[wire]
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// pub struct Point {
///     x: i32,
///     y: i32,
/// }
///
/// /// An error: crosses as its discriminant (here one byte).
/// #[wire]
/// #[repr(u8)]
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// pub enum Refusal {
///     OffGrid = 1,
/// }
///
/// #[derive(RpcOpcodes)]
/// pub enum Plane {
///     #[rpc(response = Point, error = Refusal)]
///     Mirror { p: Point },
/// }
///
/// struct Origin;
///
/// impl PlaneServer for Origin {
///     fn mirror(&self, p: Point) -> Result<Point, Refusal> {
///         match (p.x.checked_neg(), p.y.checked_neg()) {
///             (Some(x), Some(y)) => Ok(Point { x, y }),
///             _ => Err(Refusal::OffGrid),
///         }
///     }
/// }
///
/// let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let (server, mut buffers) = (region.server(), Vec::new());
///         for _ in 0..2 {
///             while Plane::serve_one(&Origin, &server, &mut buffers).unwrap().is_none() {
///                 std::thread::yield_now();
///             }
///         }
///     });
///     let site = region.client();
///     let c = Plane::client(&site);
///     assert_eq!(c.mirror(Point { x: 1, y: -2 }), Ok(Point { x: -1, y: 2 }));
///     let edge = Point { x: i32::MIN, y: 0 };
///     assert_eq!(c.mirror(edge), Err(Error::App(Refusal::OffGrid)));
/// });
/// ```
#[proc_macro_attribute]
pub fn wire(
    args: proc_macro::TokenStream,
    item: proc_macro::TokenStream,
) -> proc_macro::TokenStream {
    wire::attribute(args.into(), item.into()).into()
}
