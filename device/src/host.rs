//! What a GPU program expects from a C library, forwarded to the host: the [`Libc`] service and
//! its device-side API.
//!
//! The service is one enum with `#[derive(RpcOpcodes)]`, shared by both sides: the device calls
//! through the generated [`LibcClient`] (wrapped here in functions that take care of chunking,
//! lane convergence and error decoding), and the host implements the generated [`LibcServer`]
//! (`transport_gpu::host`). Every function here is generic over the client's lanes, mailbox and
//! wait policy, so the same code runs on a GPU warp, a simulated warp and a host thread (against
//! the shared-memory transport).
//!
//! | call | request, per lane | reply, per lane |
//! |---|---|---|
//! | [`Libc::Print`], [`Libc::EPrint`] | the bytes (≤ [`PRINT_CHUNK`]), streamed | none: one-way |
//! | [`Libc::OpenFile`] | mode (`u32` LE, [`mode`]) ++ path (≤ [`PATH_LIMIT`]) | [`Reply`]: the handle |
//! | [`Libc::Read`], [`Libc::Gets`] | [`ReadRequest`] | [`DATA_HEADER`] bytes of error code ++ data |
//! | [`Libc::Write`] | handle (`u64` LE) ++ bytes (≤ [`IO_CHUNK`]) | [`Reply`]: bytes written |
//! | [`Libc::Seek`] | [`SeekRequest`] | [`Reply`]: the new position |
//! | [`Libc::Tell`], [`Libc::Flush`], [`Libc::Close`] | the handle | [`Reply`] |
//! | [`Libc::Remove`] | the path (text) | [`Reply`] |
//! | [`Libc::Rename`] | from ++ `\0` ++ to | [`Reply`] |
//! | [`Libc::Exit`] | the code | [`Reply`] (the loader ends the process instead) |
//! | [`Libc::Abort`] | nothing | [`Reply`] (the loader aborts instead) |
//! | [`Libc::Malloc`], [`Libc::Free`] | size / address | [`Reply`]: the address |
//! | [`Libc::Clock`] | nothing | [`ClockReading`] |
//! | [`Libc::System`] | the command (text) | [`Reply`]: its exit status; [`HostError::Disabled`] unless the host turned it on |
//!
//! **Handles** are opaque: the host hands out ids (index and generation) and checks every id it
//! is given; [`STDOUT`] and [`STDERR`] name its output streams. **Addresses** from
//! [`malloc`] point into memory the host reserved before launch; the host hands out offsets into
//! it and never dereferences anything the device sends. Both belong to the client that got them
//! (a GPU program; over shared memory, a client process): another client's handle is
//! [`HostError::BadHandle`], another client's address [`HostError::BadPointer`]. Only regular
//! files open ([`HostError::NotAFile`]), and each client has a quota of open files
//! ([`HostError::TooManyOpen`]).
//!
//! **Print** ([`print!`](crate::print), [`println!`](crate::println),
//! [`eprint!`](crate::eprint), [`eprintln!`](crate::eprintln), through a [`Printer`]) formats into a
//! buffer of [`PRINT_CHUNK`] bytes per lane on the stack and sends it one-way: one send for all
//! lanes of a warp, no wait for a reply. The host writes each lane's bytes whole, in lane order.
//! Longer output is sent in several messages, cut after the last newline that fits, so lines up to
//! [`PRINT_CHUNK`] bytes always stay whole; a longer line is split (in order) across messages.
//! The text is formatted once per message (no heap on the device). One lane's messages stay in
//! order: a [`Printer`] sends the next only once the host has taken the previous one.
//!
//! **Convergence.** Every function is called by all active lanes together (as on a GPU, and as a
//! simulated warp requires); loops over chunks go on while any lane has more (a ballot), lanes
//! that are done take part with an empty request, and a lane whose request is invalid sends one
//! the host refuses cheaply, so no lane ever leaves the others waiting.

use core::fmt;

use rpc_core::service::CallError;
use rpc_core::{Lanes, Mailbox, Process, RpcOpcodes, Wait};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The most bytes one lane prints in one message (the `limit` of print calls).
pub const PRINT_CHUNK: usize = 512;
/// The most bytes one lane reads or writes in one call.
pub const IO_CHUNK: usize = 512;
/// The longest path the host accepts, in bytes.
pub const PATH_LIMIT: usize = 512;
/// The longest command [`system`] sends, in bytes.
pub const SYSTEM_LIMIT: usize = 4096;
/// The bytes before the data in a [`Libc::Read`] or [`Libc::Gets`] reply: the error code (`u32`
/// LE, [`code`]).
pub const DATA_HEADER: usize = 4;
/// The bytes before the data in a [`Libc::Write`] request: the handle (`u64` LE).
pub const HANDLE_HEADER: usize = 8;
/// The bytes before the path in a [`Libc::OpenFile`] request: the mode (`u32` LE).
pub const MODE_HEADER: usize = 4;

// The derive's `limit` takes a literal: keep each equal to its constant.
const _: () = assert!(PRINT_CHUNK == 512);
const _: () = assert!(MODE_HEADER + PATH_LIMIT == 516);
const _: () = assert!(HANDLE_HEADER + IO_CHUNK == 520);
const _: () = assert!(2 * PATH_LIMIT + 1 == 1025);
const _: () = assert!(SYSTEM_LIMIT == 4096);

/// The host's standard output, as a handle.
pub const STDOUT: Handle = Handle(1);
/// The host's standard error, as a handle.
pub const STDERR: Handle = Handle(2);

/// An open file on the host: an opaque id the host validates on every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle(pub u64);

/// Open modes ([`Libc::OpenFile`]'s first word), combined with `|`.
pub mod mode {
    /// Open for reading.
    pub const READ: u32 = 1;
    /// Open for writing.
    pub const WRITE: u32 = 2;
    /// Every write goes to the end.
    pub const APPEND: u32 = 4;
    /// Create the file if it does not exist.
    pub const CREATE: u32 = 8;
    /// Empty the file on open.
    pub const TRUNCATE: u32 = 16;
    /// Fail if the file exists (with [`CREATE`]).
    pub const EXCLUSIVE: u32 = 32;
    /// Every bit the host knows; others are refused.
    pub const ALL: u32 = 63;

    /// The mode of a C `fopen` mode string (`"r"`, `"w"`, `"a"`, `"r+"`, `"w+"`, `"a+"`, any of
    /// them with `b`, `"wx"`...), or `None`.
    pub fn from_c(s: &str) -> Option<u32> {
        let b = s.as_bytes();
        let plus = b.contains(&b'+');
        let x = b.contains(&b'x');
        if b.iter()
            .any(|c| !matches!(c, b'r' | b'w' | b'a' | b'+' | b'b' | b'x'))
        {
            return None;
        }
        let m = match b.first()? {
            b'r' if !x => READ | if plus { WRITE } else { 0 },
            b'w' => WRITE | CREATE | TRUNCATE | if plus { READ } else { 0 },
            b'a' if !x => WRITE | CREATE | APPEND | if plus { READ } else { 0 },
            _ => return None,
        };
        Some(m | if x { EXCLUSIVE } else { 0 })
    }
}

/// Error codes in [`Reply::error`] and the data header.
pub mod code {
    /// No error.
    pub const OK: u32 = 0;
    /// No such file or directory.
    pub const NOT_FOUND: u32 = 1;
    /// Permission denied.
    pub const DENIED: u32 = 2;
    /// The handle is not one the host handed out, or was closed.
    pub const BAD_HANDLE: u32 = 3;
    /// A path or request too long.
    pub const TOO_LONG: u32 = 4;
    /// An argument the host refuses (bad mode, bad path, seek before the start...).
    pub const INVALID: u32 = 5;
    /// Too many files open: the caller's quota of open files, or the host's whole table, is full.
    /// The reply's `value` is the limit reached (the count of files that limit allows).
    pub const TOO_MANY_OPEN: u32 = 6;
    /// The reserved heap has no block that large.
    pub const OUT_OF_MEMORY: u32 = 7;
    /// `free` of an address the host did not hand out (or already freed).
    pub const BAD_POINTER: u32 = 8;
    /// The call is turned off on this host (`system`).
    pub const DISABLED: u32 = 9;
    /// The file exists.
    pub const EXISTS: u32 = 10;
    /// Another I/O error on the host.
    pub const IO: u32 = 11;
    /// The path names something other than a regular file (a FIFO, a device, a socket, a
    /// directory): the host opens regular files only, so that no call waits on another party.
    pub const NOT_A_FILE: u32 = 12;
}

/// The fixed reply of most calls: a value and an error code ([`code`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
#[repr(C)]
pub struct Reply {
    /// The result (a handle, a count, a position, an address).
    pub value: u64,
    /// [`code::OK`] or why the call failed.
    pub error: u32,
    /// Zero.
    pub pad: u32,
}

impl Reply {
    /// A successful reply carrying `value`.
    pub const fn ok(value: u64) -> Reply {
        Reply {
            value,
            error: code::OK,
            pad: 0,
        }
    }

    /// A failed reply.
    pub const fn err(error: u32) -> Reply {
        Reply {
            value: 0,
            error,
            pad: 0,
        }
    }

    /// The value, or the error decoded.
    pub fn into_result(self) -> Result<u64, HostError> {
        match self.error {
            code::OK => Ok(self.value),
            e => Err(HostError::from_code(e)),
        }
    }
}

/// [`Libc::Read`] and [`Libc::Gets`]: the handle and the most bytes wanted (the host serves at
/// most [`IO_CHUNK`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ReadRequest {
    /// The file.
    pub handle: u64,
    /// The most bytes wanted.
    pub len: u64,
}

/// [`Libc::Seek`]'s request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct SeekRequest {
    /// The file.
    pub handle: u64,
    /// The offset from `whence`.
    pub offset: i64,
    /// [`SEEK_SET`], [`SEEK_CUR`] or [`SEEK_END`].
    pub whence: u32,
    /// Zero.
    pub pad: u32,
}

/// Seek from the start.
pub const SEEK_SET: u32 = 0;
/// Seek from the current position.
pub const SEEK_CUR: u32 = 1;
/// Seek from the end.
pub const SEEK_END: u32 = 2;

/// [`Libc::Clock`]'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct ClockReading {
    /// Nanoseconds since the Unix epoch (the host's wall clock).
    pub realtime_ns: u64,
    /// Nanoseconds since the host started serving (monotonic).
    pub monotonic_ns: u64,
}

/// The host services, one variant per call (see the module docs for what crosses).
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.libc")]
pub enum Libc {
    /// Writes the bytes to the host's standard output.
    #[rpc(request = [u8], oneway, limit = 512)]
    Print,
    /// Writes the bytes to the host's standard error.
    #[rpc(request = [u8], oneway, limit = 512)]
    EPrint,
    /// Opens a file: mode ++ path → handle.
    #[rpc(request = [u8], response = Reply, limit = 516)]
    OpenFile,
    /// Reads up to `len` bytes (at most [`IO_CHUNK`]).
    #[rpc(request = ReadRequest, response = [u8])]
    Read,
    /// Reads up to `len` bytes (at most [`IO_CHUNK`]), stopping after a newline.
    #[rpc(request = ReadRequest, response = [u8])]
    Gets,
    /// Writes: handle ++ bytes → bytes written.
    #[rpc(request = [u8], response = Reply, limit = 520)]
    Write,
    /// Moves the position → the new position.
    #[rpc(request = SeekRequest, response = Reply)]
    Seek,
    /// The position.
    #[rpc(request = u64, response = Reply)]
    Tell,
    /// Flushes the file's host buffers.
    #[rpc(request = u64, response = Reply)]
    Flush,
    /// Closes the file; its handle is never valid again.
    #[rpc(request = u64, response = Reply)]
    Close,
    /// Removes a file.
    #[rpc(request = str, response = Reply, limit = 512)]
    Remove,
    /// Renames a file: from ++ `\0` ++ to.
    #[rpc(request = [u8], response = Reply, limit = 1025)]
    Rename,
    /// Ends the program with the code.
    #[rpc(request = i32, response = Reply)]
    Exit,
    /// Ends the program abnormally.
    #[rpc(request = (), response = Reply)]
    Abort,
    /// Allocates from the memory reserved before launch → the address.
    #[rpc(request = u64, response = Reply)]
    Malloc,
    /// Frees an address [`Libc::Malloc`] returned.
    #[rpc(request = u64, response = Reply)]
    Free,
    /// The host's clocks.
    #[rpc(request = (), response = ClockReading)]
    Clock,
    /// Runs a shell command on the host, if the host turned `system` on.
    #[rpc(request = str, response = Reply, limit = 4096)]
    System,
}

impl Libc {
    /// How many calls the service has.
    pub const CALLS: usize = <Libc as rpc_core::service::Service>::OPCODES.len();
}

/// Why a host service failed, on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostError {
    /// The call itself failed (the host stalled, refused the request as too long...).
    Call(CallError),
    /// No such file.
    NotFound,
    /// Permission denied.
    Denied,
    /// The handle is not open.
    BadHandle,
    /// A path or request over the host's limits.
    TooLong,
    /// An argument the host refused.
    Invalid,
    /// Too many files open on the host (this client's quota or the host's table; the reply's
    /// value, dropped here, says the limit).
    TooManyOpen,
    /// The reserved heap is exhausted.
    OutOfMemory,
    /// `free` of an address not handed out.
    BadPointer,
    /// The call is turned off on the host.
    Disabled,
    /// The file exists.
    Exists,
    /// Another I/O error on the host.
    Io,
    /// Not a regular file (the host opens nothing else).
    NotAFile,
    /// An error code this side does not know.
    Unknown(u32),
}

impl HostError {
    /// The error for a non-zero code.
    pub fn from_code(c: u32) -> HostError {
        match c {
            code::NOT_FOUND => HostError::NotFound,
            code::DENIED => HostError::Denied,
            code::BAD_HANDLE => HostError::BadHandle,
            code::TOO_LONG => HostError::TooLong,
            code::INVALID => HostError::Invalid,
            code::TOO_MANY_OPEN => HostError::TooManyOpen,
            code::OUT_OF_MEMORY => HostError::OutOfMemory,
            code::BAD_POINTER => HostError::BadPointer,
            code::DISABLED => HostError::Disabled,
            code::EXISTS => HostError::Exists,
            code::IO => HostError::Io,
            code::NOT_A_FILE => HostError::NotAFile,
            c => HostError::Unknown(c),
        }
    }
}

impl From<CallError> for HostError {
    fn from(e: CallError) -> Self {
        HostError::Call(e)
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Call(e) => write!(f, "host call failed: {e}"),
            HostError::NotFound => f.write_str("no such file"),
            HostError::Denied => f.write_str("permission denied"),
            HostError::BadHandle => f.write_str("not an open file handle"),
            HostError::TooLong => f.write_str("too long"),
            HostError::Invalid => f.write_str("invalid argument"),
            HostError::TooManyOpen => f.write_str("too many open files"),
            HostError::OutOfMemory => f.write_str("out of reserved memory"),
            HostError::BadPointer => f.write_str("not an address malloc returned"),
            HostError::Disabled => f.write_str("turned off on this host"),
            HostError::Exists => f.write_str("the file exists"),
            HostError::Io => f.write_str("I/O error on the host"),
            HostError::NotAFile => f.write_str("not a regular file"),
            HostError::Unknown(c) => write!(f, "unknown host error {c}"),
        }
    }
}

/// A client process as the functions here take it: any lanes, mailbox and wait policy.
pub type HostClient<'a, L, M, W> = Process<'a, rpc_core::Client, L, M, W>;

/// Whether `pred` holds in any active lane (the same answer in every lane).
#[inline(always)]
fn any<L: Lanes, M: Mailbox, W: Wait>(client: &HostClient<'_, L, M, W>, pred: bool) -> bool {
    let lanes = client.lanes();
    lanes.ballot(lanes.active_mask(), pred) != 0
}

/// Where formatted text goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The host's standard output ([`Libc::Print`]).
    Stdout,
    /// The host's standard error ([`Libc::EPrint`]).
    Stderr,
    /// An open file ([`Libc::Write`]).
    File(Handle),
}

/// Captures bytes `skip..skip + PRINT_CHUNK` of the formatted text (after [`HANDLE_HEADER`]
/// bytes kept for a handle) and counts all of them.
struct Window {
    buf: [u8; HANDLE_HEADER + PRINT_CHUNK],
    len: usize,
    skip: usize,
    total: usize,
}

impl Window {
    fn push(&mut self, bytes: &[u8]) {
        let start = self.total;
        self.total += bytes.len();
        // The part of `start..total` inside `skip..skip + PRINT_CHUNK`.
        let from = self.skip.max(start);
        let to = (self.skip + PRINT_CHUNK).min(self.total);
        if from < to {
            let src = &bytes[from - start..to - start];
            let at = HANDLE_HEADER + (from - self.skip);
            self.buf[at..at + src.len()].copy_from_slice(src);
            self.len = self.len.max(at + src.len() - HANDLE_HEADER);
        }
    }
}

impl fmt::Write for Window {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// A client's printer: formats text and sends it one-way, keeping one lane's messages in order.
///
/// A one-way message returns before the host has read it, so the next message could take
/// another port and be served first. The printer remembers the port of its last message and,
/// before sending the next, waits until the host has handed that port back (it has then written
/// the message): free when the host keeps up, and never a wait for a reply. Make one per warp
/// (or thread) and print through it: [`print!`](crate::print) and friends take a `&Printer`.
pub struct Printer<'c, 'a, L: Lanes, M: Mailbox, W: Wait> {
    client: &'c HostClient<'a, L, M, W>,
    last: core::cell::Cell<Option<u32>>,
}

impl<'c, 'a, L: Lanes, M: Mailbox, W: Wait> Printer<'c, 'a, L, M, W> {
    /// A printer over `client`.
    pub fn new(client: &'c HostClient<'a, L, M, W>) -> Self {
        Printer {
            client,
            last: core::cell::Cell::new(None),
        }
    }

    /// The client.
    pub fn client(&self) -> &'c HostClient<'a, L, M, W> {
        self.client
    }

    /// Sends one print message (every active lane together): waits until the previous one was
    /// taken, then streams `bytes` one-way.
    fn send(&self, opcode: u32, bytes: &[u8]) -> Result<(), HostError> {
        let stalled = HostError::Call(CallError::Port(rpc_core::Error::Stalled));
        if let Some(last) = self.last.get() {
            let mut polls = 0u32;
            while !self.client.region().client_owns(last) {
                self.client
                    .wait_policy()
                    .pause(polls)
                    .map_err(|_| stalled)?;
                polls = polls.saturating_add(1);
            }
        }
        let mut port = self.client.open(opcode).map_err(CallError::Port)?;
        self.last.set(Some(port.index()));
        let result = match port.send_n(|_| bytes) {
            Ok(()) => Ok(()),
            // A refusal hands the packet back with the server's status.
            Err(rpc_core::Error::Rejected) => CallError::from_status(port.status(), opcode)
                .map_err(HostError::Call)
                .and(Err(HostError::Call(CallError::Rejected))),
            Err(e) => Err(HostError::Call(CallError::Port(e))),
        };
        port.close();
        result
    }

    /// Formats `args` (plus a newline if `newline`) to `target`; returns the bytes this lane
    /// sent.
    ///
    /// Every active lane calls it together. To stdout/stderr each message is one-way
    /// ([`Libc::Print`], [`Libc::EPrint`]); to a file each is a [`Libc::Write`] whose error ends
    /// the call in every lane that got it.
    pub fn print_fmt(
        &self,
        target: Target,
        args: fmt::Arguments<'_>,
        newline: bool,
    ) -> Result<usize, HostError> {
        let client = self.client;
        let mut skip = 0usize;
        let mut failed = None;
        loop {
            let mut w = Window {
                buf: [0; HANDLE_HEADER + PRINT_CHUNK],
                len: 0,
                skip,
                total: 0,
            };
            if failed.is_none() {
                // `Window` never fails; a `Display` impl that does just ends the text there.
                let _ = fmt::write(&mut w, args);
                if newline {
                    w.push(b"\n");
                }
            }
            let more = w.total > skip + PRINT_CHUNK;
            // Cut after the last newline that fits, so lines that fit a message stay whole.
            let mut cut = w.len;
            if more {
                let text = &w.buf[HANDLE_HEADER..HANDLE_HEADER + w.len];
                if let Some(nl) = text.iter().rposition(|&b| b == b'\n') {
                    cut = nl + 1;
                }
            }
            if !any(client, cut > 0) {
                break;
            }
            let text = &w.buf[HANDLE_HEADER..HANDLE_HEADER + cut];
            match target {
                Target::Stdout => self.send(Libc::Print.opcode(), text)?,
                Target::Stderr => self.send(Libc::EPrint.opcode(), text)?,
                Target::File(h) => {
                    w.buf[..HANDLE_HEADER].copy_from_slice(&h.0.to_le_bytes());
                    let r = client.write(&w.buf[..HANDLE_HEADER + cut])?;
                    match r.into_result() {
                        Err(e) if cut > 0 => failed = failed.or(Some(e)),
                        _ => {}
                    }
                }
            }
            skip += cut;
            if !any(client, more && failed.is_none()) {
                break;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(skip),
        }
    }
}

/// Prints to the host's standard output: `print!(printer, "x = {}", x)` with a
/// [`Printer`](crate::host::Printer). Every active lane calls it together; evaluates to
/// `Result<usize, HostError>` (the bytes this lane printed).
#[macro_export]
macro_rules! print {
    ($client:expr, $($arg:tt)*) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stdout, ::core::format_args!($($arg)*), false)
    };
}

/// [`print!`] with a newline.
#[macro_export]
macro_rules! println {
    ($client:expr) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stdout, ::core::format_args!(""), true)
    };
    ($client:expr, $($arg:tt)*) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stdout, ::core::format_args!($($arg)*), true)
    };
}

/// [`print!`] to the host's standard error.
#[macro_export]
macro_rules! eprint {
    ($client:expr, $($arg:tt)*) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stderr, ::core::format_args!($($arg)*), false)
    };
}

/// [`println!`] to the host's standard error.
#[macro_export]
macro_rules! eprintln {
    ($client:expr) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stderr, ::core::format_args!(""), true)
    };
    ($client:expr, $($arg:tt)*) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::Stderr, ::core::format_args!($($arg)*), true)
    };
}

/// Formatted output to an open file: `fprint!(printer, handle, "x = {}", x)`.
#[macro_export]
macro_rules! fprint {
    ($client:expr, $handle:expr, $($arg:tt)*) => {
        $crate::host::Printer::print_fmt($client, $crate::host::Target::File($handle), ::core::format_args!($($arg)*), false)
    };
}

/// Sends `bytes` (at most `cap` of them, or an empty request the host refuses when `bytes` is
/// longer) after a `head`er, through `call`; a lane over the limit gets [`HostError::TooLong`]
/// after taking part.
fn with_header<const N: usize>(
    head: &[u8],
    bytes: &[u8],
    call: impl FnOnce(&[u8]) -> Result<Reply, CallError>,
) -> Result<u64, HostError> {
    let mut buf = [0u8; N];
    let fits = head.len() + bytes.len() <= N;
    let len = if fits {
        buf[..head.len()].copy_from_slice(head);
        buf[head.len()..head.len() + bytes.len()].copy_from_slice(bytes);
        head.len() + bytes.len()
    } else {
        0
    };
    let reply = call(&buf[..len])?;
    if !fits {
        return Err(HostError::TooLong);
    }
    reply.into_result()
}

/// Opens `path` with `mode` (bits of [`mode`]; [`mode::from_c`] reads C's strings). Only a
/// regular file opens ([`HostError::NotAFile`] otherwise).
pub fn open<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    path: &str,
    mode: u32,
) -> Result<Handle, HostError> {
    with_header::<{ MODE_HEADER + PATH_LIMIT }>(&mode.to_le_bytes(), path.as_bytes(), |r| {
        client.open_file(r)
    })
    .map(Handle)
}

/// Writes `data` to `file` (in calls of at most [`IO_CHUNK`] bytes); returns the bytes written.
pub fn write<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    data: &[u8],
) -> Result<usize, HostError> {
    let mut done = 0usize;
    let mut failed = None;
    loop {
        let n = if failed.is_some() {
            0
        } else {
            (data.len() - done).min(IO_CHUNK)
        };
        let head = file.0.to_le_bytes();
        match with_header::<{ HANDLE_HEADER + IO_CHUNK }>(&head, &data[done..done + n], |r| {
            client.write(r)
        }) {
            Ok(w) => done += w as usize,
            Err(HostError::Call(e)) => return Err(HostError::Call(e)),
            Err(e) => failed = failed.or(Some(e)),
        }
        if !any(client, failed.is_none() && done < data.len()) {
            break;
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// Reads into `buf` until it is full or the file ends (in calls of at most [`IO_CHUNK`] bytes);
/// returns the bytes read (0 at the end of the file).
pub fn read<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    buf: &mut [u8],
) -> Result<usize, HostError> {
    read_loop(client, file, buf, false)
}

/// Reads one line into `buf` (C's `fgets` without the terminating zero): stops after a newline,
/// at the end of the file, or when `buf` is full. Returns the bytes read (0 at the end of the file).
pub fn gets<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    buf: &mut [u8],
) -> Result<usize, HostError> {
    read_loop(client, file, buf, true)
}

fn read_loop<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    buf: &mut [u8],
    line: bool,
) -> Result<usize, HostError> {
    let mut done = 0usize;
    let mut finished = buf.is_empty();
    let mut failed = None;
    loop {
        let want = if finished {
            0
        } else {
            (buf.len() - done).min(IO_CHUNK)
        };
        let request = ReadRequest {
            handle: file.0,
            len: want as u64,
        };
        let mut chunk = [0u8; DATA_HEADER + IO_CHUNK];
        let got = if line {
            client.gets(request, &mut chunk)
        } else {
            client.read(request, &mut chunk)
        }?;
        if !finished {
            match decode_data(got) {
                Err(e) => {
                    failed = Some(e);
                    finished = true;
                }
                Ok(data) => {
                    let n = data.len().min(buf.len() - done);
                    buf[done..done + n].copy_from_slice(&data[..n]);
                    done += n;
                    let ended = line && data.last() == Some(&b'\n');
                    finished = n == 0 || ended || done == buf.len();
                }
            }
        }
        if !any(client, !finished) {
            break;
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// Splits a data reply into its error code and data.
fn decode_data(reply: &[u8]) -> Result<&[u8], HostError> {
    let Some((head, data)) = reply.split_first_chunk::<DATA_HEADER>() else {
        // Shorter than its header: not a reply this service sends.
        return Err(HostError::Call(CallError::BadResponse));
    };
    match u32::from_le_bytes(*head) {
        code::OK => Ok(data),
        c => Err(HostError::from_code(c)),
    }
}

/// Moves `file`'s position (`whence`: [`SEEK_SET`], [`SEEK_CUR`], [`SEEK_END`]); returns the new
/// position.
pub fn seek<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: i64,
    whence: u32,
) -> Result<u64, HostError> {
    client
        .seek(SeekRequest {
            handle: file.0,
            offset,
            whence,
            pad: 0,
        })?
        .into_result()
}

/// `file`'s position.
pub fn tell<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<u64, HostError> {
    client.tell(file.0)?.into_result()
}

/// Flushes `file` (or [`STDOUT`], [`STDERR`]) on the host.
pub fn flush<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<(), HostError> {
    client.flush(file.0)?.into_result().map(|_| ())
}

/// Closes `file`; the handle is never valid again.
pub fn close<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<(), HostError> {
    client.close(file.0)?.into_result().map(|_| ())
}

/// Removes the file at `path`.
pub fn remove<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    path: &str,
) -> Result<(), HostError> {
    let fits = path.len() <= PATH_LIMIT;
    let reply = client.remove(if fits { path } else { "" })?;
    if !fits {
        return Err(HostError::TooLong);
    }
    reply.into_result().map(|_| ())
}

/// Renames the file at `from` to `to`.
pub fn rename<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    from: &str,
    to: &str,
) -> Result<(), HostError> {
    let ok = from.len() <= PATH_LIMIT && to.len() <= PATH_LIMIT && !from.contains('\0');
    let mut buf = [0u8; 2 * PATH_LIMIT + 1];
    let len = if ok {
        buf[..from.len()].copy_from_slice(from.as_bytes());
        buf[from.len() + 1..from.len() + 1 + to.len()].copy_from_slice(to.as_bytes());
        from.len() + 1 + to.len()
    } else {
        0
    };
    let reply = client.rename(&buf[..len])?;
    if !ok {
        return Err(HostError::TooLong);
    }
    reply.into_result().map(|_| ())
}

/// Asks the host to end the program with `code` (the lowest lane's code, the first call, wins).
/// A loader ends the process and this never returns; a host that records the code answers.
pub fn exit<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    code: i32,
) -> Result<(), HostError> {
    client.exit(code)?.into_result().map(|_| ())
}

/// Asks the host to end the program abnormally (as `exit`, without a code).
pub fn abort<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
) -> Result<(), HostError> {
    client.abort()?.into_result().map(|_| ())
}

/// Allocates `size` bytes (16-byte aligned) from the memory the host reserved before launch.
pub fn malloc<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    size: u64,
) -> Result<*mut u8, HostError> {
    let address = client.malloc(size)?.into_result()?;
    Ok(address as usize as *mut u8)
}

/// Frees what [`malloc`] returned. A null pointer is ignored, as C's `free` does.
pub fn free<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    pointer: *mut u8,
) -> Result<(), HostError> {
    client
        .free(pointer as usize as u64)?
        .into_result()
        .map(|_| ())
}

/// The host's clocks.
pub fn clock<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
) -> Result<ClockReading, HostError> {
    Ok(client.clock()?)
}

/// Runs `command` in the host's shell, if the host turned `system` on
/// ([`HostError::Disabled`] otherwise); returns its exit status (-1: killed by a signal).
pub fn system<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    command: &str,
) -> Result<i32, HostError> {
    let fits = command.len() <= SYSTEM_LIMIT;
    let reply = client.system(if fits { command } else { "" })?;
    if !fits {
        return Err(HostError::TooLong);
    }
    reply.into_result().map(|v| v as u32 as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(skip: usize, parts: &[&[u8]]) -> (usize, usize, std::vec::Vec<u8>) {
        let mut w = Window {
            buf: [0; HANDLE_HEADER + PRINT_CHUNK],
            len: 0,
            skip,
            total: 0,
        };
        for p in parts {
            w.push(p);
        }
        (
            w.len,
            w.total,
            w.buf[HANDLE_HEADER..HANDLE_HEADER + w.len].to_vec(),
        )
    }

    #[test]
    fn a_window_captures_its_part_of_the_text() {
        let text: std::vec::Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        for skip in [0, 1, 511, 512, 1500, 2000] {
            // Split across pieces of awkward sizes: the window still sees exactly its bytes.
            let parts: std::vec::Vec<&[u8]> = text.chunks(37).collect();
            let (len, total, got) = window(skip, &parts);
            assert_eq!(total, 2000);
            let end = (skip + PRINT_CHUNK).min(2000);
            assert_eq!(len, end - skip);
            assert_eq!(got, &text[skip..end]);
        }
    }

    #[test]
    fn c_modes() {
        assert_eq!(mode::from_c("r"), Some(mode::READ));
        assert_eq!(
            mode::from_c("w+"),
            Some(mode::READ | mode::WRITE | mode::CREATE | mode::TRUNCATE)
        );
        assert_eq!(
            mode::from_c("ab"),
            Some(mode::WRITE | mode::CREATE | mode::APPEND)
        );
        assert_eq!(
            mode::from_c("wx"),
            Some(mode::WRITE | mode::CREATE | mode::TRUNCATE | mode::EXCLUSIVE)
        );
        assert_eq!(mode::from_c("q"), None);
        assert_eq!(mode::from_c(""), None);
        assert_eq!(mode::from_c("rx"), None);
    }
}
