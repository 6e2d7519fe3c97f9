//! The two messages of a call across zenoh: the query's payload (one whole call) and the reply's
//! (its bytes, or the error). Both sides check every length and every tag of what they read;
//! anything malformed is refused with an error ([`Status::BadRequest`] on the server,
//! [`Status::BadResponse`] on the client), never taken for a call or a reply.
//!
//! ```text
//! request  : 0      format (1)
//!            1      reply shape: 0 none (one-way), 1 fixed, 2 stream
//!            2      body: 0 none, 1 the bytes after the prefix
//!            3      0
//!            4..8   opcode (u32, little-endian, as every number here)
//!            8..12  prefix length (at most a slot)
//!            12..16 fixed reply length (shape 1; at most a slot; else 0)
//!            16..24 stream limit (shape 2; else 0)
//!            24..32 deadline in microseconds (0: the server's own)
//!            32..   prefix, then the body
//! reply    : 0      0 (Ok): the reply's bytes follow
//!                   1 (Err): class (1 status, 2 transport), variant, sub-variant,
//!                   u32 at 4, u64 at 8, u64 at 16 (24 bytes in all)
//! ```

use std::time::Duration;

use ferry_rpc::service::{Error, ReplyShape, Status, Transport, WholeRequest};

/// The request format this crate writes and reads.
const FORMAT: u8 = 1;
/// The request header's length.
pub(crate) const HEADER: usize = 32;
/// An error reply's length.
const ERROR_LEN: usize = 24;
/// The most bytes of fixed arguments, or of a fixed reply (a slot).
const SLOT: usize = ferry_rpc::layout::SLOT_BYTES;

/// Writes `request` (with the deadline the caller gives its call) as a query's payload.
pub(crate) fn encode_request(request: &WholeRequest<'_>, deadline: Option<Duration>) -> Vec<u8> {
    let body = request.body.unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER + request.prefix.len() + body.len());
    let (shape, fixed, limit) = match request.reply {
        ReplyShape::None => (0u8, 0u32, 0u64),
        ReplyShape::Fixed(len) => (1, len as u32, 0),
        ReplyShape::Stream { limit } => (2, 0, limit),
    };
    let micros = deadline.map_or(0, |d| (d.as_micros().min(u64::MAX as u128) as u64).max(1));
    out.extend_from_slice(&[FORMAT, shape, request.body.is_some() as u8, 0]);
    out.extend_from_slice(&request.opcode.to_le_bytes());
    out.extend_from_slice(&(request.prefix.len() as u32).to_le_bytes());
    out.extend_from_slice(&fixed.to_le_bytes());
    out.extend_from_slice(&limit.to_le_bytes());
    out.extend_from_slice(&micros.to_le_bytes());
    out.extend_from_slice(request.prefix);
    out.extend_from_slice(body);
    out
}

/// A request read back: the call, and the deadline its caller gave.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub request: WholeRequest<'a>,
    pub deadline: Option<Duration>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

/// Reads a query's payload; [`Status::BadRequest`] for anything this format does not allow
/// (another format, an unknown shape, a prefix or fixed reply longer than a slot, lengths that
/// do not add up, bytes after the prefix of a call without a body).
pub(crate) fn decode_request(bytes: &[u8]) -> Result<Decoded<'_>, Status> {
    let bad = Status::BadRequest;
    if bytes.len() < HEADER || bytes[0] != FORMAT || bytes[3] != 0 {
        return Err(bad);
    }
    let opcode = u32_at(bytes, 4);
    let prefix_len = u32_at(bytes, 8) as usize;
    let fixed = u32_at(bytes, 12) as usize;
    let limit = u64_at(bytes, 16);
    let micros = u64_at(bytes, 24);
    let reply = match bytes[1] {
        0 if fixed == 0 && limit == 0 => ReplyShape::None,
        1 if fixed <= SLOT && limit == 0 => ReplyShape::Fixed(fixed),
        2 if fixed == 0 => ReplyShape::Stream { limit },
        _ => return Err(bad),
    };
    let rest = &bytes[HEADER..];
    if prefix_len > SLOT || prefix_len > rest.len() {
        return Err(bad);
    }
    let (prefix, body) = rest.split_at(prefix_len);
    let body = match bytes[2] {
        0 if body.is_empty() => None,
        1 => Some(body),
        _ => return Err(bad),
    };
    Ok(Decoded {
        request: WholeRequest {
            opcode,
            prefix,
            body,
            reply,
        },
        deadline: (micros != 0).then(|| Duration::from_micros(micros)),
    })
}

/// A reply carrying `bytes`.
pub(crate) fn encode_ok(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + bytes.len());
    out.push(0);
    out.extend_from_slice(bytes);
    out
}

/// A reply carrying `error`.
pub(crate) fn encode_error(error: &Error) -> Vec<u8> {
    let (class, variant, sub, x, a, b): (u8, u8, u8, u32, u64, u64) = match *error {
        Error::App(never) => match never {},
        Error::Status(s) => match s {
            Status::UnknownOpcode { opcode } => (1, 1, 0, opcode, 0, 0),
            Status::Rejected => (1, 2, 0, 0, 0, 0),
            Status::BadRequest => (1, 3, 0, 0, 0, 0),
            Status::BadResponse => (1, 4, 0, 0, 0, 0),
            Status::ReplyTooLarge { len, limit } => (1, 5, 0, 0, len, limit),
            Status::ServerError => (1, 6, 0, 0, 0, 0),
            Status::Mismatch { client, server } => (1, 7, 0, 0, client, server),
            Status::Other(code) => (1, 8, 0, code, 0, 0),
            _ => (1, 8, 0, u32::MAX, 0, 0),
        },
        Error::Transport(t) => match t {
            Transport::Protocol(e) => match e {
                ferry_rpc::Error::Stalled => (2, 1, 1, 0, 0, 0),
                ferry_rpc::Error::TooLarge { lane, len, limit } => (2, 1, 2, lane, len, limit),
                ferry_rpc::Error::Rejected => (2, 1, 3, 0, 0, 0),
                ferry_rpc::Error::Sink { lane } => (2, 1, 4, lane, 0, 0),
                ferry_rpc::Error::LaneFailed { lane } => (2, 1, 5, lane, 0, 0),
            },
            Transport::NoServer => (2, 2, 0, 0, 0, 0),
            Transport::ShuttingDown => (2, 3, 0, 0, 0, 0),
            Transport::NoFreePort => (2, 4, 0, 0, 0, 0),
            Transport::Deadline => (2, 5, 0, 0, 0, 0),
            Transport::PortLost { port } => (2, 6, 0, port, 0, 0),
            Transport::NotServed { .. } => (2, 7, 0, 0, 0, 0),
            _ => (2, 8, 0, 0, 0, 0),
        },
    };
    let mut out = Vec::with_capacity(ERROR_LEN);
    out.extend_from_slice(&[1, class, variant, sub]);
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&a.to_le_bytes());
    out.extend_from_slice(&b.to_le_bytes());
    out
}

/// What a failure of the server's own transport is called here (its words do not cross).
pub(crate) const SERVER_TRANSPORT: &str = "the server's transport failed the call";

/// Reads a reply: its bytes, or the error it carries (`service`: the name a `NotServed` names).
/// Anything malformed is [`Status::BadResponse`].
pub(crate) fn decode_reply<'a>(bytes: &'a [u8], service: &'static str) -> Result<&'a [u8], Error> {
    let bad = Error::Status(Status::BadResponse);
    match bytes.first() {
        Some(0) => return Ok(&bytes[1..]),
        Some(1) if bytes.len() == ERROR_LEN => {}
        _ => return Err(bad),
    }
    let (class, variant, sub) = (bytes[1], bytes[2], bytes[3]);
    let (x, a, b) = (u32_at(bytes, 4), u64_at(bytes, 8), u64_at(bytes, 16));
    Err(match (class, variant, sub) {
        (1, 1, 0) => Status::UnknownOpcode { opcode: x }.into(),
        (1, 2, 0) => Status::Rejected.into(),
        (1, 3, 0) => Status::BadRequest.into(),
        (1, 4, 0) => Status::BadResponse.into(),
        (1, 5, 0) => Status::ReplyTooLarge { len: a, limit: b }.into(),
        (1, 6, 0) => Status::ServerError.into(),
        (1, 7, 0) => Status::Mismatch {
            client: a,
            server: b,
        }
        .into(),
        (1, 8, 0) => Status::Other(x).into(),
        (2, 1, 1) => ferry_rpc::Error::Stalled.into(),
        (2, 1, 2) => ferry_rpc::Error::TooLarge {
            lane: x,
            len: a,
            limit: b,
        }
        .into(),
        (2, 1, 3) => ferry_rpc::Error::Rejected.into(),
        (2, 1, 4) => ferry_rpc::Error::Sink { lane: x }.into(),
        (2, 1, 5) => ferry_rpc::Error::LaneFailed { lane: x }.into(),
        (2, 2, 0) => Transport::NoServer.into(),
        (2, 3, 0) => Transport::ShuttingDown.into(),
        (2, 4, 0) => Transport::NoFreePort.into(),
        (2, 5, 0) => Transport::Deadline.into(),
        (2, 6, 0) => Transport::PortLost { port: x }.into(),
        (2, 7, 0) => Transport::NotServed { service }.into(),
        (2, 8, 0) => Transport::Other(SERVER_TRANSPORT).into(),
        _ => bad,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(reply: ReplyShape, body: Option<&[u8]>) -> WholeRequest<'_> {
        WholeRequest {
            opcode: 0x8123_4567,
            prefix: &[1, 2, 3],
            body,
            reply,
        }
    }

    #[test]
    fn requests_read_back_as_written() {
        let shapes = [
            ReplyShape::None,
            ReplyShape::Fixed(0),
            ReplyShape::Fixed(SLOT),
            ReplyShape::Stream { limit: 1 << 40 },
        ];
        for reply in shapes {
            for body in [None, Some(&[][..]), Some(&[9u8; 100][..])] {
                for deadline in [None, Some(Duration::from_millis(1500))] {
                    let bytes = encode_request(&request(reply, body), deadline);
                    let back = decode_request(&bytes).unwrap();
                    assert_eq!(back.request.opcode, 0x8123_4567);
                    assert_eq!(back.request.prefix, &[1, 2, 3]);
                    assert_eq!(back.request.body, body);
                    assert_eq!(back.request.reply, reply);
                    assert_eq!(back.deadline, deadline);
                }
            }
        }
    }

    /// Every header byte changed to every value, every truncation: either refused or read as a
    /// request whose lengths add up (never a panic, never a prefix or reply over a slot).
    #[test]
    fn hostile_requests_are_refused_or_bounded() {
        let good = encode_request(
            &request(ReplyShape::Fixed(8), Some(&[5; 10])),
            Some(Duration::from_secs(1)),
        );
        for cut in 0..good.len() {
            let _ = decode_request(&good[..cut]);
        }
        assert_eq!(
            decode_request(&good[..HEADER - 1]).unwrap_err(),
            Status::BadRequest
        );
        for at in 0..HEADER {
            for value in [0u8, 1, 2, 3, 0x40, 0x41, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] = value;
                if let Ok(d) = decode_request(&bad) {
                    assert!(d.request.prefix.len() <= SLOT);
                    if let ReplyShape::Fixed(n) = d.request.reply {
                        assert!(n <= SLOT);
                    }
                    let body = d.request.body.map_or(0, <[u8]>::len);
                    assert_eq!(HEADER + d.request.prefix.len() + body, bad.len());
                }
            }
        }
        // A body's bytes on a call that says it has none; a prefix longer than a slot.
        let mut extra = encode_request(&request(ReplyShape::None, None), None);
        extra.push(0);
        assert_eq!(decode_request(&extra).unwrap_err(), Status::BadRequest);
        let mut long = encode_request(&request(ReplyShape::None, None), None);
        long[8..12].copy_from_slice(&65u32.to_le_bytes());
        long.extend_from_slice(&[0; 65]);
        assert_eq!(decode_request(&long).unwrap_err(), Status::BadRequest);
    }

    #[test]
    fn errors_read_back_as_written() {
        let errors: Vec<Error> = vec![
            Status::UnknownOpcode { opcode: 7 }.into(),
            Status::Rejected.into(),
            Status::BadRequest.into(),
            Status::BadResponse.into(),
            Status::ReplyTooLarge { len: 9, limit: 3 }.into(),
            Status::ServerError.into(),
            Status::Mismatch {
                client: 1,
                server: 2,
            }
            .into(),
            Status::Other(77).into(),
            ferry_rpc::Error::Stalled.into(),
            ferry_rpc::Error::TooLarge {
                lane: 1,
                len: 2,
                limit: 3,
            }
            .into(),
            ferry_rpc::Error::Rejected.into(),
            ferry_rpc::Error::Sink { lane: 4 }.into(),
            ferry_rpc::Error::LaneFailed { lane: 5 }.into(),
            Transport::NoServer.into(),
            Transport::ShuttingDown.into(),
            Transport::NoFreePort.into(),
            Transport::Deadline.into(),
            Transport::PortLost { port: 3 }.into(),
            Transport::NotServed { service: "S" }.into(),
            Transport::Other(SERVER_TRANSPORT).into(),
        ];
        for e in errors {
            assert_eq!(decode_reply(&encode_error(&e), "S"), Err(e));
        }
        assert_eq!(decode_reply(&encode_ok(&[1, 2]), "S"), Ok(&[1, 2][..]));
    }

    #[test]
    fn malformed_replies_are_bad_responses() {
        let bad = Err(Error::Status(Status::BadResponse));
        assert_eq!(decode_reply(&[], "S"), bad);
        assert_eq!(decode_reply(&[2, 0, 0], "S"), bad);
        let mut e = encode_error(&Status::Rejected.into());
        e.push(0);
        assert_eq!(decode_reply(&e, "S"), bad);
        let mut e = encode_error(&Status::Rejected.into());
        e[2] = 99;
        assert_eq!(decode_reply(&e, "S"), bad);
    }
}
