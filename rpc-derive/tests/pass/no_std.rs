// A service derived in a `no_std` crate: the generated code names only `core` and `rpc_core`.
#![no_std]

extern crate std;

use rpc_derive::RpcOpcodes;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
pub struct Pair {
    a: u32,
    b: u32,
}

#[derive(RpcOpcodes)]
pub enum Device {
    #[rpc(request = Pair, response = u64)]
    Add,
    #[rpc(request = str, oneway)]
    Print,
    #[rpc(request = [u8], response = [u8])]
    Echo,
    #[rpc(request = (), response = str)]
    Name,
}

fn main() {}
