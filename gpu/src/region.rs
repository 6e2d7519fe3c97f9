//! The region a kernel and its host share, on a CUDA device.

use ferry_rpc::descriptor::{self, Descriptor};
use ferry_rpc::layout::PORT_GRANULE;
use ferry_rpc::sync::AtomicU32;
use ferry_rpc::{Layout, MailboxKind, PerPort, Region};

use crate::cuda::{Cuda, DeviceMemory, MappedMemory, Module};
use crate::Error;

/// How many ports a region gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortCount {
    /// One per resident warp of the device (SMs × warps per SM) and at least one more, so that
    /// warps can keep their ports ([`GpuRegion::keep_ports_for`]); at most `cap`.
    ResidentWarps {
        /// The most ports (rounded up to a multiple of 32).
        cap: u32,
    },
    /// Exactly this many (rounded up to a multiple of 32).
    Exactly(u32),
}

impl Default for PortCount {
    fn default() -> Self {
        PortCount::ResidentWarps { cap: 16384 }
    }
}

impl PortCount {
    /// The port count for a device with `resident_warps` resident warps.
    pub fn resolve(self, resident_warps: u32) -> u32 {
        let n = match self {
            PortCount::ResidentWarps { cap } => resident_warps.saturating_add(1).min(cap),
            PortCount::Exactly(n) => n,
        };
        n.max(1).div_ceil(PORT_GRANULE) * PORT_GRANULE
    }
}

/// A region in mapped pinned host memory (with word lines for small calls if asked,
/// `ferry_rpc::words`), the client's port words (each port's lock, outbox shadow and word-call
/// sequence) and announce words in device memory, the server's locks in host memory.
#[derive(Debug)]
pub struct GpuRegion {
    layout: Layout,
    memory: MappedMemory,
    client_locks: DeviceMemory,
    server_locks: Box<[AtomicU32]>,
    /// Whether kernels' clients keep their ports between calls (`Descriptor::keep_ports`).
    keep_ports: bool,
    /// `Descriptor::max_sleep_ns`.
    max_sleep_ns: u32,
    /// Whether whole warps' small calls take the word lines too (`FLAG_WORDS_FOR_WARPS`).
    words_for_warps: bool,
    /// Whether the host announces its copies in the clients' memory (`FLAG_ANNOUNCE`).
    announce: bool,
}

/// Lanes per packet on an NVIDIA GPU: one slot per lane of a warp.
pub const WARP_LANES: u32 = 32;

impl GpuRegion {
    /// A zeroed region on `cuda`'s device with `ports` ports and 32 lanes per packet, and word
    /// lines (`ferry_rpc::words`): a lone lane's small call (a `malloc`, a clock read from one
    /// thread) crosses there in words that carry their own sequence, one trip across the bus;
    /// a warp's calls take the packets (see `Process::word_lanes` for why).
    pub fn new(cuda: &Cuda, ports: PortCount) -> Result<GpuRegion, Error> {
        Self::with_options(cuda, ports, true, 0)
    }

    /// As [`new`](Self::new) without word lines: every call takes the packets.
    pub fn without_word_lines(cuda: &Cuda, ports: PortCount) -> Result<GpuRegion, Error> {
        Self::with_options(cuda, ports, false, 0)
    }

    /// A region with word lines or not (see [`new`](Self::new)) and, if `bulk` is not 0, a
    /// bulk area per port of `bulk` bytes for each lane (a multiple of 64; `Layout::with_bulk`):
    /// a lane's streamed call (a file read or write, a print, a path) then moves up to `bulk`
    /// bytes per handoff instead of a packet's 56, so `host::read_at` into a lane's own buffer
    /// moves as much per call. The areas live with the region in mapped host memory: `ports ×
    /// 32 × bulk` bytes of it.
    pub fn with_options(
        cuda: &Cuda,
        ports: PortCount,
        words: bool,
        bulk: u32,
    ) -> Result<GpuRegion, Error> {
        let ports = ports.resolve(cuda.resident_warps());
        let layout =
            Layout::new(ports, WARP_LANES, MailboxKind::PerPort)?.with_bulk(bulk as u64)?;
        let layout = if words { layout.with_words() } else { layout };
        let memory = cuda.alloc_mapped(layout.size())?;
        // `cuMemHostAlloc` returns page-aligned memory; the layout needs 64 bytes.
        debug_assert_eq!(memory.host() as usize % 64, 0);
        // The client's port words (and announce words), zeroed like the region's mailboxes.
        let client_locks = cuda.alloc_device(Descriptor::client_words(&layout) * 4)?;
        Ok(GpuRegion {
            layout,
            memory,
            client_locks,
            server_locks: (0..layout.lock_words())
                .map(|_| AtomicU32::new(0))
                .collect(),
            keep_ports: false,
            max_sleep_ns: 0,
            words_for_warps: false,
            announce: false,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The host's view of the region.
    pub fn region(&self) -> Region<'_, PerPort> {
        // SAFETY: the mapped memory is page-aligned, `layout.size()` bytes, owned by `self` for
        // the borrow, and reached only through the protocol (by this host and the kernel).
        unsafe { Region::from_raw(self.memory.host(), self.layout) }
            .expect("a region built from its own layout matches it")
    }

    /// The server's lock bitmap.
    pub fn server_locks(&self) -> &[AtomicU32] {
        &self.server_locks
    }

    /// Lets each warp of a launch of `warps` warps keep its port between calls (no lock, unlock or
    /// port search per call, and no read of host memory to open it) if the region has more ports
    /// than the launch has warps; otherwise turns it off. Returns whether it is on. Takes effect at
    /// the next [`install`](Self::install).
    ///
    /// Why more, not as many: a warp keeps the port of its lane 0's last call (a group with lane
    /// 0 in it), and a group without lane 0 cannot use that port. Were every port kept, such a
    /// group (`if lane == 0 { .. } else { print(..) }` in every warp at once) would wait for a
    /// port forever. With one port more than warps, one is always free but for the calls in
    /// flight, which end.
    pub fn keep_ports_for(&mut self, warps: u64) -> bool {
        self.keep_ports = warps < self.layout.ports() as u64;
        self.keep_ports
    }

    /// Sets the longest pause between two polls of a waiting warp, in nanoseconds (0: the device
    /// library's default; see `RunConfig::max_sleep_ns`). Takes effect at the next
    /// [`install`](Self::install).
    pub fn set_max_sleep_ns(&mut self, ns: u32) {
        self.max_sleep_ns = ns;
    }

    /// Lets whole warps' small calls take the word lines too, not only a lone lane's, if the
    /// region has them; returns whether it is on. Takes effect at the next
    /// [`install`](Self::install). A server does more work for a warp's word call than for its
    /// packet: on an H200 host thousands of warps' calls were served slower on word lines with one
    /// server thread, about as fast with eight, and faster with fifteen (`BENCHMARKS.md`); a lone
    /// warp's call is faster on a word line.
    pub fn set_words_for_warps(&mut self, on: bool) -> bool {
        self.words_for_warps = on && self.layout.has_words();
        self.words_for_warps
    }

    /// Tells the kernel's clients that the host announces the end of its copies between files
    /// and device memory in the clients' memory ([`descriptor::FLAG_ANNOUNCE`]): set it only
    /// when the `Libc` host serving the region has a `DeviceCopy` (which announces: its
    /// contract), as the loader's has. Takes effect at the next [`install`](Self::install).
    pub fn set_announce(&mut self, on: bool) {
        self.announce = on;
    }

    /// The descriptor a kernel builds its clients from.
    pub fn descriptor(&self) -> Descriptor {
        Descriptor {
            magic: descriptor::MAGIC,
            ports: self.layout.ports(),
            lanes: self.layout.lanes(),
            mailbox: MailboxKind::PerPort as u32
                | if self.keep_ports {
                    descriptor::FLAG_KEEP_PORTS
                } else {
                    0
                }
                | if self.layout.has_words() {
                    descriptor::FLAG_WORDS
                } else {
                    0
                }
                | if self.words_for_warps {
                    descriptor::FLAG_WORDS_FOR_WARPS
                } else {
                    0
                }
                | if self.announce {
                    descriptor::FLAG_ANNOUNCE
                } else {
                    0
                },
            region: self.memory.device(),
            locks: self.client_locks.ptr(),
            bulk: self.layout.bulk_share() as u32,
            max_sleep_ns: self.max_sleep_ns,
        }
    }

    /// Writes the descriptor into `module`'s global `FERRY_RPC`, so its kernels can call us.
    pub fn install(&self, cuda: &Cuda, module: &Module) -> Result<(), Error> {
        let Some((ptr, bytes)) = module.global(descriptor::SYMBOL)? else {
            return Err(Error::Program(format!(
                "no global `{}`: the program was not built with the ferry `device` crate",
                descriptor::SYMBOL
            )));
        };
        let d = self.descriptor().to_bytes();
        if bytes != d.len() {
            return Err(Error::Program(format!(
                "global `{}` is {bytes} bytes, not {}: another version of the `device` crate",
                descriptor::SYMBOL,
                d.len()
            )));
        }
        // The program's descriptor holds the magic of the layout it was built for: unset, or set
        // by an earlier install of this host.
        let mut magic = [0u8; 4];
        cuda.copy_from_device(&mut magic, ptr)?;
        let magic = u32::from_le_bytes(magic);
        if magic != descriptor::UNSET_MAGIC && magic != descriptor::MAGIC {
            return Err(Error::Program(format!(
                "global `{}` holds magic {magic:#010x}, not {:#010x}: the program was built with \
                 another version of the ferry `device` crate, for another region layout; build \
                 the program and its host from the same version",
                descriptor::SYMBOL,
                descriptor::UNSET_MAGIC
            )));
        }
        cuda.copy_to_device(ptr, &d)
    }
}
