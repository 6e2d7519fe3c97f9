//! Calls from divergent warps: device code on a simulated warp (`ferry_device::sim::SimWarp`)
//! whose lanes split, as a kernel's do, and call the host from each branch: a parity split with
//! both halves calling at once (each its own opcode), lane 0 calling alone, and lanes leaving a
//! loop at different iterations while the rest keep calling. The server records the lane mask of
//! every call it serves, so a call made with lanes that did not take its branch is caught, as is a
//! reply routed to the wrong lane; a hang (lanes waiting on a lane that never comes) is caught by
//! the simulated warp or the watchdog.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use ferry_device::sim::{self, SimWarp, Yield};
use ferry_rpc::service::Text;
use ferry_rpc::{HeapRegion, Lanes, RpcOpcodes};
use ferry_tests::{serving_while, Watchdog};

/// The host side of the calls a divergent warp makes.
#[derive(RpcOpcodes)]
#[rpc(service = "diverge")]
enum Host {
    /// A value derived from both arguments, so a reply delivered to the wrong lane is caught.
    #[rpc(response = u64)]
    Mix { lane: u32, value: u64 },
    /// Prints a line; returns its length.
    #[rpc(response = u64)]
    Print { line: Text },
    /// Reserves `size` bytes; returns where (an offset: a bump allocator).
    #[rpc(response = u64)]
    Malloc { size: u64 },
}

/// A raw protocol call beside the derived ones: the reply is the request's word, scrambled.
const RAW: u32 = 77;

fn mix(lane: u32, value: u64) -> u64 {
    value * 1000 + lane as u64
}

fn scramble(word: u64) -> u64 {
    word.rotate_left(13) ^ 0x5a5a
}

#[derive(Default)]
struct Served {
    lines: Mutex<Vec<String>>,
    next: AtomicU64,
}

impl HostServer for Served {
    fn mix(&self, lane: u32, value: u64) -> u64 {
        mix(lane, value)
    }
    fn print(&self, line: &str) -> u64 {
        self.lines.lock().unwrap().push(line.to_string());
        line.len() as u64
    }
    fn malloc(&self, size: u64) -> u64 {
        self.next.fetch_add(size, Ordering::Relaxed)
    }
}

/// What the server saw: each call's opcode and lane mask, in the order served.
type Log = Vec<(u32, u64)>;

/// Runs `warp` on a simulated warp of `lanes` lanes, one thread per lane, against a server of
/// `Host` (and of [`RAW`]) on a 32-port region; returns what the server saw and served.
fn serve(
    name: &'static str,
    lanes: u32,
    warp: impl Fn(SimWarp, &HeapRegion) + Sync,
) -> (Log, Served) {
    let _watchdog = Watchdog::new(name, Duration::from_secs(120));
    let region: HeapRegion = HeapRegion::new(32, lanes).unwrap();
    let host = Served::default();
    let log = Mutex::new(Vec::new());
    let server = region.server();
    let mut buffers = Vec::new();
    let (served, seen_log) = (&host, &log);
    serving_while(
        move || {
            let Some(mut port) = server.try_open(()) else {
                return false;
            };
            seen_log
                .lock()
                .unwrap()
                .push((port.opcode(), port.lane_mask()));
            if port.opcode() == RAW {
                port.recv_and_send(|slot, _| slot.words[0] = scramble(slot.words[0]))
                    .unwrap();
            } else {
                Host::dispatch(served, &mut port, &mut buffers).unwrap();
            }
            true
        },
        || SimWarp::run(lanes, |lane| warp(lane, &region)),
    );
    (log.into_inner().unwrap(), host)
}

/// The masks the server saw for `opcode`, in the order served.
fn masks(log: &Log, opcode: u32) -> Vec<u64> {
    log.iter()
        .filter(|(o, _)| *o == opcode)
        .map(|(_, m)| *m)
        .collect()
}

#[test]
fn halves_of_a_warp_call_at_once_each_with_its_own_opcode() {
    const ROUNDS: u64 = 20;
    // Every lane of both halves meets here while holding its half's port: the halves cannot
    // have run one after the other.
    let both_open = Barrier::new(8);
    let ports = Mutex::new(Vec::new());
    let (log, _) = serve("parity split", 8, |lane, region| {
        let client = region.client_with(lane, Yield).unwrap();
        let me = client.lanes().lane_id();
        let odd = me % 2 == 1;
        client.lanes().diverge(odd as u32, || {
            let half = if odd { 0b1010_1010 } else { 0b0101_0101 };
            assert_eq!(client.lanes().active_mask(), half);
            for round in 0..ROUNDS {
                if odd {
                    // A raw call: a port, a packet, a reply read from this lane's slot.
                    let mut port = client.open(RAW).unwrap();
                    if round == 0 {
                        ports.lock().unwrap().push((half, port.index()));
                        both_open.wait();
                    }
                    let word = (me as u64) << 32 | round;
                    let mut reply = 0;
                    port.send_and_recv(|s, _| s.words[0] = word, |s, _| reply = s.words[0])
                        .unwrap();
                    assert_eq!(reply, scramble(word), "lane {me}, round {round}");
                } else {
                    if round == 0 {
                        // Hold a port of this half's while the odd half holds its own.
                        let port = client.open(RAW + 1).unwrap();
                        ports.lock().unwrap().push((half, port.index()));
                        both_open.wait();
                    }
                    let reply = Host::client(&client).mix(me, round).unwrap();
                    assert_eq!(reply, mix(me, round), "lane {me}, round {round}");
                }
            }
        });
        // The warp is whole again, and calls as one.
        assert_eq!(client.lanes().active_mask(), 0xff);
        assert_eq!(Host::client(&client).mix(me, 99), Ok(mix(me, 99)));
    });
    // Each half's calls carried its own lanes and no other.
    assert_eq!(masks(&log, RAW), vec![0b1010_1010; ROUNDS as usize]);
    let mix_masks = masks(&log, Host::OPCODE_MIX);
    assert_eq!(mix_masks.len(), ROUNDS as usize + 1);
    assert!(mix_masks[..ROUNDS as usize]
        .iter()
        .all(|&m| m == 0b0101_0101));
    assert_eq!(mix_masks[ROUNDS as usize], 0xff);
    // The even half's port held at the meeting was closed without a send: the server never saw it.
    assert_eq!(masks(&log, RAW + 1), Vec::<u64>::new());
    // Both halves held a port at once, and not the same one.
    let ports = ports.into_inner().unwrap();
    let odd_port = ports.iter().find(|(h, _)| *h == 0b1010_1010).unwrap().1;
    let even_port = ports.iter().find(|(h, _)| *h == 0b0101_0101).unwrap().1;
    assert_ne!(odd_port, even_port);
    assert!(ports.iter().all(|&(h, p)| p
        == if h == 0b1010_1010 {
            odd_port
        } else {
            even_port
        }));
}

#[test]
fn lane_zero_alone_prints_and_allocates() {
    let (log, host) = serve("lane 0 alone", 8, |lane, region| {
        // The client a kernel builds from its descriptor.
        let desc = sim::descriptor(region);
        // SAFETY: `desc` names `region`, alive and used only through the protocol for the call.
        let client = unsafe { desc.client(lane, Yield) }.unwrap();
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        let alone = client.lanes().when(me == 0, || {
            assert_eq!(client.lanes().active_mask(), 1);
            let line = "hello from lane 0 alone";
            assert_eq!(host.print(line), Ok(line.len() as u64));
            (host.malloc(64).unwrap(), host.malloc(32).unwrap())
        });
        // Meanwhile the other lanes go on (and wait for lane 0 at the next call of the warp).
        assert_eq!(alone.is_some(), me == 0);
        if let Some((a, b)) = alone {
            assert_eq!((a, b), (0, 64));
        }
        assert_eq!(host.mix(me, 5), Ok(mix(me, 5)));
    });
    assert_eq!(*host.lines.lock().unwrap(), ["hello from lane 0 alone"]);
    assert_eq!(host.next.load(Ordering::Relaxed), 96);
    assert_eq!(masks(&log, Host::OPCODE_PRINT), [1]);
    assert_eq!(masks(&log, Host::OPCODE_MALLOC), [1, 1]);
    assert_eq!(masks(&log, Host::OPCODE_MIX), [0xff]);
}

#[test]
fn lanes_leave_a_loop_one_by_one_and_the_rest_keep_calling() {
    let (log, host) = serve("a loop lanes leave", 8, |lane, region| {
        let client = region.client_with(lane, Yield).unwrap();
        let me = client.lanes().lane_id();
        let host = Host::client(&client);
        let mut k = 0u32;
        // Lane i makes i + 1 iterations: iteration k is made by lanes k.. only.
        client.lanes().repeat(|| {
            assert_eq!(client.lanes().active_mask(), 0xff & !((1 << k) - 1));
            assert_eq!(host.mix(me, k as u64), Ok(mix(me, k as u64)));
            // A stream of a different length per lane: the lanes need different packet counts,
            // and agree on how many to send by ballots over this iteration's mask.
            let line = format!("lane {me} iteration {k} {}", "x".repeat(40 * me as usize));
            assert_eq!(host.print(&line), Ok(line.len() as u64));
            k += 1;
            k <= me
        });
        assert_eq!(k, me + 1);
        assert_eq!(client.lanes().active_mask(), 0xff);
    });
    let shrinking: Vec<u64> = (0..8).map(|k| 0xff & !((1u64 << k) - 1)).collect();
    assert_eq!(masks(&log, Host::OPCODE_MIX), shrinking);
    assert_eq!(masks(&log, Host::OPCODE_PRINT), shrinking);
    let mut lines = host.lines.into_inner().unwrap();
    lines.sort();
    let mut want: Vec<String> = (0..8)
        .flat_map(|me| {
            (0..=me).map(move |k| format!("lane {me} iteration {k} {}", "x".repeat(40 * me)))
        })
        .collect();
    want.sort();
    assert_eq!(lines, want);
}
