//! Typed services over an in-process region (`HeapRegion`): plain, streamed and one-way calls,
//! many client threads, a simulated GPU warp, unknown opcodes, refused streams and a mismatched
//! fingerprint. Every test runs under a watchdog: a hang aborts the test binary with a message
//! instead of blocking forever.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_core::service::{self, status, CallError, Service};
use rpc_core::{HeapRegion, Spin};
use rpc_derive::RpcOpcodes;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
struct Add {
    counter: u32,
    _pad: u32,
    delta: u64,
}

/// The service under test: one call of each kind.
#[derive(RpcOpcodes)]
enum Counter {
    /// Adds `delta` to a counter; returns the new value.
    #[rpc(request = Add, response = u64)]
    Add,
    /// A counter's value.
    #[rpc(request = u32, response = u64)]
    Get,
    /// The sum of the bytes sent.
    #[rpc(request = [u8], response = u64, limit = 1024)]
    Sum,
    /// `n` bytes counting up from 0 (mod 256).
    #[rpc(request = u32, response = [u8])]
    Bytes,
    /// The text in upper case.
    #[rpc(request = str, response = str)]
    Upper,
    /// Adds 1 to counter `n`, without waiting.
    #[rpc(request = u32, oneway)]
    Bump,
    /// Nothing, with a reply.
    #[rpc(request = (), response = ())]
    Ping,
}

/// Other schemas, in a module of their own so that their client methods (`add`, `upper`) do not
/// clash with `Counter`'s where only `Counter`'s trait is imported.
mod other {
    use super::*;

    /// A newer schema of the same service: two calls the old server does not know.
    #[derive(RpcOpcodes)]
    #[rpc(service = "Counter")]
    pub enum CounterV2 {
        #[rpc(request = Add, response = u64)]
        Add,
        #[rpc(request = u32, response = u64)]
        Reset,
        #[rpc(request = [u8], response = u64)]
        Upload,
        #[rpc(request = u32, response = [u8])]
        Download,
        #[rpc(request = u32, oneway)]
        Forget,
    }

    /// Sends raw bytes where `Counter::Upper` expects text.
    #[derive(RpcOpcodes)]
    #[rpc(service = "Counter")]
    pub enum RawCounter {
        #[rpc(request = [u8], response = [u8])]
        Upper,
    }
}

#[derive(Default)]
struct Counters {
    values: [AtomicU64; 4],
    calls: AtomicU32,
}

impl CounterServer for Counters {
    fn add(&self, r: Add) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.values[r.counter as usize % 4].fetch_add(r.delta, Ordering::Relaxed) + r.delta
    }
    fn get(&self, n: u32) -> u64 {
        self.values[n as usize % 4].load(Ordering::Relaxed)
    }
    fn sum(&self, bytes: &[u8]) -> u64 {
        bytes.iter().map(|&b| b as u64).sum()
    }
    fn bytes(&self, n: u32) -> impl AsRef<[u8]> {
        (0..n).map(|i| i as u8).collect::<Vec<u8>>()
    }
    fn upper(&self, text: &str) -> impl AsRef<str> {
        text.to_uppercase()
    }
    fn bump(&self, n: u32) {
        self.values[n as usize % 4].fetch_add(1, Ordering::Relaxed);
    }
    fn ping(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs `test` with `servers` server threads serving `Counters` on a 32-port region; returns
/// what the servers served. Aborts the process if it all takes longer than a minute.
fn with_server(
    servers: usize,
    lanes: u32,
    test: impl FnOnce(&HeapRegion, &Counters) + Send,
) -> Vec<service::Served> {
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..600 {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("watchdog: a service test hung for a minute");
            std::process::abort();
        })
    };
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
                    match counters.serve_one(&server, &mut buffers) {
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
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    served.into_inner().unwrap()
}

#[test]
fn opcodes_follow_the_documented_schemes() {
    use other::CounterV2;
    assert_eq!(
        Counter::Add.opcode(),
        service::hash_opcode("Counter", "Add")
    );
    assert_eq!(
        Counter::Ping.opcode(),
        service::hash_opcode("Counter", "Ping")
    );
    assert_eq!(CounterV2::Add.opcode(), Counter::Add.opcode());
    assert!(matches!(
        Counter::from_opcode(Counter::Sum.opcode()),
        Some(Counter::Sum)
    ));
    assert!(Counter::from_opcode(CounterV2::Reset.opcode()).is_none());
    assert_eq!(Counter::OPCODES.len(), 7);
    assert_eq!(<Counter as Service>::NAME, "Counter");

    #[derive(RpcOpcodes)]
    #[rpc(class = 0x12)]
    #[allow(dead_code)]
    enum Classy {
        #[rpc(request = (), response = ())]
        First,
        #[rpc(request = (), response = (), opcode = 0x99)]
        Second,
        #[rpc(request = (), oneway)]
        Third,
    }
    assert_eq!(Classy::First.opcode(), service::class_opcode(0x12, 0));
    assert_eq!(Classy::Second.opcode(), 0x99);
    assert_eq!(Classy::Third.opcode(), 0x0012_0002);
}

#[test]
fn fingerprints_cover_names_opcodes_and_shapes() {
    use other::{CounterV2, RawCounter};
    assert_ne!(Counter::FINGERPRINT, CounterV2::FINGERPRINT);
    assert_ne!(Counter::FINGERPRINT, RawCounter::FINGERPRINT);
    let expected = service::Fingerprint::new("RawCounter")
        .call(
            "Upper",
            service::hash_opcode("Counter", "Upper"),
            service::Shape::Bytes,
            service::Shape::Bytes,
        )
        .finish();
    assert_ne!(
        RawCounter::FINGERPRINT,
        expected,
        "the service name is `Counter`"
    );
    let expected = service::Fingerprint::new("Counter")
        .call(
            "Upper",
            service::hash_opcode("Counter", "Upper"),
            service::Shape::Bytes,
            service::Shape::Bytes,
        )
        .finish();
    assert_eq!(RawCounter::FINGERPRINT, expected);
}

#[test]
fn every_kind_of_call_round_trips() {
    with_server(1, 1, |region, counters| {
        let client = region.client();
        let add = |counter, delta| Add {
            counter,
            _pad: 0,
            delta,
        };
        assert_eq!(client.add(add(1, 5)).unwrap(), 5);
        assert_eq!(client.add(add(1, 7)).unwrap(), 12);
        assert_eq!(client.get(1).unwrap(), 12);
        // Streams of 0, 1, one packet and many packets.
        for len in [0usize, 1, 56, 57, 500, 1024] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let want: u64 = data.iter().map(|&b| b as u64).sum();
            assert_eq!(client.sum(&data).unwrap(), want, "len {len}");
            let mut buf = vec![0u8; len];
            let got = client.bytes(len as u32, &mut buf).unwrap();
            assert_eq!(got.len(), len);
            assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));
        }
        let mut buf = [0u8; 256];
        let long = "ferry ".repeat(30);
        assert_eq!(client.upper(&long, &mut buf).unwrap(), long.to_uppercase());
        client.ping().unwrap();
        for _ in 0..10 {
            client.bump(3).unwrap();
        }
        // One-way calls do not wait; a later call sees them once the server ran them.
        while client.get(3).unwrap() < 10 {
            std::thread::yield_now();
        }
        assert_eq!(client.get(3).unwrap(), 10);
        assert_eq!(counters.calls.load(Ordering::Relaxed), 3);
    });
}

#[test]
fn many_client_threads_share_two_server_threads() {
    const THREADS: u64 = 6;
    const CALLS: u64 = 300;
    let served = with_server(2, 1, |region, counters| {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    let client = region.client().with_cursor(t as u32 * 5);
                    let mut last = 0;
                    for i in 0..CALLS {
                        let v = client
                            .add(Add {
                                counter: 0,
                                _pad: 0,
                                delta: 1,
                            })
                            .unwrap();
                        assert!(v > 0);
                        last = last.max(v);
                        if i % 10 == 0 {
                            let text = format!("thread {t} call {i}");
                            let mut buf = [0u8; 64];
                            assert_eq!(client.upper(&text, &mut buf).unwrap(), text.to_uppercase());
                            assert_eq!(
                                client.sum(text.as_bytes()).unwrap(),
                                text.bytes().map(u64::from).sum::<u64>()
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
    use other::{CounterV2, CounterV2Client};
    let served = with_server(1, 1, |region, _| {
        let old = region.client();
        let new = region.client();
        let unknown = |opcode| CallError::UnknownOpcode { opcode };
        // Known to both.
        assert_eq!(
            CounterV2Client::add(
                &new,
                Add {
                    counter: 2,
                    _pad: 0,
                    delta: 3
                }
            )
            .unwrap(),
            3
        );
        // A fixed request; a streamed one of one packet and of many; a streamed response; a
        // one-way call (no error can come back, and the port must still come back).
        assert_eq!(new.reset(2), Err(unknown(CounterV2::Reset.opcode())));
        assert_eq!(
            new.upload(&[1; 10]),
            Err(unknown(CounterV2::Upload.opcode()))
        );
        assert_eq!(
            new.upload(&[1; 5000]),
            Err(unknown(CounterV2::Upload.opcode()))
        );
        let mut buf = [0u8; 100];
        assert_eq!(
            new.download(50, &mut buf).map(|b| b.len()),
            Err(unknown(CounterV2::Download.opcode()))
        );
        for _ in 0..40 {
            new.forget(1).unwrap();
        }
        // Still serving, every port usable.
        for _ in 0..64 {
            assert_eq!(old.get(2).unwrap(), 3);
        }
    });
    let unknown = served
        .iter()
        .filter(|s| s.status == status::UNKNOWN_OPCODE)
        .count();
    assert_eq!(unknown, 4 + 40);
}

#[test]
fn refused_streams_are_errors_on_both_sides_and_nothing_runs() {
    let served = with_server(1, 1, |region, _| {
        let client = region.client();
        // Over the call's limit of 1024: one packet's worth would pass, so send many.
        assert_eq!(client.sum(&[1; 1025]), Err(CallError::Rejected));
        assert_eq!(client.sum(&[1; 100_000]), Err(CallError::Rejected));
        // A response longer than the caller's buffer: the client refuses it.
        let mut small = [0u8; 10];
        assert!(matches!(
            client.bytes(500, &mut small),
            Err(CallError::Port(rpc_core::Error::TooLarge {
                len: 500,
                limit: 10,
                ..
            }))
        ));
        assert!(matches!(
            client.bytes(20, &mut small),
            Err(CallError::Port(rpc_core::Error::TooLarge { len: 20, .. }))
        ));
        // Text that is not UTF-8 never reaches the handler.
        let raw = region.client();
        let mut buf = [0u8; 16];
        assert_eq!(
            other::RawCounterClient::upper(&raw, &[0xff, 0xfe], &mut buf).map(|b| b.len()),
            Err(CallError::BadRequest)
        );
        // And everything still works.
        for _ in 0..40 {
            assert_eq!(client.sum(&[2; 1024]).unwrap(), 2048);
        }
    });
    let count = |st| served.iter().filter(|s| s.status == st).count();
    assert_eq!(count(status::REJECTED), 3, "{served:?}");
    assert_eq!(count(status::BAD_REQUEST), 1, "{served:?}");
}

#[test]
fn the_handshake_compares_fingerprints() {
    use other::CounterV2;
    let served = with_server(1, 1, |region, _| {
        let client = region.client();
        service::handshake::<Counter, _, _, _>(&client).unwrap();
        assert_eq!(
            service::handshake::<CounterV2, _, _, _>(&client),
            Err(CallError::Mismatch {
                client: CounterV2::FINGERPRINT,
                server: Counter::FINGERPRINT
            })
        );
        assert_eq!(client.get(0).unwrap(), 0);
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

// A simulated GPU warp: `size` threads acting as the lanes of one group, all active.
struct ThreadWarp {
    shared: Arc<(u32, std::sync::Barrier, Vec<AtomicU32>)>,
    lane: u32,
}

impl ThreadWarp {
    fn lanes(size: u32) -> Vec<ThreadWarp> {
        let scratch = (0..size).map(|_| AtomicU32::new(0)).collect();
        let shared = Arc::new((size, std::sync::Barrier::new(size as usize), scratch));
        (0..size)
            .map(|lane| ThreadWarp {
                shared: shared.clone(),
                lane,
            })
            .collect()
    }
    fn exchange(&self, value: u32) -> Vec<u32> {
        self.shared.2[self.lane as usize].store(value, Ordering::SeqCst);
        self.shared.1.wait();
        let all = self
            .shared
            .2
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .collect();
        self.shared.1.wait();
        all
    }
}

// SAFETY: every lane takes part in each call (all lanes are always active), and each call returns
// the same exchanged values to every lane, between two barrier waits.
unsafe impl rpc_core::Lanes for ThreadWarp {
    fn lane_size(&self) -> u32 {
        self.shared.0
    }
    fn lane_id(&self) -> u32 {
        self.lane
    }
    fn active_mask(&self) -> u64 {
        (1 << self.shared.0) - 1
    }
    fn broadcast(&self, mask: u64, value: u32) -> u32 {
        self.exchange(value)[mask.trailing_zeros() as usize]
    }
    fn ballot(&self, mask: u64, predicate: bool) -> u64 {
        let all = self.exchange(predicate as u32);
        (0..64)
            .filter(|&i| i < all.len() && all[i] != 0 && mask & (1 << i) != 0)
            .fold(0, |m, i| m | 1 << i)
    }
    fn sync(&self, _mask: u64) {
        self.shared.1.wait();
    }
}

#[test]
fn each_lane_of_a_warp_gets_its_own_response() {
    const LANES: u32 = 4;
    with_server(1, LANES, |region, counters| {
        std::thread::scope(|s| {
            for lanes in ThreadWarp::lanes(LANES) {
                s.spawn(move || {
                    let lane = lanes.lane;
                    let client = region.client_with(lanes, Spin).unwrap();
                    for round in 0..20u64 {
                        // Fixed request and response, per lane.
                        let v = client
                            .add(Add {
                                counter: lane,
                                _pad: 0,
                                delta: lane as u64 + 1,
                            })
                            .unwrap();
                        assert_eq!(v, (round + 1) * (lane as u64 + 1));
                        // Streams of a different length per lane (lane 3: several packets).
                        let data = vec![lane as u8; 60 * lane as usize + 1];
                        assert_eq!(client.sum(&data).unwrap(), lane as u64 * data.len() as u64);
                        let mut buf = [0u8; 256];
                        let n = 70 * lane;
                        assert_eq!(client.bytes(n, &mut buf).unwrap().len(), n as usize);
                        let text = format!("lane {lane} round {round}");
                        assert_eq!(client.upper(&text, &mut buf).unwrap(), text.to_uppercase());
                    }
                    // A refusal on one lane fails the call for the warp; all lanes agree.
                    let data = vec![0u8; if lane == 2 { 5000 } else { 10 }];
                    assert_eq!(client.sum(&data), Err(CallError::Rejected));
                    assert_eq!(client.get(lane).unwrap(), 20 * (lane as u64 + 1));
                });
            }
        });
        assert_eq!(counters.calls.load(Ordering::Relaxed), 20 * LANES);
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
    ) -> Option<Result<u32, rpc_core::Error>> {
        if self.refuse {
            return None;
        }
        let mut full = [0u8; service::INLINE_BYTES];
        let (status, len) = self.service.dispatch_inline(opcode, request, &mut full)?;
        // The caller's bytes, zero past the reply's length.
        full[len.min(service::INLINE_BYTES)..].fill(0);
        reply.copy_from_slice(&full[..reply.len()]);
        self.carried.fetch_add(1, Ordering::Relaxed);
        Some(Ok(status))
    }
}

#[test]
fn fixed_calls_go_inline_when_the_client_has_a_path_and_the_rest_through_ports() {
    let served = with_server(1, 1, |region, counters| {
        let add = |counter, delta| Add {
            counter,
            _pad: 0,
            delta,
        };
        let direct = Direct {
            service: counters,
            carried: AtomicU32::new(0),
            refuse: false,
        };
        let client = region.client().with_inline(&direct);
        assert_eq!(client.add(add(2, 5)).unwrap(), 5);
        assert_eq!(client.get(2).unwrap(), 5);
        client.ping().unwrap();
        // Streams and one-way calls take a port.
        assert_eq!(client.sum(&[1, 2, 3]).unwrap(), 6);
        client.bump(2).unwrap();
        while client.get(2).unwrap() < 6 {
            std::thread::yield_now();
        }
        // add, get, ping, and every get of the wait above.
        assert!(direct.carried.load(Ordering::Relaxed) >= 4);
        // A path that refuses: the same calls through a port.
        let refusing = Direct {
            service: counters,
            carried: AtomicU32::new(0),
            refuse: true,
        };
        let client = region.client().with_inline(&refusing);
        assert_eq!(client.add(add(2, 1)).unwrap(), 7);
        client.ping().unwrap();
        assert_eq!(refusing.carried.load(Ordering::Relaxed), 0);
    });
    // Through ports: the stream, the one-way call, and the refused path's add and ping.
    let opcodes: Vec<u32> = served.iter().map(|s| s.opcode).collect();
    for call in [Counter::Sum, Counter::Bump, Counter::Add, Counter::Ping] {
        assert!(opcodes.contains(&call.opcode()), "{opcodes:x?}");
    }
    assert!(!opcodes.contains(&Counter::Get.opcode()), "{opcodes:x?}");
}

#[test]
fn dispatch_inline_answers_bad_sizes_unknown_calls_and_streams() {
    let counters = Counters::default();
    let mut reply = [0u8; service::INLINE_BYTES];
    let request = Add {
        counter: 1,
        _pad: 0,
        delta: 9,
    };
    let add = Counter::Add.opcode();
    assert_eq!(
        counters.dispatch_inline(add, request.as_bytes(), &mut reply),
        Some((status::OK, 8))
    );
    assert_eq!(u64::read_from_prefix(&reply).unwrap().0, 9);
    // One byte short, one too many: malformed, and nothing runs.
    let bytes = request.as_bytes();
    for wrong in [&bytes[..15], &[bytes, &[0]].concat()[..]] {
        assert_eq!(
            counters.dispatch_inline(add, wrong, &mut reply),
            Some((status::BAD_REQUEST, 0))
        );
    }
    assert_eq!(
        counters.dispatch_inline(Counter::Ping.opcode(), &[1], &mut reply),
        Some((status::BAD_REQUEST, 0))
    );
    assert_eq!(counters.calls.load(Ordering::Relaxed), 1);
    assert_eq!(
        counters.dispatch_inline(0x1234, &[], &mut reply),
        Some((status::UNKNOWN_OPCODE, 0))
    );
    for not_inline in [Counter::Sum, Counter::Bytes, Counter::Upper, Counter::Bump] {
        assert_eq!(
            counters.dispatch_inline(not_inline.opcode(), &[0; 4], &mut reply),
            None
        );
    }
    assert_eq!(
        counters.dispatch_inline(service::HANDSHAKE, &[], &mut reply),
        None
    );
}
