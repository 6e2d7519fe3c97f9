use rpc_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = u32, response = u64, opcode = 5)]
    Get,
    #[rpc(request = u32, response = u64, opcode = 5)]
    Put,
}

fn main() {}
