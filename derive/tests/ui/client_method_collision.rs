use ferry_rpc::service::Bytes;
use ferry_rpc::RpcOpcodes;

#[derive(RpcOpcodes)]
pub enum Store {
    /// A streamed reply: the client gets `value` and `value_into`.
    #[rpc(response = Bytes)]
    Value { key: u32 },
    #[rpc(response = u32)]
    ValueInto { key: u32 },
}

fn main() {}
