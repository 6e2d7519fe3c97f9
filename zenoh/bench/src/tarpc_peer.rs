//! The tarpc peer: the same calls (`add`, `echo`) as a tarpc service, bincode over TCP with
//! TCP_NODELAY; `echo` twice: the bytes as a `Vec<u8>` (as a tarpc user writes it: serde moves
//! it a byte at a time) and as a `serde_bytes` buffer (one copy: the tuned form). The caller's threads block on one client
//! (tarpc multiplexes their calls over one connection, as its users do).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use serde_bytes::ByteBuf;
use tarpc::server::{BaseChannel, Channel};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::tokio_util::codec::{Framed, LengthDelimitedCodec};
use tarpc::{client, context};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

#[tarpc::service]
trait Peer {
    /// Adds `n` to a total.
    async fn add(n: u64) -> u64;
    /// The bytes sent, back.
    async fn echo(value: Vec<u8>) -> Vec<u8>;
    /// The same, the bytes serialized whole.
    async fn echo_bytes(value: ByteBuf) -> ByteBuf;
}

#[derive(Clone)]
struct Total(Arc<AtomicU64>);

impl Peer for Total {
    async fn add(self, _: context::Context, n: u64) -> u64 {
        self.0.fetch_add(n, Ordering::Relaxed) + n
    }
    async fn echo(self, _: context::Context, value: Vec<u8>) -> Vec<u8> {
        value
    }
    async fn echo_bytes(self, _: context::Context, value: ByteBuf) -> ByteBuf {
        value
    }
}

/// Frames of up to 16 MiB (the default's 8 MiB would do; the bench's largest call is 1 MiB).
fn framed(stream: TcpStream) -> Framed<TcpStream, LengthDelimitedCodec> {
    LengthDelimitedCodec::builder()
        .max_frame_length(16 << 20)
        .new_framed(stream)
}

fn runtime() -> io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// The server: a runtime of its own accepting connections on `ip`; its address.
pub struct Server {
    pub addr: SocketAddr,
    _runtime: Runtime,
}

impl Server {
    pub fn start(ip: &str) -> io::Result<Server> {
        let runtime = runtime()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind((ip, 0)))?;
        let addr = listener.local_addr()?;
        let total = Total(Arc::default());
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let transport = tarpc::serde_transport::new(framed(stream), Bincode::default());
                let channel = BaseChannel::with_defaults(transport);
                tokio::spawn(channel.execute(total.clone().serve()).for_each(
                    |response| async move {
                        tokio::spawn(response);
                    },
                ));
            }
        });
        Ok(Server {
            addr,
            _runtime: runtime,
        })
    }
}

/// A client on its own runtime; its calls block the calling thread.
pub struct Client {
    runtime: Runtime,
    client: PeerClient,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let runtime = runtime()?;
        let client = runtime.block_on(async {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let transport = tarpc::serde_transport::new(framed(stream), Bincode::default());
            Ok::<_, io::Error>(PeerClient::new(client::Config::default(), transport).spawn())
        })?;
        Ok(Client { runtime, client })
    }

    pub fn add(&self, n: u64) -> Result<u64, String> {
        self.runtime
            .block_on(self.client.add(context::current(), n))
            .map_err(|e| e.to_string())
    }

    /// `value` sent and echoed back as a `Vec<u8>`; the reply's length.
    pub fn echo(&self, value: &[u8]) -> Result<usize, String> {
        self.runtime
            .block_on(self.client.echo(context::current(), value.to_vec()))
            .map(|reply| reply.len())
            .map_err(|e| e.to_string())
    }

    /// `value` sent and echoed back as a `serde_bytes` buffer; the reply's length.
    pub fn echo_bytes(&self, value: &[u8]) -> Result<usize, String> {
        self.runtime
            .block_on(
                self.client
                    .echo_bytes(context::current(), ByteBuf::from(value.to_vec())),
            )
            .map(|reply| reply.len())
            .map_err(|e| e.to_string())
    }
}
