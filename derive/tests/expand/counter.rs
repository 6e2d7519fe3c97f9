// Input of the expansion snapshot test (`src/expand.rs`): a service with a call of each kind.
#[derive(RpcOpcodes)]
#[rpc(service = "counter")]
pub enum Counter {
    /// Adds `n`; returns the new total. Compiled where it is called (`hot`).
    #[rpc(response = u64, hot)]
    Add { n: u64 },
    /// Stores bytes under a key; how many are stored now.
    #[rpc(response = u64, error = StoreError)]
    Put { key: u32, value: Bytes },
    /// A key's name, as text.
    #[rpc(response = Text, error = StoreError, limit = MAX_NAME)]
    Name { key: u32 },
    /// Touches a key; replies `()`.
    Touch(u32),
    /// Resets; the client does not wait.
    #[rpc(oneway, opcode = 7)]
    Reset,
}
