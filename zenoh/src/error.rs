//! What can go wrong connecting, serving and bridging through zenoh, each case worded for the
//! person who reads it. (A call's own failures are `ferry_rpc::service::Error`, as on every
//! transport.)

use ferry_shm::ShmError;

/// Why connecting a client, starting a server or a bridge failed.
#[derive(Debug)]
pub enum ZenohError {
    /// zenoh refused an operation (opening a session, declaring a key or a queryable, a query).
    Zenoh(String),
    /// No server of the service answered under the name within the client's attach time.
    NotServed {
        /// The service.
        service: &'static str,
        /// The name it was looked for under.
        name: String,
    },
    /// A server of the service answered, but built from another schema.
    Mismatch {
        /// The service.
        service: &'static str,
        /// This side's schema fingerprint.
        client: u64,
        /// The server's.
        server: u64,
    },
    /// The services asked for cannot be served or called together (none, two sharing an
    /// opcode).
    BadServices(String),
    /// A name that cannot be part of a zenoh key (empty, or with a character other than ASCII
    /// letters, digits, `-`, `_` and `.`).
    BadName(String),
    /// The shared-memory side failed (the server the bridge exports, or the one a server runs).
    Shm(ShmError),
}

impl ZenohError {
    pub(crate) fn zenoh(e: impl std::fmt::Display) -> ZenohError {
        ZenohError::Zenoh(e.to_string())
    }
}

impl From<ShmError> for ZenohError {
    fn from(e: ShmError) -> Self {
        ZenohError::Shm(e)
    }
}

impl std::fmt::Display for ZenohError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZenohError::Zenoh(e) => write!(f, "zenoh: {e}"),
            ZenohError::NotServed { service, name } => write!(
                f,
                "no server of service `{service}` answered under the name `{name}` (is one \
                 running, and can this session reach it?)"
            ),
            ZenohError::Mismatch {
                service,
                client,
                server,
            } => write!(
                f,
                "service `{service}` is served with another schema: client fingerprint \
                 {client:#018x}, server {server:#018x}"
            ),
            ZenohError::BadServices(why) => write!(f, "{why}"),
            ZenohError::BadName(name) => write!(
                f,
                "`{name}` cannot name a service across zenoh: use ASCII letters, digits, `-`, \
                 `_` and `.`"
            ),
            ZenohError::Shm(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ZenohError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ZenohError::Shm(e) => Some(e),
            _ => None,
        }
    }
}
