use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, opcode = 0xFFFFFFFF)]
    Get { key: u32 },
}

fn main() {}
