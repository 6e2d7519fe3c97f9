//! Serving derived services: a service bound to its handler, and several served together.

use core::marker::PhantomData;

use super::__private::{InlineVia, LanesVia, PacketVia, Via};
use super::{CallInfo, Dispatch, InlineLanes, LaneBuffers, Served, HANDSHAKE, INLINE_BYTES};
use crate::lanes::Lanes;
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::Server;
use crate::wait::Wait;

/// Service `S` bound to a handler of type `H` (`Counter::server(handler)`): what a transport's
/// server serves. [`and`](Self::and) adds another service to serve on the same ports.
pub struct Serving<S, H> {
    pub(super) handler: H,
    service: PhantomData<fn() -> S>,
}

impl<S, H> Serving<S, H> {
    /// `handler` serving `S` (the derive's `S::server(handler)` calls this).
    pub fn new(handler: H) -> Self {
        Serving {
            handler,
            service: PhantomData,
        }
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// These calls and those of `other`, served together.
    pub fn and<T: Services>(self, other: T) -> Both<Self, T> {
        Both(self, other)
    }
}

/// Two sets of services served together (see [`Serving::and`]).
pub struct Both<A, B>(pub A, pub B);

impl<A, B> Both<A, B> {
    /// These calls and those of `other`, served together.
    pub fn and<T: Services>(self, other: T) -> Both<Self, T> {
        Both(self, other)
    }
}

/// One or more services, each with its handler: what a transport's server dispatches calls to.
/// Implemented by [`Serving`] and [`Both`]; user code builds them (`Counter::server(h)
/// .and(Libc::server(host))`) and never names this trait.
pub trait Services {
    /// Whether one of the services has a call with `opcode`.
    fn has_opcode(&self, opcode: u32) -> bool;

    /// Calls `f` with each service's name, fingerprint and opcodes, in the order they were added.
    fn each(&self, f: &mut dyn FnMut(&'static str, u64, &'static [u32], &'static [CallInfo]));

    /// Serves call `opcode` with the service that has it, as `via` (the path it came by)
    /// carries it; a call none has gets `status::UNKNOWN_OPCODE` (from the last added).
    fn serve<'v, V: Via<'v>>(&'v self, opcode: u32, via: V) -> V::Out;

    /// Serves the call on `port` ([`serve`](Self::serve) through the packets).
    #[inline(always)]
    fn dispatch<L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        &self,
        port: &mut Port<'_, '_, Server, L, M, W>,
        buffers: &mut B,
    ) -> Result<Served, crate::Error> {
        let opcode = port.opcode();
        self.serve(opcode, PacketVia { port, buffers })
    }

    /// Serves an inline call (`body`: its streamed argument, if it has one).
    #[inline(always)]
    fn dispatch_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        let via = InlineVia {
            request,
            body,
            reply,
        };
        self.serve(opcode, via)
    }

    /// Serves every lane of a call that came on a word line.
    #[inline(always)]
    fn dispatch_inline_lanes(&self, opcode: u32, lanes: &mut InlineLanes<'_>) {
        self.serve(opcode, LanesVia { lanes })
    }

    /// Serves an inline call as a task that answers through `later` afterwards (an async
    /// handler: [`AsyncServing`](super::AsyncServing)), or gives `later` back if this call is not
    /// served so (the transport then serves it with [`dispatch_inline`](Self::dispatch_inline)).
    /// The default serves none so.
    #[cfg(feature = "std")]
    fn dispatch_later(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        later: std::boxed::Box<dyn super::Later>,
    ) -> Result<(), std::boxed::Box<dyn super::Later>> {
        let _ = (opcode, request, body);
        Err(later)
    }

    /// Whether [`dispatch_later`](Self::dispatch_later) may take a call.
    #[cfg(feature = "std")]
    fn answers_later(&self) -> bool {
        false
    }
}

impl<S: Dispatch<H>, H> Services for Serving<S, H> {
    #[inline]
    fn has_opcode(&self, opcode: u32) -> bool {
        S::has_opcode(opcode)
    }

    fn each(&self, f: &mut dyn FnMut(&'static str, u64, &'static [u32], &'static [CallInfo])) {
        f(S::NAME, S::FINGERPRINT, S::OPCODES, S::CALLS);
    }

    #[inline(always)]
    fn serve<'v, V: Via<'v>>(&'v self, opcode: u32, via: V) -> V::Out {
        S::serve(&self.handler, opcode, via)
    }
}

impl<A: Services, B: Services> Services for Both<A, B> {
    #[inline]
    fn has_opcode(&self, opcode: u32) -> bool {
        self.0.has_opcode(opcode) || self.1.has_opcode(opcode)
    }

    fn each(&self, f: &mut dyn FnMut(&'static str, u64, &'static [u32], &'static [CallInfo])) {
        self.0.each(f);
        self.1.each(f);
    }

    #[inline(always)]
    fn serve<'v, V: Via<'v>>(&'v self, opcode: u32, via: V) -> V::Out {
        // The handshake belongs to no one service: with several served, each client checks its
        // own service when it connects (the transport's table), so the first answers it.
        if opcode != HANDSHAKE && !self.0.has_opcode(opcode) {
            self.1.serve(opcode, via)
        } else {
            self.0.serve(opcode, via)
        }
    }

    #[cfg(feature = "std")]
    fn dispatch_later(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        later: std::boxed::Box<dyn super::Later>,
    ) -> Result<(), std::boxed::Box<dyn super::Later>> {
        if self.0.has_opcode(opcode) {
            self.0.dispatch_later(opcode, request, body, later)
        } else {
            self.1.dispatch_later(opcode, request, body, later)
        }
    }

    #[cfg(feature = "std")]
    fn answers_later(&self) -> bool {
        self.0.answers_later() || self.1.answers_later()
    }
}

/// Two services served together that share an opcode: calls with it would reach only the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collision {
    /// The service added first.
    pub first: &'static str,
    /// The service added later.
    pub second: &'static str,
    /// The opcode both have.
    pub opcode: u32,
}

impl core::fmt::Display for Collision {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "services `{}` and `{}` both have opcode {:#010x}: give one call an explicit \
             `#[rpc(opcode = N)]`",
            self.first, self.second, self.opcode
        )
    }
}

/// The first pair of `services` that share an opcode (servers check this before they serve: with
/// hashed opcodes a collision is rare, but a call would silently reach the wrong service).
pub fn opcode_collision<T: Services + ?Sized>(services: &T) -> Option<Collision> {
    let mut found = None;
    let mut i = 0;
    services.each(&mut |first, _, ours, _| {
        let mut j = 0;
        services.each(&mut |second, _, theirs, _| {
            if j > i && found.is_none() {
                if let Some(&opcode) = ours.iter().find(|o| theirs.contains(o)) {
                    found = Some(Collision {
                        first,
                        second,
                        opcode,
                    });
                }
            }
            j += 1;
        });
        i += 1;
    });
    found
}

/// Whether a service's name fits the table transports keep of what they serve: not empty, at
/// most [`SERVICE_NAME_BYTES`], and no NUL byte (which ends a name there).
pub const fn name_fits(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > SERVICE_NAME_BYTES {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            return false;
        }
        i += 1;
    }
    true
}

/// The longest service name a transport's table of served services holds, in bytes.
pub const SERVICE_NAME_BYTES: usize = 48;
