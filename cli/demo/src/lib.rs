//! The demo service: what `ferry demo` serves and its clients call, and what the multi-process
//! tests use. Defined once, as the enum [`Demo`] with `#[derive(RpcOpcodes)]`: the derive gives
//! the opcodes, the [`DemoClient`] its clients call through (`Demo::client(&shm)`), the
//! [`DemoServer`] trait the server implements ([`DemoService`]), and the fingerprint the server
//! lists in its file so that a client built for another schema is refused at attach.
//!
//! ```no_run
//! use ferry_demo::{Demo, DemoService};
//! use ferry_shm::{ClientConfig, ServerConfig, ShmClient, ShmServer};
//!
//! let server = ShmServer::start("demo-doc", ServerConfig::default(), Demo::server(DemoService))?;
//! let shm = ShmClient::attach(server.path(), ClientConfig::default().service::<Demo>())?;
//! let demo = Demo::client(&shm);
//! assert_eq!(demo.add(40, 2), Ok(42));
//! # Ok::<(), ferry_shm::ShmError>(())
//! ```

use ferry_rpc::service::Bytes;
use ferry_rpc::{RpcOpcodes, Schema};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, TryFromBytes};

/// The longest stream [`Demo::Sum`] accepts (its `limit`).
pub const SUM_LIMIT: u64 = 1 << 20;
/// The longest [`Demo::Sleep`]; a longer one is refused without sleeping.
pub const MAX_SLEEP_MICROS: u64 = 10_000_000;

impl From<(u64, u64)> for Echoed {
    fn from((id, mix): (u64, u64)) -> Self {
        Echoed { id, mix }
    }
}

/// [`Demo::Echo`]'s reply: the id, and [`mix`] of it computed by the server.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(C)]
pub struct Echoed {
    /// The id the client sent.
    pub id: u64,
    /// `mix(id)`, so a reply that crossed to another call is caught.
    pub mix: u64,
}

/// Why [`Demo::Sleep`] refused.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u8)]
pub enum SleepError {
    /// Longer than [`MAX_SLEEP_MICROS`]: refused without sleeping.
    TooLong = 1,
}

impl std::fmt::Display for SleepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a sleep longer than {MAX_SLEEP_MICROS} microseconds")
    }
}

/// [`Demo::Sum`]'s reply, as the server counted the stream.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
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
    #[rpc(response = Echoed)]
    Echo {
        /// The id to echo.
        id: u64,
    },
    /// Add: `a + b` (wrapping).
    #[rpc(response = u64)]
    Add {
        /// The first addend.
        a: u64,
        /// The second addend.
        b: u64,
    },
    /// Sleep: the server sleeps `micros`, then replies how long it slept; refused (without
    /// sleeping) above [`MAX_SLEEP_MICROS`].
    #[rpc(response = u64, error = SleepError)]
    Sleep {
        /// How long, in microseconds.
        micros: u64,
    },
    /// Sum: a byte stream of at most [`SUM_LIMIT`] bytes → `(length, sum of the bytes)`; a longer
    /// one is refused before the handler runs.
    #[rpc(response = Summed, limit = SUM_LIMIT)]
    Sum {
        /// The bytes to count.
        data: Bytes,
    },
}

/// What [`Demo::Echo`] returns beside the id: a value only the right id gives, so a reply that
/// crossed to another call is caught.
pub const fn mix(id: u64) -> u64 {
    let x = id ^ 0x9e37_79b9_7f4a_7c15;
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The demo service's implementation (served as `Demo::server(DemoService)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DemoService;

impl DemoServer for DemoService {
    fn echo(&self, id: u64) -> Echoed {
        Echoed { id, mix: mix(id) }
    }

    fn add(&self, a: u64, b: u64) -> u64 {
        a.wrapping_add(b)
    }

    fn sleep(&self, micros: u64) -> Result<u64, SleepError> {
        if micros > MAX_SLEEP_MICROS {
            return Err(SleepError::TooLong);
        }
        std::thread::sleep(std::time::Duration::from_micros(micros));
        Ok(micros)
    }

    fn sum(&self, data: &[u8]) -> Summed {
        Summed {
            len: data.len() as u64,
            sum: data.iter().map(|&b| b as u64).sum(),
        }
    }
}
