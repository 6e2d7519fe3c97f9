//! The one place this crate's atomics come from (the rpc-core habit), so a checker can swap them.

pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
