use rpc_derive::RpcOpcodes;

// `open` would be shadowed by `rpc_core::Process::open` on the client.
#[derive(RpcOpcodes)]
enum Files {
    #[rpc(request = u32, response = u64)]
    Open,
}

fn main() {}
