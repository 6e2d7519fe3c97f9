//! Owner words: which client process holds each port, and how a dead one's port is reclaimed.
//!
//! Each port has one `u64` owner word in the file, after the region:
//!
//! ```text
//! bits 63..32  generation   +1 at every claim of the port
//! bits 31..0   holder       0: free; ABANDONED: given up by a live client; else the holder:
//!              bits 31..22  start tag   a hash of the holder's start time (1..=1022; a holder
//!                                        whose tag is 0, or whose pid is 0, is no process: it is
//!                                        treated as dead, since no client claims without its
//!                                        start time)
//!              bits 21..0   pid         the holder's process id (Linux pids are below 2^22)
//! ```
//!
//! The start tag tells a holder from a later process that was given its recycled pid: a port whose
//! pid is alive but whose tag differs from the live process's is held by a dead client. (One
//! recycled pid in 1022 gets the same tag; its port then waits until that process exits, as every
//! port did before tags.)
//!
//! The owner word *is* the clients' cross-process lock: a client claims a port by one
//! compare-and-swap from "free" to its pid, so there is no instant at which a port is locked but
//! its holder unknown (a lock bit plus a separate owner field has such a window: a client killed
//! between the two leaves a locked port nobody can safely take back). Inside a process, each client
//! handle's ferry-rpc lock bitmap is private and has every bit set except the port it claimed, so
//! ferry-rpc's search can only open that port. See the crate docs for the reclaim protocol.

use crate::sync::{AtomicU64, Ordering};

/// The pid value of a port given up by a live client in an unknown state (a call that failed
/// mid-way): only the server's reclaimer may free it.
pub const ABANDONED: u32 = u32::MAX;

/// Bits of a holder that carry the pid.
pub const PID_BITS: u32 = 22;
const PID_MASK: u32 = (1 << PID_BITS) - 1;
/// Start tags are `1..=START_TAGS`: never 0 (so no holder is free) nor all ones (so no holder is
/// `ABANDONED`).
const START_TAGS: u64 = (1 << (32 - PID_BITS)) - 2;

/// The holder field of an owner word: 0 free, `ABANDONED`, or a holder (`holder`).
pub const fn holder_of(word: u64) -> u32 {
    word as u32
}

/// The pid in an owner word: 0 free, `ABANDONED`, else the holder's process id.
pub const fn pid_of(word: u64) -> u32 {
    match holder_of(word) {
        ABANDONED => ABANDONED,
        h => h & PID_MASK,
    }
}

/// The tag of a process start time (`start_time`).
const fn start_tag(start: u64) -> u32 {
    1 + (start.wrapping_mul(0x9e37_79b9_7f4a_7c15) % START_TAGS) as u32
}

/// The holder field for process `pid` started at `start` (`start_time`), or `None` if the pid is
/// 0 or does not fit in [`PID_BITS`] bits (no Linux pid is that large).
pub const fn holder(pid: u32, start: u64) -> Option<u32> {
    if pid == 0 || pid > PID_MASK {
        return None;
    }
    Some(start_tag(start) << PID_BITS | pid)
}

/// Why this process cannot hold ports.
#[derive(Debug)]
pub enum NoHolder {
    /// Its pid does not fit in [`PID_BITS`] bits.
    PidTooLarge(u32),
    /// Its start time (`/proc/self/stat`) could not be read.
    NoStartTime(std::io::Error),
}

/// The holder field of this process: its pid and the tag of its start time. A process whose
/// start time cannot be read cannot hold ports (a holder is always named by both, so that a
/// word holding a pid alone, as a stray write may leave, is never taken for a live client).
pub fn current_holder() -> Result<u32, NoHolder> {
    let pid = std::process::id();
    let start = match stat(pid) {
        Ok(Some((_, start))) => start,
        Ok(None) => return Err(NoHolder::NoStartTime(std::io::ErrorKind::NotFound.into())),
        Err(e) => return Err(NoHolder::NoStartTime(e)),
    };
    holder(pid, start).ok_or(NoHolder::PidTooLarge(pid))
}

/// The generation in an owner word.
pub const fn generation_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// An owner word.
pub const fn pack(generation: u32, holder: u32) -> u64 {
    ((generation as u64) << 32) | holder as u64
}

/// Claims `word` for `holder` if it is free; returns the new word. Only a free word can be claimed.
pub(crate) fn try_claim(word: &AtomicU64, holder: u32) -> Option<u64> {
    let current = word.load(Ordering::Relaxed);
    if holder_of(current) != 0 {
        return None;
    }
    let new = pack(generation_of(current).wrapping_add(1), holder);
    // SYNC (claim): SeqCst pairs with the previous holder's release store (its packet accesses
    // happen before ours) and orders the claim before our read of the server's state word (the
    // drain handshake in `server`).
    word.compare_exchange(current, new, Ordering::SeqCst, Ordering::Relaxed)
        .ok()
        .map(|_| new)
}

/// Frees a port its holder finished with: the port is at rest, owned by the client side. Only the
/// claim `mine` is freed: a word that no longer holds it (taken behind the holder's back) is left
/// as it is, and `false` says so.
pub(crate) fn release(word: &AtomicU64, mine: u64) -> bool {
    // SYNC (release): everything the holder did to the packet happens before the next claim.
    word.compare_exchange(
        mine,
        pack(generation_of(mine), 0),
        Ordering::Release,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// Gives up a port whose state is unknown (a call failed mid-way); the server frees it once no
/// worker is on it and the client side owns the packet. As [`release`], only the claim `mine`.
pub(crate) fn abandon(word: &AtomicU64, mine: u64) -> bool {
    // SYNC (release): as `release`; the monitor's acquire of the word sees our accesses.
    word.compare_exchange(
        mine,
        pack(generation_of(mine), ABANDONED),
        Ordering::Release,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// Whether the word still holds the claim `mine` (a client's check that no one took its port).
#[inline(always)]
pub(crate) fn still_held(word: &AtomicU64, mine: u64) -> bool {
    // SYNC (claim check): acquire; a claim or reclaim that replaced ours, and whatever its maker
    // did before, is seen.
    word.load(Ordering::Acquire) == mine
}

/// What a look at a process found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// Proven gone: no such process (`ESRCH`, or its `/proc` entry absent while `kill(pid, 0)`
    /// also says so), or a zombie.
    Gone,
    /// Not proven gone; its start time, if it could be read.
    Alive(Option<u64>),
}

/// What `/proc/PID/stat` says of a process: `Ok(None)` if it has no `/proc` entry, `Ok(Some(
/// (state letter, start time)))`, or the error that kept us from reading it (out of file
/// descriptors, out of memory, not allowed, a line we could not parse).
fn stat(pid: u32) -> std::io::Result<Option<(u8, u64)>> {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ESRCH: the process went away while we read it.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let unparsed = || std::io::Error::new(std::io::ErrorKind::InvalidData, "unparsed stat line");
    // The command name is in parentheses and may hold anything; the fields after its closing
    // parenthesis are separated by single spaces: state is field 3, starttime field 22.
    let rest = &stat[stat.rfind(") ").ok_or_else(unparsed)? + 2..];
    let mut fields = rest.split(' ');
    let state = *fields
        .next()
        .and_then(|f| f.as_bytes().first())
        .ok_or_else(unparsed)?;
    let start = fields
        .nth(18)
        .and_then(|f| f.parse().ok())
        .ok_or_else(unparsed)?;
    Ok(Some((state, start)))
}

/// When process `pid` started (clock ticks after boot, from `/proc/PID/stat`), if it exists and
/// that can be read. Together with the pid it names a process: a later process given the same
/// pid starts later.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).ok().flatten().map(|(_, start)| start)
}

/// Whether `kill(pid, 0)` proves that no process `pid` exists. Any other answer (it exists; it
/// belongs to someone else; any other error) proves nothing.
fn no_such_process(pid: rustix::process::Pid) -> bool {
    rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
}

/// Looks at process `pid`. Only a proof counts as gone: `kill(pid, 0)` answering `ESRCH`, a
/// zombie's state letter, or a missing `/proc` entry that `kill` then confirms. A look that fails
/// for any other reason (the server out of file descriptors or memory, `/proc` hidden or not
/// mounted) counts as alive with its start time unknown, so that a port is never taken from a
/// live client because we could not look.
fn look(pid: u32) -> Look {
    if pid == 0 || pid == ABANDONED || pid > i32::MAX as u32 {
        return Look::Gone;
    }
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return Look::Gone;
    };
    if no_such_process(p) {
        return Look::Gone;
    }
    match stat(pid) {
        // A zombie (a killed child its parent has not reaped yet still answers `kill(pid, 0)`).
        Ok(Some((b'Z' | b'X', _))) => Look::Gone,
        Ok(Some((_, start))) => Look::Alive(Some(start)),
        // No /proc entry: it was reaped since `kill` answered (which now says so), or /proc hides
        // it from us (`hidepid`, no /proc at all): then we cannot tell.
        Ok(None) if no_such_process(p) => Look::Gone,
        Ok(None) | Err(_) => Look::Alive(None),
    }
}

/// Whether process `pid`, started at `start` (0: whenever), may be alive: false only on a proof
/// that it is gone (no such process, a zombie, or a process of that pid whose start time differs
/// from `start`). A look that fails (no descriptor left, `/proc` unreadable) answers true.
pub fn process_alive(pid: u32, start: u64) -> bool {
    match look(pid) {
        Look::Gone => false,
        Look::Alive(started) => start == 0 || started.is_none_or(|s| s == start),
    }
}

/// Whether the client named by `holder` (an owner word's holder field) may be alive: false only on
/// a proof that it is gone (see [`process_alive`]; a live process of its pid whose start time has
/// another tag is a later process given a dead holder's pid).
pub fn holder_alive(holder: u32) -> bool {
    let (pid, tag) = (holder & PID_MASK, holder >> PID_BITS);
    // No client claims with a pid or tag of 0 (`holder`): such a word was written behind the
    // protocol's back. (`ABANDONED` has the tag of all ones, which no start time gives.)
    if holder == ABANDONED || pid == 0 || tag == 0 {
        return false;
    }
    match look(holder & PID_MASK) {
        Look::Gone => false,
        Look::Alive(started) => started.is_none_or(|s| start_tag(s) == tag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_release_abandon() {
        let w = AtomicU64::new(0);
        let mine = try_claim(&w, 42).unwrap();
        assert_eq!((generation_of(mine), pid_of(mine)), (1, 42));
        assert_eq!(try_claim(&w, 43), None);
        assert!(release(&w, mine));
        let next = try_claim(&w, 43).unwrap();
        assert_eq!((generation_of(next), pid_of(next)), (2, 43));
        // A stale claim can neither free nor abandon the word's current one.
        assert!(!release(&w, mine) && !abandon(&w, mine));
        assert!(still_held(&w, next) && !still_held(&w, mine));
        assert!(abandon(&w, next));
        assert_eq!(pid_of(w.load(Ordering::Relaxed)), ABANDONED);
        assert_eq!(try_claim(&w, 44), None);
    }

    #[test]
    fn holders_name_a_process_and_its_start() {
        let me = std::process::id();
        let start = start_time(me).expect("our own start time");
        assert_eq!(start_time(me), Some(start), "a start time does not move");
        let h = current_holder().expect("a Linux pid fits, our start time is readable");
        assert_eq!(h, holder(me, start).unwrap());
        assert_eq!(pid_of(pack(7, h)), me);
        assert!(holder_alive(h));
        // The same pid with another start time: a process that died and whose pid was reused.
        let other = (1..)
            .map(|d| holder(me, start + d).unwrap())
            .find(|&o| o != h);
        assert!(!holder_alive(other.unwrap()));
        assert!(process_alive(me, start) && process_alive(me, 0));
        assert!(!process_alive(me, start + 1));
        assert_eq!(holder(0, start), None);
        assert_eq!(holder(1 << PID_BITS, start), None);
        // A holder with no start tag, or no pid, is no client (a stray write): dead.
        assert!(!holder_alive(me) && !holder_alive(5 << PID_BITS));
        // No start time gives the ABANDONED pattern, whatever the pid.
        assert!((0..100_000u64).all(|t| holder(PID_MASK, t) != Some(ABANDONED)));
        assert!(!holder_alive(0) && !holder_alive(ABANDONED));
    }

    #[test]
    fn liveness() {
        assert!(process_alive(std::process::id(), 0));
        assert!(!process_alive(0, 0));
        assert!(!process_alive(ABANDONED, 0));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie counts as dead.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z"))
            .unwrap_or(true)
        {
            assert!(std::time::Instant::now() < deadline, "`true` did not exit");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!process_alive(pid, 0));
        child.wait().unwrap();
        assert!(!process_alive(pid, 0));
    }
}
