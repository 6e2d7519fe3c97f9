//! Large payloads through the bulk areas: every size boundary, both directions, hostile lengths,
//! and servers without bulk areas. One process: the server's workers and the clients are threads
//! of this test, the file real.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferry_shm::ferry_rpc::service::{Error, Status};
use ferry_shm::ferry_rpc::stream::STREAM_REJECTED;
use ferry_shm::ferry_rpc::HeaderWord;
use ferry_shm::{
    status, Bytes, ClientConfig, RpcOpcodes, Schema, ServerConfig, ShmClient, ShmServer,
};
use ferry_testkit::Watchdog;

/// The bulk area of the servers under test, per port.
const AREA: usize = 4096;
/// The calls' limit: three areas and a bit, so the longest request takes four handoffs.
const LIMIT: u64 = 3 * AREA as u64 + 100;

/// A service moving large payloads.
#[derive(RpcOpcodes)]
enum Bulk {
    /// A checksum of the bytes (length, then a fold), read where they lie when they fit.
    #[rpc(response = Folded, limit = LIMIT)]
    Fold { data: Bytes },
    /// The bytes reversed (a streamed request copied, a streamed reply).
    #[rpc(response = Bytes, limit = LIMIT)]
    Reverse { data: Bytes },
    /// `n` bytes, each its index times 7 (a streamed reply only).
    #[rpc(response = Bytes, limit = LIMIT)]
    Make { n: u32 },
    /// The bytes after the first: the reply borrows the request (a handler's own bytes need not
    /// be copied), so wherever the request lies must outlive the reply's writing.
    #[rpc(response = Bytes, limit = LIMIT)]
    Tail { data: Bytes },
}

/// [`Bulk::Fold`]'s reply.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    ferry_shm::ferry_rpc::zerocopy::FromBytes,
    ferry_shm::ferry_rpc::zerocopy::IntoBytes,
    ferry_shm::ferry_rpc::zerocopy::Immutable,
    ferry_shm::ferry_rpc::zerocopy::KnownLayout,
    Schema,
)]
#[zerocopy(crate = "ferry_shm::ferry_rpc::zerocopy")]
#[repr(C)]
struct Folded {
    len: u64,
    fold: u64,
}

fn fold(bytes: &[u8]) -> Folded {
    let fold = bytes
        .iter()
        .enumerate()
        .fold(0u64, |a, (i, &b)| a.rotate_left(5) ^ (b as u64 + i as u64));
    Folded {
        len: bytes.len() as u64,
        fold,
    }
}

struct Handler;

impl BulkServer for Handler {
    fn fold(&self, data: &[u8]) -> Folded {
        fold(data)
    }
    fn reverse(&self, data: &[u8]) -> impl AsRef<[u8]> {
        data.iter().rev().copied().collect::<Vec<u8>>()
    }
    fn make(&self, n: u32) -> impl AsRef<[u8]> {
        (0..n).map(|i| (i * 7) as u8).collect::<Vec<u8>>()
    }
    fn tail(&self, data: &[u8]) -> impl AsRef<[u8]> {
        data.get(1..).unwrap_or_default()
    }
}

fn unique(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-test-bulk-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fn server(tag: &str, bulk: usize) -> ShmServer {
    let config = ServerConfig {
        ports: 32,
        bulk,
        ..ServerConfig::default()
    };
    ShmServer::start(unique(tag), config, Bulk::server(Handler)).unwrap()
}

fn client(server: &ShmServer) -> ShmClient {
    ShmClient::attach(
        server.path(),
        ClientConfig::default()
            .service::<Bulk>()
            .deadline(Duration::from_secs(20))
            .sticky(true),
    )
    .unwrap()
}

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 131 + (i >> 8)) as u8).collect()
}

/// Every boundary of the stream's shapes: empty, one byte, a slot's first chunk (56) and one
/// past it (the first length through the area), a slot, the area and one on either side, several
/// areas, the limit; and one past the limit, refused.
fn sizes() -> Vec<usize> {
    let limit = LIMIT as usize;
    vec![
        0,
        1,
        55,
        56,
        57,
        63,
        64,
        65,
        AREA - 1,
        AREA,
        AREA + 1,
        2 * AREA,
        2 * AREA + 1,
        limit - 1,
        limit,
    ]
}

fn each_size_both_ways(bulk: usize) {
    let server = server("sizes", bulk);
    let shm = client(&server);
    let c = Bulk::client(&shm);
    for n in sizes() {
        let d = data(n);
        assert_eq!(c.fold(&d), Ok(fold(&d)), "fold of {n} bytes");
        let back: Vec<u8> = d.iter().rev().copied().collect();
        assert_eq!(c.reverse(&d), Ok(back.clone()), "reverse of {n} bytes");
        // Into a caller's buffer of exactly the reply's size, and one byte short.
        let mut out = vec![0u8; n];
        assert_eq!(
            c.reverse_into(&d, &mut out).map(|r| r.to_vec()),
            Ok(back),
            "reverse_into of {n} bytes"
        );
        if n > 0 {
            let mut short = vec![0u8; n - 1];
            assert_eq!(
                c.reverse_into(&d, &mut short).map(|r| r.len()),
                Err(Error::Status(Status::ReplyTooLarge {
                    len: n as u64,
                    limit: n as u64 - 1
                })),
                "a reply of {n} bytes into {} bytes",
                n - 1
            );
        }
        assert_eq!(c.make(n as u32), Ok(data_made(n)), "make of {n} bytes");
        let tail = d.get(1..).unwrap_or_default().to_vec();
        assert_eq!(c.tail(&d), Ok(tail), "tail of {n} bytes");
    }
    // One past the limit: refused by the client before sending, nothing executed.
    let over = data(LIMIT as usize + 1);
    assert_eq!(c.fold(&over), Err(Error::Status(Status::Rejected)));
    assert_eq!(c.reverse(&over), Err(Error::Status(Status::Rejected)));
    // A reply over the client's limit: refused by the client, the port left at rest.
    assert_eq!(
        c.make(LIMIT as u32 + 1).map(|v| v.len()),
        Err(Error::Status(Status::ReplyTooLarge {
            len: LIMIT + 1,
            limit: LIMIT
        }))
    );
    assert_eq!(c.fold(&data(100)), Ok(fold(&data(100))));
    drop(shm);
    let stats = server.shutdown(Duration::from_secs(10)).stats;
    assert_eq!(stats.panicked, 0);
}

#[test]
fn bytes_written_in_place_cross_as_those_passed_by_slice() {
    let _w = Watchdog::new("bulk in place", Duration::from_secs(120));
    for bulk in [AREA, 0] {
        let server = server("with", bulk);
        let shm = client(&server);
        let c = Bulk::client(&shm);
        for n in sizes() {
            let d = data(n);
            let mut calls = 0;
            let got = c.fold_with(n, |buf| {
                calls += 1;
                assert_eq!(buf.len(), n);
                buf.copy_from_slice(&d);
            });
            assert_eq!(got, Ok(fold(&d)), "fold_with of {n} bytes (area {bulk})");
            assert!(calls >= 1);
        }
        // Over the limit: refused before `fill` runs.
        let mut called = false;
        assert_eq!(
            c.fold_with(LIMIT as usize + 1, |_| called = true),
            Err(Error::Status(Status::Rejected))
        );
        assert!(!called);
        drop(shm);
        let stats = server.shutdown(Duration::from_secs(10)).stats;
        assert_eq!((stats.failed, stats.panicked), (0, 0));
    }
}

fn data_made(n: usize) -> Vec<u8> {
    (0..n as u32).map(|i| (i * 7) as u8).collect()
}

#[test]
fn payloads_of_every_boundary_size_cross_both_ways() {
    let _w = Watchdog::new("bulk sizes", Duration::from_secs(120));
    each_size_both_ways(AREA);
}

#[test]
fn a_server_without_bulk_areas_streams_through_the_slots() {
    let _w = Watchdog::new("no bulk", Duration::from_secs(120));
    each_size_both_ways(0);
}

#[test]
fn a_bulk_size_that_is_not_a_multiple_of_64_is_rounded_up() {
    let server = server("round", 100);
    let shm = client(&server);
    let c = Bulk::client(&shm);
    for n in [127, 128, 129, 300] {
        let d = data(n);
        assert_eq!(c.fold(&d), Ok(fold(&d)));
    }
}

#[test]
fn a_bulk_area_too_large_is_an_error_before_any_file_is_made() {
    let path = unique("huge");
    let config = ServerConfig {
        ports: 32,
        bulk: (ferry_shm::ferry_rpc::MAX_BULK_SHARE as usize) * 2,
        ..ServerConfig::default()
    };
    let Err(err) = ShmServer::start(&path, config, Bulk::server(Handler)) else {
        panic!("a server with a 2 GiB bulk area per port started");
    };
    assert!(err.to_string().contains("bulk"), "{err}");
    assert!(!path.exists());
}

#[test]
fn hostile_lengths_are_refused_and_nothing_past_the_area_is_read() {
    let _w = Watchdog::new("bulk hostile", Duration::from_secs(120));
    let server = server("hostile", AREA);
    let shm = client(&server);
    let raw = |len: u64, packets: usize| -> u32 {
        shm.call(Bulk::OPCODE_FOLD, |port| {
            // A first packet announcing `len` bytes, then up to `packets - 1` more (whatever
            // the area holds) unless the server refuses, then the reply.
            port.set_header(HeaderWord::Stream, 0);
            // (`Fold` has no fixed arguments: the stream is the whole request.)
            port.set_request_len(0);
            port.send(|s, _| s.words[0] = len)?;
            for _ in 1..packets {
                port.recv(|_, _| {})?;
                if port.header(HeaderWord::Stream) == STREAM_REJECTED {
                    break;
                }
                port.send(|_, _| {})?;
            }
            port.recv(|_, _| {})?;
            Ok(port.status())
        })
        .unwrap()
    };
    // Over the limit, however long: refused at the first packet.
    assert_eq!(raw(LIMIT + 1, 4), status::REJECTED);
    assert_eq!(raw(u64::MAX, 2), status::REJECTED);
    // Within the limit: the server reads exactly the announced bytes, area by area (each
    // packet's chunk bounded by the area), whatever the client left there.
    assert_eq!(raw(LIMIT, 4), status::OK);
    assert_eq!(raw(AREA as u64, 1), status::OK);
    // Still serving, and serving right.
    let c = Bulk::client(&shm);
    let d = data(AREA + 1);
    assert_eq!(c.fold(&d), Ok(fold(&d)));
    drop(shm);
    let stats = server.shutdown(Duration::from_secs(10)).stats;
    assert_eq!(stats.panicked, 0);
}

#[test]
fn many_clients_move_large_payloads_at_once() {
    let _w = Watchdog::new("bulk clients", Duration::from_secs(120));
    let server = server("many", AREA);
    std::thread::scope(|s| {
        for t in 0..4usize {
            let server = &server;
            s.spawn(move || {
                let shm = client(server);
                let c = Bulk::client(&shm);
                for i in 0..200usize {
                    let n = (i * 97 + t * 1000) % (LIMIT as usize + 1);
                    let d: Vec<u8> = data(n).iter().map(|b| b ^ t as u8).collect();
                    assert_eq!(c.fold(&d), Ok(fold(&d)));
                    if i % 10 == 0 {
                        let back: Vec<u8> = d.iter().rev().copied().collect();
                        assert_eq!(c.reverse(&d), Ok(back));
                    }
                }
            });
        }
    });
    let stats = server.shutdown(Duration::from_secs(10)).stats;
    assert_eq!((stats.failed, stats.panicked), (0, 0));
}
