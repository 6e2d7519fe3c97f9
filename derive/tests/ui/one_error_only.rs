use ferry_derive::RpcOpcodes;

// The derive fails, yet code naming what it would generate reports nothing further.
#[derive(RpcOpcodes)]
enum Kv {
    #[rpc(request = u32)]
    Get,
}

struct Store;
impl KvServer for Store {}

fn main() {
    let region: ferry_rpc::HeapRegion = ferry_rpc::HeapRegion::new(32, 1).unwrap();
    let site = region.client();
    let _client: KvClient<_> = Kv::client(&site);
    let _ = <Kv as ferry_rpc::service::Service>::FINGERPRINT;
}
