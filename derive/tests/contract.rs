//! The service definition users write (arguments as fields, streamed `Bytes` and `Text`, typed
//! errors, one-way calls, a `limit` from a constant), served in-process and called through the
//! generated client, with every error kind: the handler's, the server's refusals, the client's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ferry_derive::{RpcOpcodes, Schema};
use ferry_rpc::service::{Bytes, Error, Status, Text};
use ferry_rpc::{HeapRegion, Single, SpinLimit};
use zerocopy::{Immutable, IntoBytes, KnownLayout, TryFromBytes};

const MAX_NAME: u64 = 2 * 64;

/// Why the store refused.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u8)]
pub enum StoreError {
    Full = 1,
    Missing = 2,
}

#[derive(RpcOpcodes)]
#[rpc(service = "counter")]
pub enum Counter {
    /// Adds `n`; returns the new total.
    #[rpc(response = u64)]
    Add { n: u64 },
    /// The total.
    #[rpc(response = u64)]
    Get,
    /// Stores bytes of any length under a key; how many are stored now.
    #[rpc(response = u64, error = StoreError)]
    Put { key: u32, value: Bytes },
    /// A key's name, as text of any length.
    #[rpc(response = Text, error = StoreError, limit = MAX_NAME)]
    Name { key: u32 },
    /// Whether a key is stored (a `bool` crosses as itself).
    #[rpc(response = bool)]
    Has { key: u32, strict: bool },
    /// Resets; the client does not wait.
    #[rpc(oneway)]
    Reset,
}

#[derive(Default)]
struct Store {
    total: AtomicU64,
    values: Mutex<HashMap<u32, Vec<u8>>>,
}

impl CounterServer for Store {
    fn add(&self, n: u64) -> u64 {
        self.total.fetch_add(n, Ordering::Relaxed) + n
    }
    fn get(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
    fn put(&self, key: u32, value: &[u8]) -> Result<u64, StoreError> {
        let mut values = self.values.lock().unwrap();
        if values.len() >= 2 && !values.contains_key(&key) {
            return Err(StoreError::Full);
        }
        values.insert(key, value.to_vec());
        Ok(values.len() as u64)
    }
    fn name(&self, key: u32) -> Result<impl AsRef<str>, StoreError> {
        let values = self.values.lock().unwrap();
        let value = values.get(&key).ok_or(StoreError::Missing)?;
        Ok(format!("key {key}: {} bytes", value.len()))
    }
    fn has(&self, key: u32, strict: bool) -> bool {
        let values = self.values.lock().unwrap();
        values.get(&key).is_some_and(|v| !strict || !v.is_empty())
    }
    fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.values.lock().unwrap().clear();
    }
}

#[test]
fn the_service_users_write_runs_in_process() {
    let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
    let store = Store::default();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut buffers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if Counter::serve_one(&store, &server, &mut buffers)
                    .unwrap()
                    .is_none()
                {
                    std::thread::yield_now();
                }
            }
        });
        let site = region.client_with(Single, SpinLimit(u32::MAX)).unwrap();
        let c = Counter::client(&site);
        assert_eq!(c.add(5), Ok(5));
        assert_eq!(c.add(2), Ok(7));
        assert_eq!(c.get(), Ok(7));
        assert_eq!(c.put(1, b"abc"), Ok(1));
        assert_eq!(c.put(2, &[7; 1000]), Ok(2));
        assert_eq!(c.put(3, b"x"), Err(Error::App(StoreError::Full)));
        let name: String = c.name(2).unwrap();
        assert_eq!(name, "key 2: 1000 bytes");
        assert_eq!(c.name(9), Err(Error::App(StoreError::Missing)));
        let mut buf = [0u8; 64];
        assert_eq!(c.name_into(1, &mut buf), Ok("key 1: 3 bytes"));
        let mut small = [0u8; 4];
        assert_eq!(
            c.name_into(1, &mut small),
            Err(Error::Status(Status::ReplyTooLarge { len: 14, limit: 4 }))
        );
        // The port is at rest after the refusal: the next call works.
        assert_eq!(c.has(1, true), Ok(true));
        assert_eq!(c.has(5, false), Ok(false));
        c.reset().unwrap();
        // A one-way call is not waited for: a later call sees it once the server ran it (the
        // next call may be served first, on another port).
        while c.get() != Ok(0) {
            std::thread::yield_now();
        }
        let c = c.with_deadline(Duration::from_millis(50));
        assert_eq!(c.add(1), Ok(1));
        stop.store(true, Ordering::Relaxed);
    });
}
