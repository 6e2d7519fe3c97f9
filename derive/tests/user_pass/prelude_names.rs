// Calls named as methods of the std prelude's traits (`Clone`, `AsRef`, `ToOwned`, `Drop`; `Into`
// and `TryInto`, whose methods take their receiver by value and so come before a client's own,
// are refused: `tests/ui/call_named_into.rs`): a
// file service's `Clone` and `Drop` are natural names. The generated client and server take
// them (a client's own methods come before a trait's), and so must the async server's code,
// which the derive generates for every service where ferry-rpc has `std`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ferry_rpc::service::Bytes;
use ferry_rpc::{HeapRegion, RpcOpcodes};
use ferry_testkit::Watchdog;

#[derive(RpcOpcodes)]
pub enum Files {
    /// Copies a file: the new file's handle.
    #[rpc(response = u32)]
    Clone { file: u32 },
    /// A handle's path, as a stream.
    #[rpc(response = Bytes)]
    AsRef { file: u32 },
    /// One-way: forgets a handle.
    #[rpc(oneway)]
    Drop { file: u32 },
    #[rpc(response = u64)]
    ToOwned { file: u32, owner: u32 },
}

struct Host;

impl FilesServer for Host {
    fn clone(&self, file: u32) -> u32 {
        file + 1
    }
    fn as_ref(&self, file: u32) -> impl AsRef<[u8]> {
        format!("/files/{file}").into_bytes()
    }
    fn drop(&self, _file: u32) {}
    fn to_owned(&self, file: u32, owner: u32) -> u64 {
        (owner as u64) << 32 | file as u64
    }
}

struct AsyncHost;

impl FilesAsyncServer for AsyncHost {
    async fn clone(&self, file: u32) -> u32 {
        file + 1
    }
    async fn as_ref(&self, file: u32) -> Vec<u8> {
        format!("/files/{file}").into_bytes()
    }
    async fn drop(&self, _file: u32) {}
    async fn to_owned(&self, file: u32, owner: u32) -> u64 {
        (owner as u64) << 32 | file as u64
    }
}

fn main() {
    let _watchdog = Watchdog::new("prelude names", Duration::from_secs(60));
    // The async server builds (its tasks would run on the executor `spawn` names).
    let _ = Files::async_server(
        AsyncHost,
        |task: Pin<Box<dyn Future<Output = ()> + Send>>| drop(task),
    );
    let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (server, mut buffers) = (region.server(), Vec::new());
            for _ in 0..3 {
                while Files::serve_one(&Host, &server, &mut buffers)
                    .unwrap()
                    .is_none()
                {
                    std::thread::yield_now();
                }
            }
        });
        let site = region.client();
        let c = Files::client(&site);
        assert_eq!(c.clone(1), Ok(2));
        assert_eq!(c.as_ref(7), Ok(b"/files/7".to_vec()));
        assert_eq!(c.to_owned(1, 2), Ok(2 << 32 | 1));
    });
}
