use ferry_derive::RpcOpcodes;

// `with_deadline` is the generated client's own method.
#[derive(RpcOpcodes)]
enum Timer {
    #[rpc(response = u64)]
    WithDeadline { ms: u64 },
}

fn main() {}
