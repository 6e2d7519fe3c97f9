// Input of the expansion snapshot test (`src/expand.rs`): a service with a call of each kind.
#[derive(RpcOpcodes)]
#[rpc(service = "counter")]
pub enum Counter {
    /// Adds to a counter; returns the new value.
    #[rpc(request = Add, response = u64)]
    Add,
    #[rpc(request = [u8], response = u64, limit = 4096)]
    Sum,
    #[rpc(request = u32, response = str)]
    Name,
    #[rpc(request = u64, oneway, opcode = 7)]
    Bump,
    #[rpc(request = (), response = ())]
    Ping,
}
