use ferry_rpc::service::Bytes;
use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, error = Bytes)]
    Get { key: u32 },
}

fn main() {}
