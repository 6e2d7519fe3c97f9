//! The one place this crate's atomics come from (the ferry-rpc habit), so a checker can swap them:
//! under `--cfg loom` they are loom's, for the model of inline lines (`inline`). Only that model
//! runs under loom; the code that maps the file into atomics is compiled there, never run. It
//! also says where a port sits in a one-bit-per-port bitmap.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Where port `port` sits in a bitmap of one bit per port in `u32` words (the lock bitmaps, the
/// inline bitmap): its word's index and its bit.
pub const fn word_bit(port: usize) -> (usize, u32) {
    (port / 32, 1 << (port % 32))
}
