use ferry_rpc::service::{Bytes, Text};
use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { name: Text, value: Bytes },
}

fn main() {}
