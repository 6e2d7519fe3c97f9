//! A simulated warp: CPU threads acting as the lanes of one group, so device code (the same
//! [`services`](crate::services) calls a kernel makes) runs on the host against a real server.
//!
//! Each lane is one thread holding a [`SimWarp`]. Broadcast and ballot exchange values through
//! shared scratch words between two barrier waits; `sync` is a barrier wait. All lanes of a
//! simulated warp are always active, and call every operation together, as a convergent warp does.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::vec::Vec;

/// One lane of a simulated warp.
#[derive(Debug)]
pub struct SimWarp {
    shared: Arc<Shared>,
    lane: u32,
}

#[derive(Debug)]
struct Shared {
    size: u32,
    barrier: Barrier,
    scratch: Vec<AtomicU32>,
}

impl SimWarp {
    /// The `size` lanes (1 to 64) of one warp, to be moved one per thread.
    pub fn lanes(size: u32) -> Vec<SimWarp> {
        assert!((1..=64).contains(&size), "a warp has 1 to 64 lanes");
        let shared = Arc::new(Shared {
            size,
            barrier: Barrier::new(size as usize),
            scratch: (0..size).map(|_| AtomicU32::new(0)).collect(),
        });
        (0..size)
            .map(|lane| SimWarp {
                shared: shared.clone(),
                lane,
            })
            .collect()
    }

    /// Every lane's `value`, in lane order.
    fn exchange(&self, value: u32) -> Vec<u32> {
        self.shared.scratch[self.lane as usize].store(value, Ordering::Relaxed);
        // The barrier orders the stores above before the loads below, in every lane.
        self.shared.barrier.wait();
        let all = self
            .shared
            .scratch
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect();
        // No lane may overwrite its scratch word before all have read.
        self.shared.barrier.wait();
        all
    }
}

// SAFETY: all lanes are always active and call each operation together (documented); `exchange`
// hands every lane the same values between two barrier waits, so broadcast and ballot are uniform,
// and `sync` is a barrier over all lanes (which also orders their memory accesses).
unsafe impl ferry_core::Lanes for SimWarp {
    fn lane_size(&self) -> u32 {
        self.shared.size
    }
    fn lane_id(&self) -> u32 {
        self.lane
    }
    fn active_mask(&self) -> u64 {
        u64::MAX >> (64 - self.shared.size)
    }
    fn broadcast(&self, mask: u64, value: u32) -> u32 {
        self.exchange(value)[mask.trailing_zeros() as usize]
    }
    fn ballot(&self, mask: u64, predicate: bool) -> u64 {
        self.exchange(predicate as u32)
            .iter()
            .enumerate()
            .filter(|(i, v)| **v != 0 && mask & (1 << i) != 0)
            .fold(0, |m, (i, _)| m | 1 << i)
    }
    fn sync(&self, _mask: u64) {
        self.shared.barrier.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::SimWarp;
    use ferry_core::Lanes;

    #[test]
    fn broadcast_and_ballot_are_uniform() {
        let results: Vec<(u32, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = SimWarp::lanes(8)
                .into_iter()
                .map(|w| {
                    s.spawn(move || {
                        let mask = w.active_mask();
                        let b = w.broadcast(mask & !1, 100 + w.lane_id());
                        let v = w.ballot(mask, w.lane_id() % 3 == 0);
                        w.sync(mask);
                        (b, v)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (b, v) in results {
            assert_eq!(b, 101, "the lowest lane of the mask is lane 1");
            assert_eq!(v, 0b0100_1001);
        }
    }
}

/// The descriptor a host installs for `region`, a region in this process's heap (as
/// `transport-gpu`'s `GpuRegion::descriptor` does for mapped memory), so simulated warps build
/// their clients from it as a kernel does.
pub fn descriptor(region: &ferry_core::HeapRegion) -> crate::Descriptor {
    let r = region.region();
    crate::Descriptor {
        magic: crate::descriptor::MAGIC,
        ports: r.layout().ports(),
        lanes: r.layout().lanes(),
        mailbox: ferry_core::MailboxKind::PerPort as u32,
        region: r.client_outbox().as_ptr() as u64,
        locks: region.client_locks().as_ptr() as u64,
    }
}

/// A waiting policy for simulated warps, which run many more threads than there are cores: spins
/// a little, then yields; gives up after 60 s, so a lost handoff fails a test instead of hanging it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Yield;

std::thread_local! {
    static SINCE: core::cell::Cell<Option<std::time::Instant>> = const { core::cell::Cell::new(None) };
}

impl ferry_core::Wait for Yield {
    fn pause(&self, polls: u32) -> Result<(), ferry_core::Stalled> {
        if polls == 0 {
            SINCE.with(|s| s.set(Some(std::time::Instant::now())));
        }
        if polls < 16 {
            core::hint::spin_loop();
            return Ok(());
        }
        let since = SINCE
            .with(|s| s.get())
            .unwrap_or_else(std::time::Instant::now);
        if since.elapsed() > std::time::Duration::from_secs(60) {
            return Err(ferry_core::Stalled);
        }
        std::thread::yield_now();
        Ok(())
    }
}
