use ferry_derive::RpcOpcodes;
use ferry_rpc::service::Bytes;

#[derive(RpcOpcodes)]
enum Kv {
    // Fine: fixed arguments and a fixed reply, values or not, one-way or not.
    #[rpc(response = u64, hot)]
    Count { key: u32 },
    #[rpc(response = u64, values, hot)]
    Peek { key: u32 },
    #[rpc(oneway, hot)]
    Log { line: u32 },
    // A stream's code is shared by every call that streams.
    #[rpc(response = u32, hot)]
    Put { key: u32, value: Bytes },
    #[rpc(response = Bytes, hot)]
    Get { key: u32 },
}

fn main() {}
