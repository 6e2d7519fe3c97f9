//! The bridge: a running shared-memory server's services, exported to zenoh. Each call that comes
//! as a query is made again on a shared-memory client of that server, with the same shape
//! function a generated client uses (`ferry_rpc::service::replay`), and its reply (or its error)
//! goes back as the query's reply.
//!
//! ```text
//!  zenoh session           bridge                                     shared-memory server
//!  query on               queryable callback ── channel ──▶ worker:
//!  ferry/NAME/S/FP ─────▶  (one per service)                 decode the request (refused:
//!                                                            BadRequest), replay it on the
//!                                                            ShmClient ────────────────────▶  handler
//!  reply ◀─────────────────────────────────────────────────  reply bytes, or the Error ◀───
//! ```
//!
//! A bridge started in the server's own process ([`Bridge::start_serving`], as a
//! [`ZenohServer`](crate::ZenohServer) starts one) makes each call on the server's handler
//! directly (`ferry_shm::InProcess`), the request read where zenoh delivered it and the reply
//! written where it will be sent: no copy through the server's file, and the same checks,
//! counters and refusals.
//!
//! A call is made only if its opcode is one of the calls of the service its key names: the
//! server dispatches every service it serves by opcode alone, so a query at one service's key
//! carrying another's opcode would otherwise run the other service's handler. The opcodes are
//! those the server's calls table lists for the service (`ShmClient::calls`); an opcode not
//! among them is refused as `Status::UnknownOpcode`, and never reaches the server. A service
//! written by hand lists no calls: at its key the bridge refuses the opcodes the other services
//! list, and leaves the rest to the server (which refuses an opcode it does not serve).
//!
//! **A server that restarts.** The bridge watches its server (every [`WATCH`], and whenever a
//! call finds it gone). While none runs at its path, calls fail at once with
//! `Transport::NoServer`. When one starts there again, the bridge attaches to it if it serves
//! the same services with the same schemas and calls tables, and calls go through again; a
//! server of other services or schemas is never called: calls are refused
//! (`Status::Mismatch` naming the server's fingerprint, `Transport::NotServed` for a service it
//! no longer serves) until a server of the exported ones replaces it. [`Bridge::server`] says
//! which of these holds.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use ferry_rpc::service::{self, CallInfo, Error, ReplyShape, Site, Status, Transport, WholeReply};
use ferry_rpc::StreamSink;
use ferry_shm::{InProcess, ShmClient};
use zenoh::query::{Query, Queryable};
use zenoh::{Session, Wait};

use crate::error::ZenohError;
use crate::key_for;
use crate::message::{decode_request, encode_error, encode_ok};

/// How a bridge serves.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// Threads that make the calls on the shared-memory server (calls in flight at once). `0`:
    /// each call is made on zenoh's own thread that received it, which saves a hand-over between
    /// threads but holds up every other message of that link while a handler runs.
    pub workers: usize,
    /// The longest deadline a caller may give a call here (a caller's longer one is cut to it).
    pub max_deadline: Duration,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            workers: 4,
            max_deadline: Duration::from_secs(600),
        }
    }
}

impl BridgeConfig {
    /// This configuration with [`workers`](Self::workers) set.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }
}

/// Exports every service of a shared-memory server to zenoh, under a name, until dropped: each
/// service is a queryable at `ferry/NAME/SERVICE/FINGERPRINT`, and each call that comes there is
/// made again on a shared-memory client of the server (`ferry_rpc::service::replay`), its reply
/// or its error sent back.
pub struct Bridge {
    queryables: Vec<Queryable<()>>,
    workers: Vec<JoinHandle<()>>,
    keys: Vec<String>,
    exported: Arc<Exported>,
    /// The thread that watches the server, and what stops it.
    watcher: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

/// How often a bridge looks at its server (alive? a new one at its path?).
pub const WATCH: Duration = Duration::from_millis(50);

/// The most changes of its server's state a bridge keeps for [`Bridge::next_change`] (older ones
/// are dropped).
const CHANGES_KEPT: usize = 64;

/// The server behind a bridge, as the bridge last found it ([`Bridge::server`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// A server of the exported services (the same names, schemas and calls) runs at the path:
    /// calls are made on it.
    Serving {
        /// Its process.
        pid: u32,
    },
    /// No server runs at the path (it stopped, or died): calls fail at once with
    /// `Transport::NoServer` until a server of the exported services starts there.
    Gone,
    /// A server of other services or schemas runs at the path: it is never called, and calls
    /// are refused (`Status::Mismatch`, `Transport::NotServed`) until a server of the exported
    /// services replaces it.
    Changed {
        /// Its process.
        pid: u32,
        /// The services it serves, by name and fingerprint.
        services: Vec<(String, u64)>,
    },
}

impl std::fmt::Debug for Bridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bridge").field("keys", &self.keys).finish()
    }
}

/// What the bridge's threads share.
struct Exported {
    /// The server's file.
    path: PathBuf,
    /// The server the calls are made on, if any.
    link: RwLock<Link>,
    /// Held by whoever looks at the server and changes `link` (one at a time).
    checking: Mutex<()>,
    /// The changes of the server's state not yet taken ([`Bridge::next_change`]), the last
    /// [`CHANGES_KEPT`] at most; signalled on each.
    changes: Mutex<VecDeque<ServerState>>,
    changed: Condvar,
    max_deadline: Duration,
    /// The services, in the order of the server's services table.
    services: Vec<ExportedService>,
    /// The server's services table and calls table, as exported: a server found at the path
    /// later is called only if its tables are the same.
    tables: (Vec<(String, u64)>, Vec<String>),
    /// Every opcode the calls table lists, of any service (sorted).
    listed: Vec<u32>,
    /// The server's handler, where the server runs in the bridge's process: calls are made on it
    /// directly.
    local: Option<InProcess>,
}

/// The server behind the bridge.
enum Link {
    /// A server of the exported services.
    Up(Arc<ShmClient>),
    /// None.
    Gone,
    /// A server of other services or schemas, attached only to be watched.
    Changed(Box<ShmClient>),
}

impl Link {
    fn state(&self) -> ServerState {
        match self {
            Link::Up(shm) => ServerState::Serving {
                pid: shm.geometry().server_pid(),
            },
            Link::Gone => ServerState::Gone,
            Link::Changed(other) => ServerState::Changed {
                pid: other.geometry().server_pid(),
                services: other.services().to_vec(),
            },
        }
    }
}

/// One service the bridge exports.
struct ExportedService {
    /// Its key, `ferry/NAME/SERVICE/FINGERPRINT`.
    key: Arc<str>,
    /// Its calls' opcodes as the server's calls table lists them (sorted); `None` for a service
    /// written by hand, whose calls are not listed.
    opcodes: Option<Vec<u32>>,
}

impl Exported {
    /// The server to make a call at the key of service `service` on, or the error that refuses
    /// it: none runs, or one of other services.
    fn server(&self, service: usize) -> Result<Arc<ShmClient>, Error> {
        match &*self.link.read().unwrap_or_else(|e| e.into_inner()) {
            Link::Up(shm) => Ok(Arc::clone(shm)),
            Link::Gone => Err(Transport::NoServer.into()),
            Link::Changed(other) => {
                let (name, exported) = &self.tables.0[service];
                let now = other.services().iter().find(|(n, _)| n == name);
                Err(match now {
                    Some(&(_, server)) => Status::Mismatch {
                        client: *exported,
                        server,
                    }
                    .into(),
                    None => Transport::NotServed { service: "" }.into(),
                })
            }
        }
    }

    /// Looks at the server: one that is gone is let go; when none is attached, a server at the
    /// path is attached (and called only if it serves the exported services).
    fn check(&self) {
        let _checking = self.checking.lock().unwrap_or_else(|e| e.into_inner());
        let alive = match &*self.link.read().unwrap_or_else(|e| e.into_inner()) {
            Link::Up(shm) => shm.server_alive(),
            Link::Changed(other) => other.server_alive(),
            Link::Gone => false,
        };
        if alive {
            return;
        }
        let next = match ShmClient::attach(&self.path, Default::default()) {
            Ok(shm)
                if (shm.services(), shm.calls()) == (&self.tables.0[..], &self.tables.1[..]) =>
            {
                Link::Up(Arc::new(shm))
            }
            Ok(other) => Link::Changed(Box::new(other)),
            Err(_) => Link::Gone,
        };
        let state = next.state();
        let before = std::mem::replace(
            &mut *self.link.write().unwrap_or_else(|e| e.into_inner()),
            next,
        );
        if before.state() != state {
            let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
            if changes.len() == CHANGES_KEPT {
                changes.pop_front();
            }
            changes.push_back(state);
            self.changed.notify_all();
        }
    }

    /// Whether a call of `opcode` at the key of service `service` (an index into `services`)
    /// may be made: one of that service's calls, or (for a service whose calls are not listed)
    /// none of the others'.
    fn admits(&self, service: usize, opcode: u32) -> bool {
        match &self.services[service].opcodes {
            Some(opcodes) => opcodes.binary_search(&opcode).is_ok(),
            None => self.listed.binary_search(&opcode).is_err(),
        }
    }
}

/// The services of `shm`'s server as the bridge exports them under `name`; an error for a name
/// that cannot be part of a key, or a calls table this crate does not understand.
fn exported_services(
    shm: &ShmClient,
    name: &str,
) -> Result<(Vec<ExportedService>, Vec<u32>), ZenohError> {
    let mut services = Vec::new();
    let mut listed = Vec::new();
    for (i, (service, fingerprint)) in shm.services().iter().enumerate() {
        crate::check_name(service)?;
        let text = shm.calls().get(i).map_or("", String::as_str);
        let opcodes = match text.is_empty() {
            true => None,
            false => {
                let mut opcodes = text
                    .lines()
                    .map(|line| {
                        CallInfo::opcode_in_line(line).ok_or_else(|| {
                            ZenohError::BadServices(format!(
                                "a call of service `{service}` in the server's calls table is \
                                 not understood: {line}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<u32>, _>>()?;
                opcodes.sort_unstable();
                listed.extend_from_slice(&opcodes);
                Some(opcodes)
            }
        };
        services.push(ExportedService {
            key: key_for(name, service, *fingerprint).into(),
            opcodes,
        });
    }
    listed.sort_unstable();
    Ok((services, listed))
}

impl Bridge {
    /// Exports the services `shm`'s server serves (its services table) on `session` under `name`.
    pub fn start(
        session: &Session,
        name: &str,
        shm: ShmClient,
        config: BridgeConfig,
    ) -> Result<Bridge, ZenohError> {
        Self::start_with(session, name, shm, config, None)
    }

    /// Exports the services of `server`, a server of this process, on `session` under `name`:
    /// as [`start`](Self::start), each call made on the server's handler directly
    /// ([`ShmServer::in_process`](ferry_shm::ShmServer::in_process)), with no copy through its
    /// file (a handler written by hand still gets its calls through the file).
    pub fn start_serving(
        session: &Session,
        name: &str,
        server: &ferry_shm::ShmServer,
        config: BridgeConfig,
    ) -> Result<Bridge, ZenohError> {
        let shm = ShmClient::attach(server.path(), Default::default())?;
        Self::start_with(session, name, shm, config, Some(server.in_process()))
    }

    fn start_with(
        session: &Session,
        name: &str,
        shm: ShmClient,
        config: BridgeConfig,
        local: Option<InProcess>,
    ) -> Result<Bridge, ZenohError> {
        crate::check_name(name)?;
        let (services, listed) = exported_services(&shm, name)?;
        if services.is_empty() {
            return Err(ZenohError::BadServices(
                "the shared-memory server serves no services".into(),
            ));
        }
        let exported = Arc::new(Exported {
            path: shm.path().to_path_buf(),
            tables: (shm.services().to_vec(), shm.calls().to_vec()),
            link: RwLock::new(Link::Up(Arc::new(shm))),
            checking: Mutex::new(()),
            changes: Mutex::new(VecDeque::new()),
            changed: Condvar::new(),
            max_deadline: config.max_deadline,
            services,
            listed,
            local,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Query, usize)>(1024);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let watcher = {
            let (exported, stop) = (Arc::clone(&exported), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("ferry-bridge-watch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        exported.check();
                        std::thread::park_timeout(WATCH);
                    }
                })
                .map_err(ZenohError::zenoh)?
        };
        let mut bridge = Bridge {
            queryables: Vec::new(),
            workers: Vec::new(),
            keys: Vec::new(),
            exported: Arc::clone(&exported),
            watcher: Some(watcher),
            stop,
        };
        for i in 0..config.workers {
            let (rx, exported) = (Arc::clone(&rx), Arc::clone(&exported));
            let worker = std::thread::Builder::new()
                .name(format!("ferry-bridge-{i}"))
                .spawn(move || loop {
                    // (The lock is held only to take one query.)
                    let next = rx.lock().map(|rx| rx.recv());
                    match next {
                        Ok(Ok((query, service))) => serve(&exported, &query, service),
                        _ => return,
                    }
                })
                .map_err(ZenohError::zenoh)?;
            bridge.workers.push(worker);
        }
        for (service, exported_service) in exported.services.iter().enumerate() {
            let key = Arc::clone(&exported_service.key);
            let declared = match config.workers {
                0 => {
                    let exported = Arc::clone(&exported);
                    session
                        .declare_queryable(&*key)
                        .complete(true)
                        .callback(move |query| serve(&exported, &query, service))
                        .wait()
                }
                _ => {
                    let tx = tx.clone();
                    session
                        .declare_queryable(&*key)
                        .complete(true)
                        .callback(move |query| {
                            // (Full: zenoh's thread waits for a worker; gone: the bridge is
                            // stopping, and the query ends without a reply.)
                            let _ = tx.send((query, service));
                        })
                        .wait()
                }
            };
            bridge.queryables.push(declared.map_err(ZenohError::zenoh)?);
            bridge.keys.push(key.to_string());
        }
        Ok(bridge)
    }

    /// The zenoh keys the services are exported at.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The server behind the bridge, as the bridge last found it (it looks every [`WATCH`]).
    pub fn server(&self) -> ServerState {
        self.exported
            .link
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .state()
    }

    /// The next change of the server's state ([`server`](Self::server)) since the last one
    /// taken, waiting at most `within` for one: every change is kept until taken (the last 64 at
    /// most), so that one that lasted a moment is still seen.
    pub fn next_change(&self, within: Duration) -> Option<ServerState> {
        let exported = &self.exported;
        let changes = exported.changes.lock().unwrap_or_else(|e| e.into_inner());
        let (mut changes, _) = exported
            .changed
            .wait_timeout_while(changes, within, |c| c.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        changes.pop_front()
    }
}

impl Drop for Bridge {
    /// Undeclares the queryables (no new call comes), lets the workers finish the calls they
    /// have, and stops them.
    fn drop(&mut self) {
        for queryable in self.queryables.drain(..) {
            let _ = queryable.undeclare().wait();
        }
        // The queryables' callbacks held the channel's senders: with them gone, the workers' next
        // receive fails once the channel is empty.
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(watcher) = self.watcher.take() {
            watcher.thread().unpark();
            let _ = watcher.join();
        }
    }
}

/// Serves one query at the key of service `service` (an index into `exported.services`): an
/// empty one (a client's attach) is answered at once; any other is a call.
fn serve(exported: &Exported, query: &Query, service: usize) {
    let reply = with_payload(query, |payload| match payload.is_empty() {
        true => Some(encode_ok(&[])),
        false => call(exported, service, payload),
    });
    if let Some(reply) = reply {
        // (A query whose caller is gone: nothing to do.)
        let _ = query.reply(&*exported.services[service].key, reply).wait();
    }
}

/// The most bytes of a fragmented request a serving thread keeps room for between calls.
const GATHER_KEPT: usize = 8 << 20;

thread_local! {
    /// Where a serving thread gathers a request that arrived in fragments, kept between calls: a
    /// large request then costs one copy, not a fresh allocation's page faults as well.
    static GATHERED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on `query`'s payload as one slice: where it lies if it arrived in one piece, else
/// gathered into this thread's buffer.
fn with_payload<T>(query: &Query, f: impl FnOnce(&[u8]) -> T) -> T {
    let Some(payload) = query.payload() else {
        return f(&[]);
    };
    let mut slices = payload.slices();
    if let (Some(one), None) = (slices.next(), slices.next()) {
        return f(one);
    }
    GATHERED.with(|gathered| match gathered.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            for slice in payload.slices() {
                buffer.extend_from_slice(slice);
            }
            let out = f(&buffer);
            if buffer.capacity() > GATHER_KEPT {
                *buffer = Vec::new();
            }
            out
        }
        // (Only if `f` served another query on this thread: gathered apart.)
        Err(_) => f(&payload.to_bytes()),
    })
}

/// Makes the call `payload` carries, at the key of service `service`, on the shared-memory
/// server: its reply, or its error, as a reply's payload (`None` for a one-way call: no reply is
/// sent). A call that is not one of the service's is refused, a one-way one too.
fn call(exported: &Exported, service: usize, payload: &[u8]) -> Option<Vec<u8>> {
    let decoded = match decode_request(payload) {
        Ok(decoded) => decoded,
        Err(status) => return Some(encode_error(&Error::Status(status))),
    };
    let request = decoded.request;
    if !exported.admits(service, request.opcode) {
        let refused = Status::UnknownOpcode {
            opcode: request.opcode,
        };
        return Some(encode_error(&Error::Status(refused)));
    }
    let deadline = decoded.deadline.map(|d| d.min(exported.max_deadline));
    let shm = match exported.server(service) {
        Ok(shm) => shm,
        Err(refused) => return Some(encode_error(&refused)),
    };
    let shm = &*shm;
    // Made on the server's handler in this process where the bridge has it (a `ZenohServer`),
    // else (or where the handler does not serve calls so) on the server through its file.
    let local = exported.local.as_ref();
    let made = match request.reply {
        ReplyShape::None => {
            if local
                .and_then(|l| l.call_whole(&request, WholeReply::none()))
                .is_none()
            {
                let _ = Site::call(shm, deadline, |claim| {
                    service::replay(claim, &request, WholeReply::none())
                });
            }
            return None;
        }
        ReplyShape::Fixed(len) => {
            // The reply's bytes after its tag (0: Ok), written where they will be sent.
            let mut out = [0u8; 1 + ferry_rpc::layout::SLOT_BYTES];
            let fixed = &mut out[1..1 + len];
            let made = match local.and_then(|l| l.call_whole(&request, WholeReply::fixed(fixed))) {
                Some(made) => made,
                None => Site::call(shm, deadline, |claim| {
                    service::replay(claim, &request, WholeReply::fixed(&mut out[1..1 + len]))
                }),
            };
            made.map(|()| out[..1 + len].to_vec())
        }
        ReplyShape::Stream { limit } => {
            // The reply's bytes after its tag (0: Ok), written where they will be sent.
            let mut sink = Tagged {
                bytes: vec![0],
                len: 1,
            };
            let reply = WholeReply::stream(&mut sink, limit);
            let made = match local.and_then(|l| l.call_whole(&request, reply)) {
                Some(made) => made,
                None => Site::call(shm, deadline, |claim| {
                    service::replay(claim, &request, WholeReply::stream(&mut sink, limit))
                }),
            };
            made.map(|()| sink.into_reply())
        }
    };
    if let Err(Error::Transport(Transport::NoServer | Transport::ShuttingDown)) = made {
        // The server went away: the next calls find it gone (or its successor) at once.
        exported.check();
    }
    Some(made.unwrap_or_else(|e: Error| encode_error(&e)))
}

/// A streamed reply kept after a tag byte: its bytes appended as they come (in order, as a
/// stream's chunks do), with no zeroing of the buffer first.
struct Tagged {
    bytes: Vec<u8>,
    /// The tag and the stream's announced length.
    len: usize,
}

impl Tagged {
    /// The tag (0: Ok), then the reply, exactly as long as announced.
    fn into_reply(mut self) -> Vec<u8> {
        self.bytes.resize(self.len, 0);
        self.bytes
    }
}

impl StreamSink for Tagged {
    fn start(&mut self, _lane: u32, len: u64) -> bool {
        match usize::try_from(len).ok().and_then(|n| n.checked_add(1)) {
            Some(len) => {
                self.bytes.truncate(1);
                self.bytes.reserve_exact(len - 1);
                self.len = len;
                true
            }
            None => false,
        }
    }

    fn chunk(&mut self, _lane: u32, offset: u64, bytes: &[u8]) {
        let at = 1 + offset as usize;
        let end = at + bytes.len();
        if end > self.len {
            return;
        }
        if at == self.bytes.len() {
            self.bytes.extend_from_slice(bytes);
            return;
        }
        // (Out of order: never from a stream, kept correct all the same.)
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[at..end].copy_from_slice(bytes);
    }
}
