//! Status codes a server sends in the packet header's status word. The first four match
//! `rpc_core::service::status`; `SERVER_ERROR` is this transport's addition.

/// The call succeeded.
pub const OK: u32 = 0;
/// The server does not know the opcode.
pub const UNKNOWN_OPCODE: u32 = 1;
/// The request stream was longer than the server accepts; nothing was executed.
pub const REJECTED: u32 = 2;
/// The request's arguments were refused; nothing was executed.
pub const BAD_REQUEST: u32 = 3;
/// The handler failed or panicked; the reply carries no result.
pub const SERVER_ERROR: u32 = 5;
