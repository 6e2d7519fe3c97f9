//! Typed services: what `#[derive(RpcOpcodes)]` generates code against.
//!
//! A service is a Rust enum with one variant per call, whose fields are the call's arguments; the
//! derive (crate `ferry-derive`, re-exported here as `RpcOpcodes` with the `derive` feature) gives
//! each call an opcode, a method on a generated client type and a handler in a server trait, and
//! the service a [`Service`] impl with its schema fingerprint. This module owns everything both
//! sides of a typed call agree on:
//!
//! - the [`status`] codes a server sends back in the packet header's status word;
//! - the opcode schemes ([`class_opcode`], [`hash_opcode`]) and the opcodes reserved for the
//!   protocol ([`RESERVED_OPCODES`], [`HANDSHAKE`]);
//! - the schema [`Fingerprint`] (FNV-1a over names, opcodes, argument names, written types and
//!   wire shapes, computed in `const`), and the [`Schema`] of each fixed type in it (its fields,
//!   their names, offsets and types, recursively; an enum's variants and discriminants);
//! - [`Bytes`] and [`Text`], the types of streamed arguments and replies in a definition;
//! - what a call returns when it fails, [`Error`] (the handler's own error, a server's
//!   [`Status`], a [`Transport`] failure), and the server's report of one call, [`Served`];
//! - [`Site`], where a generated client makes its calls, and [`CallSite`]/[`InlineCall`], what
//!   one call runs on; [`WholeCall`], the path of a transport that carries a call as one message
//!   (a network), and [`replay`], how a bridge makes such a call again on a site with ports;
//! - [`LaneBuffers`], where a server receives streamed arguments;
//! - with `std`: `Handler`, what every host transport's server serves (derived services,
//!   closures over a port, hand-written handlers, one trait for all transports), and
//!   `with_stream_buffers`, the serving threads' buffers for streams;
//! - the [`handshake`] a client makes to compare fingerprints with a server over the region.
//!
//! # How a typed call crosses
//!
//! ```text
//!  fixed arguments  : client send(their bytes packed, rest of slot zero)  -> server recv
//!  a streamed arg   : client send_parts(fixed bytes, then the stream)     -> server recv_n(limit)
//!  fixed reply      : server send(status, value bytes)                    -> client recv
//!  streamed reply   : server send_n(status, bytes)                        -> client recv_n(limit)
//!  error = E        : the reply starts with a tag byte (0 Ok, 1 Err), then the value or E
//!  one-way          : no reply: the client closes after sending and does not wait
//! ```
//!
//! **Errors the server sends back.** Every reply carries a status. When the server cannot serve a
//! call (unknown opcode, refused or malformed arguments) it replies with the status, an empty
//! stream (every lane's first word zero, so a client waiting for a streamed reply reads zero
//! bytes) and the stream word set to [`STREAM_REJECTED`] (so a client still streaming its
//! arguments stops). The client turns any status but [`status::OK`] into
//! [`Error::Status`]; the server goes on serving. Nothing waits forever on a call the server
//! refused.
//!
//! The status word is per packet: on a GPU every lane of a refused call gets the same error.

use crate::lanes::Lanes;
use crate::layout::HeaderWord;
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::{Client, Process, Server};
use crate::stream::{StreamSink, STREAM_REJECTED};
use crate::wait::Wait;
use crate::Error as ProtocolError;

/// Status codes a server puts in the header's status word with its reply (the protocol's own,
/// [`crate::status`], named here where the service layer's users look for them).
pub use crate::status;

pub use crate::words::InlineLanes;

mod awaited;
mod error;
#[cfg(feature = "std")]
mod handler;
#[cfg(feature = "std")]
mod helpers;
#[cfg(feature = "std")]
mod later;
mod methods;
mod schema;
mod serving;
mod site;
mod whole;
mod wire;
pub use awaited::AsyncSite;

pub use error::{Error, Status, Transport};
#[cfg(feature = "std")]
pub use handler::{
    serve_lanes, serve_packet, with_stream_buffers, Handler, Outcome, StreamBuffers,
};
#[cfg(feature = "std")]
pub use helpers::Helpers;
#[cfg(feature = "std")]
pub use later::{
    caller_scope, cancelled, with_caller, AsyncServing, BlockOn, Caller, CallerScope,
    DispatchLater, Later, Spawn,
};
pub use schema::{Schema, SchemaHash};
pub use serving::{
    name_fits, opcode_collision, Both, Collision, Services, Serving, SERVICE_NAME_BYTES,
};
pub use site::Site;
pub use whole::{NoWhole, ReplyShape, WholeCall, WholeReply, WholeRequest};
#[cfg(feature = "alloc")]
pub use wire::replay;

/// The type of a streamed argument or reply, in a service definition: bytes, at most the call's
/// `limit` (64 KiB unless the call sets `#[rpc(limit = ...)]`; longer is refused with
/// `Error::Status`). The client passes `&[u8]` and gets `Vec<u8>` (or fills a buffer), the
/// handler takes `&[u8]` and returns `impl AsRef<[u8]>`. It has no values: it only names how the
/// bytes cross.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes {}

/// The type of a streamed argument or reply, in a service definition: UTF-8 text, at most the
/// call's `limit` in bytes (64 KiB unless the call sets `#[rpc(limit = ...)]`; longer is refused
/// with `Error::Status`). The client passes `&str` and gets `String` (or fills a buffer), the
/// handler takes `&str` and returns `impl AsRef<str>`. It has no values: it only names how the
/// text crosses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {}

/// The most bytes of a request, and of a reply, that an [`InlineCall`] carries (the protocol's
/// bound, [`crate::layout::INLINE_BYTES`]).
pub use crate::layout::INLINE_BYTES;

/// A transport's path for small calls that does not go through the packets: one request of at
/// most [`INLINE_BYTES`] to the server and one reply back, for example in a few cache lines
/// that both sides poll (`ferry-shm`'s inline lines), which move fewer lines, with fewer
/// steps between them, than a packet exchange.
///
/// A transport gives one through its [`CallSite`] ([`CallSite::inline`]); a bare client
/// [`Process`] has none ([`NoInline`]). The client methods `#[derive(RpcOpcodes)]` generates try
/// it first for calls whose request and reply are fixed (or empty) and both fit (the one choice
/// of a call's path, `wire::route`), and use the packets when it answers `None`. On the server, the generated `dispatch_inline` serves the same
/// calls from bytes. Both paths give the same results and errors; only the way the bytes travel
/// differs.
pub trait InlineCall {
    /// Makes call `opcode` with `request` (at most [`INLINE_BYTES`]), and writes the first
    /// `reply.len()` bytes of the reply (at most [`INLINE_BYTES`]; the bytes the caller will read)
    /// into `reply`, any of them past the end of the server's reply as zero. Returns the server's
    /// status (`status::OK` or an error status), a protocol error (the server stopped answering),
    /// or `None` if this path cannot carry the call (the caller then uses the packets; nothing
    /// was sent).
    ///
    /// The generated calls pass slices of a length fixed by their types: an implementation that
    /// the compiler can inline (a [`CallSite`] whose [`Inline`](CallSite::Inline) is a concrete
    /// type) then copies a fixed number of words.
    fn call_inline(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>>;

    /// As [`call_inline`](Self::call_inline), for a call that passes values only: its handler
    /// reads none of the caller's memory and writes none of it (`#[rpc(values)]`), so a path
    /// whose fences order such memory may leave them out ([`Memory::ValuesOnly`] on a GPU's word
    /// lines). The default makes the call as any other.
    ///
    /// [`Memory::ValuesOnly`]: crate::words::Memory::ValuesOnly
    #[inline(always)]
    fn call_inline_values(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        self.call_inline(opcode, request, reply)
    }

    /// [`call_inline`](Self::call_inline) or, for [`Memory::ValuesOnly`],
    /// [`call_inline_values`](Self::call_inline_values), from code compiled once for every call
    /// of any sizes (a GPU's shared calls: `ferry_rpc::__private::call_fixed`): an implementation
    /// may leave out what it compiles apart for the lanes or sizes of a call to be fast. The
    /// default is those two.
    ///
    /// [`Memory::ValuesOnly`]: crate::words::Memory::ValuesOnly
    #[inline(always)]
    fn call_inline_shared(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
        memory: crate::words::Memory,
    ) -> Option<Result<u32, ProtocolError>> {
        match memory {
            crate::words::Memory::ValuesOnly => self.call_inline_values(opcode, request, reply),
            crate::words::Memory::Fenced => self.call_inline(opcode, request, reply),
        }
    }

    /// As [`call_inline`](Self::call_inline), for a call with a streamed argument: `body` travels
    /// beside the request, for example in the port's bulk area (`Layout::with_bulk`), written in
    /// place before the request is handed over and read there by the handler. `None` if this path
    /// cannot carry it (no bulk area, a body longer than it, no inline path): the caller then
    /// uses the packets; nothing was sent. The default carries nothing.
    fn call_inline_bulk(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        let _ = (opcode, request, body, reply);
        None
    }

    /// As [`call_inline_bulk`](Self::call_inline_bulk), the body's `len` bytes written in place
    /// by `fill` (in the port's bulk area) instead of copied from a slice. `None` (nothing sent,
    /// `fill` not called) where this path cannot carry them. The default carries nothing.
    fn call_inline_bulk_with(
        &self,
        opcode: u32,
        request: &[u8],
        len: usize,
        fill: &mut dyn FnMut(&mut [u8]),
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        let _ = (opcode, request, len, fill, reply);
        None
    }
}

/// What one call of a generated client runs on (a [`Site`]'s claim): a client [`Process`], or a
/// transport's handle that has a process only when a call needs the packets.
///
/// A call that may travel inline asks [`inline`](Self::inline) first; every other call, and one
/// the inline path declines, goes through [`process`](Self::process). A transport whose calls
/// mostly go inline (`ferry-shm`'s claimed ports) can so skip building a process for each
/// call. Before either, every call asks [`whole`](Self::whole): a site that carries calls whole
/// (a network's, with no ports) answers there, and its process is then never used by the
/// generated calls.
pub trait CallSite {
    /// The lanes of the client process.
    type Lanes: Lanes;
    /// Its mailbox representation.
    type Mailbox: Mailbox;
    /// Its wait policy.
    type Wait: Wait;
    /// Its path for small calls: a concrete type where the transport has one (so that the
    /// generated calls are compiled against it, with their sizes known), or `dyn InlineCall`.
    type Inline: InlineCall + ?Sized;
    /// Its path for calls carried whole ([`WholeCall`]): [`NoWhole`] for a site with ports.
    type Whole: WholeCall + ?Sized;

    /// The path that carries every call whole, if this site has one: the generated calls then
    /// make every call there, and use neither [`inline`](Self::inline) nor
    /// [`process`](Self::process). `None` by default.
    #[inline(always)]
    fn whole(&self) -> Option<&Self::Whole> {
        None
    }

    /// The path for small calls outside the packets, if there is one.
    fn inline(&self) -> Option<&Self::Inline>;

    /// The client process for a call through the packets.
    fn process(&self) -> &Process<'_, Client, Self::Lanes, Self::Mailbox, Self::Wait>;

    /// Runs `f`, a call of one of the runtime's functions shared by every call of a kind (on a
    /// GPU: not inlined), on this site or on a stand-in for it that keeps the site's own state
    /// out of that function's reach (a client [`Process`]: [`Process::with_stand_in`]). The
    /// default runs it on the site.
    #[inline(always)]
    fn shared<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        f(self)
    }
}

/// The inline path of a [`CallSite`] that has none, such as a bare client [`Process`]: a type with
/// no values, so [`CallSite::inline`] can only be `None` and the generated calls' check for an
/// inline path compiles away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoInline {}

impl InlineCall for NoInline {
    fn call_inline(
        &self,
        _opcode: u32,
        _request: &[u8],
        _reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        match *self {}
    }
}

/// A bare client process calls through the packets, and through the region's word lines
/// ([`crate::words`]) where it has them (a GPU's warps): a call whose request and reply both fit
/// [`WORD_BYTES`](crate::words::WORD_BYTES) per lane, made by a group of at most
/// `Process::word_lanes` lanes (a lone lane, by default), then crosses in words that carry
/// their own sequence, one trip across the bus. A transport with another path wraps the process in a
/// [`CallSite`] of its own.
impl<L: Lanes, M: Mailbox, W: Wait> CallSite for Process<'_, Client, L, M, W> {
    type Lanes = L;
    type Mailbox = M;
    type Wait = W;
    type Inline = Self;
    type Whole = NoWhole;

    // Always the process itself: its `call_inline` answers `None` at once where it has no word
    // lines (`words_for`). (A `None` here, chosen at run time, made the handle's address a
    // select between it and null, which can keep the compiler from holding the handle in
    // registers: on a GPU every field access then becomes a local-memory access.)
    #[inline(always)]
    fn inline(&self) -> Option<&Self> {
        Some(self)
    }

    #[inline(always)]
    fn process(&self) -> &Process<'_, Client, L, M, W> {
        self
    }

    // On a GPU, the shared calls get a stand-in: this handle, whose address then reaches no
    // function that is not inlined, can stay in registers. (Elsewhere those functions are
    // inlined, and the handle is used as it is.)
    #[inline(always)]
    fn shared<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        if cfg!(any(target_arch = "nvptx64", target_arch = "amdgpu")) {
            self.with_stand_in(f)
        } else {
            f(self)
        }
    }
}

/// A client process's word lines as an inline path: every active lane calls together (on a GPU,
/// convergently), each with its own request and reply. `None` (nothing executed) where the call
/// does not fit a word line, the process has none, or the server declined it
/// ([`DECLINED`](crate::words::DECLINED): its handler serves no inline calls).
impl<L: Lanes, M: Mailbox, W: Wait> InlineCall for Process<'_, Client, L, M, W> {
    #[inline(always)]
    fn call_inline(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        self.call_on_words(opcode, request, reply, crate::words::Memory::Fenced)
    }

    #[inline(always)]
    fn call_inline_values(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ProtocolError>> {
        self.call_on_words(opcode, request, reply, crate::words::Memory::ValuesOnly)
    }

    // One copy of the call, for any group: no second one for a whole warp's constant mask.
    #[inline(always)]
    fn call_inline_shared(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
        memory: crate::words::Memory,
    ) -> Option<Result<u32, ProtocolError>> {
        let mask = self.lanes().active_mask();
        self.call_on_words_in(
            mask,
            words_fit(request, reply),
            opcode,
            request,
            reply,
            memory,
        )
    }
}

/// Whether a call's request and reply each fit a lane's word line.
#[inline(always)]
fn words_fit(request: &[u8], reply: &[u8]) -> bool {
    use crate::words::WORD_BYTES;
    request.len() <= WORD_BYTES && reply.len() <= WORD_BYTES
}

impl<L: Lanes, M: Mailbox, W: Wait> Process<'_, Client, L, M, W> {
    /// [`InlineCall`] on the word lines, with the fences `memory` asks for.
    #[inline(always)]
    fn call_on_words(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
        memory: crate::words::Memory,
    ) -> Option<Result<u32, ProtocolError>> {
        let fits = words_fit(request, reply);
        // Decided for the whole group: its mask, and whether every lane's call fits.
        let mask = self.lanes().active_mask();
        // A whole group (a warp whose every lane calls) makes the call with its mask as a
        // constant: see `find_for_words`. (Two copies of the call; the mask decides which.)
        let full = self.lanes().full_mask();
        if mask == full {
            self.call_on_words_in(full, fits, opcode, request, reply, memory)
        } else {
            self.call_on_words_in(mask, fits, opcode, request, reply, memory)
        }
    }

    /// [`call_on_words`](Self::call_on_words) by the lanes of `mask`, the active mask.
    #[inline(always)]
    fn call_on_words_in(
        &self,
        mask: u64,
        fits: bool,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
        memory: crate::words::Memory,
    ) -> Option<Result<u32, ProtocolError>> {
        use crate::words::DECLINED;
        if !self.words_for(mask) || self.lanes().ballot(mask, !fits) != 0 {
            return None;
        }
        // (The port is built only once there is one: see `find_for_words`.)
        let found = self.find_for_words(mask);
        if found == crate::process::GAVE_UP {
            return Some(Err(ProtocolError::Stalled));
        }
        let mut port = self.port_for_words(found, opcode, mask);
        let answer = port.call_words_with(request, reply, memory);
        // Answered (every lane's words had arrived), and only word calls were made on the port:
        // no fence before its unlock. Given up on: the call's stores may still be on their way,
        // and must not land on the next holder's words: fenced.
        port.close_words(answer.is_ok());
        match answer {
            Ok(DECLINED) => None,
            other => Some(other),
        }
    }
}

/// Opcodes `RESERVED_OPCODES..=u32::MAX` belong to the protocol; no service call may use them.
pub const RESERVED_OPCODES: u32 = 0xFFFF_FF00;

/// The opcode of the fingerprint [`handshake`], answered by every generated server dispatch.
pub const HANDSHAKE: u32 = u32::MAX;

/// The opcode of call `index` of a service in class `class`: `class << 16 | index`.
///
/// The class scheme: a service declared with `#[rpc(class = N)]` (`N < 0x8000`) numbers its calls
/// in declaration order. Opcodes stay stable as long as calls are only appended. Class opcodes
/// have the top bit clear, hash opcodes have it set, so the two schemes never collide.
pub const fn class_opcode(class: u16, index: u16) -> u32 {
    ((class as u32) << 16) | index as u32
}

/// The opcode of call `call` of service `service` under the hash scheme (the default):
/// `0x8000_0000 | (fnv1a_32("{service}::{call}") & 0x7FFF_FFFF)`. Stable under any reordering;
/// the derive rejects the rare collision at compile time.
pub const fn hash_opcode(service: &str, call: &str) -> u32 {
    let mut h = fnv1a_32(FNV32_OFFSET, service.as_bytes());
    h = fnv1a_32(h, b"::");
    h = fnv1a_32(h, call.as_bytes());
    0x8000_0000 | (h & 0x7FFF_FFFF)
}

/// FNV-1a 32-bit offset basis.
pub const FNV32_OFFSET: u32 = 0x811c_9dc5;
/// FNV-1a 64-bit offset basis.
pub const FNV64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Continues the FNV-1a 32-bit hash `state` over `bytes`.
pub const fn fnv1a_32(mut state: u32, bytes: &[u8]) -> u32 {
    let mut i = 0;
    while i < bytes.len() {
        state ^= bytes[i] as u32;
        state = state.wrapping_mul(0x0100_0193);
        i += 1;
    }
    state
}

/// Continues the FNV-1a 64-bit hash `state` over `bytes`.
pub const fn fnv1a_64(mut state: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        state ^= bytes[i] as u64;
        state = state.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    state
}

/// How one side of a call crosses the port: a fixed-size value in a slot, a byte stream, a text
/// stream, or nothing (the response of a one-way call). Part of the fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A fixed-size zerocopy value of `size` bytes and alignment `align`, in one slot, whose
    /// structure hashes to `schema` ([`Schema::SCHEMA`]).
    Fixed {
        /// `size_of` the type.
        size: usize,
        /// `align_of` the type.
        align: usize,
        /// The type's [`Schema`]: its fields (names, offsets, types) or variants (names,
        /// discriminants, fields), recursively.
        schema: u64,
    },
    /// Any number of bytes, streamed.
    Bytes,
    /// UTF-8 text of any length, streamed.
    Text,
    /// Nothing: the response of a one-way call.
    None,
}

impl Shape {
    /// The shape of a fixed-size value of type `T`, with its [`Schema`].
    pub const fn of<T: Schema>() -> Shape {
        Shape::Fixed {
            size: core::mem::size_of::<T>(),
            align: core::mem::align_of::<T>(),
            schema: T::SCHEMA,
        }
    }

    const fn tag(self) -> [u8; 25] {
        let (tag, size, align, schema) = match self {
            Shape::Fixed {
                size,
                align,
                schema,
            } => (1u8, size as u64, align as u64, schema),
            Shape::Bytes => (2, 0, 0, 0),
            Shape::Text => (3, 0, 0, 0),
            Shape::None => (4, 0, 0, 0),
        };
        let mut out = [0; 25];
        out[0] = tag;
        let parts = [
            size.to_le_bytes(),
            align.to_le_bytes(),
            schema.to_le_bytes(),
        ];
        let mut i = 0;
        while i < 24 {
            out[1 + i] = parts[i / 8][i % 8];
            i += 1;
        }
        out
    }
}

/// A service schema's fingerprint, built in `const` context: FNV-1a 64 over the service name and,
/// for each call in declaration order, its name and opcode, each argument's name, type as
/// written and shape, and the reply's and the error's type as written and shape; a fixed type's
/// shape carries its [`Schema`], the hash of its structure. Two sides compiled from the same
/// definition get the same value; renaming a call or an argument, changing an opcode, a written
/// type, a type's size or alignment, or anything inside a fixed type (a field's name, offset or
/// type, a variant's discriminant), at any depth, changes it.
///
/// ```
/// use ferry_rpc::service::{Fingerprint, Shape};
/// const A: u64 = Fingerprint::new("kv")
///     .begin_call("Get", 1)
///     .arg("key", "u64", Shape::of::<u64>())
///     .reply("Bytes", Shape::Bytes)
///     .finish();
/// const B: u64 = Fingerprint::new("kv")
///     .begin_call("Get", 1)
///     .arg("key", "u32", Shape::of::<u32>())
///     .reply("Bytes", Shape::Bytes)
///     .finish();
/// assert_ne!(A, B);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// Starts the fingerprint of service `name`.
    pub const fn new(name: &str) -> Fingerprint {
        Fingerprint(fnv1a_64(
            fnv1a_64(FNV64_OFFSET, b"ferry-service\0"),
            name.as_bytes(),
        ))
    }

    /// Starts a call of a derived service: its name and opcode; its arguments, reply and error
    /// follow ([`arg`](Self::arg), [`reply`](Self::reply), [`error`](Self::error)).
    pub const fn begin_call(self, name: &str, opcode: u32) -> Self {
        let mut h = fnv1a_64(self.0, b"\0call\0");
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, &opcode.to_le_bytes());
        Fingerprint(h)
    }

    /// Adds an argument: its name, its type as written in the definition, and how it crosses.
    pub const fn arg(self, name: &str, ty: &str, shape: Shape) -> Self {
        self.part(b"\0arg\0", name, ty, shape)
    }

    /// Adds the reply: its type as written and how it crosses (`Shape::None` for a one-way
    /// call).
    pub const fn reply(self, ty: &str, shape: Shape) -> Self {
        self.part(b"\0reply\0", "", ty, shape)
    }

    /// Adds the error type, as written, and its layout.
    pub const fn error(self, ty: &str, shape: Shape) -> Self {
        self.part(b"\0error\0", "", ty, shape)
    }

    const fn part(self, kind: &[u8], name: &str, ty: &str, shape: Shape) -> Self {
        let mut h = fnv1a_64(self.0, kind);
        h = fnv1a_64(h, name.as_bytes());
        h = fnv1a_64(h, b"\0");
        h = fnv1a_64(h, ty.as_bytes());
        h = fnv1a_64(h, &shape.tag());
        Fingerprint(h)
    }

    /// The fingerprint.
    pub const fn finish(self) -> u64 {
        self.0
    }

    /// The fingerprint of service `name` whose calls are `calls`: each call's name and opcode,
    /// its arguments, its reply (a one-way call's: none) and its error if it has one.
    pub const fn of(name: &str, calls: &[CallInfo]) -> u64 {
        let mut f = Fingerprint::new(name);
        let mut i = 0;
        while i < calls.len() {
            let call = &calls[i];
            f = f.begin_call(call.name, call.opcode);
            let mut a = 0;
            while a < call.args.len() {
                f = f.arg(call.args[a].name, call.args[a].ty, call.args[a].shape);
                a += 1;
            }
            f = match call.oneway {
                true => f.reply("", Shape::None),
                false => f.reply(call.reply, call.reply_shape),
            };
            if !call.error.is_empty() {
                f = f.error(call.error, call.error_shape);
            }
            i += 1;
        }
        f.finish()
    }
}

/// What `#[derive(RpcOpcodes)]` implements for a service enum: its name, its schema fingerprint
/// and its opcodes. Transports compare [`Service::FINGERPRINT`] when the two sides connect.
pub trait Service {
    /// The service name (the enum's name unless `#[rpc(service = "...")]` says otherwise).
    const NAME: &'static str;
    /// The schema fingerprint (see [`Fingerprint`]).
    const FINGERPRINT: u64;
    /// The opcodes of the calls, in declaration order.
    const OPCODES: &'static [u32];
    /// The calls, in declaration order, as a tool that knows the service only from a running
    /// server sees them (`ferry ls`, `ferry call`). Empty for a service written by hand.
    const CALLS: &'static [CallInfo] = &[];
}

/// One call of a service as its definition has it (`Service::CALLS`): its name, method, opcode,
/// arguments, reply and error, with their written types and shapes. Tools that know the service
/// only from a running server list and call it from this (`ferry ls`, `ferry call`), and the
/// schema fingerprint is computed from it ([`Fingerprint::of`]). Built in `const` context:
///
/// ```
/// use ferry_rpc::service::{ArgInfo, CallInfo, Shape};
/// const ADD: CallInfo = CallInfo::new("Add", "add", 1)
///     .args(&[ArgInfo::of::<u64>("n", "u64")])
///     .reply_of::<u64>("u64");
/// const PUT: CallInfo = CallInfo::new("Put", "put", 2)
///     .args(&[ArgInfo::of::<u32>("key", "u32"), ArgInfo::bytes("value")])
///     .reply("Text", Shape::Text);
/// assert_eq!(ADD.line(), "add 0x00000001 (n:u64:8) -> u64:8");
/// assert_eq!(PUT.line(), "put 0x00000002 (key:u32:4, value:Bytes:0) -> Text:0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallInfo {
    /// The call's name in the definition (`Add`).
    pub name: &'static str,
    /// The client method's name (`add`).
    pub method: &'static str,
    /// The opcode.
    pub opcode: u32,
    /// Whether the call is one-way (no reply).
    pub oneway: bool,
    /// The arguments, in order (a streamed one last).
    pub args: &'static [ArgInfo],
    /// The reply's written type (`u64`, `Bytes`, `Text`, `()`, a type of one's own).
    pub reply: &'static str,
    /// How the reply crosses ([`Shape::None`] for a one-way call).
    pub reply_shape: Shape,
    /// The error type, if the call has one (`""` otherwise).
    pub error: &'static str,
    /// The error's shape ([`Shape::None`] when the call has none).
    pub error_shape: Shape,
}

/// One argument of a call ([`CallInfo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgInfo {
    /// Its name.
    pub name: &'static str,
    /// Its written type (`u64`, `[u8; 16]`, `Bytes`, `Text`, a type of one's own).
    pub ty: &'static str,
    /// How it crosses.
    pub shape: Shape,
}

impl ArgInfo {
    /// An argument `name` of written type `ty`.
    pub const fn new(name: &'static str, ty: &'static str, shape: Shape) -> ArgInfo {
        ArgInfo { name, ty, shape }
    }

    /// A streamed argument `name` of type `Bytes`.
    pub const fn bytes(name: &'static str) -> ArgInfo {
        ArgInfo::new(name, "Bytes", Shape::Bytes)
    }

    /// A streamed argument `name` of type `Text`.
    pub const fn text(name: &'static str) -> ArgInfo {
        ArgInfo::new(name, "Text", Shape::Text)
    }

    /// A fixed argument `name` of type `T`, written `ty`.
    pub const fn of<T: Schema>(name: &'static str, ty: &'static str) -> ArgInfo {
        ArgInfo::new(name, ty, Shape::of::<T>())
    }
}

impl Shape {
    /// Its size in bytes in a slot: a fixed value's size, 0 for a stream or nothing.
    pub const fn size(self) -> usize {
        match self {
            Shape::Fixed { size, .. } => size,
            _ => 0,
        }
    }
}

impl CallInfo {
    /// Call `name` (method `method`, opcode `opcode`) with no arguments, replying `()`, no error;
    /// [`args`](Self::args), [`reply`](Self::reply), [`oneway`](Self::oneway) and
    /// [`error`](Self::error) say the rest.
    pub const fn new(name: &'static str, method: &'static str, opcode: u32) -> CallInfo {
        CallInfo {
            name,
            method,
            opcode,
            oneway: false,
            args: &[],
            reply: "()",
            reply_shape: Shape::of::<()>(),
            error: "",
            error_shape: Shape::None,
        }
    }

    /// With these arguments.
    pub const fn args(self, args: &'static [ArgInfo]) -> CallInfo {
        CallInfo { args, ..self }
    }

    /// With this reply.
    pub const fn reply(self, reply: &'static str, reply_shape: Shape) -> CallInfo {
        CallInfo {
            reply,
            reply_shape,
            ..self
        }
    }

    /// With a fixed reply of type `T`, written `reply`.
    pub const fn reply_of<T: Schema>(self, reply: &'static str) -> CallInfo {
        self.reply(reply, Shape::of::<T>())
    }

    /// With the error type `T`, written `error`.
    pub const fn error_of<T: Schema>(self, error: &'static str) -> CallInfo {
        self.error(error, Shape::of::<T>())
    }

    /// One-way: no reply.
    pub const fn oneway(self) -> CallInfo {
        CallInfo {
            oneway: true,
            reply: "()",
            reply_shape: Shape::None,
            ..self
        }
    }

    /// With this error type.
    pub const fn error(self, error: &'static str, error_shape: Shape) -> CallInfo {
        CallInfo {
            error,
            error_shape,
            ..self
        }
    }

    /// The call in one line, as a file's table of calls keeps it and tools read it back (`ferry
    /// ls`, `ferry call`): `method opcode [oneway] (name:type:size, ...) -> type:size
    /// [! error:size]`, the opcode in hex.
    #[cfg(feature = "alloc")]
    pub fn line(&self) -> alloc::string::String {
        use core::fmt::Write;
        let mut out = alloc::string::String::new();
        let _ = write!(out, "{} {:#010x}", self.method, self.opcode);
        if self.oneway {
            out.push_str(" oneway");
        }
        out.push_str(" (");
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}:{}:{}", a.name, a.ty, a.shape.size());
        }
        let _ = write!(out, ") -> {}:{}", self.reply, self.reply_shape.size());
        if !self.error.is_empty() {
            let _ = write!(out, " ! {}:{}", self.error, self.error_shape.size());
        }
        out
    }

    /// The opcode of a call as [`line`](Self::line) wrote it (its second word, in hex); `None`
    /// for a line not of that form.
    pub fn opcode_in_line(line: &str) -> Option<u32> {
        let hex = line.split_whitespace().nth(1)?.strip_prefix("0x")?;
        u32::from_str_radix(hex, 16).ok()
    }
}

/// The dispatch of service `Self` to a handler of type `H` (any type implementing the service's
/// generated server trait): what a transport's server calls. `#[derive(RpcOpcodes)]` implements
/// it; `dispatch` is also inherent on the service enum (`Counter::dispatch`), with `serve_one`.
pub trait Dispatch<H: ?Sized>: Service {
    /// Whether `opcode` is one of this service's calls.
    fn has_opcode(opcode: u32) -> bool;

    /// Serves call `opcode` the way `via` carries it (a port's packet, an inline call, a word
    /// line's lanes): the generated match over the service's calls, each handler named once.
    fn serve<'v, V: __private::Via<'v>>(handler: &'v H, opcode: u32, via: V) -> V::Out;

    /// Serves the call on `port`, a port a server just opened: reads the opcode, decodes each
    /// lane's arguments, calls the handler once per lane, and replies. A call the service does
    /// not have gets `status::UNKNOWN_OPCODE` back; arguments that do not decode,
    /// `status::BAD_REQUEST`; a streamed argument longer than the call's `limit` (or than
    /// `buffers` take), `status::REJECTED`: in each case no handler runs. The handshake opcode
    /// is answered with this service's fingerprint. `buffers` receives streamed arguments
    /// (`Vec::new()` with `alloc`).
    ///
    /// Returns what was served, or the protocol error (the client stalled).
    #[inline(always)]
    fn dispatch<L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        handler: &H,
        port: &mut Port<'_, '_, Server, L, M, W>,
        buffers: &mut B,
    ) -> Result<Served, ProtocolError> {
        let opcode = port.opcode();
        Self::serve(handler, opcode, __private::PacketVia { port, buffers })
    }

    /// Serves a call that came through a transport's inline path ([`InlineCall`]) rather than a
    /// port: decodes `request` (and `body`, the streamed argument of a call that has one, read
    /// where it lies; empty for the others), calls the handler, writes its reply at the start of
    /// `reply` and returns the status to send back with the reply's length in bytes
    /// (`status::BAD_REQUEST` for arguments that do not decode or a body the call does not take,
    /// `status::REJECTED` for a body over the call's limit, `status::UNKNOWN_OPCODE` for a call
    /// the service does not have, all with no reply bytes). `None` for a call that cannot travel
    /// inline (a streamed reply, a one-way call, arguments or a reply over [`INLINE_BYTES`]): the
    /// transport tells the client to use a port.
    #[inline(always)]
    fn dispatch_inline(
        handler: &H,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        let via = __private::InlineVia {
            request,
            body,
            reply,
        };
        Self::serve(handler, opcode, via)
    }

    /// Serves every lane of a call that came on a GPU's word lines ([`crate::words`]) at once,
    /// as [`dispatch_inline`](Self::dispatch_inline) serves one: the opcode is decoded once and
    /// each lane's arguments decoded and its handler called in one loop. A call that cannot
    /// travel on a word line (a streamed argument or reply, arguments or a reply over
    /// [`crate::words::WORD_BYTES`]) and the handshake are declined on every lane (the client uses
    /// a port); a call the service does not have gets `status::UNKNOWN_OPCODE`.
    #[inline(always)]
    fn dispatch_inline_lanes(handler: &H, opcode: u32, lanes: &mut InlineLanes<'_>) {
        Self::serve(handler, opcode, __private::LanesVia { lanes })
    }
}

/// A port a server opened, of any transport (its lanes, mailbox and wait policy): what a
/// service's generated `dispatch` serves a call on.
pub trait ServerPort {
    /// Serves the call on this port with service `S`'s `handler` (see [`Dispatch::dispatch`]).
    fn dispatch<S: Dispatch<H>, H: ?Sized>(
        &mut self,
        handler: &H,
        buffers: &mut impl LaneBuffers,
    ) -> Result<Served, ProtocolError>;
}

impl<L: Lanes, M: Mailbox, W: Wait> ServerPort for Port<'_, '_, Server, L, M, W> {
    #[inline(always)]
    fn dispatch<S: Dispatch<H>, H: ?Sized>(
        &mut self,
        handler: &H,
        buffers: &mut impl LaneBuffers,
    ) -> Result<Served, ProtocolError> {
        S::dispatch(handler, self, buffers)
    }
}

/// A server process, of any transport: what a service's generated `serve_one` opens a port
/// of.
pub trait ServerProcess {
    /// Serves one call with service `S`'s `handler` if a client is waiting: opens a port,
    /// dispatches it and closes it. `Ok(None)` when no call was pending.
    fn serve_one<S: Dispatch<H>, H: ?Sized>(
        &self,
        handler: &H,
        buffers: &mut impl LaneBuffers,
    ) -> Result<Option<Served>, ProtocolError>;
}

impl<L: Lanes, M: Mailbox, W: Wait> ServerProcess for Process<'_, Server, L, M, W> {
    fn serve_one<S: Dispatch<H>, H: ?Sized>(
        &self,
        handler: &H,
        buffers: &mut impl LaneBuffers,
    ) -> Result<Option<Served>, ProtocolError> {
        match self.try_open(()) {
            Some(mut port) => S::dispatch(handler, &mut port, buffers).map(Some),
            None => Ok(None),
        }
    }
}

/// What a server's dispatch did with one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The opcode of the call.
    pub opcode: u32,
    /// The status sent back (or that would have been, for a one-way call).
    pub status: u32,
}

/// Where a server receives streamed requests: one buffer per lane.
///
/// With `alloc`, `Vec<Vec<u8>>` is one (start with `Vec::new()`; it grows to the lanes seen and
/// keeps its buffers between calls). [`NoBuffers`] refuses every stream, for services without
/// streamed requests or servers without an allocator.
pub trait LaneBuffers: StreamSink {
    /// The bytes lane `lane` streamed in the last `recv_n` that accepted it.
    fn lane(&self, lane: u32) -> &[u8];

    /// The length of lane `lane`'s stream if the last `recv_n` left it in the port's bulk area
    /// (the sink took it as a [view](StreamSink::view)); its bytes are then read there, with
    /// `Port::bulk_view`, not from [`lane`](Self::lane).
    fn in_place(&self, lane: u32) -> Option<usize> {
        let _ = lane;
        None
    }
}

#[cfg(feature = "alloc")]
impl LaneBuffers for alloc::vec::Vec<alloc::vec::Vec<u8>> {
    fn lane(&self, lane: u32) -> &[u8] {
        self.get(lane as usize).map_or(&[], |b| b.as_slice())
    }
}

/// Buffers that refuse every stream (a stream request then gets [`status::REJECTED`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBuffers;

impl StreamSink for NoBuffers {
    fn start(&mut self, _lane: u32, len: u64) -> bool {
        len == 0
    }
    fn chunk(&mut self, _lane: u32, _offset: u64, _bytes: &[u8]) {}
}

impl LaneBuffers for NoBuffers {
    fn lane(&self, _lane: u32) -> &[u8] {
        &[]
    }
}

/// Compares this side's schema with the server's: sends `S::FINGERPRINT` with opcode
/// [`HANDSHAKE`]; the server's dispatch answers with its own. Returns
/// [`Status::Mismatch`] when they differ (the server counts the call as
/// [`status::FINGERPRINT_MISMATCH`] and keeps running), and any other refusal or protocol
/// failure as the generated calls do.
pub fn handshake<S: Service, L: Lanes, M: Mailbox, W: Wait>(
    client: &Process<'_, Client, L, M, W>,
) -> Result<(), Error> {
    let mut port = client.open(HANDSHAKE)?;
    let mut server = 0;
    port.send_and_recv(
        |slot, _| {
            slot.words = [0; 8];
            slot.words[0] = S::FINGERPRINT;
        },
        |slot, _| server = slot.words[0],
    )?;
    match port.status() {
        status::OK if server == S::FINGERPRINT => Ok(()),
        status::OK | status::FINGERPRINT_MISMATCH => Err(Error::Status(Status::Mismatch {
            client: S::FINGERPRINT,
            server,
        })),
        code => Err(Error::Status(Status::from_code(code, HANDSHAKE))),
    }
}

/// Runtime pieces the generated code calls. Not a stable API: use the derive.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "std")]
    pub use super::later::task;
    pub use super::methods::*;
    #[cfg(feature = "std")]
    pub use super::whole::{WholeReplies, WholeVia};
    pub use super::wire::*;
    #[cfg(feature = "std")]
    pub use alloc::{boxed::Box, sync::Arc};
    #[cfg(feature = "alloc")]
    pub use alloc::{string::String, vec::Vec};
    pub use zerocopy;

    use super::*;

    /// Asks, of a concrete type, whether every byte pattern of its size is a value of it
    /// (zerocopy's `FromBytes`): `(&Infallible::<T>::new()).infallible()` is `true` for such a
    /// type and `false` for any other (the first method found needs `T: FromBytes`; without it,
    /// lookup takes one more reference and finds the second). A call whose arguments all are
    /// cannot be refused as a bad request, so the generated server serves it in one pass over
    /// the slots. Only for the concrete types a derive writes; generic code always gets `false`.
    pub struct Infallible<T: ?Sized>(core::marker::PhantomData<T>);

    impl<T: ?Sized> Infallible<T> {
        /// The probe.
        #[inline(always)]
        pub const fn new() -> Self {
            Infallible(core::marker::PhantomData)
        }
    }

    impl<T: ?Sized> Default for Infallible<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    /// What `#[wire]` puts in place of a field's type `T` that cannot cross (a `String`, a
    /// reference), beside the error that says so: a type that is zerocopy and has a `Schema`, so
    /// the type's derives and the services using it report nothing more, and code that still uses
    /// the field as a `T` is told the field is a `CannotCross<T>`. Never part of a program that
    /// builds.
    #[derive(
        zerocopy::TryFromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout,
    )]
    #[repr(C)]
    pub struct CannotCross<T: ?Sized>(core::marker::PhantomData<T>);

    impl<T: ?Sized> Schema for CannotCross<T> {
        const SCHEMA: u64 = 0;
    }

    /// The answer for a type whose every byte pattern is a value.
    pub trait IsInfallible {
        /// `true`.
        fn infallible(&self) -> bool;
    }

    impl<T: zerocopy::FromBytes + ?Sized> IsInfallible for Infallible<T> {
        #[inline(always)]
        fn infallible(&self) -> bool {
            true
        }
    }

    /// The answer for any other type.
    pub trait IsFallible {
        /// `false`.
        fn infallible(&self) -> bool;
    }

    impl<T: ?Sized> IsFallible for &Infallible<T> {
        #[inline(always)]
        fn infallible(&self) -> bool {
            false
        }
    }

    /// The lanes of the packet this executing lane handles (a host server: all of them).
    pub fn handled_lanes<S: crate::Side, L: Lanes, M: Mailbox, W: Wait>(
        port: &Port<'_, '_, S, L, M, W>,
    ) -> u64 {
        let lanes = port.lanes();
        let (step, id) = (lanes.lane_size(), lanes.lane_id());
        let mut mask = port.lane_mask();
        let mut mine = 0;
        while mask != 0 {
            let lane = mask.trailing_zeros();
            mask &= mask - 1;
            if lane % step == id {
                mine |= 1 << lane;
            }
        }
        mine
    }

    /// Refuses a streamed argument over the call's limit before anything is sent, where the
    /// caller is one lane ([`Lanes::ONE`]). The lanes of a warp leave it to the server, which
    /// refuses the warp's call as one, so that no lane returns while the others call.
    #[inline(always)]
    pub fn check_limit<C: CallSite + ?Sized>(
        _site: &C,
        len: usize,
        limit: u64,
    ) -> Result<(), Error> {
        if <C::Lanes as Lanes>::ONE && len as u64 > limit {
            return Err(Error::Status(Status::Rejected));
        }
        Ok(())
    }

    /// [`check_limit`] for a caller that is one lane (an async client).
    #[inline(always)]
    pub fn check_limit_len(len: usize, limit: u64) -> Result<(), Error> {
        if len as u64 > limit {
            return Err(Error::Status(Status::Rejected));
        }
        Ok(())
    }

    // ---- server ----

    /// The bytes lane `lane` streamed in the request just received: read where they lie in the
    /// port's bulk area if `buffers` took them in place, else from `buffers`. The borrow of the
    /// port keeps the packet (and the area) on this side while they are read.
    #[inline(always)]
    pub fn lane_bytes<'r, L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        port: &'r Port<'_, '_, Server, L, M, W>,
        buffers: &'r B,
        lane: u32,
    ) -> &'r [u8] {
        match buffers.in_place(lane) {
            #[cfg(not(loom))]
            // A view the port cannot lend (never, for a sink fed by `recv_n` on this port) reads
            // as no bytes, which no call's arguments decode from.
            Some(len) => port.bulk_view(lane, len).unwrap_or(&[]),
            #[cfg(loom)]
            Some(_) => {
                let _ = port;
                &[]
            }
            None => buffers.lane(lane),
        }
    }

    /// Receives a streamed request into `buffers`. `Ok(false)`: the stream was refused and the
    /// refusal already answered (status [`status::REJECTED`]). `in_place`: `buffers` may leave a
    /// request that arrived whole in the port's bulk area there (read with [`lane_bytes`]);
    /// otherwise every request is copied into them.
    pub fn recv_stream_request<L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        port: &mut Port<'_, '_, Server, L, M, W>,
        limit: u64,
        buffers: &mut B,
        oneway: bool,
        in_place: bool,
    ) -> Result<bool, ProtocolError> {
        let received = if in_place {
            port.recv_n(limit, buffers)
        } else {
            port.recv_n(limit, &mut Copied(buffers))
        };
        match received {
            Ok(()) => Ok(true),
            Err(
                ProtocolError::TooLarge { .. }
                | ProtocolError::Sink { .. }
                | ProtocolError::LaneFailed { .. },
            ) => {
                if !oneway {
                    reply_error(port, status::REJECTED)?;
                }
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A sink that passes everything to its inner one but takes no view: every byte copied.
    struct Copied<'b, B>(&'b mut B);

    impl<B: LaneBuffers> StreamSink for Copied<'_, B> {
        fn start(&mut self, lane: u32, len: u64) -> bool {
            self.0.start(lane, len)
        }
        fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]) {
            self.0.chunk(lane, offset, bytes)
        }
    }

    /// Replies to a call the server cannot serve: the status, an empty stream in every slot, and
    /// the stream word set so a client still streaming stops.
    pub fn reply_error<L: Lanes, M: Mailbox, W: Wait>(
        port: &mut Port<'_, '_, Server, L, M, W>,
        status: u32,
    ) -> Result<(), ProtocolError> {
        // After refusing a stream mid-way the client has the packet; wait for it to come back.
        port.ensure_owned()?;
        port.set_header(HeaderWord::Stream, STREAM_REJECTED);
        port.set_status(status);
        port.send(|slot, _| slot.words = [0; 8])
    }

    /// A refused request's answer (unless the call is one-way) and what was served.
    #[inline(always)]
    fn refuse_request<L: Lanes, M: Mailbox, W: Wait>(
        port: &mut Port<'_, '_, Server, L, M, W>,
        opcode: u32,
        oneway: bool,
        status: u32,
    ) -> Result<super::Served, ProtocolError> {
        if !oneway {
            reply_error(port, status)?;
        }
        Ok(super::Served { opcode, status })
    }

    /// Receives a request of `Q` bytes of fixed arguments (into `reqs`, by lane) or, with a
    /// streamed argument (`stream`: its limit), the whole stream (into `buffers`, left in place
    /// where it arrived whole if `in_place`); what was served instead if the request was refused
    /// (another length than `Q`: `BAD_REQUEST`, before any byte of it is read; a stream over the
    /// limit: `REJECTED`).
    #[inline(always)]
    fn receive<const Q: usize, L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        port: &mut Port<'_, '_, Server, L, M, W>,
        buffers: &mut B,
        opcode: u32,
        oneway: bool,
        stream: Option<u64>,
        in_place: bool,
        reqs: &mut [[u8; Q]; 64],
    ) -> Result<Option<super::Served>, ProtocolError> {
        let refused = |status| Ok(Some(super::Served { opcode, status }));
        if port.request_len() != Some(Q as u32) {
            reply_error(port, status::BAD_REQUEST)?;
            return refused(status::BAD_REQUEST);
        }
        match stream {
            Some(limit) => {
                let limit = limit.saturating_add(Q as u64);
                if !recv_stream_request(port, limit, buffers, oneway, in_place)? {
                    return refused(status::REJECTED);
                }
            }
            None => port.recv(|slot, lane| {
                reqs[lane as usize].copy_from_slice(&slot.as_bytes()[..Q]);
            })?,
        }
        Ok(None)
    }

    /// A streamed text argument [`Via::copied`] checked: its text (never `""` in place of
    /// bytes that are not text, as those refused the call before any handler ran).
    #[inline(always)]
    pub fn checked_text(bytes: &[u8]) -> &str {
        core::str::from_utf8(bytes).unwrap_or_default()
    }

    /// Sends each lane's fixed reply, encoded (`Via::copied`'s `send` for a call with a text
    /// argument and a fixed reply).
    #[inline(always)]
    pub fn send_fixed_replies<const R: usize, T, S: Replies>(
        port: &mut S,
        replies: &[Option<T>; 64],
        encode: impl Fn(&T, &mut [u8; R]),
    ) -> Result<super::Served, ProtocolError> {
        port.send_slots(|slot, lane| {
            if let Some(reply) = &replies[lane as usize] {
                let mut buf = [0u8; R];
                encode(reply, &mut buf);
                write_slot(slot, &buf);
            }
        })?;
        Ok(super::Served {
            opcode: port.opcode(),
            status: status::OK,
        })
    }

    /// Where a call's streamed replies go ([`Via::copied`]'s `send`): each lane's as a head and
    /// the stream's bytes.
    pub trait Replies {
        /// The call's opcode.
        fn opcode(&self) -> u32;

        /// Sends each lane's parts: a head and the stream's bytes.
        fn send_lane_parts<'r>(
            &mut self,
            parts: impl FnMut(u32) -> (&'r [u8], &'r [u8]),
        ) -> Result<super::Served, ProtocolError>;

        /// Sends each lane's fixed reply, written into its slot by `fill`, with status `OK`.
        fn send_slots(
            &mut self,
            fill: impl FnMut(&mut crate::Slot, u32),
        ) -> Result<(), ProtocolError>;
    }

    /// A port's packets: a client that refuses the reply (longer than it takes) knows, and gets
    /// the packet back when the port closes.
    impl<L: Lanes, M: Mailbox, W: Wait> Replies for Port<'_, '_, Server, L, M, W> {
        #[inline(always)]
        fn opcode(&self) -> u32 {
            Port::opcode(self)
        }

        #[inline(always)]
        fn send_slots(
            &mut self,
            fill: impl FnMut(&mut crate::Slot, u32),
        ) -> Result<(), ProtocolError> {
            self.set_status(status::OK);
            self.send(fill)
        }

        #[inline(always)]
        fn send_lane_parts<'r>(
            &mut self,
            parts: impl FnMut(u32) -> (&'r [u8], &'r [u8]),
        ) -> Result<super::Served, ProtocolError> {
            let opcode = self.opcode();
            self.set_status(status::OK);
            match self.send_parts(parts) {
                Ok(()) => Ok(super::Served {
                    opcode,
                    status: status::OK,
                }),
                Err(ProtocolError::Rejected) => Ok(super::Served {
                    opcode,
                    status: status::REJECTED,
                }),
                Err(e) => Err(e),
            }
        }
    }

    /// The replies of a path that sends no streamed reply (it declines such calls): a type with
    /// no values.
    #[derive(Debug)]
    pub enum NoReplies {}

    impl Replies for NoReplies {
        fn opcode(&self) -> u32 {
            match *self {}
        }

        fn send_slots(
            &mut self,
            _fill: impl FnMut(&mut crate::Slot, u32),
        ) -> Result<(), ProtocolError> {
            match *self {}
        }

        fn send_lane_parts<'r>(
            &mut self,
            _parts: impl FnMut(u32) -> (&'r [u8], &'r [u8]),
        ) -> Result<super::Served, ProtocolError> {
            match *self {}
        }
    }

    /// Sends each lane's streamed reply (`bytes` of it).
    #[inline(always)]
    pub fn send_stream_replies<T, S: Replies>(
        port: &mut S,
        replies: &[Option<T>; 64],
        bytes: impl Fn(&T) -> &[u8],
    ) -> Result<super::Served, ProtocolError> {
        port.send_lane_parts(|lane| match &replies[lane as usize] {
            Some(reply) => (&[], bytes(reply)),
            None => (&[], &[]),
        })
    }

    /// Sends each lane's streamed reply of a call with an error type: a tag byte, then the
    /// value's `bytes` (0), or the error (1, its `H - 1` bytes) and no stream.
    #[inline(always)]
    pub fn send_stream_replies_tagged<const H: usize, V, E, S: Replies>(
        port: &mut S,
        replies: &[Option<Result<V, E>>; 64],
        bytes: impl Fn(&V) -> &[u8],
    ) -> Result<super::Served, ProtocolError>
    where
        E: zerocopy::IntoBytes + zerocopy::Immutable,
    {
        let mut heads = [[0u8; H]; 64];
        for (lane, reply) in replies.iter().enumerate() {
            if let Some(Err(e)) = reply {
                heads[lane][0] = 1;
                put(&mut heads[lane], 1, e);
            }
        }
        port.send_lane_parts(|lane| match &replies[lane as usize] {
            Some(Ok(v)) => (&heads[lane as usize][..1], bytes(v)),
            Some(Err(_)) => (&heads[lane as usize][..], &[]),
            None => (&[], &[]),
        })
    }

    /// What a call served inline takes besides its fixed arguments: nothing (a body is refused
    /// as a bad request), or a streamed argument of at most this many bytes (a longer one is
    /// `REJECTED`).
    pub type Body = Option<u64>;

    /// The generated `dispatch_later`'s arm for a call that travels inline, served by an async
    /// handler: `later` given back if its `Q` or `R` bytes exceed [`INLINE_BYTES`] (the call is
    /// then served as any other); `BAD_REQUEST` or `REJECTED` answered through `later` as
    /// [`InlineVia`] answers them; else `start` (which spawns the handler's task, answering
    /// through `later`) with the decoded arguments and the body.
    #[cfg(feature = "std")]
    #[inline(always)]
    pub fn later_fixed<const Q: usize, const R: usize, A>(
        body_limit: Body,
        request: &[u8],
        body: &[u8],
        later: Box<dyn Later>,
        decode: impl FnOnce(&[u8]) -> Option<A>,
        start: impl FnOnce(A, &[u8], Box<dyn Later>),
    ) -> Result<(), Box<dyn Later>> {
        if Q > INLINE_BYTES || R > INLINE_BYTES {
            return Err(later);
        }
        let refuse = |later: Box<dyn Later>, status| {
            later.send(status, &[]);
            Ok(())
        };
        if request.len() != Q {
            return refuse(later, status::BAD_REQUEST);
        }
        match body_limit {
            None if !body.is_empty() => return refuse(later, status::BAD_REQUEST),
            Some(limit) if body.len() as u64 > limit => return refuse(later, status::REJECTED),
            _ => {}
        }
        match decode(request) {
            Some(args) => {
                start(args, body, later);
                Ok(())
            }
            None => refuse(later, status::BAD_REQUEST),
        }
    }

    /// Answers a call whose opcode the service does not have.
    pub fn reply_unknown<L: Lanes, M: Mailbox, W: Wait>(
        port: &mut Port<'_, '_, Server, L, M, W>,
    ) -> Result<super::Served, ProtocolError> {
        reply_error(port, status::UNKNOWN_OPCODE)?;
        Ok(super::Served {
            opcode: port.opcode(),
            status: status::UNKNOWN_OPCODE,
        })
    }

    /// Answers the [`HANDSHAKE`](super::HANDSHAKE) with `fingerprint`.
    pub fn serve_handshake<L: Lanes, M: Mailbox, W: Wait>(
        port: &mut Port<'_, '_, Server, L, M, W>,
        fingerprint: u64,
    ) -> Result<super::Served, ProtocolError> {
        let mut same = true;
        port.recv(|slot, _| same &= slot.words[0] == fingerprint)?;
        let status = if same {
            status::OK
        } else {
            status::FINGERPRINT_MISMATCH
        };
        port.set_status(status);
        port.send(|slot, _| {
            slot.words = [0; 8];
            slot.words[0] = fingerprint;
        })?;
        Ok(super::Served {
            opcode: super::HANDSHAKE,
            status,
        })
    }

    /// How a call reaches a derived service's generated [`serve`](super::Dispatch::serve): the
    /// path it came by, which serves each kind of call as that path does. `'v` is how long what
    /// the path lends the handler (a streamed argument read in place) lives.
    pub trait Via<'v>: Sized {
        /// What serving the call returns on this path.
        type Out;
        /// Where this path's streamed replies go ([`copied`](Self::copied)'s `send`): a port's
        /// packets, or a call's whole reply.
        type Replies: Replies;

        /// A call of fixed arguments and a fixed reply (or none). A request of another length
        /// than `Q` bytes is refused (`BAD_REQUEST`) before any byte of it is read. Through the
        /// packets, every lane's arguments are decoded (`decode`) before any handler runs, and
        /// one that does not decode refuses the call; then each lane's slot becomes its reply
        /// (`serve`: the handler, its reply encoded into the `R`-byte buffer). With
        /// `infallible` (every byte pattern is a value of every argument) the check is skipped
        /// and each slot turned into its reply in one pass. Inline, `None` where `Q` or `R`
        /// exceed [`INLINE_BYTES`] (the client then uses a port) and `BAD_REQUEST` for a body;
        /// on word lines, declined on every lane where they exceed
        /// [`WORD_BYTES`](crate::words::WORD_BYTES), else every lane served in one loop.
        fn fixed<const Q: usize, const R: usize, A>(
            self,
            made: Call<Q, R>,
            infallible: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            serve: impl FnMut(A, &mut [u8; R]),
        ) -> Self::Out;

        /// A call whose request is read where it lies, with a fixed reply or none (`oneway`),
        /// and a streamed bytes argument if `stream` (its limit): through the packets, the
        /// streamed arguments received (left in the bulk area where they arrived whole, and read
        /// there), every lane's arguments decoded before any handler runs (one that does not
        /// decode, or a stream shorter than the fixed arguments, refuses the call; a stream over
        /// the limit is `REJECTED`), then `call` once per lane in lane order and each reply
        /// encoded into its slot. Inline (not one-way), the same with the body where it lies;
        /// on word lines, declined.
        #[allow(clippy::too_many_arguments)]
        fn in_place<const Q: usize, const R: usize, A, T>(
            self,
            made: Call<Q, R>,
            oneway: bool,
            stream: Option<u64>,
            decode: impl Fn(&[u8]) -> Option<A>,
            call: impl FnMut(A, &[u8]) -> T,
            encode: impl Fn(&T, &mut [u8; R]),
        ) -> Self::Out {
            let _ = (made, oneway, stream, decode, call, encode);
            self.declined()
        }

        /// A call whose request is copied before its handler runs: a text argument (checked as
        /// UTF-8 once copied: `text`), or a streamed reply, which `send` sends. Through the
        /// packets only: inline it is `None`, on word lines declined.
        #[allow(clippy::too_many_arguments, clippy::type_complexity)]
        fn copied<const Q: usize, const R: usize, A, T>(
            self,
            made: Call<Q, R>,
            oneway: bool,
            stream: Option<u64>,
            text: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            call: impl FnMut(A, &'v [u8]) -> T,
            send: impl FnOnce(
                &mut Self::Replies,
                &[Option<T>; 64],
            ) -> Result<super::Served, ProtocolError>,
        ) -> Self::Out {
            let _ = (made, oneway, stream, text, decode, call, send);
            self.declined()
        }

        /// The handshake, answered with the service's `fingerprint` (declined where the path
        /// does not carry it).
        fn handshake(self, fingerprint: u64) -> Self::Out {
            let _ = fingerprint;
            self.declined()
        }

        /// A call the service does not have.
        fn unknown(self) -> Self::Out;

        /// A call this path does not carry: the client makes it through the packets (which
        /// carry every call).
        fn declined(self) -> Self::Out;
    }

    /// A call that came in a port's packet.
    #[derive(Debug)]
    pub struct PacketVia<'a, 'p, 'q, 'b, L: Lanes, M: Mailbox, W: Wait, B> {
        /// The port the server opened.
        pub port: &'a mut Port<'p, 'q, Server, L, M, W>,
        /// Where streamed arguments are received.
        pub buffers: &'b mut B,
    }

    impl<'p, 'q, 'b, L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers> Via<'b>
        for PacketVia<'_, 'p, 'q, 'b, L, M, W, B>
    {
        type Out = Result<super::Served, ProtocolError>;
        type Replies = Port<'p, 'q, Server, L, M, W>;

        #[inline(always)]
        fn fixed<const Q: usize, const R: usize, A>(
            self,
            made: Call<Q, R>,
            infallible: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut serve: impl FnMut(A, &mut [u8; R]),
        ) -> Self::Out {
            let opcode = made.opcode;
            let port = self.port;
            let served = |status| Ok(super::Served { opcode, status });
            if port.request_len() != Some(Q as u32) {
                reply_error(port, status::BAD_REQUEST)?;
                return served(status::BAD_REQUEST);
            }
            let mut answer = |slot: &mut crate::Slot| {
                if let Some(args) = decode(&slot.as_bytes()[..Q]) {
                    let mut reply = [0u8; R];
                    serve(args, &mut reply);
                    write_slot(slot, &reply);
                }
            };
            if infallible {
                port.set_status(status::OK);
                port.recv_and_send(|slot, _| answer(slot))?;
                return served(status::OK);
            }
            let mut bad = false;
            port.recv(|slot, _| bad |= decode(&slot.as_bytes()[..Q]).is_none())?;
            if bad {
                reply_error(port, status::BAD_REQUEST)?;
                return served(status::BAD_REQUEST);
            }
            port.set_status(status::OK);
            // (Every lane's arguments decoded above.)
            port.send(|slot, _| answer(slot))?;
            served(status::OK)
        }

        #[inline(always)]
        fn in_place<const Q: usize, const R: usize, A, T>(
            self,
            made: Call<Q, R>,
            oneway: bool,
            stream: Option<u64>,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut call: impl FnMut(A, &[u8]) -> T,
            encode: impl Fn(&T, &mut [u8; R]),
        ) -> Self::Out {
            let opcode = made.opcode;
            let (port, buffers) = (self.port, self.buffers);
            let lanes = handled_lanes(port);
            let mut reqs = [[0u8; Q]; 64];
            if let Some(refused) = receive(port, buffers, opcode, oneway, stream, true, &mut reqs)?
            {
                return Ok(refused);
            }
            // The arguments (and streamed bytes read in place, borrowing the port) live in this
            // block only: the port is free again for the reply.
            let (bad, replies) = {
                let mut args: [Option<(A, &[u8])>; 64] = core::array::from_fn(|_| None);
                let mut bad = false;
                for lane in crate::lanes::lanes_in(lanes) {
                    let (bytes, body): (&[u8], &[u8]) = match stream {
                        None => (&reqs[lane], &[]),
                        Some(_) => {
                            let all = lane_bytes(&*port, &*buffers, lane as u32);
                            // (The stream as a whole was bounded by the limit and the fixed bytes.)
                            if all.len() < Q {
                                bad = true;
                                continue;
                            }
                            all.split_at(Q)
                        }
                    };
                    match decode(bytes) {
                        Some(a) => args[lane] = Some((a, body)),
                        None => bad = true,
                    }
                }
                let mut replies: [Option<T>; 64] = core::array::from_fn(|_| None);
                if !bad {
                    for (lane, arg) in args.iter_mut().enumerate() {
                        if let Some((a, body)) = arg.take() {
                            replies[lane] = Some(call(a, body));
                        }
                    }
                }
                (bad, replies)
            };
            if bad {
                return refuse_request(port, opcode, oneway, status::BAD_REQUEST);
            }
            if !oneway {
                port.set_status(status::OK);
                port.send(|slot, lane| {
                    if let Some(reply) = &replies[lane as usize] {
                        let mut buf = [0u8; R];
                        encode(reply, &mut buf);
                        write_slot(slot, &buf);
                    }
                })?;
            }
            Ok(super::Served {
                opcode,
                status: status::OK,
            })
        }

        #[inline(always)]
        fn copied<const Q: usize, const R: usize, A, T>(
            self,
            made: Call<Q, R>,
            oneway: bool,
            stream: Option<u64>,
            text: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut call: impl FnMut(A, &'b [u8]) -> T,
            send: impl FnOnce(
                &mut Self::Replies,
                &[Option<T>; 64],
            ) -> Result<super::Served, ProtocolError>,
        ) -> Self::Out {
            let opcode = made.opcode;
            let (port, buffers) = (self.port, self.buffers);
            let lanes = handled_lanes(port);
            let mut reqs = [[0u8; Q]; 64];
            if let Some(refused) = receive(port, buffers, opcode, oneway, stream, false, &mut reqs)?
            {
                return Ok(refused);
            }
            let buffers: &'b B = buffers;
            let mut args: [Option<(A, &'b [u8])>; 64] = core::array::from_fn(|_| None);
            let mut bad = false;
            for lane in crate::lanes::lanes_in(lanes) {
                let (bytes, body): (&[u8], &'b [u8]) = match stream {
                    None => (&reqs[lane], &[]),
                    Some(_) => {
                        let all = LaneBuffers::lane(buffers, lane as u32);
                        if all.len() < Q {
                            bad = true;
                            continue;
                        }
                        all.split_at(Q)
                    }
                };
                match decode(bytes) {
                    Some(a) if !text || core::str::from_utf8(body).is_ok() => {
                        args[lane] = Some((a, body))
                    }
                    _ => bad = true,
                }
            }
            if bad {
                return refuse_request(port, opcode, oneway, status::BAD_REQUEST);
            }
            let mut replies: [Option<T>; 64] = core::array::from_fn(|_| None);
            for (lane, arg) in args.iter_mut().enumerate() {
                if let Some((a, body)) = arg.take() {
                    replies[lane] = Some(call(a, body));
                }
            }
            if oneway {
                return Ok(super::Served {
                    opcode,
                    status: status::OK,
                });
            }
            send(port, &replies)
        }

        #[inline(always)]
        fn handshake(self, fingerprint: u64) -> Self::Out {
            serve_handshake(self.port, fingerprint)
        }

        #[inline(always)]
        fn unknown(self) -> Self::Out {
            reply_unknown(self.port)
        }

        /// (Never: the packets carry every kind of call.)
        #[inline(always)]
        fn declined(self) -> Self::Out {
            reply_unknown(self.port)
        }
    }

    /// A call that came inline (`InlineCall`): its request, its streamed argument where it lies
    /// (empty for a call without one), and where its reply goes. `None` for a call that cannot
    /// travel inline: the transport tells the client to use a port.
    #[derive(Debug)]
    pub struct InlineVia<'a> {
        /// The fixed arguments.
        pub request: &'a [u8],
        /// The streamed argument.
        pub body: &'a [u8],
        /// The reply's bytes.
        pub reply: &'a mut [u8; INLINE_BYTES],
    }

    impl InlineVia<'_> {
        /// The checks an inline call passes before its handler runs: `None` if its `Q` or `R`
        /// bytes exceed [`INLINE_BYTES`] (the client then uses a port); `BAD_REQUEST` for a
        /// request of another length, arguments that do not decode or a body the call does not
        /// take (`stream`: none); `REJECTED` for a body over the call's limit; else the decoded
        /// arguments. It returns before the handler runs: no frame of its own between the path
        /// and the handler.
        #[inline(always)]
        fn args<const Q: usize, const R: usize, A>(
            &self,
            stream: Option<u64>,
            decode: impl Fn(&[u8]) -> Option<A>,
        ) -> Option<Result<A, (u32, usize)>> {
            if Q > INLINE_BYTES || R > INLINE_BYTES {
                return None;
            }
            let bad = Err((status::BAD_REQUEST, 0));
            if self.request.len() != Q {
                return Some(bad);
            }
            match stream {
                None if !self.body.is_empty() => return Some(bad),
                Some(limit) if self.body.len() as u64 > limit => {
                    return Some(Err((status::REJECTED, 0)))
                }
                _ => {}
            }
            Some(decode(self.request).ok_or((status::BAD_REQUEST, 0)))
        }
    }

    impl<'v> Via<'v> for InlineVia<'_> {
        type Out = Option<(u32, usize)>;
        type Replies = NoReplies;

        #[inline(always)]
        fn fixed<const Q: usize, const R: usize, A>(
            self,
            _: Call<Q, R>,
            _: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut serve: impl FnMut(A, &mut [u8; R]),
        ) -> Self::Out {
            let args = match self.args::<Q, R, A>(None, decode)? {
                Ok(args) => args,
                Err(refused) => return Some(refused),
            };
            let mut out = [0u8; R];
            serve(args, &mut out);
            self.reply[..R].copy_from_slice(&out);
            Some((status::OK, R))
        }

        #[inline(always)]
        fn in_place<const Q: usize, const R: usize, A, T>(
            self,
            _: Call<Q, R>,
            oneway: bool,
            stream: Option<u64>,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut call: impl FnMut(A, &[u8]) -> T,
            encode: impl Fn(&T, &mut [u8; R]),
        ) -> Self::Out {
            if oneway {
                // Through the packets: it returns once sent, without waiting for an answer.
                return None;
            }
            let args = match self.args::<Q, R, A>(stream, decode)? {
                Ok(args) => args,
                Err(refused) => return Some(refused),
            };
            let mut out = [0u8; R];
            encode(&call(args, self.body), &mut out);
            self.reply[..R].copy_from_slice(&out);
            Some((status::OK, R))
        }

        #[inline(always)]
        fn unknown(self) -> Self::Out {
            Some((status::UNKNOWN_OPCODE, 0))
        }

        #[inline(always)]
        fn declined(self) -> Self::Out {
            None
        }
    }

    /// The lanes of a call that came on a GPU's word lines: a fixed call is served on every
    /// lane in one loop; any other call (and the handshake) is declined on every lane, and the
    /// client makes it through the packets.
    #[derive(Debug)]
    pub struct LanesVia<'a, 'l> {
        /// The call's lanes.
        pub lanes: &'a mut InlineLanes<'l>,
    }

    impl<'v> Via<'v> for LanesVia<'_, '_> {
        type Out = ();
        type Replies = NoReplies;

        #[inline(always)]
        fn fixed<const Q: usize, const R: usize, A>(
            self,
            _: Call<Q, R>,
            _: bool,
            decode: impl Fn(&[u8]) -> Option<A>,
            mut serve: impl FnMut(A, &mut [u8; R]),
        ) -> Self::Out {
            let lanes = self.lanes;
            if Q > crate::words::WORD_BYTES || R > crate::words::WORD_BYTES {
                return lanes.decline();
            }
            lanes.serve(|request, reply| {
                let bad = Some(status::BAD_REQUEST);
                if request.len() != Q {
                    return bad;
                }
                let Some(args) = decode(request) else {
                    return bad;
                };
                let mut out = [0u8; R];
                serve(args, &mut out);
                // (Always there: the reply fits a word line, checked above.)
                if let Some(to) = reply.get_mut(..R) {
                    to.copy_from_slice(&out);
                }
                Some(status::OK)
            });
        }

        #[inline(always)]
        fn unknown(self) -> Self::Out {
            self.lanes.serve(|_, _| Some(status::UNKNOWN_OPCODE))
        }

        #[inline(always)]
        fn declined(self) -> Self::Out {
            self.lanes.decline()
        }
    }
}
