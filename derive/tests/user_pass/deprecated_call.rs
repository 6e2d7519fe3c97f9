// A call marked `#[deprecated]`, as a service phases one out, in a crate that denies warnings.
// Defining it must not warn (only uses of the call should), and `#[allow(deprecated)]` is needed
// only where the handler is written.

#![deny(warnings)]

use ferry_rpc::RpcOpcodes;

#[derive(RpcOpcodes)]
pub enum Store {
    /// The old way to read a key.
    #[deprecated = "call `Read`"]
    #[rpc(response = u64)]
    Get { key: u32 },
    #[rpc(response = u64)]
    Read { key: u32 },
}

struct Keys;

impl StoreServer for Keys {
    fn get(&self, key: u32) -> u64 {
        self.read(key)
    }
    fn read(&self, key: u32) -> u64 {
        key as u64 * 2
    }
}

fn main() {
    let _ = Store::server(Keys);
    assert_ne!(Store::OPCODE_GET, Store::OPCODE_READ);
}
