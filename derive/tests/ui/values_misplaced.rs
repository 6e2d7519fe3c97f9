use ferry_derive::RpcOpcodes;
use ferry_rpc::service::Bytes;

#[derive(RpcOpcodes)]
enum Kv {
    // Fine: fixed arguments and a fixed reply.
    #[rpc(response = u64, values)]
    Count { key: u32 },
    // A one-way call has no fences to leave out.
    #[rpc(oneway, values)]
    Log { line: u32 },
    // A stream's bytes are ordered by the fences.
    #[rpc(response = u32, values)]
    Put { key: u32, value: Bytes },
    #[rpc(response = Bytes, values)]
    Get { key: u32 },
}

fn main() {}
