//! Small calls on word lines (`ferry_rpc::words`) from simulated warps, as a GPU's warps make
//! them: the generated clients take the word line by themselves for calls that fit it (by
//! default only a lone lane's; here whole warps and divergent halves too, `word_lanes(64)`);
//! calls that do not fit (a streamed argument) and calls a handler declines take the packets,
//! in order with the word calls on the same port. The server logs each call's path, opcode and
//! lanes, so a call on the wrong path, with the wrong lanes, or a reply routed to the wrong lane
//! is caught.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ferry_device::sim::{self, SimWarp, Yield};
use ferry_rpc::service::{Dispatch, InlineLanes, Text};
use ferry_rpc::{HeapRegion, Lanes, RpcOpcodes, Single};
use ferry_tests::{serving_while, Watchdog};

#[derive(RpcOpcodes)]
#[rpc(service = "words")]
enum Host {
    /// A value derived from both arguments, so a reply delivered to the wrong lane is caught.
    #[rpc(response = u64)]
    Mix { lane: u32, value: u64 },
    /// Prints a line (a streamed argument: never on a word line); returns its length.
    #[rpc(response = u64)]
    Print { line: Text },
    /// Reserves `size` bytes; returns where (a bump allocator).
    #[rpc(response = u64)]
    Malloc { size: u64 },
    /// Three words each way: more than a word line carries (through the packets).
    #[rpc(response = [u64; 3])]
    Wide { a: [u64; 3] },
    /// `mix` declared to pass values only: no fences around it on a GPU.
    #[rpc(response = u64, values)]
    MixValues { lane: u32, value: u64 },
}

fn mix(lane: u32, value: u64) -> u64 {
    value * 1000 + lane as u64
}

#[derive(Default)]
struct Served {
    lines: Mutex<Vec<String>>,
    next: AtomicU64,
}

/// A `Mix` value at least this large is answered after a pause: the caller's lanes outwait their
/// first polls of their own words and wait on the served word.
const SLOW: u64 = 1 << 40;

impl HostServer for Served {
    fn mix(&self, lane: u32, value: u64) -> u64 {
        if value >= STUCK {
            std::thread::sleep(Duration::from_millis(100));
        } else if value >= SLOW {
            std::thread::sleep(Duration::from_millis(2));
        }
        mix(lane, value)
    }
    fn print(&self, line: &str) -> u64 {
        self.lines.lock().unwrap().push(line.to_string());
        line.len() as u64
    }
    fn malloc(&self, size: u64) -> u64 {
        self.next.fetch_add(size, Ordering::Relaxed)
    }
    fn wide(&self, a: [u64; 3]) -> [u64; 3] {
        [a[2], a[1], a[0]]
    }
    fn mix_values(&self, lane: u32, value: u64) -> u64 {
        mix(lane, value)
    }
}

/// How a call reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Words,
    Packets,
}

type Log = Vec<(Path, u32, u64)>;

/// A client of `region` on the simulated warp's `lane`, waiting with `wait`, whose calls of any
/// group take the word lines (`word_lanes(64)`).
fn words_client<W: ferry_rpc::Wait>(
    region: &HeapRegion,
    lane: SimWarp,
    wait: W,
) -> ferry_rpc::Process<'_, ferry_rpc::Client, SimWarp, ferry_rpc::PerPort, W> {
    // Built as a GPU's clients are: on the region's port words.
    ferry_rpc::ClientProcess::with_port_words(region.region(), region.client_memory(), lane, wait)
        .unwrap()
        .word_lanes(64)
}

/// Runs `warp` on a simulated warp of `lanes` lanes against a server of `Host` on a 32-port
/// region with word lines; `inline` false makes the server decline word calls (as a handler
/// that serves no inline calls does). Returns what the server saw.
fn serve(
    name: &'static str,
    lanes: u32,
    inline: bool,
    warp: impl Fn(SimWarp, &HeapRegion) + Sync,
) -> (Log, Served) {
    serve_ports(name, 32, lanes, inline, warp)
}

/// [`serve`] on a region of `ports` ports.
fn serve_ports(
    name: &'static str,
    ports: u32,
    lanes: u32,
    inline: bool,
    warp: impl Fn(SimWarp, &HeapRegion) + Sync,
) -> (Log, Served) {
    let (log, served, _) = serve_warps(name, ports, 0, lanes, 1, inline, warp);
    (log, served)
}

/// [`serve_ports`] with `warps` simulated warps at once and, where `free` is not 0, every port
/// past the first `free` held by another client handle for the whole run, and the first `free`
/// held too until the warps have been started for 20 ms (so each warp's first open waits). Also
/// returns the port of every call served on the word lines, in order.
fn serve_warps(
    name: &'static str,
    ports: u32,
    free: u32,
    lanes: u32,
    warps: u32,
    inline: bool,
    warp: impl Fn(SimWarp, &HeapRegion) + Sync,
) -> (Log, Served, Vec<u32>) {
    let _watchdog = Watchdog::new(name, Duration::from_secs(120));
    let region: HeapRegion = HeapRegion::with_words(ports, lanes).unwrap();
    // The holder is a client as the warps' are (one on the region's port words).
    let desc = sim::descriptor(&region);
    // SAFETY: `desc` names `region`, alive for the run and used only through the protocol.
    let holder = unsafe { desc.client(ferry_rpc::Single, Yield) }.unwrap();
    let hold = |p| holder.try_hold(p).expect("a port no one holds yet");
    let (first, _rest): (Vec<_>, Vec<_>) = match free {
        0 => Default::default(),
        _ => (
            (0..free).map(hold).collect(),
            (free..ports).map(hold).collect(),
        ),
    };
    let host = Served::default();
    let log = Mutex::new(Vec::new());
    let word_ports = Mutex::new(Vec::new());
    let server = region.server();
    let mut buffers = Vec::new();
    let mut seen = vec![0u64; server.seen_words()];
    let (served, seen_log, seen_ports) = (&host, &log, &word_ports);
    let (region, warp) = (&region, &warp);
    serving_while(
        move || {
            if let Some(mut port) = server.try_open(()) {
                seen_log
                    .lock()
                    .unwrap()
                    .push((Path::Packets, port.opcode(), port.lane_mask()));
                Host::dispatch(served, &mut port, &mut buffers).unwrap();
                return true;
            }
            let words = server.serve_words(
                &mut seen,
                // Every lane of a call in one generated dispatch.
                |opcode, lanes: &mut InlineLanes<'_>| match inline {
                    true => Host::dispatch_inline_lanes(served, opcode, lanes),
                    false => lanes.decline(),
                },
                |w| {
                    seen_log
                        .lock()
                        .unwrap()
                        .push((Path::Words, w.opcode, w.mask));
                    seen_ports.lock().unwrap().push(w.port);
                },
            );
            words > 0
        },
        move || {
            std::thread::scope(|s| {
                let warps: Vec<_> = (0..warps)
                    .map(|_| s.spawn(|| SimWarp::run(lanes, |lane| warp(lane, region))))
                    .collect();
                if !first.is_empty() {
                    std::thread::sleep(Duration::from_millis(20));
                    drop(first);
                }
                // A warp's own panic, not the scope's.
                let ends: Vec<_> = warps.into_iter().map(|w| w.join()).collect();
                if let Some(Err(panic)) = ends.into_iter().find(Result::is_err) {
                    std::panic::resume_unwind(panic);
                }
            })
        },
    );
    (
        log.into_inner().unwrap(),
        host,
        word_ports.into_inner().unwrap(),
    )
}

/// Every lane of an 8-lane warp, its client built from the region's descriptor as a kernel's is
/// with whole warps on the word lines, calls `mix(base + round)` for `rounds` rounds, each lane
/// checking its own reply; every call went on the word line with all 8 lanes.
fn warp_mixes_on_word_lines(name: &'static str, rounds: u64, base: u64) {
    let (log, _) = serve(name, 8, true, |lane, region| {
        let desc = sim::descriptor(region);
        // SAFETY: `desc` names `region`, alive and used only through the protocol here.
        let client = unsafe { desc.client(lane, Yield) }.unwrap().word_lanes(64);
        assert!(client.has_words());
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        for round in 0..rounds {
            let value = base + round;
            assert_eq!(host.mix(me, value), Ok(mix(me, value)), "lane {me}");
        }
    });
    assert_eq!(log.len() as u64, rounds);
    assert!(log
        .iter()
        .all(|&e| e == (Path::Words, Host::OPCODE_MIX, 0xff)));
}

#[test]
fn a_warp_calls_on_its_word_line_each_lane_getting_its_own_reply() {
    warp_mixes_on_word_lines("whole warp", 50, 0);
}

#[test]
fn divergent_halves_and_lane_zero_alone_call_with_their_own_lanes() {
    let (log, host) = serve("divergent", 8, true, |lane, region| {
        let client = words_client(region, lane, Yield);
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        let odd = me % 2 == 1;
        client.lanes().diverge(odd as u32, || {
            for round in 0..20 {
                let v = if odd { round } else { round + 100 };
                assert_eq!(host.mix(me, v), Ok(mix(me, v)), "lane {me}");
            }
        });
        let alone = client.lanes().when(me == 0, || host.malloc(64).unwrap());
        assert_eq!(alone, (me == 0).then_some(0));
    });
    let by_mask = |mask: u64| log.iter().filter(|e| e.2 == mask).count();
    assert_eq!(by_mask(0b1010_1010), 20);
    assert_eq!(by_mask(0b0101_0101), 20);
    assert!(log.contains(&(Path::Words, Host::OPCODE_MALLOC, 1)));
    assert!(log.iter().all(|e| e.0 == Path::Words));
    assert_eq!(host.next.load(Ordering::Relaxed), 64);
}

#[test]
fn calls_that_do_not_fit_take_the_packets_in_order_with_word_calls() {
    let (log, host) = serve("mixed paths", 4, true, |lane, region| {
        let client = words_client(region, lane, Yield).keep_port(true);
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        for round in 0..10u64 {
            let line = format!("lane {me} round {round}");
            assert_eq!(host.print(&line), Ok(line.len() as u64));
            assert_eq!(host.mix(me, round), Ok(mix(me, round)));
            let a = [round, me as u64, 7];
            assert_eq!(host.wide(a), Ok([7, me as u64, round]));
        }
    });
    // Per round: the print and the wide call through the packets, the mix on the word line,
    // in the order the warp made them.
    let paths: Vec<(Path, u32)> = log.iter().map(|e| (e.0, e.1)).collect();
    let round = [
        (Path::Packets, Host::OPCODE_PRINT),
        (Path::Words, Host::OPCODE_MIX),
        (Path::Packets, Host::OPCODE_WIDE),
    ];
    assert_eq!(paths, round.repeat(10));
    assert_eq!(host.lines.lock().unwrap().len(), 40);
}

#[test]
fn a_server_that_declines_word_calls_gets_them_through_the_packets() {
    let (log, _) = serve("declined", 4, false, |lane, region| {
        let client = words_client(region, lane, Yield);
        let me = client.lanes().lane_id();
        for round in 0..10 {
            assert_eq!(Host::client(&client).mix(me, round), Ok(mix(me, round)));
        }
    });
    // Each call tried the word line, was declined (nothing executed), and went through the
    // packets.
    let paths: Vec<Path> = log.iter().map(|e| e.0).collect();
    assert_eq!(paths, [Path::Words, Path::Packets].repeat(10));
}

#[test]
fn by_default_a_lone_lane_takes_the_word_line_and_a_warp_the_packets() {
    let (log, _) = serve("default lanes", 8, true, |lane, region| {
        let desc = sim::descriptor(region);
        // SAFETY: `desc` names `region`, alive and used only through the protocol here.
        let client = unsafe { desc.client(lane, Yield) }.unwrap();
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        assert_eq!(host.mix(me, 1), Ok(mix(me, 1)));
        let alone = client.lanes().when(me == 3, || host.mix(me, 2));
        assert_eq!(alone, (me == 3).then_some(Ok(mix(3, 2))));
    });
    assert_eq!(
        log,
        [
            (Path::Packets, Host::OPCODE_MIX, 0xff),
            (Path::Words, Host::OPCODE_MIX, 1 << 3)
        ]
    );
}

#[test]
fn one_dispatch_serves_every_lane_and_declines_what_a_word_line_cannot_carry() {
    use ferry_rpc::service::{status, Service};
    use ferry_rpc::words::WORD_BYTES;
    let host = Served::default();
    let opcode = |i: usize| <Host as Service>::OPCODES[i];
    let (mix_op, print_op, malloc_op, wide_op) = (opcode(0), opcode(1), opcode(2), opcode(3));
    // Lanes 0, 2 and 5 of eight call `Mix`, each with its own arguments.
    let mut requests = [[0u8; WORD_BYTES]; 8];
    for (lane, r) in requests.iter_mut().enumerate() {
        r[..4].copy_from_slice(&(lane as u32).to_le_bytes());
        r[4..12].copy_from_slice(&(100 + lane as u64).to_le_bytes());
    }
    let run = |opcode: u32, request_len: usize| {
        let (mut replies, mut statuses) = ([[0u8; WORD_BYTES]; 8], [0u32; 8]);
        let mut lanes = InlineLanes::new(
            0b10_0101,
            request_len,
            &requests,
            &mut replies,
            &mut statuses,
        );
        Host::dispatch_inline_lanes(&host, opcode, &mut lanes);
        let declined = lanes.declined();
        let got: Vec<(u32, u64)> = (0..8)
            .map(|l| {
                let r = lanes.reply(l);
                (
                    lanes.status(l),
                    u64::from_le_bytes(r[..8].try_into().unwrap()),
                )
            })
            .collect();
        (got, declined)
    };
    let (got, declined) = run(mix_op, 12);
    assert!(!declined);
    for (lane, &(status, value)) in got.iter().enumerate() {
        if [0, 2, 5].contains(&lane) {
            assert_eq!(
                (status, value),
                (status::OK, mix(lane as u32, 100 + lane as u64))
            );
        } else {
            // Lanes outside the call are left as they were.
            assert_eq!((status, value), (0, 0), "lane {lane}");
        }
    }
    // A request of the wrong length is refused, lane by lane; nothing runs.
    let (got, _) = run(malloc_op, 4);
    assert!(got
        .iter()
        .step_by(2)
        .take(2)
        .all(|&(s, _)| s == status::BAD_REQUEST));
    assert_eq!(host.next.load(Ordering::Relaxed), 0);
    // What a word line cannot carry is declined on every lane (the client uses a port): a
    // streamed argument, arguments and a reply over 16 bytes; and the handshake.
    for op in [print_op, wide_op, ferry_rpc::service::HANDSHAKE] {
        assert!(run(op, 8).1, "opcode {op:#x}");
    }
    // An opcode the service does not have is answered as such on every lane.
    let (got, declined) = run(0x1234, 8);
    assert!(!declined);
    assert_eq!(got[5].0, status::UNKNOWN_OPCODE);
}

#[test]
fn a_lane_asking_for_more_than_the_calls_reply_gets_zeros_past_it_and_does_not_wait() {
    serve("reply lengths", 4, true, |lane, region| {
        let desc = sim::descriptor(region);
        // SAFETY: `desc` names `region`, alive and used only through the protocol here.
        let client = unsafe { desc.client(lane, Yield) }.unwrap().word_lanes(64);
        let me = client.lanes().lane_id();
        for round in 0..20u64 {
            let mut request = [0u8; 12];
            request[..4].copy_from_slice(&me.to_le_bytes());
            request[4..].copy_from_slice(&round.to_le_bytes());
            let mut port = client.open_for_words(Host::OPCODE_MIX).unwrap();
            // The first lane's lengths are the call's: lane 0 asks for 4 bytes, the others 8.
            let want = if me == 0 { 4 } else { 8 };
            let mut reply = [0xAA_u8; 8];
            let status = port.call_words(&request, &mut reply[..want]);
            drop(port);
            assert_eq!(status, Ok(0), "lane {me}");
            assert_eq!(reply[..4], mix(me, round).to_le_bytes()[..4], "lane {me}");
            let past: [u8; 4] = if me == 0 { [0xAA; 4] } else { [0; 4] };
            assert_eq!(reply[4..], past, "lane {me}");
        }
    });
}

#[test]
fn a_lane_whose_request_is_longer_or_shorter_than_the_calls_is_cut_or_padded_with_zeros() {
    serve("request lengths", 4, true, |lane, region| {
        let desc = sim::descriptor(region);
        // SAFETY: `desc` names `region`, alive and used only through the protocol here.
        let client = unsafe { desc.client(lane, Yield) }.unwrap().word_lanes(64);
        let me = client.lanes().lane_id();
        for round in 0..20u64 {
            // The first lane's lengths are the call's (12 bytes: the lane and the value): lane 1
            // sends 16, of which the last 4 are dropped; lane 2 sends 8 (the lane and the value's
            // low half), the rest read as zeros; lane 3 sends 12.
            let value = round << 40 | 0xBEEF_0000 | round;
            let mut request = [0x77_u8; 16];
            request[..4].copy_from_slice(&me.to_le_bytes());
            request[4..12].copy_from_slice(&value.to_le_bytes());
            let len = match me {
                1 => 16,
                2 => 8,
                _ => 12,
            };
            let mut port = client.open_for_words(Host::OPCODE_MIX).unwrap();
            let mut reply = [0u8; 8];
            let status = port.call_words(&request[..len], &mut reply);
            drop(port);
            assert_eq!(status, Ok(0), "lane {me}");
            let seen = if me == 2 { value & 0xFFFF_FFFF } else { value };
            assert_eq!(u64::from_le_bytes(reply), mix(me, seen), "lane {me}");
        }
    });
}

#[test]
fn a_warp_whose_reply_is_slow_waits_on_the_served_word_and_gets_its_own_replies() {
    warp_mixes_on_word_lines("slow server", 5, SLOW);
}

#[test]
fn inline_lanes_keep_to_the_arrays_they_are_given() {
    use ferry_rpc::words::{DECLINED, WORD_BYTES};
    let requests = [[7u8; WORD_BYTES]; 3];
    let (mut replies, mut statuses) = ([[9u8; WORD_BYTES]; 5], [1u32; 2]);
    // A mask past every array and a request length past a word line: two lanes, 16 bytes each.
    let mut lanes = InlineLanes::new(u64::MAX, 1000, &requests, &mut replies, &mut statuses);
    assert_eq!(lanes.mask(), 0b11);
    let mut seen = Vec::new();
    lanes.serve(|request, reply| {
        seen.push(request.len());
        // The reply starts zeroed.
        assert_eq!(*reply, [0; WORD_BYTES]);
        reply[0] = 1;
        Some(0)
    });
    assert_eq!(seen, [WORD_BYTES, WORD_BYTES]);
    assert!(!lanes.declined());
    assert_eq!((lanes.status(1), lanes.reply(1)[0]), (0, 1));
    lanes.decline();
    assert!(lanes.declined());
    assert_eq!(lanes.status(0), DECLINED);
    // Lanes outside the call are not touched.
    assert_eq!(replies[2], [9; WORD_BYTES]);
}

#[test]
fn values_calls_take_the_word_line_beside_fenced_ones_and_get_their_own_replies() {
    // Whole warps, a divergent half and a lone lane, each alternating a values call with a
    // fenced one on the same (kept) port: every reply to its own lane, every call on words.
    let (log, _) = serve("values calls", 8, true, |lane, region| {
        let client = words_client(region, lane, Yield).keep_port(true);
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        for round in 0..30 {
            assert_eq!(host.mix_values(me, round), Ok(mix(me, round)), "lane {me}");
            assert_eq!(host.mix(me, round + 7), Ok(mix(me, round + 7)), "lane {me}");
        }
        client.lanes().when(me % 2 == 1, || {
            for round in 0..10 {
                assert_eq!(host.mix_values(me, round), Ok(mix(me, round)));
            }
        });
        client.lanes().when(me == 0, || {
            for round in 0..10 {
                assert_eq!(host.mix_values(me, round), Ok(mix(me, round)));
            }
        });
    });
    let count = |opcode, mask| {
        log.iter()
            .filter(|e| **e == (Path::Words, opcode, mask))
            .count()
    };
    assert_eq!(count(Host::OPCODE_MIX_VALUES, 0xff), 30);
    assert_eq!(count(Host::OPCODE_MIX, 0xff), 30);
    assert_eq!(count(Host::OPCODE_MIX_VALUES, 0b1010_1010), 10);
    assert_eq!(count(Host::OPCODE_MIX_VALUES, 1), 10);
    assert_eq!(log.len(), 80);
}

/// A wait that yields, and gives up `patience` after its first pause when one is set.
struct Patience {
    patience: std::cell::Cell<Option<Duration>>,
    since: std::cell::Cell<Option<std::time::Instant>>,
}

impl ferry_rpc::Wait for Patience {
    fn pause(&self, polls: u32) -> Result<(), ferry_rpc::Stalled> {
        let now = std::time::Instant::now();
        if polls == 0 {
            self.since.set(Some(now));
        }
        match (self.patience.get(), self.since.get()) {
            (Some(p), Some(since)) if now - since > p => Err(ferry_rpc::Stalled),
            _ => {
                std::thread::yield_now();
                Ok(())
            }
        }
    }
}

/// A `Mix` value at least this large is answered after a long pause (a caller that waits a few
/// milliseconds gives up first).
const STUCK: u64 = 1 << 50;

#[test]
fn a_lone_lane_and_its_warp_take_turns_on_one_port_with_a_warp_call_given_up_between() {
    // Lane 0 alone and the whole warp alternate on the port the warp keeps, its words laid out
    // per lane for one and per word for the other; between them the warp gives up a call the
    // server answers late (and the next call follows a sequence gap: the server rewrites every
    // word of the reply line). Every later call must get its own reply, in either layout: a word
    // left from the given-up call, or from the other layout, taken for a reply is caught.
    let (log, _) = serve("turns with a give-up", 8, true, |lane, region| {
        let wait = Patience {
            patience: std::cell::Cell::new(None),
            since: std::cell::Cell::new(None),
        };
        let client = words_client(region, lane, wait).keep_port(true);
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        for round in 0..3u64 {
            let v = 10 * round;
            let alone = client.lanes().when(me == 0, || host.mix(me, v + 1));
            assert_eq!(alone, (me == 0).then_some(Ok(mix(0, v + 1))));
            client
                .wait_policy()
                .patience
                .set(Some(Duration::from_millis(5)));
            assert!(host.mix(me, STUCK + v).is_err(), "lane {me}");
            client.wait_policy().patience.set(None);
            assert_eq!(host.mix(me, v + 2), Ok(mix(me, v + 2)), "lane {me}");
            let alone = client.lanes().when(me == 0, || host.mix(me, v + 3));
            assert_eq!(alone, (me == 0).then_some(Ok(mix(0, v + 3))));
            assert_eq!(host.mix(me, v + 4), Ok(mix(me, v + 4)), "lane {me}");
        }
    });
    // Per round: lane 0, the warp (given up: served late, or dropped if the warp's next call
    // came before the server read it), the warp, lane 0, the warp; all on the word line.
    let by_mask = |mask: u64| log.iter().filter(|e| e.2 == mask).count();
    assert_eq!(by_mask(1), 2 * 3);
    assert!((2 * 3..=3 * 3).contains(&by_mask(0xff)), "{log:?}");
    assert_eq!(log.len(), by_mask(1) + by_mask(0xff));
    assert!(log.iter().all(|e| e.0 == Path::Words));
}

#[test]
fn whole_warps_that_outnumber_the_free_ports_wait_their_turn_and_get_their_own_replies() {
    // Three warps of 8 lanes, every lane calling, one free port (the others held by another
    // handle; the free one held too for the warps' first 20 ms), no port kept: each warp's
    // first open, and many later ones, find the port taken, and its group waits in the open's
    // search loop, its first lane searching again for the lanes its caller counted, until the
    // port is free. Each lane checks its own reply; every call was served on the free port.
    const ROUNDS: u64 = 40;
    let (log, _, ports) = serve_warps(
        "warps wait for a port",
        32,
        1,
        8,
        3,
        true,
        |lane, region| {
            let desc = sim::descriptor(region);
            // SAFETY: `desc` names `region`, alive and used only through the protocol here.
            let client = unsafe { desc.client(lane, Yield) }.unwrap().word_lanes(64);
            let me = client.lanes().lane_id();
            let host = Host::client(&client);
            for round in 0..ROUNDS {
                let value = (u64::from(me) << 32) + round;
                assert_eq!(host.mix(me, value), Ok(mix(me, value)), "lane {me}");
            }
        },
    );
    assert_eq!(log.len() as u64, 3 * ROUNDS);
    assert!(log
        .iter()
        .all(|&e| e == (Path::Words, Host::OPCODE_MIX, 0xff)));
    assert_eq!(ports, vec![0; log.len()]);
}

/// A wait that yields, or gives up at once while `give_up` is set.
struct GivesUp {
    give_up: std::cell::Cell<bool>,
}

impl ferry_rpc::Wait for GivesUp {
    fn pause(&self, _polls: u32) -> Result<(), ferry_rpc::Stalled> {
        if self.give_up.get() {
            return Err(ferry_rpc::Stalled);
        }
        std::thread::yield_now();
        Ok(())
    }
}

#[test]
fn a_lane_given_up_on_in_its_first_polls_gives_up_the_whole_group() {
    // A call the server answers late; the wait policy of lane 3 alone gives up at its first
    // pause, while the receive's first polls still have every lane poll its own words: the
    // other lanes go on waiting (the first one on the served word) until the reply comes, then
    // the whole group gives up, every lane with an error. The port then serves the next calls.
    let (log, _) = serve("one lane gives up early", 8, true, |lane, region| {
        let wait = GivesUp {
            give_up: std::cell::Cell::new(false),
        };
        let client = words_client(region, lane, wait).keep_port(true);
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        assert_eq!(host.mix(me, 1), Ok(mix(me, 1)), "lane {me}");
        client.wait_policy().give_up.set(me == 3);
        assert!(host.mix(me, STUCK).is_err(), "lane {me}");
        client.wait_policy().give_up.set(false);
        for round in 2..6 {
            assert_eq!(host.mix(me, round), Ok(mix(me, round)), "lane {me}");
        }
    });
    // The given-up call was served (the first lane waited for it) before the next ones.
    assert_eq!(log.len(), 6, "{log:?}");
    assert!(log.iter().all(|e| e.0 == Path::Words && e.2 == 0xff));
}

#[test]
fn a_group_waiting_for_a_port_gives_up_together_when_one_lane_s_policy_does() {
    // Every port held for the warp's first 20 ms; lane 5's wait policy gives up at its first
    // pause, the others never: the open's search waits, and the whole group gives up at once,
    // every lane with an error and nothing sent (a lane leaving alone would leave the others
    // waiting for it at the next broadcast). Then the port is free and every lane's next call
    // goes through.
    let (log, _, ports) = serve_warps(
        "a group gives up its open",
        32,
        1,
        8,
        1,
        true,
        |lane, region| {
            let wait = GivesUp {
                give_up: std::cell::Cell::new(false),
            };
            let client = words_client(region, lane, wait);
            let me = client.lanes().lane_id();
            client.wait_policy().give_up.set(me == 5);
            let host = Host::client(&client);
            assert!(host.mix(me, 1).is_err(), "lane {me}");
            client.wait_policy().give_up.set(false);
            assert_eq!(host.mix(me, 2), Ok(mix(me, 2)), "lane {me}");
        },
    );
    assert_eq!(log, vec![(Path::Words, Host::OPCODE_MIX, 0xff)]);
    assert_eq!(ports, vec![0]);
}

#[test]
fn a_port_that_changes_hands_between_word_calls_never_repeats_a_sequence() {
    port_changes_hands("port changes hands", false);
}

#[test]
fn a_port_word_that_changes_hands_between_word_calls_never_repeats_a_sequence() {
    // The same with clients on port words, as a GPU's are: a handle keeps a port's sequence in
    // itself and writes it to the port's word only when it gives the port up or caches another
    // port's state.
    port_changes_hands("port word changes hands", true);
}

/// One port (each handle's first choice, handed on), handles of one lane, on the lock bitmap or
/// on port words: a handle remembers the sequence of its last word call while it keeps the port,
/// and must forget it once the port leaves its hands (closed and unlocked, taken, or adopted), or
/// its next call would repeat the number of the last call served there, whose reply words still
/// carry it: the call would return that call's reply at once (the value checks catch it).
fn port_changes_hands(name: &'static str, port_words: bool) {
    let (log, _) = serve_ports(name, 32, 1, true, |_, region| {
        let value = std::cell::Cell::new(0);
        let call = |c: &ferry_rpc::Process<'_, ferry_rpc::Client, Single, _, Yield>| {
            value.set(value.get() + 1);
            let v = value.get();
            assert_eq!(Host::client(c).mix_values(0, v), Ok(mix(0, v)));
        };
        let handle = || match port_words {
            true => ferry_rpc::ClientProcess::with_port_words(
                region.region(),
                region.client_memory(),
                Single,
                Yield,
            )
            .unwrap(),
            false => region.client_with(Single, Yield).unwrap(),
        };
        // A handle that does not keep its port: it locks it at each open, unlocks at each close.
        let plain = handle();
        let a = handle().keep_port(true);
        // Each hand-over is followed by exactly one call of the other handles: a handle that
        // kept its last sequence would send that call's number again, and take its reply (still
        // in the reply words) for its own.
        let unlock = |a: &ferry_rpc::Process<'_, ferry_rpc::Client, Single, _, Yield>| {
            let port = a.take_kept().expect("a keeps its port");
            assert_eq!(port, 0);
            // SAFETY: the port's lock was set for `a`, which gave it up with `take_kept`; the
            // handle adopting it unlocks it when dropped.
            drop(unsafe { handle().adopt_port(port) });
        };
        for _ in 0..5 {
            // `a` keeps the port over two calls, then hands it to `b` (taken, adopted) ...
            // One call by `a`, then another port's lock taken and released while `a` keeps port
            // 0 (a handle on port words caches the state of one port: port 0's goes to its word
            // then), then one call by a handle port 0 is handed to.
            call(&a);
            drop(a.try_hold(5).expect("port 5 is free"));
            let port = a.take_kept().expect("a keeps its port");
            // SAFETY: as in `unlock`.
            let b = unsafe { handle().adopt_port(port) };
            call(&b);
            drop(b);
            call(&a);
            call(&a);
            let port = a.take_kept().expect("a keeps its port");
            // SAFETY: as in `unlock`.
            let b = unsafe { handle().adopt_port(port) };
            call(&b);
            // ... which unlocks it when dropped; `a` locks it again at its next open.
            drop(b);
            call(&a);
            // Then `plain` and `a` take turns, the port unlocked between them.
            unlock(&a);
            call(&plain);
            call(&a);
            unlock(&a);
            call(&plain);
        }
    });
    assert_eq!(log.len(), 5 * 9);
    assert!(log.iter().all(|e| e.0 == Path::Words));
}
