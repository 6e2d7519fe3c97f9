//! The lanes of a GPU warp, behind [`ferry_rpc::Lanes`].
//!
//! - `Warp` (NVPTX): 32 lanes; lane id from `%laneid`, the active mask from `activemask`,
//!   ballot from `vote.sync.ballot`, broadcast from `shfl.sync.idx` (this is how the port index the
//!   first lane found is made uniform across the warp), sync from `bar.warp.sync`. The full warp's
//!   mask goes to these as an immediate: with a mask in a register the GPU's compiler checks, at
//!   every one of them, that the mask's lanes are converged (`gpu/NOTES.md`); a
//!   one-lane mask (a lone lane's call) needs none of them, and they cost it nothing.
//! - `Wavefront` (AMDGPU): 64 lanes (32 on wave32 targets), through LLVM's AMDGPU intrinsics:
//!   lane id from `mbcnt`, the active mask and ballot from `ballot` (the `exec` mask), broadcast
//!   from `readlane`, sync from `wave.barrier`. It builds for `amdgcn-amd-amdhsa` here (Debian's
//!   rustc 1.96, `-Zbuild-std=core`, `-Ctarget-cpu=gfx90a`; `.ci/amdgpu.sh`); with no AMD GPU on
//!   these machines it has never run.
//! - On the host: [`ferry_rpc::Single`] (one lane) and, with feature `sim`, `sim::SimWarp` (a warp
//!   of CPU threads, which can diverge).

pub use ferry_rpc::Single;

/// An NVIDIA warp: up to 32 lanes executing together.
///
/// Every protocol operation must be called convergently by the lanes of the warp's active mask
/// (the same lanes, at the same call), as `ferry_rpc` requires.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Warp;

#[cfg(target_arch = "nvptx64")]
mod nvptx_warp {
    use super::Warp;
    use core::arch::asm;

    // SAFETY: `shfl.sync.idx` returns the source lane's value to every lane of the mask, and
    // `vote.sync.ballot` the same ballot to every lane of the mask; `bar.warp.sync` returns in no
    // lane of the mask before all have reached it, and orders their memory accesses. Callers are
    // convergent (documented on `Warp`), so the mask names exactly the lanes that call.
    unsafe impl ferry_rpc::Lanes for Warp {
        #[inline(always)]
        fn lane_size(&self) -> u32 {
            32
        }

        #[inline(always)]
        fn lane_id(&self) -> u32 {
            let id: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe {
                asm!("mov.u32 {id}, %laneid;", id = out(reg32) id, options(nomem, nostack, pure))
            };
            id
        }

        #[inline(always)]
        fn active_mask(&self) -> u64 {
            let mask: u32;
            // SAFETY: `activemask` reads which lanes execute this instruction; no memory access.
            unsafe { asm!("activemask.b32 {m};", m = out(reg32) mask, options(nomem, nostack)) };
            mask as u64
        }

        #[inline(always)]
        fn is_first_lane(&self, mask: u64) -> bool {
            let (le, eq): (u32, u32);
            // SAFETY: reads two special registers (this lane's bit, and the bits of it and the
            // lanes below); no memory is touched.
            unsafe {
                asm!(
                    "mov.u32 {le}, %lanemask_le;",
                    "mov.u32 {eq}, %lanemask_eq;",
                    le = out(reg32) le,
                    eq = out(reg32) eq,
                    options(nomem, nostack, pure),
                )
            };
            // In the mask, and no lane of the mask below it (32-bit: a warp's mask has no more).
            // A one-lane mask is the calling lane's (the contract): no register to read.
            mask.count_ones() == 1 || mask as u32 & le == eq
        }

        #[inline(always)]
        fn broadcast(&self, mask: u64, value: u32) -> u32 {
            let out: u32;
            if mask.count_ones() == 1 {
                // One lane (the caller): its own value, no shuffle.
                return value;
            }
            if mask as u32 == u32::MAX {
                // The whole warp, named by an immediate: the GPU's compiler then emits the
                // shuffle alone, where a mask in a register costs a check, at run time, that
                // its lanes are converged (a match, a reduction and a branch).
                // SAFETY: as below, with every lane of the warp; lane 0 is the first.
                unsafe {
                    asm!(
                        "shfl.sync.idx.b32 {o}, {v}, 0, 31, -1;",
                        o = out(reg32) out,
                        v = in(reg32) value,
                        options(nomem, nostack),
                    )
                };
                return out;
            }
            let src = (mask as u32).trailing_zeros();
            // SAFETY: a warp shuffle among the lanes of `mask`, all of which execute it (the
            // convergence contract); `src` is a lane of `mask`; clamp 31 is the whole warp.
            unsafe {
                asm!(
                    "shfl.sync.idx.b32 {o}, {v}, {s}, 31, {m};",
                    o = out(reg32) out,
                    v = in(reg32) value,
                    s = in(reg32) src,
                    m = in(reg32) mask as u32,
                    options(nomem, nostack),
                )
            };
            out
        }

        #[inline(always)]
        fn ballot(&self, mask: u64, predicate: bool) -> u64 {
            let out: u32;
            if mask.count_ones() == 1 {
                // One lane (the caller): its own vote, no vote instruction.
                return if predicate { mask } else { 0 };
            }
            if mask as u32 == u32::MAX {
                // The whole warp, named by an immediate (see `broadcast`).
                // SAFETY: as below, with every lane of the warp.
                unsafe {
                    asm!(
                        "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {o}, p, -1; }}",
                        o = out(reg32) out,
                        v = in(reg32) predicate as u32,
                        options(nomem, nostack),
                    )
                };
                return out as u64;
            }
            // SAFETY: a warp vote among the lanes of `mask`, all of which execute it.
            unsafe {
                asm!(
                    "{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {o}, p, {m}; }}",
                    o = out(reg32) out,
                    v = in(reg32) predicate as u32,
                    m = in(reg32) mask as u32,
                    options(nomem, nostack),
                )
            };
            out as u64
        }

        #[inline(always)]
        fn sync(&self, mask: u64) {
            if mask.count_ones() == 1 {
                // One lane orders nothing with itself.
                return;
            }
            if mask as u32 == u32::MAX {
                // The whole warp, named by an immediate (see `broadcast`).
                // SAFETY: as below, with every lane of the warp.
                unsafe { asm!("bar.warp.sync -1;", options(nostack)) };
                return;
            }
            // SAFETY: a warp barrier among the lanes of `mask`, all of which execute it. It also
            // orders their memory accesses, which the protocol needs (no `nomem`).
            unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask as u32, options(nostack)) };
        }

        #[inline(always)]
        fn stand_in(&self) -> Option<Self> {
            Some(Warp)
        }
    }
}

/// An AMD wavefront: up to 64 lanes (wave64; 32 on wave32 targets) executing together.
///
/// Every protocol operation must be called convergently by the lanes of the active mask, as on
/// NVIDIA. Untested on hardware (see the module doc).
#[cfg(target_arch = "amdgpu")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Wavefront;

#[cfg(target_arch = "amdgpu")]
mod amdgpu_wavefront {
    use super::Wavefront;

    #[allow(improper_ctypes)]
    extern "C" {
        #[link_name = "llvm.amdgcn.wavefrontsize"]
        fn wavefrontsize() -> u32;
        #[link_name = "llvm.amdgcn.mbcnt.lo"]
        fn mbcnt_lo(mask: u32, add: u32) -> u32;
        #[link_name = "llvm.amdgcn.mbcnt.hi"]
        fn mbcnt_hi(mask: u32, add: u32) -> u32;
        #[link_name = "llvm.amdgcn.ballot.i64"]
        fn ballot_i64(predicate: bool) -> u64;
        #[link_name = "llvm.amdgcn.readlane.i32"]
        fn readlane(value: u32, lane: u32) -> u32;
        #[link_name = "llvm.amdgcn.wave.barrier"]
        fn wave_barrier();
    }

    // SAFETY: `readlane` returns the source lane's value to every lane, and `ballot` the same
    // mask of lanes (a subset of `exec`) to every lane; the lanes of a wavefront execute in
    // lockstep, and `wave.barrier` keeps the compiler from moving memory accesses across the
    // group's sync point. Callers are convergent (documented on `Wavefront`).
    unsafe impl ferry_rpc::Lanes for Wavefront {
        #[inline(always)]
        fn lane_size(&self) -> u32 {
            // SAFETY: a constant of the target.
            unsafe { wavefrontsize() }
        }

        #[inline(always)]
        fn lane_id(&self) -> u32 {
            // SAFETY: counts the lanes below this one in an all-ones mask: the lane index.
            unsafe { mbcnt_hi(u32::MAX, mbcnt_lo(u32::MAX, 0)) }
        }

        #[inline(always)]
        fn active_mask(&self) -> u64 {
            // SAFETY: a ballot of `true` is the `exec` mask.
            unsafe { ballot_i64(true) }
        }

        #[inline(always)]
        fn broadcast(&self, mask: u64, value: u32) -> u32 {
            // SAFETY: reads `value` from the first lane of `mask`, an active lane (contract).
            unsafe { readlane(value, mask.trailing_zeros()) }
        }

        #[inline(always)]
        fn ballot(&self, mask: u64, predicate: bool) -> u64 {
            // SAFETY: a ballot among the active lanes, restricted to `mask`.
            unsafe { ballot_i64(predicate) & mask }
        }

        #[inline(always)]
        fn sync(&self, _mask: u64) {
            // SAFETY: a compiler barrier for the wavefront; its lanes are already in step.
            unsafe { wave_barrier() }
        }

        #[inline(always)]
        fn stand_in(&self) -> Option<Self> {
            Some(Wavefront)
        }
    }
}
