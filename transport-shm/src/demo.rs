//! The demo service: what `ferry demo` serves and its clients call, and what the multi-process
//! tests use. Written directly on rpc-core's `Port` (one opcode per operation, arguments and
//! results as words of lane 0's slot).

use std::path::Path;
use std::time::Duration;

use rpc_core::Error;

use crate::client::{ClientConfig, ShmClient};
use crate::error::ShmError;
use crate::header::fnv1a;
use crate::server::ServerPort;
use crate::status;

/// Echo: `id` → `(id, mix(id))`.
pub const ECHO: u32 = 1;
/// Add: `(a, b)` → `a + b` (wrapping).
pub const ADD: u32 = 2;
/// Sleep: `micros` → `micros`, after sleeping that long (at most `MAX_SLEEP_MICROS`).
pub const SLEEP: u32 = 3;
/// Sum: a byte stream → `(length, sum of the bytes)`.
pub const SUM: u32 = 4;

/// The longest stream `SUM` accepts.
pub const SUM_LIMIT: u64 = 1 << 20;
/// The longest `SLEEP`.
pub const MAX_SLEEP_MICROS: u64 = 10_000_000;

/// The schema, as text: its hash is the fingerprint both sides check at attach.
pub const SCHEMA: &str = "ferry-demo/1: echo=1(u64)->(u64,u64) add=2(u64,u64)->u64 \
                          sleep=3(u64)->u64 sum=4(bytes<=1MiB)->(u64,u64)";

/// The demo service's schema fingerprint.
pub fn fingerprint() -> u64 {
    fnv1a(SCHEMA.as_bytes())
}

/// What `ECHO` returns beside the id: a value only the right id gives, so a reply that crossed
/// to another call is caught.
pub const fn mix(id: u64) -> u64 {
    let x = id ^ 0x9e37_79b9_7f4a_7c15;
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Serves one demo request.
pub fn serve(port: &mut ServerPort<'_, '_>) -> Result<(), Error> {
    match port.opcode() {
        ECHO => port.recv_and_send(|slot, _| {
            let id = slot.words[0];
            slot.words[1] = mix(id);
        }),
        ADD => {
            port.recv_and_send(|slot, _| slot.words[0] = slot.words[0].wrapping_add(slot.words[1]))
        }
        SLEEP => {
            let mut micros = 0;
            port.recv(|slot, _| micros = micros.max(slot.words[0]))?;
            if micros > MAX_SLEEP_MICROS {
                port.set_status(status::BAD_REQUEST);
            } else {
                std::thread::sleep(Duration::from_micros(micros));
            }
            port.send(|_, _| {})
        }
        SUM => {
            let mut sink: Vec<Vec<u8>> = Vec::new();
            match port.recv_n(SUM_LIMIT, &mut sink) {
                Ok(()) => port.send(|slot, lane| {
                    let data = sink.get(lane as usize).map(Vec::as_slice).unwrap_or(&[]);
                    slot.words[0] = data.len() as u64;
                    slot.words[1] = data.iter().map(|&b| b as u64).sum();
                }),
                Err(Error::TooLarge { .. } | Error::Sink { .. } | Error::LaneFailed { .. }) => {
                    port.set_status(status::REJECTED);
                    port.send(|_, _| {})
                }
                Err(e) => Err(e),
            }
        }
        _ => {
            port.recv(|_, _| {})?;
            port.set_status(status::UNKNOWN_OPCODE);
            port.send(|_, _| {})
        }
    }
}

/// A typed client of the demo service.
#[derive(Debug)]
pub struct DemoClient {
    client: ShmClient,
}

/// A demo call's failure: the transport's, or a status the server sent.
#[derive(Debug)]
pub enum DemoError {
    /// The call did not complete.
    Shm(ShmError),
    /// The server answered with an error status (see `status`).
    Status(u32),
}

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoError::Shm(e) => e.fmt(f),
            DemoError::Status(s) => write!(f, "the server answered with status {s}"),
        }
    }
}

impl std::error::Error for DemoError {}

impl From<ShmError> for DemoError {
    fn from(e: ShmError) -> Self {
        DemoError::Shm(e)
    }
}

fn checked<T>(r: Result<(u32, T), ShmError>) -> Result<T, DemoError> {
    match r? {
        (status::OK, v) => Ok(v),
        (s, _) => Err(DemoError::Status(s)),
    }
}

impl DemoClient {
    /// Attaches to a demo server's file, checking its fingerprint.
    pub fn attach(path: impl AsRef<Path>, deadline: Duration) -> Result<DemoClient, ShmError> {
        let config = ClientConfig {
            fingerprint: Some(fingerprint()),
            deadline,
        };
        Ok(DemoClient {
            client: ShmClient::attach(path, config)?,
        })
    }

    /// A demo client over an attached client handle.
    pub fn new(client: ShmClient) -> DemoClient {
        DemoClient { client }
    }

    /// The underlying client handle.
    pub fn client(&mut self) -> &mut ShmClient {
        &mut self.client
    }

    /// `ECHO`.
    pub fn echo(&mut self, id: u64) -> Result<(u64, u64), DemoError> {
        let mut out = (0, 0);
        checked(self.client.call(ECHO, |port| {
            port.send_and_recv(
                |s, _| s.words[0] = id,
                |s, _| out = (s.words[0], s.words[1]),
            )?;
            Ok((port.status(), out))
        }))
    }

    /// `ADD`.
    pub fn add(&mut self, a: u64, b: u64) -> Result<u64, DemoError> {
        let mut out = 0;
        checked(self.client.call(ADD, |port| {
            port.send_and_recv(
                |s, _| {
                    s.words[0] = a;
                    s.words[1] = b;
                },
                |s, _| out = s.words[0],
            )?;
            Ok((port.status(), out))
        }))
    }

    /// `SLEEP`.
    pub fn sleep(&mut self, micros: u64) -> Result<(), DemoError> {
        checked(self.client.call(SLEEP, |port| {
            port.send_and_recv(|s, _| s.words[0] = micros, |_, _| {})?;
            Ok((port.status(), ()))
        }))
    }

    /// `SUM`: streams `data`, returns `(length, sum of bytes)` as the server counted them.
    pub fn sum(&mut self, data: &[u8]) -> Result<(u64, u64), DemoError> {
        let mut out = (0, 0);
        checked(self.client.call(SUM, |port| {
            match port.send_n(|_| data) {
                Ok(()) | Err(Error::Rejected) => {}
                Err(e) => return Err(e),
            }
            port.recv(|s, _| out = (s.words[0], s.words[1]))?;
            Ok((port.status(), out))
        }))
    }
}
