//! Where an async client makes its calls: `Counter::async_client(&site)`.

use core::future::Future;
use core::time::Duration;

use super::wire::Reply;
use super::{Error, Site};

/// Where the async client of a derived service makes its calls (`Counter::async_client(&site)`,
/// whose methods are `async fn`s): a transport on which a caller can wait without holding a
/// thread, such as `ferry_shm::ShmClient`, whose server wakes the waiting task. User code passes
/// it and never names this trait.
///
/// A call whose request and reply travel in one exchange ([`call_fixed`](Self::call_fixed),
/// [`call_stream`](Self::call_stream)) is awaited in place. Any other call (a one-way call, a
/// streamed reply) is made as the blocking client makes it, on a [`Blocking`](Self::Blocking)
/// site of the same transport, by [`blocking`](Self::blocking): the transport says where that runs
/// (a helper thread, for `ferry_shm`).
///
/// Every future is `Send`, so a call may be awaited in a task of a multi-threaded runtime.
pub trait AsyncSite: Sync {
    /// The blocking site on which [`blocking`](Self::blocking) makes a call: owned, so that it
    /// can be moved to where the call runs.
    type Blocking: Site + Send + Sync + 'static;

    /// Call `opcode` with the `Q` fixed bytes of `request`; resolves to the first `R` bytes of the
    /// reply (a handler's reply or an error status), waiting at most `deadline` (the site's own
    /// deadline if `None`).
    fn call_fixed<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        request: [u8; Q],
    ) -> impl Future<Output = Result<Reply<R>, Error>> + Send;

    /// As [`call_fixed`](Self::call_fixed), for a call with a streamed argument: `prefix` (the
    /// fixed arguments) then `body` (the stream's bytes).
    fn call_stream<const Q: usize, const R: usize>(
        &self,
        deadline: Option<Duration>,
        opcode: u32,
        prefix: [u8; Q],
        body: &[u8],
    ) -> impl Future<Output = Result<Reply<R>, Error>> + Send;

    /// Runs `call`, a call of the blocking client, on a [`Blocking`](Self::Blocking) site of this
    /// transport, somewhere it may block (the caller's task waits for it without holding a
    /// thread), and resolves to its result. `deadline` is the call's own, if any.
    fn blocking<T: Send + 'static>(
        &self,
        deadline: Option<Duration>,
        call: impl FnOnce(&Self::Blocking, Option<Duration>) -> T + Send + 'static,
    ) -> impl Future<Output = T> + Send;
}

/// Implements [`AsyncSite`] for a pointer to a site by forwarding each call to it.
macro_rules! forward {
    ($(#[$doc:meta])* [$($bounds:tt)*] $ptr:ty) => {
        $(#[$doc])*
        impl<T: AsyncSite + $($bounds)*> AsyncSite for $ptr {
            type Blocking = T::Blocking;

            fn call_fixed<const Q: usize, const R: usize>(
                &self,
                deadline: Option<Duration>,
                opcode: u32,
                request: [u8; Q],
            ) -> impl Future<Output = Result<Reply<R>, Error>> + Send {
                T::call_fixed(self, deadline, opcode, request)
            }

            fn call_stream<const Q: usize, const R: usize>(
                &self,
                deadline: Option<Duration>,
                opcode: u32,
                prefix: [u8; Q],
                body: &[u8],
            ) -> impl Future<Output = Result<Reply<R>, Error>> + Send {
                T::call_stream(self, deadline, opcode, prefix, body)
            }

            fn blocking<U: Send + 'static>(
                &self,
                deadline: Option<Duration>,
                call: impl FnOnce(&Self::Blocking, Option<Duration>) -> U + Send + 'static,
            ) -> impl Future<Output = U> + Send {
                T::blocking(self, deadline, call)
            }
        }
    };
}

forward!(
    /// A borrowed site (`Counter::async_client(&shm)`).
    [?Sized] &T
);

#[cfg(feature = "alloc")]
forward!(
    /// A shared handle (`Arc<ShmClient>`), for a client that a task of its own owns
    /// (`tokio::spawn` asks for `'static`).
    [Send + ?Sized] alloc::sync::Arc<T>
);
