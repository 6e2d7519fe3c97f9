//! Async calls: `Counter::async_client(&shm)`, whose methods are `async fn`s that any executor
//! (tokio, smol, a hand-written one) can await, with no thread held while a call waits.
//!
//! An awaited call claims a port as a blocking one does, hands its request over in the port's
//! inline lines with the *wake* bit of its lengths word set, and spins briefly for the reply
//! (most replies come within a microsecond). If none came, its task sleeps: the call registers
//! its waker with the handle's *reactor*, and the reactor sleeps on the file's *doorbell*.
//!
//! ```text
//! worker, after a waking request's reply           reactor (one thread per handle, while calls wait)
//!   store the reply word (release)                   seen = doorbell.rings
//!   ready[port] |= bit            (SeqCst)           doorbell.sleepers += 1          (SeqCst)
//!   if doorbell.sleepers != 0     (SeqCst)           look at ready[its ports]        (SeqCst)
//!       doorbell.rings += 1                          wake the calls whose bits are set, clear them
//!       futex wake (shared)                          none: futex wait while rings == seen
//!                                                    doorbell.sleepers -= 1
//! ```
//!
//! Either the reactor's look sees the ready bit, or the worker's load sees it among the sleepers
//! and rings (both sides' accesses are sequentially consistent), and a ring between the reactor's
//! reading of `rings` and its wait ends the wait at once: no reply is slept through. The reactor
//! also wakes calls at their deadlines, wakes every call when the server dies, and sleeps at most
//! `reactor::TICK` at a time while calls wait (a call that misses a ring is so woken late, never lost).
//! A handle with no call waiting has a reactor asleep on a condition variable, or none at all.
//!
//! A call the inline lines do not carry (a one-way call, a streamed reply, a stream longer than
//! the bulk area) is made by the blocking client on a handle's *helper threads*
//! ([`HELPERS`] at most, started when first needed, each with a handle of its own), while the
//! task awaits its result.
//!
//! A call dropped before its reply (a cancelled task, a `select!` that took another branch)
//! abandons its port: the server still answers the request, then takes the port back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ferry_rpc::__private::Reply;
use ferry_rpc::service::{self, status, AsyncSite, Helpers, Site, Status, Transport, INLINE_BYTES};

use crate::client::{Claim, ShmClient};
use crate::inline::{self, lens, ClientInline};
use crate::owner::release;
use crate::reactor::Reactor;
use crate::sync::{AtomicBool, Ordering};
use crate::wait::ClientWait;

/// How long a call spins for its reply before its task sleeps: a fast handler's reply comes
/// within it (a round trip is well under a microsecond), and a slow one's costs no more. A time,
/// not a count of polls: a poll's pause lasts a few nanoseconds on some processors and tens on
/// others.
const SPIN_FOR: Duration = Duration::from_micros(2);
/// Polls between two readings of the clock while a call spins.
const SPIN_CLOCK_EVERY: u32 = 16;
/// The most helper threads a handle runs blocking calls on at once (others queue).
pub const HELPERS: usize = 16;
/// The first and the longest pause between two searches for a free port.
const CLAIM_PAUSE: (Duration, Duration) = (Duration::from_micros(20), Duration::from_millis(1));

/// Waits for reply `next` on a port whose request asked for a ring.
struct ReplyWait<'a> {
    inline: &'a ClientInline<'a, ClientWait>,
    reactor: &'a Reactor,
    next: u32,
    want: usize,
    until: Instant,
    spun: bool,
    id: Option<u64>,
}

impl Future for ReplyWait<'_> {
    type Output = Result<u64, Transport>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(answer) = self.inline.reply_in(self.next, self.want) {
            return Poll::Ready(Ok(answer));
        }
        if !self.spun {
            self.spun = true;
            let until = Instant::now() + SPIN_FOR;
            let mut polls = 0u32;
            loop {
                std::hint::spin_loop();
                if let Some(answer) = self.inline.reply_in(self.next, self.want) {
                    return Poll::Ready(Ok(answer));
                }
                polls += 1;
                if polls.is_multiple_of(SPIN_CLOCK_EVERY) && Instant::now() >= until {
                    break;
                }
            }
        }
        if self.reactor.server_gone() {
            return Poll::Ready(Err(Transport::NoServer));
        }
        if Instant::now() >= self.until {
            return Poll::Ready(Err(Transport::Deadline));
        }
        let id = self
            .reactor
            .register(self.id, Some(self.inline.port), self.until, cx.waker());
        self.id = Some(id);
        // A reply that came before the registration has its ring lost to the reactor (the bit
        // may be set with no call registered for it): look once more.
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Some(answer) = self.inline.reply_in(self.next, self.want) {
            return Poll::Ready(Ok(answer));
        }
        Poll::Pending
    }
}

impl Drop for ReplyWait<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.reactor.unregister(id);
        }
    }
}

/// Sleeps until `until` (a pause between two searches for a free port).
struct Pause<'a> {
    reactor: &'a Reactor,
    until: Instant,
    id: Option<u64>,
}

impl Future for Pause<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.until || self.reactor.server_gone() {
            return Poll::Ready(());
        }
        let id = self.reactor.register(self.id, None, self.until, cx.waker());
        self.id = Some(id);
        Poll::Pending
    }
}

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.reactor.unregister(id);
        }
    }
}

// ---- the calls ----

impl ShmClient {
    /// The handle's reactor, started on first use.
    fn reactor(&self) -> &Reactor {
        self.parts
            .reactor
            .get_or_init(|| Reactor::new(Arc::clone(self.mapped())))
    }

    /// Claims a free port for an awaited call, pausing (its task asleep) while none is free,
    /// until `until`.
    async fn claim_awaited(&self, until: Instant) -> Result<(u32, u64), Transport> {
        let mut pause = CLAIM_PAUSE.0;
        loop {
            if let Some(claim) = self.claim_once(self.next_async_port())? {
                return Ok(claim);
            }
            let now = Instant::now();
            if now >= until {
                return Err(Transport::NoFreePort);
            }
            let reactor = self.reactor();
            if reactor.server_gone() {
                return Err(Transport::NoServer);
            }
            Pause {
                reactor,
                until: (now + pause).min(until),
                id: None,
            }
            .await;
            pause = (pause * 2).min(CLAIM_PAUSE.1);
        }
    }

    /// One awaited call in the inline lines: `request`, then `body` (in the bulk area or the
    /// lines), the reply's first `reply.len()` bytes into `reply`. Returns the reply's status, or
    /// `None` if the lines do not carry this call (nothing was run: the caller makes it another
    /// way).
    async fn awaited(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        request: &[u8],
        body: Option<&[u8]>,
        reply: &mut [u8],
    ) -> Result<Option<u32>, service::Error> {
        let mapped = self.mapped();
        if !mapped.geometry().serves_inline()
            || request.len() > INLINE_BYTES
            || reply.len() > INLINE_BYTES
        {
            return Ok(None);
        }
        let limit = deadline.unwrap_or(self.config().deadline);
        let until = Instant::now()
            .checked_add(limit)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        let (port, mine) = self
            .claim_awaited(until)
            .await
            .map_err(service::Error::Transport)?;
        let mut held = Claim {
            word: &mapped.owners()[port as usize],
            mine,
            armed: true,
        };
        let wait = ClientWait::new(Arc::clone(mapped), limit);
        let armed = AtomicBool::new(inline::is_armed(mapped.inline_bitmap(), port));
        let line = ClientInline::new(
            mapped.inline_bitmap(),
            mapped.inline_lines(),
            mapped.inline_wide(),
            true,
            port,
            &wait,
            &armed,
            mapped.bulk_areas(),
        );
        let want = reply.len();
        let posted = match body {
            None => line.post(
                opcode,
                request,
                lens::pack(request.len(), want, 0, false) | lens::WAKE,
                |_| {},
            ),
            Some(body) => line.with_body(
                request,
                body.len(),
                want,
                |area| area.copy_from_slice(body),
                |request, lens, body| {
                    line.post(opcode, request, lens | lens::WAKE, |area| body.write(area))
                },
            ),
        };
        let next = match posted {
            // Nothing sent: the port is at rest, free it.
            None => {
                held.armed = false;
                release(held.word, mine);
                return Ok(None);
            }
            Some(Err(e)) => return Err(service::Error::Transport(Transport::Protocol(e))),
            Some(Ok(next)) => next,
        };
        let answer = ReplyWait {
            inline: &line,
            reactor: self.reactor(),
            next,
            want,
            until,
            spun: false,
            id: None,
        }
        .await
        .map_err(service::Error::Transport)?;
        let status = line.take(answer, reply);
        held.armed = false;
        // The claim is the call's identity (as for a blocking call): one taken from us meanwhile
        // may have had its reply read by another call.
        if !release(held.word, mine) {
            return Err(service::Error::Transport(Transport::PortLost { port }));
        }
        Ok(status)
    }
}

/// The status of a reply as a result (as the generated calls check it).
fn checked(code: u32, opcode: u32) -> Result<(), service::Error> {
    if code == status::OK {
        Ok(())
    } else {
        Err(service::Error::Status(Status::from_code(code, opcode)))
    }
}

/// Awaited calls through a handle: a fixed call, or one with a streamed argument that fits the
/// port's bulk area (or the lines), waits in place (see the module docs); any other call runs on
/// the handle's helper threads.
impl AsyncSite for ShmClient {
    type Blocking = ShmClient;

    async fn call_fixed<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        request: [u8; Q],
    ) -> Result<Reply<R>, service::Error> {
        let mut reply = Reply::<R>::new();
        match self
            .awaited(deadline, opcode, &request, None, &mut reply.bytes)
            .await?
        {
            Some(code) => checked(code, opcode).map(|()| reply),
            None => {
                self.blocking(deadline, move |site: &ShmClient, d| {
                    Site::call(site, d, |claim| {
                        ferry_rpc::__private::call_fixed::<_, Q, R>(claim, opcode, &request)
                    })
                })
                .await
            }
        }
    }

    async fn call_stream<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        prefix: [u8; Q],
        body: &[u8],
    ) -> Result<Reply<R>, service::Error> {
        let mut reply = Reply::<R>::new();
        match self
            .awaited(deadline, opcode, &prefix, Some(body), &mut reply.bytes)
            .await?
        {
            Some(code) => checked(code, opcode).map(|()| reply),
            None => {
                let body = body.to_vec();
                self.blocking(deadline, move |site: &ShmClient, d| {
                    Site::call(site, d, |claim| {
                        ferry_rpc::__private::call_stream::<_, Q, R>(
                            claim, opcode, &prefix, &body, false,
                        )
                    })
                })
                .await
            }
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&ShmClient, Option<Duration>) -> T + Send + 'static,
    ) -> T {
        // Each helper thread with a handle of its own on the file.
        let handle = |i: usize| self.handle(i as u32 * 7 + 1);
        self.helpers().run(handle, deadline, call).await
    }
}

impl ShmClient {
    fn helpers(&self) -> &Helpers<ShmClient> {
        self.parts
            .helpers
            .get_or_init(|| Helpers::new(HELPERS, "ferry-helper"))
    }
}

// What the handle's docs promise: an awaited call's future may move between threads.
const _: () = {
    fn send<T: Send>(_: &T) {}
    #[allow(dead_code)]
    fn futures_are_send(shm: &ShmClient) {
        send(&shm.call_fixed::<8, 8>(None, 0, [0; 8]));
        send(&shm.call_stream::<8, 8>(None, 0, [0; 8], &[]));
        send(&shm.blocking(None, |_, _| ()));
    }
};
