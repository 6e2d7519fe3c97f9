//! `Tally`: a user's own service, called by a GPU kernel and served by its host.
//!
//! The definition is shared by both sides: the kernel (`device/examples/tally.rs`, built to PTX)
//! calls it through the generated `TallyClient`, the host program
//! (`examples/src/bin/gpu-tally.rs`) serves it with a `TallyServer` next to the C-library
//! services (`Tally::server(mine).and(Libc::server(..))`). `no_std`, so it builds for the GPU.
//!
//! Every GPU thread keeps a running total under its own key (its global thread id): it adds
//! [`amount`]`(key, round)` for `round` in `0..rounds`, and both sides can work out what the
//! total must be ([`expected_total`]).

#![no_std]
#![deny(missing_docs)]

use ferry_rpc::service::Text;
use ferry_rpc::RpcOpcodes;

/// The longest description [`Tally::Describe`] replies, in bytes.
pub const DESCRIBE_LIMIT: u64 = 96;

/// Rounds of [`Tally::Add`] each thread makes unless told otherwise.
pub const DEFAULT_ROUNDS: u32 = 8;

/// A service that keeps running totals, one per key.
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.example.tally")]
pub enum Tally {
    /// Adds `n` to key `key`'s total; replies the new total.
    ///
    /// A values call (`values`): its arguments and reply are all it passes, and its handler
    /// touches none of the caller's memory, so a GPU caller makes it without fences.
    #[rpc(response = u64, values)]
    Add {
        /// Whose total (a GPU thread's global id).
        key: u32,
        /// How much to add.
        n: u64,
    },
    /// Replies key `key`'s total (0 for a key never added to). A values call, as `Add`.
    #[rpc(response = u64, values)]
    Total {
        /// Whose total.
        key: u32,
    },
    /// Replies a line describing key `key`: its adds and its total.
    #[rpc(response = Text, limit = DESCRIBE_LIMIT)]
    Describe {
        /// Whose total.
        key: u32,
    },
}

/// What key `key` adds in round `round`: distinct per key and round, so a call answered for
/// the wrong lane shows.
pub const fn amount(key: u32, round: u32) -> u64 {
    (key as u64) * 1000 + round as u64 + 1
}

/// Key `key`'s total after `rounds` rounds: the sum of [`amount`] over them.
pub const fn expected_total(key: u32, rounds: u32) -> u64 {
    let r = rounds as u64;
    (key as u64) * 1000 * r + r * (r + 1) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_total_is_the_sum_of_the_amounts() {
        for key in [0, 1, 31, 4095] {
            for rounds in [0, 1, 8, 100] {
                let sum: u64 = (0..rounds).map(|r| amount(key, r)).sum();
                assert_eq!(expected_total(key, rounds), sum);
            }
        }
    }
}
