//! How a warp waits for the host: spin first, then sleep with a growing pause.
//!
//! Every poll of the inbox is a read across PCIe. One warp alone should spin (the reply comes
//! within a few microseconds); thousands of warps polling at once would fill the bus with reads
//! the server's writes then queue behind, so after [`GpuWait::spin`] polls a warp sleeps
//! (`nanosleep`), doubling the pause up to [`GpuWait::max_sleep_ns`]. A GPU has no one to
//! report a stall to, so it never gives up.

use ferry_rpc::{Stalled, Wait};

/// The GPU waiting policy.
#[derive(Clone, Copy, Debug)]
pub struct GpuWait {
    /// Polls before the first sleep.
    pub spin: u32,
    /// The longest pause between polls, in nanoseconds.
    pub max_sleep_ns: u32,
}

impl Default for GpuWait {
    fn default() -> Self {
        GpuWait {
            spin: 64,
            max_sleep_ns: 4096,
        }
    }
}

impl GpuWait {
    /// How a warp waits for the host that set up `descriptor`: the default, with the host's
    /// [`max_sleep_ns`](crate::Descriptor::max_sleep_ns) if it set one.
    pub fn for_descriptor(descriptor: &crate::Descriptor) -> GpuWait {
        let default = GpuWait::default();
        GpuWait {
            max_sleep_ns: match descriptor.max_sleep_ns {
                0 => default.max_sleep_ns,
                ns => ns,
            },
            ..default
        }
    }

    /// The pause before poll `polls + 1`, in nanoseconds (0: spin).
    pub fn pause_ns(&self, polls: u32) -> u32 {
        if polls < self.spin {
            return 0;
        }
        let doublings = (polls - self.spin).min(16);
        (32u32 << doublings).min(self.max_sleep_ns)
    }
}

impl Wait for GpuWait {
    #[inline(always)]
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        let ns = self.pause_ns(polls);
        if ns == 0 {
            core::hint::spin_loop();
        } else {
            sleep_ns(ns);
        }
        Ok(())
    }

    /// `%globaltimer` on NVPTX (a word call's client learns when to poll first: see
    /// `ferry_rpc::Wait::clock_ns`); none elsewhere.
    #[inline(always)]
    fn clock_ns(&self) -> Option<u32> {
        clock_ns()
    }

    #[inline(always)]
    fn stand_in(&self) -> Option<Self> {
        Some(*self)
    }
}

#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn clock_ns() -> Option<u32> {
    Some(crate::nvptx::globaltimer() as u32)
}

#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn clock_ns() -> Option<u32> {
    None
}

#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn sleep_ns(ns: u32) {
    crate::nvptx::nanosleep(ns);
}

#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
fn sleep_ns(_ns: u32) {
    core::hint::spin_loop();
}

#[cfg(test)]
mod tests {
    use super::GpuWait;

    #[test]
    fn spins_then_doubles_up_to_the_cap() {
        let w = GpuWait {
            spin: 2,
            max_sleep_ns: 100,
        };
        let pauses: [u32; 6] = core::array::from_fn(|i| w.pause_ns(i as u32));
        assert_eq!(pauses, [0, 0, 32, 64, 100, 100]);
        assert_eq!(w.pause_ns(u32::MAX), 100);
    }
}
