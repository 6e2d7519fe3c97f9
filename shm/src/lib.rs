//! The ferry protocol between processes, through a shared-memory file (memmap2). Linux only.
//!
//! A server creates the file (in `/dev/shm` by default, any path allowed) and serves it from
//! several worker threads; client processes attach to it and make calls. It is the way to use the
//! framework, and to test device code, on a machine without a GPU. The `ferry` command (package
//! `ferry-rpc-cli`, folder `cli/`) runs the demo service (package `ferry-demo`, the service used below) with client processes
//! and prints a summary.
//!
//! ```no_run
//! use ferry_demo::{Demo, DemoService};
//! use ferry_shm::{ClientConfig, ServerConfig, ShmClient, ShmServer};
//!
//! // The server process: serve one or more derived services (`.and(Other::server(h))`).
//! let server = ShmServer::start("my-app", ServerConfig::default(), Demo::server(DemoService))?;
//! // A client process: attach, checking that the services it calls are served, then call.
//! let shm = ShmClient::attach("my-app", ClientConfig::default().service::<Demo>())?;
//! let demo = Demo::client(&shm);
//! assert_eq!(demo.add(2, 3), Ok(5));
//! # Ok::<(), ferry_shm::ShmError>(())
//! ```
//!
//! # What a program calls
//!
//! - A service: a plain enum with `#[derive(RpcOpcodes)]` ([`RpcOpcodes`]; the derive's guide is
//!   in `ferry-derive`'s docs), its handlers an `impl NameServer for YourType`; a type of your
//!   own that crosses (an argument, a reply, an error) carries [`wire`](macro@wire).
//! - The server: [`ShmServer::start`] with a [`ServerConfig`] (ports, workers, the bulk area per
//!   port) and `Name::server(handler)`; [`ShmServer::serve_until_signal`] serves until SIGINT or
//!   SIGTERM and removes the file, [`ShmServer::shutdown`] stops it from the program.
//! - The client: [`ShmClient::attach`] with a [`ClientConfig`] (the services it calls, checked
//!   when it attaches; a deadline; sticky ports), then `Name::client(&shm)`, whose methods are the
//!   calls. A `ShmClient` is `Send + Sync`: threads share one. `Name::async_client(&shm)` has
//!   the same calls as `async fn`s for any executor, with no thread held while one waits (the
//!   server wakes its task).
//! - Errors: a call returns `ferry_rpc::service::Error` (the handler's own error, the server's
//!   refusal, or the transport's failure: no server, a deadline); attaching and starting return
//!   [`ShmError`].
//!
//! # How it works
//!
//! ```text
//! offset 0           header (128 bytes): magic, version, geometry, the services table's hash,
//!                    server pid and start time, state, flags, the number of services
//! region_offset      the ferry_rpc region: mailboxes and packets (ferry_rpc::Layout, packed mailboxes)
//! owners_offset      one u64 owner word per port: generation << 32 | holder (0: free)
//! inline_offset      the inline bitmap (one bit per port), then one 64-byte head line per port,
//!                    then each port's wide lines (4 × 64 bytes), then the ready bitmap and the
//!                    doorbell's line (async calls: module `awaited`)
//! services_offset    the services table: one 64-byte entry (name, fingerprint) per service
//! ```
//!
//! Two ways a call travels. Through the **packets** (ferry-rpc's protocol: any call, streams of
//! any size), or, for a call whose arguments and reply are fixed (every fixed call: a slot at
//! most), **inline**: in the port's inline lines, where the request, the reply and both sides' sequence
//! words share one cache line up to 40 bytes each way, and lines that carry the call's sequence
//! beside their bytes take the rest, so a call moves the lines its bytes need, all at once,
//! instead of four one after another (module `inline`). The generated client methods pick the path themselves; a server whose handler
//! serves inline calls ([`Handler::serves_inline`]: every derived service does) says so in the
//! header, and clients of one that does not make every call through the packets.
//!
//! **Large payloads** cross each port's *bulk area* ([`ServerConfig::bulk`], 256 KiB by
//! default, a part of the region that belongs to whichever side holds the port's packet): a
//! stream longer than a slot moves one area per handoff instead of 64 bytes, a request that
//! arrives whole is read by the handler where it lies, and a call with a `Bytes` argument and a
//! fixed reply travels inline with its bytes in the area (`ferry_rpc::stream`, module `inline`).
//! A large request then costs little more than copying its bytes once; a handler that reads
//! every byte also pays for moving them from the client's core to its own (BENCHMARKS.md has
//! both, and that move's floor).
//!
//! Modules: `header` (the header and its checks), `file` (creating, stale files, attaching,
//! mapping, the services table), `owner` (owner words and liveness), `inline` (inline lines),
//! `wait` (backoff with deadlines), `server` (serving a [`Handler`]: derived services, closures,
//! `ferry_rpc`'s one trait for every transport), `signal` (serving until SIGINT or SIGTERM),
//! `client`.
//!
//! # Who writes what
//!
//! | memory | written by | when |
//! |---|---|---|
//! | client outbox bit of port p | the client holding p's claim | to hand the packet over |
//! | server outbox bit of port p | the worker holding p's server lock | to hand the packet back |
//! | inline lines p (head and wide), request words | the client holding p's claim, line at rest | to call inline |
//! | inline lines p (head and wide), reply words | the worker holding p's inline lock | to answer inline |
//! | inline bitmap bit p | set by p's claim holder (it stays set when the claim ends); cleared by the monitor, holding p's claim when p is idle, or at reclaim | |
//! | packet p | whichever side owns it (ferry-rpc's rule) | while it owns it |
//! | bulk area of port p | as packet p; for an inline call with a body: the claim holder until it hands the request over, then the worker until it hands the reply back | while it owns it |
//! | owner word p, free → claimed | any client, by compare-and-swap | to start a call |
//! | owner word p, claimed → free / abandoned | its holder | when its call ends / fails |
//! | owner word p, dead or abandoned → free | the server's monitor, holding p's server lock | reclaim |
//! | owner word p, free → claimed → free | the server's monitor, as a client would | to disarm an idle port's inline line |
//! | server lock bitmap, inline locks | workers and the monitor, in the server process only | |
//! | header state word | the server | serving → draining → stopped |
//!
//! # Reclaiming the port of a dead client
//!
//! ```text
//!  client A                        owner word p          server (workers, monitor)
//!  CAS free→(g+1, A)  ───────────▶ (g+1, A)
//!  write packet, flip outbox ─────────────────────────▶ worker locks p, serves, flips back
//!  ✝ SIGKILL (anywhere)            (g+1, A)             ...
//!                                                       monitor, every interval:
//!                                                         word unchanged since last pass
//!                                                         and pid A dead (or ABANDONED)?
//!                                                         lock p's server bit (no worker on p;
//!                                                           a worker mid-stream gives up first:
//!                                                           its wait sees A dead)
//!                                                         client side owns p, inline line at
//!                                                           rest? (else a request is pending:
//!                                                           serve it first, retry)
//!                                                         clear p's inline bitmap bit
//!                                  (g+1, 0)  ◀────────── CAS (g+1, A) → (g+1, 0); unlock
//!  client B: CAS (g+1,0)→(g+2,B) ─▶ (g+2, B)            B's call proceeds as any other
//! ```
//!
//! **The invariant.** A port's owner word is non-free exactly while some client (or the monitor,
//! disarming the line of a port left idle, which touches nothing else) may touch the client side
//! of that port; it becomes free only (a) by its live holder after a complete exchange, (b) by the
//! monitor, while it holds the port's server lock (so no worker is inside a call on it), after
//! seeing the packet at rest with the client side, the inline line at rest, and the holder dead or
//! abandoned (so nothing will touch it), or (c) by the monitor releasing its own claim of a free
//! port, taken only to disarm the port's inline line. Hence a new claimer always finds the packet
//! and the line at rest and no worker mid-call on it: no reply can cross to another call.
//!
//! The claim is a single compare-and-swap that records the holder, so there is no moment at which
//! a port is taken but its holder unknown. A client that gives up mid-call (deadline, stream
//! refused, panic) marks the port `ABANDONED` instead of freeing it, since a worker might still be
//! inside its call; the monitor frees it under the rule above. A worker waiting inside a call
//! (between packets of a stream) checks the port's owner word and the holder's liveness as it
//! backs off, so a dead client costs it one backoff step, not the deadline.
//!
//! A *sticky* client handle (`ClientConfig::sticky`) keeps its claim between calls instead of
//! releasing it after each (one claim per seat of the handle: a handle shared by threads has a
//! seat for each call in flight at once, see [`ShmClient`]): the owner word stays `(g+1, A)`
//! while the handle lives, so its calls make no compare-and-swap. The rules above hold unchanged: the claim is released by its live
//! holder (when the handle is dropped or `release_port` is called, always after a complete
//! exchange), abandoned on a failed call, or reclaimed by the monitor once the holder is dead.
//!
//! "A" in an owner word is the holder's pid *and a tag of its start time* (`owner::holder`): a
//! killed client's pid reused by a new process before the monitor looks is told apart by its later
//! start time, and the port is reclaimed. One reused pid in 1022 gets the same tag; that port then
//! stays held until the new process exits (never freed early: the check errs on the side of
//! holding). The header records the server's start time the same way, so a client does not take
//! a crashed server's recycled pid for a live server.
//!
//! # Recovering from writes behind the protocol's back
//!
//! The file is 0600, so only a process of the same user can write it outside the protocol (a bug,
//! a stray pointer, a hostile process). The server never trusts what it reads (lengths are
//! bounded, opcodes checked, sizes refused) and brings every port back to rest once such writing
//! stops, within a bound: the longer of the clients' deadline and [`ServerConfig::call_deadline`]
//! (a call in flight when the writing stopped ends by then: answered, failed or abandoned), plus
//! two [`ServerConfig::reclaim_interval`]s (the monitor acts on a word that stayed the same for a
//! whole interval). What brings each part back:
//! - a packet left with the server, or an inline request pending: a worker answers it (with an
//!   error status for what does not decode), which puts it back with the client side;
//! - an owner word naming no live client (a pid or start tag of 0, a dead process, a start tag
//!   that is not its process's, `ABANDONED`): the monitor frees it as it frees a dead client's;
//! - a kept (sticky) claim whose word was changed: its handle sees that before its next call and
//!   claims another port; a call whose claim changed under it fails with
//!   [`ShmError::PortLost`], never returning what it read as a reply;
//! - the header (fields and state word): the monitor writes back what the server wrote, every
//!   interval.
//!
//! One thing a writer can do is not undone: an owner word forged to name a live process of that
//! user *with its start tag* (which takes reading that process's start time, no accident) holds
//! the port until that process exits, as a real claim of that process would; such a writer could
//! as well claim every port through the protocol.
//!
//! # Shutting down
//!
//! [`ShmServer::shutdown`] sets the state to draining (clients that claim after that see it and
//! back off; the claim and the state are both sequentially consistent, so a claim is either seen
//! by the drain or refused), waits until no port is claimed and no request is pending, stops the
//! workers and removes the file, all by its deadline: a worker stuck inside a handler past it is
//! left to end on its own. A sticky handle checks the state before each call on its kept
//! claim and gives the claim back if the server is draining; one that stays idle would hold its
//! claim forever, so the drain counts a claimed port as finished once it has stayed at rest under
//! the same owner word, with no worker on it, for 20 ms. A sticky call that passed its state check
//! just before the drain began and is still between that check and its request after 20 ms (the
//! client descheduled that long) is not served: it fails with `NoServer` or `ShuttingDown`, never
//! executed without a reply. Dropping the server (also in a panic) stops it at once and
//! removes the file (a handler that does not return is waited for [`STOP_GRACE`], then left
//! running, detached: see [`ShmServer`]); a server killed outright leaves a stale file the next server replaces
//! (`file` explains how it tells stale from live).
//!
//! A server program left running is stopped with Ctrl-C or `kill`:
//! [`ShmServer::serve_until_signal`] serves until SIGINT or SIGTERM comes, then shuts down as
//! above and removes the file. A server's own threads start with those two signals blocked, so
//! they never take one (module `signal`).

#![deny(missing_docs)]

mod awaited;
pub mod cache;
mod client;
mod error;
pub mod file;
pub mod header;
mod inline;
pub mod owner;
mod reactor;
mod server;
mod signal;
pub mod status;
mod sync;
mod wait;

/// The protocol and the service runtime, for a user who depends on this crate alone:
/// `#[derive(RpcOpcodes)]` and `#[derive(Schema)]` find it here, and
/// `ferry_shm::ferry_rpc::service` has the error and marker types that generated clients use.
pub use ferry_rpc;
pub use ferry_rpc::service::{cancelled, Bytes, Text};
pub use ferry_rpc::{wire, RpcOpcodes, Schema};

pub use client::{Claimed, ClaimedProcess, ClientConfig, ClientPort, ShmClient, SEATS};
pub use error::ShmError;
pub use file::{path_for, Created};
pub use header::{Geometry, HeaderError};
pub use inline::ClientInline;
/// The mailbox representation of shared-memory regions: one bit per port. Against one word per
/// port (`cargo bench -p ferry-rpc --bench protocol -- round_trip`, figures in
/// `BENCHMARKS-history.md`) it makes the round trip between host threads faster (the server's
/// scan reads two words per 32 ports instead of 64) and costs nothing here, where both sides are
/// CPUs that can flip bits with a read-modify-write; GPU regions keep one word per port (see
/// `ferry_rpc::mailbox`).
pub type ShmMailbox = ferry_rpc::Packed;
pub use server::{
    Caller, Handler, InProcess, ServerConfig, ServerPort, ServerStats, ShmServer, Shutdown,
    DEFAULT_BULK, MONITOR_THREAD, STOP_GRACE,
};

pub use signal::StopSignal;
pub use wait::{ClientWait, ServerWait};

/// The README's examples, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
