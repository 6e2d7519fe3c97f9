//! What the ferry-rpc integration tests share: a yielding wait policy, and a report of a region's
//! state for a watchdog (`ferry_testkit::Watchdog`).
#![allow(dead_code)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ferry_rpc::{Stalled, Wait};

/// Spins briefly, then yields: lets many more threads than cores make progress. Gives up after
/// `limit` so a lost handoff becomes an error, not a hang.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub limit: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            limit: Duration::from_secs(30),
        }
    }
}

thread_local! {
    static STARTED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

impl Wait for Backoff {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if polls < 64 {
            std::hint::spin_loop();
            return Ok(());
        }
        let now = Instant::now();
        let started = STARTED.with(|s| {
            if polls == 64 || s.get().is_none() {
                s.set(Some(now));
            }
            s.get().unwrap()
        });
        if now - started > self.limit {
            return Err(Stalled);
        }
        std::thread::yield_now();
        Ok(())
    }
}

/// A compact dump of lock words and busy mailboxes, for watchdog reports.
pub fn dump_region<M: ferry_rpc::Mailbox>(region: &ferry_rpc::HeapRegion<M>) -> String {
    let r = region.region();
    let mut out = String::new();
    let locked = |words: &[ferry_rpc::sync::AtomicU32]| {
        words
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let v = w.load(Ordering::Relaxed);
                (v != 0).then(|| format!("w{i}={v:#x}"))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    out += &format!("client locks: {}\n", locked(region.client_locks()));
    out += &format!("server locks: {}\n", locked(region.server_locks()));
    let pending: Vec<u32> = (0..r.layout().ports())
        .filter(|&p| !r.client_owns(p))
        .collect();
    out += &format!("ports owned by the server: {pending:?}\n");
    out
}
