//! The one-name client: given the name a service is served under, it takes shared memory when a
//! server of that name runs on this machine, and zenoh otherwise; the calling code is the same
//! either way (`Counter::client(&named)`).

use std::time::Duration;

use ferry_rpc::service::{self, Error, Site, WholeCall, WholeReply, WholeRequest};
use ferry_rpc::HeapRegion;
use ferry_shm::{path_for, ShmClient};
use zenoh::Session;

use crate::claim::{stand_in_region, WholeClaim};
use crate::client::{ClientConfig, ZenohClient};
use crate::error::ZenohError;

/// A client of services served under one name, on this machine through shared memory or
/// elsewhere through zenoh (see [`connect`](Self::connect)). `Send` and `Sync`, as both of its
/// paths are.
///
/// ```no_run
/// # use ferry_rpc::RpcOpcodes;
/// # #[derive(RpcOpcodes)]
/// # enum Counter { #[rpc(response = u64)] Add { n: u64 } }
/// use ferry_zenoh::{ClientConfig, NamedClient};
/// use zenoh::Wait;
///
/// let session = zenoh::open(ferry_zenoh::peer_config(&[], &["tcp/10.0.0.2:7447"])?).wait()?;
/// let named = NamedClient::connect(&session, "counter", ClientConfig::default().service::<Counter>())?;
/// let total = Counter::client(&named).add(2)?;
/// println!("{} call: {total}", if named.is_local() { "a local" } else { "a remote" });
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
pub struct NamedClient {
    path: Path,
    deadline: Duration,
    /// The region of the claims' stand-in process (see [`WholeClaim`]).
    unserved: HeapRegion,
}

enum Path {
    Local(ShmClient),
    Remote(ZenohClient),
}

impl std::fmt::Debug for NamedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedClient")
            .field("local", &self.is_local())
            .finish()
    }
}

impl NamedClient {
    /// Attaches to the shared-memory server of `name` on this machine (`ferry_shm::path_for`)
    /// if one runs and serves every service `config` names (with the same schema); otherwise
    /// connects through `session` as [`ZenohClient::connect`] does, failing as it does.
    pub fn connect(
        session: &Session,
        name: &str,
        config: ClientConfig,
    ) -> Result<NamedClient, ZenohError> {
        crate::check_name(name)?;
        let mut local = ferry_shm::ClientConfig::default().deadline(config.deadline);
        local.services = config.services.iter().map(|&(n, fp, _)| (n, fp)).collect();
        let deadline = config.deadline;
        let path = match ShmClient::attach(path_for(name), local) {
            Ok(shm) => Path::Local(shm),
            // None here (no file, a stale one, another schema): across zenoh.
            Err(_) => Path::Remote(ZenohClient::connect(session, name, config)?),
        };
        Ok(NamedClient {
            path,
            deadline,
            unserved: stand_in_region()?,
        })
    }

    /// Whether the calls go through shared memory (the server runs on this machine).
    pub fn is_local(&self) -> bool {
        matches!(self.path, Path::Local(_))
    }
}

/// How one call of a [`NamedClient`] travels: through zenoh as a [`ZenohClient`]'s does, or
/// through shared memory as a call on a claim of the local server made with the same shape
/// function (`ferry_rpc::service::replay`), so that small fixed calls still take its inline
/// lines.
#[derive(Debug)]
pub struct NamedCall<'a> {
    client: &'a NamedClient,
    deadline: Option<Duration>,
}

impl WholeCall for NamedCall<'_> {
    fn call_whole(&self, request: &WholeRequest<'_>, reply: WholeReply<'_>) -> Result<(), Error> {
        match &self.client.path {
            Path::Local(shm) => Site::call(shm, self.deadline, |claim| {
                service::replay(claim, request, reply)
            }),
            Path::Remote(zenoh) => zenoh.query(
                request,
                reply,
                self.deadline.unwrap_or(self.client.deadline),
            ),
        }
    }
}

/// The calls of a derived service's client go through the client: each is one call on the
/// local server, or one query.
impl Site for NamedClient {
    type Claim<'a> = WholeClaim<'a, NamedCall<'a>>;

    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Self::Claim<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        let how = NamedCall {
            client: self,
            deadline,
        };
        call(&WholeClaim::new(how, &self.unserved))
    }
}
