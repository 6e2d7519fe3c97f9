use ferry_derive::RpcOpcodes;

// A service enum with a lifetime, and a borrowed argument.
#[derive(RpcOpcodes)]
pub enum Borrowed<'a> {
    #[rpc(response = u32)]
    Get { key: &'a str },
}

fn main() {}
