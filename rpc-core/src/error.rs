//! Errors a protocol operation can report.

use crate::wait::Stalled;

/// Why a protocol operation failed. None of these loses the port: after an error the port may
/// still be closed normally, and the next caller finds it in a consistent state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The other side did not hand the packet back before the wait policy gave up: it is dead,
    /// stuck, or slower than the policy allows.
    Stalled,
    /// A lane announced a stream longer than the receiver accepts; the stream was refused and the
    /// sender told so.
    TooLarge {
        /// The lane whose stream was too long.
        lane: u32,
        /// The length it announced.
        len: u64,
        /// The most the receiver accepts.
        limit: u64,
    },
    /// The receiver refused the stream this side was sending (it was longer than it accepts).
    Rejected,
    /// The receiver's buffer for a lane is not the length the sender announced.
    Sink {
        /// The lane whose buffer did not fit.
        lane: u32,
    },
    /// Another lane of this group failed the operation (the stream is refused as a whole).
    LaneFailed {
        /// The lowest lane that failed.
        lane: u32,
    },
}

impl From<Stalled> for Error {
    fn from(_: Stalled) -> Self {
        Error::Stalled
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Stalled => f.write_str("the other side did not answer in time"),
            Error::TooLarge { lane, len, limit } => write!(
                f,
                "lane {lane} announced a {len}-byte stream, more than the {limit} bytes accepted"
            ),
            Error::Rejected => f.write_str("the receiver refused the stream as too large"),
            Error::Sink { lane } => {
                write!(f, "the receive buffer of lane {lane} is the wrong size")
            }
            Error::LaneFailed { lane } => {
                write!(f, "lane {lane} of this group failed the operation")
            }
        }
    }
}

impl core::error::Error for Error {}
