//! The client: attaches to a server's file and makes calls.
//!
//! A call claims a free port through its owner word and runs on it as a [`Claimed`] port: a
//! small fixed call goes through the port's inline line directly; any other call gets an rpc-core
//! process made for the claim on first use, over a lock bitmap private to this handle (every
//! bit always set: the claimed port is handed to the process with `Process::adopt_port`, so no
//! search, lock or unlock runs, and taken back when the claim is dropped). Then the claim is
//! released. With [`ClientConfig::sticky`] the handle keeps the claim for
//! its next call instead (no compare-and-swap either: a call then costs the protocol's handoff
//! alone), until it is dropped, [`ShmClient::release_port`] is called, or the server drains. A call
//! that fails mid-way (or panics) abandons the port instead: its state is unknown, and only the
//! server may take it back.

use std::cell::{Cell, OnceCell};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_rpc::service::{self, CallSite, Service, Site, Transport};
use ferry_rpc::{Client, ClientProcess, Port, Single};

use crate::error::ShmError;
use crate::file::{self, Mapped};
use crate::header::{Geometry, STATE_SERVING, STATE_STOPPED};
use crate::inline::{self, ClientInline};
use crate::owner::{abandon, current_holder, holder_of, release, still_held, try_claim, NoHolder};
use crate::sync::{word_bit, AtomicU32, AtomicU64, Ordering};
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
    process: OnceCell<ClaimedProcess<'a>>,
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
    /// open the port later while another handle holds it.
    fn drop(&mut self) {
        if let Some(process) = self.process.get() {
            if process.take_kept().is_none() {
                // The process released the port (it found the packet with the server) and
                // cleared its bit: set it again.
                let (w, bit) = word_bit(self.inline.port as usize);
                self.locks[w].fetch_or(bit, Ordering::Relaxed);
            }
        }
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

    #[inline]
    fn inline(&self) -> Option<&ClientInline<'a, ClientWait>> {
        Some(self.inline)
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
    /// release. The price: the handle holds a port while idle, so a server needs a port for each
    /// sticky handle, or others wait for a free one until their deadline. A server that drains
    /// waits a short grace for idle sticky holders (`ShmServer::shutdown`).
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
/// (`Counter::client(&shm)`). One per thread (`handle` makes another): a handle makes one call
/// at a time.
#[derive(Debug)]
pub struct ShmClient {
    mapped: Arc<Mapped>,
    locks: Box<[AtomicU32]>,
    wait: ClientWait,
    config: ClientConfig,
    /// This process in owner words (`owner::holder`).
    holder: u32,
    cursor: Cell<u32>,
    /// The port a sticky handle holds between calls, and its owner word as claimed.
    held: Cell<Option<(u32, u64)>>,
    /// Whether the current claim's port has its inline bit set, as far as this handle knows
    /// (found set when claimed, or set by its first inline call; `inline`).
    inline_armed: Cell<bool>,
}

/// Abandons a claimed port unless disarmed (a closure that panicked, an exchange that failed).
struct Claim<'a> {
    word: &'a AtomicU64,
    mine: u64,
    armed: bool,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.armed {
            // (A claim taken from us is not ours to abandon: `abandon` leaves it.)
            let _ = abandon(self.word, self.mine);
        }
    }
}

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
        Ok(Self::on(mapped, config, holder, 0))
    }

    fn on(mapped: Arc<Mapped>, config: ClientConfig, holder: u32, cursor: u32) -> ShmClient {
        let words = mapped.geometry().layout().lock_words();
        let ports = mapped.geometry().layout().ports();
        ShmClient {
            locks: (0..words).map(|_| AtomicU32::new(u32::MAX)).collect(),
            wait: ClientWait::new(Arc::clone(&mapped), config.deadline),
            holder,
            held: Cell::new(None),
            inline_armed: Cell::new(false),
            // Spread processes over the ports so they rarely race for the same one.
            cursor: Cell::new((cursor ^ std::process::id().wrapping_mul(0x9e37_79b9) >> 7) % ports),
            config,
            mapped,
        }
    }

    /// Another handle on the same file (for another thread), starting its searches at `cursor`.
    pub fn handle(&self, cursor: u32) -> ShmClient {
        Self::on(
            Arc::clone(&self.mapped),
            self.config.clone(),
            self.holder,
            cursor,
        )
    }

    /// The region's geometry.
    pub fn geometry(&self) -> &Geometry {
        self.mapped.geometry()
    }

    /// The services the server serves, by name and fingerprint.
    pub fn services(&self) -> &[(String, u64)] {
        self.mapped.services()
    }

    /// The port the last call used.
    pub fn last_port(&self) -> u32 {
        self.cursor.get()
    }

    /// The port this handle holds between calls (sticky handles only).
    pub fn held_port(&self) -> Option<u32> {
        self.held.get().map(|(port, _)| port)
    }

    /// Gives back the port a sticky handle holds (dropping the handle does too).
    pub fn release_port(&self) {
        if let Some((port, mine)) = self.held.take() {
            // The last call completed (only then is a claim kept), so the packet is at rest.
            self.end_claim(port, mine);
        }
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

    /// Claims a port (or takes the one a sticky handle holds), runs `f` on a client process that
    /// holds that port and no other, and frees the port (or keeps it, if sticky) if `f` succeeded
    /// or failed with an answered error while the packet is back with this side; otherwise (and if
    /// `f` panics) abandons it.
    #[inline]
    fn claimed<R, E>(
        &self,
        deadline: Option<Duration>,
        f: impl FnOnce(&Claimed<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        // A sticky claim was checked against the state when it was made; a drain since then
        // must still reach us (`begin`). A kept claim is checked to be still ours (one load of a
        // word only its holder writes while the protocol is kept): one taken behind our back is
        // dropped, and a new claim made.
        // The call's deadline counts from here, over the claim and every wait of the call.
        let _deadline = DeadlineGuard::set(&self.wait, deadline);
        let (index, mine) = match self.held.take() {
            Some(held)
                if self.mapped.state().load(Ordering::Acquire) == STATE_SERVING
                    && still_held(&self.mapped.owners()[held.0 as usize], held.1) =>
            {
                held
            }
            held => self.begin(held).map_err(service::Error::Transport)?,
        };
        let mut claim = Claim {
            word: &self.mapped.owners()[index as usize],
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
                &self.wait,
                &self.inline_armed,
                self.mapped.bulk_areas(),
            );
            let claimed = Claimed {
                inline: &inline,
                process: OnceCell::new(),
                mapped: &self.mapped,
                locks: &self.locks,
            };
            // Dropping the claim (also when `f` panics) takes its process's port back.
            match f(&claimed) {
                // A wait that gave up: at the call's deadline, or because the server is gone.
                Err(service::Error::Transport(Transport::Protocol(ferry_rpc::Error::Stalled))) => {
                    Err(service::Error::Transport(if self.wait.expired() {
                        Transport::Deadline
                    } else if !self.wait.server_alive() {
                        Transport::NoServer
                    } else {
                        Transport::Protocol(ferry_rpc::Error::Stalled)
                    }))
                }
                result => result,
            }
        };
        self.cursor.set(index);
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
        // the port (no longer ours) is neither freed nor kept. A handle that frees its claim
        // checks with the release itself (a compare-and-swap from our claim); a sticky one reads
        // the word.
        let kept = if self.config.sticky {
            let kept = still_held(claim.word, mine);
            if kept {
                self.held.set(Some((index, mine)));
            } else {
                self.inline_armed.set(false);
            }
            kept
        } else {
            self.end_claim(index, mine)
        };
        if !kept {
            return Err(service::Error::Transport(Transport::PortLost {
                port: index,
            }));
        }
        result
    }

    /// The claim for a call when no sticky claim is held, when the one held meets a server that
    /// no longer serves (`claimed` checked: the claim is given back, the error says why; the
    /// state never returns to serving), or when the one held was taken from us (it is forgotten
    /// and another claimed). Out of line: a sticky handle's calls skip it (every call
    /// of a handle that is not sticky makes it).
    #[inline(never)]
    fn begin(&self, held: Option<(u32, u64)>) -> Result<(u32, u64), Transport> {
        if let Some((index, mine)) = held {
            let state = self.mapped.state().load(Ordering::Acquire);
            if state != STATE_SERVING {
                self.end_claim(index, mine);
                return Err(self.not_serving(state));
            }
            // Still serving: the kept claim was taken from us (`claimed`). Nothing of this call
            // has touched the port yet; it is not ours to free: forget it and claim another
            // (which sets the inline flag anew).
        }
        let (index, mine) = self.claim()?;
        // A port's inline bit stays set after its claims end, until the monitor finds the port
        // idle (`inline` module docs): a new claim that finds it set need not set it.
        self.inline_armed
            .set(inline::is_armed(self.mapped.inline_bitmap(), index));
        Ok((index, mine))
    }

    /// Claims a free port whose packet is at rest with the client side.
    fn claim(&self) -> Result<(u32, u64), Transport> {
        let owners = self.mapped.owners();
        let region = self.mapped.region();
        let ports = owners.len() as u32;
        let cursor = self.cursor.get();
        let mut polls = 0u32;
        loop {
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
                return Ok((p, mine));
            }
            if self.wait.pause_polls(polls).is_err() {
                let state = self.mapped.state().load(Ordering::SeqCst);
                if state != STATE_SERVING || !self.wait.server_alive() {
                    return Err(self.not_serving(state));
                }
                return Err(Transport::NoFreePort);
            }
            polls = polls.saturating_add(1);
        }
    }

    /// Gives back a claim whose last call completed: frees the owner word. The port's inline
    /// line stays armed (the next claim of the port, by any client, is likely soon and then skips
    /// arming it); the server's monitor disarms a port left idle (`inline` module docs).
    /// Returns whether the claim was still ours (a claim taken from us is not ours to free:
    /// `release` leaves it).
    fn end_claim(&self, port: u32, mine: u64) -> bool {
        self.inline_armed.set(false);
        release(&self.mapped.owners()[port as usize], mine)
    }

    fn no_server(&self) -> ShmError {
        ShmError::NoServer {
            path: self.mapped.path().to_path_buf(),
            pid: self.mapped.geometry().server_pid(),
        }
    }

    fn not_serving(&self, state: u32) -> Transport {
        if state == STATE_STOPPED || !self.wait.server_alive() {
            Transport::NoServer
        } else {
            Transport::ShuttingDown
        }
    }
}

/// Sets a call's deadline on the handle's wait policy, and puts the handle's own back when the
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

/// The calls of a derived service's client go through the handle: each claims a port (or takes
/// the sticky one), runs on it, and frees or keeps it.
impl Site for ShmClient {
    type Claim<'a> = Claimed<'a>;

    #[inline]
    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Claimed<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        self.claimed(deadline, call)
    }
}

impl Drop for ShmClient {
    fn drop(&mut self) {
        self.release_port();
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
    use crate::demo::{self, Demo, DemoService};
    use crate::{path_for, ServerConfig, ShmServer};

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
                    client.locks[w].load(Ordering::Relaxed) & bit == 0
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
