//! What a derived client's methods are once their arguments are packed: one function per kind
//! of call, each a [`Site::call`] around the call of `wire.rs` that makes it, so that the
//! derive writes a method as its arguments and one call. Each is compiled into the method that
//! calls it (on a GPU, the closure too: the call's own code is then where it is written for a
//! hot call, or one call of the runtime's shared function for any other).

use core::time::Duration;

use super::__private::{check_limit, check_limit_len};
use super::{wire, AsyncSite, Error, Site};
use crate::words::Memory;

/// What a derived client holds: the site its calls are made through, and the deadline each
/// waits under (none: the site's own).
#[derive(Clone, Copy, Debug)]
pub struct Calls<S> {
    /// The call site.
    pub site: S,
    /// The longest a call waits for the other side, if set (`with_deadline`).
    pub deadline: Option<Duration>,
}

impl<S> Calls<S> {
    /// Calls through `site`, with no deadline of their own.
    pub const fn new(site: S) -> Self {
        Calls {
            site,
            deadline: None,
        }
    }

    /// These calls, each waiting at most `deadline`.
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Calls {
            deadline: Some(deadline),
            ..self
        }
    }
}

/// A call of a derived service as its client makes it: its opcode, `Q` bytes of fixed arguments
/// and `R` of fixed reply (0 where it has none). One constant of it per call.
#[derive(Clone, Copy, Debug)]
pub struct Call<const Q: usize, const R: usize> {
    /// The call's opcode.
    pub opcode: u32,
}

/// One method per way of making a fixed call (`wire::call_shared` or `wire::call_hot`, ordering
/// the caller's memory or not): `request` its `Q` bytes of arguments, `decode` reads its `R` of
/// reply.
macro_rules! fixed_calls {
    ($($(#[$doc:meta])* $name:ident => $call:ident, $memory:ident;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name<S: Site, T, E>(
            self,
            caller: &Calls<S>,
            request: &[u8; Q],
            decode: impl FnOnce(&[u8]) -> Result<T, Error<E>>,
        ) -> Result<T, Error<E>> {
            let opcode = self.opcode;
            caller.site.call(
                caller.deadline,
                #[inline(always)]
                move |c| {
                    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
                    {
                        let reply = wire::$call::<_, Q, R>(c, opcode, request, Memory::$memory);
                        decode(&reply.map_err(Error::widen)?[..])
                    }
                    // Off a GPU every fixed call is `wire::fixed`, compiled here, its reply
                    // decoded where the call wrote it (moved into a `Result` first, its bytes
                    // would be copied once more on every call).
                    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
                    {
                        let mut reply = [0u8; R];
                        wire::fixed(c, opcode, request, &mut reply, Memory::$memory)
                            .map_err(Error::widen)?;
                        decode(&reply)
                    }
                },
            )
        }
    )*};
}

impl<const Q: usize, const R: usize> Call<Q, R> {
    /// The call `opcode`.
    pub const fn new(opcode: u32) -> Self {
        Call { opcode }
    }

    fixed_calls! {
        /// A fixed call (`wire::call_shared`).
        fixed => call_shared, Fenced;
        /// A fixed call compiled where it is written (`hot`: `wire::call_hot`).
        fixed_hot => call_hot, Fenced;
        /// A fixed call of plain values (`values`).
        fixed_values => call_shared, ValuesOnly;
        /// A `hot` fixed call of plain values.
        fixed_values_hot => call_hot, ValuesOnly;
    }

    /// A one-way call (`wire::call_oneway`, or `wire::call_oneway_hot` if `hot`).
    #[inline(always)]
    pub fn oneway<S: Site>(
        self,
        caller: &Calls<S>,
        request: &[u8; Q],
        hot: bool,
    ) -> Result<(), Error> {
        let opcode = self.opcode;
        caller.site.call(
            caller.deadline,
            #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
            move |c| match hot {
                true => wire::call_oneway_hot::<_, Q>(c, opcode, request),
                false => wire::call_oneway::<_, Q>(c, opcode, request),
            },
        )
    }

    /// A call with a streamed reply, written into `out` (`wire::call_into`; `body` the
    /// streamed argument, if the call has one): `unwrap` takes the reply's bytes out of it (or
    /// its error, for a call that has one: `wire::reply_bytes`), `read` reads them.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn into<'b, S: Site, T, E>(
        self,
        caller: &Calls<S>,
        request: &[u8; Q],
        body: Option<&[u8]>,
        out: &'b mut [u8],
        limit: u64,
        unwrap: impl FnOnce(wire::Replied<&'b mut [u8]>) -> Result<&'b mut [u8], Error<E>>,
        read: impl FnOnce(&'b mut [u8]) -> Result<T, Error<E>>,
    ) -> Result<T, Error<E>> {
        let opcode = self.opcode;
        caller.site.call(
            caller.deadline,
            #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
            move |c| {
                let tagged = R > 0;
                let replied = wire::call_into::<_, Q>(c, opcode, request, body, out, limit, tagged);
                read(unwrap(replied.map_err(Error::widen)?)?)
            },
        )
    }

    /// A call with a streamed argument, `body` (`wire::call_stream`): refused before anything
    /// is sent when a one-lane caller's `body` is over the call's `limit` (a one-way call could
    /// not learn of it otherwise; the server refuses it too, for a client that does not check).
    /// Its reply (none if `oneway`) read by `decode`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn stream<S: Site, T, E>(
        self,
        caller: &Calls<S>,
        request: &[u8; Q],
        body: &[u8],
        limit: u64,
        oneway: bool,
        decode: impl FnOnce(&[u8]) -> Result<T, Error<E>>,
    ) -> Result<T, Error<E>> {
        let opcode = self.opcode;
        caller.site.call(
            caller.deadline,
            #[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(always))]
            move |c| {
                check_limit(c, body.len(), limit).map_err(Error::widen)?;
                let reply = wire::call_stream::<_, Q, R>(c, opcode, request, body, oneway);
                decode(&reply.map_err(Error::widen)?[..])
            },
        )
    }
}

impl<const Q: usize, const R: usize> Call<Q, R> {
    /// A fixed call made by an async client ([`AsyncSite::call_fixed`]).
    pub async fn fixed_async<S: AsyncSite, T, E>(
        self,
        caller: &Calls<S>,
        request: [u8; Q],
        decode: impl FnOnce(&[u8]) -> Result<T, Error<E>>,
    ) -> Result<T, Error<E>> {
        let (site, deadline) = (&caller.site, caller.deadline);
        let reply = site
            .call_fixed::<Q, R>(deadline, self.opcode, request)
            .await;
        decode(&reply.map_err(Error::widen)?[..])
    }

    /// A call with a streamed argument made by an async client ([`AsyncSite::call_stream`]):
    /// refused before anything is sent when `body` is over the call's `limit`.
    pub async fn stream_async<S: AsyncSite, T, E>(
        self,
        caller: &Calls<S>,
        request: [u8; Q],
        body: &[u8],
        limit: u64,
        decode: impl FnOnce(&[u8]) -> Result<T, Error<E>>,
    ) -> Result<T, Error<E>> {
        check_limit_len(body.len(), limit).map_err(Error::widen)?;
        let (site, deadline) = (&caller.site, caller.deadline);
        let reply = site
            .call_stream::<Q, R>(deadline, self.opcode, request, body)
            .await;
        decode(&reply.map_err(Error::widen)?[..])
    }
}

/// A streamed reply's bytes, of a call without an error type.
#[inline(always)]
pub fn untagged<B, E>(replied: wire::Replied<B>) -> Result<B, Error<E>> {
    Ok(replied.bytes)
}

/// A streamed reply's bytes as they are.
#[inline(always)]
pub fn bytes<E>(bytes: &mut [u8]) -> Result<&mut [u8], Error<E>> {
    Ok(bytes)
}

/// A streamed reply's bytes as text (`wire::text`).
#[inline(always)]
pub fn text_in<E>(bytes: &mut [u8]) -> Result<&str, Error<E>> {
    wire::text(bytes)
}

/// The reply of a one-way call: nothing to read.
#[inline(always)]
pub fn nothing<E>(_: &[u8]) -> Result<(), Error<E>> {
    Ok(())
}
