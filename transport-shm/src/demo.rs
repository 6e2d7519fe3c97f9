//! The demo service: what `ferry demo` serves and its clients call, and what the multi-process
//! tests use. Defined once, as the enum [`Demo`] with `#[derive(RpcOpcodes)]`: the derive gives
//! the opcodes, the [`DemoClient`] trait the clients call through, the [`DemoServer`] trait the
//! server implements ([`DemoService`]) and dispatches through, and [`Demo::FINGERPRINT`], which the
//! server writes into the file header so a client built for another service is refused at attach.

use std::path::Path;
use std::time::Duration;

use rpc_core::service::{CallError, Served};
use rpc_core::RpcOpcodes;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::client::{ClientConfig, ShmClient};
use crate::error::ShmError;
use crate::server::ServerPort;

/// The longest stream [`Demo::Sum`] accepts (its `limit`).
pub const SUM_LIMIT: u64 = 1 << 20;
/// The longest [`Demo::Sleep`]; a longer one is refused without sleeping.
pub const MAX_SLEEP_MICROS: u64 = 10_000_000;

/// [`Demo::Echo`]'s reply: the id, and [`mix`] of it computed by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Echoed {
    /// The id the client sent.
    pub id: u64,
    /// `mix(id)`, so a reply that crossed to another call is caught.
    pub mix: u64,
}

/// [`Demo::Add`]'s request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Operands {
    /// The first addend.
    pub a: u64,
    /// The second addend.
    pub b: u64,
}

/// [`Demo::Sleep`]'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Slept {
    /// How long the server slept, in microseconds (0 when refused).
    pub micros: u64,
    /// 1 if the request was over [`MAX_SLEEP_MICROS`] and refused, 0 if served.
    pub refused: u64,
}

/// [`Demo::Sum`]'s reply, as the server counted the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Summed {
    /// The stream's length in bytes.
    pub len: u64,
    /// The sum of its bytes.
    pub sum: u64,
}

/// The demo service: one variant per call.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.demo")]
pub enum Demo {
    /// Echo: `id` → `(id, mix(id))`.
    #[rpc(request = u64, response = Echoed)]
    Echo,
    /// Add: `(a, b)` → `a + b` (wrapping).
    #[rpc(request = Operands, response = u64)]
    Add,
    /// Sleep: `micros` → `micros`, after sleeping that long; refused (without sleeping) above
    /// [`MAX_SLEEP_MICROS`].
    #[rpc(request = u64, response = Slept)]
    Sleep,
    /// Sum: a byte stream of at most [`SUM_LIMIT`] bytes → `(length, sum of the bytes)`; a longer
    /// one is refused (`status::REJECTED`).
    #[rpc(request = [u8], response = Summed, limit = 1048576)]
    Sum,
}

// The derive's `limit` takes a literal: keep it equal to the constant.
const _: () = assert!(SUM_LIMIT == 1_048_576);

/// What [`Demo::Echo`] returns beside the id: a value only the right id gives, so a reply that
/// crossed to another call is caught.
pub const fn mix(id: u64) -> u64 {
    let x = id ^ 0x9e37_79b9_7f4a_7c15;
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The demo service's implementation, and its server handler (both paths; `impl_handler!`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DemoService;

impl DemoServer for DemoService {
    fn echo(&self, id: u64) -> Echoed {
        Echoed { id, mix: mix(id) }
    }

    fn add(&self, r: Operands) -> u64 {
        r.a.wrapping_add(r.b)
    }

    fn sleep(&self, micros: u64) -> Slept {
        if micros > MAX_SLEEP_MICROS {
            return Slept {
                micros: 0,
                refused: 1,
            };
        }
        std::thread::sleep(Duration::from_micros(micros));
        Slept { micros, refused: 0 }
    }

    fn sum(&self, data: &[u8]) -> Summed {
        Summed {
            len: data.len() as u64,
            sum: data.iter().map(|&b| b as u64).sum(),
        }
    }
}

/// Serves the call waiting on `port` with `service`, through the generated
/// [`DemoServer::dispatch`]: an opcode the service does not have gets `status::UNKNOWN_OPCODE`,
/// a `Sum` stream over [`SUM_LIMIT`] gets `status::REJECTED`.
pub fn dispatch(
    service: &impl DemoServer,
    port: &mut ServerPort<'_, '_>,
) -> Result<Served, rpc_core::Error> {
    crate::service::with_stream_buffers(|buffers| service.dispatch(port, buffers))
}

/// Serves one demo call that came through the packets with [`DemoService`]. As a handler on its
/// own it serves no inline calls (clients then make every call through the packets);
/// [`DemoService`] itself, as a handler, serves both.
pub fn serve(port: &mut ServerPort<'_, '_>) -> Result<(), rpc_core::Error> {
    dispatch(&DemoService, port).map(|_| ())
}

/// A client handle on a demo server's file: each method claims a port and makes the call through
/// the generated [`DemoClient`] trait ([`ShmClient::call_typed`]).
///
/// Errors: [`ShmError::Call`] when the call did not complete (the server stalled or died);
/// [`ShmError::Service`] when the server answered with an error (`CallError::Rejected` for a
/// `sum` stream over [`SUM_LIMIT`], `CallError::BadRequest` for a `sleep` over
/// [`MAX_SLEEP_MICROS`]).
#[derive(Debug)]
pub struct DemoHandle {
    client: ShmClient,
}

impl DemoHandle {
    /// Attaches to a demo server's file, checking that its fingerprint is [`Demo::FINGERPRINT`].
    /// The handle is sticky ([`ClientConfig::sticky`]): it keeps its port between calls.
    pub fn attach(path: impl AsRef<Path>, deadline: Duration) -> Result<DemoHandle, ShmError> {
        let config = ClientConfig {
            fingerprint: Some(Demo::FINGERPRINT),
            deadline,
            sticky: true,
        };
        Ok(DemoHandle {
            client: ShmClient::attach(path, config)?,
        })
    }

    /// A demo handle over an attached client handle.
    pub fn new(client: ShmClient) -> DemoHandle {
        DemoHandle { client }
    }

    /// The underlying client handle.
    pub fn client(&mut self) -> &mut ShmClient {
        &mut self.client
    }

    /// [`Demo::Echo`]: `(id, mix(id))` as the server computed them.
    pub fn echo(&mut self, id: u64) -> Result<(u64, u64), ShmError> {
        let r = self.client.call_typed(|p| p.echo(id))?;
        Ok((r.id, r.mix))
    }

    /// [`Demo::Add`].
    pub fn add(&mut self, a: u64, b: u64) -> Result<u64, ShmError> {
        self.client.call_typed(|p| p.add(Operands { a, b }))
    }

    /// [`Demo::Sleep`]: the server sleeps `micros`.
    pub fn sleep(&mut self, micros: u64) -> Result<(), ShmError> {
        let slept = self.client.call_typed(|p| p.sleep(micros))?;
        if slept.refused != 0 {
            return Err(ShmError::Service(CallError::BadRequest));
        }
        Ok(())
    }

    /// [`Demo::Sum`]: streams `data`, returns `(length, sum of bytes)` as the server counted them.
    pub fn sum(&mut self, data: &[u8]) -> Result<(u64, u64), ShmError> {
        let r = self.client.call_typed(|p| p.sum(data))?;
        Ok((r.len, r.sum))
    }
}

// The demo service as a server handler: calls through the packets go to the generated
// `dispatch`, inline calls (`echo`, `add`, `sleep`: fixed requests and replies of at most 32
// bytes) to the generated `dispatch_inline`.
crate::impl_handler!(DemoService: DemoServer);
