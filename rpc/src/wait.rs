//! Waiting: what a side does while the other side has the packet.
//!
//! The protocol spins on the inbox. How it spins, and when it gives up on a peer that stopped
//! answering, is a policy of whoever embeds the protocol: a GPU spins forever with a short
//! sleep, a host transport backs off to `yield`/sleep and gives up after a deadline so a dead
//! peer becomes an [`Error::Stalled`](crate::Error::Stalled) instead of a hang.

/// A waiting policy. `pause` is called once per failed poll, with the number of polls so far in
/// this wait (starting at 0).
pub trait Wait {
    /// Pauses before the next poll, or gives up the wait by returning `Err(Stalled)`.
    fn pause(&self, polls: u32) -> Result<(), Stalled>;

    /// A clock in nanoseconds (any origin; the low 32 bits, wrapping), if this waiter has one:
    /// `None` by default. With a clock, a client learns how long its small calls' replies take
    /// at least and polls for a reply only from then on ([`Port::recv_words`]): where a poll is
    /// a read across a bus that takes longer than the wait between two of them (a GPU's of its
    /// host's memory), a poll that goes out too early is answered one read later.
    ///
    /// [`Port::recv_words`]: crate::Port::recv_words
    #[inline(always)]
    fn clock_ns(&self) -> Option<u32> {
        None
    }

    /// A copy of this policy for a stand-in of the handle that holds it
    /// ([`Process::with_stand_in`](crate::Process::with_stand_in)), or `None` (the default): a
    /// policy with state of its own is not copied, and the handle itself is used.
    ///
    /// [`Process::with_stand_in`]: crate::Process::with_stand_in
    #[inline(always)]
    fn stand_in(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

/// The wait was abandoned by the [`Wait`] policy (the peer did not answer in time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stalled;

/// Spins forever with a processor hint: the fastest handoff, and the right policy when the other
/// side is known to be alive (tests under a watchdog, benchmarks, GPU kernels).
#[derive(Clone, Copy, Debug, Default)]
pub struct Spin;

impl Wait for Spin {
    #[inline(always)]
    fn pause(&self, _polls: u32) -> Result<(), Stalled> {
        crate::sync::spin_hint();
        Ok(())
    }
    #[inline(always)]
    fn stand_in(&self) -> Option<Self> {
        Some(Spin)
    }
}

/// Spins up to a number of polls, then gives up.
#[derive(Clone, Copy, Debug)]
pub struct SpinLimit(pub u32);

impl Wait for SpinLimit {
    #[inline(always)]
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if polls >= self.0 {
            return Err(Stalled);
        }
        crate::sync::spin_hint();
        Ok(())
    }
    #[inline(always)]
    fn stand_in(&self) -> Option<Self> {
        Some(*self)
    }
}

impl<W: Wait + ?Sized> Wait for &W {
    #[inline(always)]
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        (**self).pause(polls)
    }
    #[inline(always)]
    fn clock_ns(&self) -> Option<u32> {
        (**self).clock_ns()
    }
    #[inline(always)]
    fn stand_in(&self) -> Option<Self> {
        Some(*self)
    }
}
