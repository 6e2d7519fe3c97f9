//! The host's side of the `Tally` service (`ferry-example-tally`): one handler, served to a GPU
//! kernel (`gpu-tally`), to threads of this process and to other processes (`tally-shm`) alike.

use std::collections::BTreeMap;
use std::sync::Mutex;

use ferry_example_tally::{TallyServer, DESCRIBE_LIMIT};

/// The host's side of `Tally`: adds and total, per key.
#[derive(Default)]
pub struct HostTally {
    keys: Mutex<BTreeMap<u32, (u32, u64)>>,
}

impl TallyServer for HostTally {
    fn add(&self, key: u32, n: u64) -> u64 {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let (adds, total) = keys.entry(key).or_default();
        *adds += 1;
        *total = total.wrapping_add(n);
        *total
    }

    fn total(&self, key: u32) -> u64 {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(&key).map_or(0, |&(_, total)| total)
    }

    fn describe(&self, key: u32) -> impl AsRef<str> {
        let (adds, total) = self.total_of(key);
        let mut text = format!("key {key}: {adds} adds, total {total}");
        text.truncate(DESCRIBE_LIMIT as usize);
        text
    }
}

impl HostTally {
    /// Every key's adds and total so far.
    pub fn keys(&self) -> BTreeMap<u32, (u32, u64)> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Key `key`'s adds and total.
    pub fn total_of(&self, key: u32) -> (u32, u64) {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(&key).copied().unwrap_or_default()
    }
}
