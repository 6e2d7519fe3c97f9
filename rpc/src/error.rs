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
        use Part::{Dec, Text};
        match *self {
            Error::Stalled => f.write_str("the other side did not answer in time"),
            Error::TooLarge { lane, len, limit } => write_parts(
                f,
                &[
                    Text("lane "),
                    Dec(lane as u64),
                    Text(" announced a "),
                    Dec(len),
                    Text("-byte stream, more than the "),
                    Dec(limit),
                    Text(" bytes accepted"),
                ],
            ),
            Error::Rejected => f.write_str("the receiver refused the stream as too large"),
            Error::Sink { lane } => write_parts(
                f,
                &[
                    Text("the receive buffer of lane "),
                    Dec(lane as u64),
                    Text(" is the wrong size"),
                ],
            ),
            Error::LaneFailed { lane } => write_parts(
                f,
                &[
                    Text("lane "),
                    Dec(lane as u64),
                    Text(" of this group failed the operation"),
                ],
            ),
        }
    }
}

/// A piece of an error's text: words, or a number written as `{n}` or as `{n:#0W$x}` writes it
/// (`0x`, then at least `W - 2` lowercase hex digits).
#[derive(Clone, Copy)]
pub(crate) enum Part<'s> {
    /// Words, as they are.
    Text(&'s str),
    /// A number in decimal.
    Dec(u64),
    /// A number in hex after `0x`, zero-padded to this many digits.
    Hex(u64, usize),
}

/// Writes `parts` one after another with `write_str` alone: the errors' texts are pieces of
/// words and numbers, and writing them so takes no `core::fmt` machinery (a GPU program that
/// prints an error carries far less code than with `write!`). As with `write!` into a
/// formatter, the caller's width, fill and flags do not apply. Not inlined: one body serves
/// every text (inlined, its loops would be unrolled for each).
#[inline(never)]
pub(crate) fn write_parts(
    f: &mut core::fmt::Formatter<'_>,
    parts: &[Part<'_>],
) -> core::fmt::Result {
    for part in parts {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let (mut n, radix, width) = match *part {
            Part::Text(t) => {
                f.write_str(t)?;
                continue;
            }
            Part::Dec(n) => (n, 10, 1),
            Part::Hex(n, width) => {
                f.write_str("0x")?;
                (n, 16, width.min(16))
            }
        };
        while n != 0 || digits.len() - at < width {
            at -= 1;
            digits[at] = b"0123456789abcdef"[(n % radix) as usize];
            n /= radix;
        }
        // SAFETY: every byte from `at` on was written above as an ASCII digit: UTF-8.
        f.write_str(unsafe { core::str::from_utf8_unchecked(&digits[at..]) })?;
    }
    Ok(())
}

impl core::error::Error for Error {}
