//! The frames a call passes on the server, from the worker's loop to the user's handler, as a
//! backtrace taken in the handler shows them (build without optimisation to see every one:
//! `cargo run -p ferry-shm --example frames`). Prints each call's frames, the standard library's
//! own (`catch_unwind`, thread locals) left out, and counts the functions of ferry and of the
//! generated code among them (closures left out).

use std::sync::Mutex;

use ferry_shm::{ClientConfig, RpcOpcodes, ServerConfig, ShmClient, ShmServer, Text};

#[derive(RpcOpcodes)]
#[rpc(service = "frames")]
pub enum Frames {
    /// An inline call (8 bytes each way).
    #[rpc(response = u64)]
    Add { n: u64 },
    /// A call through the packets (a streamed reply).
    #[rpc(response = Text)]
    Name { key: u32 },
}

/// The backtrace the last handler took.
static TRACE: Mutex<String> = Mutex::new(String::new());

fn take_trace() {
    let trace = std::backtrace::Backtrace::force_capture().to_string();
    *TRACE.lock().unwrap_or_else(|e| e.into_inner()) = trace;
}

struct Handler;

impl FramesServer for Handler {
    fn add(&self, n: u64) -> u64 {
        take_trace();
        n + 1
    }

    fn name(&self, key: u32) -> impl AsRef<str> {
        take_trace();
        key.to_string()
    }
}

/// Prints the frames of the last trace from the handler up to the worker's loop.
fn show(what: &str) {
    let trace = TRACE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!("{what}:");
    let mut functions = 0;
    for frame in trace
        .lines()
        .filter_map(|l| l.trim().split_once(": ").map(|(_, f)| f))
    {
        let library = ["std::", "core::", "<core::", "<std::", "__rust"];
        if library.iter().any(|p| frame.starts_with(p)) {
            continue;
        }
        println!("  {frame}");
        if frame.ends_with("ferry_shm::server::work") {
            break;
        }
        let ours = frame.contains("ferry_") || frame.contains("Frames");
        if ours && !frame.contains("{{closure}}") && !frame.contains("FramesServer") {
            functions += 1;
        }
    }
    println!(
        "  -> {functions} functions of ferry and the generated code between loop and handler\n"
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = format!("frames-{}", std::process::id());
    let server = ShmServer::start(&name, ServerConfig::default(), Frames::server(Handler))?;
    let shm = ShmClient::attach(server.path(), ClientConfig::default().service::<Frames>())?;
    let client = Frames::client(&shm);
    assert_eq!(client.add(1)?, 2);
    show("an inline call");
    assert_eq!(client.name(7)?, "7");
    show("a call through the packets");
    Ok(())
}
