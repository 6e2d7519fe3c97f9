//! What a host transport's server serves (feature `std`): a [`Handler`], one trait for every
//! transport, and the buffers each serving thread receives streamed requests into.
//!
//! A transport's server opens a port with a request on it and hands it to its handler; the
//! handler receives the request and replies. Derived services bound to their handlers
//! (`Counter::server(h)`, several with `.and(..)`: [`Serving`], [`Both`]) are handlers on every
//! transport, and so is a closure over the transport's server port. The trait is generic over
//! the transport's mailbox `M` and wait policy `W`, so one impl serves them all; each transport
//! names its own port type (`ferry_shm::ServerPort`, `ferry_gpu::ServerPort`) for closures.
//!
//! A handler written by hand implements the trait for every transport at once, never naming a
//! transport's types (`M` and `W` stay parameters):
//!
//! ```
//! use ferry_rpc::service::Handler;
//! use ferry_rpc::{Mailbox, Port, Server, Single, Wait};
//!
//! /// Answers every call with its first word plus one.
//! struct AddOne;
//!
//! impl<M: Mailbox, W: Wait> Handler<M, W> for AddOne {
//!     fn handle(&self, port: &mut Port<'_, '_, Server, Single, M, W>) -> Result<(), ferry_rpc::Error> {
//!         port.recv_and_send(|slot, _| slot.words[0] += 1)
//!     }
//! }
//! # fn takes<M: Mailbox, W: Wait>(_: &impl Handler<M, W>) {}
//! # takes::<ferry_rpc::PerPort, ferry_rpc::Spin>(&AddOne);
//! ```
//!
//! (A handler that needs one transport's own view of the port, such as `ferry_shm::Caller`,
//! implements the trait for that transport's mailbox and wait policy, or is a closure over its
//! `ServerPort`.)

use std::boxed::Box;
use std::cell::RefCell;
use std::vec::Vec;

use super::{
    opcode_collision, AsyncServing, Both, Collision, Dispatch, DispatchLater, InlineLanes,
    LaneBuffers, Later, Services, Serving, INLINE_BYTES,
};
use crate::mailbox::Mailbox;
use crate::port::Port;
use crate::process::Server;
use crate::stream::StreamSink;
use crate::wait::Wait;
use crate::{Error, Single};

/// What a server does with a request: receives it on the port and replies (see the module docs).
///
/// A handler returning an error (the client stalled or died mid-call) is counted as failed by
/// the transport; if it still holds the packet, the transport sends it back with
/// [`status::SERVER_ERROR`](super::status::SERVER_ERROR).
pub trait Handler<M: Mailbox, W: Wait>: Sync {
    /// Serves the request waiting on `port` (its opcode is `port.opcode()`). The port is closed
    /// after this returns; a packet still held goes back to the client.
    fn handle(&self, port: &mut Port<'_, '_, Server, Single, M, W>) -> Result<(), Error>;

    /// Serves a call that came inline (a few cache lines, on transports that have such a path):
    /// `request`'s bytes in (and `body`, the call's streamed argument where it has one, read
    /// where the transport put it: empty for a call without one), the reply's written at the
    /// start of `reply`; returns the status to send back and the reply's length in bytes, or
    /// `None` if this call cannot be served inline (the client then makes it through the
    /// packets). A derived service forwards to its generated `dispatch_inline`. Only called if
    /// [`serves_inline`](Self::serves_inline) says so.
    #[inline]
    fn handle_inline(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        let _ = (opcode, request, body, reply);
        None
    }

    /// Serves every lane of a call that came on a GPU's word lines (`ferry_rpc::words`): as
    /// [`handle_inline`](Self::handle_inline) for each lane (the default does exactly that), but
    /// with one dispatch for the call, as a derived service does (its generated
    /// `dispatch_inline_lanes`). Only called if [`serves_inline`](Self::serves_inline) says so.
    #[inline]
    fn handle_inline_lanes(&self, opcode: u32, lanes: &mut InlineLanes<'_>) {
        crate::words::lane_by_lane(|opcode, request, out| {
            self.handle_inline(opcode, request, &[], out)
        })(opcode, lanes)
    }

    /// Whether this handler answers inline calls.
    fn serves_inline(&self) -> bool {
        false
    }

    /// Serves a call carried whole (a network's message: `WholeRequest`) in this process, with
    /// no port: its reply (or its error) handed to `reply`, the call checked as the packets
    /// check it (see `__private::WholeVia`). `None` if this handler does not serve calls so (a
    /// handler written by hand, the handshake): the transport then makes the call through a
    /// port. A derived service serves every one of its calls so.
    fn handle_whole(
        &self,
        request: &super::WholeRequest<'_>,
        reply: super::WholeReply<'_>,
    ) -> Option<Result<(), super::Error>> {
        let _ = (request, reply);
        None
    }

    /// Serves an inline call as a task that answers through `later` afterwards (an async
    /// handler), or gives `later` back if it does not serve this call so (the transport then
    /// calls [`handle_inline`](Self::handle_inline)). Only called if
    /// [`answers_later`](Self::answers_later) says so. The default serves none so.
    fn handle_inline_later(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        later: Box<dyn Later>,
    ) -> Result<(), Box<dyn Later>> {
        let _ = (opcode, request, body);
        Err(later)
    }

    /// Whether [`handle_inline_later`](Self::handle_inline_later) may take a call (the
    /// transport then keeps each port whose call it took until the answer).
    fn answers_later(&self) -> bool {
        false
    }

    /// The derived services this handler serves, by name and schema fingerprint (a transport
    /// lists them for clients to check when they connect). A hand-written handler serves none by
    /// name.
    fn services(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The calls of each derived service this handler serves, by service name (a transport
    /// keeps them for tools that list and call a running server's services). A hand-written
    /// handler lists none.
    fn calls(&self) -> Vec<(&'static str, &'static [super::CallInfo])> {
        Vec::new()
    }

    /// Two of the services this handler serves that share an opcode, if any: a server refuses to
    /// start rather than send one service's calls to the other.
    fn collision(&self) -> Option<Collision> {
        None
    }

    /// Frees what the handler keeps for clients that are gone (files, memory: whatever it holds
    /// per client). A transport's server calls it now and then from a thread that serves no
    /// calls (`ferry_shm`'s monitor, once every `reclaim_interval`), while calls are being
    /// served, so it must not hold up what they wait on for long. The default does nothing; a
    /// derived service bound to its handler ([`Serving`], [`Both`]) keeps it (its handler may
    /// be any type): a handler that keeps per-client resources is served through a handler of
    /// its own that forwards this (`ferry_libc_host::LibcHost` is one).
    fn reclaim(&self) {}
}

/// A closure over a server port is a handler (it serves no inline calls and no service by name):
/// `|port: &mut ferry_shm::ServerPort| port.recv_and_send(|slot, _| slot.words[0] += 1)`.
impl<F, M: Mailbox, W: Wait> Handler<M, W> for F
where
    F: Fn(&mut Port<'_, '_, Server, Single, M, W>) -> Result<(), Error> + Sync,
{
    fn handle(&self, port: &mut Port<'_, '_, Server, Single, M, W>) -> Result<(), Error> {
        self(port)
    }
}

/// The items of a set of derived services ([`Serving`], [`Both`]): calls through the packets to
/// [`Services::dispatch`], streamed arguments into this thread's buffers
/// ([`with_stream_buffers`]); inline calls to [`Services::dispatch_inline`]; the services listed
/// by name.
macro_rules! services_handler {
    // Each call to the services' `serve` (several services: to the one that has it), or with
    // `$service, $field`, straight to service `$service`'s generated `serve` with the handler in
    // field `$field` (one service: no hop through `Services`).
    ($($service:ident, $field:ident)?) => {
        #[inline]
        fn handle(&self, port: &mut Port<'_, '_, Server, Single, M, W>) -> Result<(), Error> {
            let opcode = port.opcode();
            with_stream_buffers(|buffers| {
                let via = super::__private::PacketVia { port, buffers };
                services_handler!(@serve self, opcode, via $(, $service, $field)?)
            })
            .map(|_| ())
        }

        #[inline]
        fn handle_inline(
            &self,
            opcode: u32,
            request: &[u8],
            body: &[u8],
            reply: &mut [u8; INLINE_BYTES],
        ) -> Option<(u32, usize)> {
            let via = super::__private::InlineVia {
                request,
                body,
                reply,
            };
            services_handler!(@serve self, opcode, via $(, $service, $field)?)
        }

        #[inline]
        fn handle_inline_lanes(&self, opcode: u32, lanes: &mut InlineLanes<'_>) {
            let via = super::__private::LanesVia { lanes };
            services_handler!(@serve self, opcode, via $(, $service, $field)?)
        }

        fn handle_whole(
            &self,
            request: &super::WholeRequest<'_>,
            reply: super::WholeReply<'_>,
        ) -> Option<Result<(), super::Error>> {
            let opcode = request.opcode;
            let via = super::__private::WholeVia { request, reply };
            services_handler!(@serve self, opcode, via $(, $service, $field)?)
        }

        services_handler!(@rest);
    };
    (@serve $me:ident, $opcode:ident, $via:ident) => {
        Services::serve($me, $opcode, $via)
    };
    (@serve $me:ident, $opcode:ident, $via:ident, $service:ident, $field:ident) => {
        $service::serve(&$me.$field, $opcode, $via)
    };
    (@rest) => {
        fn serves_inline(&self) -> bool {
            true
        }

        fn handle_inline_later(
            &self,
            opcode: u32,
            request: &[u8],
            body: &[u8],
            later: Box<dyn Later>,
        ) -> Result<(), Box<dyn Later>> {
            Services::dispatch_later(self, opcode, request, body, later)
        }

        fn answers_later(&self) -> bool {
            Services::answers_later(self)
        }

        fn services(&self) -> Vec<(&'static str, u64)> {
            listed(self)
        }

        fn calls(&self) -> Vec<(&'static str, &'static [super::CallInfo])> {
            let mut out = Vec::new();
            Services::each(self, &mut |name, _, _, calls| out.push((name, calls)));
            out
        }

        fn collision(&self) -> Option<Collision> {
            opcode_collision(self)
        }
    };
}

/// A derived service bound to its handler (`Counter::server(handler)`) is a [`Handler`]: each
/// call goes to the service's generated dispatch; an opcode the service does not have is answered
/// `status::UNKNOWN_OPCODE`.
impl<S, H, M: Mailbox, W: Wait> Handler<M, W> for Serving<S, H>
where
    S: Dispatch<H>,
    H: Sync,
{
    services_handler!(S, handler);
}

/// Several services served together (`Counter::server(a).and(Libc::server(b))`): each call goes to
/// the service that has its opcode, one no service has to the last added (which answers
/// `status::UNKNOWN_OPCODE`).
impl<A, B, M: Mailbox, W: Wait> Handler<M, W> for Both<A, B>
where
    A: Services + Sync,
    B: Services + Sync,
{
    services_handler!();
}

/// A derived service bound to an async handler (`Counter::async_server(handler, spawn)`): as
/// [`Serving`], the calls that came inline served as tasks.
impl<S, H, M: Mailbox, W: Wait> Handler<M, W> for AsyncServing<S, H>
where
    S: DispatchLater<H>,
    H: Send + Sync,
{
    services_handler!();
}

fn listed(services: &impl Services) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    services.each(&mut |name, fingerprint, _, _| out.push((name, fingerprint)));
    out
}

/// A serving thread's buffers for streamed requests: one growable buffer per lane, kept between
/// calls, and for each lane whether its last stream was left in the port's bulk area to be read
/// in place (see [`StreamSink::view`]: a stream that arrived whole in the area is not copied).
#[derive(Debug, Default)]
pub struct StreamBuffers {
    owned: Vec<Vec<u8>>,
    /// Per lane: the length of a stream left in place, or `None`.
    in_place: Vec<Option<usize>>,
}

impl StreamBuffers {
    fn lane_slot(&mut self, lane: u32) -> usize {
        let lane = lane as usize;
        if self.in_place.len() <= lane {
            self.in_place.resize(lane + 1, None);
        }
        lane
    }
}

impl StreamSink for StreamBuffers {
    fn start(&mut self, lane: u32, len: u64) -> bool {
        let at = self.lane_slot(lane);
        self.in_place[at] = None;
        self.owned.start(lane, len)
    }

    fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]) {
        self.owned.chunk(lane, offset, bytes);
    }

    fn view(&mut self, lane: u32, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        let at = self.lane_slot(lane);
        self.in_place[at] = Some(len);
        true
    }
}

impl LaneBuffers for StreamBuffers {
    fn lane(&self, lane: u32) -> &[u8] {
        if self.in_place(lane).is_some() {
            return &[];
        }
        self.owned.lane(lane)
    }

    fn in_place(&self, lane: u32) -> Option<usize> {
        self.in_place.get(lane as usize).copied().flatten()
    }
}

std::thread_local! {
    /// Where a serving thread receives streamed requests; kept between calls.
    static BUFFERS: RefCell<StreamBuffers> = RefCell::new(StreamBuffers::default());
}

/// Runs `f` with this thread's buffers for streamed requests (one per lane, grown as needed and
/// kept between calls: each serving thread has its own), or with fresh ones if they are in use
/// (a handler that serves another call from inside its own).
pub fn with_stream_buffers<R>(f: impl FnOnce(&mut StreamBuffers) -> R) -> R {
    BUFFERS.with(|buffers| match buffers.try_borrow_mut() {
        Ok(mut buffers) => f(&mut buffers),
        Err(_) => f(&mut StreamBuffers::default()),
    })
}

/// How a server step ended ([`serve_packet`], [`serve_lanes`]), for a transport's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The handler served the call.
    Served,
    /// The handler returned an error (the client stalled or died mid-call).
    Failed,
    /// The handler panicked; the panic was caught and the call answered
    /// [`status::SERVER_ERROR`](super::status::SERVER_ERROR).
    Panicked,
}

/// The server step every transport's worker loop takes for a call through the packets: `handler`
/// serves the request on `port`, a panic in it is caught (the thread goes on serving: its ports
/// are not left unanswered), and a handler that failed or panicked while it held the packet has
/// the packet go back with [`status::SERVER_ERROR`](super::status::SERVER_ERROR) when the port
/// closes, so the client gets an error rather than a reply that was never written.
pub fn serve_packet<M, W, H>(handler: &H, port: &mut Port<'_, '_, Server, Single, M, W>) -> Outcome
where
    M: Mailbox,
    W: Wait,
    H: Handler<M, W> + ?Sized,
{
    let outcome =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler.handle(port))) {
            Ok(Ok(())) => Outcome::Served,
            Ok(Err(_)) => Outcome::Failed,
            Err(_) => Outcome::Panicked,
        };
    if outcome != Outcome::Served && port.owns_packet() {
        port.set_header(
            crate::HeaderWord::Status,
            super::status::SERVER_ERROR.into(),
        );
    }
    outcome
}

/// The server step for a call on a GPU's word lines: `handler` serves the lanes
/// ([`Handler::handle_inline_lanes`]); a panic in it is caught, and every lane it had not
/// answered gets [`status::SERVER_ERROR`](super::status::SERVER_ERROR) (a lane declined instead
/// would make the call again through the packets, running the handler that panicked a second
/// time).
pub fn serve_lanes<M, W, H>(handler: &H, opcode: u32, lanes: &mut InlineLanes<'_>) -> Outcome
where
    M: Mailbox,
    W: Wait,
    H: Handler<M, W> + ?Sized,
{
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handler.handle_inline_lanes(opcode, lanes)
    }));
    match served {
        Ok(()) => Outcome::Served,
        Err(_) => {
            lanes.fail_unanswered(super::status::SERVER_ERROR);
            Outcome::Panicked
        }
    }
}
