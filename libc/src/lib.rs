//! The host services a GPU program expects from a C library, as one derived ferry service:
//! [`Libc`] and its wire types (`no_std`). Its host server, `LibcHost`, is a package of its own,
//! `ferry-libc-host`, so that what both sides share carries nothing of either side.
//!
//! Both sides build from this one definition: the device side (`ferry_device::host`, `no_std`)
//! calls through the generated [`LibcClient`] and wraps it in functions that take care of
//! chunking, lane convergence and local checks; the host side implements the generated
//! [`LibcServer`] in `ferry_libc_host::LibcHost` (with `std`), served over any transport: a GPU
//! region (`ferry_gpu`, the loader `rpc-gpu-run`) or a shared-memory file (`ferry_shm`).
//!
//! | call | arguments, per lane | reply, per lane |
//! |---|---|---|
//! | [`Libc::Noop`] | a value | the value plus one (the benchmarks' unit) |
//! | [`Libc::Print`], [`Libc::EPrint`] | the bytes (≤ [`PRINT_CHUNK`]), streamed | none: one-way |
//! | [`Libc::Open`] | mode ([`mode`]), path (text, ≤ [`PATH_LIMIT`]) | the [`Handle`] |
//! | [`Libc::Read`] | handle, most bytes wanted | the bytes (≤ [`IO_LIMIT`]), streamed |
//! | [`Libc::Gets`] | handle, most bytes wanted | the bytes (≤ [`IO_CHUNK`]), streamed |
//! | [`Libc::Write`] | handle, the bytes (≤ [`IO_LIMIT`]) | bytes written |
//! | [`Libc::ReadAt`], [`Libc::WriteAt`] | handle, offset, as `Read`/`Write` (`pread`, `pwrite`) | as `Read`/`Write` |
//! | [`Libc::Size`] | handle | the file's size |
//! | [`Libc::ReadToDevice`], [`Libc::WriteFromDevice`] | handle, offset, device address, length, where to announce the end | bytes moved by the host's copy engine |
//! | [`Libc::Seek`] | handle, offset, whence | the new position |
//! | [`Libc::Tell`] | handle | the position |
//! | [`Libc::Flush`], [`Libc::Close`] | handle | nothing |
//! | [`Libc::Remove`] | the path (text) | nothing |
//! | [`Libc::Rename`] | `from`'s length, `from` ++ `to` (text) | nothing |
//! | [`Libc::Exit`] | the code | nothing (the loader ends the process instead) |
//! | [`Libc::Abort`] | nothing | nothing (the loader aborts instead) |
//! | [`Libc::Malloc`], [`Libc::Free`] | size / address | the address / nothing |
//! | [`Libc::Clock`] | nothing | [`ClockReading`] |
//! | [`Libc::GetEnv`] | a name (text, ≤ [`ENV_LIMIT`]) | its value (text, ≤ [`ENV_LIMIT`]) |
//! | [`Libc::System`] | the command (text, ≤ [`SYSTEM_LIMIT`]) | its exit status |
//!
//! Every call that can fail on the host carries [`HostError`] (`#[rpc(error = HostError)]`): a
//! call returns `Result<T, LibcError>`, where [`LibcError`] is the service layer's
//! `Error<HostError>`: [`Error::App`] is the host's answer (a missing file, a bad handle...),
//! `Error::Status` and `Error::Transport` are the server refusing the call or the exchange
//! failing. **Rename** sends both paths in its one text stream, `from` then `to`, with `from`'s
//! length as a fixed argument (a call has at most one stream; two calls would leave a half-done
//! rename between them).
//!
//! **Handles** are opaque: the host hands out ids (index and generation) and checks every id it
//! is given; [`STDOUT`] and [`STDERR`] name its output streams. **Addresses** from
//! [`Libc::Malloc`] point into memory the host reserved before launch; the host hands out offsets
//! into it and never dereferences anything the device sends. Both belong to the client that got
//! them (a GPU program; over shared memory, a client process): another client's handle is
//! [`HostError::BadHandle`], another client's address [`HostError::BadPointer`]. Only regular
//! files of data open ([`HostError::NotAFile`]: not the kernel's interface files under `/proc`,
//! `/sys` and the like, which look regular); a file another program holds for exclusive use (a live
//! ferry server's shared-memory file) is never opened for writing, removed or renamed
//! ([`HostError::Busy`]); each client has a quota of open file handles
//! ([`HostError::TooManyOpen`]) and of the heap ([`HostError::OutOfMemory`]). A client's
//! read-only opens of one file share the host process's descriptors of it (one per serving thread), each handle with its
//! own position, so every thread of a GPU program may open the same input; any other open takes
//! a descriptor of its own, and one that finds the host process out of descriptors is
//! [`HostError::NoDescriptors`].

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

use core::fmt;

use ferry_rpc::service::{Bytes, Error, Service, Text};
use ferry_rpc::{RpcOpcodes, Schema};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, TryFromBytes};

/// The most bytes one lane prints in one message (the `limit` of print calls).
pub const PRINT_CHUNK: usize = 512;
/// The most bytes one lane reads or writes in one call where its port has no bulk area (a GPU's
/// region), and the most one [`Libc::Gets`] reads.
pub const IO_CHUNK: usize = 512;
/// The most bytes one [`Libc::Read`] or [`Libc::Write`] carries: where the port has a bulk area
/// (`ServerConfig::bulk` between processes), device code reads and writes in pieces of the
/// lane's share of it, up to this.
pub const IO_LIMIT: usize = 1 << 20;
/// The longest path the host accepts, in bytes.
pub const PATH_LIMIT: usize = 512;
/// The longest environment variable name, and value, [`Libc::GetEnv`] carries, in bytes.
pub const ENV_LIMIT: usize = 4096;
/// The longest command [`Libc::System`] carries, in bytes.
pub const SYSTEM_LIMIT: usize = 4096;

// A device-side printer writes one message to a file with one `Write`.
const _: () = assert!(PRINT_CHUNK <= IO_CHUNK);

/// The host's standard output, as a handle.
pub const STDOUT: Handle = Handle(1);
/// The host's standard error, as a handle.
pub const STDERR: Handle = Handle(2);

/// An open file on the host: an opaque id the host validates on every call.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, FromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(transparent)]
pub struct Handle(pub u64);

/// Open modes ([`Libc::Open`]'s `mode`), combined with `|`.
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
    /// Fail if the file exists (with [`CREATE`]; without it, nothing).
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

/// Seek from the start.
pub const SEEK_SET: u32 = 0;
/// Seek from the current position.
pub const SEEK_CUR: u32 = 1;
/// Seek from the end.
pub const SEEK_END: u32 = 2;

/// [`Libc::Clock`]'s reply.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(C)]
pub struct ClockReading {
    /// Nanoseconds since the Unix epoch (the host's wall clock).
    pub realtime_ns: u64,
    /// Nanoseconds since the host started serving (monotonic).
    pub monotonic_ns: u64,
}

/// Why the host refused a call: the error of every [`Libc`] call that can fail, as the handler
/// returns it and the device receives it ([`Error::App`]). The discriminants are the codes the
/// service has always used; a code this side does not know arrives as
/// [`Status::BadResponse`](ferry_rpc::service::Status::BadResponse).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u32)]
pub enum HostError {
    /// No such file or directory.
    NotFound = 1,
    /// Permission denied.
    Denied = 2,
    /// The handle is not one the host handed out to this client, or was closed.
    BadHandle = 3,
    /// A path or request over the limits (checked on the device before sending).
    TooLong = 4,
    /// An argument the host refuses (bad mode, empty path or one with a NUL, seek before the
    /// start...).
    Invalid = 5,
    /// Too many files open: this client's quota of open file handles, or the host's whole table,
    /// is full (the host's limits, `LibcConfig::max_files` and `max_files_per_client`; the
    /// loader's `--max-files`).
    TooManyOpen = 6,
    /// The reserved heap has no block that large, or the block would take this client past its
    /// share of the heap (the host's per-client quota).
    OutOfMemory = 7,
    /// `free` of an address the host did not hand out to this client (or already freed).
    BadPointer = 8,
    /// The call is turned off on this host (`system`).
    Disabled = 9,
    /// The file exists.
    Exists = 10,
    /// Another I/O error on the host.
    Io = 11,
    /// The path names something other than a regular file (a FIFO, a device, a socket, a
    /// directory), or a file of the kernel's interface file systems (`/proc`, `/sys`, debugfs and
    /// the like: `/proc/self/mem` would reach the host's own memory): the host opens regular files
    /// of data only, so that no call waits on another party or reaches into a process.
    NotAFile = 12,
    /// The host has no device memory to copy to or from ([`Libc::ReadToDevice`],
    /// [`Libc::WriteFromDevice`] between processes, or a host without a copy engine).
    NoDeviceMemory = 13,
    /// An address range that is not the device's own memory (the driver refused it).
    BadAddress = 14,
    /// The file is in use by another party that holds it for exclusive use (an exclusive
    /// `flock`), as a live ferry server holds its shared-memory file: the host does not open it
    /// for writing, nor remove or rename it, so that no client can shrink, overwrite or unname
    /// the memory a server and its clients have mapped.
    Busy = 15,
    /// The host process has no file descriptor left for the call: its limit of open descriptors
    /// (`RLIMIT_NOFILE`, EMFILE) or the system's (ENFILE) is reached. Unlike
    /// [`HostError::TooManyOpen`], a limit of the host's operating system, not of the host
    /// services: read-only opens of one file share a few descriptors (one per serving thread); every other open takes one.
    NoDescriptors = 16,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostError::NotFound => "no such file",
            HostError::Denied => "permission denied",
            HostError::BadHandle => "not an open file handle",
            HostError::TooLong => "too long",
            HostError::Invalid => "invalid argument",
            HostError::TooManyOpen => "too many open files",
            HostError::OutOfMemory => "out of reserved memory",
            HostError::BadPointer => "not an address malloc returned",
            HostError::Disabled => "turned off on this host",
            HostError::Exists => "the file exists",
            HostError::Io => "I/O error on the host",
            HostError::NotAFile => "not a regular file",
            HostError::NoDeviceMemory => "no device memory on this host",
            HostError::BadAddress => "not an address range of the device's memory",
            HostError::Busy => "the file is locked for exclusive use by another program",
            HostError::NoDescriptors => {
                "the host process is out of file descriptors (its RLIMIT_NOFILE)"
            }
        })
    }
}

impl core::error::Error for HostError {}

/// How a [`Libc`] call fails on the device: the host's [`HostError`] ([`Error::App`]), the
/// server's refusal ([`Error::Status`]) or the transport's failure ([`Error::Transport`]).
pub type LibcError = Error<HostError>;

/// The host services, one variant per call (see the module docs for what crosses).
/// The host services, one variant per call (see the crate docs for what crosses).
#[derive(RpcOpcodes)]
#[rpc(service = "ferry.libc")]
pub enum Libc {
    /// Replies its value plus one (wrapping): a call that does nothing, the unit the benchmarks
    /// time (LLVM libc's `RPC_NOOP`). `hot`: compiled where it is called, as a call in a loop
    /// that must be fast would be.
    #[rpc(response = u64, values, hot)]
    Noop {
        /// The value.
        value: u64,
    },
    /// Writes the bytes to the host's standard output.
    #[rpc(oneway, limit = PRINT_CHUNK)]
    Print {
        /// What to write.
        text: Bytes,
    },
    /// Writes the bytes to the host's standard error.
    #[rpc(oneway, limit = PRINT_CHUNK)]
    EPrint {
        /// What to write.
        text: Bytes,
    },
    /// Opens the regular file at `path`; replies its handle. A mode that can write (with
    /// [`mode::WRITE`] or [`mode::APPEND`]) is [`HostError::Busy`] for a file another program
    /// holds locked for exclusive use (a live ferry server's shared-memory file), checked before
    /// [`mode::TRUNCATE`] empties anything. Read-only opens ([`mode::READ`] alone) of the file a
    /// client already holds open read-only share its descriptor on the host: the handle is new,
    /// at position 0, and moves on its own.
    #[rpc(response = Handle, error = HostError, limit = PATH_LIMIT)]
    Open {
        /// Bits of [`mode`].
        mode: u32,
        /// The file.
        path: Text,
    },
    /// Reads up to `len` bytes; none at the end of the file.
    #[rpc(response = Bytes, error = HostError, limit = IO_LIMIT)]
    Read {
        /// The file.
        handle: Handle,
        /// The most bytes wanted (the host serves at most [`IO_LIMIT`]).
        len: u32,
    },
    /// Reads up to `len` bytes, stopping after a newline; none at the end of the file.
    #[rpc(response = Bytes, error = HostError, limit = IO_CHUNK)]
    Gets {
        /// The file.
        handle: Handle,
        /// The most bytes wanted (the host serves at most [`IO_CHUNK`]).
        len: u32,
    },
    /// Writes the bytes; replies how many were written.
    #[rpc(response = u32, error = HostError, limit = IO_LIMIT)]
    Write {
        /// The file, or [`STDOUT`], [`STDERR`].
        handle: Handle,
        /// What to write.
        data: Bytes,
    },
    /// Reads up to `len` bytes at `offset`, leaving the position where it is (`pread`); none
    /// at or past the end of the file.
    #[rpc(response = Bytes, error = HostError, limit = IO_LIMIT)]
    ReadAt {
        /// The file.
        handle: Handle,
        /// Where to read from.
        offset: u64,
        /// The most bytes wanted (the host serves at most [`IO_LIMIT`]).
        len: u32,
    },
    /// Writes the bytes at `offset`, leaving the position where it is (`pwrite`); replies how
    /// many were written. [`HostError::Invalid`] on a handle opened with [`mode::APPEND`], whose
    /// every write goes to the end of the file: the bytes would not land at `offset`.
    #[rpc(response = u32, error = HostError, limit = IO_LIMIT)]
    WriteAt {
        /// The file.
        handle: Handle,
        /// Where to write.
        offset: u64,
        /// What to write.
        data: Bytes,
    },
    /// The file's size in bytes.
    #[rpc(response = u64, error = HostError, values)]
    Size {
        /// The file.
        handle: Handle,
    },
    /// Reads up to `len` bytes of the file at `offset` straight into the device's memory at
    /// `address`, with the host's copy engine (the position does not move); replies how many
    /// (fewer only at the end of the file). [`HostError::NoDeviceMemory`] where the host has
    /// none (between processes), [`HostError::BadAddress`] for a range that is not the
    /// device's own memory.
    ///
    /// With `done` non-zero, the host also announces the end of the call in the client's
    /// memory: it writes `done_value` to the 32-bit word at `done` once the bytes are in place
    /// (or the call has failed), so that a client can wait on its own memory rather than poll
    /// the reply across the bus (`ferry_rpc::Port::arm_announce`). The word must be device
    /// memory ([`HostError::BadAddress`] otherwise, and nothing is announced); a host without
    /// device memory announces nothing.
    #[rpc(response = u64, error = HostError)]
    ReadToDevice {
        /// The file.
        handle: Handle,
        /// Where in the file.
        offset: u64,
        /// Where in device memory.
        address: u64,
        /// The most bytes wanted.
        len: u64,
        /// Where to announce the end of the call (0: nowhere).
        done: u64,
        /// What to announce there.
        done_value: u32,
    },
    /// Writes `len` bytes of the device's memory at `address` to the file at `offset`, with the
    /// host's copy engine (the position does not move); replies how many. Errors as
    /// [`Libc::ReadToDevice`], which also says what `done` and `done_value` do (here the end
    /// is announced once the bytes were read out of device memory and written to the file).
    /// [`HostError::Invalid`] on a handle opened with [`mode::APPEND`], as [`Libc::WriteAt`].
    #[rpc(response = u64, error = HostError)]
    WriteFromDevice {
        /// The file.
        handle: Handle,
        /// Where in the file.
        offset: u64,
        /// Where in device memory.
        address: u64,
        /// How many bytes.
        len: u64,
        /// Where to announce the end of the call (0: nowhere).
        done: u64,
        /// What to announce there.
        done_value: u32,
    },
    /// Moves the position; replies the new one.
    #[rpc(response = u64, error = HostError)]
    Seek {
        /// The file.
        handle: Handle,
        /// The offset from `whence`.
        offset: i64,
        /// [`SEEK_SET`], [`SEEK_CUR`] or [`SEEK_END`].
        whence: u32,
    },
    /// Replies the position.
    #[rpc(response = u64, error = HostError, values)]
    Tell {
        /// The file.
        handle: Handle,
    },
    /// Flushes the file's host buffers.
    #[rpc(error = HostError)]
    Flush {
        /// The file, or [`STDOUT`], [`STDERR`].
        handle: Handle,
    },
    /// Closes the file; its handle is never valid again.
    #[rpc(error = HostError)]
    Close {
        /// The file.
        handle: Handle,
    },
    /// Removes a file ([`HostError::Busy`] for one another program holds locked for exclusive
    /// use, such as a live ferry server's shared-memory file).
    #[rpc(error = HostError, limit = PATH_LIMIT)]
    Remove {
        /// The file.
        path: Text,
    },
    /// Renames a file ([`HostError::Busy`] if either path names a file another program holds
    /// locked for exclusive use, such as a live ferry server's shared-memory file).
    #[rpc(error = HostError, limit = 2 * PATH_LIMIT)]
    Rename {
        /// The length of the old path, in bytes.
        from_len: u32,
        /// The old path then the new one.
        paths: Text,
    },
    /// Ends the program with the code (the lowest lane's, the first call's).
    Exit {
        /// The exit code.
        code: i32,
    },
    /// Ends the program abnormally.
    Abort,
    /// Allocates from the memory reserved before launch; replies the address.
    #[rpc(response = u64, error = HostError)]
    Malloc {
        /// The bytes wanted.
        size: u64,
    },
    /// Frees an address [`Libc::Malloc`] returned (0 is ignored).
    #[rpc(error = HostError)]
    Free {
        /// The address.
        address: u64,
    },
    /// The host's clocks.
    #[rpc(response = ClockReading, values)]
    Clock,
    /// The value of an environment variable of the host (the loader's: the program's
    /// environment), if the host gives its environment ([`HostError::Disabled`] otherwise);
    /// [`HostError::NotFound`] if it is not set, [`HostError::TooLong`] if its value is longer
    /// than [`ENV_LIMIT`] or not UTF-8.
    #[rpc(response = Text, error = HostError, limit = ENV_LIMIT)]
    GetEnv {
        /// The variable's name.
        name: Text,
    },
    /// Runs a shell command on the host, if the host turned `system` on; replies its exit status
    /// (-1: killed by a signal).
    #[rpc(response = i32, error = HostError, limit = SYSTEM_LIMIT)]
    System {
        /// The command, for `/bin/sh -c`.
        command: Text,
    },
}

impl Libc {
    /// How many calls the service has.
    pub const CALLS: usize = <Libc as Service>::OPCODES.len();
}

/// The opcode of each [`Libc`] call, by name: a call whose variant has a stream (`Bytes`,
/// `Text`) cannot be built as a value to ask for its `opcode()` (the derive's constants, by
/// their short names).
pub mod opcode {
    use super::Libc;

    /// [`Libc::Noop`].
    pub const NOOP: u32 = Libc::OPCODE_NOOP;
    /// [`Libc::Print`].
    pub const PRINT: u32 = Libc::OPCODE_PRINT;
    /// [`Libc::EPrint`].
    pub const E_PRINT: u32 = Libc::OPCODE_E_PRINT;
    /// [`Libc::Open`].
    pub const OPEN: u32 = Libc::OPCODE_OPEN;
    /// [`Libc::Read`].
    pub const READ: u32 = Libc::OPCODE_READ;
    /// [`Libc::Gets`].
    pub const GETS: u32 = Libc::OPCODE_GETS;
    /// [`Libc::Write`].
    pub const WRITE: u32 = Libc::OPCODE_WRITE;
    /// [`Libc::ReadAt`].
    pub const READ_AT: u32 = Libc::OPCODE_READ_AT;
    /// [`Libc::WriteAt`].
    pub const WRITE_AT: u32 = Libc::OPCODE_WRITE_AT;
    /// [`Libc::Size`].
    pub const SIZE: u32 = Libc::OPCODE_SIZE;
    /// [`Libc::ReadToDevice`].
    pub const READ_TO_DEVICE: u32 = Libc::OPCODE_READ_TO_DEVICE;
    /// [`Libc::WriteFromDevice`].
    pub const WRITE_FROM_DEVICE: u32 = Libc::OPCODE_WRITE_FROM_DEVICE;
    /// [`Libc::Seek`].
    pub const SEEK: u32 = Libc::OPCODE_SEEK;
    /// [`Libc::Tell`].
    pub const TELL: u32 = Libc::OPCODE_TELL;
    /// [`Libc::Flush`].
    pub const FLUSH: u32 = Libc::OPCODE_FLUSH;
    /// [`Libc::Close`].
    pub const CLOSE: u32 = Libc::OPCODE_CLOSE;
    /// [`Libc::Remove`].
    pub const REMOVE: u32 = Libc::OPCODE_REMOVE;
    /// [`Libc::Rename`].
    pub const RENAME: u32 = Libc::OPCODE_RENAME;
    /// [`Libc::Exit`].
    pub const EXIT: u32 = Libc::OPCODE_EXIT;
    /// [`Libc::Abort`].
    pub const ABORT: u32 = Libc::OPCODE_ABORT;
    /// [`Libc::Malloc`].
    pub const MALLOC: u32 = Libc::OPCODE_MALLOC;
    /// [`Libc::Free`].
    pub const FREE: u32 = Libc::OPCODE_FREE;
    /// [`Libc::Clock`].
    pub const CLOCK: u32 = Libc::OPCODE_CLOCK;
    /// [`Libc::GetEnv`].
    pub const GET_ENV: u32 = Libc::OPCODE_GET_ENV;
    /// [`Libc::System`].
    pub const SYSTEM: u32 = Libc::OPCODE_SYSTEM;
}

#[cfg(test)]
mod tests {
    use super::*;

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
