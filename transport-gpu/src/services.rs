//! The host side of `ferry_device::services`: the no-op, print and exit calls a GPU program makes.
//!
//! Their wire protocol is hand-written (`ferry_device::services`' table), not derived, so old and new
//! benchmark programs stay comparable; [`HostServices`] still serves with derived services on one
//! region: it implements `ferry_core::service::Services` (`Both(HostServices::new(..),
//! Libc::server(host.for_program()))`), as the loader does.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ferry_core::service::{Fingerprint, LaneBuffers, Served, Service, Services, INLINE_BYTES};
use ferry_core::{Lanes, Mailbox, Port, Server, StreamSink, Wait};
use ferry_device::services::{
    EXIT, NOOP, PRINT, PRINT_LIMIT, STATUS_OK, STATUS_REFUSED, STATUS_UNKNOWN_OPCODE,
};

use crate::server::{Handler, ServerPort};

/// The minimal services (`ferry_device::services`) as a service: its name, fingerprint and opcodes
/// ([`NOOP`], [`PRINT`], [`EXIT`]), for tables of what a server serves.
#[derive(Clone, Copy, Debug)]
pub struct Minimal;

impl Service for Minimal {
    const NAME: &'static str = "ferry.minimal";
    const FINGERPRINT: u64 = Fingerprint::new("ferry.minimal")
        .begin_call("noop", NOOP)
        .begin_call("print", PRINT)
        .begin_call("exit", EXIT)
        .finish();
    const OPCODES: &'static [u32] = &[NOOP, PRINT, EXIT];
}

/// What to do when the program asks to exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitPolicy {
    /// Flush the output and end this process with the program's code (the loader).
    Process,
    /// Record the code (the first one wins) and answer the call (tests, embedders).
    Record,
}

/// Serves no-op, print and exit calls; print writes to `out`.
#[derive(Debug)]
pub struct HostServices<O: Write + Send> {
    out: Mutex<O>,
    exit: ExitPolicy,
    exit_code: Mutex<Option<i32>>,
    counts: [AtomicU64; 4],
}

impl<O: Write + Send> HostServices<O> {
    /// Services that print to `out` and handle exit by `exit`.
    pub fn new(out: O, exit: ExitPolicy) -> Self {
        HostServices {
            out: Mutex::new(out),
            exit,
            exit_code: Mutex::new(None),
            counts: Default::default(),
        }
    }

    /// The exit code the program asked for, if it did (with [`ExitPolicy::Record`]).
    pub fn exit_code(&self) -> Option<i32> {
        *self.exit_code.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls served, by opcode: `[unknown, no-op, print, exit]`.
    pub fn counts(&self) -> [u64; 4] {
        core::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed))
    }

    /// The output, back.
    pub fn into_output(self) -> O {
        self.out.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    fn print<L: Lanes, M: Mailbox, W: Wait>(
        &self,
        port: &mut Port<'_, '_, Server, L, M, W>,
    ) -> u32 {
        let mut lanes = LaneBytes::default();
        let received = port.recv_n(PRINT_LIMIT, &mut lanes);
        let status = match received {
            Ok(()) => {
                let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
                let written = lanes.0.iter().try_for_each(|bytes| out.write_all(bytes));
                let flushed = written.and_then(|()| out.flush());
                if flushed.is_ok() {
                    STATUS_OK
                } else {
                    STATUS_REFUSED
                }
            }
            Err(_) => {
                // A refused stream: if the client still has the packet (it was told mid-stream),
                // take it back before answering.
                if !port.owns_packet() && port.recv(|_, _| {}).is_err() {
                    return STATUS_REFUSED;
                }
                STATUS_REFUSED
            }
        };
        port.set_status(status);
        let sent = |lane: u32| match status {
            STATUS_OK => lanes.0.get(lane as usize).map_or(0, |b| b.len() as u64),
            _ => 0,
        };
        let _ = port.send(|slot, lane| slot.words[0] = sent(lane));
        status
    }

    /// Serves the call on `port` (any port: a GPU region's, a heap region's); returns the status
    /// it answered.
    fn serve<L: Lanes, M: Mailbox, W: Wait>(
        &self,
        port: &mut Port<'_, '_, Server, L, M, W>,
    ) -> u32 {
        let op = port.opcode();
        self.counts[match op {
            NOOP | PRINT | EXIT => op as usize,
            _ => 0,
        }]
        .fetch_add(1, Ordering::Relaxed);
        match op {
            NOOP => {
                let _ = port.recv_and_send(|slot, _| slot.words[0] = slot.words[0].wrapping_add(1));
                STATUS_OK
            }
            PRINT => self.print(port),
            EXIT => {
                let mut code = 0;
                let mask = port.lane_mask();
                let first = mask.trailing_zeros();
                if port
                    .recv(|slot, lane| {
                        if lane == first {
                            code = slot.words[0] as u32 as i32;
                        }
                    })
                    .is_err()
                {
                    return STATUS_OK;
                }
                match self.exit {
                    ExitPolicy::Process => {
                        let _ = self.out.lock().map(|mut o| o.flush());
                        let _ = std::io::stdout().flush();
                        std::process::exit(code);
                    }
                    ExitPolicy::Record => {
                        self.exit_code
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(code);
                        let _ = port.send(|_, _| {});
                    }
                }
                STATUS_OK
            }
            _ => {
                // Unknown: consume the request and say so, so the client is not left waiting.
                if port.recv(|_, _| {}).is_ok() {
                    port.set_status(STATUS_UNKNOWN_OPCODE);
                    let _ = port.send(|_, _| {});
                }
                STATUS_UNKNOWN_OPCODE
            }
        }
    }
}

/// Each lane's printed bytes.
#[derive(Default)]
struct LaneBytes(Vec<Vec<u8>>);

impl StreamSink for LaneBytes {
    fn start(&mut self, lane: u32, len: u64) -> bool {
        let lane = lane as usize;
        if self.0.len() <= lane {
            self.0.resize(lane + 1, Vec::new());
        }
        // `len` is bounded by PRINT_LIMIT before this is called.
        self.0[lane] = vec![0; len as usize];
        true
    }
    fn chunk(&mut self, lane: u32, offset: u64, bytes: &[u8]) {
        let at = offset as usize;
        self.0[lane as usize][at..at + bytes.len()].copy_from_slice(bytes);
    }
}

impl<O: Write + Send> Handler for HostServices<O> {
    fn handle(&self, port: &mut ServerPort<'_, '_>) {
        self.serve(port);
    }
}

/// The minimal services served with others on one region: [`NOOP`], [`PRINT`] and [`EXIT`] are
/// theirs (with their own wire protocol, `ferry_device::services`); they have no inline calls.
impl<O: Write + Send> Services for HostServices<O> {
    #[inline]
    fn has_opcode(&self, opcode: u32) -> bool {
        matches!(opcode, NOOP | PRINT | EXIT)
    }

    fn each(&self, f: &mut dyn FnMut(&'static str, u64, &'static [u32])) {
        f(Minimal::NAME, Minimal::FINGERPRINT, Minimal::OPCODES);
    }

    fn dispatch<L: Lanes, M: Mailbox, W: Wait, B: LaneBuffers>(
        &self,
        port: &mut Port<'_, '_, Server, L, M, W>,
        _buffers: &mut B,
    ) -> Result<Served, ferry_core::Error> {
        let opcode = port.opcode();
        let status = self.serve(port);
        Ok(Served { opcode, status })
    }

    fn dispatch_inline(
        &self,
        _opcode: u32,
        _request: &[u8],
        _reply: &mut [u8; INLINE_BYTES],
    ) -> Option<(u32, usize)> {
        None
    }
}
