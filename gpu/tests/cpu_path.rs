//! Device code on CPU threads against the real server: the `device` crate's clients, built from a
//! descriptor as a kernel builds them, on simulated warps (`ferry_device::sim::SimWarp`), calling the
//! same `LibcHost` the loader serves, through `ferry_gpu::serve`: every warp at once, exit, an
//! unknown opcode, a refused stream; the descriptor's checks. (Printing from warps is in
//! `libc.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ferry_device::descriptor::Descriptor;
use ferry_device::host::{self, opcode, Libc, PRINT_CHUNK};
use ferry_device::sim::{descriptor, SimWarp, Yield};
use ferry_gpu::{serve, LibcConfig, LibcHost};
use ferry_rpc::service::{status, Error, Status};
use ferry_rpc::{HeapRegion, Lanes};
use ferry_tests::{Capture, Watchdog};

/// Runs `warps` simulated warps of `lanes` lanes against `host` served by `server_threads`
/// threads; `body(client, warp)` runs in every lane, as a kernel's main does.
fn run<F>(ports: u32, warps: u32, lanes: u32, server_threads: u32, host: &LibcHost, body: F)
where
    F: Fn(&ferry_device::Client<'_, SimWarp, Yield>, u32) + Sync,
{
    let region = HeapRegion::new(ports, lanes).unwrap();
    let desc = descriptor(&region);
    let ((), _) = serve(
        region.region(),
        region.server_locks(),
        server_threads,
        host,
        || {
            std::thread::scope(|s| {
                for w in 0..warps {
                    for lane in SimWarp::lanes(lanes) {
                        let body = &body;
                        s.spawn(move || {
                            // SAFETY: `desc` names `region`, alive and protocol-only for the scope.
                            let client =
                                unsafe { desc.client(lane, Yield) }.unwrap().with_cursor(w);
                            body(&client, w);
                        });
                    }
                }
            })
        },
    )
    .unwrap();
}

#[test]
fn every_warp_calls_at_once_and_every_reply_is_right() {
    let _w = Watchdog::new("occupancy", Duration::from_secs(300));
    let host = LibcHost::new(LibcConfig::default());
    let wrong = AtomicU64::new(0);
    let (warps, lanes, calls) = (32, 4, 200);
    // As many ports as warps (the GPU default), and then fewer: warps must share.
    for ports in [32, 32 * 2] {
        run(ports, warps, lanes, 3, &host, |client, warp| {
            let me = ((warp * lanes + client.lanes().lane_id()) as u64) << 32;
            for i in 0..calls {
                let x = me | i;
                if host::noop(client, x) != Ok(x + 1) {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    // One call per warp per iteration, twice.
    assert_eq!(host.count(opcode::NOOP), 2 * warps as u64 * calls);
}

#[test]
fn exit_is_recorded_with_the_first_lanes_code() {
    let _w = Watchdog::new("exit", Duration::from_secs(60));
    let host = LibcHost::new(LibcConfig::default());
    run(32, 1, 4, 1, &host, |client, _| {
        let code = 7 + client.lanes().lane_id() as i32;
        host::exit(client, code).unwrap();
    });
    assert_eq!(host.exit_code(), Some(7));
}

#[test]
fn unknown_opcode_gets_an_error_status() {
    let _w = Watchdog::new("unknown opcode", Duration::from_secs(60));
    let host = LibcHost::new(LibcConfig::default());
    run(32, 1, 2, 1, &host, |client, _| {
        let mut port = client.open(999).unwrap();
        port.send_and_recv(|s, _| s.words[0] = 1, |_, _| {})
            .unwrap();
        assert_eq!(port.status(), status::UNKNOWN_OPCODE);
        drop(port);
        // The port is usable afterwards.
        assert_eq!(host::noop(client, 41), Ok(42));
    });
    assert_eq!(host.count(999), 1);
    assert_eq!(host.count(opcode::NOOP), 1);
}

#[test]
fn oversized_print_is_refused_and_nothing_is_written() {
    let _w = Watchdog::new("oversized print", Duration::from_secs(120));
    let out = Capture::default();
    let host = LibcHost::new(LibcConfig {
        stdout: Box::new(out.clone()),
        ..LibcConfig::default()
    });
    run(32, 1, 2, 1, &host, |client, _| {
        let big = vec![b'x'; PRINT_CHUNK + 1];
        let r = Libc::client(client).print(&big);
        assert_eq!(r, Err(Error::Status(Status::Rejected)));
        assert_eq!(
            host::noop(client, 1),
            Ok(2),
            "the port is usable afterwards"
        );
    });
    assert!(out.text().is_empty());
}

#[test]
fn a_corrupt_descriptor_is_refused() {
    let region = HeapRegion::new(32, 4).unwrap();
    let good = descriptor(&region);
    for bad in [
        Descriptor { magic: 0, ..good },
        Descriptor { ports: 33, ..good },
        Descriptor { lanes: 65, ..good },
        Descriptor { mailbox: 7, ..good },
        Descriptor { mailbox: 1, ..good },
        Descriptor {
            mailbox: good.mailbox | 1 << 20,
            ..good
        },
        Descriptor { region: 0, ..good },
        Descriptor { locks: 0, ..good },
        // Port words are 64-bit atomics: client memory that is not 8-byte aligned.
        Descriptor {
            locks: good.locks + 4,
            ..good
        },
    ] {
        // SAFETY: each descriptor is refused before any memory it names is touched.
        let client = unsafe { bad.client(ferry_rpc::Single, Yield) };
        assert!(client.is_err(), "{bad:?}");
    }
}

#[test]
fn the_keep_ports_flag_reaches_the_clients() {
    let region = HeapRegion::new(32, 4).unwrap();
    let plain = descriptor(&region);
    let keep = Descriptor {
        mailbox: plain.mailbox | ferry_device::descriptor::FLAG_KEEP_PORTS,
        ..plain
    };
    assert!(!plain.keep_ports() && keep.keep_ports());
    assert_eq!(keep.layout(), plain.layout());
    // SAFETY: the descriptor names `region`'s memory and its client port words, alive for the
    // test and used only through the protocol.
    let client = unsafe { keep.client(ferry_rpc::Single, Yield) }.unwrap();
    // SAFETY: as above: a second client handle on the same memory, as a second warp's.
    let other = unsafe { plain.client(ferry_rpc::Single, Yield) }.unwrap();
    let served = std::thread::scope(|s| {
        let server = s.spawn(|| {
            let server = region.server();
            let mut port = loop {
                if let Some(p) = server.try_open(()) {
                    break p;
                }
                std::thread::yield_now();
            };
            port.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
        });
        let mut port = client.open(1).unwrap();
        let index = port.index();
        let mut got = 0;
        port.send_and_recv(|slot, _| slot.words[0] = 1, |slot, _| got = slot.words[0])
            .unwrap();
        drop(port);
        server.join().unwrap();
        (index, got)
    });
    assert_eq!(served.1, 2);
    // Kept: still locked after the call (no other client takes it), released with the handle.
    assert!(other.try_hold(served.0).is_none());
    drop(client);
    assert!(other.try_hold(served.0).is_some());
}

#[test]
fn no_driver_is_an_error_not_a_panic() {
    match ferry_gpu::cuda::Cuda::new(0) {
        Err(ferry_gpu::Error::NoDriver(why)) => assert!(!why.is_empty()),
        Ok(cuda) => assert!(cuda.sms > 0 && cuda.resident_warps() >= cuda.sms),
        Err(e) => panic!("unexpected error with no usable driver: {e}"),
    }
}

/// A user's own service whose handlers panic on one argument.
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "test.fragile")]
pub enum Fragile {
    /// `n + 1`; panics on 13.
    #[rpc(response = u64)]
    Bump { n: u64 },
    /// `n` as text (a streamed reply: always through the packets); panics on 13.
    #[rpc(response = ferry_rpc::service::Text, limit = 64)]
    Name { n: u64 },
}

struct Panicky;

impl FragileServer for Panicky {
    fn bump(&self, n: u64) -> u64 {
        assert_ne!(n, 13, "thirteen");
        n + 1
    }

    fn name(&self, n: u64) -> impl AsRef<str> {
        assert_ne!(n, 13, "thirteen");
        n.to_string()
    }
}

#[test]
fn a_panicking_handler_answers_server_error_and_the_server_goes_on() {
    let _w = Watchdog::new("panicking handler", Duration::from_secs(120));
    let services = Fragile::server(Panicky);
    let lanes = 4;
    let wrong = AtomicU64::new(0);
    for ports in [32, 64] {
        let region = HeapRegion::new(ports, lanes).unwrap();
        let desc = descriptor(&region);
        let ((), stats) = serve(region.region(), region.server_locks(), 2, &services, || {
            std::thread::scope(|s| {
                for w in 0..3u32 {
                    for lane in SimWarp::lanes(lanes) {
                        let wrong = &wrong;
                        s.spawn(move || {
                            // SAFETY: `desc` names `region`, alive and protocol-only for the scope.
                            let client =
                                unsafe { desc.client(lane, Yield) }.unwrap().with_cursor(w);
                            let fragile = Fragile::client(&client);
                            let me = client.lanes().lane_id() as u64;
                            // Round 0: lane 1 of every warp asks for the panic. A message's
                            // lanes are served together, so the lanes calling with it get the
                            // error too (on a word line, those answered before the panic keep
                            // their replies). Round 1: no panic, every lane answered.
                            for round in 0..2 {
                                let n = if me == 1 && round == 0 {
                                    13
                                } else {
                                    100 * round + me
                                };
                                let (bumped, named) = (fragile.bump(n), fragile.name(n));
                                let named = named.map(|t| t.to_string());
                                let failed = Error::Status(Status::ServerError);
                                let bump_failed = bumped == Err(failed);
                                let name_failed = named == Err(failed);
                                let right = match (n, round) {
                                    (13, _) => bump_failed && name_failed,
                                    (_, 0) => {
                                        (bumped == Ok(n + 1) || bump_failed)
                                            && (named == Ok(n.to_string()) || name_failed)
                                    }
                                    _ => bumped == Ok(n + 1) && named == Ok(n.to_string()),
                                };
                                if !right {
                                    wrong.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        });
                    }
                }
            })
        })
        .unwrap();
        // Each warp's two calls of round 0 panicked on lane 1 (once a message).
        assert!(stats.panicked >= 2 * 3, "{stats:?}");
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
}
