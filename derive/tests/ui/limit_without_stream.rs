use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, limit = 100)]
    Get { key: u32 },
}

fn main() {}
