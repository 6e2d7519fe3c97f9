//! Status codes a server sends in the packet header's status word: rpc-core's
//! ([`rpc_core::service::status`], re-exported here) and the one this transport adds.

pub use rpc_core::service::status::*;

/// The handler failed (returned a protocol error) or panicked while it held the packet; the reply
/// carries no result. Specific to this transport, whose workers catch a handler's failure and
/// still answer the client: rpc-core has no equivalent code. A typed client sees it as
/// `CallError::Status(SERVER_ERROR)`.
pub const SERVER_ERROR: u32 = 5;

/// An inline call (`inline`) the server's handler cannot serve inline (a call of another schema
/// with a stream, say): the client makes the call again through the packets. Never reaches a
/// typed client.
pub const NOT_INLINE: u32 = 6;

// SERVER_ERROR and NOT_INLINE must stay clear of every code rpc-core defines.
const _: () = {
    let core = [
        OK,
        UNKNOWN_OPCODE,
        REJECTED,
        BAD_REQUEST,
        FINGERPRINT_MISMATCH,
    ];
    let mut i = 0;
    while i < core.len() {
        assert!(core[i] != SERVER_ERROR && core[i] != NOT_INLINE);
        i += 1;
    }
};
