//! The host services a GPU program calls, as opcodes both sides share, and their device side.
//!
//! This is the minimal set a program needs to show it runs: a no-op call (the benchmark's unit),
//! print (a stream of bytes per lane, written by the host to its standard output in lane order),
//! and exit (the program's exit code). Each call opens a port, makes one exchange and closes it.
//!
//! | opcode | request, per lane | reply, per lane |
//! |---|---|---|
//! | [`NOOP`] | `words[0] = x` | `words[0] = x + 1` |
//! | [`PRINT`] | a stream (`send_n`) of the bytes | `words[0]` = bytes written |
//! | [`EXIT`] | `words[0]` = the exit code | none: the host ends the program |
//!
//! The server sets the header status of its reply to one of the `STATUS_*` values.

use ferry_core::{Error, Lanes, Wait};

use crate::descriptor::Client;

/// A no-op: each lane's value comes back plus one.
pub const NOOP: u32 = 1;
/// Print each lane's bytes to the host's standard output.
pub const PRINT: u32 = 2;
/// End the program with the code in `words[0]` (the lowest active lane's code wins).
pub const EXIT: u32 = 3;

/// The call was served.
pub const STATUS_OK: u32 = 0;
/// The server does not know the opcode.
pub const STATUS_UNKNOWN_OPCODE: u32 = 1;
/// The server refused the request (for example a print longer than it accepts).
pub const STATUS_REFUSED: u32 = 2;

/// The most bytes one lane may print in one call; the server refuses longer streams.
pub const PRINT_LIMIT: u64 = 1 << 20;

/// Why a service call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The protocol failed (the host stopped answering, a stream was refused).
    Protocol(Error),
    /// The host served the call with a non-zero status (`STATUS_*`).
    Status(u32),
}

impl From<Error> for CallError {
    fn from(e: Error) -> Self {
        CallError::Protocol(e)
    }
}

impl core::fmt::Display for CallError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CallError::Protocol(e) => write!(f, "{e}"),
            CallError::Status(STATUS_UNKNOWN_OPCODE) => {
                f.write_str("the host does not serve this call")
            }
            CallError::Status(s) => write!(f, "the host refused the call (status {s})"),
        }
    }
}

fn status(s: u32) -> Result<(), CallError> {
    match s {
        STATUS_OK => Ok(()),
        s => Err(CallError::Status(s)),
    }
}

/// A no-op round trip: sends `value` from each lane and returns what the host replied
/// (`value + 1`). Every active lane calls it together.
#[inline(always)]
pub fn noop<L: Lanes, W: Wait>(client: &Client<'_, L, W>, value: u64) -> Result<u64, CallError> {
    let mut port = client.open(NOOP)?;
    let mut reply = 0;
    port.send_and_recv(
        |slot, _| slot.words[0] = value,
        |slot, _| reply = slot.words[0],
    )?;
    status(port.status())?;
    Ok(reply)
}

/// Prints each lane's `bytes` on the host's standard output (lanes in order, nothing added) and
/// waits until the host has written them. Returns the bytes written for this lane.
pub fn print<L: Lanes, W: Wait>(client: &Client<'_, L, W>, bytes: &[u8]) -> Result<u64, CallError> {
    let mut port = client.open(PRINT)?;
    let sent = port.send_n(|_| bytes);
    // Even a refused stream gets its answer: the receive hands the refusal back and waits for the
    // reply, so the port comes to rest with the exchange complete.
    let mut written = 0;
    port.recv(|slot, _| written = slot.words[0])?;
    sent?;
    status(port.status())?;
    Ok(written)
}

/// Asks the host to end the program with `code`. The loader exits at once; other hosts record the
/// code and answer, and then this returns.
pub fn exit<L: Lanes, W: Wait>(client: &Client<'_, L, W>, code: i32) -> Result<(), CallError> {
    let mut port = client.open(EXIT)?;
    port.send_and_recv(|slot, _| slot.words[0] = code as u32 as u64, |_, _| {})?;
    status(port.status())
}
