//! Owner words: which client process holds each port, and how a dead one's port is reclaimed.
//!
//! Each port has one `u64` owner word in the file, after the region:
//!
//! ```text
//! bits 63..32  generation   +1 at every claim of the port
//! bits 31..0   holder       0: free; ABANDONED: given up by a live client; else the holder:
//!              bits 31..22  start tag   a hash of the holder's start time (1..=1022; 0 if it
//!                                        could not be read: judged by the pid alone)
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
//! handle's rpc-core lock bitmap is private and has every bit set except the port it claimed, so
//! rpc-core's search can only open that port. See the crate docs for the reclaim protocol.

use crate::sync::{AtomicU64, Ordering};

/// The pid value of a port given up by a live client in an unknown state (a call that failed
/// mid-way): only the server's reclaimer may free it.
pub const ABANDONED: u32 = u32::MAX;

/// Bits of a holder that carry the pid.
pub const PID_BITS: u32 = 22;
const PID_MASK: u32 = (1 << PID_BITS) - 1;
/// Start tags are `1..=START_TAGS`, and 0 for a holder whose start time could not be read
/// (`UNKNOWN_START`): never all ones, so no holder is `ABANDONED`.
const START_TAGS: u64 = (1 << (32 - PID_BITS)) - 2;
/// The tag of a holder whose start time is unknown: judged by its pid alone.
const UNKNOWN_START: u32 = 0;

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
    match start {
        0 => UNKNOWN_START,
        s => 1 + (s.wrapping_mul(0x9e37_79b9_7f4a_7c15) % START_TAGS) as u32,
    }
}

/// The holder field for process `pid` started at `start` (`start_time`; 0 if it could not be read:
/// such a holder is judged by its pid alone), or `None` if the pid does not fit in [`PID_BITS`]
/// bits (no Linux pid is that large) or is 0.
pub const fn holder(pid: u32, start: u64) -> Option<u32> {
    if pid == 0 || pid > PID_MASK {
        return None;
    }
    Some(start_tag(start) << PID_BITS | pid)
}

/// The holder field of this process, or `None` if its pid does not fit (see [`holder`]).
pub fn current_holder() -> Option<u32> {
    let pid = std::process::id();
    holder(pid, start_time(pid).unwrap_or(0))
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

/// Frees a port its holder finished with: the port is at rest, owned by the client side.
pub(crate) fn release(word: &AtomicU64, mine: u64) {
    // SYNC (release): everything the holder did to the packet happens before the next claim.
    word.store(pack(generation_of(mine), 0), Ordering::Release);
}

/// Gives up a port whose state is unknown (a call failed mid-way); the server frees it once no
/// worker is on it and the client side owns the packet.
pub(crate) fn abandon(word: &AtomicU64, mine: u64) {
    word.store(pack(generation_of(mine), ABANDONED), Ordering::Release);
}

/// What `/proc/PID/stat` says of a process: its state letter and its start time.
fn stat(pid: u32) -> Option<(u8, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything; the fields after its closing
    // parenthesis are separated by single spaces: state is field 3, starttime field 22.
    let rest = &stat[stat.rfind(") ")? + 2..];
    let mut fields = rest.split(' ');
    let state = *fields.next()?.as_bytes().first()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// When process `pid` started (clock ticks after boot, from `/proc/PID/stat`), if it exists.
/// Together with the pid it names a process: a later process given the same pid starts later.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, start)| start)
}

/// Whether process `pid` is alive, and when it started if that can be read: `None` if it does
/// not exist or is a zombie (a killed child its parent has not reaped yet still answers
/// `kill(pid, 0)`), `Some(None)` if it exists but its start time cannot be read.
fn alive_since(pid: u32) -> Option<Option<u64>> {
    if pid == 0 || pid == ABANDONED || pid > i32::MAX as u32 {
        return None;
    }
    let p = rustix::process::Pid::from_raw(pid as i32)?;
    let signalable = match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) if e == rustix::io::Errno::SRCH => return None,
        // EPERM: it exists but belongs to someone else.
        Err(_) => false,
    };
    match stat(pid) {
        Some((b'Z' | b'X', _)) => None,
        Some((_, start)) => Some(Some(start)),
        None if signalable => None,
        // Someone else's process whose stat we may not read: alive, start unknown.
        None => Some(None),
    }
}

/// Whether process `pid`, started at `start` (0: whenever), is alive: it exists, is not a zombie
/// and, if `start` is given and readable, is the process that started then, not a later one given
/// the same pid.
pub fn process_alive(pid: u32, start: u64) -> bool {
    match alive_since(pid) {
        None => false,
        Some(started) => start == 0 || started.is_none_or(|s| s == start),
    }
}

/// Whether the client named by `holder` (an owner word's holder field) is alive: its pid is a
/// live process whose start time has the holder's tag.
pub fn holder_alive(holder: u32) -> bool {
    if holder == ABANDONED {
        return false;
    }
    match alive_since(holder & PID_MASK) {
        None => false,
        Some(started) => {
            let tag = holder >> PID_BITS;
            tag == UNKNOWN_START || started.is_none_or(|s| start_tag(s) == tag)
        }
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
        release(&w, mine);
        let next = try_claim(&w, 43).unwrap();
        assert_eq!((generation_of(next), pid_of(next)), (2, 43));
        abandon(&w, next);
        assert_eq!(pid_of(w.load(Ordering::Relaxed)), ABANDONED);
        assert_eq!(try_claim(&w, 44), None);
    }

    #[test]
    fn holders_name_a_process_and_its_start() {
        let me = std::process::id();
        let start = start_time(me).expect("our own start time");
        assert_eq!(start_time(me), Some(start), "a start time does not move");
        let h = current_holder().expect("a Linux pid fits");
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
        // A holder whose start time could not be read is judged by its pid alone: alive here.
        assert!(holder_alive(holder(me, 0).unwrap()));
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
