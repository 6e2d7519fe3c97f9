//! Serving a `#[derive(RpcOpcodes)]` service: [`impl_handler!`](crate::impl_handler) makes a
//! type that implements the generated server trait a [`Handler`](crate::Handler).

use std::cell::RefCell;

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

/// Implements [`Handler`](crate::Handler) for a type that implements a server trait
/// `#[derive(RpcOpcodes)]` generated: calls through the packets go to the trait's `dispatch`
/// (streamed requests into buffers kept per worker thread, [`with_stream_buffers`]), inline calls
/// to its `dispatch_inline`, and the server answers inline calls.
///
/// ```
/// use transport_shm::demo::{DemoServer, DemoService};
///
/// struct Mine(DemoService);
/// impl DemoServer for Mine {
///     fn echo(&self, id: u64) -> transport_shm::demo::Echoed { self.0.echo(id) }
///     fn add(&self, r: transport_shm::demo::Operands) -> u64 { self.0.add(r) }
///     fn sleep(&self, micros: u64) -> transport_shm::demo::Slept { self.0.sleep(micros) }
///     fn sum(&self, data: &[u8]) -> transport_shm::demo::Summed { self.0.sum(data) }
/// }
/// transport_shm::impl_handler!(Mine: DemoServer);
/// // `ShmServer::start(path, config, Mine(DemoService))` now serves it.
/// ```
#[macro_export]
macro_rules! impl_handler {
    ($ty:ty : $server:path) => {
        impl $crate::Handler for $ty {
            fn handle(
                &self,
                port: &mut $crate::ServerPort<'_, '_>,
            ) -> ::core::result::Result<(), $crate::__private::rpc_core::Error> {
                $crate::service::with_stream_buffers(|buffers| {
                    <$ty as $server>::dispatch(self, port, buffers)
                })
                .map(|_| ())
            }

            #[inline]
            fn handle_inline(
                &self,
                opcode: u32,
                request: &[u8],
                reply: &mut [u8; $crate::__private::rpc_core::service::INLINE_BYTES],
            ) -> ::core::option::Option<(u32, usize)> {
                <$ty as $server>::dispatch_inline(self, opcode, request, reply)
            }

            fn serves_inline(&self) -> bool {
                true
            }
        }
    };
}
