//! Owner words: which client process holds each port, and how a dead one's port is reclaimed.
//!
//! Each port has one `u64` owner word in the file, after the region:
//!
//! ```text
//! bits 63..32  generation   +1 at every claim of the port
//! bits 31..0   pid          0: free; ABANDONED: given up by a live client; else the holder
//! ```
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

/// The pid in an owner word (0: free).
pub const fn pid_of(word: u64) -> u32 {
    word as u32
}

/// The generation in an owner word.
pub const fn generation_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// An owner word.
pub const fn pack(generation: u32, pid: u32) -> u64 {
    ((generation as u64) << 32) | pid as u64
}

/// Claims `word` for `pid` if it is free; returns the new word. Only a free word can be claimed.
pub(crate) fn try_claim(word: &AtomicU64, pid: u32) -> Option<u64> {
    let current = word.load(Ordering::Relaxed);
    if pid_of(current) != 0 {
        return None;
    }
    let new = pack(generation_of(current).wrapping_add(1), pid);
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

/// Whether process `pid` is alive: it exists and is not a zombie (a killed child its parent has
/// not reaped yet still answers `kill(pid, 0)`).
pub fn process_alive(pid: u32) -> bool {
    if pid == 0 || pid == ABANDONED || pid > i32::MAX as u32 {
        return false;
    }
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::SRCH => return false,
        // EPERM: it exists but belongs to someone else.
        Err(_) => return true,
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => match stat.rfind(") ") {
            Some(at) => !matches!(stat.as_bytes().get(at + 2), Some(b'Z' | b'X')),
            None => true,
        },
        Err(_) => false,
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
    fn liveness() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(0));
        assert!(!process_alive(ABANDONED));
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
        assert!(!process_alive(pid));
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
