use ferry_rpc::RpcOpcodes;

#[derive(RpcOpcodes)]
#[rpc(service = "nul\0inside")]
pub enum NulName {
    #[rpc(response = u32)]
    Get,
}

fn main() {}
