//! Derived ferry services across machines, through [zenoh](https://zenoh.io): the same service,
//! the same handlers and the same generated client methods as between processes, with shared
//! memory kept where caller and server share a machine.
//!
//! ```no_run
//! use ferry_rpc::RpcOpcodes;
//! use ferry_zenoh::{ClientConfig, ZenohClient, ZenohServer};
//! use zenoh::Wait;
//!
//! #[derive(RpcOpcodes)]
//! enum Counter {
//!     #[rpc(response = u64)]
//!     Add { n: u64 },
//! }
//!
//! struct Total(std::sync::atomic::AtomicU64);
//! impl CounterServer for Total {
//!     fn add(&self, n: u64) -> u64 {
//!         self.0.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n
//!     }
//! }
//!
//! // The server's machine: serves "counter" through shared memory and zenoh.
//! let session = zenoh::open(ferry_zenoh::peer_config(&["tcp/0.0.0.0:7447"], &[])?).wait()?;
//! let total = Total(Default::default());
//! let server = ZenohServer::start(&session, "counter", Default::default(), Counter::server(total))?;
//!
//! // Another machine: the same calls.
//! let session = zenoh::open(ferry_zenoh::peer_config(&[], &["tcp/server-host:7447"])?).wait()?;
//! let client = ZenohClient::connect(&session, "counter", ClientConfig::default().service::<Counter>())?;
//! assert_eq!(Counter::client(&client).add(2)?, 2);
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! # What a program calls
//!
//! - The server: [`ZenohServer::start`] with a session, a name and `Name::server(handler)` (the
//!   handler is the same `impl NameServer` as between processes): a shared-memory server
//!   (`ferry_shm::ShmServer`) under that name, exported to zenoh by a [`Bridge`].
//! - A server that already runs (a user's `ShmServer`, a GPU program's host): [`Bridge::start`]
//!   with a `ferry_shm::ShmClient` of it exports its services without changing its program
//!   (`ferry bridge --name NAME`, in the `ferry` command built with its `zenoh` feature).
//! - The client: [`ZenohClient::connect`] with a session, the name and a [`ClientConfig`] naming
//!   the services it calls (checked when it connects: [`ZenohError::NotServed`],
//!   [`ZenohError::Mismatch`]), then `Name::client(&client)`.
//! - Async calls: `Name::async_client(&client)` over a [`ZenohClient`] (or an
//!   `Arc<ZenohClient>`), the same `async fn`s as over shared memory: a call with a fixed reply
//!   is a query awaited on zenoh's own channel, with no thread held while it waits; a one-way
//!   call or a streamed reply runs on the client's helper threads ([`HELPERS`] at most).
//! - One name, the fastest path: [`NamedClient::connect`] takes shared memory when the server
//!   of that name runs on this machine, zenoh otherwise; the same calls either way.
//! - A session set up for either side: [`peer_config`] (peer to peer over TCP, no multicast
//!   scouting), or any `zenoh::Config` of your own (routers, other links).
//!
//! # How it works
//!
//! Each service is a queryable at `ferry/NAME/SERVICE/FINGERPRINT` (the fingerprint in 16 hex
//! digits), so a client of another schema finds no server of its own and is told which one
//! answers. A call is one query and its reply: the generated method's shape function
//! (`ferry_rpc::service`'s call shapes) asks its site for a whole-call path
//! (`ferry_rpc::service::WholeCall`), which this crate's claim gives, and sends the call whole
//! (module `message`: opcode, fixed arguments, streamed argument, what reply it expects, its
//! deadline); the bridge makes the same call on its shared-memory client with the same shape
//! function (`ferry_rpc::service::replay`) and sends back the reply's bytes, or the error as
//! the shared-memory call returned it. So a call across zenoh gets the results and errors it
//! would get between processes: the handler's typed error, `Status` refusals (an unknown opcode,
//! a stream over its limit, bytes that do not decode), `Transport` failures (the deadline).
//!
//! - **Deadlines** are the query's timeout and, sent with the call, the bridge's deadline for
//!   its call on the server: a call past its deadline returns `Transport::Deadline`.
//! - **Streams** (`Bytes`, `Text`) travel in the query's and the reply's payload, with the same
//!   limits: a one-lane client refuses an argument over its limit before sending, the server
//!   refuses it too, and a reply longer than the caller takes is `Status::ReplyTooLarge`.
//! - **Nothing is `Ok` that the server did not send**: a reply is checked against the call's
//!   shape (a fixed reply of exactly its length, a stream within its limit); a malformed one is
//!   `Status::BadResponse`, a malformed request `Status::BadRequest` on the bridge.
//! - **A server that goes away** mid-call: zenoh ends the query, and the call fails (before its
//!   deadline) with a `Transport::Other` that says whether it ran is unknown.
//! - **A bridge makes only its service's calls**: a query at a service's key whose opcode is not
//!   one of that service's calls is refused (`Status::UnknownOpcode`), never made on the server
//!   (which serves every service by opcode alone).
//! - **A bridge's server that restarts**: while none runs, calls fail at once with
//!   `Transport::NoServer`; a server of the same services and schemas started at the path is
//!   attached to again; one of other services or schemas is never called ([`ServerState`]).
//!
//! # zenoh's features
//!
//! This crate builds zenoh with `default-features = false` and `transport_tcp` only (the
//! defaults add QUIC, TLS, WebSocket, UDP, Unix sockets, compression and authentication). A
//! program that needs another link or feature adds zenoh to its own manifest with it; cargo
//! builds one zenoh with both sets.

#![deny(missing_docs)]

mod awaited;
mod bridge;
mod claim;
mod client;
mod error;
mod message;
mod named;
mod server;

pub use awaited::HELPERS;
pub use bridge::{Bridge, BridgeConfig, ServerState, WATCH};
pub use claim::WholeClaim;
pub use client::{ClientConfig, ZenohCall, ZenohClient, NOT_CONNECTED, NO_ANSWER};
pub use error::ZenohError;
pub use named::{NamedCall, NamedClient};
pub use server::ZenohServer;

pub use ferry_rpc;
pub use ferry_shm;
pub use zenoh;

// Threads share the clients, and the generated clients over them.
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<ZenohClient>();
    shared_by_threads::<NamedClient>();
    shared_by_threads::<Bridge>();
    shared_by_threads::<ZenohServer>();
};

/// The key of service `service` of schema `fingerprint`, served under `name`.
pub fn key_for(name: &str, service: &str, fingerprint: u64) -> String {
    format!("{}/{fingerprint:016x}", service_prefix(name, service))
}

/// The keys of every schema of service `service` under `name`, less the fingerprint.
fn service_prefix(name: &str, service: &str) -> String {
    format!("ferry/{name}/{service}")
}

/// Whether `name` may be part of a key: ASCII letters, digits, `-`, `_`, `.`, not empty.
fn check_name(name: &str) -> Result<(), ZenohError> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    match ok {
        true => Ok(()),
        false => Err(ZenohError::BadName(name.to_owned())),
    }
}

/// A session configuration for a peer that listens on `listen` and connects to `connect`
/// (zenoh endpoints, `tcp/HOST:PORT`), with multicast scouting off (peers find each other
/// through the endpoints given, not by multicast, which many networks and containers drop).
pub fn peer_config(listen: &[&str], connect: &[&str]) -> Result<zenoh::Config, ZenohError> {
    let mut config = zenoh::Config::default();
    let list = |v: &[&str]| serde_list(v);
    let set = |config: &mut zenoh::Config, key: &str, value: &str| {
        config
            .insert_json5(key, value)
            .map_err(|e| ZenohError::Zenoh(format!("{key} = {value}: {e}")))
    };
    set(&mut config, "mode", "\"peer\"")?;
    set(&mut config, "scouting/multicast/enabled", "false")?;
    set(&mut config, "listen/endpoints", &list(listen))?;
    set(&mut config, "connect/endpoints", &list(connect))?;
    Ok(config)
}

/// `["a","b"]` (endpoints have no quotes or backslashes to escape; one that did is refused by
/// zenoh's parser).
fn serde_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(","))
}
