//! A program thread on the CPU: where it is in the launch, its block's barrier and its region,
//! kept per host thread. The runner (`sim::run_program`) [`enter`]s each thread it starts;
//! device code reads them through `program::thread_idx`, `sync_threads` and `client` as it reads
//! the GPU's special registers. This module names nothing of the runner: device code depends on
//! it, the runner on device code.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::Place;
use crate::Descriptor;

/// How long a program thread waits for one answer before its call fails (a lost answer fails
/// the run instead of hanging it).
const ANSWER_LIMIT: Duration = Duration::from_secs(60);

std::thread_local! {
    /// The launch place and the region of the program thread running here.
    static PROGRAM: core::cell::Cell<Option<(Place, Descriptor)>> =
        const { core::cell::Cell::new(None) };
    /// The barrier of the block the program thread running here belongs to.
    static BLOCK: core::cell::RefCell<Option<Arc<Barrier>>> =
        const { core::cell::RefCell::new(None) };
    /// When the call this thread waits for started waiting ([`ProgramWait`]).
    static SINCE: core::cell::Cell<Option<Instant>> = const { core::cell::Cell::new(None) };
}

/// Makes the calling host thread a program thread at `place`, calling the host through the
/// region `descriptor` names and meeting its block at `barrier`.
pub(crate) fn enter(place: Place, descriptor: Descriptor, barrier: Arc<Barrier>) {
    PROGRAM.with(|p| p.set(Some((place, descriptor))));
    BLOCK.with(|b| *b.borrow_mut() = Some(barrier));
}

/// `program::sync_threads` on the CPU: waits for the rest of this thread's block (nothing on a
/// thread no runner entered, a block of one).
pub(crate) fn block_barrier() {
    let barrier = BLOCK.with(|b| b.borrow().clone());
    if let Some(b) = barrier {
        b.wait();
    }
}

/// The calling thread's place: as its runner set it, else a launch of one.
pub(crate) fn place() -> Place {
    PROGRAM
        .with(|p| p.get())
        .map_or(Place::ALONE, |(place, _)| place)
}

/// The calling program thread's client (see [`super::client`]).
pub(crate) fn client() -> crate::Client<'static, ferry_rpc::Single, ProgramWait> {
    let Some((place, descriptor)) = PROGRAM.with(|p| p.get()) else {
        panic!(
            "ferry_device::program::client() outside a GPU kernel and outside \
             ferry_device::sim::run_program: there is no host to call"
        );
    };
    // SAFETY: the runner set this descriptor up for a region it keeps for the rest of the
    // process (`'static` holds) and the client port words of the same region, reached only
    // through the protocol; the host serves it for the length of the run.
    let client = unsafe { descriptor.client(ferry_rpc::Single, ProgramWait) }
        .expect("the runner's descriptor names its own region");
    client.with_cursor(place.block * place.threads + place.thread)
}

/// How a program thread on the CPU waits for the host: polls, a few yields, then sleeps that
/// double from 20 µs to 640 µs (a run has many more threads than cores, and the host's serving
/// thread needs one); gives up after 60 s, so a lost answer fails the run instead of hanging it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProgramWait;

impl ferry_rpc::Wait for ProgramWait {
    fn pause(&self, polls: u32) -> Result<(), ferry_rpc::Stalled> {
        if polls == 0 {
            SINCE.with(|s| s.set(Some(Instant::now())));
        }
        match polls {
            0..256 => core::hint::spin_loop(),
            256..320 => std::thread::yield_now(),
            _ => {
                let since = SINCE.with(|s| s.get()).unwrap_or_else(Instant::now);
                if since.elapsed() > ANSWER_LIMIT {
                    return Err(ferry_rpc::Stalled);
                }
                let doublings = (polls - 320).min(5);
                std::thread::sleep(
                    Duration::from_micros(20 << doublings).min(Duration::from_millis(1)),
                );
            }
        }
        Ok(())
    }
}
