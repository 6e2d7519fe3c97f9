//! A call carried whole, as one message each way: the path of a transport that has no ports (a
//! network), and how a bridge makes such a call again on a site that has them.
//!
//! The protocol and its invariant are on [`WholeCall`].

use super::{Error, Status};
use crate::stream::StreamSink;

/// What a call's reply is, as a whole call carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyShape {
    /// No reply: a one-way call (the transport may return as soon as the request is sent).
    None,
    /// A fixed reply of this many bytes (at most a slot).
    Fixed(usize),
    /// A streamed reply of at most `limit` bytes (a tagged reply's tag byte counted).
    Stream {
        /// The most bytes the caller takes.
        limit: u64,
    },
}

/// One call as a message: what the generated call would have put in the packets.
#[derive(Clone, Copy, Debug)]
pub struct WholeRequest<'a> {
    /// The call's opcode.
    pub opcode: u32,
    /// The fixed arguments' bytes (at most a slot).
    pub prefix: &'a [u8],
    /// The streamed argument, for a call that has one.
    pub body: Option<&'a [u8]>,
    /// What the call expects back.
    pub reply: ReplyShape,
}

/// Where a whole call's reply goes: the caller's fixed reply bytes, or the sink of its streamed
/// reply. A transport hands the reply's bytes to [`deliver`](Self::deliver), which checks them
/// against the call's shape.
pub struct WholeReply<'r> {
    to: To<'r>,
}

enum To<'r> {
    None,
    Fixed(&'r mut [u8]),
    Stream {
        sink: &'r mut dyn StreamSink,
        limit: u64,
    },
}

impl<'r> WholeReply<'r> {
    /// A one-way call's: nothing comes back.
    pub fn none() -> Self {
        WholeReply { to: To::None }
    }

    /// A fixed reply of `out.len()` bytes, written into `out`.
    pub fn fixed(out: &'r mut [u8]) -> Self {
        WholeReply { to: To::Fixed(out) }
    }

    /// A streamed reply of at most `limit` bytes, handed to `sink` as lane 0's stream.
    pub fn stream(sink: &'r mut dyn StreamSink, limit: u64) -> Self {
        WholeReply {
            to: To::Stream { sink, limit },
        }
    }

    /// The shape of the reply the call expects (what a transport tells the other side).
    pub fn shape(&self) -> ReplyShape {
        match &self.to {
            To::None => ReplyShape::None,
            To::Fixed(out) => ReplyShape::Fixed(out.len()),
            To::Stream { limit, .. } => ReplyShape::Stream { limit: *limit },
        }
    }

    /// Takes the reply's bytes. A fixed reply must be exactly the call's length and a one-way
    /// call's empty ([`Status::BadResponse`] otherwise); a stream longer than the call's limit is
    /// refused as the packets refuse one ([`crate::Error::TooLarge`]), and one the sink does not
    /// take too ([`crate::Error::Sink`]). Nothing is written on an error.
    pub fn deliver(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.deliver_parts(bytes.len(), [bytes])
    }

    /// As [`deliver`](Self::deliver), for a reply of `len` bytes that arrived in `parts` (a
    /// network message in fragments), taken one after the other without first gathering them.
    /// Parts that do not add up to `len` are [`Status::BadResponse`] (a stream's sink may then
    /// have been given some of them; the call still fails).
    pub fn deliver_parts<'b>(
        &mut self,
        len: usize,
        parts: impl IntoIterator<Item = &'b [u8]>,
    ) -> Result<(), Error> {
        let bad = Error::Status(Status::BadResponse);
        let mut at = 0usize;
        match &mut self.to {
            To::None if len == 0 => {}
            To::None => return Err(bad),
            To::Fixed(out) if out.len() == len => {
                let mut got = [0u8; crate::layout::SLOT_BYTES];
                let got = got.get_mut(..len).ok_or(bad)?;
                for part in parts {
                    got.get_mut(at..at + part.len())
                        .ok_or(bad)?
                        .copy_from_slice(part);
                    at += part.len();
                }
                if at != len {
                    return Err(bad);
                }
                out.copy_from_slice(got);
                return Ok(());
            }
            To::Fixed(_) => return Err(bad),
            To::Stream { sink, limit } => {
                let announced = len as u64;
                if announced > *limit {
                    return Err(crate::Error::TooLarge {
                        lane: 0,
                        len: announced,
                        limit: *limit,
                    }
                    .into());
                }
                if !sink.start(0, announced) {
                    return Err(crate::Error::Sink { lane: 0 }.into());
                }
                for part in parts {
                    if part.is_empty() {
                        continue;
                    }
                    if at + part.len() > len {
                        return Err(bad);
                    }
                    sink.chunk(0, at as u64, part);
                    at += part.len();
                }
            }
        }
        match at == len {
            true => Ok(()),
            false => Err(bad),
        }
    }
}

impl core::fmt::Debug for WholeReply<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WholeReply")
            .field("shape", &self.shape())
            .finish()
    }
}

/// A transport's path that carries a call whole: the request as one message, the reply (or the
/// error) as one message back.
///
/// ```text
///  client (generated method)            transport                  bridge (a site with ports)
///  shape function asks site.whole()
///  WholeRequest { opcode, prefix,  ──── one message ───────────▶  replay(site, request, reply)
///                 body, reply shape }                               the same shape function,
///                                                                   on the bridge's site
///  WholeReply::deliver(bytes)      ◀─── one message ────────────  reply bytes, or the Error
///  (fixed: exactly its bytes;            (or the error)
///   stream: through the call's sink,
///   bounded by its limit)
/// ```
///
/// A [`CallSite`](super::CallSite) with such a path gives it through
/// [`CallSite::whole`](super::CallSite::whole); every shape function of the generated calls asks
/// it first and then uses nothing else of the site. Every other site's `CallSite::Whole` is
/// [`NoWhole`], a type with no values: `whole` is then always `None` and the check compiles away.
/// On a GPU the check is left out altogether (no GPU site carries calls whole), so a GPU
/// program's code is what it was without this path.
///
/// **The invariant.** A whole call returns `Ok` only with the bytes the other side delivered as
/// the reply, checked against the call's shape here: a fixed reply of exactly the call's length,
/// a stream no longer than the call's limit, nothing for a one-way call. Anything else is
/// [`Status::BadResponse`] (or the stream's refusal), never a value.
pub trait WholeCall {
    /// Makes the call `request` and hands its reply to `reply` ([`WholeReply::deliver`]).
    /// Returns the error the other side sent (the server's status, its transport's failure), or
    /// this transport's own (no server, a deadline), or `deliver`'s.
    fn call_whole(&self, request: &WholeRequest<'_>, reply: WholeReply<'_>) -> Result<(), Error>;
}

/// The whole-call path of a [`CallSite`](super::CallSite) that has none (every site with
/// ports): a type with no values, so [`CallSite::whole`](super::CallSite::whole) can only be
/// `None` and the check for it compiles away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoWhole {}

impl WholeCall for NoWhole {
    fn call_whole(&self, _request: &WholeRequest<'_>, _reply: WholeReply<'_>) -> Result<(), Error> {
        match *self {}
    }
}

/// A call carried whole, served in this process by a derived service's handler
/// (`Handler::handle_whole`): its fixed arguments and its streamed argument read where they lie,
/// its reply handed to the call's [`WholeReply`] as one message. The call is checked as the
/// packets check it, before its handler runs: arguments of another length than the call's, or
/// that do not decode, or a streamed argument the call does not take (or missing), or text that
/// is not UTF-8, are [`Status::BadRequest`]; a streamed argument over the call's limit
/// [`Status::Rejected`]; an opcode the service does not have [`Status::UnknownOpcode`]; a reply
/// shape the call does not have ([`ReplyShape::None`] for a call that answers, or the other way
/// round) [`Status::BadRequest`]. The handshake is declined (`None`): a transport answers it
/// itself.
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct WholeVia<'a, 'r> {
    /// The call.
    pub request: &'a WholeRequest<'a>,
    /// Where its reply goes.
    pub reply: WholeReply<'r>,
}

#[cfg(feature = "std")]
impl<'a> WholeVia<'a, '_> {
    /// The status `code` of call `opcode` as the client would see it.
    fn refused(&self, code: u32) -> Option<Result<(), Error>> {
        Some(Err(Error::Status(Status::from_code(
            code,
            self.request.opcode,
        ))))
    }

    /// The fixed arguments (exactly `Q` bytes) and the streamed argument (where the call takes
    /// one: at most its `stream` limit) of the call, and whether its reply shape is the call's
    /// (`oneway`: none); the status that refuses it otherwise.
    fn parts<const Q: usize>(
        &self,
        oneway: bool,
        stream: Option<u64>,
    ) -> Result<(&'a [u8], &'a [u8]), u32> {
        use super::status;
        let request = self.request;
        if request.prefix.len() != Q || oneway != (request.reply == ReplyShape::None) {
            return Err(status::BAD_REQUEST);
        }
        match (stream, request.body) {
            (None, None) => Ok((request.prefix, &[])),
            (Some(limit), Some(body)) if body.len() as u64 > limit => Err(status::REJECTED),
            (Some(_), Some(body)) => Ok((request.prefix, body)),
            _ => Err(status::BAD_REQUEST),
        }
    }

    /// Delivers a fixed reply: the first bytes of a slot that holds `out` (the rest zero), as
    /// many as the call asked for (at most a slot).
    fn fixed_reply(mut self, out: &[u8]) -> Option<Result<(), Error>> {
        let mut slot = [0u8; crate::layout::SLOT_BYTES];
        let n = out.len().min(slot.len());
        slot[..n].copy_from_slice(&out[..n]);
        let asked = match self.reply.shape() {
            ReplyShape::Fixed(len) if len <= slot.len() => len,
            ReplyShape::None => return Some(Ok(())),
            _ => return self.refused(super::status::BAD_REQUEST),
        };
        Some(self.reply.deliver(&slot[..asked]))
    }
}

#[cfg(feature = "std")]
impl<'a, 'r> super::__private::Via<'a> for WholeVia<'a, 'r> {
    /// `None`: declined (the handshake); else the call's outcome, its reply delivered.
    type Out = Option<Result<(), Error>>;
    type Replies = WholeReplies<'r>;

    fn fixed<const Q: usize, const R: usize, A>(
        self,
        _made: super::__private::Call<Q, R>,
        _infallible: bool,
        decode: impl Fn(&[u8]) -> Option<A>,
        mut serve: impl FnMut(A, &mut [u8; R]),
    ) -> Self::Out {
        let fixed = match self.parts::<Q>(false, None) {
            Ok((fixed, _)) => fixed,
            Err(code) => return self.refused(code),
        };
        let Some(args) = decode(fixed) else {
            return self.refused(super::status::BAD_REQUEST);
        };
        let mut out = [0u8; R];
        serve(args, &mut out);
        self.fixed_reply(&out)
    }

    fn in_place<const Q: usize, const R: usize, A, T>(
        self,
        _made: super::__private::Call<Q, R>,
        oneway: bool,
        stream: Option<u64>,
        decode: impl Fn(&[u8]) -> Option<A>,
        mut call: impl FnMut(A, &[u8]) -> T,
        encode: impl Fn(&T, &mut [u8; R]),
    ) -> Self::Out {
        let (fixed, body) = match self.parts::<Q>(oneway, stream) {
            Ok(parts) => parts,
            Err(code) => return self.refused(code),
        };
        let Some(args) = decode(fixed) else {
            return self.refused(super::status::BAD_REQUEST);
        };
        let reply = call(args, body);
        if oneway {
            return Some(Ok(()));
        }
        let mut out = [0u8; R];
        encode(&reply, &mut out);
        self.fixed_reply(&out)
    }

    #[allow(clippy::type_complexity)]
    fn copied<const Q: usize, const R: usize, A, T>(
        self,
        made: super::__private::Call<Q, R>,
        oneway: bool,
        stream: Option<u64>,
        text: bool,
        decode: impl Fn(&[u8]) -> Option<A>,
        mut call: impl FnMut(A, &'a [u8]) -> T,
        send: impl FnOnce(&mut Self::Replies, &[Option<T>; 64]) -> Result<super::Served, crate::Error>,
    ) -> Self::Out {
        let (fixed, body) = match self.parts::<Q>(oneway, stream) {
            Ok(parts) => parts,
            Err(code) => return self.refused(code),
        };
        let args = match decode(fixed) {
            Some(args) if !text || core::str::from_utf8(body).is_ok() => args,
            _ => return self.refused(super::status::BAD_REQUEST),
        };
        let reply = call(args, body);
        if oneway {
            return Some(Ok(()));
        }
        let mut replies: [Option<T>; 64] = core::array::from_fn(|_| None);
        replies[0] = Some(reply);
        let mut out = WholeReplies {
            opcode: made.opcode,
            reply: self.reply,
            result: Ok(()),
        };
        if let Err(e) = send(&mut out, &replies) {
            return Some(Err(e.into()));
        }
        Some(out.result)
    }

    fn unknown(self) -> Self::Out {
        self.refused(super::status::UNKNOWN_OPCODE)
    }

    fn declined(self) -> Self::Out {
        None
    }
}

/// Where a whole call's reply goes from a handler's `send` ([`WholeVia`]): lane 0's reply,
/// delivered to the call's [`WholeReply`] with the checks the packets make (a stream over the
/// call's limit is [`Status::ReplyTooLarge`], as a client through the packets refuses it).
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct WholeReplies<'r> {
    opcode: u32,
    reply: WholeReply<'r>,
    result: Result<(), Error>,
}

#[cfg(feature = "std")]
impl super::__private::Replies for WholeReplies<'_> {
    fn opcode(&self) -> u32 {
        self.opcode
    }

    fn send_lane_parts<'b>(
        &mut self,
        mut parts: impl FnMut(u32) -> (&'b [u8], &'b [u8]),
    ) -> Result<super::Served, crate::Error> {
        let (head, bytes) = parts(0);
        let len = head.len() + bytes.len();
        let took = match self.reply.shape() {
            ReplyShape::Stream { limit } => limit,
            _ => 0,
        };
        self.result = match self.reply.deliver_parts(len, [head, bytes]) {
            Err(Error::Transport(super::Transport::Protocol(crate::Error::TooLarge {
                len,
                limit,
                ..
            }))) => Err(Error::Status(Status::ReplyTooLarge { len, limit })),
            Err(Error::Transport(super::Transport::Protocol(crate::Error::Sink { .. }))) => {
                Err(Error::Status(Status::ReplyTooLarge {
                    len: len as u64,
                    limit: took,
                }))
            }
            other => other,
        };
        Ok(super::Served {
            opcode: self.opcode,
            status: super::status::OK,
        })
    }

    fn send_slots(
        &mut self,
        mut fill: impl FnMut(&mut crate::Slot, u32),
    ) -> Result<(), crate::Error> {
        let mut slot = crate::Slot::default();
        fill(&mut slot, 0);
        let bytes = slot.as_bytes();
        self.result = match self.reply.shape() {
            ReplyShape::Fixed(len) if len <= bytes.len() => self.reply.deliver(&bytes[..len]),
            _ => Err(Error::Status(Status::BadRequest)),
        };
        Ok(())
    }
}
