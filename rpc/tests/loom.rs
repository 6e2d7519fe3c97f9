//! loom models of the protocol's small cases. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p ferry-rpc --test loom --release`.
//!
//! loom explores every interleaving (and every value a relaxed load may return) up to a
//! preemption bound; its tracked cells report any packet access the mailbox handoff does not
//! order, so these models check the fences as well as the logic (removing the release fence
//! before a flip makes `send_n_across_packets` and `contended_lock` fail). The acquire side is
//! checked in its host form, an acquire load (see `sync::MAILBOX_LOAD`).
#![cfg(loom)]

use ferry_rpc::{Error, HeapRegion, Mailbox, Packed, PerPort};
use loom::sync::Arc;
use loom::thread;

/// Runs `f` under loom with room for the spin loops of waiting sides (each poll of a mailbox is a
/// branch point), at most `preemptions` preemptions per execution (`LOOM_MAX_PREEMPTIONS`
/// overrides), and, where `budget` is given, a time limit after which exploration stops (bounded,
/// not exhaustive: the three-thread model's space does not fit a CI run). Prints how many
/// executions it explored.
fn model(preemptions: usize, budget: Option<u64>, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 1_000_000;
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    if builder.max_duration.is_none() {
        builder.max_duration = budget.map(std::time::Duration::from_secs);
    }
    // Counted outside loom's model (std atomics), so the run reports how much it explored.
    let iterations = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = iterations.clone();
    let started = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    println!(
        "loom: {} executions explored in {:.1?} (preemption bound {:?})",
        iterations.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed(),
        builder.preemption_bound
    );
}

/// Serves `calls` requests, replying with each slot's value plus one.
fn serve<M: Mailbox>(region: &HeapRegion<M>, calls: usize) {
    serve_on(&region.server(), calls);
}

/// `serve` through the server handle `server`.
fn serve_on<M: Mailbox>(server: &ferry_rpc::ServerProcess<'_, ferry_rpc::Single, M>, calls: usize) {
    let mut served = 0;
    while served < calls {
        match server.try_open(()) {
            Some(mut port) => {
                port.recv_and_send(|s, _| s.words[0] += 1).unwrap();
                served += 1;
            }
            None => thread::yield_now(),
        }
    }
}

/// Waits (yielding to loom's other threads) until `server` opens a port with a request.
fn next_request<'p, 'a>(
    server: &'p ferry_rpc::ServerProcess<'a>,
) -> ferry_rpc::Port<'p, 'a, ferry_rpc::Server, ferry_rpc::Single, PerPort, ferry_rpc::Spin> {
    loop {
        match server.try_open(()) {
            Some(p) => return p,
            None => thread::yield_now(),
        }
    }
}

fn call<M: Mailbox>(region: &HeapRegion<M>, value: u64) -> u64 {
    call_on(&region.client(), value)
}

/// One call with `value` through the client handle `client`; returns the reply.
fn call_on<M: Mailbox>(
    client: &ferry_rpc::ClientProcess<'_, ferry_rpc::Single, M>,
    value: u64,
) -> u64 {
    let mut port = client.open(1).unwrap();
    let mut reply = 0;
    port.send_and_recv(|s, _| s.words[0] = value, |s, _| reply = s.words[0])
        .unwrap();
    reply
}

/// Two clients and one server: open, send, recv, close. Every client gets its own reply.
///
/// With the packed mailbox: the server's scan then costs two loads per 32 ports instead of 64;
/// the port logic is the same code. Three threads racing over two ports is the largest space
/// here: it is explored for 60 s at one preemption, not exhaustively (the run prints how many
/// executions it explored).
#[test]
fn two_clients_one_server() {
    // Two ports in play: lock all but ports 0 and 1 on the client side.
    model(1, Some(60), || two_clients::<Packed>(0b11, 10, 20));
}

/// A server and two clients calling with `a` and `b`, the client ports limited to `free`.
fn two_clients<M: Mailbox>(free: u32, a: u64, b: u64) {
    let region = Arc::new(HeapRegion::<M>::new(32, 1).unwrap());
    region.client_locks()[0].store(!free, loom::sync::atomic::Ordering::Relaxed);
    let r = region.clone();
    let server = thread::spawn(move || serve(&r, 2));
    let r = region.clone();
    let other = thread::spawn(move || call(&r, a));
    assert_eq!(call(&region, b), b + 1);
    assert_eq!(other.join().unwrap(), a + 1);
    server.join().unwrap();
}

/// Two clients racing for the one free port: the lock admits one at a time, and the second
/// gets the port after the first closes it, with a consistent mailbox. Exhaustive at one
/// preemption; at two it does not finish in minutes.
#[test]
fn contended_lock() {
    model(1, None, || two_clients::<PerPort>(0b1, 1, 5));
}

/// A stream across three packets, each acknowledged, then a reply.
#[test]
fn send_n_across_packets() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        let r = region.clone();
        let server = thread::spawn(move || {
            let server = r.server();
            let mut port = next_request(&server);
            let mut sink: Vec<Vec<u8>> = Vec::new();
            port.recv_n(1024, &mut sink).unwrap();
            let sum: u64 = sink[0].iter().map(|&b| b as u64).sum();
            port.send(|s, _| s.words[0] = sum).unwrap();
        });
        let data: Vec<u8> = (0..130u32).map(|i| i as u8).collect();
        let client = region.client();
        let mut port = client.open(2).unwrap();
        port.send_n(|_| &data).unwrap();
        let mut sum = 0;
        port.recv(|s, _| sum = s.words[0]).unwrap();
        assert_eq!(sum, data.iter().map(|&b| b as u64).sum::<u64>());
        drop(port);
        server.join().unwrap();
    });
}

/// A stream through a bulk area of 64 bytes per lane, across three handoffs, then a streamed
/// reply through the same area the other way: every access to the area must be ordered by the
/// handoffs (loom tracks each of its slots).
#[test]
fn bulk_stream_both_ways() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::with_bulk(32, 1, 64).unwrap());
        let r = region.clone();
        let server = thread::spawn(move || {
            let server = r.server();
            let mut port = next_request(&server);
            let mut sink: Vec<Vec<u8>> = Vec::new();
            port.recv_n(1024, &mut sink).unwrap();
            let reply: Vec<u8> = sink[0].iter().rev().copied().collect();
            port.send_n(|_| &reply).unwrap();
        });
        let data: Vec<u8> = (0..150u32).map(|i| i as u8).collect();
        let client = region.client();
        let mut port = client.open(2).unwrap();
        port.send_n(|_| &data).unwrap();
        let mut back: Vec<Vec<u8>> = Vec::new();
        port.recv_n(1024, &mut back).unwrap();
        assert_eq!(back[0], data.iter().rev().copied().collect::<Vec<u8>>());
        drop(port);
        server.join().unwrap();
    });
}

/// A stream refused after its first packet: both sides stop in step.
#[test]
fn refused_stream() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        let r = region.clone();
        let server = thread::spawn(move || {
            let server = r.server();
            let mut port = next_request(&server);
            let mut sink: Vec<Vec<u8>> = Vec::new();
            let got = port.recv_n(16, &mut sink);
            assert!(matches!(got, Err(Error::TooLarge { len: 200, .. })));
        });
        let data = vec![7u8; 200];
        let client = region.client();
        let mut port = client.open(2).unwrap();
        assert_eq!(port.send_n(|_| &data), Err(Error::Rejected));
        drop(port);
        server.join().unwrap();
    });
}

/// A client that keeps its port between calls: a one-way call, then a call on the kept port,
/// which must wait for the server to finish the first before reusing the packet, then a third
/// call, opened from what the handle remembers (it closed the port holding its packet) without
/// reading any memory: its writes must still be ordered after the server's last accesses.
#[test]
fn kept_port_one_way_then_call() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        // One port in play, so the later calls must come back to it.
        region.client_locks()[0].store(!0b1, loom::sync::atomic::Ordering::Relaxed);
        let r = region.clone();
        let server = thread::spawn(move || serve(&r, 3));
        let client = region.client().keep_port(true);
        let mut port = client.open(1).unwrap();
        port.send(|s, _| s.words[0] = 1).unwrap();
        drop(port);
        for value in [40, 50] {
            assert_eq!(call_on(&client, value), value + 1);
        }
        drop(client);
        server.join().unwrap();
    });
}

/// A server that holds its whole range (`Process::exclusive`) opens and closes ports without
/// locking them: the handoff alone must order the packet accesses. Two calls from one client.
#[test]
fn exclusive_server() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        region.client_locks()[0].store(!0b1, loom::sync::atomic::Ordering::Relaxed);
        let r = region.clone();
        let server = thread::spawn(move || {
            serve_on(
                &r.server().exclusive().unwrap_or_else(|_| panic!("free")),
                2,
            );
        });
        let client = region.client();
        for value in [10, 20] {
            assert_eq!(call_on(&client, value), value + 1);
        }
        drop(client);
        server.join().unwrap();
    });
}

/// A holder (`Process::try_hold`, as a transport's monitor uses it) and a server worker racing
/// for the one port with a request: never both on the port at once (their accesses to a tracked
/// cell would race), and a holder that comes after the worker sees the worker's reply flip (the
/// client owns the packet again), while one that comes first sees the request still pending.
#[test]
fn held_port_excludes_the_worker() {
    model(3, None, || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        region.client_locks()[0].store(!0b1, loom::sync::atomic::Ordering::Relaxed);
        // Touched by whoever holds the server side's lock of port 0: how many replies were sent.
        let replies = Arc::new(loom::cell::UnsafeCell::new(0u32));
        let client = region.client();
        let mut port = client.open(1).unwrap();
        port.send(|s, _| s.words[0] = 7).unwrap();
        let (r, count) = (region.clone(), replies.clone());
        let worker = thread::spawn(move || {
            let server = r.server();
            let mut port = next_request(&server);
            // SAFETY: the worker holds port 0's server lock (the port is open); loom reports the
            // access if the holder's can overlap it or is not ordered with it.
            count.with_mut(|n| unsafe { *n += 1 });
            port.recv_and_send(|s, _| s.words[0] += 1).unwrap();
        });
        let (r, count) = (region.clone(), replies.clone());
        let holder = thread::spawn(move || {
            let server = r.server();
            let held = loop {
                match server.try_hold(0) {
                    Some(held) => break held,
                    None => thread::yield_now(),
                }
            };
            // SAFETY: as in the worker: the guard holds port 0's server lock.
            let replied = count.with(|n| unsafe { *n });
            // The worker's flip, if it replied, is visible; if not, no worker answers meanwhile.
            assert_eq!(held.client_owns(), replied == 1);
            assert_eq!(held.client_owns(), replied == 1);
        });
        holder.join().unwrap();
        worker.join().unwrap();
        let mut reply = 0;
        port.recv(|s, _| reply = s.words[0]).unwrap();
        assert_eq!(reply, 8);
    });
}

/// A word-line call (`ferry_rpc::words`) after a packet call on the same kept port, then a second
/// word call: the word calls carry data the other side wrote before them in tracked cells, so a
/// missing release or acquire between a side's writes and the other's reads is reported; each
/// reply must be its own call's (never the previous call's words, which carry the same port's
/// older sequence).
#[test]
fn word_calls_after_a_packet_call() {
    model(2, Some(120), || {
        let region = Arc::new(HeapRegion::<PerPort>::with_words(32, 1).unwrap());
        let to_server = Arc::new(loom::cell::UnsafeCell::new(0u64));
        let to_client = Arc::new(loom::cell::UnsafeCell::new(0u64));
        let server = {
            let (region, to_server, to_client) =
                (region.clone(), to_server.clone(), to_client.clone());
            thread::spawn(move || {
                let server = region.server().exclusive().ok().unwrap();
                let mut seen = vec![0u64; server.seen_words()];
                serve_on(&server, 1);
                let mut served = 0;
                while served < 2 {
                    let word = server.serve_words(
                        &mut seen,
                        ferry_rpc::words::lane_by_lane(|_, request, reply| {
                            // SAFETY (loom-checked): the client wrote it before its request.
                            let from_client = to_server.with(|p| unsafe { *p });
                            let v = u64::from_le_bytes(request[..8].try_into().unwrap());
                            assert_eq!(from_client, v);
                            // SAFETY (loom-checked): the client reads it after the reply.
                            to_client.with_mut(|p| unsafe { *p = v * 10 });
                            reply[..8].copy_from_slice(&(v + 1).to_le_bytes());
                            Some((0, 8))
                        }),
                        |_| {},
                    );
                    match word {
                        0 => thread::yield_now(),
                        n => served += n,
                    }
                }
            })
        };
        let client = region.client().keep_port(true);
        assert_eq!(call_on(&client, 5), 6);
        for v in [7u64, 9] {
            // SAFETY (loom-checked): the server reads it after the request.
            to_server.with_mut(|p| unsafe { *p = v });
            let mut port = client.open_for_words(1).unwrap();
            let mut reply = [0u8; 8];
            assert_eq!(port.call_words(&v.to_le_bytes(), &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), v + 1);
            // SAFETY (loom-checked): the handler wrote it before the reply.
            assert_eq!(to_client.with(|p| unsafe { *p }), v * 10);
        }
        server.join().unwrap();
    });
}

/// A server thread answering word calls on `region`'s word lines with the request's first 8
/// bytes plus one, and, where `packets`, calls through the packets with their slot's value plus
/// one, until `stop`.
fn plus_one_on_word_lines(
    region: &Arc<HeapRegion<PerPort>>,
    stop: &Arc<loom::sync::atomic::AtomicBool>,
    packets: bool,
) -> thread::JoinHandle<()> {
    let (region, stop) = (region.clone(), stop.clone());
    thread::spawn(move || {
        let server = region.server().exclusive().ok().unwrap();
        let mut seen = vec![0u64; server.seen_words()];
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            let mut served = server.serve_words(
                &mut seen,
                ferry_rpc::words::lane_by_lane(|_, request, reply| {
                    let v = u64::from_le_bytes(request[..8].try_into().unwrap());
                    reply[..8].copy_from_slice(&(v + 1).to_le_bytes());
                    Some((0, 8))
                }),
                |_| {},
            );
            if packets {
                if let Some(mut port) = server.try_open(()) {
                    port.recv_and_send(|s, _| s.words[0] += 1).unwrap();
                    served += 1;
                }
            }
            if served == 0 {
                thread::yield_now();
            }
        }
    })
}

/// A client gives up on a word call (its wait policy's limit) and makes the next one on the same
/// port; the server may serve the first late (after the client gave up, or while it makes the
/// next), or find only the second. The second call's reply is always its own: never the words of
/// the first (whose sequence is one lower), whatever the server wrote and when.
#[test]
fn a_word_call_given_up_on_is_never_taken_for_the_next() {
    model(2, Some(120), || {
        let region = Arc::new(HeapRegion::<PerPort>::with_words(32, 1).unwrap());
        let stop = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let server = plus_one_on_word_lines(&region, &stop, false);
        let mut reply = [0u8; 8];
        // A client that gives up after one poll: the call is answered or given up on, as loom
        // schedules it.
        let impatient = region
            .client_with(ferry_rpc::Single, ferry_rpc::SpinLimit(1))
            .unwrap();
        let mut port = impatient.open_for_words(1).unwrap();
        let index = port.index();
        match port.call_words(&5u64.to_le_bytes(), &mut reply) {
            Ok(0) => assert_eq!(u64::from_le_bytes(reply), 6),
            Err(ferry_rpc::Error::Stalled) => {}
            other => panic!("the first call: {other:?}"),
        }
        drop(port);
        // The next call on the same port, waiting as long as it takes.
        let patient = region.client();
        let mut port = patient.open_for_words(1).unwrap();
        assert_eq!(port.index(), index);
        assert_eq!(port.call_words(&9u64.to_le_bytes(), &mut reply), Ok(0));
        assert_eq!(u64::from_le_bytes(reply), 10, "the second call's own reply");
        drop(port);
        stop.store(true, std::sync::atomic::Ordering::Release);
        server.join().unwrap();
    });
}

/// Calls that pass values only (`Memory::ValuesOnly`: no fence on the client's side; the server
/// still loads with acquire and stores with release) on a kept port,
/// whose handle takes each call's sequence from its own memory: every reply is the call's own,
/// in every interleaving of the client's word stores with the server's loads (each word carries
/// its call's sequence, so no word of an earlier call or half of a word passes for this one).
#[test]
fn values_calls_without_fences_on_a_kept_port_get_their_own_replies() {
    model(2, Some(120), || {
        let region = Arc::new(HeapRegion::<PerPort>::with_words(32, 1).unwrap());
        let stop = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let server = plus_one_on_word_lines(&region, &stop, false);
        let client = region.client().keep_port(true);
        for v in [5u64, 7] {
            let mut port = client.open_for_words(1).unwrap();
            let mut reply = [0u8; 8];
            let memory = ferry_rpc::words::Memory::ValuesOnly;
            assert_eq!(
                port.call_words_with(&v.to_le_bytes(), &mut reply, memory),
                Ok(0)
            );
            assert_eq!(u64::from_le_bytes(reply), v + 1, "call {v}'s own reply");
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        server.join().unwrap();
    });
}

/// A client on `region`'s port words (`Process::with_port_words`), as a GPU's clients are.
fn port_word_client(region: &HeapRegion<PerPort>) -> ferry_rpc::ClientProcess<'_> {
    ferry_rpc::ClientProcess::with_port_words(
        region.region(),
        region.client_memory(),
        ferry_rpc::Single,
        ferry_rpc::Spin,
    )
    .unwrap()
}

/// Two clients on port words race for the one free port (the others held), each making a call
/// through the packets, with a server: the port word's lock admits one at a time, and the second
/// opens the port from the outbox shadow the first left in the word (no mailbox read), so its
/// slot writes must be ordered after the server's last ones by the word's release store and
/// acquire atomic alone (the tracked slots report it if not). Each client gets its own reply.
#[test]
fn port_words_hand_a_port_and_its_shadow_on() {
    model(1, Some(60), || {
        let region = Arc::new(HeapRegion::<PerPort>::new(32, 1).unwrap());
        let holder = port_word_client(&region);
        let _held: Vec<_> = (1..32).map(|p| holder.try_hold(p).unwrap()).collect();
        let r = region.clone();
        let server = thread::spawn(move || serve(&r, 2));
        let r = region.clone();
        let other = thread::spawn(move || call_on(&port_word_client(&r), 10));
        assert_eq!(call_on(&port_word_client(&region), 20), 21);
        assert_eq!(other.join().unwrap(), 11);
        server.join().unwrap();
    });
}

/// Two clients on port words make word calls in turn on one port (the others held): the second
/// takes the port's sequence from the word with its lock, so its call follows the first's and
/// its reply is its own (a sequence repeated would find the first call's reply, or none).
#[test]
fn port_words_carry_the_word_call_sequence_between_clients() {
    model(2, Some(60), || {
        let region = Arc::new(HeapRegion::<PerPort>::with_words(32, 1).unwrap());
        let holder = port_word_client(&region);
        let held: Vec<_> = (1..32).map(|p| holder.try_hold(p).unwrap()).collect();
        let stop = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let server = plus_one_on_word_lines(&region, &stop, false);
        let r = region.clone();
        let other = thread::spawn(move || {
            let client = port_word_client(&r);
            let mut port = client.open_for_words(1).unwrap();
            let mut reply = [0u8; 8];
            assert_eq!(port.call_words(&5u64.to_le_bytes(), &mut reply), Ok(0));
            assert_eq!(u64::from_le_bytes(reply), 6, "the first client's own reply");
        });
        let client = port_word_client(&region);
        let mut port = client.open_for_words(1).unwrap();
        let mut reply = [0u8; 8];
        assert_eq!(port.call_words(&9u64.to_le_bytes(), &mut reply), Ok(0));
        assert_eq!(
            u64::from_le_bytes(reply),
            10,
            "the second client's own reply"
        );
        drop(port);
        other.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Release);
        server.join().unwrap();
        drop(held);
    });
}

/// Three clients on port words take the one free port one after another (the others held), with
/// a server of both paths: a call through the packets, then a generated word call, whose close
/// unlocks the port with no fence (a relaxed swap of the port word: it touched no packet), then
/// another call through the packets. Their turns are told by relaxed flags, which order nothing:
/// the third client's slot writes are ordered after the server's slot writes of the first call
/// only through the port word, where the word call's swap, a read-modify-write, keeps the first
/// call's release store at the head of the word's release sequence (the tracked slots report a
/// missing order: with a plain relaxed store in the swap's place, checked). Each call gets its
/// own reply.
#[test]
fn a_word_call_s_unfenced_close_keeps_the_packets_ordered_for_the_next_holder() {
    use ferry_rpc::service::InlineCall;
    use std::sync::atomic::Ordering::{Relaxed, Release};
    model(2, Some(90), || {
        let region = Arc::new(HeapRegion::<PerPort>::with_words(32, 1).unwrap());
        let holder = port_word_client(&region);
        let held: Vec<_> = (1..32).map(|p| holder.try_hold(p).unwrap()).collect();
        let stop = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        // Whose turn it is: 1, then 2, then 3 (relaxed: no order between the clients).
        let turn = Arc::new(loom::sync::atomic::AtomicU32::new(1));
        let server = plus_one_on_word_lines(&region, &stop, true);
        let wait_turn = |turn: &loom::sync::atomic::AtomicU32, mine: u32| {
            while turn.load(Relaxed) != mine {
                thread::yield_now();
            }
        };
        let (r, t) = (region.clone(), turn.clone());
        let words = thread::spawn(move || {
            let client = port_word_client(&r);
            wait_turn(&t, 2);
            let mut reply = [0u8; 8];
            let answer = client.call_inline_values(1, &5u64.to_le_bytes(), &mut reply);
            assert_eq!(
                answer,
                Some(Ok(0)),
                "the word call is served on the word line"
            );
            t.store(3, Relaxed);
            u64::from_le_bytes(reply)
        });
        let (r, t) = (region.clone(), turn.clone());
        let last = thread::spawn(move || {
            let client = port_word_client(&r);
            wait_turn(&t, 3);
            call_on(&client, 20)
        });
        assert_eq!(call_on(&port_word_client(&region), 10), 11);
        turn.store(2, Relaxed);
        assert_eq!(words.join().unwrap(), 6);
        assert_eq!(last.join().unwrap(), 21);
        stop.store(true, Release);
        server.join().unwrap();
        drop(held);
    });
}
