use rpc_derive::RpcOpcodes;

#[repr(C)]
struct Key {
    id: u32,
}

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = Key, response = u64)]
    Get,
}

fn main() {}
