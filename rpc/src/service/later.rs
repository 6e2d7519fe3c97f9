//! Async handlers (feature `std`): `Counter::async_server(handler, spawn)` serves a handler that
//! implements the generated `CounterAsyncServer` (its methods `async fn`s), each call that came
//! inline run as a task on the caller's executor, so a handler that awaits (a timer, another
//! service, I/O) holds no server thread.
//!
//! The transport hands such a call to [`Services::dispatch_later`] with a [`Later`], its way to
//! answer afterwards; the generated `dispatch_later` decodes the arguments, spawns a task that
//! awaits the handler and sends its reply through the `Later`. A call that must go through the
//! packets (a streamed reply, a one-way call, a stream longer than the transport carries inline)
//! is served on the transport's thread, which waits while the handler's future runs as a task
//! ([`BlockOn::run`]).

use std::boxed::Box;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::thread::Thread;

use super::{Dispatch, Services};

/// What a transport tells a handler about the caller of the call it serves: whether the caller
/// gave the call up ([`cancelled`]).
pub trait Caller {
    /// Whether the caller gave the call up: it was dropped, its deadline passed, or its process
    /// died. A look at the call's port (it may read `/proc`: a few microseconds).
    fn gone(&self) -> bool;
}

std::thread_local! {
    /// The caller of the call being served on this thread, while a handler runs (or a handler's
    /// task is polled).
    static CURRENT: core::cell::Cell<Option<*const (dyn Caller + 'static)>> =
        const { core::cell::Cell::new(None) };
}

/// Runs `f` (a handler, or a poll of a handler's task) with `caller` as the current call's
/// caller, for [`cancelled`]; the one before is put back after (unwinding included).
pub fn with_caller<R>(caller: &dyn Caller, f: impl FnOnce() -> R) -> R {
    // SAFETY: the scope is dropped at the end of this function (or as it unwinds), while
    // `caller` is still borrowed.
    let _scope = unsafe { caller_scope(caller) };
    f()
}

/// Makes `caller` the current call's caller on this thread, for [`cancelled`], until the
/// returned scope drops, which puts the one before back (unwinding included): [`with_caller`]
/// without a closure, for a transport's serving loop that calls its handler in a frame of its
/// own.
///
/// # Safety
///
/// The scope must be dropped before `caller` is, on this thread: not forgotten (`mem::forget`,
/// a leak), not moved to another thread. [`cancelled`] reads `caller` through it.
#[inline]
pub unsafe fn caller_scope(caller: &dyn Caller) -> CallerScope<'_> {
    // SAFETY: only the pointer's lifetime is erased; it is read (by `cancelled`, on this thread)
    // only until the scope puts the previous one back, which the caller's contract has happen
    // while `caller` is still borrowed.
    let erased: *const (dyn Caller + 'static) = unsafe {
        core::mem::transmute::<*const (dyn Caller + '_), *const (dyn Caller + 'static)>(caller)
    };
    CallerScope {
        previous: CURRENT.with(|c| c.replace(Some(erased))),
        caller: core::marker::PhantomData,
    }
}

/// The current caller's scope ([`caller_scope`]): puts the caller before it back when it drops.
#[must_use = "the caller is current only while the scope lives"]
pub struct CallerScope<'c> {
    previous: Option<*const (dyn Caller + 'static)>,
    caller: core::marker::PhantomData<&'c dyn Caller>,
}

impl Drop for CallerScope<'_> {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

impl core::fmt::Debug for CallerScope<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallerScope").finish_non_exhaustive()
    }
}

/// Whether the caller of the call this handler serves gave it up: the call was dropped (a
/// cancelled task, a `select!` that went the other way), its deadline passed, or the caller's
/// process died. A handler doing long work polls it now and then and returns early (its answer
/// then goes nowhere). Works in blocking handlers and in async ones (within their polls); outside
/// a handler, or on a transport that cannot tell, `false`.
pub fn cancelled() -> bool {
    CURRENT.with(|c| {
        // SAFETY: a pointer set by `with_caller`, which is still running on this thread (it
        // puts the previous value back before it returns), so the caller it points to is alive.
        c.get().is_some_and(|caller| unsafe { (*caller).gone() })
    })
}

/// A transport's way to answer one inline call after the handler's task ends: given to
/// [`Services::dispatch_later`]. Dropped without [`send`](Later::send) (the task panicked, or its
/// executor dropped it), it answers `status::SERVER_ERROR`, so no caller waits for ever. As a
/// [`Caller`], it tells the task's polls whether the call's caller is gone ([`cancelled`]).
pub trait Later: core::any::Any + Send + Sync + Caller {
    /// Sends the reply: `status` (`status::OK` or an error status) and its bytes (at most
    /// [`INLINE_BYTES`](super::INLINE_BYTES)).
    fn send(self: Box<Self>, status: u32, reply: &[u8]);
}

/// Where the tasks of an async server run: any executor's spawn
/// (`|task| { tokio::spawn(task); }`).
pub trait Spawn: Send + Sync + 'static {
    /// Runs `task` to its end, on whatever thread the executor chooses.
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send>>);
}

impl<F> Spawn for F
where
    F: Fn(Pin<Box<dyn Future<Output = ()> + Send>>) + Send + Sync + 'static,
{
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self(task)
    }
}

/// An async handler seen as a blocking one, with the executor its tasks run on: each call that
/// goes through the packets runs the handler's future as a task there and waits for its end on
/// the calling thread (a server thread, which so serves no other call meanwhile; the future
/// itself runs where the handler's own timers and I/O work). The generated
/// `impl CounterServer for BlockOn<H>` is how an async server serves such calls.
pub struct BlockOn<H: ?Sized> {
    spawn: Arc<dyn Spawn>,
    handler: Arc<H>,
}

impl<H: ?Sized> core::fmt::Debug for BlockOn<H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockOn").finish_non_exhaustive()
    }
}

impl<H: ?Sized> BlockOn<H> {
    /// The handler.
    pub fn handler(&self) -> &Arc<H> {
        &self.handler
    }

    /// Where its tasks run.
    pub fn spawner(&self) -> &dyn Spawn {
        &*self.spawn
    }

    /// Runs `future` as a task of the executor and waits for its output on this thread. A task
    /// that ends without one (it panicked, or its executor dropped it) panics here, on this
    /// thread, where the transport counts the call as failed and answers `SERVER_ERROR`.
    pub fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let slot = Arc::new(Waited {
            state: std::sync::Mutex::new(None),
            thread: std::thread::current(),
        });
        let ours = Arc::clone(&slot);
        let mut fill = Fill(Some(ours));
        self.spawn.spawn(Box::pin(async move {
            let out = future.await;
            fill.put(Some(out));
        }));
        loop {
            let taken = slot.state.lock().unwrap_or_else(|e| e.into_inner()).take();
            match taken {
                Some(Some(out)) => return out,
                Some(None) => panic!("the handler's task ended without an answer"),
                None => std::thread::park(),
            }
        }
    }
}

/// Where a task's output waits for the thread that runs it ([`BlockOn::run`]): `Some(None)` if the
/// task was dropped unfinished.
struct Waited<T> {
    state: std::sync::Mutex<Option<Option<T>>>,
    thread: Thread,
}

/// The task's side of [`Waited`]: fills it once, with `None` if dropped unfilled.
struct Fill<T>(Option<Arc<Waited<T>>>);

impl<T> Fill<T> {
    fn put(&mut self, out: Option<T>) {
        if let Some(slot) = self.0.take() {
            *slot.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(out);
            slot.thread.unpark();
        }
    }
}

impl<T> Drop for Fill<T> {
    fn drop(&mut self) {
        self.put(None);
    }
}

/// What the derive generates for an async handler `H` of service `Self`: inline calls served as
/// tasks (the generated `dispatch_later`).
pub trait DispatchLater<H: ?Sized>: Dispatch<BlockOn<H>> {
    /// Spawns the task that serves call `opcode` (its fixed arguments `request`, its streamed one
    /// `body`) with `handler` and answers through `later`; or gives `later` back if this call is
    /// not served so (it then goes through the packets).
    fn dispatch_later(
        handler: &BlockOn<H>,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        later: Box<dyn Later>,
    ) -> Result<(), Box<dyn Later>>;
}

/// A derived service bound to an async handler and the executor its tasks run on
/// (`Counter::async_server(handler, spawn)`): served as [`Serving`](super::Serving) is, the
/// calls that came inline as tasks.
pub struct AsyncServing<S, H: ?Sized> {
    sync: super::Serving<S, BlockOn<H>>,
}

impl<S, H> AsyncServing<S, H> {
    /// `handler` served as service `S`, its tasks spawned by `spawn`.
    pub fn new(handler: H, spawn: impl Spawn) -> Self {
        AsyncServing {
            sync: super::Serving::new(BlockOn {
                spawn: Arc::new(spawn),
                handler: Arc::new(handler),
            }),
        }
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        self.sync.handler().handler()
    }

    /// This service and `other`, served together.
    pub fn and<T: Services>(self, other: T) -> super::Both<Self, T> {
        super::Both(self, other)
    }
}

impl<S: DispatchLater<H>, H> Services for AsyncServing<S, H> {
    #[inline]
    fn has_opcode(&self, opcode: u32) -> bool {
        self.sync.has_opcode(opcode)
    }

    fn each(
        &self,
        f: &mut dyn FnMut(&'static str, u64, &'static [u32], &'static [super::CallInfo]),
    ) {
        self.sync.each(f)
    }

    #[inline(always)]
    fn serve<'v, V: super::__private::Via<'v>>(&'v self, opcode: u32, via: V) -> V::Out {
        self.sync.serve(opcode, via)
    }

    fn dispatch_later(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        later: Box<dyn Later>,
    ) -> Result<(), Box<dyn Later>> {
        S::dispatch_later(self.sync.handler(), opcode, request, body, later)
    }

    fn answers_later(&self) -> bool {
        true
    }
}

/// The task of one call: awaits `reply` (the handler's future, its reply encoded) and sends it
/// through `later` (the generated `dispatch_later` spawns it).
pub fn task<const R: usize>(
    later: Box<dyn Later>,
    reply: impl Future<Output = [u8; R]> + Send + 'static,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let mut reply = core::pin::pin!(reply);
        // Each poll of the handler's future with the call's caller current, for `cancelled`.
        let bytes =
            core::future::poll_fn(|cx| with_caller(&*later, || reply.as_mut().poll(cx))).await;
        later.send(super::status::OK, &bytes);
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{caller_scope, cancelled, with_caller, Caller};

    /// A caller that gave its call up, or not.
    struct Gone(bool);

    impl Caller for Gone {
        fn gone(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn a_caller_is_current_only_inside_its_scope_and_the_one_before_comes_back() {
        assert!(!cancelled(), "no caller outside a handler");
        let (outer, inner) = (Gone(false), Gone(true));
        with_caller(&outer, || {
            assert!(!cancelled());
            {
                // SAFETY: dropped at the end of this block, on this thread, before `inner`.
                let _scope = unsafe { caller_scope(&inner) };
                assert!(cancelled());
            }
            assert!(!cancelled(), "the outer caller is current again");
        });
        assert!(!cancelled(), "none once the handler returned");
    }

    #[test]
    fn a_handler_that_panics_inside_a_scope_leaves_the_caller_before_it_current() {
        let gone = Gone(true);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: dropped as this closure unwinds, on this thread, before `gone`.
            let _scope = unsafe { caller_scope(&gone) };
            assert!(cancelled());
            panic!("a handler's panic");
        }));
        assert!(unwound.is_err());
        assert!(
            !cancelled(),
            "the scope put the one before (none) back as it unwound"
        );
    }
}
