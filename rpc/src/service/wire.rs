//! How the arguments and replies of a derived call cross, and the client's side of a call: the
//! runtime `#[derive(RpcOpcodes)]` generates code against. Not a stable API (reached through
//! `ferry_rpc::__private`).
//!
//! ```text
//!  fixed arguments  : their bytes one after another (no padding), in one slot, or inline
//!  streamed argument: a stream of the fixed arguments' bytes followed by the stream's
//!  reply, no error  : the value's bytes (fixed) or the stream's bytes
//!  reply, error = E : a tag byte (0: Ok, 1: Err) then the value's or the error's bytes, in a
//!                     slot (fixed) or as the stream's first bytes
//! ```
//!
//! Every value is read back with `TryFromBytes`: bytes that are not a valid value of the type (a
//! `bool` of 2, an enum's unknown discriminant) are [`Status::BadRequest`] on the server and
//! [`Status::BadResponse`] on the client, never a value.

use zerocopy::{Immutable, IntoBytes, TryFromBytes};

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
use super::whole::{ReplyShape, WholeCall, WholeReply, WholeRequest};
use super::{status, CallSite, Error, InlineCall, Status, INLINE_BYTES};
use crate::lanes::Lanes;
use crate::layout::SLOT_BYTES;
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::Client;
use crate::stream::StreamSink;
use crate::wait::Wait;
use crate::words::Memory;

/// The larger of two sizes (for a tagged reply: the value's or the error's).
pub const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// The most bytes of a request, and of a reply, for which a call asks its site's inline path
/// first. On a GPU the only inline path is the word lines
/// ([`WORD_BYTES`](crate::words::WORD_BYTES) a lane): a call past 32 bytes goes straight to the
/// packets, as it always has, without a vote of the lanes. Elsewhere every call whose bytes an
/// inline path may carry ([`INLINE_BYTES`]) asks.
const ASK_INLINE: usize = if cfg!(any(target_arch = "nvptx64", target_arch = "amdgpu")) {
    32
} else {
    INLINE_BYTES
};

/// The size of a tagged reply: a tag byte, then the value (`T`) or the error (`E`).
pub const fn tagged<T, E>() -> usize {
    1 + max(core::mem::size_of::<T>(), core::mem::size_of::<E>())
}

/// A call's fixed arguments as a tuple, read from their packed bytes (each right after the one
/// before it, unaligned).
pub trait Args: Sized {
    /// The tuple read from `bytes`; `None` where they are missing or one is not a valid value.
    fn take(bytes: &[u8]) -> Option<Self>;
}

/// [`Args`] for tuples of up to 12 fixed values (the derive writes a decoder of its own for a
/// call with more).
macro_rules! args_tuples {
    ($(($($t:ident),*))*) => {$(
        impl<$($t: TryFromBytes),*> Args for ($($t,)*) {
            #[inline(always)]
            #[allow(unused_assignments, unused_mut, unused_variables, non_snake_case)]
            fn take(bytes: &[u8]) -> Option<Self> {
                let mut at = 0;
                $(
                    let $t = take::<$t>(bytes, at)?;
                    at += core::mem::size_of::<$t>();
                )*
                Some(($($t,)*))
            }
        }
    )*};
}

args_tuples! {
    ()
    (A)
    (A, B)
    (A, B, C)
    (A, B, C, D)
    (A, B, C, D, E)
    (A, B, C, D, E, F)
    (A, B, C, D, E, F, G)
    (A, B, C, D, E, F, G, H)
    (A, B, C, D, E, F, G, H, I)
    (A, B, C, D, E, F, G, H, I, J)
    (A, B, C, D, E, F, G, H, I, J, K)
    (A, B, C, D, E, F, G, H, I, J, K, L)
}

/// A call's fixed arguments, `A`, read from their packed bytes ([`Args`]).
#[inline(always)]
pub fn args<A: Args>(bytes: &[u8]) -> Option<A> {
    A::take(bytes)
}

/// Whether `bytes` fit one slot.
pub const fn fits_slot(bytes: usize) -> bool {
    bytes <= SLOT_BYTES
}

/// A call's fixed arguments, `bytes` of them, checked to fit one slot (a compile-time error,
/// spanned by the derive at the call, otherwise).
pub const fn args_slot(bytes: usize) -> usize {
    assert!(
        fits_slot(bytes),
        "the fixed arguments of this call take more than a 64-byte slot: make them smaller, or \
         send the data as a `Bytes` argument"
    );
    bytes
}

/// A call's fixed reply, `bytes` with its error and tag byte if it has one, checked to fit one
/// slot (a compile-time error, spanned by the derive at the reply's type, otherwise).
pub const fn reply_slot(bytes: usize) -> usize {
    assert!(
        fits_slot(bytes),
        "the reply of this call (its value, or its error and a tag byte) takes more than a \
         64-byte slot: make it smaller, or reply `Bytes`"
    );
    bytes
}

/// A call's `limit`, checked to be a number of bytes (the derive casts what the user wrote).
pub const fn limit(bytes: i128) -> u64 {
    assert!(
        bytes >= 0 && bytes <= u64::MAX as i128,
        "a call's `limit` is a number of bytes: an integer from 0 to u64::MAX"
    );
    bytes as u64
}

/// Compiles only for a type that may cross as a fixed value (the derive names each one).
pub const fn wire<T: IntoBytes + TryFromBytes + Immutable>() {}

/// Compiles only where `U` is `T`: a type written `Bytes` or `Text` is ferry's, not another
/// crate's type of that name taken for a stream.
pub const fn same<T, U: Same<T>>() {}

/// `Self` is `T` ([`same`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `{T}`: a stream is written with ferry's type",
    label = "another type of the same name"
)]
pub trait Same<T> {}
impl<T> Same<T> for T {}

/// A fixed reply's `R` bytes as the shared calls return them: word-aligned and followed by
/// zero bytes to the end of their last word, so that a reply and an [`Error`] beside it in a
/// `Result` move in words, and its words are read whole (on a GPU, bytes at odd offsets move one
/// at a time). Read as a byte slice of the `R` bytes then 7 zero bytes ([`Reply::new`] zeroes
/// them all).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(8))]
pub struct Reply<const R: usize> {
    /// The reply's bytes.
    pub bytes: [u8; R],
    /// Zero: the rest of the last word.
    tail: [u8; 7],
}

impl<const R: usize> Reply<R> {
    /// `R` zero bytes.
    #[inline(always)]
    pub const fn new() -> Self {
        Reply {
            bytes: [0; R],
            tail: [0; 7],
        }
    }
}

impl<const R: usize> Default for Reply<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const R: usize> core::ops::Deref for Reply<R> {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: `repr(C)` lays `bytes` and `tail` out one after the other from the start of
        // the value with no padding between them (both have alignment 1): `R + 7` initialized
        // bytes, borrowed with `self`.
        unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), R + 7) }
    }
}

/// Writes `value`'s bytes at `at` of `buf` (the generated code sized `buf` for them).
#[inline(always)]
pub fn put<T: IntoBytes + Immutable>(buf: &mut [u8], at: usize, value: &T) {
    let bytes = value.as_bytes();
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Reads a `T` from `size_of::<T>()` bytes at `at` of `buf`; `None` if they are missing or are
/// not a valid `T`.
#[inline(always)]
pub fn take<T: TryFromBytes>(buf: &[u8], at: usize) -> Option<T> {
    let bytes = buf.get(at..at + core::mem::size_of::<T>())?;
    T::try_read_from_bytes(bytes).ok()
}

/// Writes a handler's `Result` as a tagged reply.
#[inline(always)]
pub fn put_result<T: IntoBytes + Immutable, E: IntoBytes + Immutable>(
    buf: &mut [u8],
    result: &Result<T, E>,
) {
    match result {
        Ok(value) => {
            buf[0] = 0;
            put(buf, 1, value);
        }
        Err(e) => {
            buf[0] = 1;
            put(buf, 1, e);
        }
    }
}

/// Reads a tagged reply.
#[inline(always)]
pub fn take_result<T: TryFromBytes, E: TryFromBytes>(buf: &[u8]) -> Result<T, Error<E>> {
    let bad = Error::Status(Status::BadResponse);
    match buf.first() {
        Some(0) => take_after_tag(buf).ok_or(bad),
        Some(1) => Err(take_after_tag(buf).map_or(bad, Error::App)),
        _ => Err(bad),
    }
}

/// [`take`]`(buf, 1)`: a `T` from the bytes after a tagged reply's tag, gathered a word at a
/// time from `buf`'s words (a [`Reply`]'s are aligned), each shifted by the tag's byte: on a
/// GPU bytes at an odd offset are otherwise read one at a time.
#[inline(always)]
fn take_after_tag<T: TryFromBytes>(buf: &[u8]) -> Option<T> {
    let n = core::mem::size_of::<T>();
    if n > SLOT_BYTES || buf.len() < 1 + n {
        return take(buf, 1);
    }
    // Word `i` of `buf`, little-endian, zero past its end.
    let word = |i: usize| -> u64 {
        let from = (8 * i).min(buf.len());
        let to = (8 * i + 8).min(buf.len());
        let mut bytes = [0u8; 8];
        bytes[..to - from].copy_from_slice(&buf[from..to]);
        u64::from_le_bytes(bytes)
    };
    let mut value = [0u64; SLOT_BYTES / 8];
    for (k, v) in value.iter_mut().enumerate().take(n.div_ceil(8)) {
        // (Its bytes in memory in the order they came.)
        *v = u64::from_ne_bytes(((word(k) >> 8) | (word(k + 1) << 56)).to_le_bytes());
    }
    take(value.as_bytes(), 0)
}

/// A plain reply's value.
#[inline(always)]
pub fn take_value<T: TryFromBytes, E>(buf: &[u8]) -> Result<T, Error<E>> {
    take(buf, 0).ok_or(Error::Status(Status::BadResponse))
}

/// The status of a reply as an error.
#[inline(always)]
fn check(code: u32, opcode: u32) -> Result<(), Error> {
    if code == status::OK {
        Ok(())
    } else {
        Err(Error::Status(Status::from_code(code, opcode)))
    }
}

/// The ways a call crosses, one of which [`route`] chooses for each call.
pub enum Path<'s, C: CallSite + ?Sized> {
    /// Carried whole ([`WholeCall`]): a site with no ports (a network's).
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    Whole(&'s C::Whole),
    /// The site's path for small calls ([`InlineCall`]: shared memory's inline lines, a GPU's
    /// word lines). It may still decline the call, having sent nothing: a server that serves no
    /// inline call there, a GPU warp whose lanes its word lines do not cover, a handler that
    /// answers `DECLINED`. The packets carry it then.
    Inline(&'s C::Inline),
    /// A port's packets: every call can cross there.
    Packets,
}

/// How a call crosses, chosen here for every call a client makes: whole where the site carries
/// calls whole; on the site's inline path where it has one, the call may take it (`inline`: its
/// reply is fixed or empty and waited for) and its `request` and `reply` bytes fit what the
/// path is asked to carry; else through a port's packets.
#[inline(always)]
pub fn route<C: CallSite + ?Sized>(
    site: &C,
    request: usize,
    reply: usize,
    inline: bool,
) -> Path<'_, C> {
    // (No GPU site carries calls whole: left out there, so its code is as before.)
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if let Some(whole) = site.whole() {
        return Path::Whole(whole);
    }
    if inline && request <= ASK_INLINE && reply <= ASK_INLINE {
        if let Some(line) = site.inline() {
            return Path::Inline(line);
        }
    }
    Path::Packets
}

/// Makes a call whose arguments are `Q` fixed bytes and whose reply is `R` fixed bytes, on the
/// path [`route`] chooses.
#[inline(always)]
pub fn call_fixed<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
) -> Result<Reply<R>, Error> {
    call_shared(site, opcode, request, Memory::Fenced)
}

/// A fixed call ([`call_fixed`]) through the runtime's shared function: on a GPU every such call
/// goes through one function per call site type (`fixed_shared`), whatever its sizes, so its
/// code is emitted once per program, not once per place a call is written. `memory`: whether
/// the call orders the caller's memory around it (`Memory::ValuesOnly` for `#[rpc(values)]`,
/// inline through [`InlineCall::call_inline_values`]). A call of a hot loop is compiled where
/// it is written instead ([`call_hot`]).
#[inline(always)]
pub fn call_shared<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
    memory: Memory,
) -> Result<Reply<R>, Error> {
    let mut reply = Reply::new();
    site.shared(|site| fixed_shared(site, opcode, request, &mut reply.bytes, memory))?;
    Ok(reply)
}

/// Every fixed call off a GPU, hot or not (a generated client calls it straight from the call's
/// closure, one frame between the two): [`fixed_shared`], which is compiled in place there.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use fixed_shared as fixed;

/// As [`call_shared`], compiled where it is written, with its sizes known (`#[rpc(hot)]`): on a
/// GPU the client's handle then stays in registers, where a call of a shared function reaches it
/// through memory (gpu/NOTES.md).
#[inline(always)]
pub fn call_hot<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
    memory: Memory,
) -> Result<[u8; R], Error> {
    let mut reply = [0u8; R];
    match route(site, Q, R, true) {
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Path::Whole(whole) => {
            whole_fixed(whole, opcode, request, None, &mut reply)?;
            return Ok(reply);
        }
        Path::Inline(inline) => {
            let answer = match memory {
                Memory::ValuesOnly => inline.call_inline_values(opcode, request, &mut reply),
                Memory::Fenced => inline.call_inline(opcode, request, &mut reply),
            };
            if let Some(answer) = answer {
                check(answer?, opcode)?;
                return Ok(reply);
            }
        }
        Path::Packets => {}
    }
    let mut port = site.process().open(opcode)?;
    port.set_request_len(Q);
    port.send(|slot, _| write_slot(slot, request))?;
    port.recv(|slot, _| read_slot(slot, &mut reply))?;
    check(port.status(), opcode)?;
    Ok(reply)
}

/// [`call_shared`] for any sizes (at most a slot each, as the derive
/// checks): `request` sent, the reply's first `reply.len()` bytes written into `reply`.
///
/// One function on a GPU, not inlined: every fixed call of a program shares its code. Elsewhere
/// it is inlined, with the sizes of the call known.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
#[cfg_attr(
    not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
    inline(always)
)]
pub fn fixed_shared<C: CallSite + ?Sized>(
    site: &C,
    opcode: u32,
    request: &[u8],
    reply: &mut [u8],
    memory: Memory,
) -> Result<(), Error> {
    match route(site, request.len(), reply.len(), true) {
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Path::Whole(whole) => return whole_fixed(whole, opcode, request, None, reply),
        Path::Inline(inline) => {
            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            let answer = inline.call_inline_shared(opcode, request, reply, memory);
            // (What `call_inline_shared` does by default, written here: one frame less between a
            // generated method and its first store. Off a GPU no path compiles apart for it.)
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            let answer = match memory {
                Memory::ValuesOnly => inline.call_inline_values(opcode, request, reply),
                Memory::Fenced => inline.call_inline(opcode, request, reply),
            };
            if let Some(answer) = answer {
                return check(answer?, opcode);
            }
        }
        Path::Packets => {}
    }
    let mut port = open_shared(site.process(), opcode)?;
    port.set_request_len(request.len());
    let answer = match send_slot(&mut port, request) {
        Ok(()) => recv_slot(&mut port, reply).map(|()| port.status()),
        Err(e) => Err(e),
    };
    close_shared(port);
    check(answer?, opcode)
}

/// As [`call_fixed`] through the packets, for a call whose service announces its end in the
/// client's memory ([`Process::with_announce_words`](crate::Process::with_announce_words)):
/// opens, arms this lane's announce word, writes the word's address (8 bytes) and the value to
/// announce (4 bytes) into the request at `at`, sends, waits on the word, then reads the reply
/// (there by then, or soon after). A handle without announce words sends address 0 and waits for
/// the reply as any call does.
#[inline(always)]
pub fn call_fixed_announced<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
    at: usize,
) -> Result<Reply<R>, Error> {
    let mut reply = Reply::new();
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if let Path::Whole(whole) = route(site, Q, R, false) {
        // No announce word across a whole call: address 0, as a handle without them sends.
        let mut request = *request;
        put(&mut request, at, &0u64);
        put(&mut request, at + 8, &0u32);
        whole_fixed(whole, opcode, &request, None, &mut reply.bytes)?;
        return Ok(reply);
    }
    let mut port = open_shared(site.process(), opcode)?;
    port.set_request_len(Q);
    let armed = port.arm_announce();
    let (address, value) = armed.unwrap_or((0, 0));
    let mut request = *request;
    put(&mut request, at, &address);
    put(&mut request, at + 8, &value);
    let mut answer = send_slot(&mut port, &request);
    if let (Ok(()), Some(_)) = (&answer, armed) {
        answer = port.await_announced(value);
    }
    let answer = answer.and_then(|()| recv_slot(&mut port, &mut reply.bytes));
    let code = port.status();
    close_shared(port);
    answer?;
    check(code, opcode)?;
    Ok(reply)
}

/// Makes a one-way call whose arguments are `Q` fixed bytes: sends and returns. On a GPU through
/// one function for every such call, as [`call_fixed`].
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
#[inline(always)]
pub fn call_oneway<C: CallSite + ?Sized, const Q: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
) -> Result<(), Error> {
    site.shared(|site| oneway_shared(site, opcode, request))
}

/// Off a GPU, [`call_oneway_hot`] (as [`call_shared`] is [`call_hot`] there).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use call_oneway_hot as call_oneway;

/// [`call_oneway`], compiled where it is written (`#[rpc(hot, oneway)]`).
#[inline(always)]
pub fn call_oneway_hot<C: CallSite + ?Sized, const Q: usize>(
    site: &C,
    opcode: u32,
    request: &[u8; Q],
) -> Result<(), Error> {
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if let Path::Whole(whole) = route(site, Q, 0, false) {
        return whole_oneway(whole, opcode, request, None);
    }
    let mut port = site.process().open(opcode)?;
    port.set_request_len(Q);
    port.send(|slot, _| write_slot(slot, request))?;
    Ok(())
}

/// [`call_oneway`] for any size of request (at most a slot): one function on a GPU, as
/// [`fixed_shared`].
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
#[cfg_attr(
    not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
    inline(always)
)]
pub(super) fn oneway_shared<C: CallSite + ?Sized>(
    site: &C,
    opcode: u32,
    request: &[u8],
) -> Result<(), Error> {
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if let Path::Whole(whole) = route(site, request.len(), 0, false) {
        return whole_oneway(whole, opcode, request, None);
    }
    let mut port = open_shared(site.process(), opcode)?;
    port.set_request_len(request.len());
    let sent = send_slot(&mut port, request);
    close_shared(port);
    Ok(sent?)
}

/// Makes a call with a streamed argument (`prefix`, the fixed arguments, then `body`) and a
/// fixed reply of `R` bytes (none if `oneway`).
#[inline(always)]
pub fn call_stream<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    prefix: &[u8; Q],
    body: &[u8],
    oneway: bool,
) -> Result<Reply<R>, Error> {
    let mut reply = Reply::new();
    site.shared(|site| stream_shared(site, opcode, prefix, body, oneway, &mut reply.bytes))?;
    Ok(reply)
}

/// [`call_stream`] for any sizes of arguments and reply: one function on a GPU for every such
/// call (whose code is large: the stream's loops), the sizes as values.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub(super) fn stream_shared<C: CallSite + ?Sized>(
    site: &C,
    opcode: u32,
    prefix: &[u8],
    body: &[u8],
    oneway: bool,
    reply: &mut [u8],
) -> Result<(), Error> {
    // Inline where the transport carries the body beside the request (a one-way call goes
    // through the packets: it returns once sent, without waiting for an answer).
    match route(site, prefix.len(), reply.len(), !oneway) {
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Path::Whole(whole) => {
            return match oneway {
                true => whole_oneway(whole, opcode, prefix, Some(body)),
                false => whole_fixed(whole, opcode, prefix, Some(body), reply),
            }
        }
        Path::Inline(inline) => {
            if let Some(answer) = inline.call_inline_bulk(opcode, prefix, body, reply) {
                return check(answer?, opcode);
            }
        }
        Path::Packets => {}
    }
    stream_through_packets(site, opcode, prefix, body, oneway, reply)
}

/// [`call_stream`] through the packets only.
fn stream_through_packets<C: CallSite + ?Sized>(
    site: &C,
    opcode: u32,
    prefix: &[u8],
    body: &[u8],
    oneway: bool,
    reply: &mut [u8],
) -> Result<(), Error> {
    let mut port = open_shared(site.process(), opcode)?;
    port.set_request_len(prefix.len());
    let answer = match send_parts(&mut port, prefix, body, oneway) {
        Ok(()) if oneway => Ok(status::OK),
        Ok(()) => recv_slot(&mut port, reply)
            .map(|()| port.status())
            .map_err(Error::from),
        Err(e) => Err(e),
    };
    close_shared(port);
    check(answer?, opcode)
}

/// [`call_stream`] with the streamed argument's `len` bytes written by `fill`: in place where
/// the site's inline path carries them (a shared-memory port's bulk area), else into a buffer
/// then sent. `fill` may be called again if the server has the call go through the packets.
#[cfg(feature = "alloc")]
pub fn call_stream_with<C: CallSite + ?Sized, const Q: usize, const R: usize>(
    site: &C,
    opcode: u32,
    prefix: &[u8; Q],
    len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
    oneway: bool,
) -> Result<[u8; R], Error> {
    match route(site, Q, R, !oneway) {
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Path::Whole(whole) => {
            let mut body = alloc::vec![0u8; len];
            fill(&mut body);
            let mut reply = [0u8; R];
            match oneway {
                true => whole_oneway(whole, opcode, prefix, Some(&body))?,
                false => whole_fixed(whole, opcode, prefix, Some(&body), &mut reply)?,
            }
            return Ok(reply);
        }
        Path::Inline(inline) => {
            let mut reply = [0u8; R];
            if let Some(answer) =
                inline.call_inline_bulk_with(opcode, prefix, len, fill, &mut reply)
            {
                check(answer?, opcode)?;
                return Ok(reply);
            }
        }
        Path::Packets => {}
    }
    // (The inline path declined these bytes already, or the server had them go through the
    // packets: the same request inline again would be declined again.)
    let mut body = alloc::vec![0u8; len];
    fill(&mut body);
    let mut reply = [0u8; R];
    stream_through_packets(site, opcode, prefix, &body, oneway, &mut reply)?;
    Ok(reply)
}

/// Writes the `Q` bytes of `request` (or a reply) at the start of `slot`, in the words they cover (the last
/// one zero-padded); the rest of the slot is left as it is: the other side reads only those
/// bytes, and a slot's old bytes are no secret from anyone who maps the region.
///
/// A word at a time, built in registers first: on a GPU the slot is host memory across PCIe, and a
/// copy of bytes into it would be a store per byte, and a store of the whole slot eight stores
/// where a small request needs one.
#[inline(always)]
pub fn write_slot<const Q: usize>(slot: &mut crate::Slot, request: &[u8; Q]) {
    let mut words = [0u64; 8];
    let n = Q.min(SLOT_BYTES);
    words.as_mut_bytes()[..n].copy_from_slice(&request[..n]);
    let used = n.div_ceil(8);
    slot.words[..used].copy_from_slice(&words[..used]);
}

/// Reads the first `R` bytes of `slot` into `reply`, a word at a time (on a GPU each load of host
/// memory is a PCIe read: one per word, not one per byte).
#[inline(always)]
fn read_slot<const R: usize>(slot: &crate::Slot, reply: &mut [u8; R]) {
    let mut at = 0;
    for word in &slot.words[..R.div_ceil(8).min(8)] {
        let n = (R - at).min(8);
        reply[at..at + n].copy_from_slice(&word.to_ne_bytes()[..n]);
        at += n;
    }
}

/// Opens a port for call `opcode` ([`Process::open`](crate::Process::open)) for the shared
/// calls: one function on a GPU for every one of them (its code is large: the search, the lock,
/// the kept port), where a call compiled in place has its own.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn open_shared<'p, 'a, L: Lanes, M: Mailbox, W: Wait>(
    process: &'p crate::Process<'a, Client, L, M, W>,
    opcode: u32,
) -> Result<Port<'p, 'a, Client, L, M, W>, crate::Error> {
    process.open(opcode)
}

/// Sends `request` (its first [`SLOT_BYTES`] at most) on `port`: one function on a GPU for the
/// shared calls, so that the packet's hand-over is emitted once in a program rather than once
/// per kind of call (on a GPU every copy of it is hundreds of instructions for the driver to
/// compile at start-up).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn send_slot<L: Lanes, M: Mailbox, W: Wait>(
    port: &mut Port<'_, '_, Client, L, M, W>,
    request: &[u8],
) -> Result<(), crate::Error> {
    port.send_shared(|slot, _| write_slot_bytes(slot, request))
}

/// Receives the reply on `port` into `reply` (its first [`SLOT_BYTES`] at most): one function
/// on a GPU for the shared calls, as [`send_slot`].
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn recv_slot<L: Lanes, M: Mailbox, W: Wait>(
    port: &mut Port<'_, '_, Client, L, M, W>,
    reply: &mut [u8],
) -> Result<(), crate::Error> {
    port.recv_shared(|slot, _| read_slot_bytes(slot, reply))
}

/// Closes a port of a shared call: one function on a GPU, as the shared calls' send and receive
/// are (a port dropped on each of a call's ways out would have its release emitted on each).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn close_shared<L: Lanes, M: Mailbox, W: Wait>(port: Port<'_, '_, Client, L, M, W>) {
    drop(port);
}

/// [`write_slot`] for a request whose length is a value: its first [`SLOT_BYTES`] at most, each
/// word built in registers and stored whole (the last one zero-padded).
fn write_slot_bytes(slot: &mut crate::Slot, request: &[u8]) {
    let n = request.len().min(SLOT_BYTES);
    for (word, bytes) in slot.words.iter_mut().zip(request[..n].chunks(8)) {
        let mut w = [0u8; 8];
        w[..bytes.len()].copy_from_slice(bytes);
        *word = u64::from_ne_bytes(w);
    }
}

/// [`read_slot`] into a reply whose length is a value: its first [`SLOT_BYTES`] at most, a word
/// at a time.
fn read_slot_bytes(slot: &crate::Slot, reply: &mut [u8]) {
    for (bytes, word) in reply.chunks_mut(8).zip(&slot.words) {
        let n = bytes.len();
        bytes.copy_from_slice(&word.to_ne_bytes()[..n]);
    }
}

/// Streams a request. A refusal ends the call: an unknown opcode at once; a refusal by a server
/// that knows the call after its reply (unless the call is one-way). One function on a GPU for
/// the calls that stream their arguments.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn send_parts<L: Lanes, M: Mailbox, W: Wait>(
    port: &mut Port<'_, '_, Client, L, M, W>,
    prefix: &[u8],
    body: &[u8],
    oneway: bool,
) -> Result<(), Error> {
    match send_stream(port, prefix, body) {
        Ok(()) => Ok(()),
        Err(crate::Error::Rejected) => {
            let code = port.status();
            if code == status::OK && !oneway {
                // The server refused mid-stream and will reply; take the reply.
                port.recv(|_, _| {})?;
                check(port.status(), port.opcode())?;
            } else {
                check(code, port.opcode())?;
            }
            Err(Error::Status(Status::Rejected))
        }
        Err(e) => Err(e.into()),
    }
}

/// Streams `prefix` then `body` from every active lane on `port`
/// ([`Port::send_parts`](crate::Port::send_parts)): one function on a GPU for every stream a
/// program sends (the derived calls' and the device's prints), its loops emitted once.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn send_stream<L: Lanes, M: Mailbox, W: Wait>(
    port: &mut Port<'_, '_, Client, L, M, W>,
    prefix: &[u8],
    body: &[u8],
) -> Result<(), crate::Error> {
    port.send_parts(|_| (prefix, body))
}

/// What a streamed reply brought: its bytes, or (a tagged reply that carried the handler's
/// error) the error's bytes.
pub struct Replied<B> {
    /// The reply's bytes (empty when `error` is set).
    pub bytes: B,
    /// The error's bytes, of a tagged reply whose tag said `Err`.
    pub error: Option<Reply<SLOT_BYTES>>,
}

/// Where a streamed reply lands: a caller's buffer, or (with `alloc`) a vector sized to the
/// reply. A tagged reply's first byte is its tag; an error's bytes go aside.
struct ReplySink<O> {
    out: O,
    tagged: bool,
    /// The tag, once read (0 until then).
    tag: u8,
    error: Reply<SLOT_BYTES>,
    /// The length the sender announced.
    announced: u64,
    /// The reply's payload did not fit (a tagged reply's `Ok` longer than the buffer).
    overflow: bool,
}

/// A destination of a streamed reply.
trait ReplyOut {
    /// Whether `len` payload bytes can be taken (and, for a vector, room made for them).
    fn accept(&mut self, len: usize) -> bool;
    fn bytes(&mut self) -> &mut [u8];
    /// The most payload bytes it takes (reported when a reply is refused).
    fn room(&self) -> u64;
}

impl ReplyOut for &mut [u8] {
    fn accept(&mut self, len: usize) -> bool {
        len <= self.len()
    }
    fn bytes(&mut self) -> &mut [u8] {
        self
    }
    fn room(&self) -> u64 {
        self.len() as u64
    }
}

#[cfg(feature = "alloc")]
impl ReplyOut for alloc::vec::Vec<u8> {
    fn accept(&mut self, len: usize) -> bool {
        self.clear();
        self.resize(len, 0);
        true
    }
    fn bytes(&mut self) -> &mut [u8] {
        self
    }
    fn room(&self) -> u64 {
        u64::MAX
    }
}

impl<O: ReplyOut> StreamSink for ReplySink<O> {
    fn start(&mut self, _lane: u32, len: u64) -> bool {
        self.announced = len;
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        if !self.tagged {
            return self.out.accept(len);
        }
        // The tag is not known yet: an error reply is at most a slot, a value reply must fit.
        let payload = len.saturating_sub(1);
        len >= 1 && (self.out.accept(payload) || len <= 1 + SLOT_BYTES)
    }

    fn chunk(&mut self, _lane: u32, offset: u64, mut bytes: &[u8]) {
        let mut at = offset as usize;
        if self.tagged {
            if at == 0 {
                let Some((&tag, rest)) = bytes.split_first() else {
                    return;
                };
                self.tag = tag;
                bytes = rest;
                at = 1;
            }
            at -= 1;
        }
        let dst = if self.tagged && self.tag != 0 {
            &mut self.error.bytes[..]
        } else {
            self.out.bytes()
        };
        match dst.get_mut(at..at + bytes.len()) {
            Some(d) => crate::far::copy_from_far(d, bytes),
            None => self.overflow = true,
        }
    }
}

/// Makes a call with a streamed reply of at most `limit` bytes (and, if `body` is given, a
/// streamed argument), landing in `out`. `tagged`: the call has an error type.
#[inline(always)]
pub fn call_into<'b, C: CallSite + ?Sized, const Q: usize>(
    site: &C,
    opcode: u32,
    prefix: &[u8; Q],
    body: Option<&[u8]>,
    out: &'b mut [u8],
    limit: u64,
    tagged: bool,
) -> Result<Replied<&'b mut [u8]>, Error> {
    let (out, len, error) =
        site.shared(|site| call_streamed(site, opcode, prefix, body, out, limit, tagged))?;
    Ok(Replied {
        bytes: out.split_at_mut(len).0,
        error,
    })
}

/// [`call_into`], into a vector sized to the reply.
#[cfg(feature = "alloc")]
pub fn call_vec<C: CallSite + ?Sized, const Q: usize>(
    site: &C,
    opcode: u32,
    prefix: &[u8; Q],
    body: Option<&[u8]>,
    limit: u64,
    tagged: bool,
) -> Result<Replied<alloc::vec::Vec<u8>>, Error> {
    // (`dynamic::streamed_reply` without its check of the prefix, which the derive made: one
    // frame less between a generated method and its first store.)
    let out = alloc::vec::Vec::new();
    let (mut out, len, error) = call_streamed(site, opcode, prefix, body, out, limit, tagged)?;
    out.truncate(len);
    Ok(Replied { bytes: out, error })
}

/// Calls whose sizes are known only at run time, for a tool that knows a service from a running
/// server rather than from its definition (`ferry call`, reading `Service::CALLS` as the server
/// listed them): the same paths as the generated calls, the sizes as values. `request` (the
/// fixed arguments) is at most a slot, as the derive requires of every call.
pub mod dynamic {
    use super::*;

    fn fits(request: &[u8]) -> Result<(), Error> {
        if request.len() > SLOT_BYTES {
            return Err(Error::Status(Status::BadRequest));
        }
        Ok(())
    }

    /// A call with fixed arguments and a fixed reply: the reply's first `reply.len()` bytes into
    /// `reply`.
    pub fn fixed<C: CallSite + ?Sized>(
        site: &C,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Result<(), Error> {
        fits(request)?;
        if reply.len() > SLOT_BYTES {
            return Err(Error::Status(Status::BadRequest));
        }
        fixed_shared(site, opcode, request, reply, Memory::Fenced)
    }

    /// A one-way call with fixed arguments.
    pub fn oneway<C: CallSite + ?Sized>(
        site: &C,
        opcode: u32,
        request: &[u8],
    ) -> Result<(), Error> {
        fits(request)?;
        oneway_shared(site, opcode, request)
    }

    /// A call with a streamed argument (`body`) and a fixed reply (`reply`), or none (`oneway`).
    pub fn stream<C: CallSite + ?Sized>(
        site: &C,
        opcode: u32,
        prefix: &[u8],
        body: &[u8],
        oneway: bool,
        reply: &mut [u8],
    ) -> Result<(), Error> {
        fits(prefix)?;
        if reply.len() > SLOT_BYTES {
            return Err(Error::Status(Status::BadRequest));
        }
        stream_shared(site, opcode, prefix, body, oneway, reply)
    }

    /// A call with a streamed reply of at most `limit` bytes (and a streamed argument, if
    /// `body` is given); `tagged`: the call has an error type.
    #[cfg(feature = "alloc")]
    pub fn streamed_reply<C: CallSite + ?Sized>(
        site: &C,
        opcode: u32,
        prefix: &[u8],
        body: Option<&[u8]>,
        limit: u64,
        tagged: bool,
    ) -> Result<Replied<alloc::vec::Vec<u8>>, Error> {
        fits(prefix)?;
        let (mut out, len, error) = call_streamed(
            site,
            opcode,
            prefix,
            body,
            alloc::vec::Vec::new(),
            limit,
            tagged,
        )?;
        out.truncate(len);
        Ok(Replied { bytes: out, error })
    }
}

/// The reply's bytes (`Ok`), or the handler's error.
#[inline(always)]
pub fn reply_bytes<B, E: TryFromBytes>(replied: Replied<B>) -> Result<B, Error<E>> {
    match replied.error {
        None => Ok(replied.bytes),
        Some(e) => Err(take(&e, 0).map_or(Error::Status(Status::BadResponse), Error::App)),
    }
}

/// Text of a reply's bytes.
#[inline(always)]
pub fn text<E>(bytes: &[u8]) -> Result<&str, Error<E>> {
    core::str::from_utf8(bytes).map_err(|_| Error::Status(Status::BadResponse))
}

/// Text of a reply's bytes, as an owned string.
#[cfg(feature = "alloc")]
#[inline(always)]
pub fn string<E>(bytes: alloc::vec::Vec<u8>) -> Result<alloc::string::String, Error<E>> {
    alloc::string::String::from_utf8(bytes).map_err(|_| Error::Status(Status::BadResponse))
}

/// The stream of a reply into `out`: returns `out`, the payload's length, and an error's bytes.
/// One function on a GPU for every such call (its code is large: the stream's loops).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn call_streamed<C: CallSite + ?Sized, O: ReplyOut>(
    site: &C,
    opcode: u32,
    prefix: &[u8],
    body: Option<&[u8]>,
    out: O,
    limit: u64,
    tagged: bool,
) -> Result<(O, usize, Option<Reply<SLOT_BYTES>>), Error> {
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    if let Path::Whole(whole) = route(site, prefix.len(), 0, false) {
        return streamed_whole(whole, opcode, prefix, body, out, limit, tagged);
    }
    let mut port = open_shared(site.process(), opcode)?;
    // The port is closed in one place, on every way out (`close_shared`).
    let answer = (|| -> Result<(O, usize, Option<Reply<SLOT_BYTES>>), Error> {
        port.set_request_len(prefix.len());
        match body {
            Some(body) => send_parts(&mut port, prefix, body, false)?,
            None => send_slot(&mut port, prefix)?,
        }
        let mut sink = ReplySink {
            out,
            tagged,
            tag: 0,
            error: Reply::new(),
            announced: 0,
            overflow: false,
        };
        // What this client takes: the call's limit, and a caller's buffer.
        let took = limit.min(sink.out.room());
        let whole = limit.saturating_add(tagged as u64);
        let got = port.recv_n(whole, &mut sink);
        if let Err(e) = got {
            // A refused reply: if more packets were coming this side has handed the packet back
            // with the refusal; the server stops and hands it back: wait for it, so the port is
            // left at rest with this side.
            if !port.owns_packet() {
                port.ensure_owned_shared()?;
            }
            return Err(match e {
                // Over the call's limit: refused before the sink saw the length.
                crate::Error::TooLarge { len, .. } => Error::Status(Status::ReplyTooLarge {
                    len: len.saturating_sub(tagged as u64),
                    limit: took,
                }),
                crate::Error::Sink { .. } => Error::Status(Status::ReplyTooLarge {
                    len: sink.announced.saturating_sub(tagged as u64),
                    limit: took,
                }),
                e => e.into(),
            });
        }
        // An error status comes as an empty stream.
        check(port.status(), opcode)?;
        let len = sink.announced as usize;
        if !tagged {
            return Ok((sink.out, len, None));
        }
        match sink.tag {
            _ if len == 0 => Err(Error::Status(Status::BadResponse)),
            0 if sink.overflow => Err(Error::Status(Status::ReplyTooLarge {
                len: len as u64 - 1,
                limit: took,
            })),
            0 => Ok((sink.out, len - 1, None)),
            1 if len - 1 <= SLOT_BYTES => Ok((sink.out, 0, Some(sink.error))),
            _ => Err(Error::Status(Status::BadResponse)),
        }
    })();
    close_shared(port);
    answer
}

/// [`call_streamed`]'s refusal of a reply, for a whole call: the error of a streamed reply that
/// `sink` (taking at most `took` payload bytes) refused.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn refused_reply<O>(e: crate::Error, sink: &ReplySink<O>, took: u64) -> Error {
    let tagged = sink.tagged as u64;
    match e {
        crate::Error::TooLarge { len, .. } => Error::Status(Status::ReplyTooLarge {
            len: len.saturating_sub(tagged),
            limit: took,
        }),
        crate::Error::Sink { .. } => Error::Status(Status::ReplyTooLarge {
            len: sink.announced.saturating_sub(tagged),
            limit: took,
        }),
        e => e.into(),
    }
}

/// [`call_streamed`]'s reading of a reply that `sink` took whole (at most `took` payload bytes),
/// for a whole call: its payload's length, or the handler's error. (`call_streamed` keeps its
/// own copy inline: a GPU program's code for it stays as it was.)
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn finish_streamed<O>(
    sink: ReplySink<O>,
    took: u64,
) -> Result<(O, usize, Option<Reply<SLOT_BYTES>>), Error> {
    let len = sink.announced as usize;
    match sink.tag {
        _ if !sink.tagged => Ok((sink.out, len, None)),
        _ if len == 0 => Err(Error::Status(Status::BadResponse)),
        0 if sink.overflow => Err(Error::Status(Status::ReplyTooLarge {
            len: len as u64 - 1,
            limit: took,
        })),
        0 => Ok((sink.out, len - 1, None)),
        1 if len - 1 <= SLOT_BYTES => Ok((sink.out, 0, Some(sink.error))),
        _ => Err(Error::Status(Status::BadResponse)),
    }
}

/// [`call_streamed`] as a whole call.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn streamed_whole<W: WholeCall + ?Sized, O: ReplyOut>(
    whole: &W,
    opcode: u32,
    prefix: &[u8],
    body: Option<&[u8]>,
    out: O,
    limit: u64,
    tagged: bool,
) -> Result<(O, usize, Option<Reply<SLOT_BYTES>>), Error> {
    let mut sink = ReplySink {
        out,
        tagged,
        tag: 0,
        error: Reply::new(),
        announced: 0,
        overflow: false,
    };
    let took = limit.min(sink.out.room());
    let limit = limit.saturating_add(tagged as u64);
    let request = WholeRequest {
        opcode,
        prefix,
        body,
        reply: ReplyShape::Stream { limit },
    };
    match whole.call_whole(&request, WholeReply::stream(&mut sink, limit)) {
        Ok(()) => finish_streamed(sink, took),
        Err(Error::Transport(super::Transport::Protocol(
            e @ (crate::Error::TooLarge { .. } | crate::Error::Sink { .. }),
        ))) => Err(refused_reply(e, &sink, took)),
        // Refused on the other side (a bridge's own call, its limit counting the tag).
        Err(Error::Status(Status::ReplyTooLarge { len, .. })) => {
            Err(Error::Status(Status::ReplyTooLarge {
                len: len.saturating_sub(tagged as u64),
                limit: took,
            }))
        }
        Err(e) => Err(e),
    }
}

/// A call with a fixed reply (`reply.len()` bytes), as a whole call.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn whole_fixed<W: WholeCall + ?Sized>(
    whole: &W,
    opcode: u32,
    prefix: &[u8],
    body: Option<&[u8]>,
    reply: &mut [u8],
) -> Result<(), Error> {
    let request = WholeRequest {
        opcode,
        prefix,
        body,
        reply: ReplyShape::Fixed(reply.len()),
    };
    whole.call_whole(&request, WholeReply::fixed(reply))
}

/// A one-way call, as a whole call.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn whole_oneway<W: WholeCall + ?Sized>(
    whole: &W,
    opcode: u32,
    prefix: &[u8],
    body: Option<&[u8]>,
) -> Result<(), Error> {
    let request = WholeRequest {
        opcode,
        prefix,
        body,
        reply: ReplyShape::None,
    };
    whole.call_whole(&request, WholeReply::none())
}

/// A streamed reply's bytes as they came, at most `limit` of them (a tag byte, if the call has
/// one, left in): how a bridge makes a whole call with a streamed reply again
/// ([`replay`](super::whole::replay)).
#[cfg(feature = "alloc")]
pub(super) fn stream_reply_raw<C: CallSite + ?Sized>(
    site: &C,
    opcode: u32,
    prefix: &[u8],
    body: Option<&[u8]>,
    limit: u64,
) -> Result<alloc::vec::Vec<u8>, Error> {
    let (mut out, len, _) = call_streamed(
        site,
        opcode,
        prefix,
        body,
        alloc::vec::Vec::new(),
        limit,
        false,
    )?;
    out.truncate(len);
    Ok(out)
}

// Every fixed call (a slot at most each way: the derive checks with `args_slot` and
// `reply_slot`) may travel inline, on a transport whose path carries `INLINE_BYTES`; one
// declined fits the packets.
const _: () = assert!(INLINE_BYTES >= SLOT_BYTES);

/// Makes the call `request` on `site` with the same shape function a generated client uses, and
/// hands its reply to `reply`: how a bridge serves a whole call that came to it, on a site with
/// ports (a shared-memory client of a running server). A request that no generated call makes
/// (fixed arguments or a fixed reply longer than a slot) is [`Status::BadRequest`]; the server
/// refuses the rest as it refuses any call (an unknown opcode, a stream over its limit).
///
/// A streamed reply is received whole (at most the request's limit) before it is delivered.
#[cfg(feature = "alloc")]
pub fn replay<C: CallSite + ?Sized>(
    site: &C,
    request: &super::whole::WholeRequest<'_>,
    mut reply: super::whole::WholeReply<'_>,
) -> Result<(), Error> {
    use super::whole::ReplyShape;
    if request.prefix.len() > SLOT_BYTES {
        return Err(Error::Status(Status::BadRequest));
    }
    let (opcode, prefix) = (request.opcode, request.prefix);
    match (request.reply, request.body) {
        (ReplyShape::None, None) => oneway_shared(site, opcode, prefix),
        (ReplyShape::None, Some(body)) => stream_shared(site, opcode, prefix, body, true, &mut []),
        (ReplyShape::Fixed(len), body) => {
            if len > SLOT_BYTES {
                return Err(Error::Status(Status::BadRequest));
            }
            let mut out = [0u8; SLOT_BYTES];
            let out = &mut out[..len];
            match body {
                None => fixed_shared(site, opcode, prefix, out, crate::words::Memory::Fenced)?,
                Some(body) => stream_shared(site, opcode, prefix, body, false, out)?,
            }
            reply.deliver(out)
        }
        (ReplyShape::Stream { limit }, body) => {
            let bytes = stream_reply_raw(site, opcode, prefix, body, limit)?;
            reply.deliver(&bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tagged reply's value, gathered a word at a time, is what reading its bytes after the
    /// tag gives, for values of every size up to a slot, in aligned replies and in slices at any
    /// offset.
    #[test]
    fn a_value_after_the_tag_reads_as_its_bytes() {
        fn check<T: TryFromBytes + PartialEq + core::fmt::Debug>(buf: &[u8]) {
            assert_eq!(take_after_tag::<T>(buf), take::<T>(buf, 1));
        }
        let mut reply = Reply::<{ 1 + SLOT_BYTES }>::new();
        for (i, b) in reply.bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(11);
        }
        for start in 0..8 {
            for len in 1..=reply.bytes.len() - start {
                let buf = &reply.bytes[start..start + len];
                check::<u8>(buf);
                check::<u16>(buf);
                check::<u32>(buf);
                check::<u64>(buf);
                check::<[u8; 3]>(buf);
                check::<[u8; 13]>(buf);
                check::<[u64; 3]>(buf);
                check::<[u8; 63]>(buf);
                check::<[u8; 64]>(buf);
                check::<bool>(buf);
            }
        }
        // Too short, or longer than a slot: as `take`.
        check::<[u8; 65]>(&[0u8; 80]);
        check::<u64>(&[0u8; 5]);
    }
}
