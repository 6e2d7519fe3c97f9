use rpc_core::service::{Bytes, Text};
use rpc_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { name: Text, value: Bytes },
}

fn main() {}
