use rpc_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = &'static [u8], response = u64)]
    Put,
}

fn main() {}
