// A service derived in a `no_std` crate: the generated code names only `core` and `ferry_rpc`.
#![no_std]

extern crate std;

use ferry_rpc::service::{Bytes, Text};
use ferry_derive::{RpcOpcodes, Schema};
use zerocopy::{Immutable, IntoBytes, TryFromBytes};

#[derive(Clone, Copy, TryFromBytes, IntoBytes, Immutable, Schema)]
#[repr(C)]
pub struct Pair {
    a: u32,
    b: u32,
}

#[derive(Clone, Copy, TryFromBytes, IntoBytes, Immutable, Schema)]
#[repr(u8)]
pub enum Busy {
    Busy = 1,
}

#[derive(RpcOpcodes)]
pub enum Device {
    #[rpc(response = u64)]
    Add { pair: Pair, carry: bool },
    #[rpc(oneway)]
    Print { line: Text },
    #[rpc(response = Bytes, error = Busy, limit = 4 * 1024)]
    Echo { tag: u8, data: Bytes },
    #[rpc(response = Text)]
    Name,
}

struct Dev;

impl DeviceServer for Dev {
    fn add(&self, pair: Pair, carry: bool) -> u64 {
        pair.a as u64 + pair.b as u64 + carry as u64
    }
    fn print(&self, _line: &str) {}
    fn echo(&self, _tag: u8, data: &[u8]) -> Result<impl AsRef<[u8]>, Busy> {
        Ok([data.first().copied().unwrap_or(0)])
    }
    fn name(&self) -> impl AsRef<str> {
        "dev"
    }
}

/// A client over any site, using only the allocation-free methods.
pub fn use_client<S: ferry_rpc::service::Site>(site: S) -> u64 {
    let c = Device::client(site);
    let mut buf = [0u8; 16];
    let _ = c.echo_into(1, b"x", &mut buf);
    let _ = c.name_into(&mut buf);
    c.print("hi").ok();
    c.add(Pair { a: 1, b: 2 }, true).unwrap_or(0)
}

fn main() {
    let _ = Dev;
}
