use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, opcode = 5)]
    Get { key: u32 },
    #[rpc(response = u64, opcode = 5)]
    Put { key: u32 },
}

fn main() {}
