//! A key-value service: the definition both sides share, and one server implementation.
//!
//! Keys are `u64`; values are bytes of any length, so `put` and `get` stream them. The client of
//! `get` passes a buffer; a value longer than the buffer is refused, not truncated.

use std::collections::HashMap;
use std::sync::RwLock;

use rpc_core::RpcOpcodes;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// What `delete` and `contains` report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Found {
    /// 1 if the key was there, 0 if not.
    pub found: u32,
    /// The length of its value (0 if not found).
    pub len: u32,
}

/// The key-value service: one variant per call.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.kv")]
pub enum Kv {
    /// Stores a value: the request is the key (8 bytes, little-endian) followed by the value.
    /// Returns the number of keys stored.
    #[rpc(request = [u8], response = u64, limit = 65536)]
    Put,
    /// The value of a key (empty if absent).
    #[rpc(request = u64, response = [u8])]
    Get,
    /// Whether a key is there, and its value's length.
    #[rpc(request = u64, response = Found)]
    Contains,
    /// Removes a key.
    #[rpc(request = u64, response = Found)]
    Delete,
    /// Writes a line to the server's log; the client does not wait.
    #[rpc(request = str, oneway)]
    Log,
}

/// Encodes a `put` request.
pub fn put_request(key: u64, value: &[u8]) -> Vec<u8> {
    let mut request = key.to_le_bytes().to_vec();
    request.extend_from_slice(value);
    request
}

/// A key-value store in memory, shared by any number of server threads.
#[derive(Debug, Default)]
pub struct Store {
    map: RwLock<HashMap<u64, Vec<u8>>>,
    log: RwLock<Vec<String>>,
}

impl Store {
    /// The lines clients logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.read().unwrap().clone()
    }
}

impl KvServer for Store {
    fn put(&self, request: &[u8]) -> u64 {
        let mut map = self.map.write().unwrap();
        if let Some((key, value)) = request.split_first_chunk::<8>() {
            map.insert(u64::from_le_bytes(*key), value.to_vec());
        }
        map.len() as u64
    }

    fn get(&self, key: u64) -> impl AsRef<[u8]> {
        self.map
            .read()
            .unwrap()
            .get(&key)
            .cloned()
            .unwrap_or_default()
    }

    fn contains(&self, key: u64) -> Found {
        match self.map.read().unwrap().get(&key) {
            Some(v) => Found {
                found: 1,
                len: v.len() as u32,
            },
            None => Found { found: 0, len: 0 },
        }
    }

    fn delete(&self, key: u64) -> Found {
        match self.map.write().unwrap().remove(&key) {
            Some(v) => Found {
                found: 1,
                len: v.len() as u32,
            },
            None => Found { found: 0, len: 0 },
        }
    }

    fn log(&self, line: &str) {
        self.log.write().unwrap().push(line.to_owned());
    }
}

// Between processes: the store is a transport-shm handler (both paths: `contains` and `delete`
// travel inline, `put` and `get` through the packets). See `bin/kv-shm.rs`.
transport_shm::impl_handler!(Store: KvServer);

#[cfg(test)]
mod tests {
    use super::*;
    use rpc_core::service::CallError;
    use rpc_core::HeapRegion;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn the_store_serves_every_call() {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let watchdog = {
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..600 {
                    if done.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                eprintln!("watchdog: the kv test hung for a minute");
                std::process::abort();
            })
        };
        let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
        let store = Store::default();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let server = region.server();
                let mut buffers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if store.serve_one(&server, &mut buffers).unwrap().is_none() {
                        std::thread::yield_now();
                    }
                }
            });
            let client = region.client();
            rpc_core::service::handshake::<Kv, _, _, _>(&client).unwrap();
            assert_eq!(client.put(&put_request(1, b"one")).unwrap(), 1);
            assert_eq!(client.put(&put_request(2, &[7; 300])).unwrap(), 2);
            let mut buf = [0u8; 512];
            assert_eq!(client.get(1, &mut buf).unwrap(), b"one");
            assert_eq!(client.get(2, &mut buf).unwrap(), &[7; 300][..]);
            assert_eq!(client.get(3, &mut buf).unwrap(), b"");
            let mut small = [0u8; 16];
            assert!(matches!(client.get(2, &mut small), Err(CallError::Port(_))));
            assert_eq!(client.contains(2).unwrap(), Found { found: 1, len: 300 });
            assert_eq!(client.delete(2).unwrap(), Found { found: 1, len: 300 });
            assert_eq!(client.contains(2).unwrap(), Found { found: 0, len: 0 });
            assert_eq!(
                client.put(&put_request(4, &vec![0; 70_000])),
                Err(CallError::Rejected)
            );
            client.log("hello").unwrap();
            while store.log().is_empty() {
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(store.log(), ["hello"]);
        done.store(true, Ordering::Relaxed);
        watchdog.join().unwrap();
    }
}
