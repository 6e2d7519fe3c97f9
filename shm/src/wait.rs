//! Waiting for the other process: spin, then yield, then sleep, with a deadline and a liveness
//! check, so a dead peer becomes [`ferry_rpc::Error::Stalled`] instead of a hang, and an idle side
//! does not burn a core. Three policies: [`ClientWait`] (a client waiting for its reply),
//! [`ServerWait`] (a worker inside a call, waiting for the client's next packet) and `IdleWait` (a
//! worker between calls, waiting for a request: no deadline, backing off to sleeps of at most
//! `IDLE_MAX_SLEEP`).

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_rpc::{Stalled, Wait};

use crate::file::Mapped;
use crate::header::STATE_STOPPED;
use crate::owner::{holder_alive, holder_of, process_alive};
use crate::sync::{AtomicBool, AtomicU64, Ordering};

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

/// Spinning polls between two readings of the clock (the first after as many): a reply that
/// comes within them costs no clock read.
const SPIN_CLOCK_EVERY: u32 = 256;

/// The backoff schedule with a deadline. The deadline is counted from the first reading of the
/// clock in the span it covers (at most `SPIN_CLOCK_EVERY` spinning polls, well under a
/// microsecond of polling, after the span's start): a client's span is its whole call ([`begin`],
/// from claiming a port to its reply, every wait of the call together), a server worker's each
/// wait. The clock is read every `SPIN_CLOCK_EVERY` spins, after every yield and after every sleep
/// (each sleep cut to the time left), so a wait ends at most one reading late: the slack is the
/// time the thread was not running between two readings, never a whole phase of the schedule.
///
/// One span at a time: its owner (a client handle's seat, a worker) runs one call or wait at a
/// time. The words are atomics, relaxed, so that a client handle is `Sync` (its seats are
/// shared by its threads, one call at a time each); the seat's hand-over orders them.
///
/// [`begin`]: Backoff::begin
#[derive(Debug)]
struct Backoff {
    /// The deadline in nanoseconds (saturated).
    deadline: AtomicU64,
    /// When the current span ends, in nanoseconds since `epoch` (0: the clock not read yet in
    /// it).
    until: AtomicU64,
    /// Whether a wait of the current span ended at the deadline.
    expired: AtomicBool,
    /// What `until` counts from.
    epoch: Instant,
    /// Whether each wait is a span of its own (a server worker's) rather than each call.
    per_wait: bool,
}

/// `d` in nanoseconds, saturated (a deadline too long for the clock is forever).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Backoff {
    fn new(deadline: Duration, per_wait: bool) -> Self {
        Backoff {
            deadline: AtomicU64::new(nanos(deadline)),
            until: AtomicU64::new(0),
            expired: AtomicBool::new(false),
            epoch: Instant::now(),
            per_wait,
        }
    }

    /// Starts a span: the deadline counts again.
    #[inline(always)]
    fn begin(&self) {
        self.until.store(0, Ordering::Relaxed);
        self.expired.store(false, Ordering::Relaxed);
    }

    /// The time left in the span, reading the clock (the first reading fixes the span's end);
    /// `Err` once the deadline has passed.
    fn left(&self) -> Result<Duration, Stalled> {
        let now = nanos(self.epoch.elapsed());
        let until = match self.until.load(Ordering::Relaxed) {
            0 => {
                let until = now
                    .saturating_add(self.deadline.load(Ordering::Relaxed))
                    .max(1);
                self.until.store(until, Ordering::Relaxed);
                until
            }
            until => until,
        };
        match until.saturating_sub(now) {
            0 => {
                self.expired.store(true, Ordering::Relaxed);
                Err(Stalled)
            }
            left => Ok(Duration::from_nanos(left)),
        }
    }

    /// Pauses for poll number `polls` of a wait; `Ok(true)` when a liveness check is due.
    fn pause(&self, polls: u32) -> Result<bool, Stalled> {
        if self.per_wait && polls == 0 {
            self.begin();
        }
        if polls < SPINS {
            std::hint::spin_loop();
            if polls % SPIN_CLOCK_EVERY == SPIN_CLOCK_EVERY - 1 {
                self.left()?;
            }
            return Ok(false);
        }
        if polls < SPINS + YIELDS {
            std::thread::yield_now();
            self.left()?;
            return Ok(false);
        }
        let k = polls - SPINS - YIELDS;
        let left = self.left()?;
        let sleep = FIRST_SLEEP
            .checked_mul(1 << k.min(10))
            .unwrap_or(MAX_SLEEP)
            .min(MAX_SLEEP)
            .min(left);
        std::thread::sleep(sleep);
        self.left()?;
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
            backoff: Backoff::new(deadline, false),
            mapped,
        }
    }

    /// The file this policy waits on.
    pub(crate) fn mapped(&self) -> &Mapped {
        &self.mapped
    }

    /// Whether the server is still there to answer.
    pub(crate) fn server_alive(&self) -> bool {
        server_alive(&self.mapped)
    }

    /// Sets the deadline of the calls to come; returns the one it replaces.
    pub(crate) fn replace_deadline(&self, deadline: Duration) -> Duration {
        // (Not a swap: only the seat's own call sets it.)
        let previous = self.backoff.deadline.load(Ordering::Relaxed);
        self.backoff
            .deadline
            .store(nanos(deadline), Ordering::Relaxed);
        Duration::from_nanos(previous)
    }

    /// Starts a call: its deadline counts from here (from the first reading of the clock, after
    /// a few hundred polls at most), over every wait of the call.
    #[inline(always)]
    pub(crate) fn begin_call(&self) {
        self.backoff.begin();
    }

    /// Whether a wait of the current call ended because its deadline passed.
    pub(crate) fn expired(&self) -> bool {
        self.backoff.expired.load(Ordering::Relaxed)
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

/// Whether the server of `mapped` is still there to answer: not stopped, and its process alive.
pub(crate) fn server_alive(mapped: &Mapped) -> bool {
    mapped.state().load(Ordering::Acquire) != STATE_STOPPED
        && process_alive(
            mapped.geometry().server_pid(),
            mapped.geometry().server_start(),
        )
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
            backoff: Backoff::new(deadline, true),
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

/// How long an idle worker polls hot (a request usually follows soon after the last).
const IDLE_HOT: Duration = Duration::from_micros(100);
/// How long since its last request an idle worker yields between polls, before it sleeps.
const IDLE_YIELDING: Duration = Duration::from_millis(2);
/// An idle worker's first sleep; each later one doubles, up to `IDLE_MAX_SLEEP`.
const IDLE_FIRST_SLEEP: Duration = Duration::from_micros(50);
/// The longest sleep of an idle worker between two polls by default (`ServerConfig::idle_sleep`):
/// the most a request that comes to a server idle for long waits before a worker sees it.
pub(crate) const IDLE_MAX_SLEEP: Duration = Duration::from_millis(2);
/// Idle polls between two readings of the clock.
const IDLE_CLOCK_EVERY: u32 = 64;

/// A server worker's waiting policy between calls, when it finds no request: it polls hot for
/// `IDLE_HOT`, yields between polls until `IDLE_YIELDING`, then sleeps, each sleep twice the last,
/// from `IDLE_FIRST_SLEEP` (or the bound, if smaller) up to a bound (`IDLE_MAX_SLEEP` by default). Work starts it over ([`IdleWait::reset`]), so a
/// request after a short gap finds the worker polling, and only one after a long gap waits (at
/// most one sleep). The clock is read every `IDLE_CLOCK_EVERY` polls, the first time after that
/// many: a busy worker, idle between calls only, never reads it.
#[derive(Debug)]
pub(crate) struct IdleWait {
    /// Polls since the last work (wrapping; only compared while below `IDLE_CLOCK_EVERY`).
    polls: u32,
    /// When the idle spell began (read at the `IDLE_CLOCK_EVERY`th poll).
    since: Instant,
    phase: Idle,
    /// The next sleep, in the sleeping phase.
    sleep: Duration,
    /// The longest sleep; zero: yield instead of sleeping.
    max_sleep: Duration,
}

/// How an idle worker waits before its next poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Idle {
    Hot,
    Yield,
    Sleep,
}

impl IdleWait {
    /// A policy whose sleeps grow up to `max_sleep` (zero: an idle worker yields, never sleeps).
    pub(crate) fn new(max_sleep: Duration) -> Self {
        IdleWait {
            polls: 0,
            since: Instant::now(),
            phase: Idle::Hot,
            sleep: IDLE_FIRST_SLEEP.min(max_sleep),
            max_sleep,
        }
    }

    /// The worker found work: the next idle spell starts hot.
    #[inline]
    pub(crate) fn reset(&mut self) {
        self.polls = 0;
    }

    /// The worker found no work: waits before its next poll. Returns whether it yielded or
    /// slept (a worker back from either looks at every port again: its view may be old).
    pub(crate) fn pause(&mut self) -> bool {
        if self.polls == 0 {
            self.phase = Idle::Hot;
            self.sleep = IDLE_FIRST_SLEEP.min(self.max_sleep);
        }
        self.polls = self.polls.wrapping_add(1);
        if self.polls == IDLE_CLOCK_EVERY {
            self.since = Instant::now();
        } else if self.phase != Idle::Sleep && self.polls.is_multiple_of(IDLE_CLOCK_EVERY) {
            // (Sleeping lasts until the next work: the clock need not be read again.)
            let idle = self.since.elapsed();
            self.phase = if idle < IDLE_HOT {
                Idle::Hot
            } else if idle < IDLE_YIELDING {
                Idle::Yield
            } else {
                Idle::Sleep
            };
        }
        match self.phase {
            Idle::Hot => {
                std::hint::spin_loop();
                return false;
            }
            Idle::Yield => std::thread::yield_now(),
            Idle::Sleep if self.max_sleep.is_zero() => std::thread::yield_now(),
            Idle::Sleep => {
                std::thread::sleep(self.sleep);
                self.sleep = (self.sleep * 2).min(self.max_sleep);
            }
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// An idle worker's sleeps grow to the bound and stay there; work starts it over, hot.
    #[test]
    fn idle_wait_backs_off_to_bounded_sleeps_and_resets_on_work() {
        let mut idle = IdleWait::new(IDLE_MAX_SLEEP);
        let start = Instant::now();
        while idle.phase != Idle::Sleep {
            idle.pause();
            assert!(start.elapsed() < Duration::from_secs(60), "never slept");
        }
        assert!(start.elapsed() >= IDLE_YIELDING);
        let mut sleeps = vec![idle.sleep];
        for _ in 0..12 {
            idle.pause();
            sleeps.push(idle.sleep);
        }
        assert!(sleeps.windows(2).all(|w| w[1] >= w[0]), "{sleeps:?}");
        assert_eq!(*sleeps.last().unwrap(), IDLE_MAX_SLEEP, "{sleeps:?}");
        idle.reset();
        idle.pause();
        assert_eq!((idle.phase, idle.sleep), (Idle::Hot, IDLE_FIRST_SLEEP));
    }

    /// A bound below the first sleep is the first sleep too; a zero bound never sleeps.
    #[test]
    fn a_smaller_bound_caps_every_sleep_and_zero_only_yields() {
        let short = Duration::from_micros(20);
        let mut idle = IdleWait::new(short);
        assert_eq!(idle.sleep, short);
        let mut never = IdleWait::new(Duration::ZERO);
        let start = Instant::now();
        while never.phase != Idle::Sleep {
            never.pause();
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "never reached the sleeping phase"
            );
        }
        for _ in 0..100 {
            never.pause();
            idle.pause();
        }
        assert_eq!(never.sleep, Duration::ZERO);
        assert!(idle.sleep <= short);
    }
}
