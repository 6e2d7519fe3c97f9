//! What the tests that write a ferry file's words behind the protocol's back share: the file
//! mapped as another process would map it, and its words as every process reaches them.

// Each test crate that includes this module uses some of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, AtomicU64};

/// Maps `path` for writing its words directly, as another process would.
pub fn map_file(path: &std::path::Path) -> memmap2::MmapRaw {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    memmap2::MmapOptions::new().map_raw(&file).unwrap()
}

/// The `u32` at byte `at` of a mapped ferry file (the inline bitmap), as every process accesses
/// it: atomically, with the library's width.
pub fn word32(map: &memmap2::MmapRaw, at: usize) -> &AtomicU32 {
    assert!(at.is_multiple_of(4) && at + 4 <= map.len());
    // SAFETY: checked just above: aligned and inside the live mapping, which `map` keeps.
    unsafe { &*map.as_ptr().add(at).cast() }
}

/// The `u64` at byte `at` of a mapped ferry file (an owner word or an inline line word).
pub fn word64(map: &memmap2::MmapRaw, at: usize) -> &AtomicU64 {
    assert!(at.is_multiple_of(8) && at + 8 <= map.len());
    // SAFETY: checked just above: aligned and inside the live mapping, which `map` keeps.
    unsafe { &*map.as_ptr().add(at).cast() }
}
