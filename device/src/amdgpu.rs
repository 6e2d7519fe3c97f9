//! AMDGPU only: the descriptor global and the client at kernel start, for a wavefront.
//!
//! The same interface as NVPTX's (`nvptx`): a host that loads the program fills the
//! [`FERRY_RPC`] descriptor before dispatch, and each wavefront builds its client from it. Built
//! for `amdgcn-amd-amdhsa` here (`.ci/amdgpu.sh`); no AMD GPU or HSA dispatch path exists on these
//! machines to run it (`ferry-gpu`'s `hsa` module says how far the host side goes).

use crate::descriptor::{Client, Descriptor};
use crate::lanes::Wavefront;
use crate::wait::GpuWait;

/// The region descriptor; the host writes it (by this name, `descriptor::SYMBOL`) before
/// dispatch.
#[no_mangle]
pub static mut FERRY_RPC: Descriptor = Descriptor::UNSET;

#[allow(improper_ctypes)]
extern "C" {
    #[link_name = "llvm.amdgcn.workgroup.id.x"]
    fn workgroup_id_x() -> u32;
    #[link_name = "llvm.amdgcn.workitem.id.x"]
    fn workitem_id_x() -> u32;
    #[link_name = "llvm.trap"]
    fn trap() -> !;
}

/// This wavefront's index in the grid, for workgroups of up to 1024 work-items (one dimension):
/// the workgroup's 16 wavefront slots of 64 lanes, then the wavefront within it.
#[inline(always)]
pub fn global_wave_id() -> u32 {
    let size = ferry_rpc::Lanes::lane_size(&Wavefront);
    // SAFETY: read the dispatch's special registers; no memory is touched.
    unsafe { workgroup_id_x() * (1024 / size) + workitem_id_x() / size }
}

/// This wavefront's client handle, its search starting at the wavefront's own port, keeping its
/// port between calls if the host said so (`Descriptor::keep_ports`).
///
/// Traps if no host set up the descriptor. Call it convergently, once per wavefront.
#[inline(always)]
pub fn client() -> Client<'static, Wavefront, GpuWait> {
    // SAFETY: the host writes the descriptor before dispatch and never while the kernel runs.
    let desc = unsafe { core::ptr::read(&raw const FERRY_RPC) };
    // SAFETY: a set-up descriptor (checked by `client`) comes from a host that keeps the region
    // and lock memory alive and protocol-only for the whole dispatch (the transport's contract).
    match unsafe { desc.client(Wavefront, crate::GpuWait::for_descriptor(&desc)) } {
        Ok(c) => {
            let ports = c.region().layout().ports();
            c.with_cursor(crate::descriptor::home_port(global_wave_id(), ports))
        }
        // SAFETY: ends the wavefront; nothing after it runs.
        Err(_) => unsafe { trap() },
    }
}

/// A no-op call from every active lane (`host::noop`), here so the build of this
/// crate generates the wavefront's protocol code, intrinsics included: LLVM checks an intrinsic
/// only where a generated function calls it.
#[no_mangle]
pub extern "C" fn ferry_amdgpu_noop(value: u64) -> u64 {
    crate::host::noop(&client(), value).unwrap_or(u64::MAX)
}
