// A service's argument written `String` or `Vec<u8>`, and a reply written `String`: each one
// error at the type, naming the stream to write instead.
use ferry_derive::RpcOpcodes;

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { key: u32, name: String },
    #[rpc(response = u64)]
    Load { data: Vec<u8> },
    #[rpc(response = String)]
    Name { key: u32 },
}

fn main() {}
