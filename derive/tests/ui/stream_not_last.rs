use ferry_rpc::service::Bytes;
use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { value: Bytes, key: u32 },
}

fn main() {}
