use ferry_derive::RpcOpcodes;
use zerocopy::{Immutable, IntoBytes, TryFromBytes};

/// Zerocopy, so its bytes can cross, but without `#[derive(Schema)]`: the fingerprint could not
/// tell it from another `Key` whose fields are swapped.
#[derive(Clone, Copy, TryFromBytes, IntoBytes, Immutable)]
#[repr(C)]
struct Key {
    id: u32,
    shard: u32,
}

#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(response = u64)]
    Get { key: Key },
}

fn main() {}
