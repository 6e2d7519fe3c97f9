//! What a typed call returns when it fails: the handler's own error, kept apart from what the
//! server or the transport said.

use core::convert::Infallible;
use core::fmt;

use super::status;
use crate::error::write_parts;

/// Why a typed call failed.
///
/// `E` is the call's own error (`#[rpc(error = E)]`): what the handler returned, carried back as
/// a value. Calls without one have `E = Infallible`, so [`Error::App`] cannot occur. The other
/// two kinds never come from a handler: [`Error::Status`] is the server (or the client's own
/// decoding) refusing the call as asked, [`Error::Transport`] is the call not completing as an
/// exchange.
///
/// ```
/// use ferry_rpc::service::{Error, Status};
/// let e: Error<&str> = Error::App("full");
/// assert_eq!(e.to_string(), "the call failed: full");
/// let e: Error = Error::Status(Status::Rejected);
/// assert!(e.to_string().contains("too long"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error<E = Infallible> {
    /// The handler's error, as it returned it.
    App(E),
    /// The server answered with a status instead of a reply (nothing, or the refused part, was
    /// executed), or the reply did not decode.
    Status(Status),
    /// The call did not complete: no server, a deadline passed, the port was lost.
    Transport(Transport),
}

/// A server's (or the client's own) refusal of a call: see [`Error::Status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// The server has no call with this opcode; nothing was executed.
    UnknownOpcode {
        /// The opcode sent.
        opcode: u32,
    },
    /// A streamed argument was longer than the call's `limit`; nothing was executed.
    Rejected,
    /// The request did not decode on the server (an argument's bytes are not a valid value,
    /// text that is not UTF-8); nothing was executed.
    BadRequest,
    /// The reply did not decode here (a value's bytes are not valid for its type, text that is
    /// not UTF-8).
    BadResponse,
    /// The streamed reply was longer than this client accepts (its buffer, or the call's
    /// `limit`); the reply was refused and the port left at rest.
    ReplyTooLarge {
        /// The reply's length.
        len: u64,
        /// The most this client took.
        limit: u64,
    },
    /// The handler failed or panicked while serving; the call may have been partly executed.
    ServerError,
    /// The two sides were built from different schemas.
    Mismatch {
        /// This side's fingerprint.
        client: u64,
        /// The server's fingerprint.
        server: u64,
    },
    /// A status this side does not know.
    Other(u32),
}

/// The transport or the protocol failed: see [`Error::Transport`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// The protocol failed: the server did not answer before the deadline or is gone mid-call
    /// (`crate::Error::Stalled`), or a packet was malformed.
    Protocol(crate::Error),
    /// No server serves this region or file any more.
    NoServer,
    /// The server is draining or stopped: no new calls are accepted.
    ShuttingDown,
    /// No port became free before the deadline.
    NoFreePort,
    /// The call's deadline passed before its reply came: a reply that comes later is discarded;
    /// whether the server ran the call is unknown.
    Deadline,
    /// The port the call ran on was taken from this client mid-call (the region was written
    /// behind the protocol's back): what was read is discarded, whether the call ran is unknown.
    PortLost {
        /// The port.
        port: u32,
    },
    /// The service is not served at the other side (checked when connecting).
    NotServed {
        /// The service's name.
        service: &'static str,
    },
    /// Another failure of the transport, in its words.
    Other(&'static str),
}

impl<E> Error<E> {
    /// Maps the handler's error, leaving the others as they are.
    pub fn map_app<F>(self, f: impl FnOnce(E) -> F) -> Error<F> {
        match self {
            Error::App(e) => Error::App(f(e)),
            Error::Status(s) => Error::Status(s),
            Error::Transport(t) => Error::Transport(t),
        }
    }

    /// Whether nothing of the call can have run: a refusal before any handler ran, or a call
    /// that never reached the server. (A deadline, a lost port, a handler that failed: unknown.)
    pub fn not_executed(&self) -> bool {
        matches!(
            self,
            Error::Status(
                Status::UnknownOpcode { .. }
                    | Status::Rejected
                    | Status::BadRequest
                    | Status::Mismatch { .. }
            ) | Error::Transport(
                Transport::NoServer
                    | Transport::ShuttingDown
                    | Transport::NoFreePort
                    | Transport::NotServed { .. }
            )
        )
    }
}

impl Error<Infallible> {
    /// This error as one of a call with an application error type (no call without one has an
    /// [`Error::App`]).
    pub fn widen<E>(self) -> Error<E> {
        self.map_app(|never| match never {})
    }
}

impl Status {
    /// The refusal a non-OK `status` in a reply to `opcode` means.
    pub fn from_code(code: u32, opcode: u32) -> Status {
        match code {
            status::UNKNOWN_OPCODE => Status::UnknownOpcode { opcode },
            status::REJECTED => Status::Rejected,
            status::BAD_REQUEST => Status::BadRequest,
            status::SERVER_ERROR => Status::ServerError,
            s => Status::Other(s),
        }
    }
}

impl<E> From<Status> for Error<E> {
    fn from(s: Status) -> Self {
        Error::Status(s)
    }
}

impl<E> From<Transport> for Error<E> {
    fn from(t: Transport) -> Self {
        Error::Transport(t)
    }
}

impl<E> From<crate::Error> for Error<E> {
    fn from(e: crate::Error) -> Self {
        Error::Transport(Transport::Protocol(e))
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::App(e) => write!(f, "the call failed: {e}"),
            // (Their texts take no options from `f`: as `write!(f, "{s}")`.)
            Error::Status(s) => s.fmt(f),
            Error::Transport(t) => t.fmt(f),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::error::Part::{Dec, Hex, Text};
        let text = match *self {
            Status::UnknownOpcode { opcode } => {
                return write_parts(
                    f,
                    &[
                        Text("the server does not know opcode "),
                        Hex(opcode as u64, 8),
                    ],
                )
            }
            Status::Rejected => "the server refused a streamed argument as too long",
            Status::BadRequest => "the server could not decode the request",
            Status::BadResponse => "the reply did not decode",
            Status::ReplyTooLarge { len, limit } => {
                return write_parts(
                    f,
                    &[
                        Text("the reply of "),
                        Dec(len),
                        Text(" bytes is longer than the "),
                        Dec(limit),
                        Text(" this client takes"),
                    ],
                )
            }
            Status::ServerError => "the handler failed on the server",
            Status::Mismatch { client, server } => {
                return write_parts(
                    f,
                    &[
                        Text("schema mismatch: client fingerprint "),
                        Hex(client, 16),
                        Text(", server "),
                        Hex(server, 16),
                    ],
                )
            }
            Status::Other(s) => {
                return write_parts(
                    f,
                    &[
                        Text("the server replied with unknown status "),
                        Dec(s as u64),
                    ],
                )
            }
        };
        f.write_str(text)
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::error::Part::{Dec, Text};
        let text = match *self {
            Transport::Protocol(e) => {
                f.write_str("protocol error: ")?;
                return e.fmt(f);
            }
            Transport::NoServer => "no server is serving",
            Transport::ShuttingDown => "the server is shutting down",
            Transport::NoFreePort => "no port became free before the deadline",
            Transport::Deadline => {
                "the call's deadline passed before its reply came (whether the server ran it is unknown)"
            }
            Transport::PortLost { port } => {
                return write_parts(
                    f,
                    &[
                        Text("port "),
                        Dec(port as u64),
                        Text(" was taken from this client during the call; its reply was discarded"),
                    ],
                )
            }
            Transport::NotServed { service } => {
                return write_parts(
                    f,
                    &[Text("service `"), Text(service), Text("` is not served there")],
                )
            }
            Transport::Other(what) => what,
        };
        f.write_str(text)
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for Error<E> {}
impl core::error::Error for Status {}
impl core::error::Error for Transport {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::ToString;

    /// The texts are written piece by piece: the same as the `write!` of each (kept here as the
    /// reference), for numbers at both ends, and with no formatter options taken.
    #[test]
    fn error_texts_are_what_write_makes_of_them() {
        for n in [0u64, 1, 9, 10, 0xabc, u32::MAX as u64, u64::MAX] {
            let n32 = n as u32;
            let cases: [(Error, std::string::String); 9] = [
                (
                    Status::UnknownOpcode { opcode: n32 }.into(),
                    format!("the server does not know opcode {n32:#010x}"),
                ),
                (
                    Status::ReplyTooLarge { len: n, limit: !n }.into(),
                    format!(
                        "the reply of {n} bytes is longer than the {} this client takes",
                        !n
                    ),
                ),
                (
                    Status::Mismatch {
                        client: n,
                        server: n / 3,
                    }
                    .into(),
                    format!(
                        "schema mismatch: client fingerprint {n:#018x}, server {:#018x}",
                        n / 3
                    ),
                ),
                (
                    Status::Other(n32).into(),
                    format!("the server replied with unknown status {n32}"),
                ),
                (
                    Transport::PortLost { port: n32 }.into(),
                    format!(
                        "port {n32} was taken from this client during the call; its reply was \
                         discarded"
                    ),
                ),
                (
                    crate::Error::TooLarge {
                        lane: n32,
                        len: n,
                        limit: n / 7,
                    }
                    .into(),
                    format!(
                        "protocol error: lane {n32} announced a {n}-byte stream, more than the {} \
                         bytes accepted",
                        n / 7
                    ),
                ),
                (
                    crate::Error::Sink { lane: n32 }.into(),
                    format!("protocol error: the receive buffer of lane {n32} is the wrong size"),
                ),
                (
                    crate::Error::LaneFailed { lane: n32 }.into(),
                    format!("protocol error: lane {n32} of this group failed the operation"),
                ),
                (
                    Transport::NotServed { service: "a.b" }.into(),
                    "service `a.b` is not served there".to_string(),
                ),
            ];
            for (e, want) in cases {
                assert_eq!(e.to_string(), want);
                // A width given to the error is not applied to its numbers (nor to the text).
                assert_eq!(format!("{e:>300}"), want);
            }
        }
        let e: Error<&str> = Error::App("full");
        assert_eq!(e.to_string(), "the call failed: full");
        let e: Error = Status::Rejected.into();
        assert_eq!(
            format!("{e:>60}"),
            "the server refused a streamed argument as too long"
        );
    }
}
