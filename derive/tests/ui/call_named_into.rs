use ferry_rpc::RpcOpcodes;

#[derive(RpcOpcodes)]
pub enum Convert {
    #[rpc(response = u32)]
    Into { value: u32 },
}

fn main() {}
