//! Lanes: the threads that execute one protocol operation together.
//!
//! On a GPU a warp (NVIDIA, 32 lanes) or wavefront (AMD, 32 or 64) opens one port for all its
//! active lanes; lane `i` fills and reads slot `i` of the packet. On the host one thread acts
//! alone ([`Single`]) and, as a server, handles every slot whose bit is set in the packet's mask.
//! A simulated warp of CPU threads implements this trait with a barrier and shared scratch.
//!
//! The protocol code is written once against this trait: the *first* active lane performs the
//! steps that must happen once per warp (locking, mailbox flips, header writes), broadcasts what
//! it learned, and every lane touches only its own slots.

/// The execution lanes of one caller.
///
/// # Safety
///
/// Implementations must be *uniform*: `broadcast` returns the first active lane's value to every
/// lane in `mask`, `ballot` returns the same mask to every lane, and `sync` does not return in any
/// lane of `mask` before every lane of `mask` has reached it. The protocol relies on this to let one
/// lane act for the warp.
pub unsafe trait Lanes {
    /// Whether a group is always one lane (a host thread): a caller may then decide alone what
    /// a warp's lanes must decide together.
    const ONE: bool = false;

    /// How many lanes execute together (1 on the host, 32 on an NVIDIA warp).
    fn lane_size(&self) -> u32;

    /// This lane's index within its group, `0..lane_size()`.
    fn lane_id(&self) -> u32;

    /// The lanes executing this call (bit `i` for lane `i`).
    fn active_mask(&self) -> u64;

    /// The value `value` of the lowest lane set in `mask`, in every lane of `mask`.
    fn broadcast(&self, mask: u64, value: u32) -> u32;

    /// The lanes of `mask` whose `predicate` is true, in every lane of `mask`.
    fn ballot(&self, mask: u64, predicate: bool) -> u64;

    /// Waits until every lane of `mask` has reached this call.
    fn sync(&self, mask: u64);

    /// The mask of every lane of the group (`lane_size` low bits).
    #[inline(always)]
    fn full_mask(&self) -> u64 {
        match self.lane_size() {
            64.. => u64::MAX,
            n => (1u64 << n) - 1,
        }
    }

    /// Whether this lane is the lowest set bit of `mask` (the lane that acts for the group).
    #[inline(always)]
    fn is_first_lane(&self, mask: u64) -> bool {
        mask.trailing_zeros() == self.lane_id()
    }

    /// A copy of these lanes for a stand-in of the handle that holds them
    /// ([`Process::with_stand_in`](crate::Process::with_stand_in)), or `None` (the default): lanes
    /// with state of their own (a simulated warp's) are not copied, and the handle itself is used.
    #[inline(always)]
    fn stand_in(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

/// The lanes in `mask` (bit `i`: lane `i`), lowest first.
#[inline(always)]
pub(crate) fn lanes_in(mut mask: u64) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        (mask != 0).then(|| {
            let lane = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            lane
        })
    })
}

/// One host thread: a group of one lane.
#[derive(Clone, Copy, Debug, Default)]
pub struct Single;

// SAFETY: with one lane every operation is trivially uniform.
unsafe impl Lanes for Single {
    const ONE: bool = true;

    #[inline(always)]
    fn lane_size(&self) -> u32 {
        1
    }
    #[inline(always)]
    fn lane_id(&self) -> u32 {
        0
    }
    #[inline(always)]
    fn active_mask(&self) -> u64 {
        1
    }
    #[inline(always)]
    fn broadcast(&self, _mask: u64, value: u32) -> u32 {
        value
    }
    #[inline(always)]
    fn ballot(&self, mask: u64, predicate: bool) -> u64 {
        if predicate {
            mask & 1
        } else {
            0
        }
    }
    #[inline(always)]
    fn sync(&self, _mask: u64) {}
    #[inline(always)]
    fn stand_in(&self) -> Option<Self> {
        Some(Single)
    }
}
