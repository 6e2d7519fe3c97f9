use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Ops {
    #[rpc(response = u32)]
    Get = 5,
    #[rpc(response = u32)]
    Put,
}

fn main() {}
