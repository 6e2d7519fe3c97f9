use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Log {
    #[rpc(oneway = true)]
    Note { line: u32 },
}

fn main() {}
