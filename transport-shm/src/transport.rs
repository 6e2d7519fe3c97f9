//! What a transport gives a side: its view of a region both sides share.
//!
//! The shared-memory file implements it for both sides ([`ShmServer`](crate::ShmServer),
//! [`ShmClient`](crate::ShmClient)); a GPU transport would implement it over pinned host memory.
//! It is small on purpose, so it can move into `rpc-core` unchanged once a second transport uses
//! it.

use rpc_core::{Mailbox, Region};

/// A side's view of a region some transport provides.
pub trait Transport {
    /// The region's mailbox representation.
    type Mailbox: Mailbox;
    /// The region both sides share.
    fn region(&self) -> Region<'_, Self::Mailbox>;
    /// The schema fingerprint of the service the region carries.
    fn fingerprint(&self) -> u64;
    /// Whether the other side is still there to answer (false: stop waiting for it).
    fn peer_alive(&self) -> bool;
}
