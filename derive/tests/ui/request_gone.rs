use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = u32, response = u64)]
    Get,
}

fn main() {}
