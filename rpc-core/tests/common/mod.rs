//! What the rpc-core integration tests share: a yielding wait policy, a report of a region's state
//! for a watchdog (`ferry_testkit::Watchdog`), and a simulated warp.
#![allow(dead_code)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_core::{Stalled, Wait};

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
pub fn dump_region<M: ferry_core::Mailbox>(region: &ferry_core::HeapRegion<M>) -> String {
    let r = region.region();
    let mut out = String::new();
    let locked = |words: &[ferry_core::sync::AtomicU32]| {
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

/// A simulated warp: `size` CPU threads acting as the lanes of one group, all always active.
/// Broadcast and ballot go through shared scratch words between two barrier waits.
pub struct ThreadWarp {
    shared: Arc<WarpShared>,
    lane: u32,
}

pub struct WarpShared {
    size: u32,
    barrier: std::sync::Barrier,
    scratch: Vec<std::sync::atomic::AtomicU32>,
}

impl ThreadWarp {
    /// The `size` lanes of one warp, to be moved one per thread.
    pub fn lanes(size: u32) -> Vec<ThreadWarp> {
        let shared = Arc::new(WarpShared {
            size,
            barrier: std::sync::Barrier::new(size as usize),
            scratch: (0..size)
                .map(|_| std::sync::atomic::AtomicU32::new(0))
                .collect(),
        });
        (0..size)
            .map(|lane| ThreadWarp {
                shared: shared.clone(),
                lane,
            })
            .collect()
    }

    fn exchange(&self, value: u32) -> Vec<u32> {
        self.shared.scratch[self.lane as usize].store(value, Ordering::SeqCst);
        self.shared.barrier.wait();
        let all = self
            .shared
            .scratch
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .collect();
        self.shared.barrier.wait();
        all
    }
}

// SAFETY: every lane of the warp takes part in each call (all lanes are always active), and each
// call returns the same exchanged values to all lanes, between two barrier waits.
unsafe impl ferry_core::Lanes for ThreadWarp {
    fn lane_size(&self) -> u32 {
        self.shared.size
    }
    fn lane_id(&self) -> u32 {
        self.lane
    }
    fn active_mask(&self) -> u64 {
        if self.shared.size == 64 {
            u64::MAX
        } else {
            (1 << self.shared.size) - 1
        }
    }
    fn broadcast(&self, mask: u64, value: u32) -> u32 {
        self.exchange(value)[mask.trailing_zeros() as usize]
    }
    fn ballot(&self, mask: u64, predicate: bool) -> u64 {
        let all = self.exchange(predicate as u32);
        all.iter()
            .enumerate()
            .filter(|(i, v)| **v != 0 && mask & (1 << i) != 0)
            .fold(0, |m, (i, _)| m | 1 << i)
    }
    fn sync(&self, _mask: u64) {
        self.shared.barrier.wait();
    }
}
