//! Helper threads: where an async site ([`AsyncSite`](super::AsyncSite)) runs the calls it
//! cannot await in place ([`AsyncSite::blocking`](super::AsyncSite::blocking): a one-way call, a
//! streamed reply), while the caller's task waits for the result without holding a thread.
//!
//! ```text
//!  task                          Helpers<S>                       helper thread (its own S)
//!  run(make, deadline, call) ──▶ queue the job; start a thread ─▶ take a job, call(&s, deadline)
//!  await Done ◀───────────────── (if none idle, fewer than most)  result into the slot, wake
//! ```
//!
//! A transport keeps one `Helpers` per client handle; users never name it.

use std::boxed::Box;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How long a helper thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Job<S> = Box<dyn FnOnce(&S) + Send>;

/// Threads on which a transport's async client runs blocking calls, each thread with a site of
/// its own (an `S`, made when the thread starts): at most `most` at once (other calls queue),
/// started when first needed, ended after a while idle or when the `Helpers` is dropped (once
/// the calls queued are done).
pub struct Helpers<S> {
    shared: Arc<Shared<S>>,
    most: usize,
    name: &'static str,
}

impl<S> core::fmt::Debug for Helpers<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Helpers")
            .field("most", &self.most)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

struct Shared<S> {
    state: Mutex<State<S>>,
    work: Condvar,
}

struct State<S> {
    queue: VecDeque<Job<S>>,
    threads: usize,
    idle: usize,
    closed: bool,
}

impl<S: Send + Sync + 'static> Helpers<S> {
    /// Helper threads named `name`, at most `most` of them (at least one).
    pub fn new(most: usize, name: &'static str) -> Self {
        Helpers {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    closed: false,
                }),
                work: Condvar::new(),
            }),
            most: most.max(1),
            name,
        }
    }

    /// Runs `call(site, deadline)` on a helper thread, starting one (whose site `make(index)`
    /// makes, `index` counting the threads started) if none is idle and fewer than the most run;
    /// resolves to its result. A `call` that panics has its panic go on in the task that awaits.
    pub fn run<T: Send + 'static>(
        &self,
        make: impl FnOnce(usize) -> S,
        deadline: Option<Duration>,
        call: impl FnOnce(&S, Option<Duration>) -> T + Send + 'static,
    ) -> impl Future<Output = T> + Send + 'static {
        let slot = Arc::new(Slot {
            state: Mutex::new((None, None)),
        });
        let theirs = Arc::clone(&slot);
        let job: Job<S> = Box::new(move |site: &S| {
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(site, deadline)));
            let waker = {
                let mut st = lock(&theirs.state);
                st.0 = Some(result);
                st.1.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        self.submit(make, job);
        Done(slot)
    }

    fn submit(&self, make: impl FnOnce(usize) -> S, job: Job<S>) {
        let mut st = lock(&self.shared.state);
        st.queue.push_back(job);
        if st.idle == 0 && st.threads < self.most {
            let site = Arc::new(make(st.threads));
            let (shared, theirs) = (Arc::clone(&self.shared), Arc::clone(&site));
            let started = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || shared.run(&theirs));
            match started {
                Ok(_) => st.threads += 1,
                // No thread to run it on, and none running: the job runs here.
                Err(_) if st.threads == 0 => {
                    let job = st.queue.pop_back();
                    drop(st);
                    if let Some(job) = job {
                        job(&site);
                    }
                    return;
                }
                Err(_) => {}
            }
        }
        drop(st);
        self.shared.work.notify_one();
    }
}

impl<S> Drop for Helpers<S> {
    /// Ends the helper threads once the jobs queued are done.
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_all();
    }
}

impl<S> Shared<S> {
    fn run(&self, site: &S) {
        loop {
            let job = {
                let mut st = lock(&self.state);
                loop {
                    if let Some(job) = st.queue.pop_front() {
                        break job;
                    }
                    if st.closed {
                        st.threads -= 1;
                        return;
                    }
                    st.idle += 1;
                    let (next, timeout) = self
                        .work
                        .wait_timeout(st, IDLE)
                        .unwrap_or_else(|e| e.into_inner());
                    st = next;
                    st.idle -= 1;
                    if timeout.timed_out() && st.queue.is_empty() {
                        st.threads -= 1;
                        return;
                    }
                }
            };
            job(site);
        }
    }
}

/// Where a helper thread's result waits for its task.
struct Slot<T> {
    state: Mutex<(Option<std::thread::Result<T>>, Option<Waker>)>,
}

/// The task's side of a [`Slot`].
struct Done<T>(Arc<Slot<T>>);

impl<T> Future for Done<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut st = lock(&self.0.state);
        match st.0.take() {
            Some(Ok(value)) => Poll::Ready(value),
            // The call panicked on the helper thread: the panic goes on in the task.
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => {
                st.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
