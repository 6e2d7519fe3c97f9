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
//! [`TICK`] at a time while calls wait (a call that misses a ring is so woken late, never lost).
//! A handle with no call waiting has a reactor asleep on a condition variable, or none at all.
//!
//! A call the inline lines do not carry (a one-way call, a streamed reply, a stream longer than
//! the bulk area) is made by the blocking client on a handle's *helper threads*
//! ([`HELPERS`] at most, started when first needed, each with a handle of its own), while the
//! task awaits its result.
//!
//! A call dropped before its reply (a cancelled task, a `select!` that took another branch)
//! abandons its port: the server still answers the request, then takes the port back.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry_rpc::__private::Reply;
use ferry_rpc::service::{self, status, AsyncSite, Helpers, Site, Status, Transport, INLINE_BYTES};

use crate::client::{Claim, ShmClient};
use crate::file::Mapped;
use crate::inline::{self, lens, ClientInline};
use crate::owner::release;
use crate::sync::{word_bit, AtomicBool, Ordering};
use crate::wait::{server_alive, ClientWait};

/// The longest a reactor sleeps at once while calls wait.
pub const TICK: Duration = Duration::from_millis(1);
/// How often a reactor with calls waiting checks that the server is alive.
const LIVENESS: Duration = Duration::from_millis(50);
/// How long a call spins for its reply before its task sleeps: a fast handler's reply comes
/// within it (a round trip is well under a microsecond), and a slow one's costs no more. A time,
/// not a count of polls: a poll's pause lasts a few nanoseconds on some processors and tens on
/// others.
const SPIN_FOR: Duration = Duration::from_micros(2);
/// Polls between two readings of the clock while a call spins.
const SPIN_CLOCK_EVERY: u32 = 16;
/// Looks at the ready bits a reactor takes after waking calls before it sleeps again (a few
/// microseconds): replies that come in bursts are taken without a ring each.
const AWAKE_LOOKS: u32 = 32;
/// The most helper threads a handle runs blocking calls on at once (others queue).
pub const HELPERS: usize = 16;
/// The first and the longest pause between two searches for a free port.
const CLAIM_PAUSE: (Duration, Duration) = (Duration::from_micros(20), Duration::from_millis(1));

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- the reactor ----

/// A handle's reactor: wakes the tasks whose calls wait (see the module docs).
#[derive(Debug)]
pub(crate) struct Reactor {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    mapped: Arc<Mapped>,
    state: Mutex<State>,
    /// Signalled when a call registers with no call waiting before, or the handle closes.
    work: Condvar,
    /// Set once the server was found dead: every call fails.
    server_gone: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// The calls waiting, by their registration number.
    waiting: HashMap<u64, Waiting>,
    /// The waiting call on each port whose reply it waits for.
    by_port: HashMap<u32, u64>,
    /// One bit per port in `by_port`, as the ready bitmap's words.
    mine: Vec<u32>,
    /// The earliest time a waiting call is to be woken at (a deadline, the end of a pause).
    earliest: Option<Instant>,
    next_id: u64,
    closed: bool,
}

#[derive(Debug)]
struct Waiting {
    port: Option<u32>,
    until: Instant,
    waker: Waker,
}

impl State {
    fn remove(&mut self, id: u64) -> Option<Waiting> {
        let waiting = self.waiting.remove(&id)?;
        if let Some(port) = waiting.port {
            self.by_port.remove(&port);
            let (w, bit) = word_bit(port as usize);
            self.mine[w] &= !bit;
        }
        Some(waiting)
    }
}

impl Reactor {
    fn new(mapped: Arc<Mapped>) -> Reactor {
        let words = mapped.inline_ready().len();
        let shared = Arc::new(Shared {
            mapped,
            state: Mutex::new(State {
                mine: vec![0; words],
                ..State::default()
            }),
            work: Condvar::new(),
            server_gone: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ferry-reactor".into())
                .spawn(move || shared.run())
                .expect("starting the thread that wakes a ferry handle's awaited calls")
        };
        Reactor {
            shared,
            thread: Mutex::new(Some(thread)),
        }
    }

    /// Registers (or updates: `id`) a call's waker, to be woken when `port`'s ready bit is set or
    /// at `until`. Returns its registration number.
    fn register(&self, id: Option<u64>, port: Option<u32>, until: Instant, waker: &Waker) -> u64 {
        let mut st = lock(&self.shared.state);
        let was_idle = st.waiting.is_empty();
        let id = id.unwrap_or_else(|| {
            st.next_id += 1;
            st.next_id
        });
        match st.waiting.get_mut(&id) {
            Some(w) => w.waker.clone_from(waker),
            None => {
                if let Some(port) = port {
                    st.by_port.insert(port, id);
                    let (w, bit) = word_bit(port as usize);
                    st.mine[w] |= bit;
                }
                st.waiting.insert(
                    id,
                    Waiting {
                        port,
                        until,
                        waker: waker.clone(),
                    },
                );
            }
        }
        st.earliest = Some(st.earliest.map_or(until, |e| e.min(until)));
        drop(st);
        if was_idle {
            self.shared.work.notify_one();
        }
        id
    }

    /// Forgets a registration (a call that completed or was dropped).
    fn unregister(&self, id: u64) {
        lock(&self.shared.state).remove(id);
    }

    fn server_gone(&self) -> bool {
        self.shared.server_gone.load(Ordering::Relaxed)
    }

    /// Ends the reactor's thread (the handle is dropped: no call waits any more).
    pub(crate) fn close(&self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_one();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        let doorbell = self.mapped.doorbell();
        let ready = self.mapped.inline_ready();
        let mut checked = Instant::now();
        loop {
            let seen = doorbell.rings.load(Ordering::SeqCst);
            {
                let mut st = lock(&self.state);
                loop {
                    if st.closed {
                        return;
                    }
                    if !st.waiting.is_empty() {
                        break;
                    }
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
            // Looks while replies come (no worker rings meanwhile: this reactor is not among the
            // sleepers), then once more counted among them before it sleeps.
            let mut looks = 0;
            let mut woke = self.scan(ready).0;
            while !woke && looks < AWAKE_LOOKS {
                std::hint::spin_loop();
                woke = self.scan(ready).0;
                looks += 1;
            }
            if !woke {
                // SYNC (async wake): SeqCst, counted among the sleepers before the last look at
                // the ready bits; pairs with the worker's SeqCst set of a bit then load of the
                // count (`ring`).
                doorbell.sleepers.fetch_add(1, Ordering::SeqCst);
                let (woke, wake_at) = self.scan(ready);
                if !woke {
                    let now = Instant::now();
                    let nap =
                        wake_at.map_or(TICK, |at| at.saturating_duration_since(now).min(TICK));
                    if !nap.is_zero() {
                        sleep_on(&doorbell.rings, seen, nap);
                    }
                }
                doorbell.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
            if checked.elapsed() >= LIVENESS {
                checked = Instant::now();
                if !server_alive(&self.mapped) {
                    self.server_gone.store(true, Ordering::Relaxed);
                    let all: Vec<Waker> = {
                        let mut st = lock(&self.state);
                        let ids: Vec<u64> = st.waiting.keys().copied().collect();
                        ids.into_iter()
                            .filter_map(|id| st.remove(id).map(|w| w.waker))
                            .collect()
                    };
                    all.into_iter().for_each(Waker::wake);
                }
            }
        }
    }

    /// Wakes the waiting calls whose ready bits are set (clearing them) or whose time has come.
    /// Returns whether any was woken, and the earliest time one is to be woken at.
    fn scan(&self, ready: &[crate::sync::AtomicU32]) -> (bool, Option<Instant>) {
        let mut wakers = Vec::new();
        let mut st = lock(&self.state);
        for (w, word) in ready.iter().enumerate() {
            let mine = st.mine[w];
            if mine == 0 {
                continue;
            }
            // SYNC (async wake): see `run`.
            let bits = word.load(Ordering::SeqCst) & mine;
            if bits == 0 {
                continue;
            }
            word.fetch_and(!bits, Ordering::Relaxed);
            let mut left = bits;
            while left != 0 {
                let port = (w * 32) as u32 + left.trailing_zeros();
                left &= left - 1;
                if let Some(id) = st.by_port.get(&port).copied() {
                    wakers.extend(st.remove(id).map(|w| w.waker));
                }
            }
        }
        let now = Instant::now();
        if st.earliest.is_some_and(|e| e <= now) {
            let due: Vec<u64> = st
                .waiting
                .iter()
                .filter(|(_, w)| w.until <= now)
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                wakers.extend(st.remove(id).map(|w| w.waker));
            }
            st.earliest = st.waiting.values().map(|w| w.until).min();
        }
        let earliest = st.earliest;
        drop(st);
        let woke = !wakers.is_empty();
        wakers.into_iter().for_each(Waker::wake);
        (woke, earliest)
    }
}

/// Sleeps while `rings` holds `seen`, at most `nap` (under a second): a futex shared between
/// processes, since the ringers are other processes on the same mapped file.
#[cfg(not(loom))]
fn sleep_on(rings: &crate::sync::AtomicU32, seen: u32, nap: Duration) {
    let timeout = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: nap.subsec_nanos() as _,
    };
    let _ = rustix::thread::futex::wait(
        rings,
        rustix::thread::futex::Flags::empty(),
        seen,
        Some(&timeout),
    );
}

/// Under loom (whose models never run a reactor), a plain sleep.
#[cfg(loom)]
fn sleep_on(_rings: &crate::sync::AtomicU32, _seen: u32, nap: Duration) {
    std::thread::sleep(nap);
}

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

/// A handle's async parts, made when first used and ended with it.
#[derive(Debug, Default)]
pub(crate) struct AsyncParts {
    pub(crate) reactor: OnceLock<Reactor>,
    pub(crate) helpers: OnceLock<Helpers<ShmClient>>,
}

impl Drop for AsyncParts {
    fn drop(&mut self) {
        if let Some(reactor) = self.reactor.get() {
            reactor.close();
        }
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
