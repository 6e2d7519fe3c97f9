//! What can go wrong between processes, each case worded for the person who reads it.

use std::path::PathBuf;

use crate::header::HeaderError;

/// Why a shared-memory operation failed.
#[derive(Debug)]
pub enum ShmError {
    /// A system call on the file failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file's header does not describe a region this side can use.
    Header {
        /// The file.
        path: PathBuf,
        /// The field that did not check out.
        error: HeaderError,
    },
    /// The path is a symbolic link; ferry never follows one.
    Symlink(PathBuf),
    /// The path is not a regular file.
    NotRegular(PathBuf),
    /// The file system has no room for the file (a full `/dev/shm`): its pages could not be
    /// reserved when it was created.
    NoRoom {
        /// The file.
        path: PathBuf,
        /// The file's size in bytes, all of which must be free.
        bytes: u64,
    },
    /// Another live server already serves this name.
    AlreadyServing {
        /// The file.
        path: PathBuf,
        /// The serving process, if its header could be read.
        pid: Option<u32>,
    },
    /// A file stands at the path that is not a stale ferry file (not a ferry file at all, or of
    /// a format this ferry does not know): a server never replaces it.
    NotStale {
        /// The file.
        path: PathBuf,
        /// What was found, in words.
        why: String,
    },
    /// The file was left by a server that is no longer running (or has stopped).
    NoServer {
        /// The file.
        path: PathBuf,
        /// The process that served it.
        pid: u32,
    },
    /// The server is draining or stopped: no new calls are accepted.
    ShuttingDown,
    /// No port became free before the deadline.
    NoFreePort,
    /// The call's deadline passed before its reply came: the reply, if one comes, is discarded;
    /// whether the server ran the call is unknown.
    Deadline,
    /// This process's id does not fit an owner word (`owner::PID_BITS` bits; every Linux pid
    /// does), so it cannot claim ports.
    PidTooLarge(u32),
    /// The port this call ran on was taken from this client while the call was in flight (its
    /// owner word no longer names this claim: the file was written behind the protocol's back,
    /// or the server judged this process dead): whatever the call read cannot be trusted, and
    /// whether the server ran it is unknown. The port is not this client's to free; the handle
    /// claims another at its next call.
    PortLost {
        /// The port.
        port: u32,
    },
    /// The server does not serve a service this client expects (`ClientConfig::service`): none
    /// of that name, or one whose schema fingerprint differs.
    NotServed {
        /// The file.
        path: PathBuf,
        /// The service's name.
        service: &'static str,
        /// The fingerprint this client expects.
        expected: u64,
        /// The fingerprint served under that name, if the name is served.
        served: Option<u64>,
    },
    /// A raw call ([`ShmClient::call`](crate::ShmClient::call)) was refused by the server, in
    /// its words.
    Refused(String),
    /// The services a server was given cannot all be listed in its file (too many, a name
    /// served twice, a name too long).
    BadServices(String),
    /// The region could not be laid out.
    Layout(ferry_rpc::LayoutError),
    /// The call failed in the protocol (for example the server did not answer in time).
    Call(ferry_rpc::Error),
}

impl std::fmt::Display for ShmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShmError::Io { op, path, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
            ShmError::Header { path, error } => {
                write!(
                    f,
                    "{} is not a usable ferry region: {error}",
                    path.display()
                )
            }
            ShmError::Symlink(p) => {
                write!(
                    f,
                    "{} is a symbolic link; refusing to follow it",
                    p.display()
                )
            }
            ShmError::NotRegular(p) => write!(f, "{} is not a regular file", p.display()),
            ShmError::NoRoom { path, bytes } => write!(
                f,
                "no room for {}: its file system has less than the {bytes} bytes it needs free \
                 (a full /dev/shm? fewer ports or lanes make it smaller)",
                path.display()
            ),
            ShmError::AlreadyServing { path, pid } => match pid {
                Some(pid) => write!(f, "{} is already served by process {pid}", path.display()),
                None => write!(f, "{} is already served by another process", path.display()),
            },
            ShmError::NotStale { path, why } => write!(
                f,
                "refusing to replace {}: {why} (choose another name, or remove the file yourself)",
                path.display()
            ),
            ShmError::NoServer { path, pid } => write!(
                f,
                "{} was left by server process {pid}, which is no longer serving",
                path.display()
            ),
            ShmError::ShuttingDown => f.write_str("the server is shutting down"),
            ShmError::NoFreePort => f.write_str("no port became free before the deadline"),
            ShmError::Deadline => f.write_str(
                "the call's deadline passed before its reply came (whether the server ran it is unknown)",
            ),
            ShmError::PidTooLarge(pid) => write!(
                f,
                "process id {pid} does not fit in the {} bits an owner word gives it",
                crate::owner::PID_BITS
            ),
            ShmError::PortLost { port } => write!(
                f,
                "port {port} was taken from this client during the call; its reply was discarded"
            ),
            ShmError::NotServed {
                path,
                service,
                expected,
                served,
            } => match served {
                None => write!(f, "{} does not serve service `{service}`", path.display()),
                Some(served) => write!(
                    f,
                    "{} serves another schema of service `{service}` (fingerprint {served:#018x}, \
                     this client's {expected:#018x}): rebuild both sides from one definition",
                    path.display()
                ),
            },
            ShmError::Refused(why) => write!(f, "call refused: {why}"),
            ShmError::BadServices(why) => write!(f, "cannot serve these services: {why}"),
            ShmError::Layout(e) => write!(f, "bad region layout: {e}"),
            ShmError::Call(e) => write!(f, "call failed: {e}"),
        }
    }
}

impl std::error::Error for ShmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ShmError::Io { source, .. } => Some(source),
            ShmError::Header { error, .. } => Some(error),
            ShmError::Call(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ferry_rpc::Error> for ShmError {
    fn from(e: ferry_rpc::Error) -> Self {
        ShmError::Call(e)
    }
}

impl From<ferry_rpc::LayoutError> for ShmError {
    fn from(e: ferry_rpc::LayoutError) -> Self {
        ShmError::Layout(e)
    }
}
