use ferry_derive::RpcOpcodes;

#[derive(Clone, Copy, zerocopy::IntoBytes, zerocopy::TryFromBytes, zerocopy::Immutable)]
#[repr(u8)]
enum Full {
    Full = 1,
}

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(oneway, error = Full)]
    Log { line: u32 },
}

fn main() {}
