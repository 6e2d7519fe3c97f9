//! Ends the program with the code in argument 1 (default 3) through the host's exit service.
//!
//! Every warp calls `exit`; the loader ends with the first code it serves. Each thread returns 0
//! (0x40 if the call failed), so an exit code other than 0 can only have come through the call.

#![no_std]
#![feature(abi_ptx)]

ferry_device::entry!(main);

/// Every thread's code, ORed: the program's exit code (`ferry_device::program::ExitOr`).
static CODE: ferry_device::program::ExitOr = ferry_device::program::ExitOr::new();

fn main(args: ferry_device::Args) -> i32 {
    let code = args.get_u32(1).unwrap_or(3) as i32;
    let client = ferry_device::client();
    let failed = match ferry_device::host::exit(&client, code) {
        Ok(()) => 0,
        // A host that could not serve the call: make it visible in the exit code.
        Err(_) => 0x40,
    };
    CODE.finish(&client, failed)
}
