//! A key-value service: the definition both sides share, and one server implementation.
//!
//! Keys are `u64`; values are bytes of any length up to [`MAX_VALUE`], so `put` and `get`
//! stream them. A key that is not there is the call's own error ([`KvError::NotFound`]), as is a
//! full store ([`KvError::Full`]); a value longer than the client's buffer is refused, not
//! truncated.

use std::collections::HashMap;
use std::sync::RwLock;

use ferry_rpc::service::{Bytes, Text};
use ferry_rpc::{RpcOpcodes, Schema};
use zerocopy::{Immutable, IntoBytes, KnownLayout, TryFromBytes};

/// The longest value the store takes, and the longest `get` replies.
pub const MAX_VALUE: u64 = 64 * 1024;
/// The longest line `log` takes.
pub const MAX_LINE: u64 = 512;

/// Why the store refused a call.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u8)]
pub enum KvError {
    /// No value is stored under the key.
    NotFound = 1,
    /// The store holds as many keys as it may; a new key was not stored.
    Full = 2,
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KvError::NotFound => "no such key",
            KvError::Full => "the store is full",
        })
    }
}

/// The key-value service: one variant per call, its fields the call's arguments.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.kv")]
pub enum Kv {
    /// Stores `value` under `key`, replacing what was there. Returns the number of keys stored.
    #[rpc(response = u64, error = KvError, limit = MAX_VALUE)]
    Put {
        /// The key.
        key: u64,
        /// The value.
        value: Bytes,
    },
    /// The value stored under `key`.
    #[rpc(response = Bytes, error = KvError, limit = MAX_VALUE)]
    Get {
        /// The key.
        key: u64,
    },
    /// The length of the value stored under `key`.
    #[rpc(response = u64, error = KvError)]
    Len {
        /// The key.
        key: u64,
    },
    /// Removes `key`; returns the length of the value it had.
    #[rpc(response = u64, error = KvError)]
    Delete {
        /// The key.
        key: u64,
    },
    /// Writes a line to the server's log; the client does not wait.
    #[rpc(oneway, limit = MAX_LINE)]
    Log {
        /// The line.
        line: Text,
    },
}

/// A key-value store in memory, shared by any number of server threads.
#[derive(Debug)]
pub struct Store {
    map: RwLock<HashMap<u64, Vec<u8>>>,
    log: RwLock<Vec<String>>,
    capacity: usize,
}

impl Default for Store {
    /// A store without a limit on its keys.
    fn default() -> Self {
        Store::with_capacity(usize::MAX)
    }
}

impl Store {
    /// A store that holds at most `capacity` keys.
    pub fn with_capacity(capacity: usize) -> Store {
        Store {
            map: RwLock::default(),
            log: RwLock::default(),
            capacity,
        }
    }

    /// The lines clients logged so far.
    pub fn log(&self) -> Vec<String> {
        self.log.read().unwrap().clone()
    }
}

impl KvServer for Store {
    fn put(&self, key: u64, value: &[u8]) -> Result<u64, KvError> {
        let mut map = self.map.write().unwrap();
        if map.len() >= self.capacity && !map.contains_key(&key) {
            return Err(KvError::Full);
        }
        map.insert(key, value.to_vec());
        Ok(map.len() as u64)
    }

    fn get(&self, key: u64) -> Result<impl AsRef<[u8]>, KvError> {
        self.map
            .read()
            .unwrap()
            .get(&key)
            .cloned()
            .ok_or(KvError::NotFound)
    }

    fn len(&self, key: u64) -> Result<u64, KvError> {
        match self.map.read().unwrap().get(&key) {
            Some(v) => Ok(v.len() as u64),
            None => Err(KvError::NotFound),
        }
    }

    fn delete(&self, key: u64) -> Result<u64, KvError> {
        match self.map.write().unwrap().remove(&key) {
            Some(v) => Ok(v.len() as u64),
            None => Err(KvError::NotFound),
        }
    }

    fn log(&self, line: &str) {
        self.log.write().unwrap().push(line.to_owned());
    }
}

// Between processes, the store is served as `Kv::server(store)` (inline: `len` and `delete`;
// through the packets: `put`, `get` and `log`). See `bin/kv-shm.rs`.

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_rpc::service::{Error, Status};
    use ferry_rpc::HeapRegion;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn the_store_serves_every_call() {
        let _watchdog = ferry_testkit::Watchdog::new("the kv test", Duration::from_secs(60));
        let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
        let store = Store::with_capacity(3);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let server = region.server();
                let mut buffers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if Kv::serve_one(&store, &server, &mut buffers)
                        .unwrap()
                        .is_none()
                    {
                        std::thread::yield_now();
                    }
                }
            });
            let site = region.client();
            let c = Kv::client(&site);
            assert_eq!(c.put(1, b"one"), Ok(1));
            assert_eq!(c.put(2, &[7; 300]), Ok(2));
            assert_eq!(c.put(1, b"uno"), Ok(2));
            assert_eq!(c.put(3, b""), Ok(3));
            assert_eq!(c.put(4, b"four"), Err(Error::App(KvError::Full)));
            assert_eq!(c.get(1), Ok(b"uno".to_vec()));
            let mut buf = [0u8; 512];
            assert_eq!(c.get_into(2, &mut buf).as_deref(), Ok(&[7; 300][..]));
            assert_eq!(c.get_into(3, &mut buf).as_deref(), Ok(&b""[..]));
            assert_eq!(c.get(4), Err(Error::App(KvError::NotFound)));
            // A value longer than the buffer is refused, not truncated; the port is left at rest.
            let mut small = [0u8; 16];
            assert!(matches!(
                c.get_into(2, &mut small),
                Err(Error::Status(Status::ReplyTooLarge { len: 300, .. }))
            ));
            assert_eq!(c.len(2), Ok(300));
            assert_eq!(c.delete(2), Ok(300));
            assert_eq!(c.len(2), Err(Error::App(KvError::NotFound)));
            assert_eq!(c.delete(2), Err(Error::App(KvError::NotFound)));
            // Too long a value is refused before the handler runs.
            assert_eq!(
                c.put(5, &vec![0; MAX_VALUE as usize + 1]),
                Err(Error::Status(Status::Rejected))
            );
            assert_eq!(c.len(5), Err(Error::App(KvError::NotFound)));
            c.log("hello").unwrap();
            while store.log().is_empty() {
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(store.log(), ["hello"]);
    }
}
