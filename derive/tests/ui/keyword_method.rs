use ferry_derive::RpcOpcodes;

// `Type` becomes `r#type`; `Super` would become `super`, which cannot be raw.
#[derive(RpcOpcodes)]
enum Tree {
    #[rpc(response = u32)]
    Type { node: u32 },
    #[rpc(response = u32)]
    Super { node: u32 },
}

fn main() {}
