//! Status codes a server sends in the packet header's status word: ferry-rpc's
//! ([`ferry_rpc::service::status`], re-exported here, `SERVER_ERROR` among them: a handler that
//! failed or panicked, which a typed client sees as `Status::ServerError`) and the one this
//! transport adds.

pub use ferry_rpc::service::status::*;

/// An inline call (`inline`) the server's handler cannot serve inline (a call of another schema
/// with a stream, say): the client makes the call again through the packets. Never reaches a
/// typed client.
pub const NOT_INLINE: u32 = 6;

// NOT_INLINE must stay clear of every code ferry-rpc defines.
const _: () = {
    let core = [
        OK,
        UNKNOWN_OPCODE,
        REJECTED,
        BAD_REQUEST,
        FINGERPRINT_MISMATCH,
        SERVER_ERROR,
    ];
    let mut i = 0;
    while i < core.len() {
        assert!(core[i] != NOT_INLINE);
        i += 1;
    }
};
