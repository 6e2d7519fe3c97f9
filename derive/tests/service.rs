//! Typed services over an in-process region (`HeapRegion`): plain, streamed and one-way calls,
//! many client threads, a simulated GPU warp, unknown opcodes, refused streams, arguments whose
//! bytes are not valid values, tagged error replies and a mismatched fingerprint. Every test runs
//! under a watchdog: a hang aborts the test binary with a message instead of blocking forever.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ferry_derive::{RpcOpcodes, Schema};
use ferry_device::sim::SimWarp;
use ferry_rpc::service::{self, status, Bytes, Dispatch, Error, Service, Status, Text};
use ferry_rpc::{HeapRegion, Spin};
use ferry_testkit::Watchdog;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, TryFromBytes};

/// How `apply` changes a counter: a `#[repr(u8)]` enum argument (1 and 2 are its only values).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u8)]
enum Mode {
    Add = 1,
    Sub = 2,
}

/// Why `apply` refused: the call's error type, carried back in a tagged reply.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, TryFromBytes, IntoBytes, Immutable, KnownLayout, Schema,
)]
#[repr(u8)]
enum Refusal {
    Underflow = 1,
    Strict = 2,
}

const KIB: u64 = 1024;

/// The service under test: one call of each kind.
#[derive(RpcOpcodes)]
enum Counter {
    /// Adds `delta` to a counter; returns the new value (fixed arguments, packed: 12 bytes).
    #[rpc(response = u64)]
    Add { counter: u32, delta: u64 },
    /// A counter's value.
    #[rpc(response = u64)]
    Get { counter: u32 },
    /// The sum of the bytes sent, at most 1 KiB of them (a `limit` from a const expression).
    #[rpc(response = u64, limit = KIB * 2 / 2)]
    Sum { data: Bytes },
    /// `n` bytes counting up from 0 (mod 256).
    #[rpc(response = Bytes)]
    Count { n: u32 },
    /// The text in upper case.
    #[rpc(response = Text)]
    Upper { text: Text },
    /// Adds 1 to a counter, without waiting.
    #[rpc(oneway)]
    Bump { counter: u32 },
    /// Nothing, with a reply.
    Ping,
    /// Adds or subtracts; refuses to go below zero, and anything at all when `strict` and the
    /// counter is not zero.
    #[rpc(response = u64, error = Refusal)]
    Apply {
        counter: u32,
        mode: Mode,
        by: u64,
        strict: bool,
    },
    /// A tuple variant: its arguments are `arg0`, `arg1`.
    #[rpc(response = u64)]
    Scale(u32, u32),
    /// Arguments named like the generated code's own locals.
    #[rpc(response = u32)]
    Names {
        handler: u32,
        port: u32,
        slot: u32,
        reply: u32,
        request: u32,
        lane: u32,
    },
}

/// Other schemas.
mod other {
    use super::*;

    /// A newer schema of the same service: calls the old server does not know.
    #[derive(RpcOpcodes)]
    #[rpc(service = "Counter")]
    pub enum CounterV2 {
        #[rpc(response = u64)]
        Add { counter: u32, delta: u64 },
        #[rpc(response = u64)]
        Reset { counter: u32 },
        #[rpc(response = u64)]
        Upload { data: Bytes },
        #[rpc(response = Bytes)]
        Download { n: u32 },
        #[rpc(oneway)]
        Forget { counter: u32 },
    }

    /// Sends raw bytes where `Counter::Upper` expects text.
    #[derive(RpcOpcodes)]
    #[rpc(service = "Counter")]
    pub enum RawCounter {
        #[rpc(response = Bytes)]
        Upper { text: Bytes },
    }

    /// An alias: the same layout as `u32`, written differently.
    pub type Id = u32;

    /// Three schemas of service `fp` that differ only in an argument's name or written type.
    #[derive(RpcOpcodes)]
    #[rpc(service = "fp")]
    pub enum Fp {
        #[rpc(response = u64)]
        Get { key: u32 },
    }

    #[derive(RpcOpcodes)]
    #[rpc(service = "fp")]
    pub enum FpRenamed {
        #[rpc(response = u64)]
        Get { id: u32 },
    }

    #[derive(RpcOpcodes)]
    #[rpc(service = "fp")]
    pub enum FpRetyped {
        #[rpc(response = u64)]
        Get { key: Id },
    }
}

#[derive(Default)]
struct Counters {
    values: [AtomicU64; 4],
    calls: AtomicU32,
}

impl CounterServer for Counters {
    fn add(&self, counter: u32, delta: u64) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.values[counter as usize % 4].fetch_add(delta, Ordering::Relaxed) + delta
    }
    fn get(&self, counter: u32) -> u64 {
        self.values[counter as usize % 4].load(Ordering::Relaxed)
    }
    fn sum(&self, data: &[u8]) -> u64 {
        data.iter().map(|&b| b as u64).sum()
    }
    fn count(&self, n: u32) -> impl AsRef<[u8]> {
        (0..n).map(|i| i as u8).collect::<Vec<u8>>()
    }
    fn upper(&self, text: &str) -> impl AsRef<str> {
        text.to_uppercase()
    }
    fn bump(&self, counter: u32) {
        self.values[counter as usize % 4].fetch_add(1, Ordering::Relaxed);
    }
    fn ping(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    fn apply(&self, counter: u32, mode: Mode, by: u64, strict: bool) -> Result<u64, Refusal> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let value = &self.values[counter as usize % 4];
        let now = value.load(Ordering::Relaxed);
        if strict && now != 0 {
            return Err(Refusal::Strict);
        }
        let new = match mode {
            Mode::Add => now + by,
            Mode::Sub => now.checked_sub(by).ok_or(Refusal::Underflow)?,
        };
        value.store(new, Ordering::Relaxed);
        Ok(new)
    }
    fn scale(&self, arg0: u32, arg1: u32) -> u64 {
        arg0 as u64 * arg1 as u64
    }
    fn names(
        &self,
        handler: u32,
        port: u32,
        slot: u32,
        reply: u32,
        request: u32,
        lane: u32,
    ) -> u32 {
        handler + port + slot + reply + request + lane
    }
}

/// Runs `test` with `servers` server threads serving `Counters` on a 32-port region; returns
/// what the servers served. Aborts the process if it all takes longer than a minute.
fn with_server(
    servers: usize,
    lanes: u32,
    test: impl FnOnce(&HeapRegion, &Counters) + Send,
) -> Vec<service::Served> {
    let _watchdog = Watchdog::new("a service test", Duration::from_secs(60));
    let region = HeapRegion::new(32, lanes).unwrap();
    let counters = Counters::default();
    let stop = AtomicBool::new(false);
    let served = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..servers {
            s.spawn(|| {
                let server = region.server();
                let mut buffers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match Counter::serve_one(&counters, &server, &mut buffers) {
                        Ok(Some(what)) => served.lock().unwrap().push(what),
                        Ok(None) => std::thread::yield_now(),
                        Err(e) => panic!("server: {e}"),
                    }
                }
            });
        }
        test(&region, &counters);
        stop.store(true, Ordering::Relaxed);
    });
    served.into_inner().unwrap()
}

fn add_opcode() -> u32 {
    Counter::Add {
        counter: 0,
        delta: 0,
    }
    .opcode()
}

fn apply_opcode() -> u32 {
    Counter::Apply {
        counter: 0,
        mode: Mode::Add,
        by: 0,
        strict: false,
    }
    .opcode()
}

/// The packed bytes of `apply`'s arguments: counter (4), mode (1), by (8), strict (1).
fn apply_bytes(counter: u32, mode: u8, by: u64, strict: u8) -> Vec<u8> {
    [
        &counter.to_ne_bytes()[..],
        &[mode],
        &by.to_ne_bytes(),
        &[strict],
    ]
    .concat()
}

#[test]
fn opcodes_follow_the_documented_schemes() {
    use other::CounterV2;
    assert_eq!(add_opcode(), service::hash_opcode("Counter", "Add"));
    assert_eq!(
        Counter::Ping.opcode(),
        service::hash_opcode("Counter", "Ping")
    );
    assert_eq!(
        Counter::Scale(0, 0).opcode(),
        service::hash_opcode("Counter", "Scale")
    );
    assert_eq!(
        CounterV2::Add {
            counter: 1,
            delta: 2
        }
        .opcode(),
        add_opcode()
    );
    assert_eq!(Counter::OPCODES.len(), 10);
    assert_eq!(Counter::OPCODES[0], add_opcode());
    // A call with a streamed argument has no value to ask (`Bytes` has none): its opcode is in
    // `OPCODES`, in declaration order.
    assert_eq!(Counter::OPCODES[2], service::hash_opcode("Counter", "Sum"));
    assert_eq!(<Counter as Service>::NAME, "Counter");

    #[derive(RpcOpcodes)]
    #[rpc(class = 0x12)]
    #[allow(dead_code)]
    enum Classy {
        First,
        #[rpc(opcode = 0x99)]
        Second,
        #[rpc(oneway)]
        Third,
    }
    assert_eq!(Classy::First.opcode(), service::class_opcode(0x12, 0));
    assert_eq!(Classy::Second.opcode(), 0x99);
    assert_eq!(Classy::Third.opcode(), 0x0012_0002);
}

#[test]
fn fingerprints_cover_names_opcodes_and_shapes() {
    use other::{CounterV2, Fp, FpRenamed, FpRetyped, RawCounter};
    assert_ne!(Counter::FINGERPRINT, CounterV2::FINGERPRINT);
    assert_ne!(Counter::FINGERPRINT, RawCounter::FINGERPRINT);
    // The same opcodes and layouts; only an argument's name, or a type as written, differs.
    assert_eq!(Fp::OPCODES, FpRenamed::OPCODES);
    assert_eq!(Fp::OPCODES, FpRetyped::OPCODES);
    assert_ne!(Fp::FINGERPRINT, FpRenamed::FINGERPRINT);
    assert_ne!(Fp::FINGERPRINT, FpRetyped::FINGERPRINT);
    assert_ne!(FpRenamed::FINGERPRINT, FpRetyped::FINGERPRINT);
    // The documented builder, by hand.
    let expected = service::Fingerprint::new("Counter")
        .begin_call("Upper", service::hash_opcode("Counter", "Upper"))
        .arg("text", "Bytes", service::Shape::Bytes)
        .reply("Bytes", service::Shape::Bytes)
        .finish();
    assert_eq!(RawCounter::FINGERPRINT, expected);
    let expected = service::Fingerprint::new("fp")
        .begin_call("Get", service::hash_opcode("fp", "Get"))
        .arg("key", "Id", service::Shape::of::<u32>())
        .reply("u64", service::Shape::of::<u64>())
        .finish();
    assert_eq!(FpRetyped::FINGERPRINT, expected);
}

#[test]
fn every_kind_of_call_round_trips() {
    with_server(1, 1, |region, counters| {
        let site = region.client();
        let c = Counter::client(&site);
        assert_eq!(c.add(1, 5), Ok(5));
        assert_eq!(c.add(1, 7), Ok(12));
        assert_eq!(c.get(1), Ok(12));
        // Streams of 0, 1, one packet and many packets.
        for len in [0usize, 1, 56, 57, 500, 1024] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let want: u64 = data.iter().map(|&b| b as u64).sum();
            assert_eq!(c.sum(&data), Ok(want), "len {len}");
            let mut buf = vec![0u8; len];
            let got = c.count_into(len as u32, &mut buf).unwrap();
            assert_eq!(got.len(), len);
            assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));
            let owned: Vec<u8> = c.count(len as u32).unwrap();
            assert_eq!(owned.len(), len);
        }
        let mut buf = [0u8; 256];
        let long = "ferry ".repeat(30);
        assert_eq!(c.upper_into(&long, &mut buf), Ok(&*long.to_uppercase()));
        assert_eq!(c.upper(&long), Ok(long.to_uppercase()));
        c.ping().unwrap();
        assert_eq!(c.scale(6, 7), Ok(42));
        assert_eq!(c.names(1, 2, 3, 4, 5, 6), Ok(21));
        for _ in 0..10 {
            c.bump(3).unwrap();
        }
        // One-way calls do not wait; a later call sees them once the server ran them.
        while c.get(3).unwrap() < 10 {
            std::thread::yield_now();
        }
        assert_eq!(c.get(3), Ok(10));
        assert_eq!(counters.calls.load(Ordering::Relaxed), 3);
    });
}

#[test]
fn a_handler_error_comes_back_tagged_and_apart_from_the_others() {
    with_server(1, 1, |region, counters| {
        let c = Counter::client(region.client());
        assert_eq!(c.apply(0, Mode::Add, 5, false), Ok(5));
        assert_eq!(c.apply(0, Mode::Sub, 2, false), Ok(3));
        assert_eq!(
            c.apply(0, Mode::Sub, 4, false),
            Err(Error::App(Refusal::Underflow))
        );
        assert_eq!(
            c.apply(0, Mode::Add, 1, true),
            Err(Error::App(Refusal::Strict))
        );
        assert_eq!(c.apply(1, Mode::Add, 1, true), Ok(1));
        // The refused calls ran their handler (the error is the handler's) and changed nothing.
        assert_eq!(counters.calls.load(Ordering::Relaxed), 5);
        assert_eq!(c.get(0), Ok(3));
        let e = c.apply(0, Mode::Sub, 9, false).unwrap_err();
        assert!(!e.not_executed());
    });
}

#[test]
fn arguments_whose_bytes_are_not_values_are_refused_before_any_handler() {
    let served = with_server(1, 1, |region, counters| {
        let client = region.client();
        // Hand-made requests through a raw port: a `Mode` of 7, a `bool` of 2.
        for bad in [apply_bytes(0, 7, 1, 0), apply_bytes(0, 1, 1, 2)] {
            let mut port = client.open(apply_opcode()).unwrap();
            port.set_request_len(bad.len());
            port.send(|slot, _| {
                slot.words = [0; 8];
                slot.as_bytes_mut()[..bad.len()].copy_from_slice(&bad);
            })
            .unwrap();
            port.recv(|_, _| {}).unwrap();
            assert_eq!(port.status(), status::BAD_REQUEST);
            port.close();
        }
        // The same bytes with valid values are served.
        let mut port = client.open(apply_opcode()).unwrap();
        let good = apply_bytes(0, 1, 4, 1);
        port.set_request_len(good.len());
        let mut reply = [0u8; 9];
        port.send(|slot, _| {
            slot.words = [0; 8];
            slot.as_bytes_mut()[..good.len()].copy_from_slice(&good);
        })
        .unwrap();
        port.recv(|slot, _| reply.copy_from_slice(&slot.as_bytes()[..9]))
            .unwrap();
        assert_eq!(port.status(), status::OK);
        port.close();
        // Tag 0 (Ok), then the value.
        assert_eq!(reply[0], 0);
        assert_eq!(u64::read_from_bytes(&reply[1..]).unwrap(), 4);
        assert_eq!(counters.calls.load(Ordering::Relaxed), 1);
        assert_eq!(counters.values[0].load(Ordering::Relaxed), 4);
    });
    let bad = served
        .iter()
        .filter(|s| s.status == status::BAD_REQUEST)
        .count();
    assert_eq!(bad, 2, "{served:?}");
}

#[test]
fn many_client_threads_share_two_server_threads() {
    const THREADS: u64 = 6;
    const CALLS: u64 = 300;
    let served = with_server(2, 1, |region, counters| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    let site = region.client().with_cursor(t as u32 * 5);
                    let c = Counter::client(&site);
                    let mut last = 0;
                    for i in 0..CALLS {
                        let v = c.add(0, 1).unwrap();
                        assert!(v > 0);
                        last = last.max(v);
                        if i % 10 == 0 {
                            let text = format!("thread {t} call {i}");
                            assert_eq!(c.upper(&text), Ok(text.to_uppercase()));
                            assert_eq!(
                                c.sum(text.as_bytes()),
                                Ok(text.bytes().map(u64::from).sum::<u64>())
                            );
                        }
                    }
                    assert!(last <= THREADS * CALLS);
                });
            }
        });
        assert_eq!(counters.values[0].load(Ordering::Relaxed), THREADS * CALLS);
    });
    assert!(served.iter().all(|s| s.status == status::OK));
    assert_eq!(
        served.len() as u64,
        THREADS * CALLS + 2 * THREADS * CALLS / 10
    );
}

#[test]
fn an_unknown_opcode_is_an_error_and_the_server_keeps_serving() {
    use other::CounterV2;
    let served = with_server(1, 1, |region, _| {
        let old = Counter::client(region.client());
        let new = CounterV2::client(region.client());
        fn unknown<T>(call: &str) -> Result<T, Error> {
            let opcode = service::hash_opcode("Counter", call);
            Err(Error::Status(Status::UnknownOpcode { opcode }))
        }
        // Known to both.
        assert_eq!(new.add(2, 3), Ok(3));
        // A fixed argument; a streamed one of one packet and of many; a streamed reply; a
        // one-way call (no error can come back, and the port must still come back).
        assert_eq!(new.reset(2), unknown("Reset"));
        assert_eq!(new.upload(&[1; 10]), unknown("Upload"));
        assert_eq!(new.upload(&[1; 5000]), unknown("Upload"));
        let mut buf = [0u8; 100];
        assert_eq!(
            new.download_into(50, &mut buf).map(|b| b.len()),
            unknown("Download")
        );
        assert_eq!(new.download(50).map(|b| b.len()), unknown("Download"));
        for _ in 0..40 {
            new.forget(1).unwrap();
        }
        // Still serving, every port usable.
        for _ in 0..64 {
            assert_eq!(old.get(2), Ok(3));
        }
    });
    let unknown = served
        .iter()
        .filter(|s| s.status == status::UNKNOWN_OPCODE)
        .count();
    assert_eq!(unknown, 5 + 40);
}

#[test]
fn refused_streams_are_errors_on_both_sides_and_nothing_runs() {
    let rejected = Err(Error::Status(Status::Rejected));
    let served = with_server(1, 1, |region, _| {
        let c = Counter::client(region.client());
        // Over the call's limit of 1 KiB: one packet's worth would pass, so send many.
        assert_eq!(c.sum(&[1; 1025]), rejected);
        assert_eq!(c.sum(&[1; 100_000]), rejected);
        // A reply longer than the caller's buffer: the client refuses it.
        let mut small = [0u8; 10];
        let too_large = |len| Err(Error::Status(Status::ReplyTooLarge { len, limit: 10 }));
        assert_eq!(
            c.count_into(500, &mut small).map(|b| b.len()),
            too_large(500)
        );
        assert_eq!(c.count_into(20, &mut small).map(|b| b.len()), too_large(20));
        // Text that is not UTF-8 never reaches the handler.
        let raw = other::RawCounter::client(region.client());
        let mut buf = [0u8; 16];
        assert_eq!(
            raw.upper_into(&[0xff, 0xfe], &mut buf).map(|b| b.len()),
            Err(Error::Status(Status::BadRequest))
        );
        // And everything still works.
        for _ in 0..40 {
            assert_eq!(c.sum(&[2; 1024]), Ok(2048));
        }
    });
    let count = |st| served.iter().filter(|s| s.status == st).count();
    // The two sums over the limit never left the client (a one-lane caller checks the limit
    // before sending); the reply of 500 bytes was refused mid-stream (the server sees it), the
    // one of 20 bytes in one packet (the server does not).
    assert_eq!(count(status::REJECTED), 1, "{served:?}");
    assert_eq!(count(status::BAD_REQUEST), 1, "{served:?}");
}

#[test]
fn a_reply_refused_for_a_small_buffer_leaves_the_port_usable() {
    // One client handle, one call at a time: it resumes at the port it last used, so every call
    // below runs on the port of the refused replies.
    with_server(1, 1, |region, _| {
        let c = Counter::client(region.client());
        let mut small = [0u8; 8];
        let mut big = [0u8; 4096];
        let mut total = 0;
        for len in [9u32, 56, 57, 500, 3000] {
            assert_eq!(
                c.count_into(len, &mut small).map(|b| b.len()),
                Err(Error::Status(Status::ReplyTooLarge {
                    len: len as u64,
                    limit: 8
                })),
                "len {len}"
            );
            assert_eq!(
                c.count_into(len, &mut big).map(|b| b.len()),
                Ok(len as usize)
            );
            total += 1;
            assert_eq!(c.add(0, 1), Ok(total));
            assert_eq!(c.upper_into("abc", &mut small), Ok("ABC"));
        }
    });
}

#[test]
fn the_handshake_compares_fingerprints() {
    use other::CounterV2;
    let served = with_server(1, 1, |region, _| {
        let client = region.client();
        service::handshake::<Counter, _, _, _>(&client).unwrap();
        assert_eq!(
            service::handshake::<CounterV2, _, _, _>(&client),
            Err(Error::Status(Status::Mismatch {
                client: CounterV2::FINGERPRINT,
                server: Counter::FINGERPRINT
            }))
        );
        assert_eq!(Counter::client(&client).get(0), Ok(0));
    });
    assert!(served.contains(&service::Served {
        opcode: service::HANDSHAKE,
        status: status::OK
    }));
    assert!(served.contains(&service::Served {
        opcode: service::HANDSHAKE,
        status: status::FINGERPRINT_MISMATCH
    }));
}

#[test]
fn each_lane_of_a_warp_gets_its_own_reply() {
    const LANES: u32 = 4;
    with_server(1, LANES, |region, counters| {
        std::thread::scope(|s| {
            for lanes in SimWarp::lanes(LANES) {
                s.spawn(move || {
                    let lane = ferry_rpc::Lanes::lane_id(&lanes);
                    let site = region.client_with(lanes, Spin).unwrap();
                    let c = Counter::client(&site);
                    for round in 0..20u64 {
                        // Fixed arguments and reply, per lane.
                        let v = c.add(lane, lane as u64 + 1).unwrap();
                        assert_eq!(v, (round + 1) * (lane as u64 + 1));
                        // Streams of a different length per lane (lane 3: several packets).
                        let data = vec![lane as u8; 60 * lane as usize + 1];
                        assert_eq!(c.sum(&data), Ok(lane as u64 * data.len() as u64));
                        let mut buf = [0u8; 256];
                        let n = 70 * lane;
                        assert_eq!(c.count_into(n, &mut buf).unwrap().len(), n as usize);
                        let text = format!("lane {lane} round {round}");
                        assert_eq!(c.upper_into(&text, &mut buf), Ok(&*text.to_uppercase()));
                    }
                    // A handler's error is per lane: lane 2 alone is refused.
                    let by = if lane == 2 { u64::MAX } else { 0 };
                    let want = if lane == 2 {
                        Err(Error::App(Refusal::Underflow))
                    } else {
                        Ok(20 * (lane as u64 + 1))
                    };
                    assert_eq!(c.apply(lane, Mode::Sub, by, false), want);
                    // A refusal by the server on one lane fails the call for the warp; all lanes
                    // agree.
                    let data = vec![0u8; if lane == 2 { 5000 } else { 10 }];
                    assert_eq!(c.sum(&data), Err(Error::Status(Status::Rejected)));
                    assert_eq!(c.get(lane), Ok(20 * (lane as u64 + 1)));
                });
            }
        });
        assert_eq!(counters.calls.load(Ordering::Relaxed), 21 * LANES);
    });
}

/// An inline path that hands each call straight to `dispatch_inline` of a service (as a
/// transport's server would), counting what it carried; `refuse` makes it carry nothing.
struct Direct<'s> {
    service: &'s Counters,
    carried: AtomicU32,
    refuse: bool,
}

impl service::InlineCall for Direct<'_> {
    fn call_inline(
        &self,
        opcode: u32,
        request: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        self.call_inline_bulk(opcode, request, &[], reply)
    }

    fn call_inline_bulk(
        &self,
        opcode: u32,
        request: &[u8],
        body: &[u8],
        reply: &mut [u8],
    ) -> Option<Result<u32, ferry_rpc::Error>> {
        if self.refuse {
            return None;
        }
        let mut full = [0u8; service::INLINE_BYTES];
        let (status, len) =
            Counter::dispatch_inline(self.service, opcode, request, body, &mut full)?;
        // The caller's bytes, zero past the reply's length.
        full[len.min(service::INLINE_BYTES)..].fill(0);
        reply.copy_from_slice(&full[..reply.len()]);
        self.carried.fetch_add(1, Ordering::Relaxed);
        Some(Ok(status))
    }
}

/// A client process with an inline path beside it: a transport's [`service::CallSite`] in
/// miniature. Calls made on it try `inline` first for what fits, and the process for the rest.
struct WithInline<'p, I> {
    process: ferry_rpc::ClientProcess<'p>,
    inline: &'p I,
}

impl<'p, I: service::InlineCall> service::CallSite for WithInline<'p, I> {
    type Lanes = ferry_rpc::Single;
    type Mailbox = ferry_rpc::PerPort;
    type Wait = Spin;
    type Inline = I;
    type Whole = service::NoWhole;

    fn inline(&self) -> Option<&I> {
        Some(self.inline)
    }

    fn process(&self) -> &ferry_rpc::ClientProcess<'_> {
        &self.process
    }
}

/// Its own site: each call runs on it.
impl<'p, I: service::InlineCall> service::Site for WithInline<'p, I> {
    type Claim<'a> = WithInline<'p, I>;

    fn call<R, E>(
        &self,
        _deadline: Option<Duration>,
        call: impl FnOnce(&WithInline<'p, I>) -> Result<R, Error<E>>,
    ) -> Result<R, Error<E>> {
        call(self)
    }
}

#[test]
fn fixed_calls_go_inline_when_the_client_has_a_path_and_the_rest_through_ports() {
    let served = with_server(1, 1, |region, counters| {
        let direct = Direct {
            service: counters,
            carried: AtomicU32::new(0),
            refuse: false,
        };
        let site = WithInline {
            process: region.client(),
            inline: &direct,
        };
        let c = Counter::client(&site);
        assert_eq!(c.add(2, 5), Ok(5));
        assert_eq!(c.get(2), Ok(5));
        c.ping().unwrap();
        // A tagged reply inline, both ways.
        assert_eq!(c.apply(2, Mode::Add, 0, false), Ok(5));
        assert_eq!(
            c.apply(2, Mode::Add, 0, true),
            Err(Error::App(Refusal::Strict))
        );
        // A streamed argument with a fixed reply travels inline too, beside the request, on
        // a path that carries bodies; one-way calls take a port.
        assert_eq!(c.sum(&[1, 2, 3]), Ok(6));
        c.bump(2).unwrap();
        while c.get(2).unwrap() < 6 {
            std::thread::yield_now();
        }
        // add, get, ping, apply twice, sum, and every get of the wait above.
        assert!(direct.carried.load(Ordering::Relaxed) >= 7);
        // A path that refuses: the same calls through a port.
        let refusing = Direct {
            service: counters,
            carried: AtomicU32::new(0),
            refuse: true,
        };
        let site = WithInline {
            process: region.client(),
            inline: &refusing,
        };
        let c = Counter::client(&site);
        assert_eq!(c.add(2, 1), Ok(7));
        c.ping().unwrap();
        assert_eq!(refusing.carried.load(Ordering::Relaxed), 0);
    });
    // Through ports: the one-way call, and the refused path's add and ping.
    let opcodes: Vec<u32> = served.iter().map(|s| s.opcode).collect();
    for call in ["Bump", "Add", "Ping"] {
        let opcode = service::hash_opcode("Counter", call);
        assert!(opcodes.contains(&opcode), "{call}: {opcodes:x?}");
    }
    for call in ["Get", "Apply", "Sum"] {
        let opcode = service::hash_opcode("Counter", call);
        assert!(!opcodes.contains(&opcode), "{call}: {opcodes:x?}");
    }
}

#[test]
fn dispatch_inline_answers_bad_bytes_unknown_calls_and_streams() {
    let counters = Counters::default();
    let mut reply = [0u8; service::INLINE_BYTES];
    let add = add_opcode();
    let request = [&1u32.to_ne_bytes()[..], &9u64.to_ne_bytes()].concat();
    assert_eq!(
        Counter::dispatch_inline(&counters, add, &request, &[], &mut reply),
        Some((status::OK, 8))
    );
    assert_eq!(u64::read_from_prefix(&reply).unwrap().0, 9);
    // One byte short, one too many: malformed, and nothing runs.
    for wrong in [&request[..11], &[&request[..], &[0]].concat()[..]] {
        assert_eq!(
            Counter::dispatch_inline(&counters, add, wrong, &[], &mut reply),
            Some((status::BAD_REQUEST, 0))
        );
    }
    assert_eq!(
        Counter::dispatch_inline(&counters, Counter::Ping.opcode(), &[1], &[], &mut reply),
        Some((status::BAD_REQUEST, 0))
    );
    // Bytes that are not a `Mode`, not a `bool`.
    for bad in [apply_bytes(1, 0, 1, 0), apply_bytes(1, 1, 1, 0xff)] {
        assert_eq!(
            Counter::dispatch_inline(&counters, apply_opcode(), &bad, &[], &mut reply),
            Some((status::BAD_REQUEST, 0))
        );
    }
    assert_eq!(counters.calls.load(Ordering::Relaxed), 1);
    // A tagged reply: tag 1, then the error.
    assert_eq!(
        Counter::dispatch_inline(
            &counters,
            apply_opcode(),
            &apply_bytes(1, 2, 10, 0),
            &[],
            &mut reply
        ),
        Some((status::OK, 9))
    );
    assert_eq!(reply[..2], [1, Refusal::Underflow as u8]);
    assert_eq!(
        Counter::dispatch_inline(&counters, 0x1234, &[], &[], &mut reply),
        Some((status::UNKNOWN_OPCODE, 0))
    );
    // A streamed argument beside the request: taken by a call that has one (bounded by its
    // limit), refused by one that has none.
    let sum = service::hash_opcode("Counter", "Sum");
    assert_eq!(
        Counter::dispatch_inline(&counters, sum, &[], &[1, 2, 3], &mut reply),
        Some((status::OK, 8))
    );
    assert_eq!(u64::read_from_prefix(&reply).unwrap().0, 6);
    assert_eq!(
        Counter::dispatch_inline(&counters, sum, &[], &[1; 1025], &mut reply),
        Some((status::REJECTED, 0))
    );
    assert_eq!(
        Counter::dispatch_inline(&counters, add, &request, &[1], &mut reply),
        Some((status::BAD_REQUEST, 0))
    );
    for not_inline in ["Count", "Upper", "Bump"] {
        let opcode = service::hash_opcode("Counter", not_inline);
        assert_eq!(
            Counter::dispatch_inline(&counters, opcode, &[0; 4], &[], &mut reply),
            None,
            "{not_inline}"
        );
    }
    assert_eq!(
        Counter::dispatch_inline(&counters, service::HANDSHAKE, &[], &[], &mut reply),
        None
    );
}

/// A crate that re-exports ferry under a path of its own names it with `#[rpc(crate = "...")]`.
mod facade {
    pub mod reexported {
        pub use ferry_rpc as runtime;
    }
}

#[derive(RpcOpcodes)]
#[rpc(crate = "crate::facade::reexported::runtime")]
enum Renamed {
    #[rpc(response = u32)]
    Twice(u32),
}

#[test]
fn a_service_can_name_the_runtime_through_a_reexport() {
    struct Doubler;
    impl RenamedServer for Doubler {
        fn twice(&self, x: u32) -> u32 {
            2 * x
        }
    }
    let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut buffers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if Renamed::serve_one(&Doubler, &server, &mut buffers)
                    .unwrap()
                    .is_none()
                {
                    std::thread::yield_now();
                }
            }
        });
        let client = region.client();
        assert_eq!(Renamed::client(&client).twice(21), Ok(42));
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(<Renamed as Service>::NAME, "Renamed");
}

/// Calls of many fixed arguments: up to 12 the runtime decodes them as a tuple, past that the
/// derive writes the call's own decoder; both read each argument at its packed offset, and both
/// refuse a value that is not one of its type.
#[derive(RpcOpcodes)]
enum Wide {
    #[rpc(response = u64)]
    Twelve(u8, u16, u32, u64, u8, u16, u32, u64, u8, u16, u32, bool),
    #[rpc(response = u64)]
    Thirteen(u8, u16, u32, u64, u8, u16, u32, u64, u8, u16, u32, u8, bool),
}

#[test]
#[allow(clippy::too_many_arguments)]
fn calls_of_many_fixed_arguments_read_each_at_its_offset() {
    struct Summer;
    impl WideServer for Summer {
        fn twelve(
            &self,
            a: u8,
            b: u16,
            c: u32,
            d: u64,
            e: u8,
            f: u16,
            g: u32,
            h: u64,
            i: u8,
            j: u16,
            k: u32,
            l: bool,
        ) -> u64 {
            let parts = [
                a as u64, b as u64, c as u64, d, e as u64, f as u64, g as u64, h,
            ];
            parts.iter().sum::<u64>() + i as u64 + j as u64 + k as u64 + l as u64 * 1000
        }
        fn thirteen(
            &self,
            a: u8,
            b: u16,
            c: u32,
            d: u64,
            e: u8,
            f: u16,
            g: u32,
            h: u64,
            i: u8,
            j: u16,
            k: u32,
            l: u8,
            m: bool,
        ) -> u64 {
            self.twelve(a, b, c, d, e, f, g, h, i, j, k, m) + l as u64 * 100
        }
    }
    let region: HeapRegion = HeapRegion::new(32, 1).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region.server();
            let mut buffers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if Wide::serve_one(&Summer, &server, &mut buffers)
                    .unwrap()
                    .is_none()
                {
                    std::thread::yield_now();
                }
            }
        });
        let client = region.client();
        let wide = Wide::client(&client);
        assert_eq!(
            wide.twelve(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, true),
            Ok(1066)
        );
        assert_eq!(
            wide.thirteen(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 3, false),
            Ok(366)
        );
        stop.store(true, Ordering::Relaxed);
    });
    // A `bool` that is neither 0 nor 1, last of each: refused before the handler.
    let mut reply = [0u8; service::INLINE_BYTES];
    for (opcode, len) in [(Wide::OPCODE_TWELVE, 38), (Wide::OPCODE_THIRTEEN, 39)] {
        let mut request = vec![0u8; len];
        request[len - 1] = 2;
        assert_eq!(
            Wide::dispatch_inline(&Summer, opcode, &request, &[], &mut reply),
            Some((status::BAD_REQUEST, 0)),
            "{len} bytes"
        );
        request[len - 1] = 1;
        assert_eq!(
            Wide::dispatch_inline(&Summer, opcode, &request, &[], &mut reply).map(|r| r.0),
            Some(status::OK)
        );
    }
}

/// The generated server serves a call in one pass only when no argument can fail to decode: the
/// probe it asks says so for types whose every byte pattern is a value, and not for others.
#[test]
// The borrows are the probe: method lookup on `&Infallible<T>` picks the answer.
#[allow(clippy::needless_borrow)]
fn the_one_pass_probe_tells_infallible_argument_types_from_others() {
    use ferry_rpc::__private::{Infallible, IsFallible as _, IsInfallible as _};
    assert!((&Infallible::<u64>::new()).infallible());
    assert!((&Infallible::<[u8; 12]>::new()).infallible());
    assert!(!(&Infallible::<bool>::new()).infallible());
    assert!(!(&Infallible::<Mode>::new()).infallible());
    assert!(!(&Infallible::<char>::new()).infallible());
}

/// A site that carries every call whole (as a network transport does), the message copied as it
/// would cross, and a bridge that makes it again on a client process of a served region
/// (`service::replay`) or serves it in its own process (`Handler::handle_whole`). Its own
/// process is on a region no server serves: a call that went there instead of the whole path
/// would fail.
struct Carried<'p> {
    unserved:
        ferry_rpc::ClientProcess<'p, ferry_rpc::Single, ferry_rpc::PerPort, ferry_rpc::SpinLimit>,
    bridge: Bridge<'p>,
    carried: AtomicU32,
}

/// Where a [`Carried`] call is made again.
enum Bridge<'p> {
    /// On a client process of a served region.
    Replay(&'p ferry_rpc::ClientProcess<'p>),
    /// By a handler in this process.
    InProcess(&'p (dyn service::Handler<ferry_rpc::PerPort, ferry_rpc::Spin> + Sync)),
}

impl Bridge<'_> {
    fn call(
        &self,
        request: &service::WholeRequest<'_>,
        reply: service::WholeReply<'_>,
    ) -> Result<(), Error> {
        match self {
            Bridge::Replay(process) => service::replay(*process, request, reply),
            Bridge::InProcess(handler) => handler
                .handle_whole(request, reply)
                .expect("a derived service serves every call whole"),
        }
    }
}

impl service::WholeCall for Carried<'_> {
    fn call_whole(
        &self,
        request: &service::WholeRequest<'_>,
        mut reply: service::WholeReply<'_>,
    ) -> Result<(), Error> {
        self.carried.fetch_add(1, Ordering::Relaxed);
        // What crosses: copies of the request's parts, and the reply's bytes or the error.
        let (prefix, body) = (request.prefix.to_vec(), request.body.map(<[u8]>::to_vec));
        let copy = service::WholeRequest {
            opcode: request.opcode,
            prefix: &prefix,
            body: body.as_deref(),
            reply: request.reply,
        };
        // The bridge's end takes what its call gives: the client's end checks it.
        let crossed = match copy.reply {
            service::ReplyShape::None => self
                .bridge
                .call(&copy, service::WholeReply::none())
                .map(|()| vec![]),
            service::ReplyShape::Fixed(n) => {
                let mut out = vec![0u8; n];
                self.bridge
                    .call(&copy, service::WholeReply::fixed(&mut out))
                    .map(|()| out)
            }
            service::ReplyShape::Stream { limit } => {
                let mut bytes = Vec::new();
                let mut sink = BytesSink(&mut bytes);
                self.bridge
                    .call(&copy, service::WholeReply::stream(&mut sink, limit))
                    .map(|()| bytes)
            }
        };
        reply.deliver(&crossed?)
    }
}

/// A sink that keeps lane 0's stream in a vector.
struct BytesSink<'v>(&'v mut Vec<u8>);

impl ferry_rpc::StreamSink for BytesSink<'_> {
    fn start(&mut self, _lane: u32, len: u64) -> bool {
        self.0.resize(len as usize, 0);
        true
    }
    fn chunk(&mut self, _lane: u32, offset: u64, bytes: &[u8]) {
        self.0[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }
}

impl<'p> service::CallSite for Carried<'p> {
    type Lanes = ferry_rpc::Single;
    type Mailbox = ferry_rpc::PerPort;
    type Wait = ferry_rpc::SpinLimit;
    type Inline = service::NoInline;
    type Whole = Self;

    fn whole(&self) -> Option<&Self> {
        Some(self)
    }

    fn inline(&self) -> Option<&service::NoInline> {
        None
    }

    fn process(
        &self,
    ) -> &ferry_rpc::ClientProcess<'p, ferry_rpc::Single, ferry_rpc::PerPort, ferry_rpc::SpinLimit>
    {
        &self.unserved
    }
}

impl<'p> service::Site for Carried<'p> {
    type Claim<'a> = Carried<'p>;

    fn call<R, E>(
        &self,
        _deadline: Option<Duration>,
        call: impl FnOnce(&Carried<'p>) -> Result<R, Error<E>>,
    ) -> Result<R, Error<E>> {
        call(self)
    }
}

#[test]
fn calls_carried_whole_and_replayed_on_a_bridge_give_what_the_ports_give() {
    let unserved = HeapRegion::new(32, 1).unwrap();
    with_server(1, 1, |region, counters| {
        let bridge = region.client();
        let site = Carried {
            unserved: unserved
                .client_with(ferry_rpc::Single, ferry_rpc::SpinLimit(0))
                .unwrap(),
            bridge: Bridge::Replay(&bridge),
            carried: AtomicU32::new(0),
        };
        calls_carried_whole(&site, counters);
    });
}

#[test]
fn calls_carried_whole_and_served_in_process_give_what_the_ports_give() {
    let unserved = HeapRegion::new(32, 1).unwrap();
    let local = Counter::server(Counters::default());
    let site = Carried {
        unserved: unserved
            .client_with(ferry_rpc::Single, ferry_rpc::SpinLimit(0))
            .unwrap(),
        bridge: Bridge::InProcess(&local),
        carried: AtomicU32::new(0),
    };
    calls_carried_whole(&site, local.handler());
}

/// Every kind of call, and every refusal, through `site`, whose calls reach `counters`.
fn calls_carried_whole(site: &Carried<'_>, counters: &Counters) {
    use other::CounterV2;
    {
        let c = Counter::client(site);
        assert_eq!(c.add(1, 5), Ok(5));
        assert_eq!(c.get(1), Ok(5));
        for len in [0usize, 1, 56, 57, 500, 1024] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let want: u64 = data.iter().map(|&b| b as u64).sum();
            assert_eq!(c.sum(&data), Ok(want), "len {len}");
            assert_eq!(c.sum_with(len, |b| b.copy_from_slice(&data)), Ok(want));
            let mut buf = vec![0u8; len];
            let got = c.count_into(len as u32, &mut buf).unwrap();
            assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));
            assert_eq!(c.count(len as u32).map(|v| v.len()), Ok(len));
        }
        let long = "ferry ".repeat(30);
        assert_eq!(c.upper(&long), Ok(long.to_uppercase()));
        c.ping().unwrap();
        assert_eq!(c.scale(6, 7), Ok(42));
        for _ in 0..10 {
            c.bump(3).unwrap();
        }
        while c.get(3).unwrap() < 10 {
            std::thread::yield_now();
        }
        // Tagged errors, and the refusals of each kind.
        assert_eq!(
            c.apply(0, Mode::Sub, 4, false),
            Err(Error::App(Refusal::Underflow))
        );
        assert_eq!(c.apply(0, Mode::Add, 4, false), Ok(4));
        assert_eq!(c.sum(&[1; 1025]), Err(Error::Status(Status::Rejected)));
        let mut small = [0u8; 10];
        assert_eq!(
            c.count_into(500, &mut small).map(|b| b.len()),
            Err(Error::Status(Status::ReplyTooLarge {
                len: 500,
                limit: 10
            }))
        );
        let new = CounterV2::client(site);
        fn unknown<T>(call: &str) -> Result<T, Error> {
            let opcode = service::hash_opcode("Counter", call);
            Err(Error::Status(Status::UnknownOpcode { opcode }))
        }
        assert_eq!(new.reset(2), unknown("Reset"));
        assert_eq!(new.upload(&[1; 5000]), unknown("Upload"));
        assert_eq!(new.download(50).map(|b| b.len()), unknown("Download"));
        let raw = other::RawCounter::client(site);
        assert_eq!(
            raw.upper(&[0xff, 0xfe]).map(|b| b.len()),
            Err(Error::Status(Status::BadRequest))
        );
        assert!(site.carried.load(Ordering::Relaxed) > 40);
        assert_eq!(counters.values[1].load(Ordering::Relaxed), 5);
    }
}

/// What a whole call's reply takes: a fixed reply of exactly its length, a one-way call's
/// nothing, a stream within its limit; anything else is refused and nothing is written.
#[test]
fn a_whole_reply_takes_only_bytes_of_the_calls_shape() {
    let bad = Err(Error::Status(Status::BadResponse));
    let mut out = [7u8; 4];
    assert_eq!(
        service::WholeReply::fixed(&mut out).deliver(&[1, 2, 3]),
        bad
    );
    assert_eq!(service::WholeReply::fixed(&mut out).deliver(&[1; 5]), bad);
    assert_eq!(out, [7; 4]);
    assert_eq!(
        service::WholeReply::fixed(&mut out).deliver(&[1, 2, 3, 4]),
        Ok(())
    );
    assert_eq!(out, [1, 2, 3, 4]);
    assert_eq!(service::WholeReply::none().deliver(&[0]), bad);
    assert_eq!(service::WholeReply::none().deliver(&[]), Ok(()));
    let mut got = Vec::new();
    let mut sink = BytesSink(&mut got);
    assert_eq!(
        service::WholeReply::stream(&mut sink, 3).deliver(&[1; 4]),
        Err(Error::from(ferry_rpc::Error::TooLarge {
            lane: 0,
            len: 4,
            limit: 3
        }))
    );
    assert_eq!(
        service::WholeReply::stream(&mut sink, 3).deliver(&[5; 3]),
        Ok(())
    );
    assert_eq!(got, [5; 3]);
    // In parts: the same, and parts that do not add up to the length are refused.
    let parts = [&[1u8, 2][..], &[], &[3]];
    let mut sink = BytesSink(&mut got);
    assert_eq!(
        service::WholeReply::stream(&mut sink, 3).deliver_parts(3, parts),
        Ok(())
    );
    assert_eq!(got, [1, 2, 3]);
    let mut sink = BytesSink(&mut got);
    assert_eq!(
        service::WholeReply::stream(&mut sink, 9).deliver_parts(2, parts),
        bad
    );
    let mut sink = BytesSink(&mut got);
    assert_eq!(
        service::WholeReply::stream(&mut sink, 9).deliver_parts(4, parts),
        bad
    );
    let mut out = [0u8; 3];
    assert_eq!(
        service::WholeReply::fixed(&mut out).deliver_parts(3, parts),
        Ok(())
    );
    assert_eq!(out, [1, 2, 3]);
    let mut out = [9u8; 4];
    assert_eq!(
        service::WholeReply::fixed(&mut out).deliver_parts(4, parts),
        bad
    );
    assert_eq!(out, [9; 4]);
}
