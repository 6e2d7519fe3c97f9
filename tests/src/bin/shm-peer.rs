//! A client (or server) process for the multi-process tests: `shm-peer MODE PATH ARGS...`.
//!
//! - `calls PATH ID N`: N echo calls with ids `ID << 40 | i`; prints `ok O wrong W errors E port P`.
//! - `hold PATH K`: K threads each hold a port inside a call forever; prints `held P1 P2 ...`.
//! - `sleep PATH MICROS`: one `Sleep` call; prints `sent P` once the request is sent.
//! - `stream PATH`: starts a `Sum` stream, sends its first packet only; prints `streaming P`.
//! - `sticky PATH`: a sticky handle makes one call and then idles holding its port; prints
//!   `holding P`.
//! - `serve PATH`: serves the demo service until killed; prints `serving PID`.
//! - `serve-until-signal PATH DRAIN_MS`: serves the demo service until SIGINT or SIGTERM
//!   (`ShmServer::serve_until_signal`, draining for at most `DRAIN_MS`); prints `serving PID`,
//!   then `stopped SIGNAL drained D stuck S served N` and exits 0. SIGINT is set to its default
//!   action first: a test run as a shell's background job would otherwise start it ignored.

use std::io::Write;
use std::time::Duration;

use ferry_demo::{self as demo, Demo, DemoService, Echoed};
use ferry_shm::{ClientConfig, ServerConfig, ShmClient, ShmServer};

const DEADLINE: Duration = Duration::from_secs(30);

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A client of the demo service (checked at attach) that claims a port for each call.
fn client(path: &str) -> ShmClient {
    ShmClient::attach(
        path,
        ClientConfig::default().service::<Demo>().deadline(DEADLINE),
    )
    .expect("attach")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> &str { args.get(i).map(String::as_str).expect("missing argument") };
    let num = |i: usize| -> u64 { arg(i).parse().expect("a number") };
    let path = arg(1);
    match arg(0) {
        "calls" => {
            let (id, n) = (num(2), num(3));
            let shm = client(path);
            let c = Demo::client(&shm);
            let (mut ok, mut wrong, mut errors) = (0u64, 0u64, 0u64);
            for i in 0..n {
                let call = id << 40 | i;
                match c.echo(call) {
                    Ok(reply) if reply == Echoed::from((call, demo::mix(call))) => ok += 1,
                    Ok(_) => wrong += 1,
                    Err(e) => {
                        if errors == 0 {
                            eprintln!("shm-peer {id}: {e}");
                        }
                        errors += 1;
                    }
                }
            }
            let port = shm.last_port();
            say(format!("ok {ok} wrong {wrong} errors {errors} port {port}"));
        }
        "hold" => {
            let k = num(2) as u32;
            let base = client(path);
            let (tx, rx) = std::sync::mpsc::channel();
            for i in 0..k {
                let c = base.handle(i);
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let echo = Demo::Echo { id: 0 }.opcode();
                    let _ = c.call(echo, |port| -> Result<(), ferry_rpc::Error> {
                        let _ = tx.send(port.index());
                        forever()
                    });
                });
            }
            let ports: Vec<String> = (0..k)
                .map(|_| rx.recv().expect("a port").to_string())
                .collect();
            say(format!("held {}", ports.join(" ")));
            forever();
        }
        "sleep" => {
            let micros = num(2);
            let c = client(path);
            // A raw call, so that the request is known to be in the server's hands: the fixed
            // argument `micros` is the request's first word.
            let _ = c.call(Demo::Sleep { micros }.opcode(), |port| {
                port.set_request_len(8);
                port.send(|s, _| s.words[0] = micros)?;
                say(format!("sent {}", port.index()));
                port.recv(|_, _| {})
            });
            say("replied".into());
        }
        "stream" => {
            let c = client(path);
            let sum = Demo::OPCODE_SUM;
            let _ = c.call(sum, |port| -> Result<(), ferry_rpc::Error> {
                // The first packet of a 1 MiB stream (the call's limit; four times what the
                // default bulk area carries in one handoff); the rest never comes. (`Sum` has no
                // fixed arguments: the stream is the whole request.)
                port.set_request_len(0);
                port.send(|s, _| s.words[0] = ferry_demo::SUM_LIMIT)?;
                say(format!("streaming {}", port.index()));
                forever()
            });
        }
        "sticky" => {
            let shm = ShmClient::attach(
                path,
                ClientConfig::default()
                    .service::<Demo>()
                    .deadline(DEADLINE)
                    .sticky(true),
            )
            .expect("attach");
            assert_eq!(Demo::client(&shm).add(1, 2), Ok(3));
            let port = shm.held_port().expect("a sticky handle keeps its port");
            say(format!("holding {port}"));
            forever();
        }
        "serve" => {
            let _server =
                ShmServer::start(path, ServerConfig::default(), Demo::server(DemoService))
                    .expect("serve");
            say(format!("serving {}", std::process::id()));
            forever();
        }
        "serve-until-signal" => {
            let drain = Duration::from_millis(num(2));
            // SAFETY: the default action installs no handler.
            unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
            // Both blocked from here on: a signal the test sends once "serving" is printed but
            // before `serve_until_signal` has set its handler waits, instead of ending the
            // process by its default action (`serve_until_signal`'s docs).
            // SAFETY: `set` is initialised by `sigemptyset` before use; `pthread_sigmask` reads
            // it and changes only this thread's mask (the old one is not asked for).
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            let server = ShmServer::start(path, ServerConfig::default(), Demo::server(DemoService))
                .expect("serve");
            say(format!("serving {}", std::process::id()));
            let (signal, report) = server
                .serve_until_signal(drain)
                .expect("serve until a signal");
            say(format!(
                "stopped {signal} drained {} stuck {} served {}",
                report.drained, report.stuck_workers, report.stats.served
            ));
        }
        other => panic!("unknown mode {other}"),
    }
}
