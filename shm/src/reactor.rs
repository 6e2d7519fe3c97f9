//! A handle's reactor: the one thread per handle that wakes the tasks of awaited calls (module
//! `awaited` has the protocol) by the ready bitmap and the doorbell, at their deadlines, and all
//! of them when the server dies.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::file::Mapped;
use crate::sync::{word_bit, AtomicBool, Ordering};
use crate::wait::server_alive;

/// The longest a reactor sleeps at once while calls wait.
pub const TICK: Duration = Duration::from_millis(1);
/// How often a reactor with calls waiting checks that the server is alive.
const LIVENESS: Duration = Duration::from_millis(50);
/// Looks at the ready bits a reactor takes after waking calls before it sleeps again (a few
/// microseconds): replies that come in bursts are taken without a ring each.
const AWAKE_LOOKS: u32 = 32;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A handle's reactor: wakes the tasks whose calls wait (see the module docs).
#[derive(Debug)]
pub(crate) struct Reactor {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    mapped: Arc<Mapped>,
    state: Mutex<State>,
    /// Signalled when a call registers with no call waiting before, or the handle closes.
    work: Condvar,
    /// Set once the server was found dead: every call fails.
    server_gone: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// The calls waiting, by their registration number.
    waiting: HashMap<u64, Waiting>,
    /// The waiting call on each port whose reply it waits for.
    by_port: HashMap<u32, u64>,
    /// One bit per port in `by_port`, as the ready bitmap's words.
    mine: Vec<u32>,
    /// The earliest time a waiting call is to be woken at (a deadline, the end of a pause).
    earliest: Option<Instant>,
    next_id: u64,
    closed: bool,
}

#[derive(Debug)]
struct Waiting {
    port: Option<u32>,
    until: Instant,
    waker: Waker,
}

impl State {
    fn remove(&mut self, id: u64) -> Option<Waiting> {
        let waiting = self.waiting.remove(&id)?;
        if let Some(port) = waiting.port {
            self.by_port.remove(&port);
            let (w, bit) = word_bit(port as usize);
            self.mine[w] &= !bit;
        }
        Some(waiting)
    }
}

impl Reactor {
    pub(crate) fn new(mapped: Arc<Mapped>) -> Reactor {
        let words = mapped.inline_ready().len();
        let shared = Arc::new(Shared {
            mapped,
            state: Mutex::new(State {
                mine: vec![0; words],
                ..State::default()
            }),
            work: Condvar::new(),
            server_gone: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("ferry-reactor".into())
                .spawn(move || shared.run())
                .expect("starting the thread that wakes a ferry handle's awaited calls")
        };
        Reactor {
            shared,
            thread: Mutex::new(Some(thread)),
        }
    }

    /// Registers (or updates: `id`) a call's waker, to be woken when `port`'s ready bit is set or
    /// at `until`. Returns its registration number.
    pub(crate) fn register(
        &self,
        id: Option<u64>,
        port: Option<u32>,
        until: Instant,
        waker: &Waker,
    ) -> u64 {
        let mut st = lock(&self.shared.state);
        let was_idle = st.waiting.is_empty();
        let id = id.unwrap_or_else(|| {
            st.next_id += 1;
            st.next_id
        });
        match st.waiting.get_mut(&id) {
            Some(w) => w.waker.clone_from(waker),
            None => {
                if let Some(port) = port {
                    st.by_port.insert(port, id);
                    let (w, bit) = word_bit(port as usize);
                    st.mine[w] |= bit;
                }
                st.waiting.insert(
                    id,
                    Waiting {
                        port,
                        until,
                        waker: waker.clone(),
                    },
                );
            }
        }
        st.earliest = Some(st.earliest.map_or(until, |e| e.min(until)));
        drop(st);
        if was_idle {
            self.shared.work.notify_one();
        }
        id
    }

    /// Forgets a registration (a call that completed or was dropped).
    pub(crate) fn unregister(&self, id: u64) {
        lock(&self.shared.state).remove(id);
    }

    pub(crate) fn server_gone(&self) -> bool {
        self.shared.server_gone.load(Ordering::Relaxed)
    }

    /// Ends the reactor's thread (the handle is dropped: no call waits any more).
    pub(crate) fn close(&self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_one();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn run(&self) {
        let doorbell = self.mapped.doorbell();
        let ready = self.mapped.inline_ready();
        let mut checked = Instant::now();
        loop {
            let seen = doorbell.rings.load(Ordering::SeqCst);
            {
                let mut st = lock(&self.state);
                loop {
                    if st.closed {
                        return;
                    }
                    if !st.waiting.is_empty() {
                        break;
                    }
                    st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
            // Looks while replies come (no worker rings meanwhile: this reactor is not among the
            // sleepers), then once more counted among them before it sleeps.
            let mut looks = 0;
            let mut woke = self.scan(ready).0;
            while !woke && looks < AWAKE_LOOKS {
                std::hint::spin_loop();
                woke = self.scan(ready).0;
                looks += 1;
            }
            if !woke {
                // SYNC (async wake): SeqCst, counted among the sleepers before the last look at
                // the ready bits; pairs with the worker's SeqCst set of a bit then load of the
                // count (`ring`).
                doorbell.sleepers.fetch_add(1, Ordering::SeqCst);
                let (woke, wake_at) = self.scan(ready);
                if !woke {
                    let now = Instant::now();
                    let nap =
                        wake_at.map_or(TICK, |at| at.saturating_duration_since(now).min(TICK));
                    if !nap.is_zero() {
                        sleep_on(&doorbell.rings, seen, nap);
                    }
                }
                doorbell.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
            if checked.elapsed() >= LIVENESS {
                checked = Instant::now();
                if !server_alive(&self.mapped) {
                    self.server_gone.store(true, Ordering::Relaxed);
                    let all: Vec<Waker> = {
                        let mut st = lock(&self.state);
                        let ids: Vec<u64> = st.waiting.keys().copied().collect();
                        ids.into_iter()
                            .filter_map(|id| st.remove(id).map(|w| w.waker))
                            .collect()
                    };
                    all.into_iter().for_each(Waker::wake);
                }
            }
        }
    }

    /// Wakes the waiting calls whose ready bits are set (clearing them) or whose time has come.
    /// Returns whether any was woken, and the earliest time one is to be woken at.
    fn scan(&self, ready: &[crate::sync::AtomicU32]) -> (bool, Option<Instant>) {
        let mut wakers = Vec::new();
        let mut st = lock(&self.state);
        for (w, word) in ready.iter().enumerate() {
            let mine = st.mine[w];
            if mine == 0 {
                continue;
            }
            // SYNC (async wake): see `run`.
            let bits = word.load(Ordering::SeqCst) & mine;
            if bits == 0 {
                continue;
            }
            word.fetch_and(!bits, Ordering::Relaxed);
            let mut left = bits;
            while left != 0 {
                let port = (w * 32) as u32 + left.trailing_zeros();
                left &= left - 1;
                if let Some(id) = st.by_port.get(&port).copied() {
                    wakers.extend(st.remove(id).map(|w| w.waker));
                }
            }
        }
        let now = Instant::now();
        if st.earliest.is_some_and(|e| e <= now) {
            let due: Vec<u64> = st
                .waiting
                .iter()
                .filter(|(_, w)| w.until <= now)
                .map(|(id, _)| *id)
                .collect();
            for id in due {
                wakers.extend(st.remove(id).map(|w| w.waker));
            }
            st.earliest = st.waiting.values().map(|w| w.until).min();
        }
        let earliest = st.earliest;
        drop(st);
        let woke = !wakers.is_empty();
        wakers.into_iter().for_each(Waker::wake);
        (woke, earliest)
    }
}

/// Sleeps while `rings` holds `seen`, at most `nap` (under a second): a futex shared between
/// processes, since the ringers are other processes on the same mapped file.
#[cfg(not(loom))]
fn sleep_on(rings: &crate::sync::AtomicU32, seen: u32, nap: Duration) {
    let timeout = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: nap.subsec_nanos() as _,
    };
    let _ = rustix::thread::futex::wait(
        rings,
        rustix::thread::futex::Flags::empty(),
        seen,
        Some(&timeout),
    );
}

/// Under loom (whose models never run a reactor), a plain sleep.
#[cfg(loom)]
fn sleep_on(_rings: &crate::sync::AtomicU32, _seen: u32, nap: Duration) {
    std::thread::sleep(nap);
}
