use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(values, values)]
    Ping,
}

fn main() {}
