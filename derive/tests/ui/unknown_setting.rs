use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(reply = u64)]
    Get { key: u32 },
}

fn main() {}
