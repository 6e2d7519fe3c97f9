//! A server of derived services on zenoh: a shared-memory server in this process (so callers on
//! this machine take shared memory) and a [`Bridge`] that exports it (so callers elsewhere reach
//! it through zenoh). One handler: a call through zenoh is made on it directly, in this process
//! (`ShmServer::in_process`), counted and refused as the shared-memory server counts and
//! refuses its own.

use std::time::Duration;

use ferry_shm::{Handler, ServerConfig, ServerWait, ShmMailbox, ShmServer, Shutdown};
use zenoh::Session;

use crate::bridge::{Bridge, BridgeConfig};
use crate::error::ZenohError;

/// Derived services served under a name, on this machine through shared memory and across
/// machines through zenoh, until dropped or [`shutdown`](Self::shutdown).
///
/// ```no_run
/// # use ferry_rpc::RpcOpcodes;
/// # #[derive(RpcOpcodes)]
/// # enum Counter { #[rpc(response = u64)] Add { n: u64 } }
/// # struct Total;
/// # impl CounterServer for Total { fn add(&self, n: u64) -> u64 { n } }
/// use ferry_zenoh::ZenohServer;
/// use zenoh::Wait;
///
/// let session = zenoh::open(ferry_zenoh::peer_config(&["tcp/0.0.0.0:7447"], &[])?).wait()?;
/// let server = ZenohServer::start(&session, "counter", Default::default(), Counter::server(Total))?;
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
#[derive(Debug)]
pub struct ZenohServer {
    bridge: Option<Bridge>,
    shm: Option<ShmServer>,
}

impl ZenohServer {
    /// Serves `services` (`Counter::server(handler)`, `.and(...)` for more) under `name`: a
    /// shared-memory server at `ferry_shm::path_for(name)` with `config`, exported on `session`
    /// by a bridge with the default [`BridgeConfig`].
    pub fn start(
        session: &Session,
        name: &str,
        config: ServerConfig,
        services: impl Handler<ShmMailbox, ServerWait> + Send + 'static,
    ) -> Result<ZenohServer, ZenohError> {
        Self::start_with(session, name, config, BridgeConfig::default(), services)
    }

    /// As [`start`](Self::start), with the bridge's configuration.
    pub fn start_with(
        session: &Session,
        name: &str,
        config: ServerConfig,
        bridge: BridgeConfig,
        services: impl Handler<ShmMailbox, ServerWait> + Send + 'static,
    ) -> Result<ZenohServer, ZenohError> {
        crate::check_name(name)?;
        let shm = ShmServer::start(ferry_shm::path_for(name), config, services)?;
        let bridge = Bridge::start_serving(session, name, &shm, bridge)?;
        Ok(ZenohServer {
            bridge: Some(bridge),
            shm: Some(shm),
        })
    }

    /// The shared-memory server (its path, its statistics).
    pub fn shm(&self) -> &ShmServer {
        self.shm.as_ref().expect("present until shutdown")
    }

    /// The zenoh keys the services are served at.
    pub fn keys(&self) -> &[String] {
        self.bridge.as_ref().expect("present until shutdown").keys()
    }

    /// Stops taking calls through zenoh (calls in flight there are finished), then shuts the
    /// shared-memory server down as `ShmServer::shutdown` does, waiting at most `drain`.
    pub fn shutdown(mut self, drain: Duration) -> Shutdown {
        drop(self.bridge.take());
        self.shm
            .take()
            .expect("present until shutdown")
            .shutdown(drain)
    }
}

impl Drop for ZenohServer {
    fn drop(&mut self) {
        // The bridge first: it calls the shared-memory server.
        drop(self.bridge.take());
        drop(self.shm.take());
    }
}
