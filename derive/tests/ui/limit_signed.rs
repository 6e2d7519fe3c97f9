use ferry_derive::RpcOpcodes;
use ferry_rpc::service::Bytes;

const MAX: i32 = -1;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64, limit = MAX)]
    Put { value: Bytes },
}

fn main() {}
