use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, oneway)]
    Log { line: u32 },
}

fn main() {}
