//! What one call of this crate's clients runs on: a [`CallSite`] that carries every call whole.

use std::cell::OnceCell;

use ferry_rpc::service::{CallSite, NoInline, WholeCall};
use ferry_rpc::{ClientProcess, HeapRegion, PerPort, Single, SpinLimit};

use crate::error::ZenohError;

/// One call of a [`ZenohClient`](crate::ZenohClient) or a [`NamedClient`](crate::NamedClient)
/// (their `Site`'s claim): a [`CallSite`] whose whole-call path `W` carries every call (a query
/// and its reply, or a call on the local shared-memory server). The process it gives
/// ([`CallSite::process`]) is a stand-in on a region no server serves: the generated calls never
/// use it (they take the whole path), and a call made on it fails (`Stalled`), never `Ok`.
pub struct WholeClaim<'a, W> {
    call: W,
    unserved: &'a HeapRegion,
    stand_in: OnceCell<ClientProcess<'a, Single, PerPort, SpinLimit>>,
}

impl<'a, W> WholeClaim<'a, W> {
    /// A claim whose calls go through `call`, its stand-in process on `unserved`.
    pub(crate) fn new(call: W, unserved: &'a HeapRegion) -> Self {
        WholeClaim {
            call,
            unserved,
            stand_in: OnceCell::new(),
        }
    }
}

impl<W: std::fmt::Debug> std::fmt::Debug for WholeClaim<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WholeClaim")
            .field("call", &self.call)
            .finish()
    }
}

impl<'a, W: WholeCall> CallSite for WholeClaim<'a, W> {
    type Lanes = Single;
    type Mailbox = PerPort;
    type Wait = SpinLimit;
    type Inline = NoInline;
    type Whole = W;

    #[inline(always)]
    fn whole(&self) -> Option<&W> {
        Some(&self.call)
    }

    #[inline(always)]
    fn inline(&self) -> Option<&NoInline> {
        None
    }

    fn process(&self) -> &ClientProcess<'_, Single, PerPort, SpinLimit> {
        self.stand_in.get_or_init(|| {
            // It gives up at its first wait.
            self.unserved
                .client_with(Single, SpinLimit(0))
                .expect("one lane fits any region")
        })
    }
}

/// The region of a whole-call claim's stand-in process: one no server serves.
pub(crate) fn stand_in_region() -> Result<HeapRegion, ZenohError> {
    HeapRegion::new(32, 1)
        .map_err(|_| ZenohError::BadServices("the stand-in region could not be laid out".into()))
}
