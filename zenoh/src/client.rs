//! The client: a derived service's calls as zenoh queries, one query per call.

use std::time::{Duration, Instant};

use ferry_rpc::service::{
    self, Error, Helpers, ReplyShape, Service, Site, Transport, WholeCall, WholeReply, WholeRequest,
};
use ferry_rpc::HeapRegion;
use zenoh::handlers::DefaultHandler;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::session::SessionGetBuilder;
use zenoh::{Session, Wait};

use crate::claim::{stand_in_region, WholeClaim};
use crate::error::ZenohError;
use crate::message::{decode_reply, encode_request};
use crate::{key_for, service_prefix};

/// How a client connects.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The services this client will call: connecting fails unless a server of each (the same
    /// name and schema fingerprint) answers, and a call of any other service is refused here.
    pub services: Vec<(&'static str, u64, &'static [u32])>,
    /// How long a call waits for its reply (a generated client's `with_deadline` overrides it for
    /// its calls): the query's timeout, and the server's deadline for making the call there. A
    /// call past it returns `Transport::Deadline`, never a reply that came later.
    pub deadline: Duration,
    /// How long connecting waits for a server of each service to answer (a server just started,
    /// or a session still discovering its peers, takes a moment to be reachable).
    pub attach: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            services: Vec::new(),
            deadline: Duration::from_secs(10),
            attach: Duration::from_secs(5),
        }
    }
}

impl ClientConfig {
    /// This configuration, also calling service `S`: connecting checks that a server of `S`
    /// with the same schema fingerprint answers.
    pub fn service<S: Service>(mut self) -> Self {
        self.services.push((S::NAME, S::FINGERPRINT, S::OPCODES));
        self
    }

    /// This configuration with [`deadline`](Self::deadline) set.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// This configuration with [`attach`](Self::attach) set.
    pub fn attach(mut self, attach: Duration) -> Self {
        self.attach = attach;
        self
    }
}

/// Where a call of one opcode goes.
#[derive(Clone, Debug)]
struct Route {
    opcode: u32,
    service: &'static str,
    key: zenoh::key_expr::KeyExpr<'static>,
}

/// A client of services served under one name through zenoh: where the clients of derived
/// services make their calls (`Counter::client(&client)`), as over shared memory. `Send` and
/// `Sync`: threads share one, each call a query of its own.
///
/// ```no_run
/// # use ferry_rpc::RpcOpcodes;
/// # #[derive(RpcOpcodes)]
/// # enum Counter { #[rpc(response = u64)] Add { n: u64 } }
/// use ferry_zenoh::{ClientConfig, ZenohClient};
/// use zenoh::Wait;
///
/// let session = zenoh::open(ferry_zenoh::peer_config(&[], &["tcp/10.0.0.2:7447"])?).wait()?;
/// let client = ZenohClient::connect(&session, "counter", ClientConfig::default().service::<Counter>())?;
/// let counter = Counter::client(&client);
/// let total = counter.add(2)?;
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
pub struct ZenohClient {
    session: Session,
    /// By opcode.
    routes: Vec<Route>,
    deadline: Duration,
    /// The region of the claims' stand-in process, which no server serves (see
    /// [`WholeClaim`]).
    unserved: HeapRegion,
    /// The threads on which the async client runs the calls it cannot await in place (a
    /// one-way call, a streamed reply: module `awaited`), started when first needed.
    pub(crate) helpers: std::sync::OnceLock<Helpers<ZenohClient>>,
}

impl std::fmt::Debug for ZenohClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZenohClient")
            .field("routes", &self.routes)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl ZenohClient {
    /// A client of the services `config` names, served under `name` and reached through
    /// `session`: waits (at most `config.attach`) until a server of each answers with the same
    /// schema. Fails with [`ZenohError::NotServed`] if none answers, [`ZenohError::Mismatch`] if
    /// one of another schema does, [`ZenohError::BadServices`] if two of the services share an
    /// opcode or there are none.
    pub fn connect(
        session: &Session,
        name: &str,
        config: ClientConfig,
    ) -> Result<ZenohClient, ZenohError> {
        crate::check_name(name)?;
        if config.services.is_empty() {
            return Err(ZenohError::BadServices(
                "no services to call: name them with ClientConfig::service".into(),
            ));
        }
        let mut routes = Vec::new();
        for &(service, fingerprint, opcodes) in &config.services {
            crate::check_name(service)?;
            attach(session, name, service, fingerprint, config.attach)?;
            let key = session
                .declare_keyexpr(key_for(name, service, fingerprint))
                .wait()
                .map_err(ZenohError::zenoh)?;
            for &opcode in opcodes {
                routes.push(Route {
                    opcode,
                    service,
                    key: key.clone(),
                });
            }
        }
        routes.sort_by_key(|r| r.opcode);
        if let Some(pair) = routes.windows(2).find(|w| w[0].opcode == w[1].opcode) {
            return Err(ZenohError::BadServices(format!(
                "services `{}` and `{}` share opcode {:#010x}",
                pair[0].service, pair[1].service, pair[0].opcode
            )));
        }
        Ok(ZenohClient {
            session: session.clone(),
            routes,
            deadline: config.deadline,
            unserved: stand_in_region()?,
            helpers: Default::default(),
        })
    }

    /// Another client of the same services on the same session (a helper thread's own).
    pub(crate) fn twin(&self) -> ZenohClient {
        ZenohClient {
            session: self.session.clone(),
            routes: self.routes.clone(),
            deadline: self.deadline,
            unserved: stand_in_region().expect("laid out once already"),
            helpers: Default::default(),
        }
    }

    /// The deadline of a call that gives none.
    pub(crate) fn default_deadline(&self) -> Duration {
        self.deadline
    }

    fn route(&self, opcode: u32) -> Option<&Route> {
        let at = self
            .routes
            .binary_search_by_key(&opcode, |r| r.opcode)
            .ok()?;
        Some(&self.routes[at])
    }

    /// Makes `request` as a query; `deadline` bounds the wait for its reply.
    pub(crate) fn query(
        &self,
        request: &WholeRequest<'_>,
        reply: WholeReply<'_>,
        deadline: Duration,
    ) -> Result<(), Error> {
        let (route, get) = self.get(request, deadline)?;
        if request.reply == ReplyShape::None {
            // One-way: sent, not waited for (its reply, if any, is dropped).
            return get
                .callback(|_| {})
                .wait()
                .map_err(|_| Transport::Other(QUERY_REFUSED).into());
        }
        let start = Instant::now();
        let replies = get
            .wait()
            .map_err(|_| Error::from(Transport::Other(QUERY_REFUSED)))?;
        // (A moment past the query's timeout: zenoh ends the query itself at its timeout.)
        let answer = match replies.recv_deadline(start + deadline + Duration::from_millis(50)) {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => return Err(Transport::Deadline.into()),
            Err(_) => Err(()),
        };
        take_answer(answer, route, reply, start, deadline)
    }

    /// As [`query`](Self::query), for a call with a fixed reply (`out`'s length), awaited on
    /// zenoh's own channel: no thread is held while the reply is on its way. (zenoh ends the
    /// query at its timeout, the call's deadline, which ends the wait.)
    pub(crate) async fn query_fixed(
        &self,
        request: &WholeRequest<'_>,
        out: &mut [u8],
        deadline: Duration,
    ) -> Result<(), Error> {
        let (route, get) = self.get(request, deadline)?;
        let start = Instant::now();
        let replies = get
            .await
            .map_err(|_| Error::from(Transport::Other(QUERY_REFUSED)))?;
        let answer = replies.recv_async().await.map_err(|_| ());
        take_answer(answer, route, WholeReply::fixed(out), start, deadline)
    }

    /// The route of `request` and its query, not yet sent.
    fn get(
        &self,
        request: &WholeRequest<'_>,
        deadline: Duration,
    ) -> Result<(&Route, SessionGetBuilder<'_, '_, DefaultHandler>), Error> {
        let Some(route) = self.route(request.opcode) else {
            return Err(Transport::Other(NOT_CONNECTED).into());
        };
        let payload = encode_request(request, Some(deadline));
        let get = self
            .session
            .get(&route.key)
            .payload(payload)
            .target(QueryTarget::BestMatching)
            .consolidation(ConsolidationMode::None)
            .congestion_control(CongestionControl::Block)
            .express(true)
            .timeout(deadline);
        Ok((route, get))
    }
}

/// Hands a query's answer to `reply` (`Err`: the query ended without one), its error told apart
/// from the deadline by the time since `start`.
fn take_answer(
    answer: Result<zenoh::query::Reply, ()>,
    route: &Route,
    mut reply: WholeReply<'_>,
    start: Instant,
    deadline: Duration,
) -> Result<(), Error> {
    match answer {
        Ok(answer) => match answer.result() {
            Ok(sample) => {
                let payload = sample.payload();
                let mut slices = payload.slices();
                match slices.next() {
                    // A reply's bytes: taken as they arrived, fragments and all (a large one is
                    // not gathered into one buffer first).
                    Some([0, first @ ..]) => {
                        reply.deliver_parts(payload.len() - 1, std::iter::once(first).chain(slices))
                    }
                    _ => {
                        let bytes = payload.to_bytes();
                        reply.deliver(decode_reply(&bytes, route.service)?)
                    }
                }
            }
            // zenoh's own error at the query's timeout (its timer started after `start`).
            Err(_) if start.elapsed() >= deadline => Err(Transport::Deadline.into()),
            Err(_) => Err(Transport::Other(REPLIED_ERROR).into()),
        },
        // The query ended without a reply.
        Err(()) if start.elapsed() >= deadline => Err(Transport::Deadline.into()),
        Err(()) => Err(Transport::Other(NO_ANSWER).into()),
    }
}

/// The error of a call of a service the client was not connected for.
pub const NOT_CONNECTED: &str =
    "this zenoh client was not connected for this call's service (add it with ClientConfig::service)";
/// The error of a query ended, before its deadline, without a reply.
pub const NO_ANSWER: &str = "no server answered the call: none was reachable, or it went away \
    during the call (whether it ran the call is unknown), or the link could not carry the call \
    (a session in zenoh's low-latency mode carries no message longer than one batch, under \
    64 KiB)";
const QUERY_REFUSED: &str = "the zenoh session refused the query (closed?)";
const REPLIED_ERROR: &str = "the server replied with a zenoh error instead of a reply";

/// Waits until a server of `service` with `fingerprint` answers under `name`, or `within`
/// passes.
fn attach(
    session: &Session,
    name: &str,
    service: &'static str,
    fingerprint: u64,
    within: Duration,
) -> Result<(), ZenohError> {
    let wanted = key_for(name, service, fingerprint);
    let all = format!("{}/*", service_prefix(name, service));
    let until = Instant::now() + within;
    let mut other = None;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let replies = session
            .get(&all)
            .target(QueryTarget::All)
            .consolidation(ConsolidationMode::None)
            .timeout(
                left.min(Duration::from_millis(500))
                    .max(Duration::from_millis(1)),
            )
            .wait()
            .map_err(ZenohError::zenoh)?;
        while let Ok(reply) = replies.recv() {
            let Ok(sample) = reply.result() else { continue };
            let key = sample.key_expr().as_str();
            if key == wanted {
                return Ok(());
            }
            if let Some(fp) = key.rsplit('/').next() {
                other = u64::from_str_radix(fp, 16).ok().or(other);
            }
        }
        if Instant::now() >= until {
            return Err(match other {
                Some(server) => ZenohError::Mismatch {
                    service,
                    client: fingerprint,
                    server,
                },
                None => ZenohError::NotServed {
                    service,
                    name: name.to_owned(),
                },
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How one call of a [`ZenohClient`] travels: as a query, waiting at most its deadline.
#[derive(Debug)]
pub struct ZenohCall<'a> {
    client: &'a ZenohClient,
    deadline: Duration,
}

impl WholeCall for ZenohCall<'_> {
    fn call_whole(&self, request: &WholeRequest<'_>, reply: WholeReply<'_>) -> Result<(), Error> {
        self.client.query(request, reply, self.deadline)
    }
}

/// The calls of a derived service's client go through the client: each is one query.
impl Site for ZenohClient {
    type Claim<'a> = WholeClaim<'a, ZenohCall<'a>>;

    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Self::Claim<'_>) -> Result<R, service::Error<E>>,
    ) -> Result<R, service::Error<E>> {
        let how = ZenohCall {
            client: self,
            deadline: deadline.unwrap_or(self.deadline),
        };
        call(&WholeClaim::new(how, &self.unserved))
    }
}
