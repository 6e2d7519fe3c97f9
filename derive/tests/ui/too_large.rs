use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = [u64; 9])]
    Get { key: u32 },
}

fn main() {}
