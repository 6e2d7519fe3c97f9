//! Examples of the ferry framework; see the binaries in `src/bin`.
//!
//! - `kv`: a key-value service defined with `#[derive(RpcOpcodes)]` (the service is [`kv`]),
//!   served by two threads and called by four, over a region in this process's heap.
//!   `cargo run -p ferry-examples --bin kv`.

#![deny(missing_docs)]

pub mod kv;
