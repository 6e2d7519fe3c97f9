use rpc_derive::RpcOpcodes;

// Under the class scheme `Get` is 0x0003_0000; `Put` claims the same number explicitly.
#[derive(RpcOpcodes)]
#[rpc(class = 3)]
enum Kv {
    #[rpc(request = u32, response = u64)]
    Get,
    #[rpc(request = u32, response = u64, opcode = 0x30000)]
    Put,
}

fn main() {}
