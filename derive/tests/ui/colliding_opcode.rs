use ferry_derive::RpcOpcodes;

// Under the class scheme `Get` is 0x0003_0000; `Put` claims the same number explicitly.
#[derive(RpcOpcodes)]
#[rpc(class = 3)]
enum Kv {
    #[rpc(response = u64)]
    Get { key: u32 },
    #[rpc(response = u64, opcode = 0x30000)]
    Put { key: u32 },
}

fn main() {}
