//! Serving `#[derive(RpcOpcodes)]` services: a service bound to its handler
//! (`Counter::server(handler)`), or several (`.and(..)`), is a [`Handler`].

use std::cell::RefCell;

use ferry_core::service::{Both, Dispatch, Services, Serving, INLINE_BYTES};

use crate::{Handler, ServerPort};

thread_local! {
    /// Where a worker thread receives streamed requests; kept between calls.
    static BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's buffers for streamed requests (one per lane, grown as needed and
/// kept between calls), or with fresh ones if they are in use (a handler that serves another
/// call from inside its own).
pub fn with_stream_buffers<R>(f: impl FnOnce(&mut Vec<Vec<u8>>) -> R) -> R {
    BUFFERS.with(|buffers| match buffers.try_borrow_mut() {
        Ok(mut buffers) => f(&mut buffers),
        Err(_) => f(&mut Vec::new()),
    })
}

/// The `Handler` items of a set of derived services ([`Serving`], [`Both`]): every call to
/// [`Services`], streamed arguments into this thread's buffers.
macro_rules! services_handler {
    () => {
        fn handle(&self, port: &mut ServerPort<'_, '_>) -> Result<(), ferry_core::Error> {
            with_stream_buffers(|buffers| Services::dispatch(self, port, buffers)).map(|_| ())
        }

        #[inline]
        fn handle_inline(
            &self,
            opcode: u32,
            request: &[u8],
            reply: &mut [u8; INLINE_BYTES],
        ) -> Option<(u32, usize)> {
            Services::dispatch_inline(self, opcode, request, reply)
        }

        fn serves_inline(&self) -> bool {
            true
        }

        fn services(&self) -> Vec<(&'static str, u64)> {
            listed(self)
        }

        fn collision(&self) -> Option<ferry_core::service::Collision> {
            ferry_core::service::opcode_collision(self)
        }
    };
}

/// A derived service bound to its handler (`Counter::server(handler)`) is a [`Handler`]:
/// calls through the packets go to the service's dispatch (streamed arguments into buffers kept
/// per worker thread, [`with_stream_buffers`]), inline calls to its inline dispatch, and the
/// file's services table lists it.
///
/// ```no_run
/// use ferry_shm::demo::{Demo, DemoService};
/// use ferry_shm::{ServerConfig, ShmServer};
///
/// let server = ShmServer::start("demo", ServerConfig::default(), Demo::server(DemoService))?;
/// # Ok::<(), ferry_shm::ShmError>(())
/// ```
impl<S, H> Handler for Serving<S, H>
where
    S: Dispatch<H> + 'static,
    H: Send + Sync + 'static,
{
    services_handler!();
}

/// Several derived services served together (`Counter::server(a).and(Libc::server(b))`): each
/// call goes to the service that has its opcode.
impl<A, B> Handler for Both<A, B>
where
    A: Services + Send + Sync + 'static,
    B: Services + Send + Sync + 'static,
{
    services_handler!();
}

fn listed(services: &impl Services) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    services.each(&mut |name, fingerprint, _| out.push((name, fingerprint)));
    out
}
