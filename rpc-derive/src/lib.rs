//! `#[derive(RpcOpcodes)]`: typed services over the ferry mailbox protocol.
//!
//! Placeholder: the derive lands with its own issue.
