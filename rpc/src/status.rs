//! Status codes a server puts in the header's status word with its reply (and a transport's
//! fast paths beside its reply words): part of the protocol, which the service layer reads.

/// The call was served.
pub const OK: u32 = 0;
/// The server has no call with this opcode; nothing was executed.
pub const UNKNOWN_OPCODE: u32 = 1;
/// The request stream was longer than the server accepts; nothing was executed.
pub const REJECTED: u32 = 2;
/// The request could not be decoded (text that is not UTF-8); nothing was executed.
pub const BAD_REQUEST: u32 = 3;
/// The handshake found that the two sides were built from different service schemas.
pub const FINGERPRINT_MISMATCH: u32 = 4;
/// The handler failed (a protocol error) or panicked while it held the packet; the reply
/// carries no result. Sent by servers that catch a handler's failure and still answer.
pub const SERVER_ERROR: u32 = 5;
