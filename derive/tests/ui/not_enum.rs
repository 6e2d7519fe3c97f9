use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
struct Kv {
    key: u32,
}

fn main() {}
