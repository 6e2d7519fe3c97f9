//! The descriptor: what the host tells a kernel about the region before launch — the contract
//! between the device crate (`ferry-device`, which reads it on the GPU) and the host's transport
//! (`ferry-gpu`, which writes it), kept here so both use the one definition.
//!
//! The loader (or any host program using `ferry-gpu`) writes one [`Descriptor`] into the
//! program's global named [`SYMBOL`] before it launches the kernel. Every warp reads it at kernel
//! start and builds its own client handle from it ([`Descriptor::client`]): the region lives in
//! mapped pinned host memory, the client's lock bitmap in device memory, and the port count and
//! lane count are the host's choice (`Layout`), so the GPU code has no compiled-in sizes.

use crate::mailbox::MailboxKind;
use crate::sync::{AtomicU32, AtomicU64};
use crate::{ClientProcess, Lanes, Layout, LayoutError, PerPort, Region, Wait};

/// The name of the program's descriptor global, as the host looks it up.
pub const SYMBOL: &str = "FERRY_RPC";

/// The value of [`Descriptor::magic`] once the host has filled the descriptor in. It also names
/// the region's layout: it changes whenever the layout does (last: the word lines' summit words
/// after their bells; before that, the client memory's port words), so a program built for
/// another layout than its host's finds no descriptor set up instead of reading words where
/// there are none.
pub const MAGIC: u32 = 0x4652_5935;

/// The value of [`Descriptor::magic`] in a program's descriptor before any host set it up
/// ([`Descriptor::UNSET`]): as [`MAGIC`], it names the layout the program was built for, so a
/// host finding neither value there (another version's, or 0 from a version before this one)
/// knows the program was built for another layout and says so rather than launching it.
pub const UNSET_MAGIC: u32 = !MAGIC;
const _: () = assert!(UNSET_MAGIC != MAGIC && UNSET_MAGIC != 0);

/// [`Descriptor::mailbox`] flag: each warp's client keeps its port between calls
/// (`ferry_rpc::Process::keep_port`). The host sets it only when the region has a port for every
/// warp of the launch, so no warp can wait for a port another warp keeps while idle.
pub const FLAG_KEEP_PORTS: u32 = 1 << 16;

/// [`Descriptor::mailbox`] flag: the region has word lines for small calls
/// (`Layout::with_words`, `ferry_rpc::words`), and the client's port words at
/// [`Descriptor::locks`] hold the ports' word-call sequences. Clients then make calls whose
/// request and reply fit a word line there, in one trip across the bus.
pub const FLAG_WORDS: u32 = 1 << 17;

/// [`Descriptor::mailbox`] flag, with [`FLAG_WORDS`]: whole warps' small calls take the word
/// lines too (`ferry_rpc::Process::word_lanes`), not only a lone lane's. The host sets it when it
/// serves with many threads: a server does more work for a word call than for a packet, and the
/// packets are capped by the bus, not by the server threads.
pub const FLAG_WORDS_FOR_WARPS: u32 = 1 << 18;

/// [`Descriptor::mailbox`] flag: the host announces the end of its copies between files and
/// device memory in the client's memory (`ferry_rpc::Process::with_announce_words`): the client
/// memory at [`Descriptor::locks`] ends with two announce words per lane of every port, and a warp
/// waiting for a copy polls its own word instead of host memory. The loader sets it (its host
/// services' copies announce).
pub const FLAG_ANNOUNCE: u32 = 1 << 19;

/// The bits of [`Descriptor::mailbox`] that hold the mailbox kind.
const KIND_BITS: u32 = 0xffff;

/// The port where the warp (or wavefront, or CPU thread) of launch-wide index `index` starts its
/// searches, of a region of `ports` ports: a one-to-one map of `0..ports` (so with a port per
/// warp, each warp has its own), which deals consecutive indices out over the region's lock words
/// (32 ports each) with a stride coprime to their count near its golden section. Any launch,
/// however few its warps, so lands on every part of the region: the server threads, each
/// serving a contiguous range of lock words, share its calls. Index 0 is port 0.
pub fn home_port(index: u32, ports: u32) -> u32 {
    let granule = crate::layout::PORT_GRANULE;
    let words = ports / granule;
    if ports == 0 || words < 2 || !ports.is_multiple_of(granule) {
        return index.checked_rem(ports).unwrap_or(0);
    }
    let i = index % ports;
    let (word, slot) = (i % words, i / words);
    // Deals word `w` to `w × stride mod words`: a permutation since the two are coprime, and by
    // the three-gap theorem any run of consecutive words lands spread evenly over all of them.
    let mut stride = (words as u64 * 618 / 1000).max(1) as u32;
    while gcd(stride, words) != 1 {
        stride += 1;
    }
    let home_word = (word as u64 * stride as u64 % words as u64) as u32;
    home_word * granule + slot
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A client handle on the region: one per warp (or host thread).
pub type Client<'a, L, W> = ClientProcess<'a, L, PerPort, W>;

/// Where the region and the client's lock bitmap are, and how the region is laid out.
///
/// `repr(C)`, 40 bytes: the host writes it byte for byte into the device global [`SYMBOL`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// [`MAGIC`] once set up; anything else means no host set this program up.
    pub magic: u32,
    /// Port count of the region.
    pub ports: u32,
    /// Lanes per packet.
    pub lanes: u32,
    /// The mailbox representation's wire number ([`MailboxKind`]; always `PerPort` on a GPU) in
    /// the low 16 bits, and flags above ([`FLAG_KEEP_PORTS`], [`FLAG_WORDS`],
    /// [`FLAG_WORDS_FOR_WARPS`]).
    pub mailbox: u32,
    /// Address of the region as the client sees it (device address of mapped host memory).
    pub region: u64,
    /// Address of the client's memory, 8-byte aligned: its port words (`layout.ports()` `u64`
    /// words: each port's lock, outbox shadow and word-call sequence,
    /// `ferry_rpc::Process::with_port_words`), then, with [`FLAG_ANNOUNCE`], its announce words,
    /// all zeroed together with the region before the first launch. See
    /// [`Descriptor::client_words`].
    pub locks: u64,
    /// Bytes of each lane's share of a port's bulk area (`Layout::with_bulk`; 0: none).
    pub bulk: u32,
    /// The longest pause, in nanoseconds, between two polls of a waiting warp (the device
    /// crate's `GpuWait::max_sleep_ns`); 0: the default. Many warps waiting at once
    /// poll host memory across the bus; a longer pause leaves the bus to the replies and copies.
    pub max_sleep_ns: u32,
}

const _: () = assert!(core::mem::size_of::<Descriptor>() == 40);

impl Descriptor {
    /// The descriptor of an unset program (magic [`UNSET_MAGIC`]).
    pub const UNSET: Descriptor = Descriptor {
        magic: UNSET_MAGIC,
        ports: 0,
        lanes: 0,
        mailbox: 0,
        region: 0,
        locks: 0,
        bulk: 0,
        max_sleep_ns: 0,
    };

    /// The layout the descriptor names, checked.
    pub fn layout(&self) -> Result<Layout, LayoutError> {
        let flags = FLAG_KEEP_PORTS | FLAG_WORDS | FLAG_WORDS_FOR_WARPS | FLAG_ANNOUNCE;
        if self.mailbox & !(KIND_BITS | flags) != 0 {
            return Err(LayoutError::Ports(self.ports));
        }
        let kind = MailboxKind::from_u32(self.mailbox & KIND_BITS)
            .ok_or(LayoutError::Ports(self.ports))?;
        if kind != MailboxKind::PerPort {
            return Err(LayoutError::Mailbox(kind));
        }
        let layout = Layout::new(self.ports, self.lanes, kind)?.with_bulk(self.bulk as u64)?;
        Ok(match self.mailbox & FLAG_WORDS {
            0 => layout,
            _ => layout.with_words(),
        })
    }

    /// Whether clients keep their ports between calls ([`FLAG_KEEP_PORTS`]).
    pub fn keep_ports(&self) -> bool {
        self.mailbox & FLAG_KEEP_PORTS != 0
    }

    /// The `u32` words of client memory `locks` points to for `layout`: the port words (two
    /// `u32` words each), then two announce words per lane of every port ([`FLAG_ANNOUNCE`]).
    pub fn client_words(layout: &Layout) -> usize {
        Self::announce_at(layout) + layout.announce_words()
    }

    /// Where the announce words start in the client memory, in `u32` words.
    fn announce_at(layout: &Layout) -> usize {
        2 * layout.ports() as usize
    }

    /// The bytes of the descriptor, as the host copies them to the device.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[0..4].copy_from_slice(&self.magic.to_le_bytes());
        out[4..8].copy_from_slice(&self.ports.to_le_bytes());
        out[8..12].copy_from_slice(&self.lanes.to_le_bytes());
        out[12..16].copy_from_slice(&self.mailbox.to_le_bytes());
        out[16..24].copy_from_slice(&self.region.to_le_bytes());
        out[24..32].copy_from_slice(&self.locks.to_le_bytes());
        out[32..36].copy_from_slice(&self.bulk.to_le_bytes());
        out[36..40].copy_from_slice(&self.max_sleep_ns.to_le_bytes());
        out
    }

    /// A client handle with `lanes` and `wait` on the region the descriptor names.
    ///
    /// # Safety
    ///
    /// The descriptor must be set up ([`MAGIC`]) by a host that keeps, for `'a`: `region` valid,
    /// 64-byte aligned memory of `layout().size()` bytes shared with its server only through the
    /// protocol, and `locks` valid, 8-byte aligned memory of [`Descriptor::client_words`] `u32`
    /// words, used only as this region's client port words and (with [`FLAG_ANNOUNCE`]) its
    /// announce words, zeroed while the mailboxes were. (An unaligned `locks` is refused.)
    pub unsafe fn client<'a, L: Lanes, W: Wait>(
        &self,
        lanes: L,
        wait: W,
    ) -> Result<Client<'a, L, W>, LayoutError> {
        if self.magic != MAGIC
            || self.region == 0
            || self.locks == 0
            || !self.locks.is_multiple_of(8)
        {
            return Err(LayoutError::Ports(self.ports));
        }
        let layout = self.layout()?;
        // SAFETY: the caller guarantees the region memory (aligned, sized, protocol-only access).
        let region =
            unsafe { Region::<PerPort>::from_raw(self.region as usize as *mut u8, layout)? };
        // SAFETY: the caller guarantees `client_words` words at `locks` (8-byte aligned,
        // checked above), the first `ports` `u64` words used only as this region's client port
        // words; `AtomicU64` accepts any bit pattern.
        let words = unsafe {
            core::slice::from_raw_parts(
                self.locks as usize as *const AtomicU64,
                layout.ports() as usize,
            )
        };
        let client = ClientProcess::with_port_words(region, words, lanes, wait)?
            .keep_port(self.keep_ports());
        let client = match self.mailbox & FLAG_ANNOUNCE {
            0 => client,
            _ => {
                // SAFETY: with FLAG_ANNOUNCE the caller guarantees `client_words` words at
                // `locks`; the announce words are the last `layout.announce_words()`, used only as
                // such.
                let words = unsafe {
                    core::slice::from_raw_parts(
                        (self.locks as usize as *const AtomicU32).add(Self::announce_at(&layout)),
                        layout.announce_words(),
                    )
                };
                client.with_announce_words(words)?
            }
        };
        Ok(match self.mailbox & FLAG_WORDS_FOR_WARPS {
            0 => client,
            _ => client.word_lanes(u32::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_descriptor_names_its_layout_and_gives_no_client() {
        // A host tells a program built for its layout by this value (`ferry-gpu`'s
        // `GpuRegion::install`); it is neither set up nor 0 (what a version before it held).
        assert_eq!(Descriptor::UNSET.magic, UNSET_MAGIC);
        let bytes = Descriptor::UNSET.to_bytes();
        assert_eq!(
            u32::from_le_bytes(bytes[..4].try_into().unwrap()),
            UNSET_MAGIC
        );
        // SAFETY: refused before any memory is touched (no region, no magic).
        let client = unsafe { Descriptor::UNSET.client(crate::Single, crate::Spin) };
        assert!(client.is_err());
    }

    #[test]
    fn home_ports_are_one_to_one_and_spread_a_small_launch_over_every_server_thread() {
        for ports in [32, 64, 96, 1024, 8448, 8480, 8448 + 32 * 7] {
            let mut seen = std::vec![false; ports as usize];
            for i in 0..ports {
                let p = home_port(i, ports);
                assert!(
                    p < ports && !seen[p as usize],
                    "{ports} ports: index {i} -> {p}"
                );
                seen[p as usize] = true;
            }
            assert_eq!(home_port(0, ports), 0);
            assert_eq!(home_port(ports + 5, ports), home_port(5, ports));
        }
        // A launch of 132 blocks of 8 warps on a region of a port per resident warp (and 32
        // more), served by 8 threads of contiguous lock-word ranges as `serve` splits them.
        let (ports, threads) = (8480u32, 8u32);
        let words = ports / 32;
        let thread_of = |port: u32| (port / 32 * threads / words).min(threads - 1);
        for warps in [8u32, 64, 1056] {
            let mut per = [0u32; 8];
            for w in 0..warps {
                per[thread_of(home_port(w, ports)) as usize] += 1;
            }
            let fair = warps / threads;
            assert!(
                per.iter().filter(|&&n| n > 0).count() >= 6,
                "{warps} warps: {per:?}"
            );
            // Within half of the fair share each (a quarter for a launch of a thousand warps).
            let slack = if warps >= 1000 { fair / 4 } else { fair / 2 };
            if warps >= 64 {
                assert!(
                    per.iter().all(|&n| n.abs_diff(fair) <= slack),
                    "{warps} warps: {per:?}"
                );
            }
        }
    }
}
