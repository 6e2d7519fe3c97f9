//! A user's own service between two processes, with ferry-shm as the only dependency: the
//! service is a plain enum, the server a plain struct, the client process this program again.
//!
//! `cargo run --release --manifest-path examples/standalone/Cargo.toml`

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferry_shm::ferry_rpc::service::Error;
use ferry_shm::{
    path_for, wire, ClientConfig, RpcOpcodes, ServerConfig, ShmClient, ShmServer, Text,
};

/// A point: an argument type of the user's own, which crosses as its bytes. `#[wire]` brings
/// zerocopy's derives (through ferry-shm), `#[repr(C)]`, and the `Schema` that puts its fields
/// (names, offsets, types) into the service's fingerprint.
#[wire]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    x: i32,
    y: i32,
}

/// The service: each variant is a call, its fields the arguments.
#[derive(RpcOpcodes)]
enum Greeter {
    /// Greets `name`; counts the greetings.
    #[rpc(response = Text)]
    Greet(Text),
    /// How many greetings so far.
    #[rpc(response = u64)]
    Count,
    /// `a / b`; dividing by zero is the call's own error, not a transport's.
    #[rpc(response = u64, error = u8)]
    Divide { a: u64, b: u64 },
    /// The point mirrored through the origin.
    #[rpc(response = Point)]
    Mirror(Point),
}

#[derive(Default)]
struct Host {
    greeted: AtomicU64,
}

impl GreeterServer for Host {
    // Text and Bytes replies are `impl AsRef<str>` (`<[u8]>`): a String, a &str, a buffer.
    fn greet(&self, name: &str) -> impl AsRef<str> {
        self.greeted.fetch_add(1, Ordering::Relaxed);
        format!("hello, {name}")
    }

    fn count(&self) -> u64 {
        self.greeted.load(Ordering::Relaxed)
    }

    fn divide(&self, a: u64, b: u64) -> Result<u64, u8> {
        a.checked_div(b).ok_or(1)
    }

    fn mirror(&self, p: Point) -> Point {
        Point { x: -p.x, y: -p.y }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, role, path] = &args[..] {
        if role == "client" {
            return client(Path::new(path));
        }
    }
    let path = path_for(&format!("standalone-{}", std::process::id()));
    let server = ShmServer::start(
        &path,
        ServerConfig::default(),
        Greeter::server(Host::default()),
    )?;
    let status = std::process::Command::new(std::env::current_exe()?)
        .arg("client")
        .arg(&path)
        .status()?;
    let stats = server.shutdown(Duration::from_secs(5)).stats;
    println!("the server served {} calls", stats.served);
    if !status.success() {
        return Err(format!("the client process failed: {status}").into());
    }
    Ok(())
}

fn client(path: &Path) -> Res<()> {
    let shm = ShmClient::attach(path, ClientConfig::default().service::<Greeter>())?;
    let greeter = Greeter::client(&shm);
    for name in ["ferry", "world"] {
        println!("{}", greeter.greet(name)?);
    }
    assert_eq!(greeter.count()?, 2);
    assert_eq!(greeter.divide(84, 2)?, 42);
    assert_eq!(
        greeter.mirror(Point { x: 3, y: -4 })?,
        Point { x: -3, y: 4 }
    );
    match greeter.divide(1, 0) {
        Err(Error::App(1)) => println!("1 / 0 refused by the service, as written"),
        other => return Err(format!("1 / 0 gave {other:?}").into()),
    }
    Ok(())
}
