//! AMD GPUs through the HSA runtime, loaded at run time with libloading: nothing of ROCm is
//! needed to build, and a machine without it gets [`Error::NoDriver`], not a panic.
//!
//! Done so far: finding and opening `libhsa-runtime64`, resolving the entry points the transport
//! will use, and initialising the runtime. Not done yet (no AMD GPU or ROCm on the machines this
//! was built on, and AMDGPU `core` does not build with the compilers here): fine-grained memory
//! pools (`hsa_amd_memory_pool_allocate` on the CPU agent's fine-grained pool, then
//! `hsa_amd_agents_allow_access` for the GPU), code objects and kernel dispatch.

use crate::Error;

/// Names the runtime library goes by.
pub const LIBRARY_NAMES: [&str; 2] = ["libhsa-runtime64.so.1", "libhsa-runtime64.so"];

/// Entry points the transport resolves at load, so a wrong library fails at once.
pub const SYMBOLS: [&str; 5] = [
    "hsa_init",
    "hsa_shut_down",
    "hsa_iterate_agents",
    "hsa_amd_memory_pool_allocate",
    "hsa_amd_agents_allow_access",
];

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
