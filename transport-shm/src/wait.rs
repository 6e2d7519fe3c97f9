//! Waiting for the other process: spin, then yield, then sleep, with a deadline and a liveness
//! check, so a dead peer becomes [`ferry_core::Error::Stalled`] instead of a hang, and an idle side
//! does not burn a core.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_core::{Stalled, Wait};

use crate::file::Mapped;
use crate::header::STATE_STOPPED;
use crate::owner::{holder_alive, holder_of, process_alive};
use crate::sync::{AtomicBool, Ordering};

/// Polls spent spinning before yielding.
const SPINS: u32 = 2_000;
/// Polls spent yielding before sleeping.
const YIELDS: u32 = 200;
/// The first sleep; each later one doubles, up to `MAX_SLEEP`.
const FIRST_SLEEP: Duration = Duration::from_micros(10);
/// The longest sleep between polls.
const MAX_SLEEP: Duration = Duration::from_millis(1);
/// Sleeps between two liveness checks.
const CHECK_EVERY: u32 = 8;

/// The backoff schedule with a deadline counted from the first sleep.
#[derive(Debug)]
struct Backoff {
    deadline: Cell<Duration>,
    sleeping_since: Cell<Option<Instant>>,
}

impl Backoff {
    fn new(deadline: Duration) -> Self {
        Backoff {
            deadline: Cell::new(deadline),
            sleeping_since: Cell::new(None),
        }
    }

    /// Pauses for poll number `polls`; `Ok(true)` when a liveness check is due.
    fn pause(&self, polls: u32) -> Result<bool, Stalled> {
        if polls < SPINS {
            std::hint::spin_loop();
            return Ok(false);
        }
        if polls < SPINS + YIELDS {
            std::thread::yield_now();
            return Ok(false);
        }
        let k = polls - SPINS - YIELDS;
        let now = Instant::now();
        let since = match self.sleeping_since.get() {
            Some(t) if k > 0 => t,
            _ => {
                self.sleeping_since.set(Some(now));
                now
            }
        };
        if now.duration_since(since) >= self.deadline.get() {
            return Err(Stalled);
        }
        let sleep = FIRST_SLEEP
            .checked_mul(1 << k.min(10))
            .unwrap_or(MAX_SLEEP)
            .min(MAX_SLEEP);
        std::thread::sleep(sleep);
        Ok(k.is_multiple_of(CHECK_EVERY))
    }
}

/// A client's waiting policy: gives up when the server process is gone, has stopped, or has not
/// answered before the deadline.
#[derive(Debug)]
pub struct ClientWait {
    backoff: Backoff,
    mapped: Arc<Mapped>,
}

impl ClientWait {
    pub(crate) fn new(mapped: Arc<Mapped>, deadline: Duration) -> Self {
        ClientWait {
            backoff: Backoff::new(deadline),
            mapped,
        }
    }

    /// Whether the server is still there to answer.
    pub(crate) fn server_alive(&self) -> bool {
        self.mapped.state().load(Ordering::Acquire) != STATE_STOPPED
            && process_alive(
                self.mapped.geometry().server_pid(),
                self.mapped.geometry().server_start(),
            )
    }

    /// Sets the deadline of the waits to come; returns the one it replaces.
    pub(crate) fn replace_deadline(&self, deadline: Duration) -> Duration {
        self.backoff.deadline.replace(deadline)
    }

    pub(crate) fn pause_polls(&self, polls: u32) -> Result<(), Stalled> {
        if self.backoff.pause(polls)? && !self.server_alive() {
            return Err(Stalled);
        }
        Ok(())
    }
}

impl Wait for ClientWait {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        self.pause_polls(polls)
    }
}

/// A server worker's waiting policy inside a call (the middle of a stream): gives up when the
/// port's client is gone (its owner word changed: released, abandoned or reclaimed, or its process
/// died), when the server is stopping, or at the deadline.
#[derive(Debug)]
pub struct ServerWait {
    backoff: Backoff,
    mapped: Arc<Mapped>,
    stop: Arc<AtomicBool>,
    /// The port being served and its owner word at the first slow poll.
    watched: Cell<Option<(u32, Option<u64>)>>,
}

impl ServerWait {
    pub(crate) fn new(mapped: Arc<Mapped>, stop: Arc<AtomicBool>, deadline: Duration) -> Self {
        ServerWait {
            backoff: Backoff::new(deadline),
            mapped,
            stop,
            watched: Cell::new(None),
        }
    }

    /// Starts a call on `port`. The port's owner word is read only if the wait gets slow, so the
    /// fast path never pulls the client's cache line to the server.
    pub(crate) fn watch(&self, port: u32) {
        self.watched.set(Some((port, None)));
    }

    /// The holder field of `port`'s owner word now (module `owner`): who holds its claim.
    pub(crate) fn holder(&self, port: u32) -> u32 {
        holder_of(self.mapped.owners()[port as usize].load(Ordering::Acquire))
    }

    fn client_gone(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        let Some((port, seen)) = self.watched.get() else {
            return false;
        };
        let now = self.mapped.owners()[port as usize].load(Ordering::Acquire);
        // The first look records the claim; no other client can claim the port while this worker
        // is inside a call on it, so a later change means the holder released or abandoned it.
        let owner = seen.unwrap_or(now);
        self.watched.set(Some((port, Some(owner))));
        now != owner || !holder_alive(holder_of(owner))
    }
}

impl Wait for ServerWait {
    fn pause(&self, polls: u32) -> Result<(), Stalled> {
        if self.backoff.pause(polls)? && self.client_gone() {
            return Err(Stalled);
        }
        Ok(())
    }
}
