use ferry_derive::RpcOpcodes;

// A service enum with a type parameter: its calls' types would not be known to the fingerprint.
#[derive(RpcOpcodes)]
pub enum Typed<T> {
    #[rpc(response = u32)]
    Get { key: T },
}

fn main() {}
