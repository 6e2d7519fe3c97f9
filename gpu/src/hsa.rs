//! AMD GPUs through the HSA runtime, loaded at run time with libloading: nothing of ROCm is
//! needed to build, and a machine without it gets [`Error::NoDriver`], not a panic.
//!
//! Written: finding and opening `libhsa-runtime64`, resolving every entry point used, initialising
//! the runtime; listing the agents (CPU, GPU) and a CPU agent's memory pools; and the region's
//! memory, as LLVM libc's AMD loader places it: allocated from the CPU agent's *fine-grained*
//! global pool (host memory the GPU reads and writes coherently, where flips are seen without
//! cache maintenance), made accessible to every GPU agent, zeroed ([`Hsa::alloc_fine_grained`],
//! [`FineGrained::region`]). The device side is `ferry_device::amdgpu` (built for gfx90a in CI).
//!
//! Tested here: the runtime missing (an error, not a panic) and the choice of pool (a pure
//! function over pool properties). Not run: everything that needs the runtime and an AMD GPU, which
//! no machine here has. Not written: code objects and kernel dispatch (queues, kernarg), so no
//! AMD program runs yet.

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::Error;

/// Names the runtime library goes by.
pub const LIBRARY_NAMES: [&str; 2] = ["libhsa-runtime64.so.1", "libhsa-runtime64.so"];

/// Entry points the transport resolves at load, so a wrong library fails at once.
pub const SYMBOLS: [&str; 9] = [
    "hsa_init",
    "hsa_shut_down",
    "hsa_iterate_agents",
    "hsa_agent_get_info",
    "hsa_amd_agent_iterate_memory_pools",
    "hsa_amd_memory_pool_get_info",
    "hsa_amd_memory_pool_allocate",
    "hsa_amd_memory_pool_free",
    "hsa_amd_agents_allow_access",
];

/// `HSA_STATUS_SUCCESS`.
const SUCCESS: u32 = 0;
/// `HSA_AGENT_INFO_DEVICE` (the agent's `hsa_device_type_t`).
const AGENT_INFO_DEVICE: u32 = 17;
/// `HSA_AMD_MEMORY_POOL_INFO_SEGMENT` (`hsa_amd_segment_t`), `_GLOBAL_FLAGS` (bit set),
/// `_SIZE` (`size_t`), `_RUNTIME_ALLOC_ALLOWED` (`bool`).
const POOL_INFO_SEGMENT: u32 = 0;
const POOL_INFO_GLOBAL_FLAGS: u32 = 1;
const POOL_INFO_SIZE: u32 = 2;
const POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
/// `HSA_AMD_SEGMENT_GLOBAL`.
pub const SEGMENT_GLOBAL: u32 = 0;
/// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT`, `_FINE_GRAINED`, `_COARSE_GRAINED`.
pub const FLAG_KERNARG: u32 = 1;
/// See [`FLAG_KERNARG`].
pub const FLAG_FINE_GRAINED: u32 = 2;
/// See [`FLAG_KERNARG`].
pub const FLAG_COARSE_GRAINED: u32 = 4;

/// An HSA agent (`hsa_agent_t`): a CPU or a GPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agent {
    /// The runtime's handle.
    pub handle: u64,
}

/// A memory pool of an agent (`hsa_amd_memory_pool_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    /// The runtime's handle.
    pub handle: u64,
}

/// What kind of agent (`hsa_device_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceType {
    /// `HSA_DEVICE_TYPE_CPU`.
    Cpu,
    /// `HSA_DEVICE_TYPE_GPU`.
    Gpu,
    /// Anything else (a DSP), by number.
    Other(u32),
}

/// The properties of a pool that decide whether the region can live in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// `hsa_amd_segment_t` ([`SEGMENT_GLOBAL`] for the region).
    pub segment: u32,
    /// Global flags ([`FLAG_FINE_GRAINED`], ...).
    pub flags: u32,
    /// Whether the program may allocate from it.
    pub alloc_allowed: bool,
    /// Its size in bytes.
    pub size: usize,
}

/// The pool a region of `size` bytes goes in: a global, fine-grained pool the program may allocate
/// from, large enough (the largest if several). Kernarg pools are fine-grained too but are for
/// kernel arguments; they are taken only if nothing else fits.
pub fn pick_fine_grained(pools: &[(Pool, PoolInfo)], size: usize) -> Option<Pool> {
    let usable = |i: &PoolInfo| {
        i.segment == SEGMENT_GLOBAL
            && i.flags & FLAG_FINE_GRAINED != 0
            && i.alloc_allowed
            && i.size >= size
    };
    let best = |kernarg: bool| {
        pools
            .iter()
            .filter(|(_, i)| usable(i) && (i.flags & FLAG_KERNARG != 0) == kernarg)
            .max_by_key(|(_, i)| i.size)
            .map(|(p, _)| *p)
    };
    best(false).or_else(|| best(true))
}

type IterateAgentsFn =
    unsafe extern "C" fn(extern "C" fn(Agent, *mut c_void) -> u32, *mut c_void) -> u32;
type AgentGetInfoFn = unsafe extern "C" fn(Agent, u32, *mut c_void) -> u32;
type IteratePoolsFn =
    unsafe extern "C" fn(Agent, extern "C" fn(Pool, *mut c_void) -> u32, *mut c_void) -> u32;
type PoolGetInfoFn = unsafe extern "C" fn(Pool, u32, *mut c_void) -> u32;
type PoolAllocateFn = unsafe extern "C" fn(Pool, usize, u32, *mut *mut c_void) -> u32;
type PoolFreeFn = unsafe extern "C" fn(*mut c_void) -> u32;
type AllowAccessFn = unsafe extern "C" fn(u32, *const Agent, *const u32, *const c_void) -> u32;

extern "C" fn push_agent(agent: Agent, data: *mut c_void) -> u32 {
    // SAFETY: `agents` passes a `&mut Vec<Agent>` as `data`, alive for the iteration.
    unsafe { (*data.cast::<Vec<Agent>>()).push(agent) };
    SUCCESS
}

extern "C" fn push_pool(pool: Pool, data: *mut c_void) -> u32 {
    // SAFETY: `pools` passes a `&mut Vec<Pool>` as `data`, alive for the iteration.
    unsafe { (*data.cast::<Vec<Pool>>()).push(pool) };
    SUCCESS
}

fn check(call: &'static str, code: u32) -> Result<(), Error> {
    match code {
        SUCCESS => Ok(()),
        code => Err(Error::Hsa { call, code }),
    }
}

/// An initialised HSA runtime.
#[derive(Debug)]
pub struct Hsa {
    library: libloading::Library,
}

type HsaStatusFn = unsafe extern "C" fn() -> u32;

impl Hsa {
    /// Loads the runtime, checks its entry points and initialises it.
    pub fn new() -> Result<Hsa, Error> {
        let mut tried = Vec::new();
        let library = LIBRARY_NAMES
            .iter()
            .find_map(|name| {
                // SAFETY: loading the HSA runtime runs its initialisers, which are sound to run.
                match unsafe { libloading::Library::new(name) } {
                    Ok(l) => Some(l),
                    Err(e) => {
                        tried.push(format!("{name}: {e}"));
                        None
                    }
                }
            })
            .ok_or_else(|| {
                Error::NoDriver(format!(
                    "the HSA runtime was not found ({})",
                    tried.join("; ")
                ))
            })?;
        for s in SYMBOLS {
            // SAFETY: only checks that the symbol exists; it is not called here.
            if unsafe { library.get::<*const ()>(s.as_bytes()) }.is_err() {
                return Err(Error::NoDriver(format!("the HSA runtime lacks `{s}`")));
            }
        }
        // SAFETY: `hsa_init` takes no arguments and returns an `hsa_status_t` (u32).
        let init = unsafe { library.get::<HsaStatusFn>(b"hsa_init") }
            .map_err(|e| Error::NoDriver(format!("hsa_init: {e}")))?;
        // SAFETY: the documented signature, called once per `Hsa`.
        let status = unsafe { init() };
        if status != 0 {
            return Err(Error::Hsa {
                call: "hsa_init",
                code: status,
            });
        }
        Ok(Hsa { library })
    }
}

impl Hsa {
    /// Entry point `name` as a function of type `F` (its documented signature).
    fn function<F: Copy>(&self, name: &'static str) -> Result<F, Error> {
        // SAFETY: every caller names an entry point with the signature `F` that `hsa.h` or
        // `hsa_ext_amd.h` documents for it.
        unsafe { self.library.get::<F>(name.as_bytes()) }
            .map(|f| *f)
            .map_err(|e| Error::NoDriver(format!("{name}: {e}")))
    }

    /// Every agent, with its kind.
    pub fn agents(&self) -> Result<Vec<(Agent, DeviceType)>, Error> {
        let iterate: IterateAgentsFn = self.function("hsa_iterate_agents")?;
        let info: AgentGetInfoFn = self.function("hsa_agent_get_info")?;
        let mut agents: Vec<Agent> = Vec::new();
        // SAFETY: the callback only pushes into the vector passed as `data`, which outlives the
        // call.
        check("hsa_iterate_agents", unsafe {
            iterate(push_agent, (&raw mut agents).cast())
        })?;
        agents
            .into_iter()
            .map(|a| {
                let mut kind = 0u32;
                // SAFETY: `HSA_AGENT_INFO_DEVICE` writes one `hsa_device_type_t` (u32).
                check("hsa_agent_get_info", unsafe {
                    info(a, AGENT_INFO_DEVICE, (&raw mut kind).cast())
                })?;
                Ok((
                    a,
                    match kind {
                        0 => DeviceType::Cpu,
                        1 => DeviceType::Gpu,
                        n => DeviceType::Other(n),
                    },
                ))
            })
            .collect()
    }

    /// The memory pools of `agent`, with the properties [`pick_fine_grained`] looks at.
    pub fn pools(&self, agent: Agent) -> Result<Vec<(Pool, PoolInfo)>, Error> {
        let iterate: IteratePoolsFn = self.function("hsa_amd_agent_iterate_memory_pools")?;
        let info: PoolGetInfoFn = self.function("hsa_amd_memory_pool_get_info")?;
        let mut pools: Vec<Pool> = Vec::new();
        // SAFETY: as in `agents`.
        check("hsa_amd_agent_iterate_memory_pools", unsafe {
            iterate(agent, push_pool, (&raw mut pools).cast())
        })?;
        pools
            .into_iter()
            .map(|p| {
                let (mut segment, mut flags, mut size, mut allowed) = (0u32, 0u32, 0usize, 0u8);
                // SAFETY: each attribute writes the documented type: the segment and the flags a
                // u32, the size a `size_t`, allocation-allowed a C `bool` (one byte).
                unsafe {
                    check(
                        "hsa_amd_memory_pool_get_info",
                        info(p, POOL_INFO_SEGMENT, (&raw mut segment).cast()),
                    )?;
                    if segment == SEGMENT_GLOBAL {
                        check(
                            "hsa_amd_memory_pool_get_info",
                            info(p, POOL_INFO_GLOBAL_FLAGS, (&raw mut flags).cast()),
                        )?;
                    }
                    check(
                        "hsa_amd_memory_pool_get_info",
                        info(p, POOL_INFO_SIZE, (&raw mut size).cast()),
                    )?;
                    check(
                        "hsa_amd_memory_pool_get_info",
                        info(
                            p,
                            POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                            (&raw mut allowed).cast(),
                        ),
                    )?;
                }
                Ok((
                    p,
                    PoolInfo {
                        segment,
                        flags,
                        alloc_allowed: allowed != 0,
                        size,
                    },
                ))
            })
            .collect()
    }

    /// `size` bytes of zeroed, fine-grained host memory every GPU agent may access: where a
    /// region for AMD GPUs lives (the counterpart of CUDA's mapped pinned memory).
    pub fn alloc_fine_grained(&self, size: usize) -> Result<FineGrained<'_>, Error> {
        let agents = self.agents()?;
        let cpu = agents
            .iter()
            .find(|(_, k)| *k == DeviceType::Cpu)
            .map(|(a, _)| *a)
            .ok_or_else(|| Error::NoDriver("HSA reports no CPU agent".into()))?;
        let gpus: Vec<Agent> = agents
            .iter()
            .filter(|(_, k)| *k == DeviceType::Gpu)
            .map(|(a, _)| *a)
            .collect();
        if gpus.is_empty() {
            return Err(Error::NoDriver("HSA reports no GPU agent".into()));
        }
        let pool = pick_fine_grained(&self.pools(cpu)?, size).ok_or_else(|| {
            Error::NoDriver(format!(
                "the CPU agent has no fine-grained global pool for {size} bytes"
            ))
        })?;
        let allocate: PoolAllocateFn = self.function("hsa_amd_memory_pool_allocate")?;
        let allow: AllowAccessFn = self.function("hsa_amd_agents_allow_access")?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: allocates from a pool the runtime listed, writing the address into `ptr`.
        check("hsa_amd_memory_pool_allocate", unsafe {
            allocate(pool, size, 0, &raw mut ptr)
        })?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Error::Hsa {
            call: "hsa_amd_memory_pool_allocate",
            code: SUCCESS,
        })?;
        let memory = FineGrained {
            hsa: self,
            ptr,
            size,
        };
        // SAFETY: `gpus` holds `gpus.len()` agents; null flags are the documented default.
        check("hsa_amd_agents_allow_access", unsafe {
            allow(
                gpus.len() as u32,
                gpus.as_ptr(),
                std::ptr::null(),
                memory.ptr.as_ptr().cast(),
            )
        })?;
        // SAFETY: `size` bytes at `ptr` were just allocated for us alone.
        unsafe { std::ptr::write_bytes(memory.ptr.as_ptr(), 0, size) };
        Ok(memory)
    }
}

/// Fine-grained host memory from [`Hsa::alloc_fine_grained`], freed when dropped.
#[derive(Debug)]
pub struct FineGrained<'h> {
    hsa: &'h Hsa,
    ptr: NonNull<u8>,
    size: usize,
}

impl FineGrained<'_> {
    /// The address (the same for the host and the GPUs).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The protocol's region laid out by `layout` over this memory (which must hold
    /// `layout.size()` bytes).
    pub fn region(&self, layout: ferry_rpc::Layout) -> Result<ferry_rpc::Region<'_>, Error> {
        if layout.size() > self.size || !(self.ptr.as_ptr() as usize).is_multiple_of(64) {
            return Err(Error::Layout(ferry_rpc::LayoutError::Ports(layout.ports())));
        }
        // SAFETY: the memory is ours for the borrow, large enough and 64-byte aligned (checked),
        // zeroed at allocation, and reached only through the protocol by us and the GPU.
        unsafe { ferry_rpc::Region::from_raw(self.ptr.as_ptr(), layout) }.map_err(Error::Layout)
    }
}

impl Drop for FineGrained<'_> {
    fn drop(&mut self) {
        if let Ok(free) = self.hsa.function::<PoolFreeFn>("hsa_amd_memory_pool_free") {
            // SAFETY: frees the block `alloc_fine_grained` allocated, once.
            unsafe { free(self.ptr.as_ptr().cast()) };
        }
    }
}

impl Drop for Hsa {
    fn drop(&mut self) {
        // SAFETY: `hsa_shut_down` pairs with the successful `hsa_init` in `new`.
        if let Ok(shut) = unsafe { self.library.get::<HsaStatusFn>(b"hsa_shut_down") } {
            // SAFETY: the documented signature.
            unsafe { shut() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(
        handle: u64,
        segment: u32,
        flags: u32,
        alloc_allowed: bool,
        size: usize,
    ) -> (Pool, PoolInfo) {
        (
            Pool { handle },
            PoolInfo {
                segment,
                flags,
                alloc_allowed,
                size,
            },
        )
    }

    #[test]
    fn the_region_goes_in_the_largest_fine_grained_global_pool() {
        const MIB: usize = 1 << 20;
        let pools = [
            pool(1, SEGMENT_GLOBAL, FLAG_COARSE_GRAINED, true, 64 * MIB),
            pool(
                2,
                SEGMENT_GLOBAL,
                FLAG_FINE_GRAINED | FLAG_KERNARG,
                true,
                64 * MIB,
            ),
            pool(3, SEGMENT_GLOBAL, FLAG_FINE_GRAINED, true, 8 * MIB),
            pool(4, SEGMENT_GLOBAL, FLAG_FINE_GRAINED, true, 32 * MIB),
            pool(5, SEGMENT_GLOBAL, FLAG_FINE_GRAINED, false, 128 * MIB),
            pool(6, 3, FLAG_FINE_GRAINED, true, 256 * MIB),
        ];
        assert_eq!(pick_fine_grained(&pools, MIB), Some(Pool { handle: 4 }));
        // Too large for the plain fine-grained pools: the kernarg pool is the last resort.
        assert_eq!(
            pick_fine_grained(&pools, 48 * MIB),
            Some(Pool { handle: 2 })
        );
        assert_eq!(pick_fine_grained(&pools, 100 * MIB), None);
        assert_eq!(
            pick_fine_grained(&pools[..1], MIB),
            None,
            "coarse-grained only"
        );
    }

    #[test]
    fn no_runtime_is_an_error_not_a_panic() {
        match super::Hsa::new() {
            Err(crate::Error::NoDriver(why)) => assert!(why.contains("HSA")),
            Err(crate::Error::Hsa { call, .. }) => assert_eq!(call, "hsa_init"),
            Ok(_) => {} // a machine with ROCm: initialised and shut down cleanly
            Err(e) => panic!("unexpected: {e}"),
        }
    }
}
