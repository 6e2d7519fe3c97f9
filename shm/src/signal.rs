//! Stopping a server on SIGINT or SIGTERM ([`ShmServer::serve_until_signal`]).
//!
//! Two parts. A server's own threads (its workers and its monitor) start with both signals
//! blocked ([`ThreadMask::block_stop_signals`] around their spawning: a thread inherits the mask
//! of the thread that starts it), so a stop signal is never taken by a thread inside a handler or
//! a poll. And while some thread serves until a signal ([`Catching`]), the process's action for
//! each of the two is a handler that counts it and wakes the waiting threads through a futex on
//! that count; the waiting thread unblocks both for itself, so at least one thread takes them.
//! When the last waiter is done, the actions that were there before are put back.
//!
//! ```text
//!  thread calling serve_until_signal     any thread that takes the signal
//!  Catching::start: install handlers,
//!    unblock here, note CAUGHT = n
//!  futex wait while CAUGHT == n  ◀──────  on_stop_signal: LAST = signal; CAUGHT += 1; futex wake
//!  drain (a second signal: CAUGHT ≥ n + 2
//!    cuts it short), stop, remove the file
//!  Catching::drop: last waiter puts the
//!    previous actions back; mask restored
//! ```
//!
//! [`ShmServer::serve_until_signal`]: crate::ShmServer::serve_until_signal

use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use libc::c_int;
use rustix::thread::futex;

/// A signal that stops a server serving until one comes ([`ShmServer::serve_until_signal`]).
///
/// [`ShmServer::serve_until_signal`]: crate::ShmServer::serve_until_signal
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in the terminal the program runs in.
    Interrupt,
    /// SIGTERM: `kill PID`, or a service manager stopping the program.
    Terminate,
}

impl StopSignal {
    /// Every signal a server serving until a signal stops on.
    const ALL: [StopSignal; 2] = [StopSignal::Interrupt, StopSignal::Terminate];

    /// The signal's number: a program that follows the shell's convention for a process ended
    /// by a signal exits with 128 plus this.
    pub fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => libc::SIGINT,
            StopSignal::Terminate => libc::SIGTERM,
        }
    }

    fn from_number(number: c_int) -> Option<StopSignal> {
        StopSignal::ALL.into_iter().find(|s| s.number() == number)
    }
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        })
    }
}

/// Stop signals caught since the process started (wrapping): the word waiting threads sleep on.
static CAUGHT: AtomicU32 = AtomicU32::new(0);
/// The number of the last stop signal caught.
static LAST: AtomicI32 = AtomicI32::new(0);

/// The action for SIGINT and SIGTERM while some thread serves until a signal: counts the signal
/// and wakes every waiting thread. Async-signal-safe: two atomic stores on lock-free atomics and
/// a futex system call, with `errno` put back as it was.
extern "C" fn on_stop_signal(signal: c_int) {
    // SAFETY: `__errno_location` returns the address of the calling thread's `errno`, valid for
    // as long as the thread lives; reading it in a signal handler is what saving it means.
    let errno = unsafe { *libc::__errno_location() };
    LAST.store(signal, Ordering::SeqCst);
    CAUGHT.fetch_add(1, Ordering::SeqCst);
    let _ = futex::wake(&CAUGHT, futex::Flags::PRIVATE, u32::MAX);
    // SAFETY: as above; the interrupted code finds `errno` as it left it.
    unsafe { *libc::__errno_location() = errno };
}

/// The set of the stop signals.
fn stop_set() -> libc::sigset_t {
    // SAFETY: a `sigset_t` is plain bits, for which all zeros is a valid value; `sigemptyset`
    // below makes it the empty set whatever the representation.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `sigset_t`.
    unsafe { libc::sigemptyset(&mut set) };
    for signal in StopSignal::ALL {
        // SAFETY: as above, and SIGINT and SIGTERM are valid signal numbers (it cannot fail).
        unsafe { libc::sigaddset(&mut set, signal.number()) };
    }
    set
}

/// The calling thread's signal mask with the stop signals blocked or unblocked; the mask it
/// replaced is put back when dropped.
pub(crate) struct ThreadMask {
    previous: libc::sigset_t,
    /// The mask is the thread's: the guard stays on it.
    _thread: PhantomData<*const ()>,
}

impl ThreadMask {
    /// Blocks SIGINT and SIGTERM in this thread. Threads started while this lives inherit the
    /// mask: a server starts its own threads under one, so that none of them takes a stop
    /// signal (it goes to a thread of the program that does not block it).
    pub(crate) fn block_stop_signals() -> ThreadMask {
        ThreadMask::change(libc::SIG_BLOCK)
    }

    /// Unblocks SIGINT and SIGTERM in this thread.
    fn unblock_stop_signals() -> ThreadMask {
        ThreadMask::change(libc::SIG_UNBLOCK)
    }

    fn change(how: c_int) -> ThreadMask {
        let set = stop_set();
        // SAFETY: as in `stop_set`; overwritten below with the thread's mask.
        let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: both sets are valid `sigset_t`s and `how` is SIG_BLOCK or SIG_UNBLOCK, so it
        // cannot fail (its only error is EINVAL for a bad `how`); it changes this thread alone.
        unsafe { libc::pthread_sigmask(how, &set, &mut previous) };
        ThreadMask {
            previous,
            _thread: PhantomData,
        }
    }
}

impl Drop for ThreadMask {
    fn drop(&mut self) {
        // SAFETY: `previous` is the mask `pthread_sigmask` returned for this thread (a guard is
        // made and dropped on one thread: it is not `Send`).
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut()) };
    }
}

/// The process's actions for the stop signals this module replaced, while some thread waits
/// for one ([`Catching`]): the first waiter installs `on_stop_signal`, the last puts these back.
struct Installed {
    waiters: usize,
    /// Each replaced signal and its previous action (a signal that was ignored is left ignored,
    /// and not listed).
    previous: Vec<(c_int, libc::sigaction)>,
}

static INSTALLED: Mutex<Installed> = Mutex::new(Installed {
    waiters: 0,
    previous: Vec::new(),
});

/// Makes `on_stop_signal` the action for `signal`, unless the signal is ignored (the program
/// was started with it ignored, as a shell does for `nohup` or a script's background job: it
/// stays so, as whoever started the program asked). Returns the action replaced.
fn install(signal: c_int) -> std::io::Result<Option<libc::sigaction>> {
    // SAFETY: a `sigaction` is plain data (a handler address, a mask, flags), for which all
    // zeros is a valid value (the default action); every field used is set below.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `previous`, a valid pointer.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut previous) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if previous.sa_sigaction == libc::SIG_IGN {
        return Ok(None);
    }
    // SAFETY: as above.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_stop_signal as extern "C" fn(c_int) as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa_mask` is a valid, writable `sigset_t`: no signal is blocked in the handler.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    // SAFETY: `on_stop_signal` is async-signal-safe (its docs); both pointers are valid.
    if unsafe { libc::sigaction(signal, &action, &mut previous) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Some(previous))
}

/// Puts back the actions `install` replaced.
fn restore(previous: &mut Vec<(c_int, libc::sigaction)>) {
    for (signal, action) in previous.drain(..) {
        // SAFETY: `action` is what `sigaction` returned for `signal` when `install` replaced it:
        // an action the program had set (or the default).
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
}

/// A thread waiting for a stop signal: while one lives, SIGINT and SIGTERM are counted instead
/// of taking their previous action, and this thread has them unblocked.
pub(crate) struct Catching {
    /// `CAUGHT` when this waiter began.
    start: u32,
    _mask: ThreadMask,
}

impl Catching {
    /// Starts catching the stop signals (installing the handler if no other thread waits).
    pub(crate) fn start() -> std::io::Result<Catching> {
        let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
        // Read before the handler is installed: a signal that comes once it is counts.
        let start = CAUGHT.load(Ordering::SeqCst);
        if installed.waiters == 0 {
            for signal in StopSignal::ALL {
                match install(signal.number()) {
                    Ok(previous) => installed
                        .previous
                        .extend(previous.map(|p| (signal.number(), p))),
                    Err(e) => {
                        restore(&mut installed.previous);
                        return Err(e);
                    }
                }
            }
        }
        installed.waiters += 1;
        Ok(Catching {
            start,
            _mask: ThreadMask::unblock_stop_signals(),
        })
    }

    /// Stop signals caught since this waiter began.
    pub(crate) fn caught(&self) -> u32 {
        CAUGHT.load(Ordering::SeqCst).wrapping_sub(self.start)
    }

    /// Sleeps until a stop signal comes; returns which.
    pub(crate) fn wait(&self) -> StopSignal {
        loop {
            let now = CAUGHT.load(Ordering::SeqCst);
            if now != self.start {
                return StopSignal::from_number(LAST.load(Ordering::SeqCst))
                    .unwrap_or(StopSignal::Terminate);
            }
            // Returns at once if the word is no longer `now` (a signal came since the load),
            // when woken, or when a signal interrupts it: each time the loop looks again.
            let _ = futex::wait(&CAUGHT, futex::Flags::PRIVATE, now, None);
        }
    }
}

impl Drop for Catching {
    fn drop(&mut self) {
        let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
        installed.waiters -= 1;
        if installed.waiters == 0 {
            restore(&mut installed.previous);
        }
        // (The mask is put back after this, when the field is dropped.)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::{path_for, ServerConfig, ShmServer};
    use ferry_demo::{Demo, DemoService};

    /// SIGTERMs the program's own handler saw.
    static OWN: AtomicU32 = AtomicU32::new(0);

    extern "C" fn own_handler(_: c_int) {
        OWN.fetch_add(1, Ordering::SeqCst);
    }

    /// The current action's handler for `signal`.
    fn handler_of(signal: c_int) -> libc::sighandler_t {
        // SAFETY: as in `install`.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as in `install`: reads the action alone.
        unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) };
        current.sa_sigaction
    }

    /// Sets `signal`'s action to `handler` (a function of this module, or SIG_IGN).
    fn set_handler(signal: c_int, handler: libc::sighandler_t) {
        // SAFETY: as in `install`.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = handler;
        // SAFETY: `handler` is SIG_IGN or `own_handler`, which only adds to an atomic.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }

    /// A program with a SIGTERM handler of its own and SIGINT ignored: serving until a signal
    /// stops on SIGTERM, leaves SIGINT ignored meanwhile, and puts the program's handler back.
    /// (In a child process: the actions belong to the whole process.)
    #[test]
    fn the_actions_before_are_put_back_and_an_ignored_signal_stays_ignored() {
        if !ferry_testkit::in_child(
            "signal::tests::the_actions_before_are_put_back_and_an_ignored_signal_stays_ignored",
            "FERRY_SIGNAL_TEST_CHILD",
        ) {
            return;
        }
        let _watchdog =
            ferry_testkit::Watchdog::new("serve until a signal", Duration::from_secs(60));
        let own = own_handler as extern "C" fn(c_int) as libc::sighandler_t;
        set_handler(libc::SIGTERM, own);
        set_handler(libc::SIGINT, libc::SIG_IGN);
        let path = path_for(&format!("test-signal-{}", std::process::id()));
        let server =
            ShmServer::start(&path, ServerConfig::default(), Demo::server(DemoService)).unwrap();
        let served = std::thread::spawn(move || server.serve_until_signal(Duration::from_secs(5)));
        // Until the server is serving until a signal, a SIGTERM goes to the program's handler.
        while handler_of(libc::SIGTERM) == own {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(handler_of(libc::SIGINT), libc::SIG_IGN);
        // SAFETY: an ignored signal, sent to this process: nothing runs.
        unsafe { libc::kill(std::process::id() as libc::pid_t, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!served.is_finished(), "stopped by an ignored SIGINT");
        let before = OWN.load(Ordering::SeqCst);
        // SAFETY: SIGTERM's action is `on_stop_signal` now (checked above).
        unsafe { libc::kill(std::process::id() as libc::pid_t, libc::SIGTERM) };
        let (signal, report) = served.join().unwrap().unwrap();
        assert_eq!(signal, StopSignal::Terminate);
        assert!(report.drained);
        assert!(!path.exists());
        assert_eq!(
            OWN.load(Ordering::SeqCst),
            before,
            "the program's handler ran"
        );
        assert_eq!(handler_of(libc::SIGTERM), own);
        assert_eq!(handler_of(libc::SIGINT), libc::SIG_IGN);
    }
}
