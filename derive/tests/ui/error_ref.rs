use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, error = &'static str)]
    Get { key: u32 },
}

fn main() {}
