use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { name: &'static str },
}

fn main() {}
