//! Calls past a head line's 40 bytes on the inline path: fixed arguments and replies of up to a
//! slot, and streamed arguments that fit the lines with the fixed ones, cross in the port's wide
//! lines; what the other side writes there is checked as a head line's words are.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ferry_rpc::service::{Bytes, Error, Status, INLINE_BYTES};
use ferry_shm::header::Geometry;
use ferry_shm::{status, ClientConfig, ServerConfig, ShmClient, ShmServer};

mod raw;
use raw::{map_file, word32, word64};

const DEADLINE: Duration = Duration::from_secs(20);

fn unique(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    PathBuf::from(format!(
        "/dev/shm/ferry-test-wide-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A service whose calls take the wide lines.
#[derive(ferry_rpc::RpcOpcodes)]
#[rpc(service = "test.wide")]
// The fields name the arguments; no code reads them as values (the client takes arguments).
#[allow(dead_code)]
enum Wide {
    /// 48 bytes each way: each word plus its index.
    #[rpc(response = [u64; 6])]
    Six { a: [u64; 6] },
    /// A slot each way: the words reversed.
    #[rpc(response = [u64; 8])]
    Eight { a: [u64; 8] },
    /// 48 bytes in, 8 out: the words' sum.
    #[rpc(response = u64)]
    Fold { a: [u64; 6] },
    /// A fixed argument and a stream: the stream's length and the sum of its bytes, plus `base`.
    #[rpc(response = [u64; 2], limit = 1 << 20)]
    Tail { base: u64, data: Bytes },
}

struct Served;

impl WideServer for Served {
    fn six(&self, a: [u64; 6]) -> [u64; 6] {
        std::array::from_fn(|i| a[i].wrapping_add(i as u64))
    }
    fn eight(&self, mut a: [u64; 8]) -> [u64; 8] {
        a.reverse();
        a
    }
    fn fold(&self, a: [u64; 6]) -> u64 {
        a.iter().fold(0u64, |s, &x| s.wrapping_add(x))
    }
    fn tail(&self, base: u64, data: &[u8]) -> [u64; 2] {
        [
            data.len() as u64 + base,
            data.iter().map(|&b| b as u64).sum(),
        ]
    }
}

fn server(tag: &str, config: ServerConfig) -> ShmServer {
    ShmServer::start(unique(tag), config, Wide::server(Served)).unwrap()
}

fn client(server: &ShmServer, sticky: bool) -> ShmClient {
    let config = ClientConfig::default()
        .service::<Wide>()
        .deadline(DEADLINE)
        .sticky(sticky);
    ShmClient::attach(server.path(), config).unwrap()
}

/// The bytes of a stream of `n`.
fn stream(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// Makes every kind of call, checking each reply; returns how many calls were made.
fn calls(c: &WideClient<&ShmClient>, round: u64) -> u64 {
    let mut made = 0;
    for k in 0..50u64 {
        let x = round << 32 | k;
        let a6 = [x, !x, x ^ 0x55, x.rotate_left(7), x.wrapping_mul(3), x >> 3];
        let a8: [u64; 8] = std::array::from_fn(|i| x.wrapping_add(i as u64 * 0x1111));
        assert_eq!(
            c.six(a6),
            Ok(std::array::from_fn(|i| a6[i].wrapping_add(i as u64)))
        );
        let mut r8 = a8;
        r8.reverse();
        assert_eq!(c.eight(a8), Ok(r8));
        assert_eq!(
            c.fold(a6),
            Ok(a6.iter().fold(0u64, |s, &x| s.wrapping_add(x)))
        );
        made += 3;
    }
    // Streams around the lines' 248 bytes beside the fixed argument and past a bulk area of
    // 4 KiB: in the area, in the lines (no area) or through the packets.
    for n in [0, 1, 32, 33, 88, 89, 200, 247, 248, 249, 256, 1000, 5000] {
        let data = stream(n);
        let sum = data.iter().map(|&b| b as u64).sum();
        assert_eq!(
            c.tail(round, &data),
            Ok([n as u64 + round, sum]),
            "{n} bytes"
        );
        made += 1;
    }
    made
}

#[test]
fn wide_calls_travel_inline_with_one_worker_or_several_and_through_the_packets_without() {
    // (inline, workers, sticky, bulk area): with an area of 4 KiB, the streams of up to 4 KiB go
    // in it; without one, those that fit the lines with their fixed argument (up to 248 bytes)
    // go there.
    for (inline, workers, sticky, bulk) in [
        (true, 1, true, 4096),
        (true, 1, false, 4096),
        (true, 2, true, 4096),
        (true, 1, true, 0),
        (true, 2, false, 0),
        (false, 1, true, 4096),
    ] {
        let config = ServerConfig {
            workers,
            inline,
            bulk,
            ..ServerConfig::default()
        };
        let server = server("calls", config);
        let shm = client(&server, sticky);
        let c = Wide::client(&shm);
        let mut made = 0;
        for round in 0..3 {
            made += calls(&c, round);
        }
        drop(shm);
        let stats = server.shutdown(DEADLINE).stats;
        let case = format!("inline {inline}, {workers} workers, sticky {sticky}, bulk {bulk}");
        assert_eq!(stats.served, made, "{case}");
        assert_eq!(stats.failed + stats.panicked, 0, "{case}");
        // Inline: every call but the streams that fit neither the area nor the lines (of the
        // 13 streams a round, 1 with the area, 4 without).
        let through_packets = if bulk > 0 { 1 } else { 4 };
        let expected = if inline {
            made - 3 * through_packets
        } else {
            0
        };
        assert_eq!(stats.inline, expected, "{case}");
    }
}

#[test]
fn threads_making_wide_calls_each_get_their_own_replies() {
    let config = ServerConfig {
        workers: 2,
        bulk: 4096,
        ..ServerConfig::default()
    };
    let server = server("threads", config);
    let first = client(&server, true);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let shm = first.handle(t * 9);
            s.spawn(move || {
                let c = Wide::client(&shm);
                for round in 0..20 {
                    calls(&c, u64::from(t) << 16 | round);
                }
            });
        }
    });
    drop(first);
    let stats = server.shutdown(DEADLINE).stats;
    assert_eq!(stats.failed + stats.panicked, 0);
}

/// Word 1 of a head line: request bytes in the lines, reply bytes read, body length, and
/// whether the body is the request's tail (`inline` module docs).
fn lens(len: u64, want: u64, body: u64, in_lines: bool) -> u64 {
    len | want << 16 | (in_lines as u64) << 31 | body << 32
}

/// A wide line's tag: the call's sequence, bit 32 for a reply.
fn tag(seq: u64, reply: bool) -> u64 {
    seq | (reply as u64) << 32
}

#[test]
fn hostile_wide_requests_get_an_error_status_and_every_line_the_client_reads() {
    let server = server("hostile", ServerConfig::default());
    let g: Geometry = *client(&server, true).geometry();
    let map = map_file(server.path());
    let word = |at| word64(&map, at);
    // Claim port 3 and arm its line by hand, as a client would.
    let port = 3;
    let me = ferry_shm::owner::current_holder().unwrap();
    word(g.owners_offset() + port * 8).store(ferry_shm::owner::pack(1, me), Ordering::SeqCst);
    word32(&map, g.inline_offset()).fetch_or(1 << port, Ordering::SeqCst);
    let head = g.inline_lines_offset() + port * 64;
    let wide = |i: usize| g.inline_wide_offset() + (port * 4 + i) * 64;
    // A raw call: the wide lines' tags as given (`tags[i]` for line i), word 1, then the head;
    // the answer's status once the head's reply word carries `seq`.
    let call = |opcode: u32, lens: u64, tags: &[u64], seq: u64| {
        for (i, &t) in tags.iter().enumerate() {
            word(wide(i)).store(t, Ordering::Relaxed);
        }
        word(head + 8).store(lens, Ordering::Relaxed);
        word(head).store((opcode as u64) << 32 | seq, Ordering::Release);
        let deadline = Instant::now() + DEADLINE;
        loop {
            let answer = word(head + 16).load(Ordering::Acquire);
            if answer as u32 as u64 == seq {
                return (answer >> 48) as u32;
            }
            assert!(Instant::now() < deadline, "no answer");
            std::hint::spin_loop();
        }
    };
    // Whether wide lines `0..n` carry reply `seq`'s tag.
    let tagged = |n: usize, seq: u64| {
        (0..n).all(|i| word(wide(i)).load(Ordering::Acquire) == tag(seq, true))
    };
    let (six, tail) = (Wide::OPCODE_SIX, Wide::OPCODE_TAIL);
    let t = |seq| [tag(seq, false); 4];
    // Lengths past the lines (each field at its widest), a reply asked for past them, a body
    // longer than the request it ends: refused before anything is read.
    assert_eq!(
        call(six, lens(0xffff, 48, 0, false), &t(1), 1),
        status::BAD_REQUEST
    );
    assert_eq!(
        call(six, lens(257, 48, 0, false), &t(2), 2),
        status::BAD_REQUEST
    );
    assert_eq!(
        call(six, lens(48, 0x7fff, 0, false), &t(3), 3),
        status::BAD_REQUEST
    );
    // (Every line a client could read is handed back, even for a want past the lines.)
    assert!(tagged(4, 3));
    assert_eq!(
        call(tail, lens(16, 16, 17, true), &t(4), 4),
        status::BAD_REQUEST
    );
    // A wide line the request reaches that carries another call's tag, or a reply's: refused,
    // the handler not run; and the reply still covers the lines the client reads.
    let mut stale = t(5);
    stale[0] = tag(4, false);
    assert_eq!(
        call(six, lens(48, 48, 0, false), &stale, 5),
        status::BAD_REQUEST
    );
    assert!(tagged(1, 5));
    let mut forged = t(6);
    forged[3] = tag(6, true);
    assert_eq!(
        call(tail, lens(8 + 248, 16, 248, true), &forged, 6),
        status::BAD_REQUEST
    );
    // A request of the wrong length for its call, in the lines.
    assert_eq!(
        call(six, lens(56, 48, 0, false), &t(7), 7),
        status::BAD_REQUEST
    );
    // A body in the lines for a call that takes none.
    assert_eq!(
        call(six, lens(56, 48, 8, true), &t(8), 8),
        status::BAD_REQUEST
    );
    // Right ones: served, and its reply in the lines it covers.
    assert_eq!(call(six, lens(48, 48, 0, false), &t(9), 9), status::OK);
    assert!(tagged(1, 9));
    assert_eq!(
        call(tail, lens(8 + 100, 16, 100, true), &t(10), 10),
        status::OK
    );
    // A reply asked for short of the call's: served, the lines its bytes reach handed back with
    // it, no others.
    assert_eq!(call(six, lens(48, 8, 0, false), &t(11), 11), status::OK);
    assert!(tagged(1, 11) && !tagged(2, 11));
    // The claim ends.
    word(g.owners_offset() + port * 8).store(ferry_shm::owner::pack(1, 0), Ordering::SeqCst);
    let stats = server.shutdown(DEADLINE).stats;
    // Dispatched: the two of the wrong length or body (refused by the dispatch) and the three
    // right ones; the others were refused before it.
    assert_eq!((stats.inline, stats.panicked), (5, 0));
}

#[test]
fn a_wide_call_refused_by_the_handler_is_an_error_and_the_port_serves_on() {
    // A stream over the call's limit, in the lines it would fit: the limit still holds.
    #[derive(ferry_rpc::RpcOpcodes)]
    #[rpc(service = "test.small")]
    #[allow(dead_code)]
    enum Small {
        #[rpc(response = u64, limit = 100)]
        Count { data: Bytes },
    }
    struct Counting;
    impl SmallServer for Counting {
        fn count(&self, data: &[u8]) -> u64 {
            data.len() as u64
        }
    }
    let server = ShmServer::start(
        unique("limit"),
        ServerConfig::default(),
        Small::server(Counting),
    )
    .unwrap();
    let shm = ShmClient::attach(
        server.path(),
        ClientConfig::default().service::<Small>().sticky(true),
    )
    .unwrap();
    let c = Small::client(&shm);
    assert_eq!(c.count(&[1; 100]), Ok(100));
    assert_eq!(c.count(&[1; 101]), Err(Error::Status(Status::Rejected)));
    assert_eq!(c.count(&[1; 5]), Ok(5));
    const { assert!(INLINE_BYTES >= 101, "the refused stream fits the lines") };
    drop(shm);
    server.shutdown(DEADLINE);
}
