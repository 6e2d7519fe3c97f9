//! CUDA through the driver API, loaded at run time (cudarc's `dynamic-loading`): nothing of CUDA
//! is needed to build, and a machine without a driver gets [`Error::NoDriver`], not a panic.
//!
//! What the transport needs and no more: the primary context of one device, its size (SMs, warps
//! per SM), mapped pinned host memory (`cuMemHostAlloc(DEVICEMAP | PORTABLE)`, not write-combined:
//! the host polls it), zeroed device memory, PTX modules with an optional register cap, kernel
//! launch, and waiting for the launch with a deadline.

use std::ffi::{c_void, CStr, CString};
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use crate::Error;

/// Checks a driver call's result.
fn check(call: &'static str, r: sys::CUresult) -> Result<(), Error> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(failure(call, r)),
    }
}

/// The error of driver call `call` that returned `r` (not a success), with the driver's words.
fn failure(call: &'static str, r: sys::CUresult) -> Error {
    let mut s: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: `cuGetErrorString` writes a pointer to a static string (or leaves it null).
    let known = unsafe { sys::cuGetErrorString(r, &mut s) } == sys::CUresult::CUDA_SUCCESS;
    let message = if known && !s.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    } else {
        String::from("unknown error")
    };
    Error::Cuda {
        call,
        code: r as i32,
        message,
    }
}

/// One CUDA device's primary context, current on the thread that made it.
#[derive(Debug)]
pub struct Cuda {
    device: sys::CUdevice,
    context: sys::CUcontext,
    /// The device's name.
    pub name: String,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Resident threads per SM at most.
    pub threads_per_sm: u32,
    /// Registers one block may use at most (its threads' together).
    pub registers_per_block: u32,
    /// Compute capability (major, minor).
    pub capability: (u32, u32),
}

impl Cuda {
    /// Opens device `ordinal`: loads libcuda, initialises the driver, retains the device's primary
    /// context and makes it current on this thread.
    pub fn new(ordinal: u32) -> Result<Cuda, Error> {
        // SAFETY: only tries to open the library by its usual names; no symbol is called.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver(
                "libcuda was not found: is the NVIDIA driver installed?".into(),
            ));
        }
        // SAFETY: plain driver calls with valid out-pointers, in the documented order.
        unsafe {
            check("cuInit", sys::cuInit(0))?;
            let mut count = 0;
            check("cuDeviceGetCount", sys::cuDeviceGetCount(&mut count))?;
            if ordinal as i32 >= count {
                return Err(Error::NoDriver(format!(
                    "no CUDA device {ordinal}: the driver sees {count}"
                )));
            }
            let mut device = 0;
            check("cuDeviceGet", sys::cuDeviceGet(&mut device, ordinal as i32))?;
            let mut context = std::ptr::null_mut();
            check(
                "cuDevicePrimaryCtxRetain",
                sys::cuDevicePrimaryCtxRetain(&mut context, device),
            )?;
            check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
            let mut name = [0 as std::ffi::c_char; 128];
            check(
                "cuDeviceGetName",
                sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device),
            )?;
            let attr = |a| -> Result<u32, Error> {
                let mut v = 0;
                check(
                    "cuDeviceGetAttribute",
                    sys::cuDeviceGetAttribute(&mut v, a, device),
                )?;
                Ok(v as u32)
            };
            use sys::CUdevice_attribute::*;
            Ok(Cuda {
                device,
                context,
                name: CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned(),
                sms: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                threads_per_sm: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
                registers_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
                capability: (
                    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
            })
        }
    }

    /// Makes the context current on the calling thread (each thread that calls CUDA needs it).
    pub fn make_current(&self) -> Result<(), Error> {
        // SAFETY: the context is retained for as long as `self` lives.
        check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context)
        })
    }

    /// The primary context's handle (retained while `self` lives).
    pub(crate) fn context(&self) -> sys::CUcontext {
        self.context
    }

    /// Warps the device holds resident at once: SMs × warps per SM (8448 on an H200).
    pub fn resident_warps(&self) -> u32 {
        self.sms * self.threads_per_sm / 32
    }

    /// `bytes` of zeroed, pinned host memory mapped into the device's address space.
    pub fn alloc_mapped(&self, bytes: usize) -> Result<MappedMemory, Error> {
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: valid out-pointer; the size is non-zero for every caller (checked).
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut host, bytes.max(1), flags)
        })?;
        let mut device = 0;
        // SAFETY: `host` was just allocated with DEVICEMAP, so it has a device address.
        let mapped = check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0)
        });
        let mem = MappedMemory {
            host: host.cast(),
            device,
            bytes,
        };
        mapped?;
        // SAFETY: `host` is a fresh allocation of `bytes` bytes, not yet shared with anyone.
        unsafe { std::ptr::write_bytes(mem.host, 0, bytes) };
        Ok(mem)
    }

    /// `bytes` of zeroed device memory.
    pub fn alloc_device(&self, bytes: usize) -> Result<DeviceMemory, Error> {
        let mut ptr = 0;
        // SAFETY: valid out-pointer, non-zero size.
        check("cuMemAlloc", unsafe {
            sys::cuMemAlloc_v2(&mut ptr, bytes.max(1))
        })?;
        let mem = DeviceMemory { ptr, bytes };
        // SAFETY: `ptr` is a fresh device allocation of at least `bytes` bytes.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(ptr, 0, bytes) })?;
        Ok(mem)
    }

    /// Loads a module: PTX text, which the driver compiles for the device the first time (its
    /// cache keeps the result for later runs), or a cubin or fat binary built ahead of time
    /// (`ptxas -arch=sm_90 program.ptx -o program.cubin`), which loads without compiling;
    /// `max_registers` caps registers per thread (32 lets 2048 threads reside on an SM: full
    /// occupancy; it applies to PTX only, a cubin's count was fixed when it was built).
    ///
    /// PTX is compiled as [`Jit::from_env`] says: by default each function on its own, on as
    /// many CPU threads as the machine has, and then linked ([`Jit::Separate`]), which takes a
    /// fraction of the time of compiling the program as a whole ([`Jit::Whole`]).
    pub fn load_module(&self, image: &[u8], max_registers: Option<u32>) -> Result<Module, Error> {
        self.load_module_with(image, max_registers, Jit::from_env())
    }

    /// [`Cuda::load_module`] with the way PTX is compiled given.
    pub fn load_module_with(
        &self,
        image: &[u8],
        max_registers: Option<u32>,
        jit: Jit,
    ) -> Result<Module, Error> {
        // A cubin is an ELF file; a fat binary starts with its magic word. Both are binary and
        // passed as they are; PTX is text and must end with a NUL.
        let binary =
            image.starts_with(b"\x7fELF") || image.starts_with(&0xBA55_ED50u32.to_le_bytes());
        let image: Vec<u8> = if binary {
            image.to_vec()
        } else {
            CString::new(image.to_vec())
                .map_err(|_| {
                    Error::Program("the PTX holds a NUL byte (and is not a cubin)".into())
                })?
                .into_bytes_with_nul()
        };
        let mut log = vec![0u8; 8192];
        let mut options = vec![
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: Vec<*mut c_void> = vec![log.as_mut_ptr().cast(), log.len() as *mut c_void];
        if let Some(r) = max_registers.filter(|_| !binary) {
            options.push(sys::CUjit_option::CU_JIT_MAX_REGISTERS);
            values.push(r as usize as *mut c_void);
        }
        let result = match jit {
            Jit::Separate { threads } if !binary => {
                // The driver compiles the functions on `threads` CPU threads (0: all of them)
                // where it can (drivers of CUDA 12.8 on); an older one refuses the option, and
                // the link is tried again without it.
                options.push(sys::CUjit_option::CU_JIT_SPLIT_COMPILE);
                values.push(threads as usize as *mut c_void);
                let without_split = options.len() - 1;
                match link(&image, &mut options, &mut values) {
                    Err((_, sys::CUresult::CUDA_ERROR_INVALID_VALUE)) => link(
                        &image,
                        &mut options[..without_split],
                        &mut values[..without_split],
                    ),
                    other => other,
                }
            }
            _ => {
                let mut module = std::ptr::null_mut();
                // SAFETY: the image is NUL-terminated PTX or a binary the driver parses and
                // validates itself (it lives until the call returns); options and values are
                // parallel arrays of the documented types (a buffer pointer, its size, an
                // unsigned int by value).
                let r = unsafe {
                    sys::cuModuleLoadDataEx(
                        &mut module,
                        image.as_ptr().cast(),
                        options.len() as u32,
                        options.as_mut_ptr(),
                        values.as_mut_ptr(),
                    )
                };
                if r == sys::CUresult::CUDA_SUCCESS {
                    Ok(module)
                } else {
                    Err(("cuModuleLoadDataEx", r))
                }
            }
        };
        let module = result.map_err(|(call, r)| {
            let e = failure(call, r);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..end]);
            match e {
                Error::Cuda {
                    call,
                    code,
                    message,
                } if !log.is_empty() => Error::Cuda {
                    call,
                    code,
                    message: format!("{message}: {log}"),
                },
                e => e,
            }
        })?;
        Ok(Module { module })
    }

    /// Waits for all work on the default stream, up to `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<Duration, Error> {
        let start = Instant::now();
        loop {
            // SAFETY: queries the legacy default stream of the current context.
            let r = unsafe { sys::cuStreamQuery(std::ptr::null_mut()) };
            if r != sys::CUresult::CUDA_ERROR_NOT_READY {
                check("cuStreamQuery", r)?;
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout(timeout));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Sets the stack each GPU thread gets, in bytes. Code with indirect calls (`core::fmt`) has
    /// no stack size the compiler can bound, so the driver's default (1 KiB) is what it gets.
    pub fn set_stack_size(&self, bytes: usize) -> Result<(), Error> {
        // SAFETY: sets a limit of the current context; no pointer is passed.
        check("cuCtxSetLimit", unsafe {
            sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, bytes)
        })
    }

    /// Copies `data` into device memory at `dst`.
    pub fn copy_to_device(&self, dst: sys::CUdeviceptr, data: &[u8]) -> Result<(), Error> {
        // SAFETY: `dst` is device memory of at least `data.len()` bytes (callers' allocations).
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(dst, data.as_ptr().cast(), data.len())
        })
    }

    /// Copies device memory at `src` into `out`.
    pub fn copy_from_device(&self, out: &mut [u8], src: sys::CUdeviceptr) -> Result<(), Error> {
        // SAFETY: `src` is device memory of at least `out.len()` bytes (callers' allocations).
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, out.len())
        })
    }

    /// The device ordinal's handle.
    pub fn device(&self) -> sys::CUdevice {
        self.device
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: releases the primary context retained in `new`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

/// Pinned host memory mapped into the device.
#[derive(Debug)]
pub struct MappedMemory {
    host: *mut u8,
    device: sys::CUdeviceptr,
    bytes: usize,
}

// SAFETY: the memory is plain host memory owned by this value; shared use goes through the
// protocol's atomics and ownership rules.
unsafe impl Send for MappedMemory {}
// SAFETY: as above.
unsafe impl Sync for MappedMemory {}

impl MappedMemory {
    /// The host address.
    pub fn host(&self) -> *mut u8 {
        self.host
    }
    /// The device address.
    pub fn device(&self) -> sys::CUdeviceptr {
        self.device
    }
    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for MappedMemory {
    fn drop(&mut self) {
        // SAFETY: `host` came from `cuMemHostAlloc` and is freed once.
        unsafe { sys::cuMemFreeHost(self.host.cast()) };
    }
}

/// Device memory.
#[derive(Debug)]
pub struct DeviceMemory {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceMemory {
    /// The device address.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }
    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }
    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `cuMemAlloc` and is freed once.
        unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// A loaded module.
#[derive(Debug)]
pub struct Module {
    module: sys::CUmodule,
}

impl Module {
    /// The kernel `name`.
    pub fn function(&self, name: &str) -> Result<Function, Error> {
        let c =
            CString::new(name).map_err(|_| Error::Program(format!("bad kernel name {name:?}")))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: valid out-pointer and NUL-terminated name; the module is loaded.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, self.module, c.as_ptr())
        })
        .map_err(|_| Error::Program(format!("the program has no kernel named `{name}`")))?;
        Ok(Function { function: f })
    }

    /// The device address and size of the global `name`, if the module has one.
    pub fn global(&self, name: &str) -> Result<Option<(sys::CUdeviceptr, usize)>, Error> {
        let c =
            CString::new(name).map_err(|_| Error::Program(format!("bad global name {name:?}")))?;
        let (mut ptr, mut bytes) = (0, 0);
        // SAFETY: valid out-pointers and NUL-terminated name; the module is loaded.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.module, c.as_ptr()) };
        if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        check("cuModuleGetGlobal", r)?;
        Ok(Some((ptr, bytes)))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: the module was loaded by `load_module` and is unloaded once.
        unsafe { sys::cuModuleUnload(self.module) };
    }
}

/// A kernel.
#[derive(Debug, Clone, Copy)]
pub struct Function {
    function: sys::CUfunction,
}

impl Function {
    /// Launches on the default stream with `grid` blocks of `block` threads.
    ///
    /// # Safety
    ///
    /// `params` must point to one value of each of the kernel's parameter types, in order, and
    /// every pointer the kernel receives must be valid for what it does with it until it ends.
    pub unsafe fn launch(
        &self,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), Error> {
        // SAFETY: the caller guarantees the parameters; the function belongs to a loaded module.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                self.function,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Registers per thread the compiled kernel uses.
    pub fn registers(&self) -> Result<u32, Error> {
        let mut v = 0;
        // SAFETY: valid out-pointer, loaded function.
        check("cuFuncGetAttribute", unsafe {
            sys::cuFuncGetAttribute(
                &mut v,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                self.function,
            )
        })?;
        Ok(v as u32)
    }

    /// Blocks of `block` threads that can be resident on one SM at once.
    pub fn blocks_per_sm(&self, block: u32) -> Result<u32, Error> {
        let mut v = 0;
        // SAFETY: valid out-pointer, loaded function.
        check("cuOccupancyMaxActiveBlocksPerMultiprocessor", unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut v, self.function, block as i32, 0)
        })?;
        Ok(v as u32)
    }
}

/// How the driver compiles a program given as PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jit {
    /// Each function compiled on its own (as `ptxas -c` does), on `threads` CPU threads at once
    /// (0: as many as the machine has), then linked: the default. Calls between functions
    /// follow the ABI, as separately compiled CUDA code's do.
    Separate {
        /// CPU threads compiling at once; 0: all of the machine's.
        threads: u32,
    },
    /// The program compiled as one whole, on one thread (as `ptxas` without `-c`): calls
    /// between functions may be optimised across, and the first load takes several times as
    /// long.
    Whole,
}

impl Jit {
    /// `FERRY_JIT=whole` gives [`Jit::Whole`]; otherwise [`Jit::Separate`] on
    /// `FERRY_JIT_THREADS` threads (default 0: all of the machine's).
    pub fn from_env() -> Jit {
        if std::env::var("FERRY_JIT").is_ok_and(|v| v.trim() == "whole") {
            return Jit::Whole;
        }
        let threads = std::env::var("FERRY_JIT_THREADS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        Jit::Separate { threads }
    }
}

/// Compiles NUL-terminated PTX `image` as a relocatable object with `options` and links it
/// (`cuLinkCreate`, `cuLinkAddData`, `cuLinkComplete`), then loads the result; on failure, the
/// call that failed and its code (the error log is in the buffer `options` name).
fn link(
    image: &[u8],
    options: &mut [sys::CUjit_option],
    values: &mut [*mut c_void],
) -> Result<sys::CUmodule, (&'static str, sys::CUresult)> {
    let ok = |call, r| {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err((call, r))
        }
    };
    let mut state = std::ptr::null_mut();
    // SAFETY: options and values are parallel arrays of the documented types, alive until the
    // state is destroyed below (the log buffer is written until then).
    ok("cuLinkCreate", unsafe {
        sys::cuLinkCreate_v2(
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
            &mut state,
        )
    })?;
    let mut module = std::ptr::null_mut();
    let loaded = (|| {
        // SAFETY: `state` is live; the image is NUL-terminated PTX, alive until the call returns
        // (the driver copies what it keeps); the name is a static C string.
        ok("cuLinkAddData", unsafe {
            sys::cuLinkAddData_v2(
                state,
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                image.as_ptr() as *mut c_void,
                image.len(),
                c"program".as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        })?;
        let mut cubin = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: `state` holds the added PTX; the linked image it returns lives as long as the
        // state.
        ok("cuLinkComplete", unsafe {
            sys::cuLinkComplete(state, &mut cubin, &mut size)
        })?;
        // SAFETY: `cubin` is the linker's image, alive until the state is destroyed below.
        ok("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, cubin)
        })
    })();
    // SAFETY: created above, destroyed once; the module loaded from its image is the driver's
    // own copy.
    unsafe { sys::cuLinkDestroy(state) };
    loaded.map(|()| module)
}
