use ferry_derive::RpcOpcodes;

// 64 + 1 bytes of fixed arguments: packed, they still take more than a slot.
#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { key: [u64; 8], flag: u8 },
}

fn main() {}
