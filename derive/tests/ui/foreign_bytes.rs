use ferry_derive::RpcOpcodes;

// A type of the user's own called `Bytes` is not a stream.
#[derive(Clone, Copy, zerocopy::IntoBytes, zerocopy::TryFromBytes, zerocopy::Immutable)]
#[repr(C)]
struct Bytes {
    len: u32,
}

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Put { value: Bytes },
}

fn main() {}
