use rpc_derive::RpcOpcodes;

// The derive fails, yet code naming what it would generate reports nothing further.
#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = u32)]
    Get,
}

struct Store;
impl KvServer for Store {}

fn connect<C: KvClient>(_: &C) {}

fn main() {
    let _ = <Kv as rpc_core::service::Service>::FINGERPRINT;
    let _ = connect::<()>;
}
impl KvClient for () {}
