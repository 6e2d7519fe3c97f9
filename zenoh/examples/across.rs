//! The README's "Across machines": the demo service served on one machine and called from
//! another through zenoh, with the same calls as between processes.
//!
//! ```text
//! # the server's machine: serves "demo" through shared memory and zenoh
//! cargo run --release -p ferry-zenoh --example across -- serve --listen tcp/0.0.0.0:7447
//! # another machine: the same calls, through zenoh
//! cargo run --release -p ferry-zenoh --example across -- call --connect tcp/SERVER:7447
//! # both in this process over loopback (what CI runs): a zenoh client and the one-name client
//! cargo run --release -p ferry-zenoh --example across
//! ```
//!
//! A server that already runs (`ferry serve --name demo`) is exported with `ferry bridge --name
//! demo --listen tcp/0.0.0.0:7447` (the `ferry` command built with `--features zenoh`), and is
//! called the same way.

use std::time::Duration;

use ferry_demo::{Demo, DemoService};
use ferry_shm::ServerConfig;
use ferry_zenoh::{peer_config, ClientConfig, NamedClient, ZenohClient, ZenohServer};
use zenoh::Wait;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The calls a client makes, the same over any site.
fn calls<S: ferry_rpc::service::Site + Copy>(demo: ferry_demo::DemoClient<S>) -> Res<()> {
    println!("  add(2, 3) = {}", demo.add(2, 3)?);
    let summed = demo.sum(b"across machines")?;
    println!("  sum of {} bytes = {}", summed.len, summed.sum);
    // The handler's own error, typed, as between processes.
    match demo.sleep(u64::MAX) {
        Err(ferry_rpc::service::Error::App(e)) => println!("  sleep(too long): refused: {e}"),
        other => return Err(format!("sleep(too long) gave {other:?}").into()),
    }
    Ok(())
}

fn serve(listen: &str, name: &str) -> Res<()> {
    let session = zenoh::open(peer_config(&[listen], &[])?).wait()?;
    let server = ZenohServer::start(
        &session,
        name,
        ServerConfig::default(),
        Demo::server(DemoService),
    )?;
    println!(
        "serving `{name}` on {listen}: {:?}; Ctrl-C to stop",
        server.keys()
    );
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn call(connect: &str, name: &str) -> Res<()> {
    let session = zenoh::open(peer_config(&[], &[connect])?).wait()?;
    let named = NamedClient::connect(&session, name, ClientConfig::default().service::<Demo>())?;
    let path = if named.is_local() {
        "shared memory"
    } else {
        "zenoh"
    };
    println!("calling `{name}` through {path}:");
    calls(Demo::client(&named))
}

/// Both sides in this process, over loopback.
fn both() -> Res<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let name = format!("across-{}", std::process::id());
    let server_session = zenoh::open(peer_config(&[&endpoint], &[])?).wait()?;
    let server = ZenohServer::start(
        &server_session,
        &name,
        ServerConfig::default(),
        Demo::server(DemoService),
    )?;
    let session = zenoh::open(peer_config(&[], &[&endpoint])?).wait()?;
    let config = || ClientConfig::default().service::<Demo>();
    println!("through zenoh (ZenohClient):");
    let remote = ZenohClient::connect(&session, &name, config())?;
    calls(Demo::client(&remote))?;
    println!("by its name (NamedClient; the server runs on this machine, so shared memory):");
    let named = NamedClient::connect(&session, &name, config())?;
    assert!(named.is_local());
    calls(Demo::client(&named))?;
    drop((remote, named));
    server.shutdown(Duration::from_secs(5));
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let name = flag("--name").unwrap_or("demo");
    match args.first().map(String::as_str) {
        None => both(),
        Some("serve") => serve(flag("--listen").unwrap_or("tcp/0.0.0.0:7447"), name),
        Some("call") => call(
            flag("--connect").ok_or("call needs --connect ENDPOINT")?,
            name,
        ),
        Some(other) => Err(format!(
            "unknown command {other}: serve [--listen EP] [--name N], call --connect EP \
             [--name N], or nothing (both here)"
        )
        .into()),
    }
}
