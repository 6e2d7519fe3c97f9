//! What a host transport's server threads share (feature `std`): the buffers each serving thread
//! receives streamed requests into.

use std::cell::RefCell;
use std::vec::Vec;

std::thread_local! {
    /// Where a serving thread receives streamed requests; kept between calls.
    static BUFFERS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's buffers for streamed requests (one per lane, grown as needed and
/// kept between calls: each serving thread has its own), or with fresh ones if they are in use
/// (a handler that serves another call from inside its own).
pub fn with_stream_buffers<R>(f: impl FnOnce(&mut Vec<Vec<u8>>) -> R) -> R {
    BUFFERS.with(|buffers| match buffers.try_borrow_mut() {
        Ok(mut buffers) => f(&mut buffers),
        Err(_) => f(&mut Vec::new()),
    })
}
