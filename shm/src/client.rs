//! The client: attaches to a server's file and makes calls.
//!
//! A call takes a *seat* of the handle (what one call in flight holds of its own: a handle is
//! shared by threads, one seat per call at once; see [`ShmClient`]), claims a free port through
//! its owner word and runs on it as a [`Claimed`] port: a small fixed call goes through the
//! port's inline line directly; any other call gets an ferry-rpc process made for the claim on
//! first use, over a lock bitmap private to the seat (every bit always set: the claimed port is
//! handed to the process with `Process::adopt_port`, so no search, lock or unlock runs, and
//! taken back when the claim is dropped). Then the claim is released. With
//! [`ClientConfig::sticky`] the seat keeps the claim for its next call instead (no
//! compare-and-swap either: a call then costs the protocol's handoff alone), until the handle is
//! dropped, [`ShmClient::release_port`] is called, or the server drains. A call that fails
//! mid-way (or panics) abandons the port instead: its state is unknown, and only the server may
//! take it back.

use std::cell::OnceCell;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ferry_rpc::service::{self, CallSite, Service, Site, Transport};
use ferry_rpc::{Client, ClientProcess, Port, Single};

use crate::error::ShmError;
use crate::file::{self, Mapped};
use crate::header::{Geometry, STATE_SERVING, STATE_STOPPED};
use crate::inline::{self, ClientInline};
use crate::owner::{abandon, current_holder, holder_of, release, still_held, try_claim, NoHolder};
use crate::sync::{word_bit, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::wait::ClientWait;
use crate::ShmMailbox;

/// An open port on the client side, as a call's closure sees it.
pub type ClientPort<'p, 'a> = Port<'p, 'a, Client, Single, ShmMailbox, &'a ClientWait>;

/// A client process over one claimed port (see [`Claimed`]).
pub type ClaimedProcess<'a> = ClientProcess<'a, Single, ShmMailbox, &'a ClientWait>;

/// A claimed port: what one call of a derived service's client runs on when it calls through an
/// [`ShmClient`] (its [`ferry_rpc::service::Site`]). It is an [`ferry_rpc::service::CallSite`]: a
/// call that fits the port's inline line goes there directly, and a client process on the port
/// ([`ClaimedProcess`], also reached by dereferencing) is made only when a call needs the
/// packets, once per claim.
///
/// Its own functions are associated functions ([`Claimed::port`]`(&p)`), so that they never
/// hide a generated call of the same name.
pub struct Claimed<'a> {
    /// The port's inline path; also its index and the handle's wait policy.
    inline: &'a ClientInline<'a, ClientWait>,
    /// Dropped by the claim's `drop` (`ManuallyDrop`: a claim that made no process then drops
    /// nothing, in line).
    process: std::mem::ManuallyDrop<OnceCell<ClaimedProcess<'a>>>,
    mapped: &'a Mapped,
    locks: &'a [AtomicU32],
}

impl<'a> Claimed<'a> {
    /// The claimed port's index.
    pub fn port(this: &Self) -> u32 {
        this.inline.port
    }

    /// The client process on the claimed port (made on first use): it holds this port and no
    /// other. Its calls go through the packets: the inline line is the claim's own path (a
    /// generated client called on the claim itself tries it first), not the process's.
    #[inline]
    pub fn process(this: &Self) -> &ClaimedProcess<'a> {
        this.process.get_or_init(|| {
            // `locks` has the layout's lock words and one lane fits any region (both checked
            // when the file was attached), so `new` cannot fail here.
            let wait = this.inline.wait;
            let process = ClientProcess::new(this.mapped.region(), this.locks, Single, wait)
                .expect("the region was checked when the file was attached");
            // SAFETY: every bit of the client handle's private bitmap is set and no other handle
            // uses it, so `port` is locked on this process's behalf alone; the claim's `drop`
            // takes it back (`take_kept`) before the process is dropped, on every path out of
            // the call, unwinding included.
            unsafe { process.adopt_port(this.inline.port) }
        })
    }
}

impl Drop for Claimed<'_> {
    /// Keeps the handle's private bitmap all set, whatever the call did (unwinding included): a
    /// process dropped with its port kept would clear that port's bit, and the handle could then
    /// open the port later while another handle holds it. A claim whose calls all went inline
    /// made no process, and its drop is this one test, inlined into the call.
    #[inline(always)]
    fn drop(&mut self) {
        if self.process.get().is_some() {
            // SAFETY: called once, here, from the claim's drop; the claim is not used after it.
            unsafe { self.drop_process() };
        }
        // (An empty cell holds nothing to drop.)
    }
}

impl Claimed<'_> {
    /// The end of a claim that made a process (out of line: a call through the packets only):
    /// gives the process's port back to the claim's bitmap and drops the process.
    ///
    /// # Safety
    ///
    /// Called at most once, from the claim's drop: the cell is dropped here, and not used after.
    #[cold]
    #[inline(never)]
    unsafe fn drop_process(&mut self) {
        if let Some(process) = self.process.get() {
            if process.take_kept().is_none() {
                // The process released the port (it found the packet with the server) and
                // cleared its bit: set it again.
                let (w, bit) = word_bit(self.inline.port as usize);
                self.locks[w].fetch_or(bit, Ordering::Relaxed);
            }
        }
        // SAFETY: the caller's contract: this is the cell's one drop, and nothing uses it after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.process) }
    }
}

impl<'a> std::ops::Deref for Claimed<'a> {
    type Target = ClaimedProcess<'a>;

    /// The claim's client process ([`Claimed::process`]), for code written against a process.
    fn deref(&self) -> &ClaimedProcess<'a> {
        Claimed::process(self)
    }
}

impl<'a> CallSite for Claimed<'a> {
    type Lanes = Single;
    type Mailbox = ShmMailbox;
    type Wait = &'a ClientWait;
    type Inline = ClientInline<'a, ClientWait>;
    type Whole = ferry_rpc::service::NoWhole;

    /// The claim's inline line, where the server serves inline calls (its file's header says
    /// so).
    #[inline]
    fn inline(&self) -> Option<&ClientInline<'a, ClientWait>> {
        self.inline.serves.then_some(self.inline)
    }

    #[inline]
    fn process(&self) -> &ClientProcess<'_, Single, ShmMailbox, &'a ClientWait> {
        Claimed::process(self)
    }
}

/// How a client attaches.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The services this client will call, by name and fingerprint: attaching fails unless the
    /// server serves each (see [`ClientConfig::service`]).
    pub services: Vec<(&'static str, u64)>,
    /// How long a call may take, from claiming a port to its reply, every wait of the call
    /// together (a generated client's `with_deadline` overrides it for its calls). A call past it
    /// returns `Transport::Deadline` (`ShmError::Deadline` for a raw call), or
    /// `Transport::NoFreePort` if no port became free, and never a reply that came after it.
    /// The time is counted from the first reading of the clock in the call (after at most a few
    /// hundred polls: a call answered within them reads no clock) and the clock is read between
    /// every two waits of the backoff, so a call returns within the deadline plus the time its
    /// thread was not running since the last reading: about a millisecond on a loaded machine
    /// (a scheduler's time slice), microseconds on an idle one.
    pub deadline: Duration,
    /// Keep the claimed port between calls (until the handle is dropped or
    /// [`ShmClient::release_port`]): each call then skips the claim's compare-and-swap and the
    /// release. The price: the handle holds a port while idle (one per seat: a handle that
    /// threads called at once holds one per thread that did, see [`ShmClient`]), so a server
    /// needs a port for each, or others wait for a free one until their deadline. A server that
    /// drains waits a short grace for idle sticky holders (`ShmServer::shutdown`).
    pub sticky: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            services: Vec::new(),
            deadline: Duration::from_secs(10),
            sticky: false,
        }
    }
}

impl ClientConfig {
    /// This configuration, also expecting service `S` to be served: attaching checks that the
    /// server serves a service of that name with the same schema fingerprint, and fails with
    /// [`ShmError::NotServed`] (naming the service) otherwise.
    pub fn service<S: Service>(mut self) -> Self {
        self.services.push((S::NAME, S::FINGERPRINT));
        self
    }

    /// This configuration with [`sticky`](Self::sticky) set.
    pub fn sticky(mut self, sticky: bool) -> Self {
        self.sticky = sticky;
        self
    }

    /// This configuration with [`deadline`](Self::deadline) set.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}

/// A client handle on a server's file: where the clients of derived services make their calls
/// (`Counter::client(&shm)`).
///
/// **Threads.** A handle is `Send` and `Sync`: threads share one (`&shm` in scoped threads, an
/// `Arc<ShmClient>` in others), and so does a generated client over it (`Counter::client(&shm)`
/// is `Send + Sync + Copy`, and may be held across an `.await`; its calls block the thread
/// until their reply, as every call of this transport does). Each call in flight takes a *seat*
/// of the handle for its length: the seat holds what a call needs of its own (the claim's private
/// lock bitmap, the wait and deadline, a sticky claim kept between calls). A handle has one seat
/// to begin with, which a lone thread's calls always take; a call that finds its seat taken (by
/// another thread's call) takes another, made when first needed and kept after, up to
/// [`SEATS`], and calls beyond that many at once each sit on a seat made for it alone. A thread
/// goes back to the seat it took last, so threads that call together settle on a seat each.
///
/// A handle of its own per thread ([`handle`](Self::handle)) still works, and is the fastest
/// where threads call all the time: no two threads meet at a seat.
///
/// ```
/// use ferry_demo::{Demo, DemoService};
/// use ferry_shm::{path_for, ClientConfig, ServerConfig, ShmClient, ShmServer};
///
/// let path = path_for(&format!("doc-threads-{}", std::process::id()));
/// let server = ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService))?;
/// let shm = ShmClient::attach(&path, ClientConfig::default().service::<Demo>())?;
/// let demo = Demo::client(&shm);
/// std::thread::scope(|s| {
///     for t in 0..4u64 {
///         s.spawn(move || assert_eq!(demo.add(t, 1), Ok(t + 1)));
///     }
/// });
/// # drop(shm);
/// # server.shutdown(std::time::Duration::from_secs(5));
/// # Ok::<(), ferry_shm::ShmError>(())
/// ```
#[derive(Debug)]
pub struct ShmClient {
    mapped: Arc<Mapped>,
    config: ClientConfig,
    /// This process in owner words (`owner::holder`).
    holder: u32,
    /// The seat a lone thread's calls take: in the handle itself, no pointer to follow.
    first: Seat,
    /// The other seats, `SEATS - 1` of them, each made when a call first needs it.
    more: Box<[OnceLock<Box<Seat>>]>,
    /// Where the next awaited call's search for a free port starts.
    async_cursor: AtomicU32,
    /// The reactor and helper threads of awaited calls (`awaited`), made when first used.
    pub(crate) parts: AsyncParts,
}

/// How many seats a handle keeps ([`ShmClient`], on threads): calls beyond that many in flight
/// at once each sit on a seat made for that call alone (and dropped after it).
pub const SEATS: usize = 64;

/// What one call in flight holds of its handle, for the length of the call. A seat is taken by
/// one call at a time (`taken`), so its words, though atomics (to make the handle `Sync`), are
/// used as one thread's: relaxed, and ordered by the seat's hand-over.
#[derive(Debug)]
struct Seat {
    /// Whether a call sits here. SYNC (seat hand-over): taken with acquire, left with release,
    /// so what one call did to the words below happens before the next call's reads.
    taken: AtomicBool,
    /// The private lock bitmap of the seat's claims' processes (every bit always set: see
    /// `Claimed`). One per seat: a process that gives its port up clears that port's bit until
    /// its claim is dropped, and no other call's process may find that bit meanwhile.
    locks: Box<[AtomicU32]>,
    /// The wait policy and deadline of the seat's call.
    wait: ClientWait,
    /// Where the seat's next claim search starts: the port its last call used.
    cursor: AtomicU32,
    /// The port of the claim a sticky seat keeps between calls, or `NO_CLAIM`; its owner word
    /// in `held_mine`.
    held_port: AtomicU32,
    held_mine: AtomicU64,
    /// Whether the current claim's port has its inline bit set, as far as this seat knows
    /// (found set when claimed, or set by its first inline call; `inline`).
    inline_armed: AtomicBool,
}

/// A seat's `held_port` when it keeps no claim (no port index reaches it).
const NO_CLAIM: u32 = u32::MAX;

impl Seat {
    fn new(mapped: &Arc<Mapped>, config: &ClientConfig, cursor: u32) -> Seat {
        let words = mapped.geometry().layout().lock_words();
        Seat {
            taken: AtomicBool::new(false),
            locks: (0..words).map(|_| AtomicU32::new(u32::MAX)).collect(),
            wait: ClientWait::new(Arc::clone(mapped), config.deadline),
            cursor: AtomicU32::new(cursor),
            held_port: AtomicU32::new(NO_CLAIM),
            held_mine: AtomicU64::new(0),
            inline_armed: AtomicBool::new(false),
        }
    }

    /// Takes the seat for a call, if no call sits here.
    #[inline(always)]
    fn try_take(&self) -> bool {
        self.taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The kept claim as `(port, its owner word)`, taking it from the seat.
    #[inline(always)]
    fn take_held(&self) -> Option<(u32, u64)> {
        let port = self.held_port.load(Ordering::Relaxed);
        if port == NO_CLAIM {
            return None;
        }
        self.held_port.store(NO_CLAIM, Ordering::Relaxed);
        Some((port, self.held_mine.load(Ordering::Relaxed)))
    }

    /// Keeps the claim of `port` whose owner word is `mine` for the seat's next call.
    #[inline(always)]
    fn keep(&self, port: u32, mine: u64) {
        self.held_mine.store(mine, Ordering::Relaxed);
        self.held_port.store(port, Ordering::Relaxed);
    }

    /// The port of the kept claim, if any.
    fn held_port(&self) -> Option<u32> {
        let port = self.held_port.load(Ordering::Relaxed);
        (port != NO_CLAIM).then_some(port)
    }

    /// Gives back the kept claim, if any (the seat is the caller's: taken, or its handle's by
    /// `&mut`). The last call completed (only then is a claim kept), so the packet is at rest.
    fn release_held(&self) {
        if let Some((port, mine)) = self.take_held() {
            self.end_claim(port, mine);
        }
    }

    /// Gives back a claim whose last call completed: frees the owner word. The port's inline
    /// line stays armed (the next claim of the port, by any client, is likely soon and then skips
    /// arming it); the server's monitor disarms a port left idle (`inline` module docs).
    /// Returns whether the claim was still ours (a claim taken from us is not ours to free:
    /// `release` leaves it).
    fn end_claim(&self, port: u32, mine: u64) -> bool {
        self.inline_armed.store(false, Ordering::Relaxed);
        release(&self.wait.mapped().owners()[port as usize], mine)
    }
}

/// A seat taken by one call: left when dropped (also when the call panics).
enum Sitting<'c> {
    /// One of the handle's seats.
    Kept(&'c Seat),
    /// A seat made for this call alone (every seat of the handle was taken): its kept claim, if
    /// any, is given back when it is dropped (`ManuallyDrop`: by `spare_done`, out of line, so
    /// that a kept seat's end stays one store in the call).
    Spare(std::mem::ManuallyDrop<Box<Seat>>),
}

impl std::ops::Deref for Sitting<'_> {
    type Target = Seat;

    #[inline(always)]
    fn deref(&self) -> &Seat {
        match self {
            Sitting::Kept(seat) => seat,
            Sitting::Spare(seat) => seat,
        }
    }
}

impl Drop for Sitting<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        match self {
            // SYNC (seat hand-over): release; pairs with the next call's acquire in `try_take`.
            Sitting::Kept(seat) => seat.taken.store(false, Ordering::Release),
            // SAFETY: called once, here, from the sitting's drop; the seat is not used after it.
            Sitting::Spare(seat) => unsafe { spare_done(seat) },
        }
    }
}

/// A spare seat's end (out of line: a lone thread's calls never take one): gives its kept claim
/// back and drops it.
///
/// # Safety
///
/// Called at most once for `seat`, from its sitting's drop: the seat is dropped here, and not
/// used after.
#[cold]
#[inline(never)]
unsafe fn spare_done(seat: &mut std::mem::ManuallyDrop<Box<Seat>>) {
    seat.release_held();
    // SAFETY: the caller's contract: this is the seat's one drop, and nothing uses it after.
    unsafe { std::mem::ManuallyDrop::drop(seat) }
}

std::thread_local! {
    /// The seat this thread's last call took (an index among a handle's seats, 0 the first): the
    /// one its next call tries first, on whichever handle.
    static LAST_SEAT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Abandons a claimed port unless disarmed (a closure that panicked, an exchange that failed, an
/// awaited call dropped with its request pending).
pub(crate) struct Claim<'a> {
    pub(crate) word: &'a AtomicU64,
    pub(crate) mine: u64,
    pub(crate) armed: bool,
}

impl Drop for Claim<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.armed {
            // (A claim taken from us is not ours to abandon: `abandon` leaves it.)
            let _ = abandon(self.word, self.mine);
        }
    }
}

/// A handle's async parts (module `awaited`), made when first used and ended with it.
#[derive(Debug, Default)]
pub(crate) struct AsyncParts {
    pub(crate) reactor: std::sync::OnceLock<crate::reactor::Reactor>,
    pub(crate) helpers: std::sync::OnceLock<ferry_rpc::service::Helpers<ShmClient>>,
}

impl Drop for AsyncParts {
    fn drop(&mut self) {
        if let Some(reactor) = self.reactor.get() {
            reactor.close();
        }
    }
}

// What the handle's docs promise, checked where it is defined: shared by threads (and so is a
// generated client over it: `tests/local.rs`).
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<ShmClient>();
};

impl ShmClient {
    /// Attaches to the server's file at `path`, checking every header field first, and that the
    /// server serves every service `config` expects.
    pub fn attach(path: impl AsRef<Path>, config: ClientConfig) -> Result<ShmClient, ShmError> {
        let holder = current_holder().map_err(|e| match e {
            NoHolder::PidTooLarge(pid) => ShmError::PidTooLarge(pid),
            NoHolder::NoStartTime(source) => ShmError::Io {
                op: "reading this process's start time (a client is named by it) from",
                path: "/proc/self/stat".into(),
                source,
            },
        })?;
        let mapped = Arc::new(file::attach(path.as_ref(), &config.services)?);
        // Each handle starts at the next port: processes spread evenly over the ports (they
        // rarely race for one), and so over the workers.
        let cursor = mapped.doorbell().attaches.fetch_add(1, Ordering::Relaxed);
        Ok(Self::on(mapped, config, holder, cursor))
    }

    fn on(mapped: Arc<Mapped>, config: ClientConfig, holder: u32, cursor: u32) -> ShmClient {
        let ports = mapped.geometry().layout().ports();
        let cursor = cursor % ports;
        ShmClient {
            first: Seat::new(&mapped, &config, cursor),
            more: (1..SEATS).map(|_| OnceLock::new()).collect(),
            async_cursor: AtomicU32::new(cursor),
            parts: AsyncParts::default(),
            holder,
            config,
            mapped,
        }
    }

    /// Another handle on the same file, with seats of its own, starting its searches at
    /// `cursor`: for a thread that calls often and should never meet another at a seat.
    pub fn handle(&self, cursor: u32) -> ShmClient {
        Self::on(
            Arc::clone(&self.mapped),
            self.config.clone(),
            self.holder,
            cursor,
        )
    }

    /// The mapped file.
    pub(crate) fn mapped(&self) -> &Arc<Mapped> {
        &self.mapped
    }

    /// How the handle attached.
    pub(crate) fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Where the next awaited call's search for a free port starts: each call one port further,
    /// so that calls in flight together spread over the ports (and the workers that poll them).
    pub(crate) fn next_async_port(&self) -> u32 {
        let ports = self.mapped.geometry().layout().ports();
        self.async_cursor.fetch_add(1, Ordering::Relaxed) % ports
    }

    /// The region's geometry.
    pub fn geometry(&self) -> &Geometry {
        self.mapped.geometry()
    }

    /// The path of the server's file this handle attached to.
    pub fn path(&self) -> &Path {
        self.mapped.path()
    }

    /// Whether the server this handle attached to is still there to answer: not stopped, and
    /// its process alive. (A server that ended, or a new one started at the same path, is never
    /// reached through this handle again: attach anew.)
    pub fn server_alive(&self) -> bool {
        crate::wait::server_alive(&self.mapped)
    }

    /// The services the server serves, by name and fingerprint.
    pub fn services(&self) -> &[(String, u64)] {
        self.mapped.services()
    }

    /// The calls of each service the server serves (in the order of
    /// [`services`](Self::services)), as text: one call a line, as
    /// `ferry_rpc::service::CallInfo::line` writes it (`add 0x8a3c19f0 (n:u64:8) -> u64:8`).
    /// Empty for a service written by hand.
    pub fn calls(&self) -> &[String] {
        self.mapped.calls()
    }

    /// The port the last call of the calling thread's seat used (the seat its next call tries
    /// first: a handle used by one thread at a time has its calls on one seat).
    pub fn last_port(&self) -> u32 {
        self.my_seat().cursor.load(Ordering::Relaxed)
    }

    /// The port the calling thread's seat (as for [`last_port`](Self::last_port)) holds between
    /// calls (sticky handles only).
    pub fn held_port(&self) -> Option<u32> {
        self.my_seat().held_port()
    }

    /// Gives back the ports this handle's seats hold between calls (sticky handles; dropping the
    /// handle does too). A seat with a call in flight on another thread keeps its claim, and
    /// goes on keeping it after that call.
    pub fn release_port(&self) {
        for seat in self.seats() {
            if seat.try_take() {
                let sitting = Sitting::Kept(seat);
                sitting.release_held();
            }
        }
    }

    /// The seat at `index`, if it has been made.
    #[inline(always)]
    fn seat(&self, index: usize) -> Option<&Seat> {
        match index {
            0 => Some(&self.first),
            _ => self.more.get(index - 1)?.get().map(|seat| &**seat),
        }
    }

    /// The seats made so far.
    fn seats(&self) -> impl Iterator<Item = &Seat> {
        (0..SEATS).map_while(|i| self.seat(i))
    }

    /// The seat the calling thread's next call tries first.
    fn my_seat(&self) -> &Seat {
        self.seat(LAST_SEAT.with(|s| s.get()))
            .unwrap_or(&self.first)
    }

    /// Takes a seat for a call: the one this thread took last, if free.
    #[inline(always)]
    fn sit(&self) -> Sitting<'_> {
        match self.seat(LAST_SEAT.with(|s| s.get())) {
            Some(seat) if seat.try_take() => Sitting::Kept(seat),
            _ => self.sit_elsewhere(),
        }
    }

    /// Takes the first free seat, making one if every seat made is taken; a seat of its own for
    /// this call if all [`SEATS`] are. Out of line: a lone thread's calls never come here.
    #[inline(never)]
    #[cold]
    fn sit_elsewhere(&self) -> Sitting<'_> {
        let ports = self.mapped.geometry().layout().ports();
        let spread = |i: usize| (self.first.cursor.load(Ordering::Relaxed) + i as u32 * 7) % ports;
        for i in 0..SEATS {
            let seat = match i {
                0 => &self.first,
                _ => &**self.more[i - 1]
                    .get_or_init(|| Box::new(Seat::new(&self.mapped, &self.config, spread(i)))),
            };
            if !seat.taken.load(Ordering::Relaxed) && seat.try_take() {
                LAST_SEAT.with(|s| s.set(i));
                return Sitting::Kept(seat);
            }
        }
        let seat = Seat::new(&self.mapped, &self.config, spread(SEATS));
        Sitting::Spare(std::mem::ManuallyDrop::new(Box::new(seat)))
    }

    /// Makes one call on a raw port: claims a port, opens it with `opcode`, lets `exchange` send
    /// the request and receive the reply, then frees the port. (Derived services need none of
    /// this: their generated clients call through the handle.)
    pub fn call<R>(
        &self,
        opcode: u32,
        exchange: impl FnOnce(&mut ClientPort<'_, '_>) -> Result<R, ferry_rpc::Error>,
    ) -> Result<R, ShmError> {
        let result: Result<R, service::Error> = self.claimed(None, |claim| {
            match Claimed::process(claim).try_open(opcode) {
                Some(mut port) => exchange(&mut port).map_err(service::Error::from),
                // We checked the client side owned the packet before claiming, and only a claim
                // holder can change that: the file was tampered with.
                None => Err(ferry_rpc::Error::Stalled.into()),
            }
        });
        result.map_err(|e| self.shm_error(e))
    }

    /// The error a raw call reports for `e`.
    fn shm_error(&self, e: service::Error) -> ShmError {
        match e {
            service::Error::Transport(Transport::NoServer) => self.no_server(),
            service::Error::Transport(Transport::ShuttingDown) => ShmError::ShuttingDown,
            service::Error::Transport(Transport::NoFreePort) => ShmError::NoFreePort,
            service::Error::Transport(Transport::Deadline) => ShmError::Deadline,
            service::Error::Transport(Transport::PortLost { port }) => ShmError::PortLost { port },
            service::Error::Transport(Transport::Protocol(e)) => ShmError::Call(e),
            e => ShmError::Refused(e.to_string()),
        }
    }

    /// A call on a claim ([`Site::call`]).
    #[inline]
    fn claimed<R, E>(
        &self,
        deadline: Option<Duration>,
        f: impl FnOnce(&Claimed<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        Site::call(self, deadline, f)
    }

    /// The claim for a call when its seat keeps no sticky claim, when the one kept meets a
    /// server that no longer serves (`Site::call` checked: the claim is given back, the error
    /// says why; the state never returns to serving), or when the one kept was taken from us (it
    /// is forgotten and another claimed); a kept claim still ours on a server serving after all
    /// (the state word flickered under a stray write) is the call's. Out of line: a sticky
    /// handle's calls skip it (every call of a handle that is not sticky makes it).
    #[inline(never)]
    fn begin(&self, seat: &Seat, held: Option<(u32, u64)>) -> Result<(u32, u64), Transport> {
        if let Some((index, mine)) = held {
            let state = self.mapped.state().load(Ordering::Acquire);
            if state != STATE_SERVING {
                seat.end_claim(index, mine);
                return Err(self.not_serving(state));
            }
            // Serving: the claim is ours still unless it was taken from us. `Site::call` may
            // have come here on a state word read a moment ago as not serving (a stray write the
            // monitor then put back), its claim untouched: check again, and go on with it.
            if still_held(&self.mapped.owners()[index as usize], mine) {
                return Ok((index, mine));
            }
            // Taken from us. Nothing of this call has touched the port yet; it is not ours to
            // free: forget it and claim another (which sets the inline flag anew).
        }
        let (index, mine) = self.claim(seat)?;
        // A port's inline bit stays set after its claims end, until the monitor finds the port
        // idle (`inline` module docs): a new claim that finds it set need not set it.
        seat.inline_armed.store(
            inline::is_armed(self.mapped.inline_bitmap(), index),
            Ordering::Relaxed,
        );
        Ok((index, mine))
    }

    /// Claims a free port whose packet is at rest with the client side, searching from the
    /// seat's cursor.
    fn claim(&self, seat: &Seat) -> Result<(u32, u64), Transport> {
        let cursor = seat.cursor.load(Ordering::Relaxed);
        let mut polls = 0u32;
        loop {
            if let Some(claim) = self.claim_once(cursor)? {
                return Ok(claim);
            }
            if seat.wait.pause_polls(polls).is_err() {
                let state = self.mapped.state().load(Ordering::SeqCst);
                if state != STATE_SERVING || !seat.wait.server_alive() {
                    return Err(self.not_serving(state));
                }
                return Err(Transport::NoFreePort);
            }
            polls = polls.saturating_add(1);
        }
    }

    /// One search of the ports, from `cursor` on, for a free one whose packet is at rest with the
    /// client side: claims it, or `None` if every port is taken.
    pub(crate) fn claim_once(&self, cursor: u32) -> Result<Option<(u32, u64)>, Transport> {
        let owners = self.mapped.owners();
        let region = self.mapped.region();
        let ports = owners.len() as u32;
        for i in 0..ports {
            let p = (cursor + i) % ports;
            let word = &owners[p as usize];
            if holder_of(word.load(Ordering::Relaxed)) != 0 || !region.client_owns(p) {
                continue;
            }
            let Some(mine) = try_claim(word, self.holder) else {
                continue;
            };
            // SYNC (drain handshake): see `ShmServer::shutdown`.
            let state = self.mapped.state().load(Ordering::SeqCst);
            if state != STATE_SERVING {
                let _ = release(word, mine);
                return Err(self.not_serving(state));
            }
            return Ok(Some((p, mine)));
        }
        Ok(None)
    }

    fn no_server(&self) -> ShmError {
        ShmError::NoServer {
            path: self.mapped.path().to_path_buf(),
            pid: self.mapped.geometry().server_pid(),
        }
    }

    fn not_serving(&self, state: u32) -> Transport {
        if state == STATE_STOPPED || !crate::wait::server_alive(&self.mapped) {
            Transport::NoServer
        } else {
            Transport::ShuttingDown
        }
    }
}

/// Sets a call's deadline on its seat's wait policy, and puts the handle's own back when the
/// call ends (unwinding included).
struct DeadlineGuard<'a> {
    wait: &'a ClientWait,
    previous: Option<Duration>,
}

impl<'a> DeadlineGuard<'a> {
    #[inline(always)]
    fn set(wait: &'a ClientWait, deadline: Option<Duration>) -> Self {
        let previous = deadline.map(|d| wait.replace_deadline(d));
        wait.begin_call();
        DeadlineGuard { wait, previous }
    }
}

impl Drop for DeadlineGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(previous) = self.previous {
            self.wait.replace_deadline(previous);
        }
    }
}

/// The calls of a derived service's client go through the handle: each takes a seat, claims a
/// port (or takes the seat's sticky one), runs on it, and frees or keeps it.
impl Site for ShmClient {
    type Claim<'a> = Claimed<'a>;

    /// Takes a seat, claims a port (or takes the one the seat keeps), runs `f` on a client
    /// process that holds that port and no other, and frees the port (or keeps it, if sticky) if
    /// `f` succeeded or failed with an answered error while the packet is back with this side;
    /// otherwise (and if `f` panics) abandons it.
    #[inline(always)]
    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        f: impl FnOnce(&Claimed<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        // (Written out here, not in a function of its own: a call's frames from its generated
        // method to its first store stay few.)
        let seat = self.sit();
        // A sticky claim was checked against the state when it was made; a drain since then
        // must still reach us (`begin`). A kept claim is checked to be still ours (one load of a
        // word only its holder writes while the protocol is kept): one taken behind our back is
        // dropped, and a new claim made.
        // The call's deadline counts from here, over the claim and every wait of the call.
        let _deadline = DeadlineGuard::set(&seat.wait, deadline);
        let owners = self.mapped.owners();
        let (index, mine) = match seat.take_held() {
            Some(held)
                if self.mapped.state().load(Ordering::Acquire) == STATE_SERVING
                    && still_held(&owners[held.0 as usize], held.1) =>
            {
                held
            }
            held => self.begin(&seat, held).map_err(service::Error::Transport)?,
        };
        let mut claim = Claim {
            word: &owners[index as usize],
            mine,
            armed: true,
        };
        let result = {
            let inline = ClientInline::new(
                self.mapped.inline_bitmap(),
                self.mapped.inline_lines(),
                self.mapped.inline_wide(),
                self.mapped.geometry().serves_inline(),
                index,
                &seat.wait,
                &seat.inline_armed,
                self.mapped.bulk_areas(),
            );
            let claimed = Claimed {
                inline: &inline,
                process: std::mem::ManuallyDrop::new(OnceCell::new()),
                mapped: &self.mapped,
                locks: &seat.locks,
            };
            // Dropping the claim (also when `f` panics) takes its process's port back.
            match f(&claimed) {
                // A wait that gave up: at the call's deadline, or because the server is gone.
                Err(service::Error::Transport(Transport::Protocol(ferry_rpc::Error::Stalled))) => {
                    Err(service::Error::Transport(if seat.wait.expired() {
                        Transport::Deadline
                    } else if !seat.wait.server_alive() {
                        Transport::NoServer
                    } else {
                        Transport::Protocol(ferry_rpc::Error::Stalled)
                    }))
                }
                result => result,
            }
        };
        seat.cursor.store(index, Ordering::Relaxed);
        let complete = match &result {
            Ok(_) | Err(service::Error::App(_)) => true,
            // The server answered with a status: the exchange is over, if the packet is here.
            Err(service::Error::Status(_)) => self.mapped.region().client_owns(index),
            Err(service::Error::Transport(_)) => false,
        };
        if !complete {
            // Dropping the armed claim abandons the port (if it is still ours).
            return result;
        }
        claim.armed = false;
        // The claim is the call's identity: anyone else's write to this port (a client that
        // claimed it, the monitor freeing it) first changes its owner word. A call whose claim is
        // no longer ours once its reply is in may have read another call's reply: it fails, and
        // the port (no longer ours) is neither freed nor kept. A seat that frees its claim
        // checks with the release itself (a compare-and-swap from our claim); a sticky one reads
        // the word.
        let kept = if self.config.sticky {
            let kept = still_held(claim.word, mine);
            if kept {
                seat.keep(index, mine);
            } else {
                seat.inline_armed.store(false, Ordering::Relaxed);
            }
            kept
        } else {
            seat.end_claim(index, mine)
        };
        if !kept {
            return Err(service::Error::Transport(Transport::PortLost {
                port: index,
            }));
        }
        result
    }
}

impl Drop for ShmClient {
    fn drop(&mut self) {
        // No call sits anywhere: the handle is ours alone.
        for seat in self.seats() {
            seat.release_held();
        }
    }
}

/// A claim is a site of its own: calls made on it run on its port (several calls on one claim
/// need no claim each).
impl<'a> Site for Claimed<'a> {
    type Claim<'b> = Claimed<'a>;

    #[inline(always)]
    fn call<R, E>(
        &self,
        _deadline: Option<Duration>,
        call: impl FnOnce(&Claimed<'a>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        call(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{path_for, ServerConfig, ShmServer};
    use ferry_demo::{self as demo, Demo, DemoService};

    /// A demo server with one worker on a file named after `tag`, and a client attached to it.
    fn demo(tag: &str, sticky: bool) -> (ShmServer, ShmClient) {
        let path = path_for(&format!("test-{tag}-{}", std::process::id()));
        let config = ServerConfig {
            workers: 1,
            ..ServerConfig::default()
        };
        let server = ShmServer::start(&path, config, Demo::server(DemoService)).unwrap();
        let config = ClientConfig::default().service::<Demo>().sticky(sticky);
        (server, ShmClient::attach(&path, config).unwrap())
    }

    /// The claim's process is made only for calls that need the packets: an inline call makes
    /// none (what keeps a sticky inline call cheap), nor does a stream that fits the bulk area
    /// (it travels inline beside the request); a longer stream makes one.
    #[test]
    fn a_claim_makes_its_process_only_for_the_packets() {
        let (server, client) = demo("claim-process", true);
        for round in 0..3u64 {
            let (echoed, made) = client
                .claimed(None, |p| {
                    Ok::<_, service::Error>((
                        Demo::client(p).echo(round)?,
                        p.process.get().is_some(),
                    ))
                })
                .unwrap();
            assert_eq!((echoed.id, echoed.mix), (round, demo::mix(round)));
            assert!(!made, "an inline echo made a process (round {round})");
            let (summed, made) = client
                .claimed(None, |p| {
                    Ok::<_, service::Error>((
                        Demo::client(p).sum(&[1, 2, 3])?,
                        p.process.get().is_some(),
                    ))
                })
                .unwrap();
            assert_eq!((summed.len, summed.sum), (3, 6));
            assert!(
                !made,
                "a stream in the bulk area made a process (round {round})"
            );
            let long = vec![1u8; crate::DEFAULT_BULK + 1];
            let (summed, made) = client
                .claimed(None, |p| {
                    Ok::<_, service::Error>((
                        Demo::client(p).sum(&long)?,
                        p.process.get().is_some(),
                    ))
                })
                .unwrap();
            assert_eq!(summed.sum, long.len() as u64);
            assert!(
                made,
                "a stream longer than the bulk area went without a process"
            );
        }
        drop(client);
        assert!(server.shutdown(Duration::from_secs(5)).drained);
    }

    /// The seats made so far, beyond the first.
    fn more_seats(client: &ShmClient) -> usize {
        client.more.iter().filter(|s| s.get().is_some()).count()
    }

    /// A lone thread's calls all sit on the first seat: no other is made.
    #[test]
    fn a_lone_thread_sits_on_the_first_seat() {
        let (server, client) = demo("seat-lone", true);
        for id in 0..1000 {
            assert_eq!(Demo::client(&client).add(id, 1), Ok(id + 1));
        }
        assert_eq!(more_seats(&client), 0);
        assert_eq!(client.held_port(), client.first.held_port());
        assert!(client.held_port().is_some());
        drop(client);
        assert!(server.shutdown(Duration::from_secs(5)).drained);
    }

    /// More calls in flight at once than a handle keeps seats: each of the others sits on a seat
    /// of its own, and every call ends with its port given back (sticky: the spare seats' too).
    #[test]
    fn calls_beyond_the_seats_sit_on_spare_seats() {
        let path = path_for(&format!("test-seat-spare-{}", std::process::id()));
        let config = ServerConfig {
            ports: 96,
            workers: 1,
            ..ServerConfig::default()
        };
        let server = ShmServer::start(&path, config, Demo::server(DemoService)).unwrap();
        let client = ShmClient::attach(&path, ClientConfig::default().sticky(true)).unwrap();
        let calls = SEATS + 2;
        // Every call holds its seat (and a port) until all are in flight.
        let barrier = std::sync::Barrier::new(calls);
        let echo = Demo::Echo { id: 0 }.opcode();
        std::thread::scope(|s| {
            for _ in 0..calls {
                s.spawn(|| {
                    let held = client.call(echo, |_port| {
                        barrier.wait();
                        Ok(())
                    });
                    assert!(held.is_ok(), "{held:?}");
                });
            }
        });
        assert_eq!(more_seats(&client), SEATS - 1);
        let held = (0..96).filter(|&p| server.port_owner(p).0 != 0).count();
        assert_eq!(held, SEATS, "a port per kept seat, none for the spare ones");
        client.release_port();
        assert!((0..96).all(|p| server.port_owner(p).0 == 0));
        assert_eq!(Demo::client(&client).add(2, 3), Ok(5));
        drop(client);
        assert!(server.shutdown(Duration::from_secs(5)).drained);
    }

    /// A call that panics after using the packets leaves the handle's private bitmap all set: a
    /// cleared bit would let the handle's next search open that port while another holds it.
    #[test]
    fn a_panicking_call_leaves_the_private_bitmap_all_set() {
        let (server, client) = demo("claim-panic", false);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = client.claimed(None, |p| -> Result<(), service::Error> {
                Demo::client(p).sum(&[1, 2, 3])?;
                panic!("the caller's code fails after a call through the packets");
            });
        }));
        assert!(panicked.is_err());
        let cleared = |client: &ShmClient| -> Vec<u32> {
            (0..client.geometry().layout().ports())
                .filter(|&port| {
                    let (w, bit) = word_bit(port as usize);
                    client.first.locks[w].load(Ordering::Relaxed) & bit == 0
                })
                .collect()
        };
        assert_eq!(cleared(&client), Vec::<u32>::new(), "after a typed call");
        // The same through `call`, which reaches the claim's process by dereferencing.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: Result<(), ShmError> = client.call(Demo::Echo { id: 0 }.opcode(), |port| {
                port.send_and_recv(|slot, _| slot.words[0] = 7, |_, _| {})?;
                panic!("the exchange fails after the reply");
            });
        }));
        assert!(panicked.is_err());
        assert_eq!(cleared(&client), Vec::<u32>::new(), "after a raw call");
        // The handle still works (on another port: the abandoned one waits for the monitor).
        assert_eq!(Demo::client(&client).add(2, 3), Ok(5));
        drop(client);
        server.shutdown(Duration::from_secs(5));
    }
}
