use ferry_derive::RpcOpcodes;

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
