//! What a GPU program expects from a C library, forwarded to the host: the [`Libc`] service and
//! its device-side API.
//!
//! The service is one enum with `#[derive(RpcOpcodes)]`, defined in `ferry-libc` and shared by
//! both sides (re-exported here with its types): the device calls through the generated
//! [`LibcClient`] (`Libc::client(process)`, wrapped here in functions that take care of chunking,
//! lane convergence and local checks), and the host implements the generated [`LibcServer`]
//! (`ferry_libc_host::LibcHost`, also `ferry_gpu::LibcHost`). What each call carries is tabled in
//! `ferry_libc`'s docs. Every function here is generic over the client's lanes, mailbox and wait
//! policy, so the same code runs on a GPU warp, a simulated warp and a host thread.
//!
//! A call that can fail returns `Result<T, LibcError>`: [`Error::App`] is the host's
//! [`HostError`] (a missing file, a bad handle...), [`Error::Status`] and [`Error::Transport`]
//! are the server refusing the call or the exchange failing. [`noop`] is the benchmarks' unit: one
//! send and one receive on the port, the value back plus one.
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
//! simulated warp requires), and every lane makes the same calls in the same order: loops over
//! chunks go on while any lane has more (a ballot), lanes that are done (or failed) take part with
//! an empty request, and a lane whose request the host would refuse as a whole (a path over
//! [`PATH_LIMIT`], which would make the server reject the stream of every lane of the message)
//! sends one the host refuses cheaply instead and gets [`HostError::TooLong`], so no lane ever
//! leaves the others waiting and no lane's mistake fails another's call. The server's refusals
//! ([`Error::Status`]) and the transport's failures ([`Error::Transport`]) come per message, so
//! every lane of a call gets the same one.

use core::fmt;

use ferry_rpc::service::{Error, Status, Transport};
use ferry_rpc::{Lanes, Mailbox, Process, Wait};

// The service's definition lives in `ferry-libc`, shared with the host; device programs name it
// here.
pub use ferry_libc::{
    mode, opcode, ClockReading, Handle, HostError, Libc, LibcClient, LibcError, LibcServer,
    ENV_LIMIT, IO_CHUNK, IO_LIMIT, PATH_LIMIT, PRINT_CHUNK, SEEK_CUR, SEEK_END, SEEK_SET, STDERR,
    STDOUT, SYSTEM_LIMIT,
};

/// A client process as the functions here take it: any lanes, mailbox and wait policy.
pub type HostClient<'a, L, M, W> = Process<'a, ferry_rpc::Client, L, M, W>;

/// The most bytes one read or write call of a lane carries on `client`'s region: its share of a
/// port's bulk area where the region has them, less a slot for what crosses with the bytes (a
/// reply's tag, a request's handle and offset), up to [`IO_LIMIT`], so that a large transfer
/// takes one handoff per call; [`IO_CHUNK`] where it has none (each call's bytes then stream
/// through the packet's slot, and a longer call would only wait longer between lanes).
#[inline(always)]
pub fn io_chunk<L: Lanes, M: Mailbox, W: Wait>(client: &HostClient<'_, L, M, W>) -> usize {
    client
        .region()
        .layout()
        .bulk_share()
        .saturating_sub(ferry_rpc::layout::SLOT_BYTES)
        .clamp(IO_CHUNK, IO_LIMIT)
}

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

/// Captures bytes `skip..skip + PRINT_CHUNK` of the formatted text and counts all of them.
struct Window {
    buf: [u8; PRINT_CHUNK],
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
            let at = from - self.skip;
            self.buf[at..at + src.len()].copy_from_slice(src);
            self.len = self.len.max(at + src.len());
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
///
/// To know that port, the printer sends [`Libc::Print`] and [`Libc::EPrint`] itself rather than
/// through the generated client, which does not say which port a call took: the same message
/// (the opcode, the text as the call's one stream, no fixed arguments), on a port it opened.
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

    /// Formats `args` (plus a newline if `newline`) to `target`; returns the bytes this lane
    /// sent.
    ///
    /// Every active lane calls it together. To stdout/stderr each message is one-way
    /// ([`Libc::Print`], [`Libc::EPrint`]); to a file each is a [`Libc::Write`] whose error ends
    /// the call in every lane that got it.
    #[inline(always)]
    pub fn print_fmt(
        &self,
        target: Target,
        args: fmt::Arguments<'_>,
        newline: bool,
    ) -> Result<usize, LibcError> {
        // One function for every print of a program, given a stand-in for the client (see
        // `Process::with_stand_in`): the client's own handle stays out of its reach.
        self.client
            .with_stand_in(|client| print_fmt(client, &self.last, target, args, newline))
    }
}

/// [`Printer::print_fmt`] on `client`, the printer's last port in `last`. Not inlined on a GPU:
/// a program's prints share it.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn print_fmt<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    last: &core::cell::Cell<Option<u32>>,
    target: Target,
    args: fmt::Arguments<'_>,
    newline: bool,
) -> Result<usize, LibcError> {
    let mut skip = 0usize;
    let mut failed = None;
    loop {
        let mut w = Window {
            buf: [0; PRINT_CHUNK],
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
            if let Some(nl) = w.buf[..w.len].iter().rposition(|&b| b == b'\n') {
                cut = nl + 1;
            }
        }
        if !any(client, cut > 0) {
            break;
        }
        let text = &w.buf[..cut];
        match target {
            Target::Stdout => print_send(client, last, opcode::PRINT, text)?,
            Target::Stderr => print_send(client, last, opcode::E_PRINT, text)?,
            Target::File(h) => match Libc::client(client).write(h, text) {
                Err(e) if cut > 0 => failed = failed.or(Some(e)),
                _ => {}
            },
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

/// Sends one print message (every active lane together): waits until the previous one, sent on
/// port `last`, was taken, then streams `bytes` one-way.
fn print_send<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    last: &core::cell::Cell<Option<u32>>,
    opcode: u32,
    bytes: &[u8],
) -> Result<(), LibcError> {
    let stalled = Error::Transport(Transport::Protocol(ferry_rpc::Error::Stalled));
    if let Some(last) = last.get() {
        let mut polls = 0u32;
        while !client.region().client_owns(last) {
            client.wait_policy().pause(polls).map_err(|_| stalled)?;
            polls = polls.saturating_add(1);
        }
    }
    let mut port = ferry_rpc::__private::open_shared(client, opcode)?;
    // (`Print` and `EPrint` have no fixed arguments: the text is the whole stream.)
    port.set_request_len(0);
    last.set(Some(port.index()));
    // (The stream goes through the runtime's one function for streams, as a derived call's.)
    let result = match ferry_rpc::__private::send_stream(&mut port, &[], bytes) {
        Ok(()) => Ok(()),
        // A refusal hands the packet back with the server's status (unknown opcode), or
        // none (the stream was over the limit).
        Err(ferry_rpc::Error::Rejected) => Err(Error::Status(match port.status() {
            ferry_rpc::service::status::OK => Status::Rejected,
            s => Status::from_code(s, opcode),
        })),
        Err(e) => Err(e.into()),
    };
    ferry_rpc::__private::close_shared(port);
    result
}

/// Prints to the host's standard output: `print!(printer, "x = {}", x)` with a
/// [`Printer`](crate::host::Printer). Every active lane calls it together; evaluates to
/// `Result<usize, LibcError>` (the bytes this lane printed).
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

/// `text` if it is at most `limit` bytes, else an empty text the host refuses cheaply: a lane over
/// the limit still takes part in the call (see the module docs) without failing the others'.
fn within(text: &str, limit: usize) -> (&str, bool) {
    if text.len() <= limit {
        (text, true)
    } else {
        ("", false)
    }
}

/// A lane's result of a call it made with a stand-in request: [`HostError::TooLong`] unless the
/// whole message failed.
fn too_long<T>(reply: Result<T, LibcError>) -> Result<T, LibcError> {
    match reply {
        Err(Error::Status(s)) => Err(Error::Status(s)),
        Err(Error::Transport(t)) => Err(Error::Transport(t)),
        _ => Err(Error::App(HostError::TooLong)),
    }
}

/// A call that does nothing: sends `value` from each lane and returns what the host replied
/// (`value + 1`). The benchmarks' unit: the generated fixed call, one send and one receive on the
/// port (kept between calls where the client keeps its port).
#[inline(always)]
pub fn noop<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    value: u64,
) -> Result<u64, LibcError> {
    Libc::client(client).noop(value).map_err(Error::widen)
}

/// Opens `path` with `mode` (bits of [`mode`]; [`mode::from_c`] reads C's strings). Only a
/// regular file opens ([`HostError::NotAFile`] otherwise).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn open<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    path: &str,
    mode: u32,
) -> Result<Handle, LibcError> {
    let (sent, fits) = within(path, PATH_LIMIT);
    let reply = Libc::client(client).open(mode, sent);
    if fits {
        reply
    } else {
        too_long(reply)
    }
}

/// Writes `data` to `file` (in calls of at most [`io_chunk`] bytes); returns the bytes written.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn write<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    data: &[u8],
) -> Result<usize, LibcError> {
    write_loop(client, file, None, data)
}

/// Writes in chunks, at the file's position or, with `at`, from that offset on.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn write_loop<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    at: Option<u64>,
    data: &[u8],
) -> Result<usize, LibcError> {
    let libc = Libc::client(client);
    let chunk = io_chunk(client);
    let mut done = 0usize;
    let mut failed = None;
    loop {
        let n = if failed.is_some() {
            0
        } else {
            (data.len() - done).min(chunk)
        };
        let piece = &data[done..done + n];
        let wrote = match at {
            Some(offset) => libc.write_at(file, offset.saturating_add(done as u64), piece),
            None => libc.write(file, piece),
        };
        match wrote {
            Ok(w) => done += (w as usize).min(n),
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

/// Reads into `buf` until it is full or the file ends (in calls of at most [`io_chunk`] bytes);
/// returns the bytes read (0 at the end of the file).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn read<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    buf: &mut [u8],
) -> Result<usize, LibcError> {
    read_loop(client, file, None, buf, false)
}

/// Reads one line into `buf` (C's `fgets` without the terminating zero): stops after a newline,
/// at the end of the file, or when `buf` is full. Returns the bytes read (0 at the end of the file).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn gets<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    buf: &mut [u8],
) -> Result<usize, LibcError> {
    read_loop(client, file, None, buf, true)
}

/// Reads in chunks straight into `buf` (each reply lands in the part of `buf` still free), at
/// the file's position or, with `at`, from that offset on (not with `line`).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn read_loop<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    at: Option<u64>,
    buf: &mut [u8],
    line: bool,
) -> Result<usize, LibcError> {
    let libc = Libc::client(client);
    // A line is looked for in small reads (the host reads no further than a newline).
    let chunk = if line { IO_CHUNK } else { io_chunk(client) };
    let mut done = 0usize;
    let mut finished = buf.is_empty();
    let mut failed = None;
    loop {
        // A lane that is done asks for nothing (and has no room for anything).
        let want = if finished {
            0
        } else {
            (buf.len() - done).min(chunk)
        };
        let out = &mut buf[done..done + want];
        let got = match at {
            Some(offset) => {
                libc.read_at_into(file, offset.saturating_add(done as u64), want as u32, out)
            }
            None if line => libc.gets_into(file, want as u32, out),
            None => libc.read_into(file, want as u32, out),
        };
        if !finished {
            match got {
                Err(e) => {
                    failed = Some(e);
                    finished = true;
                }
                Ok(data) => {
                    let n = data.len();
                    let ended = line && data.last() == Some(&b'\n');
                    done += n;
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

/// Reads into `buf` from `offset` on (C's `pread`: the file's position does not move, so lanes and
/// warps may read one handle at once), until `buf` is full or the file ends; returns the bytes
/// read (0 at or past the end of the file).
///
/// Any buffer works: a lane's stack, the device's memory, anywhere. The bytes take the fastest
/// way there is to it: where every calling lane's `buf` lies in the GPU's global memory and
/// holds more than one call through the region carries ([`io_chunk`]), the host's copy engine
/// writes them straight into it, as [`read_to_device`] does (a lane whose buffer turns out not to
/// be the device's own memory, such as mapped host memory, is read again through the region);
/// otherwise they cross the region in calls of at most [`io_chunk`] bytes.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn read_at<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize, LibcError> {
    let large = buf.len() > io_chunk(client);
    if !any(client, !(large && in_global_memory(buf))) {
        let copied = read_to_device(client, file, offset, buf);
        let again = matches!(
            copied,
            Err(Error::App(
                HostError::BadAddress | HostError::NoDeviceMemory
            )) | Err(Error::Status(Status::UnknownOpcode { .. }))
        );
        if !any(client, again) {
            return copied;
        }
        // Every lane takes part in the calls; those already done ask for nothing.
        let rest: &mut [u8] = if again { buf } else { &mut [] };
        let read = read_loop(client, file, Some(offset), rest, false);
        return if again { read } else { copied };
    }
    read_loop(client, file, Some(offset), buf, false)
}

/// Whether `buf` lies in the GPU's global memory (`isspacep.global`: device memory, or host
/// memory mapped into the device; not a lane's stack or a block's shared memory). Off the GPU,
/// `false`.
#[inline(always)]
fn in_global_memory(buf: &[u8]) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let global: u32;
        // SAFETY: tests an address's state space; no memory is touched.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; isspacep.global p, {a}; selp.u32 {g}, 1, 0, p; }}",
                a = in(reg64) buf.as_ptr() as u64,
                g = out(reg32) global,
                options(nomem, nostack, pure)
            )
        };
        global != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = buf;
        false
    }
}

/// Writes `data` at `offset` (C's `pwrite`: the file's position does not move), in calls of at
/// most [`io_chunk`] bytes; returns the bytes written.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn write_at<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: u64,
    data: &[u8],
) -> Result<usize, LibcError> {
    write_loop(client, file, Some(offset), data)
}

/// `file`'s size in bytes (C's `fstat`'s `st_size`).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn size<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<u64, LibcError> {
    Libc::client(client).size(file)
}

/// Reads up to `buf.len()` bytes of `file` from `offset` on straight into `buf`, which must lie
/// in the device's own memory (a kernel's global buffer, a block `malloc` returned; not a lane's
/// stack): the host moves the bytes with the GPU's copy engine, in one call, and none of them
/// crosses the region. Returns the bytes read (fewer only at the end of the file).
/// [`HostError::BadAddress`] if `buf` is not device memory, [`HostError::NoDeviceMemory`] where
/// the host has none (device code on CPU threads between processes).
///
/// Where the host announces copies (the loader's regions: `ferry_rpc::Process::announces`),
/// the warp waits for the end of the copy on a word of its own memory, written by the copy
/// engine after the bytes, and reads the reply once: thousands of warps waiting on copies do
/// not poll host memory across the bus while the copy engine uses it.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn read_to_device<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize, LibcError> {
    let address = buf.as_mut_ptr() as u64;
    copy_call(
        client,
        opcode::READ_TO_DEVICE,
        file,
        offset,
        address,
        buf.len(),
    )
}

/// Writes `data`, which must lie in the device's own memory, to `file` at `offset`, with the
/// host's copy engine (see [`read_to_device`]); returns the bytes written.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn write_from_device<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: u64,
    data: &[u8],
) -> Result<usize, LibcError> {
    let address = data.as_ptr() as u64;
    copy_call(
        client,
        opcode::WRITE_FROM_DEVICE,
        file,
        offset,
        address,
        data.len(),
    )
}

/// [`Libc::ReadToDevice`] or [`Libc::WriteFromDevice`] of `len` bytes at `address`, announced
/// where the client can be (`ferry_rpc::service::__private::call_fixed_announced`): the request
/// is the calls' fixed arguments in order, the announce's address and value last.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
fn copy_call<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    opcode: u32,
    file: Handle,
    offset: u64,
    address: u64,
    len: usize,
) -> Result<usize, LibcError> {
    use core::mem::size_of;
    use ferry_rpc::service::__private::{call_fixed_announced, max, put, take_result};
    // As the derive lays them out: each argument's bytes after the last's.
    const DONE: usize = size_of::<Handle>() + 3 * size_of::<u64>();
    const Q: usize = DONE + size_of::<u64>() + size_of::<u32>();
    const R: usize = 1 + max(size_of::<u64>(), size_of::<HostError>());
    let mut q = [0u8; Q];
    put(&mut q, 0, &file);
    put(&mut q, size_of::<Handle>(), &offset);
    put(&mut q, size_of::<Handle>() + 8, &address);
    put(&mut q, size_of::<Handle>() + 16, &(len as u64));
    let r = call_fixed_announced::<_, Q, R>(client, opcode, &q, DONE).map_err(Error::widen)?;
    take_result::<u64, HostError>(&r).map(|n| (n as usize).min(len))
}

/// Moves `file`'s position (`whence`: [`SEEK_SET`], [`SEEK_CUR`], [`SEEK_END`]); returns the new
/// position.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn seek<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
    offset: i64,
    whence: u32,
) -> Result<u64, LibcError> {
    Libc::client(client).seek(file, offset, whence)
}

/// `file`'s position.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn tell<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<u64, LibcError> {
    Libc::client(client).tell(file)
}

/// Flushes `file` (or [`STDOUT`], [`STDERR`]) on the host.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn flush<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<(), LibcError> {
    Libc::client(client).flush(file)
}

/// Closes `file`; the handle is never valid again.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn close<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    file: Handle,
) -> Result<(), LibcError> {
    Libc::client(client).close(file)
}

/// Removes the file at `path`.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn remove<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    path: &str,
) -> Result<(), LibcError> {
    let (sent, fits) = within(path, PATH_LIMIT);
    let reply = Libc::client(client).remove(sent);
    if fits {
        reply
    } else {
        too_long(reply)
    }
}

/// Renames the file at `from` to `to`.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn rename<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    from: &str,
    to: &str,
) -> Result<(), LibcError> {
    let mut buf = [0u8; 2 * PATH_LIMIT];
    let fits = from.len() <= PATH_LIMIT && to.len() <= PATH_LIMIT;
    let (from_len, len) = if fits {
        buf[..from.len()].copy_from_slice(from.as_bytes());
        buf[from.len()..from.len() + to.len()].copy_from_slice(to.as_bytes());
        (from.len(), from.len() + to.len())
    } else {
        // Both empty: the host refuses an empty path cheaply.
        (0, 0)
    };
    // Two texts one after the other are text.
    let paths = core::str::from_utf8(&buf[..len]).unwrap_or("");
    let reply = Libc::client(client).rename(from_len as u32, paths);
    if fits {
        reply
    } else {
        too_long(reply)
    }
}

/// Sets the program's exit code to `code` (the lowest lane's code; the first call served wins)
/// and returns: the program ends when its threads have returned from `main`, every call they
/// made answered, so a thread that is done returns after calling it. A host with
/// `ExitPolicy::Process` (none of this project's loaders) ends its process at once instead.
pub fn exit<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    code: i32,
) -> Result<(), LibcError> {
    Libc::client(client).exit(code).map_err(Error::widen)
}

/// Asks the host to end the program abnormally (as `exit`, without a code).
pub fn abort<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
) -> Result<(), LibcError> {
    Libc::client(client).abort().map_err(Error::widen)
}

/// Allocates `size` bytes (16-byte aligned) from the memory the host reserved before launch.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn malloc<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    size: u64,
) -> Result<*mut u8, LibcError> {
    let address = Libc::client(client).malloc(size)?;
    Ok(address as usize as *mut u8)
}

/// Frees what [`malloc`] returned. A null pointer is ignored, as C's `free` does.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn free<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    pointer: *mut u8,
) -> Result<(), LibcError> {
    Libc::client(client).free(pointer as usize as u64)
}

/// The host's clocks.
pub fn clock<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
) -> Result<ClockReading, LibcError> {
    Libc::client(client).clock().map_err(Error::widen)
}

/// The value of the host's environment variable `name` (on a GPU, the loader's environment),
/// written into `buf`: [`HostError::NotFound`] if it is not set, [`HostError::Disabled`] if the
/// host does not give its environment, [`HostError::TooLong`] for a name or value over
/// [`ENV_LIMIT`] bytes, `Status::ReplyTooLarge` for a value longer than `buf`.
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn getenv<'b, L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    name: &str,
    buf: &'b mut [u8],
) -> Result<&'b str, LibcError> {
    let (sent, fits) = within(name, ENV_LIMIT);
    let reply = Libc::client(client).get_env_into(sent, buf);
    if fits {
        reply
    } else {
        too_long(reply)
    }
}

/// Runs `command` in the host's shell, if the host turned `system` on
/// ([`HostError::Disabled`] otherwise); returns its exit status (-1: killed by a signal).
#[cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), inline(never))]
pub fn system<L: Lanes, M: Mailbox, W: Wait>(
    client: &HostClient<'_, L, M, W>,
    command: &str,
) -> Result<i32, LibcError> {
    let (sent, fits) = within(command, SYSTEM_LIMIT);
    let reply = Libc::client(client).system(sent);
    if fits {
        reply
    } else {
        too_long(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(skip: usize, parts: &[&[u8]]) -> (usize, usize, std::vec::Vec<u8>) {
        let mut w = Window {
            buf: [0; PRINT_CHUNK],
            len: 0,
            skip,
            total: 0,
        };
        for p in parts {
            w.push(p);
        }
        (w.len, w.total, w.buf[..w.len].to_vec())
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
}
