//! `ferry bridge --name NAME`: exports the services of a running shared-memory server to zenoh,
//! so that they are callable from other machines (`ferry_zenoh::ZenohClient`) without changing
//! the server's program. Built with the `zenoh` feature.
//!
//! The bridge outlives its server: when the server stops or dies, calls fail at once (no server)
//! and the bridge says so; when a server of the same services starts under the name again, the
//! bridge attaches to it and says so; a server of other services or schemas is never called
//! (calls are refused, and the bridge says which services it found) until the right one is back.

use std::time::{Duration, Instant};

use clap::Args;
use ferry_shm::{path_for, ClientConfig, ShmClient};
use ferry_zenoh::zenoh::Wait;
use ferry_zenoh::{peer_config, Bridge, BridgeConfig, ServerState};

use crate::{catch_signals, signalled, Res};

#[derive(Args, Debug)]
pub(crate) struct BridgeArgs {
    /// Name (in /dev/shm) or path of the running server's shared-memory file.
    #[arg(long)]
    name: String,
    /// The name its services are exported under (keys `ferry/<as>/SERVICE/FINGERPRINT`):
    /// ASCII letters, digits, `-`, `_`, `.`; default: --name, where it is such a name.
    #[arg(long = "as")]
    export_as: Option<String>,
    /// zenoh endpoints to listen on (`tcp/0.0.0.0:7447`); repeat for more.
    #[arg(long)]
    listen: Vec<String>,
    /// zenoh endpoints to connect to (a peer or a router: `tcp/HOST:7447`); repeat for more.
    #[arg(long)]
    connect: Vec<String>,
    /// Threads making the calls on the server (calls in flight at once).
    #[arg(long, default_value_t = BridgeConfig::default().workers)]
    workers: usize,
    /// Seconds to wait for the server's file to appear.
    #[arg(long, default_value_t = 10)]
    deadline: u64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    seconds: Option<u64>,
}

/// The name the services are exported under.
fn exported_as(args: &BridgeArgs) -> &str {
    args.export_as.as_deref().unwrap_or(&args.name)
}

/// What the parser cannot check: the exported name.
pub(crate) fn check(args: &BridgeArgs) -> Result<(), String> {
    crate::check_name(&args.name)?;
    let name = exported_as(args);
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !ok {
        return Err(format!(
            "{} {name}: cannot name services across zenoh (ASCII letters, digits, `-`, `_` and \
             `.`){}",
            if args.export_as.is_some() {
                "--as"
            } else {
                "--name"
            },
            if args.export_as.is_some() {
                ""
            } else {
                "; give one with --as"
            }
        ));
    }
    crate::at_least_one("--workers", args.workers as u64)?;
    crate::at_least_one("--deadline", args.deadline)
}

pub(crate) fn run(args: BridgeArgs) -> Res<()> {
    catch_signals()?;
    let path = path_for(&args.name);
    let until = Instant::now() + Duration::from_secs(args.deadline);
    let shm = loop {
        match ShmClient::attach(&path, ClientConfig::default()) {
            Ok(shm) => break shm,
            Err(e) if Instant::now() >= until || signalled().is_some() => {
                return Err(format!("no server to bridge at {}: {e}", path.display()).into())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let listen: Vec<&str> = args.listen.iter().map(String::as_str).collect();
    let connect: Vec<&str> = args.connect.iter().map(String::as_str).collect();
    let session = ferry_zenoh::zenoh::open(peer_config(&listen, &connect)?)
        .wait()
        .map_err(|e| format!("opening the zenoh session: {e}"))?;
    let name = exported_as(&args);
    let bridge = Bridge::start(
        &session,
        name,
        shm,
        BridgeConfig::default().workers(args.workers),
    )?;
    println!(
        "bridging {} to zenoh as `{name}`; Ctrl-C to stop",
        path.display()
    );
    for key in bridge.keys() {
        println!("  {key}");
    }
    let until = args
        .seconds
        .and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
    while signalled().is_none() && until.is_none_or(|t| Instant::now() < t) {
        if let Some(state) = bridge.next_change(Duration::from_millis(100)) {
            report(&path.display().to_string(), &state);
        }
    }
    drop(bridge);
    let _ = session.close().wait();
    println!(
        "stopped{}",
        signalled().map_or(String::new(), |s| format!(" by {s}"))
    );
    Ok(())
}

/// Says what became of the server behind the bridge.
fn report(path: &str, state: &ServerState) {
    match state {
        ServerState::Serving { pid } => {
            println!("the server at {path} is back (pid {pid}): bridging again")
        }
        ServerState::Gone => eprintln!(
            "the server at {path} is gone: calls fail (no server) until it is started again"
        ),
        ServerState::Changed { pid, services } => {
            let list: Vec<String> = services
                .iter()
                .map(|(name, fp)| format!("{name} {fp:#018x}"))
                .collect();
            eprintln!(
                "the server at {path} (pid {pid}) serves other services or schemas ({}): not \
                 bridged, calls refused until a server of the exported ones is started there (or \
                 restart the bridge to export these)",
                list.join(", ")
            )
        }
    }
}
