//! Where a generated client makes its calls.

use core::time::Duration;

use super::{CallSite, Error};
use crate::lanes::Lanes;
use crate::mailbox::Mailbox;
use crate::process::{Client, Process};
use crate::wait::Wait;

/// Where the client of a derived service makes its calls: `Counter::client(&site)` takes any
/// `Site`. Each transport has one (a client [`Process`] in-process or on a GPU warp,
/// `ferry_shm::ShmClient` between processes); user code passes it and never names this
/// trait.
///
/// A call runs on a *claim*: whatever the transport needs to hold for the length of one call (a
/// port of a shared-memory file; for a bare process, the process itself). [`call`](Self::call)
/// obtains one, runs the generated call on it, and gives it back according to the outcome.
pub trait Site {
    /// What one call runs on.
    type Claim<'a>: CallSite;

    /// Runs one call: `call` makes it on a claim of this site. `deadline` is the longest the call
    /// may wait for the other side, if the generated client was given one
    /// (`with_deadline`); a site whose waits are bounded otherwise (a bare [`Process`], bounded
    /// by its wait policy) documents that it ignores it.
    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Self::Claim<'_>) -> Result<R, Error<E>>,
    ) -> Result<R, Error<E>>;
}

impl<T: Site + ?Sized> Site for &T {
    type Claim<'a> = T::Claim<'a>;

    #[inline(always)]
    fn call<R, E>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Self::Claim<'_>) -> Result<R, Error<E>>,
    ) -> Result<R, Error<E>> {
        T::call(self, deadline, call)
    }
}

/// A client process is its own claim: its calls search its ports as they open them. Its waits
/// are bounded by its wait policy `W`; a deadline given to the generated client is not applied.
impl<'p, L: Lanes, M: Mailbox, W: Wait> Site for Process<'p, Client, L, M, W> {
    type Claim<'a> = Process<'p, Client, L, M, W>;

    #[inline(always)]
    fn call<R, E>(
        &self,
        _deadline: Option<Duration>,
        call: impl FnOnce(&Self::Claim<'_>) -> Result<R, Error<E>>,
    ) -> Result<R, Error<E>> {
        call(self)
    }
}
