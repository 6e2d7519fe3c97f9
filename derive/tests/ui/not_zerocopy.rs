use ferry_derive::{RpcOpcodes, Schema};

// A `Schema` but no zerocopy derives: the errors are zerocopy's alone.
#[derive(Schema)]
#[repr(C)]
struct Key {
    id: u32,
}

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Get { key: Key },
}

fn main() {}
