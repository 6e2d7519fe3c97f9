//! The server: creates the file, serves its ports from several worker threads, reclaims the ports
//! of dead clients, drains and removes the file when it stops.
//!
//! Workers share one private server lock bitmap (ferry-rpc's), so two workers never serve the same
//! port and a slow or blocked handler holds only its own port and thread; the others keep serving.
//! Each worker starts its scan at a different port and resumes one past the port it served last.
//! A worker's pass costs about the same on a server of thousands of ports as on one of 1024: it
//! looks at a 1024-port window of the mailboxes (the next window on the next pass) and polls the
//! inline lines of the bitmap words it saw armed, re-reading the bitmap 32 words a pass; a pass
//! back from a rest, or the first after each tick of the monitor (every `reclaim_interval`),
//! looks at every port. A call on a port outside the windows so waits at most a turn of them (8
//! passes at 8192 ports), a rest, or an interval and the handlers running meanwhile.
//! A monitor thread scans the owner words every `reclaim_interval`; see the crate docs for the
//! reclaim protocol it follows. It also disarms the inline lines of ports left free for a whole
//! interval (module `inline`), and asks the handler to free what it keeps for clients that are
//! gone (`Handler::reclaim`).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferry_rpc::{Port, Server, ServerProcess, Single, Spin};

use crate::error::ShmError;
use crate::file::{self, Created, Mapped};
use crate::header::{Geometry, STATE_DRAINING, STATE_OFFSET, STATE_SERVING, STATE_STOPPED};
use crate::inline;
use crate::owner::{
    current_holder, generation_of, holder_alive, holder_of, pack, pid_of, start_time, ABANDONED,
};
use crate::signal::{Catching, StopSignal};
use crate::status;
use crate::sync::{word_bit, AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::wait::{IdleWait, ServerWait};
use crate::ShmMailbox;
use ferry_rpc::service::{Outcome, INLINE_BYTES};

/// An open port on the server side, as a handler sees it.
pub type ServerPort<'p, 'a> = Port<'p, 'a, Server, Single, ShmMailbox, ServerWait>;

/// Who is calling on a server port: how a handler tells its clients apart, for example to keep
/// what one client opened or allocated from the others.
pub trait Caller {
    /// The client process making the call on this port: the holder field of the port's owner word
    /// ([`owner::holder`](crate::owner::holder): its pid and a tag of its start time). It is the
    /// same for every call one client process makes, whichever port, thread or handle it uses,
    /// and differs from that of every other live process; `owner::holder_alive(id as u32)` tells
    /// whether that process is still alive. Meant to be read while serving the call (between
    /// opening the port and replying): a client that gave the port up meanwhile (its deadline
    /// passed) reads as [`owner::ABANDONED`](crate::owner::ABANDONED), never as another client.
    /// A one-way call's client may end its claim as soon as it has sent: such a call may read 0
    /// (free), never another client (no client can claim a port whose packet the server holds).
    /// Inline calls (`Handler::handle_inline`) carry no port: a handler that needs the caller
    /// serves such calls through the packets.
    fn caller(&self) -> u64;
}

impl Caller for ServerPort<'_, '_> {
    fn caller(&self) -> u64 {
        // While a worker serves the port it holds the port's server lock, so the monitor cannot
        // reclaim it, and the server side holds the packet or the client waits for a reply, so
        // no other client can claim it: the word names this call's client (or ABANDONED, or
        // free after a one-way call).
        u64::from(self.wait_policy().holder(self.index()))
    }
}

/// The name of a server's monitor thread (the thread that reclaims ports; see the crate docs).
pub const MONITOR_THREAD: &str = "ferry-monitor";

/// What a server serves: `ferry_rpc`'s one handler trait, for this transport's mailbox and wait
/// policy (`Handler<ShmMailbox, ServerWait>`).
///
/// A derived service bound to its handler is one (`Counter::server(handler)`, several with
/// `.and(..)`): it serves inline calls and is listed by name in the file. A closure over a
/// [`ServerPort`] is one too (it serves no inline calls and no service by name). A handler
/// written by hand implements the trait for any mailbox and wait policy
/// (`impl<M: Mailbox, W: Wait> Handler<M, W> for MyHandler`, see
/// [`ferry_rpc::service::Handler`]), or for this transport's alone where it needs
/// [`Caller`] (`impl Handler<ShmMailbox, ServerWait> for MyHandler`).
///
/// Inline calls: never return `status::NOT_INLINE` from
/// [`handle_inline`](ferry_rpc::service::Handler::handle_inline) (the client would make the
/// call again): return `None`; a handler that returns it is counted failed and answered
/// `status::SERVER_ERROR`. A handler returning an error (or panicking) while it still holds the
/// packet gets [`status::SERVER_ERROR`] sent back to the client.
///
/// ```no_run
/// use ferry_demo::{Demo, DemoService};
/// use ferry_shm::{ServerConfig, ServerPort, ShmServer};
///
/// let server = ShmServer::start("demo", ServerConfig::default(), Demo::server(DemoService))?;
/// // A closure: every call's first word back plus one.
/// let raw = ShmServer::start("raw", ServerConfig::default(), |port: &mut ServerPort| {
///     port.recv_and_send(|slot, _| slot.words[0] += 1)
/// })?;
/// # Ok::<(), ferry_shm::ShmError>(())
/// ```
pub use ferry_rpc::service::Handler;

/// How a server is set up.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Ports in the region (a multiple of 32). A server of more than 1024 looks at them a
    /// window a worker's pass (see the module docs).
    pub ports: u32,
    /// Slots per packet.
    pub lanes: u32,
    /// Worker threads serving ports.
    pub workers: usize,
    /// How often the monitor looks for ports held by dead clients, and for free ports whose
    /// inline line is still armed (a port stays armed for one to two intervals after its last
    /// claim ends, its line polled by the workers meanwhile: two loads a pass), and has each
    /// worker look at every port once (on a server of more than 1024 ports, the longest a call
    /// outside the windows of a busy worker's passes waits, beyond the handlers); after each look
    /// it calls the handler's `reclaim` ([`Handler::reclaim`](ferry_rpc::service::Handler::reclaim)),
    /// which frees what the handler keeps for clients that are gone (`ferry_libc_host::LibcHost`:
    /// their files and heap blocks, within about one interval of their end).
    pub reclaim_interval: Duration,
    /// How long a worker waits for a client inside a call (between packets of a stream) before
    /// giving up, if the client is still alive.
    pub call_deadline: Duration,
    /// Whether small calls may travel inline (a few cache lines; the crate docs), where the handler
    /// serves them. Off, every call goes through the packets (to measure or test that path).
    pub inline: bool,
    /// The longest a worker with nothing to do sleeps between two looks for work, once idle for
    /// a while (it polls, then yields, for the first 2 ms after its last call; then sleeps, each
    /// sleep twice the last, up to this). It bounds how long the first call after a long idle
    /// spell waits before a worker sees it; smaller answers that call sooner and costs more CPU
    /// while idle. Zero: never sleep (yield instead: lowest latency, a busy-looking idle server).
    pub idle_sleep: Duration,
    /// Bytes of each port's bulk area, per lane (rounded up to a multiple of 64; 0: none). A
    /// streamed argument or reply longer than 56 bytes (a `Bytes` or `Text` field, `send_n`)
    /// crosses through it, up to this many bytes per handoff, and a request that fits whole is
    /// read by the handler where it lies, not copied. The file grows by `ports × lanes × bulk`
    /// bytes, reserved when it is created (`ShmError::NoRoom` if /dev/shm cannot hold them).
    pub bulk: usize,
}

/// [`ServerConfig::bulk`]'s default: 256 KiB per port.
pub const DEFAULT_BULK: usize = 256 << 10;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            ports: 64,
            lanes: 1,
            workers: 2,
            reclaim_interval: Duration::from_millis(10),
            call_deadline: Duration::from_secs(30),
            inline: true,
            idle_sleep: crate::wait::IDLE_MAX_SLEEP,
            bulk: DEFAULT_BULK,
        }
    }
}

/// Counters of a running server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Calls whose handler returned `Ok`.
    pub served: u64,
    /// Calls whose handler returned an error (for example: the client died mid-stream).
    pub failed: u64,
    /// Calls whose handler panicked (and the monitor's calls of the handler's `reclaim` that
    /// panicked).
    pub panicked: u64,
    /// Ports taken back from dead clients (or given up by live ones).
    pub reclaimed: u64,
    /// Of the calls counted above, those that came inline (see the crate docs)
    /// rather than through the packets.
    pub inline: u64,
}

/// One thread's counters: each worker and the monitor has its own, in its own cache lines, and is
/// their only writer, so counting is a plain load and store, never a locked instruction on a
/// line the other threads write.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Counters {
    served: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    reclaimed: AtomicU64,
    inline: AtomicU64,
}

/// Calls carried whole made on a server's handler by threads of its own process
/// ([`ShmServer::in_process`]): what a bridge in the server's process does with each call that
/// comes to it, instead of making the call again through the server's file. The call is served
/// as a call through the file is: its handler's panic caught (`Status::ServerError`), counted in
/// the server's statistics, refused once the server stops serving (`Transport::ShuttingDown`).
/// Handlers see no caller (`Caller` is for calls through the file).
#[derive(Clone)]
pub struct InProcess {
    shared: Arc<Shared>,
    handler: Arc<dyn Handler<ShmMailbox, ServerWait> + Send>,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("path", &self.shared.mapped.path())
            .finish()
    }
}

impl InProcess {
    /// Makes the call `request` on the server's handler, its reply handed to `reply`
    /// (`Handler::handle_whole`): `None` where the handler does not serve calls so (a handler
    /// written by hand, the handshake; make the call through the file instead).
    pub fn call_whole(
        &self,
        request: &ferry_rpc::service::WholeRequest<'_>,
        reply: ferry_rpc::service::WholeReply<'_>,
    ) -> Option<Result<(), ferry_rpc::service::Error>> {
        use ferry_rpc::service::{Error, Status, Transport};
        if self.shared.state.load(Ordering::Acquire) != STATE_SERVING {
            return Some(Err(Error::Transport(Transport::ShuttingDown)));
        }
        // (Counted with the handler's tasks: a set that any thread adds to.)
        let counters = &self.shared.counters[self.shared.counters.len() - 1];
        let handler = &*self.handler;
        match std::panic::catch_unwind(AssertUnwindSafe(|| handler.handle_whole(request, reply))) {
            Ok(None) => None,
            Ok(Some(result)) => {
                counters.served.fetch_add(1, Ordering::Relaxed);
                Some(result)
            }
            Err(_) => {
                counters.panicked.fetch_add(1, Ordering::Relaxed);
                let opcode = request.opcode;
                Some(Err(Error::Status(Status::from_code(
                    status::SERVER_ERROR,
                    opcode,
                ))))
            }
        }
    }
}

/// Adds one to a counter only the calling thread writes.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The sum of every thread's counters.
fn snapshot(counters: &[Counters]) -> ServerStats {
    let sum = |f: fn(&Counters) -> &AtomicU64| {
        counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    ServerStats {
        served: sum(|c| &c.served),
        failed: sum(|c| &c.failed),
        panicked: sum(|c| &c.panicked),
        reclaimed: sum(|c| &c.reclaimed),
        inline: sum(|c| &c.inline),
    }
}

struct Shared {
    mapped: Arc<Mapped>,
    /// The services table's bytes as written (the monitor puts back what a stray write changed).
    table: Vec<u8>,
    /// The state the server is in (serving, draining, stopped); the header's state word is its
    /// copy in the file, which the monitor puts back if a stray write changed it.
    state: AtomicU32,
    server_locks: Box<[AtomicU32]>,
    /// One lock per port: held (1) by the worker answering the port's inline line, when there is
    /// more than one worker (`inline::serve_pending`).
    inline_locks: Box<[inline::InlineLock]>,
    stop: Arc<AtomicBool>,
    stop_monitor: AtomicBool,
    /// Moved by the monitor once an interval: a worker that sees it move makes its next pass
    /// look at every port, so that a request outside the windows of its passes waits at most an
    /// interval (and the handlers running then), however long its passes take.
    tick: AtomicU32,
    /// One set per worker, then the monitor's, then the one the handler's tasks share (`Answer`:
    /// counted with read-modify-writes, from any thread).
    counters: Box<[Counters]>,
    config: ServerConfig,
}

/// The services a server lists must fit its file's table, each name once.
fn check_services(services: &[(&'static str, u64)]) -> Result<(), ShmError> {
    if services.len() > crate::header::MAX_SERVICES as usize {
        return Err(ShmError::BadServices(format!(
            "{} services, more than the {} a file lists",
            services.len(),
            crate::header::MAX_SERVICES
        )));
    }
    for (i, (name, _)) in services.iter().enumerate() {
        if !ferry_rpc::service::name_fits(name) {
            return Err(ShmError::BadServices(format!(
                "service name {name:?} is empty, longer than {} bytes, or has a NUL byte",
                ferry_rpc::service::SERVICE_NAME_BYTES
            )));
        }
        if services[..i].iter().any(|(n, _)| n == name) {
            return Err(ShmError::BadServices(format!(
                "service `{name}` is served twice"
            )));
        }
    }
    Ok(())
}

impl Shared {
    /// Moves the server to `state`: its own word first, then the file's (the monitor reads them
    /// in the other order: see `restore_header`).
    fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::SeqCst);
        self.mapped.state().store(state, Ordering::SeqCst);
    }
}

/// Puts back every header word a stray write changed: the fixed fields as the server wrote them
/// (`expected`, its encoded geometry), the state word as the server's own state says.
fn restore_header(shared: &Shared, expected: &[u8; crate::header::HEADER_SIZE]) {
    for (i, word) in shared.mapped.header_words().iter().enumerate() {
        let found = word.load(Ordering::SeqCst);
        if i * 4 == STATE_OFFSET {
            // SYNC (state): the file's word is read before ours, and `set_state` writes ours
            // before the file's: a file word that already shows a new state is never undone.
            // The swap fails if the word changed since we read it (a state change racing us).
            let want = shared.state.load(Ordering::SeqCst);
            if found != want {
                let _ = word.compare_exchange(found, want, Ordering::SeqCst, Ordering::SeqCst);
            }
            continue;
        }
        let want = u32::from_le_bytes(expected[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
        if found != want {
            word.store(want, Ordering::SeqCst);
        }
    }
}

/// Puts back every word of `words` that differs from `expected` (little-endian `u32`s).
fn restore_words(words: &[AtomicU32], expected: &[u8]) {
    for (word, want) in words.iter().zip(expected.chunks_exact(4)) {
        let want = u32::from_le_bytes(want.try_into().expect("4 bytes"));
        if word.load(Ordering::Relaxed) != want {
            word.store(want, Ordering::Relaxed);
        }
    }
}

/// A running server. Dropping it stops it without draining and removes the file (also when the
/// thread that owns it panics); [`ShmServer::shutdown`] drains first.
///
/// **Stopping, and handlers that do not return.** Stopping tells the workers and the monitor to
/// end and wakes the monitor at once (it does not wait out `reclaim_interval`). A worker ends when
/// its current handler returns; a worker waiting for a client inside a call (a stream) gives up
/// within milliseconds of the stop. A handler that blocks on something else is not interrupted:
/// the server waits for its worker until its deadline (the drain deadline of
/// [`shutdown`](ShmServer::shutdown), or [`STOP_GRACE`] after the drain, whichever is later; a
/// drop waits [`STOP_GRACE`]), then leaves it running, detached, and removes the file all the
/// same ([`Shutdown::stuck_workers`] counts such workers).
pub struct ShmServer {
    shared: Arc<Shared>,
    handler: Arc<dyn Handler<ShmMailbox, ServerWait> + Send>,
    workers: Vec<JoinHandle<()>>,
    monitor: Option<JoinHandle<()>>,
    created: Created,
    stopped: bool,
}

impl std::fmt::Debug for ShmServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmServer")
            .field("path", &self.path())
            .field("stats", &self.stats())
            .finish()
    }
}

/// What a graceful shutdown achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shutdown {
    /// Whether every call in flight finished before the drain deadline (and every worker ended:
    /// one still inside a handler is left running, see [`ShmServer::shutdown`]).
    pub drained: bool,
    /// The final counters.
    pub stats: ServerStats,
    /// Workers still inside a handler when the shutdown's deadline passed (a handler that
    /// never returns): left running, detached; each exits when its handler returns. The file
    /// is removed all the same.
    pub stuck_workers: usize,
}

impl ShmServer {
    /// Creates the file at `path` (see [`file::path_for`] for names) and starts serving it with
    /// `handler`.
    pub fn start(
        path: impl AsRef<Path>,
        config: ServerConfig,
        handler: impl Handler<ShmMailbox, ServerWait> + Send + 'static,
    ) -> Result<ShmServer, ShmError> {
        let path = path.as_ref();
        let pid = std::process::id();
        let services = handler.services();
        check_services(&services)?;
        if let Some(collision) = handler.collision() {
            return Err(ShmError::BadServices(collision.to_string()));
        }
        // Each service's calls, one line each, for tools (`ferry ls`, `ferry call`).
        let listed = handler.calls();
        let calls: Vec<String> = services
            .iter()
            .map(|(name, _)| {
                let infos = listed
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(&[][..], |c| c.1);
                infos.iter().map(|c| c.line() + "\n").collect()
            })
            .collect();
        let table = file::table_bytes(&services, &calls);
        let calls_bytes = table.len() - services.len() * crate::header::SERVICE_ENTRY;
        if calls_bytes > crate::header::MAX_CALLS_BYTES as usize {
            return Err(ShmError::BadServices(format!(
                "their calls take {calls_bytes} bytes to list, more than the {} a file holds",
                crate::header::MAX_CALLS_BYTES
            )));
        }
        let geometry = Geometry::new(config.ports, config.lanes, file::table_hash(&table), pid)?
            .with_server_start(start_time(pid).unwrap_or(0))
            .with_inline(config.inline && handler.serves_inline() && config.lanes == 1)
            .with_services(services.len() as u32)
            .with_calls(calls_bytes)
            .with_bulk(config.bulk.div_ceil(64).saturating_mul(64) as u64)?;
        let (mapped, created) = file::create(path, &geometry, (&services, &calls), &table)?;
        let mapped = Arc::new(mapped);
        let workers = config.workers.max(1);
        let shared = Arc::new(Shared {
            table,
            server_locks: (0..geometry.layout().lock_words())
                .map(|_| AtomicU32::new(0))
                .collect(),
            inline_locks: (0..geometry.layout().ports())
                .map(|_| inline::InlineLock::default())
                .collect(),
            mapped,
            state: AtomicU32::new(STATE_SERVING),
            stop: Arc::new(AtomicBool::new(false)),
            stop_monitor: AtomicBool::new(false),
            tick: AtomicU32::new(0),
            // One set per worker, the monitor's, then the handler's tasks' (`Answer`).
            counters: (0..workers + 2).map(|_| Counters::default()).collect(),
            config,
        });
        // The workers call the handler through its own type (a direct call, which the compiler
        // may inline into the worker's loop); the monitor and the handle through `dyn`.
        let typed = Arc::new(handler);
        let handler: Arc<dyn Handler<ShmMailbox, ServerWait> + Send> = typed.clone();
        // The server's threads start with SIGINT and SIGTERM blocked (they inherit this thread's
        // mask, put back when this returns): such a signal goes to a thread of the program.
        let _mask = crate::signal::ThreadMask::block_stop_signals();
        let mut server = ShmServer {
            shared: Arc::clone(&shared),
            handler: Arc::clone(&handler),
            workers: Vec::with_capacity(workers),
            monitor: None,
            created,
            stopped: false,
        };
        for i in 0..workers {
            let shared = Arc::clone(&shared);
            let handler = Arc::clone(&typed);
            let first = (i as u64 * geometry.layout().ports() as u64 / workers as u64) as u32;
            let spawned = std::thread::Builder::new()
                .name(format!("ferry-worker-{i}"))
                .spawn(move || work(&shared, &*handler, i, first))
                .map_err(|e| ShmError::Io {
                    op: "starting a worker for",
                    path: path.to_path_buf(),
                    source: e,
                })?;
            server.workers.push(spawned);
        }
        let monitor_shared = Arc::clone(&shared);
        server.monitor = Some(
            std::thread::Builder::new()
                .name(MONITOR_THREAD.into())
                .spawn(move || monitor(&monitor_shared, &*handler))
                .map_err(|e| ShmError::Io {
                    op: "starting the monitor for",
                    path: path.to_path_buf(),
                    source: e,
                })?,
        );
        Ok(server)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.shared.mapped.path()
    }

    /// Whether the name was free or held a stale file that was replaced.
    pub fn created(&self) -> Created {
        self.created
    }

    /// The region's geometry.
    pub fn geometry(&self) -> &Geometry {
        self.shared.mapped.geometry()
    }

    /// The counters so far.
    pub fn stats(&self) -> ServerStats {
        snapshot(&self.shared.counters)
    }

    /// A handle through which this process's own threads make calls carried whole (a network's
    /// messages, as a bridge in this process receives them) on this server's handler directly,
    /// with no port: see [`InProcess`].
    pub fn in_process(&self) -> InProcess {
        InProcess {
            shared: Arc::clone(&self.shared),
            handler: Arc::clone(&self.handler),
        }
    }

    /// The owner word of `port`: `(pid, generation)`; pid 0 means free.
    pub fn port_owner(&self, port: u32) -> (u32, u32) {
        let w = self.shared.mapped.owners()[port as usize].load(Ordering::Acquire);
        (pid_of(w), generation_of(w))
    }

    /// Stops accepting calls, waits up to `drain` for the calls in flight to finish (ports of
    /// dead clients are reclaimed meanwhile), stops the workers and removes the file. Returns by
    /// the deadline, or [`STOP_GRACE`] after it: a worker still inside a handler then (one that
    /// blocks, or outlasts the drain) is not waited for; it serves nothing more and ends when its
    /// handler returns, and the result says the server did not drain.
    pub fn shutdown(self, drain: Duration) -> Shutdown {
        self.shutdown_unless(drain, || false)
    }

    /// Serves until the process receives SIGINT (Ctrl-C) or SIGTERM (`kill`, a service manager
    /// stopping the program), then shuts down as [`shutdown`](Self::shutdown) does: new calls
    /// are refused (their clients get `Transport::ShuttingDown`), the calls in flight are
    /// answered for up to `drain`, the workers stop and the file is removed. Returns the signal
    /// and what the shutdown achieved; the program then ends as it likes (returning from `main`
    /// exits with 0).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use ferry_demo::{Demo, DemoService};
    /// use ferry_shm::{path_for, ServerConfig, ShmServer};
    ///
    /// let path = path_for("my-app"); // /dev/shm/ferry-my-app
    /// let server = ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService))?;
    /// let (signal, report) = server.serve_until_signal(Duration::from_secs(5))?;
    /// eprintln!("stopped by {signal}: {} calls served", report.stats.served);
    /// # Ok::<(), ferry_shm::ShmError>(())
    /// ```
    ///
    /// - **In flight.** A call whose request came before the signal is answered if its handler
    ///   returns within `drain`; a second SIGINT or SIGTERM during the drain cuts it short. A
    ///   client whose call is still in flight when the server stops gets an error
    ///   (`Transport::NoServer`, or its deadline), never a hang; as with `shutdown`, a handler
    ///   that has not returned [`STOP_GRACE`] after that is left running, detached, and counted
    ///   in [`Shutdown::stuck_workers`].
    /// - **Which thread.** The server's own threads never take the two signals (they start with
    ///   them blocked); this thread unblocks them while it waits, and the process's actions for
    ///   them are a handler that wakes it. Other threads of the program may take them too: the
    ///   handler runs there instead, with the same effect.
    /// - **The actions before and after.** The actions the program had for SIGINT and SIGTERM
    ///   are replaced while this runs and put back when it returns (several servers may serve
    ///   until a signal at once, from several threads: one signal stops them all, and the
    ///   actions are put back when the last returns). A signal ignored when this is called (a
    ///   program started under `nohup`, or as a script's background job, which ignores SIGINT)
    ///   stays ignored: the other one still stops the server.
    /// - **Before this is called.** Until then the program's own actions apply: a SIGTERM that
    ///   comes between [`start`](Self::start) and this call ends the process by its default
    ///   action, leaving the file behind. A program that must not lose one blocks both signals
    ///   in its main thread before `start` (`pthread_sigmask`); a signal that comes meanwhile
    ///   then waits, and stops the server as soon as this call begins.
    ///
    /// Fails only if the signals' actions cannot be set, which the system refuses for no valid
    /// signal; the server is then shut down all the same (`drain` as above) and the file removed.
    pub fn serve_until_signal(self, drain: Duration) -> Result<(StopSignal, Shutdown), ShmError> {
        let catching = match Catching::start() {
            Ok(catching) => catching,
            Err(source) => {
                let path = self.path().to_path_buf();
                self.shutdown(drain);
                return Err(ShmError::Io {
                    op: "setting the actions for SIGINT and SIGTERM to stop the server of",
                    path,
                    source,
                });
            }
        };
        let signal = catching.wait();
        let shutdown = self.shutdown_unless(drain, || catching.caught() >= 2);
        Ok((signal, shutdown))
    }

    /// [`shutdown`](Self::shutdown), its drain cut short once `cut` says so.
    fn shutdown_unless(mut self, drain: Duration, cut: impl Fn() -> bool) -> Shutdown {
        let mapped = &self.shared.mapped;
        // SYNC (drain handshake): SeqCst store, then SeqCst loads of the owner words; a client
        // claims (SeqCst) then reads the state (SeqCst), so either it sees DRAINING and backs
        // off, or we see its claim and wait for it.
        self.shared.set_state(STATE_DRAINING);
        let mut deadline = Instant::now() + drain;
        let region = mapped.region();
        let ports = mapped.geometry().layout().ports() as usize;
        let serves_inline = mapped.geometry().serves_inline();
        let lines = mapped.inline_lines();
        // (The monitor's own claims, to disarm an idle port's line, last nanoseconds and touch
        // only the inline bitmap: one that a stalled monitor held past the grace below would be
        // counted as finished, harmlessly; `stop` joins the monitor.)
        // A sticky client holds its claim between calls and gives it back at its next call (it
        // then sees the state). One idle since before the drain never calls again: its claim
        // counts as finished once its port has stayed at rest, under the same owner word, for
        // `STICKY_GRACE` (a call already past its state check flips within microseconds).
        let mut at_rest: Vec<Option<(u64, Instant)>> = vec![None; ports];
        let drained = loop {
            let now = Instant::now();
            let mut busy = false;
            for (p, rest) in at_rest.iter_mut().enumerate() {
                let word = mapped.owners()[p].load(Ordering::SeqCst);
                let pid = pid_of(word);
                // A worker inside a call (between packets of a stream) holds the port's lock.
                let (w, bit) = word_bit(p);
                let serving = self.shared.server_locks[w].load(Ordering::Relaxed) & bit != 0
                    || self.shared.inline_locks[p].0.load(Ordering::Relaxed) != 0;
                let line_pending = serves_inline && !lines[p].at_rest();
                let pending = !region.client_owns(p as u32) || line_pending;
                if pending || pid == ABANDONED || serving {
                    *rest = None;
                    busy = true;
                } else if holder_of(word) == 0 {
                    *rest = None;
                } else {
                    match *rest {
                        Some((seen, since)) if seen == word => {
                            busy |= now.duration_since(since) < STICKY_GRACE;
                        }
                        _ => {
                            *rest = Some((word, now));
                            busy = true;
                        }
                    }
                }
            }
            if !busy {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            if cut() {
                // The workers are waited for as after a drain that ended now.
                deadline = Instant::now();
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let stuck_workers = self.stop(deadline.max(Instant::now() + STOP_GRACE));
        Shutdown {
            drained: drained && stuck_workers == 0,
            stats: self.stats(),
            stuck_workers,
        }
    }

    /// Stops the workers and the monitor, waiting for them until `deadline` (then detaching
    /// those still inside a handler), and removes the file. Returns how many were detached.
    fn stop(&mut self, deadline: Instant) -> usize {
        if self.stopped {
            return 0;
        }
        self.stopped = true;
        let shared = &self.shared;
        shared.set_state(STATE_STOPPED);
        shared.stop.store(true, Ordering::SeqCst);
        shared.stop_monitor.store(true, Ordering::SeqCst);
        if let Some(m) = &self.monitor {
            m.thread().unpark();
        }
        let mut threads: Vec<JoinHandle<()>> = self.workers.drain(..).collect();
        threads.extend(self.monitor.take());
        loop {
            let (done, running): (Vec<_>, Vec<_>) =
                threads.into_iter().partition(|t| t.is_finished());
            for t in done {
                let _ = t.join();
            }
            threads = running;
            if threads.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Those left are inside a handler that has not returned: dropping a handle detaches its
        // thread, which keeps its own reference to the mapping and exits when the handler does.
        let stuck = threads.len();
        if shared.mapped.still_named() {
            let _ = std::fs::remove_file(shared.mapped.path());
        }
        stuck
    }
}

/// How long stopping a server waits, at least, for a worker to leave its handler before leaving
/// it running, detached (see [`ShmServer`] on stopping).
pub const STOP_GRACE: Duration = Duration::from_millis(500);

impl Drop for ShmServer {
    fn drop(&mut self) {
        self.stop(Instant::now() + STOP_GRACE);
    }
}

/// A worker: serve ports with requests until told to stop (and then until none is pending).
/// The caller of a call a worker serves on `port`, for `ferry_rpc::service::cancelled`: gone
/// once its claim is abandoned (a call dropped, or past its deadline) or its process is dead.
/// While the call is served its port's line is not at rest, so no one else claims the port: the
/// owner word is the caller's claim until then.
struct PortCaller<'a> {
    owners: &'a [AtomicU64],
    port: usize,
}

impl ferry_rpc::service::Caller for PortCaller<'_> {
    fn gone(&self) -> bool {
        let word = self.owners[self.port].load(Ordering::Acquire);
        !crate::owner::holder_alive(crate::owner::holder_of(word))
    }
}

/// An inline call that the handler's task answers (`Handler::handle_inline_later`): writes the
/// reply into the port's lines, rings for a waking client and releases the port's inline lock,
/// which the worker that took the call left held. Dropped unanswered (the task panicked, or its
/// executor dropped it), it answers `SERVER_ERROR`.
struct Answer {
    shared: Arc<Shared>,
    call: inline::Call,
    /// Whether the answer has gone (or is not this one's to give: a call given back).
    done: bool,
}

impl Answer {
    fn give(&mut self, status: u32, reply: &[u8]) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let mapped = &self.shared.mapped;
        let port = self.call.port as usize;
        let counters = &self.shared.counters[self.shared.counters.len() - 1];
        // NOT_INLINE is this transport's word for "use the packets", which would run the call a
        // second time: a task that answers it has failed, as a handler that returns it at once
        // (`work`), and the client gets SERVER_ERROR.
        let (status, reply, counter) = match status {
            status::NOT_INLINE => (status::SERVER_ERROR, &[][..], &counters.failed),
            status::SERVER_ERROR => (status, reply, &counters.panicked),
            _ => (status, reply, &counters.served),
        };
        let mut bytes = [0u8; INLINE_BYTES];
        let len = reply.len().min(INLINE_BYTES);
        bytes[..len].copy_from_slice(&reply[..len]);
        counters.inline.fetch_add(1, Ordering::Relaxed);
        counter.fetch_add(1, Ordering::Relaxed);
        inline::hand_back(
            &mapped.inline_lines()[port],
            &mapped.inline_wide()[port],
            status,
            &bytes,
            len,
            self.call.want,
            self.call.seq,
        );
        if self.call.wake {
            inline::ring(
                inline::Wake {
                    ready: mapped.inline_ready(),
                    doorbell: mapped.doorbell(),
                },
                port,
            );
        }
        // SYNC (lock release): pairs with the next holder's acquire (`serve_pending`).
        self.shared.inline_locks[port].0.store(0, Ordering::Release);
    }
}

impl ferry_rpc::service::Caller for Answer {
    fn gone(&self) -> bool {
        PortCaller {
            owners: self.shared.mapped.owners(),
            port: self.call.port as usize,
        }
        .gone()
    }
}

impl ferry_rpc::service::Later for Answer {
    fn send(mut self: Box<Self>, status: u32, reply: &[u8]) {
        self.give(status, reply);
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.give(status::SERVER_ERROR, &[]);
    }
}

fn work<H: Handler<ShmMailbox, ServerWait> + ?Sized>(
    shared: &Arc<Shared>,
    handler: &H,
    index: usize,
    first: u32,
) {
    let counters = &shared.counters[index];
    let mapped = &shared.mapped;
    let wait = ServerWait::new(
        Arc::clone(mapped),
        Arc::clone(&shared.stop),
        shared.config.call_deadline,
    );
    let process: ServerProcess<'_, Single, ShmMailbox, ServerWait> =
        match ServerProcess::new(mapped.region(), &shared.server_locks, Single, wait) {
            Ok(p) => p.with_cursor(first),
            Err(_) => return,
        };
    let mut idle = IdleWait::new(shared.config.idle_sleep);
    let serves_inline = mapped.geometry().serves_inline();
    let (bitmap, lines) = (mapped.inline_bitmap(), mapped.inline_lines());
    let wide = mapped.inline_wide();
    // A lone worker has no other worker to keep off its lines, unless its handler's tasks answer
    // calls while it goes on (the port stays locked until they do).
    let workers = shared.config.workers.max(1);
    let later = handler.answers_later();
    let inline_locks = (workers > 1 || later).then_some(&*shared.inline_locks);
    // This worker's share of the ports (every `workers`th, from `index`), polled on every pass
    // (on a server of more than 1024 ports, those of the bitmap words it saw armed:
    // `serve_pending`); all of them every `SWEEP` passes.
    let own = inline::share(index, workers, bitmap.len());
    // A lone worker's share is every port: on a bitmap that a pass reads whole, no share at all
    // is the same, for less.
    let lone_small = workers == 1 && bitmap.len() <= inline::REFRESH_WORDS;
    let mut pass = 0u32;
    let bulk = mapped.bulk_areas();
    let mut scratch = inline::Scratch::new();
    let area = inline::InlineArea {
        bitmap,
        lines,
        wide,
        bulk,
        wake: Some(inline::Wake {
            ready: mapped.inline_ready(),
            doorbell: mapped.doorbell(),
        }),
    };
    let owners = mapped.owners();
    let mut serve_inline =
        |call: inline::Call, request: &[u8], body: &[u8], reply: &mut [u8; INLINE_BYTES]| {
            let opcode = call.opcode;
            if later {
                let answer = Box::new(Answer {
                    shared: Arc::clone(shared),
                    call,
                    done: false,
                });
                let taken = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    handler.handle_inline_later(opcode, request, body, answer)
                }));
                match taken {
                    // Taken: its task answers. (A panic dropped the answer, which answered.)
                    Ok(Ok(())) | Err(_) => return None,
                    // Given back: served here, and the answer is not its to give.
                    Ok(Err(back)) => {
                        let back: Box<dyn std::any::Any> = back;
                        if let Ok(mut back) = back.downcast::<Answer>() {
                            back.done = true;
                        }
                    }
                }
            }
            let caller = PortCaller {
                owners,
                port: call.port as usize,
            };
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: the scope drops at the end of this closure (or as it unwinds), before
                // `caller`, on this thread.
                let _caller = unsafe { ferry_rpc::service::caller_scope(&caller) };
                handler.handle_inline(opcode, request, body, reply)
            }));
            let (counter, answer) = match outcome {
                // NOT_INLINE is this transport's word for "use the packets", which would run the call
                // a second time: a handler that returns it (instead of `None`) has failed.
                Ok(Some((status::NOT_INLINE, _))) => {
                    (Some(&counters.failed), (status::SERVER_ERROR, 0))
                }
                Ok(Some(answer)) => (Some(&counters.served), answer),
                // Not served: the client makes the call again through the packets.
                Ok(None) => (None, (status::NOT_INLINE, 0)),
                Err(_) => {
                    reply.fill(0);
                    (Some(&counters.panicked), (status::SERVER_ERROR, 0))
                }
            };
            // Counted before the reply goes, as for packet calls.
            if let Some(counter) = counter {
                bump(&counters.inline);
                bump(counter);
            }
            Some(answer)
        };
    // Whether the last pass ended in a yield or a sleep: the next one looks at every port.
    let mut rested = false;
    let mut tick = shared.tick.load(Ordering::Relaxed);
    loop {
        // Read before the looks: a stop seen here, then a look at every port that finds nothing,
        // leaves no request behind.
        let stopping = shared.stop.load(Ordering::Relaxed);
        // A pass back from a rest, the first after the monitor's tick, or the last ones
        // (stopping) looks at every port: the worker's view of which lines are armed is as old
        // as its rest (one that rested between windows would rest a turn of windows long), and
        // passes that run slow handlers would take as long to turn.
        let ticked = shared.tick.load(Ordering::Relaxed);
        let whole = std::mem::take(&mut rested) || stopping || ticked != tick;
        tick = ticked;
        // Every pass polls both the inline lines and the packets, so a stream of inline calls
        // cannot starve packet calls (nor the stop below).
        let mut answered = 0;
        if serves_inline {
            if whole {
                scratch.assume_armed();
            }
            pass = pass.wrapping_add(1);
            let scan = if (workers > 1 && pass.is_multiple_of(SWEEP)) || lone_small {
                None
            } else {
                Some(&own[..])
            };
            answered =
                inline::serve_pending(&area, inline_locks, scan, &mut scratch, &mut serve_inline);
        }
        // A window of the mailboxes a pass (every port if `whole`): on a server of thousands
        // of ports, a look at all of them would come between every two polls of the inline
        // lines. A look at the mailbox and lock words first: a pass that finds no packet (every
        // pass of a stream of inline calls) skips the search.
        let window = match whole {
            true => u32::MAX,
            false => SCAN_LOCK_WORDS,
        };
        let packet = process
            .may_open_within(window)
            .then(|| process.try_open_within((), window))
            .flatten();
        if let Some(mut port) = packet {
            idle.reset();
            let index = port.index();
            process.wait_policy().watch(index);
            let caller = PortCaller {
                owners: mapped.owners(),
                port: index as usize,
            };
            // A failed or panicking handler: the packet goes back with `SERVER_ERROR`.
            let outcome = {
                // SAFETY: the scope drops at the end of this block (or as it unwinds), before
                // `caller`, on this thread.
                let _caller = unsafe { ferry_rpc::service::caller_scope(&caller) };
                ferry_rpc::service::serve_packet(handler, &mut port)
            };
            let counter = match outcome {
                Outcome::Served => &counters.served,
                Outcome::Failed => &counters.failed,
                Outcome::Panicked => &counters.panicked,
            };
            // Counted before the port closes, so a client that has its reply sees the count.
            bump(counter);
            drop(port);
            continue;
        }
        if answered != 0 {
            idle.reset();
            continue;
        }
        if stopping {
            return;
        }
        // Idle: poll hot for a while (a request usually follows soon), then yield, then sleep
        // longer and longer up to a bound, so an idle server does not burn a core (`IdleWait`).
        rested = idle.pause();
    }
}

/// Lock words (32 ports each) of the mailboxes a worker's pass looks at for packets
/// (`Process::may_open_within`), from where its last look stopped: a server of up to 1024 ports
/// is looked at whole on every pass; a larger one, a 1024-port window a pass, so that its
/// inline calls are not slowed by a look at every mailbox between two polls of their lines,
/// and a packet waits for at most one turn of the windows.
const SCAN_LOCK_WORDS: u32 = 32;

/// Every how many passes a worker polls every armed inline line, not only its own share. Each
/// poll of another worker's line takes that line from the client and its worker (the client's
/// next request then has one more copy to take back), and an idle worker passes often: the sweep
/// is a rare safety net for a port whose worker is inside a handler that blocks.
const SWEEP: u32 = 256;

/// How long a drain waits for a sticky client idle at rest before counting its claim finished.
const STICKY_GRACE: Duration = Duration::from_millis(20);

/// The monitor: frees ports whose holder died (or gave up), once no worker is on them; disarms
/// the inline lines of ports left free for a whole interval, under a claim of its own; then has
/// the handler free what it keeps for clients that are gone (`Handler::reclaim`).
fn monitor(shared: &Shared, handler: &dyn Handler<ShmMailbox, ServerWait>) {
    let mapped = &shared.mapped;
    let owners = mapped.owners();
    let region = mapped.region();
    let ports = owners.len();
    let serves_inline = mapped.geometry().serves_inline();
    let (bitmap, lines) = (mapped.inline_bitmap(), mapped.inline_lines());
    // This process as the holder of a port's claim while the monitor disarms its line (`None`
    // if its pid does not fit an owner word or its start time cannot be read: lines then stay
    // armed, which costs the workers a
    // poll of an idle line each pass).
    let me = current_holder().ok();
    let mut last = vec![0u64; ports];
    let header = mapped.geometry().encode();
    // A server handle of the monitor's own on the workers' lock bitmap: it opens no port, it only
    // holds one (`try_hold`) to keep the workers off it. (`new` checks the bitmap's length
    // against the region, as for the workers' handles: it does not fail here.)
    let Ok(server_side) = ServerProcess::<'_, Single, ShmMailbox, Spin>::new(
        region,
        &shared.server_locks,
        Single,
        Spin,
    ) else {
        return;
    };
    loop {
        // Sleep one interval, waking at once when the server stops (`stop` unparks us; a
        // spurious wake-up parks again for the rest of the interval).
        let until = Instant::now() + shared.config.reclaim_interval;
        loop {
            if shared.stop_monitor.load(Ordering::SeqCst) {
                return;
            }
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::park_timeout(until - now);
        }
        // The workers' next passes look at every port (`work`).
        shared.tick.fetch_add(1, Ordering::Relaxed);
        // The header first: clients that attach read it, and every client reads the state word.
        restore_header(shared, &header);
        restore_words(mapped.table_words(), &shared.table);
        for p in 0..ports {
            let word = owners[p].load(Ordering::Acquire);
            let holder = holder_of(word);
            let stayed = last[p] == word;
            last[p] = word;
            // Free is a holder field of 0; a holder whose pid field alone is 0 is a stray write,
            // judged dead below.
            if holder == 0 {
                // Free for a whole interval (no claim since: a claim changes the generation) with
                // its line armed: disarm it under a claim of our own, so that no client holds the
                // port meanwhile (see `inline`).
                if serves_inline && stayed && inline::is_armed(bitmap, p as u32) {
                    let (owner, line) = (&owners[p], &lines[p]);
                    if let Some(free) =
                        me.and_then(|me| inline::disarm_idle(owner, bitmap, line, p as u32, me))
                    {
                        last[p] = free;
                    }
                }
                continue;
            }
            // Only a port held by the same claim for a whole interval is checked.
            if !(holder == ABANDONED || (stayed && !holder_alive(holder))) {
                continue;
            }
            // Take the server side's lock of the port, as a worker would: while we hold it no
            // worker is inside a call on it, and none can start one.
            // SYNC (lock acquire): `try_hold` takes the lock as a worker's open does, pairing with
            // the last worker's unlock: its last flip is visible to `client_owns` below.
            let Some(held) = server_side.try_hold(p as u32) else {
                continue;
            };
            // Only a port at rest with the client side, its inline line at rest too, is freed; a
            // pending request is served first (a worker replies, and the next pass frees it).
            // The inline line needs no lock here: its holder is dead or gave up, so no new request
            // comes, and a worker touches a line only while a request is pending on it (its last
            // access is the store that puts the line at rest).
            // (A server that serves no inline calls ignores the lines: no worker would answer one.)
            let line_at_rest = !serves_inline || lines[p].at_rest();
            if held.client_owns() && line_at_rest {
                let free = pack(generation_of(word), 0);
                // Disarm the line before freeing the port: after the compare-and-swap a new
                // claimer may arm it, and its bit must stay. (The swap fails only if the word was
                // changed behind the protocol's back; the port then stays as it is, disarmed.)
                inline::disarm(bitmap, p as u32);
                // SYNC (reclaim): the holder is dead or gave up, so only we change the word; the
                // release pairs with the next claimer's acquire.
                if owners[p]
                    .compare_exchange(word, free, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    bump(&shared.counters[shared.counters.len() - 2].reclaimed);
                    last[p] = free;
                }
            } else if !line_at_rest {
                // A request left on the line: make sure a worker polls it (a claimer that found the
                // line in a state it did not leave gives the port up without arming it), so the
                // line comes to rest and a later pass frees the port.
                let (w, bit) = word_bit(p);
                bitmap[w].fetch_or(bit, Ordering::Relaxed);
            }
            // SYNC (lock release): dropping the guard releases the lock as a worker's close does;
            // what we did above happens before the next worker's open of the port.
            drop(held);
        }
        // The handler's own resources of clients gone (a panic there is counted, and the
        // monitor goes on: the ports above must still be reclaimed).
        if std::panic::catch_unwind(AssertUnwindSafe(|| handler.reclaim())).is_err() {
            bump(&shared.counters[shared.counters.len() - 2].panicked);
        }
    }
}
