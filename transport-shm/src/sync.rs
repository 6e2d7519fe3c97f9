//! The one place this crate's atomics come from (the rpc-core habit), so a checker can swap them:
//! under `--cfg loom` they are loom's, for the model of inline lines (`inline`). Only that model
//! runs under loom; the code that maps the file into atomics is compiled there, never run.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
