//! Protocol behaviour over a heap region: handoff, locks, fairness, streams and their errors.

mod common;

use std::time::Duration;

use common::Backoff;
use ferry_device::sim::SimWarp;
use ferry_rpc::{
    Error, HeaderWord, HeapRegion, Layout, LayoutError, MailboxKind, Packed, PerPort, SliceSink,
    SpinLimit,
};

#[test]
fn layout_is_computed_and_checked() {
    let l = Layout::new(32, 1, MailboxKind::PerPort).unwrap();
    assert_eq!(l.client_outbox_offset(), 0);
    assert_eq!(l.server_outbox_offset(), 128);
    assert_eq!(l.packets_offset(), 256);
    assert_eq!(l.size(), 256 + 32 * 2 * 64);
    assert_eq!(l.lock_words(), 1);
    let p = Layout::new(65536, 32, MailboxKind::Packed).unwrap();
    assert_eq!(p.mailbox_words(), 2048);
    assert_eq!(p.size(), 2 * 8192 + 65536 * 33 * 64);
    assert_eq!(
        Layout::new(0, 1, MailboxKind::PerPort),
        Err(LayoutError::Ports(0))
    );
    assert_eq!(
        Layout::new(33, 1, MailboxKind::PerPort),
        Err(LayoutError::Ports(33))
    );
    assert_eq!(
        Layout::new(1 << 21, 1, MailboxKind::PerPort),
        Err(LayoutError::Ports(1 << 21))
    );
    assert_eq!(
        Layout::new(32, 0, MailboxKind::PerPort),
        Err(LayoutError::Lanes(0))
    );
    assert_eq!(
        Layout::new(32, 65, MailboxKind::PerPort),
        Err(LayoutError::Lanes(65))
    );
    assert!(HeapRegion::<Packed>::new(32, 1).is_ok());
}

#[test]
fn every_row_of_the_word_lines_starts_a_128_byte_line_of_its_own() {
    // A GPU's loads of one poll that touch the same line cross the bus one after the other: no
    // row (word j of every lane) may share a line with another row, the meta words or the served
    // word, whatever the lanes, the ports and what comes before the lines.
    for lanes in [1, 7, 8, 16, 31, 32, 33, 64] {
        for ports in [32, 64, 8480] {
            for bulk in [false, true] {
                let mut l = Layout::new(ports, lanes, MailboxKind::PerPort).unwrap();
                if bulk {
                    l = l.with_bulk(4096).unwrap();
                }
                let l = l.with_words();
                let row = l.row_words();
                assert!(
                    row >= lanes as usize && row.is_multiple_of(16),
                    "{lanes} lanes: rows of {row}"
                );
                assert_eq!(l.words_offset() % 128, 0);
                assert_eq!(l.head_words() * 8 % 128, 0);
                for line in [l.request_line_words(), l.reply_line_words()] {
                    // The first 16 words: meta words or the served word; then whole rows.
                    assert_eq!(line, 16 + ferry_rpc::words::WORDS * row);
                }
                assert!(l.size() >= l.words_offset() + l.head_words() * 8);
            }
        }
    }
}

fn call_in_one_thread<M: ferry_rpc::Mailbox>() {
    let region = HeapRegion::<M>::new(64, 1).unwrap();
    let client = region.client();
    let server = region.server();
    assert!(server.try_open(()).is_none(), "nothing to serve yet");
    for i in 0..100u64 {
        let mut c = client.try_open(5).expect("a free port");
        c.send(|s, _| s.words[0] = i).unwrap();
        let mut s = server.try_open(()).expect("a pending request");
        assert_eq!(s.opcode(), 5);
        assert_eq!(s.lane_mask(), 1);
        s.recv_and_send(|slot, _| slot.words[0] *= 2).unwrap();
        drop(s);
        assert!(server.try_open(()).is_none(), "the request was served once");
        let mut got = 0;
        c.recv(|s, _| got = s.words[0]).unwrap();
        assert_eq!(got, 2 * i);
    }
}

/// `may_open` never says no when `try_open` would find a port, and here (no port kept) says yes
/// only then: for the server (a request waits on a port no server handle holds), for the client
/// (a port no client handle holds), for a server restricted to a range, and for an exclusive
/// server with an outbox mirror.
fn may_open_agrees_with_try_open<M: ferry_rpc::Mailbox>() {
    let region = HeapRegion::<M>::new(64, 1).unwrap();
    let client = region.client();
    let (server, other) = (region.server(), region.server());
    assert!(!server.may_open(), "nothing to serve yet");
    assert!(client.may_open(), "every port is free");
    for i in 0..70u64 {
        let mut c = client.try_open(9).expect("a free port");
        c.send(|s, _| s.words[0] = i).unwrap();
        assert!(server.may_open(), "a request waits (call {i})");
        let mut s = server.try_open(()).expect("a pending request");
        // The one request is under `server`'s lock: another handle has nothing to open.
        assert!(!other.may_open(), "the request is held (call {i})");
        s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
        drop(s);
        assert!(!server.may_open(), "the request was served (call {i})");
        assert!(other.try_open(()).is_none());
        let mut got = 0;
        c.recv(|s, _| got = s.words[0]).unwrap();
        assert_eq!(got, i + 1);
    }
    // Every client port held: the client has nothing to open either.
    let held: Vec<_> = (0..64).map(|_| client.try_open(1).unwrap()).collect();
    assert!(!client.may_open());
    assert!(client.try_open(1).is_none());
    drop(held);
    assert!(client.may_open());

    // Restricted and exclusive servers see only their own range: a request on port 40 is for
    // the handle of ports 32..64, not for that of 0..32.
    let low = region.server().restrict(0, 32).unwrap();
    let mirror: Vec<_> = (0..2)
        .map(|_| std::sync::atomic::AtomicU32::new(0))
        .collect();
    let high = region
        .server()
        .restrict(32, 32)
        .unwrap()
        .exclusive()
        .unwrap_or_else(|_| panic!("no other handle holds a lock"))
        .with_outbox_mirror(&mirror)
        .unwrap();
    let mut c = client.try_open(9).unwrap();
    while c.index() != 40 {
        drop(c);
        client.set_cursor(40);
        c = client.try_open(9).unwrap();
    }
    c.send(|s, _| s.words[0] = 7).unwrap();
    assert!(!low.may_open() && low.try_open(()).is_none());
    assert!(high.may_open());
    let mut s = high.try_open(()).expect("the request on port 40");
    s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
    drop(s);
    assert!(!high.may_open() && high.try_open(()).is_none());
    c.recv(|_, _| {}).unwrap();
}

/// `may_open_within` looks at its window of lock words alone and moves on past a window that
/// has nothing, so a poll loop that opens only when it says so finds a request on any port of a
/// large region within one turn over the windows, and opens it with `try_open_within`.
fn may_open_within_walks_the_windows<M: ferry_rpc::Mailbox>() {
    const PORTS: u32 = 1024;
    const WINDOW: u32 = 8;
    let turns = PORTS / 32 / WINDOW;
    let region = HeapRegion::<M>::new(PORTS, 1).unwrap();
    let client = region.client();
    let server = region.server();
    for (i, target) in [900u32, 3, 255, 256, 1023, 511].into_iter().enumerate() {
        for _ in 0..turns {
            assert!(!server.may_open_within(WINDOW), "nothing to serve yet");
        }
        client.set_cursor(target);
        let mut c = client.try_open(9).unwrap();
        assert_eq!(c.index(), target);
        c.send(|s, _| s.words[0] = i as u64).unwrap();
        // Found within one turn over the windows, wherever the last look stopped; the windows
        // before it say no.
        let looks = (1..=turns)
            .find(|_| server.may_open_within(WINDOW))
            .unwrap_or_else(|| panic!("port {target} not seen in {turns} looks"));
        assert!(looks <= turns);
        let mut s = server
            .try_open_within((), WINDOW)
            .unwrap_or_else(|| panic!("port {target} not opened in the window that showed it"));
        assert_eq!(s.index(), target);
        s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
        drop(s);
        let mut got = 0;
        c.recv(|s, _| got = s.words[0]).unwrap();
        assert_eq!(got, i as u64 + 1);
    }
    // The whole range at once is `may_open`.
    assert!(!server.may_open_within(u32::MAX) && !server.may_open());

    // A fresh handle starts at port 0: a request on port 900 (word 28) is in its fourth window,
    // and the three before it say no.
    let fresh = region.server();
    client.set_cursor(900);
    let mut c = client.try_open(9).unwrap();
    c.send(|s, _| s.words[0] = 1).unwrap();
    let said: Vec<bool> = (0..4).map(|_| fresh.may_open_within(WINDOW)).collect();
    assert_eq!(said, [false, false, false, true]);
    assert!(fresh.may_open(), "the whole range has it");
    assert_eq!(fresh.try_open_within((), WINDOW).unwrap().index(), 900);

    // A cursor in the middle of a word (after port 40 was served, at 41): a request below it in
    // the same word (port 35) is not in the window the search looks at first, and the look says
    // so (no search that finds nothing); it is found, and opened, within a turn and a window.
    let mid = region.server();
    client.set_cursor(40);
    let mut c40 = client.try_open(9).unwrap();
    assert_eq!(c40.index(), 40);
    c40.send(|s, _| s.words[0] = 40).unwrap();
    mid.set_cursor(40);
    assert!(mid.may_open_within(WINDOW));
    let mut s40 = mid.try_open_within((), WINDOW).unwrap();
    assert_eq!(s40.index(), 40);
    s40.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
    drop(s40);
    c40.recv(|_, _| {}).unwrap();
    drop(c40);
    client.set_cursor(35);
    let mut c35 = client.try_open(9).unwrap();
    assert_eq!(c35.index(), 35);
    c35.send(|s, _| s.words[0] = 35).unwrap();
    let looks = (1..=turns + 1)
        .find(|_| {
            let said = mid.may_open_within(WINDOW);
            // Whenever the look says yes, the search finds it.
            assert!(!said || mid.try_open_within((), WINDOW).map(|p| p.index()) == Some(35));
            said
        })
        .expect("port 35 not seen in a turn and a window");
    assert_eq!(looks, turns + 1, "the first window starts above port 35");
}

#[test]
fn may_open_within_walks_the_windows_per_port_mailbox() {
    may_open_within_walks_the_windows::<PerPort>();
}

#[test]
fn may_open_within_walks_the_windows_packed_mailbox() {
    may_open_within_walks_the_windows::<Packed>();
}

#[test]
fn may_open_agrees_with_try_open_per_port_mailbox() {
    may_open_agrees_with_try_open::<PerPort>();
}

#[test]
fn may_open_agrees_with_try_open_packed_mailbox() {
    may_open_agrees_with_try_open::<Packed>();
}

#[test]
fn call_round_trips_per_port_mailbox() {
    call_in_one_thread::<PerPort>();
}

#[test]
fn call_round_trips_packed_mailbox() {
    call_in_one_thread::<Packed>();
}

#[test]
fn one_way_send_returns_the_port_to_the_client() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let client = region.client();
    let server = region.server();
    let mut c = client.try_open(1).unwrap();
    let first = c.index();
    c.send(|s, _| s.words[0] = 9).unwrap();
    c.close();
    // The port is the server's now: a client cannot take it, and opens another.
    let other = client.try_open(1).unwrap();
    assert_ne!(other.index(), first);
    drop(other);
    let mut s = server.try_open(()).unwrap();
    assert_eq!(s.index(), first);
    s.recv(|slot, _| assert_eq!(slot.words[0], 9)).unwrap();
    s.close(); // hands the packet back
    assert!(region.region().client_owns(first));
    assert!(server.try_open(()).is_none());
}

#[test]
fn all_ports_busy_means_none_then_a_port_frees() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let client = region.client();
    let held: Vec<_> = (0..32).map(|_| client.try_open(0).unwrap()).collect();
    let mut indices: Vec<u32> = held.iter().map(|p| p.index()).collect();
    indices.sort();
    assert_eq!(indices, (0..32).collect::<Vec<_>>(), "every port once");
    assert!(client.try_open(0).is_none());
    drop(held);
    assert!(client.try_open(0).is_some());
}

#[test]
fn a_search_within_a_window_looks_at_every_port_in_turn() {
    // Four lock words of 32 ports; a request on port 100 (the fourth word) and one on port 5.
    let region = HeapRegion::<PerPort>::new(128, 1).unwrap();
    let server = region.server();
    for p in [100, 5] {
        let client = region.client().with_cursor(p);
        let mut port = client.try_open(3).unwrap();
        assert_eq!(port.index(), p);
        port.send(|s, _| s.words[0] = p as u64).unwrap();
        port.close();
    }
    let serve = |words| {
        server.try_open_within((), words).map(|mut s| {
            s.recv(|_, _| {}).unwrap();
            s.index()
        })
    };
    // One word at a time: the first word's port; the rest of the first word, the second and
    // the third (nothing); the fourth's port; then nothing more, whichever window.
    assert_eq!(
        [serve(1), serve(1), serve(1), serve(1), serve(1)],
        [Some(5), None, None, None, Some(100)]
    );
    for words in [1, 2, 3, 4, 5, u32::MAX] {
        assert_eq!(serve(words), None);
    }
}

#[test]
fn server_scan_is_fair_to_high_ports() {
    // Keep low ports constantly busy with requests; a request on the highest port must still be
    // served within one pass of the server's scan.
    const PORTS: u32 = 128;
    let region = HeapRegion::<PerPort>::new(PORTS, 1).unwrap();
    let server = region.server();
    let clients: Vec<_> = (0..PORTS).map(|p| region.client().with_cursor(p)).collect();
    let request = |p: u32| {
        let mut port = clients[p as usize].try_open(3).unwrap();
        assert_eq!(port.index(), p);
        port.send(|s, _| s.words[0] = p as u64).unwrap();
    };
    for p in 0..8 {
        request(p);
    }
    request(PORTS - 1);
    let mut served_high_after = None;
    for n in 0..(4 * PORTS) {
        let mut s = server.try_open(()).expect("requests are always pending");
        let p = s.index();
        s.recv(|_, _| {}).unwrap();
        s.close();
        if p == PORTS - 1 {
            served_high_after = Some(n);
            break;
        }
        request(p); // the low port is busy again at once
    }
    let n = served_high_after.expect("the high port was starved");
    assert!(
        n <= 8,
        "high port served after {n} others, more than one pass"
    );
}

fn stream_round_trip(len: usize, limit: u64) -> (Result<(), Error>, Result<(), Error>, Vec<u8>) {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    std::thread::scope(|scope| {
        let server = scope.spawn(|| {
            let server = region
                .server_with(ferry_rpc::Single, Backoff::default())
                .unwrap();
            let mut port = server.open(()).unwrap();
            let mut sink: Vec<Vec<u8>> = Vec::new();
            let got = port.recv_n(limit, &mut sink);
            // Reply either way, with the outcome in the status word.
            port.set_status(got.is_ok() as u32);
            port.send(|s, _| s.words[0] = 0xAB).unwrap();
            (got, sink.pop().unwrap_or_default())
        });
        let client = region
            .client_with(ferry_rpc::Single, Backoff::default())
            .unwrap();
        let mut port = client.open(11).unwrap();
        let sent = port.send_n(|_| &data);
        let mut reply = 0;
        port.recv(|s, _| reply = s.words[0]).unwrap();
        assert_eq!(reply, 0xAB, "the reply follows the stream, accepted or not");
        let (received, bytes) = server.join().unwrap();
        assert_eq!(port.status() == 1, received.is_ok());
        drop(port);
        // The region is at rest and usable again.
        for p in 0..32 {
            assert!(region.region().client_owns(p));
        }
        (sent, received, bytes)
    })
}

#[test]
fn streams_of_every_boundary_size_arrive_whole() {
    for len in [0, 1, 55, 56, 57, 119, 120, 121, 1000, 64 * 1024 + 5] {
        let (sent, received, bytes) = stream_round_trip(len, u64::MAX);
        assert_eq!(sent, Ok(()), "len {len}");
        assert_eq!(received, Ok(()), "len {len}");
        let want: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(bytes, want, "len {len}");
    }
}

#[test]
fn a_stream_over_the_limit_is_refused_on_both_sides() {
    // Several packets: the sender learns of the refusal.
    let (sent, received, _) = stream_round_trip(1000, 100);
    assert_eq!(sent, Err(Error::Rejected));
    assert_eq!(
        received,
        Err(Error::TooLarge {
            lane: 0,
            len: 1000,
            limit: 100
        })
    );
    // One packet: nothing more to stop; the receiver refuses it, the reply says so.
    let (sent, received, _) = stream_round_trip(40, 10);
    assert_eq!(sent, Ok(()));
    assert_eq!(
        received,
        Err(Error::TooLarge {
            lane: 0,
            len: 40,
            limit: 10
        })
    );
}

#[test]
fn a_hostile_length_allocates_nothing() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let client = region.client();
    let server = region.server();
    let mut c = client.try_open(2).unwrap();
    // A forged first packet claiming an enormous stream.
    c.send(|s, _| s.words[0] = u64::MAX).unwrap();
    let mut s = server.try_open(()).unwrap();
    let mut sink: Vec<Vec<u8>> = Vec::new();
    let got = s.recv_n(1 << 20, &mut sink);
    assert_eq!(
        got,
        Err(Error::TooLarge {
            lane: 0,
            len: u64::MAX,
            limit: 1 << 20
        })
    );
    assert!(sink.is_empty());
    // The refusal was handed to the client, which owns the packet again.
    assert!(!s.owns_packet());
    drop(s);
    assert!(c.owns_packet() || region.region().client_owns(c.index()));
    c.recv(|_, _| {}).unwrap();
    assert_eq!(
        c.header(HeaderWord::Stream),
        ferry_rpc::stream::STREAM_REJECTED
    );
}

#[test]
fn a_sink_too_small_refuses_the_stream() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let client = region.client();
    let server = region.server();
    let mut c = client.try_open(2).unwrap();
    c.send_n(|_| b"hello, world").unwrap();
    let mut s = server.try_open(()).unwrap();
    let mut small = [0u8; 4];
    let mut sink = SliceSink::new(&mut small);
    assert_eq!(s.recv_n(1024, &mut sink), Err(Error::Sink { lane: 0 }));
    let mut big = [0u8; 64];
    drop(s);
    // The same request again, into a buffer that fits.
    drop(c);
    let mut c = client.try_open(2).unwrap();
    c.send_n(|_| b"hello, world").unwrap();
    let mut s = server.try_open(()).unwrap();
    let mut sink = SliceSink::new(&mut big);
    s.recv_n(1024, &mut sink).unwrap();
    assert_eq!(sink.received(), b"hello, world");
}

#[test]
fn a_dead_server_is_a_stalled_error_not_a_hang() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let client = region
        .client_with(ferry_rpc::Single, SpinLimit(10_000))
        .unwrap();
    let mut c = client.try_open(4).unwrap();
    let index = c.index();
    assert_eq!(
        c.send_and_recv(|s, _| s.words[0] = 1, |_, _| {}),
        Err(Error::Stalled)
    );
    drop(c);
    // Later the server answers; the port comes back to rest and is reused.
    let server = region.server();
    let mut s = server.try_open(()).unwrap();
    assert_eq!(s.index(), index);
    s.recv_and_send(|_, _| {}).unwrap();
    drop(s);
    assert!(region.region().client_owns(index));
    assert_eq!(client.try_open(4).unwrap().index(), index);
}

#[test]
fn a_simulated_warp_fills_every_slot_and_streams_per_lane() {
    const LANES: u32 = 4;
    let region = HeapRegion::<PerPort>::new(32, LANES).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let server = region
                .server_with(ferry_rpc::Single, Backoff::default())
                .unwrap();
            // A plain call: each lane's value plus its lane index.
            let mut port = server.open(()).unwrap();
            assert_eq!(port.lane_mask(), 0b1111);
            port.recv_and_send(|s, lane| s.words[0] += lane as u64)
                .unwrap();
            drop(port);
            // A stream of a different length per lane, echoed back reversed.
            let mut port = server.open(()).unwrap();
            let mut sink: Vec<Vec<u8>> = Vec::new();
            port.recv_n(1 << 16, &mut sink).unwrap();
            for v in &mut sink {
                v.reverse();
            }
            port.send_n(|lane| &sink[lane as usize]).unwrap();
        });
        let handles: Vec<_> = SimWarp::lanes(LANES)
            .into_iter()
            .map(|lanes| {
                let region = &region;
                scope.spawn(move || {
                    let lane = ferry_rpc::Lanes::lane_id(&lanes) as u64;
                    let client = region.client_with(lanes, Backoff::default()).unwrap();
                    let mut port = client.open(8).unwrap();
                    let mut got = 0;
                    port.send_and_recv(|s, _| s.words[0] = 100 * lane, |s, _| got = s.words[0])
                        .unwrap();
                    assert_eq!(got, 101 * lane);
                    drop(port);
                    let mine: Vec<u8> = (0..(lane * 100 + 3)).map(|i| i as u8).collect();
                    let mut port = client.open(9).unwrap();
                    port.send_n(|_| &mine).unwrap();
                    let mut back = vec![0u8; 1000];
                    let mut sink = SliceSink::new(&mut back);
                    port.recv_n(1000, &mut sink).unwrap();
                    let mut want = mine.clone();
                    want.reverse();
                    assert_eq!(sink.received(), &want[..]);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    let _ = Duration::ZERO;
}

#[test]
fn a_kept_port_is_reused_without_a_search_and_released_with_its_handle() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let server = region.server();
    let client = region.client().keep_port(true).with_cursor(5);
    let call = |value: u64| {
        let mut c = client.try_open(1).expect("a port");
        let index = c.index();
        c.send(|s, _| s.words[0] = value).unwrap();
        let mut s = server.try_open(()).unwrap();
        s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
        drop(s);
        let mut got = 0;
        c.recv(|s, _| got = s.words[0]).unwrap();
        assert_eq!(got, value + 1);
        index
    };
    let first = call(1);
    // Closed, but still locked for this handle: another handle cannot take it.
    assert_ne!(
        region.client_locks()[0].load(std::sync::atomic::Ordering::Relaxed) & (1 << first),
        0
    );
    let other = region.client().with_cursor(first);
    let p = other.try_open(1).unwrap();
    assert_ne!(p.index(), first);
    drop(p);
    assert_eq!(call(2), first, "the kept port is reused");
    // A one-way send leaves the packet with the server: the next open must not reuse it before
    // the server answers, and must not hang.
    let mut c = client.try_open(1).unwrap();
    assert_eq!(c.index(), first);
    c.send(|s, _| s.words[0] = 7).unwrap();
    drop(c);
    let next = client.try_open(1).expect("another port");
    assert_ne!(next.index(), first);
    drop(next);
    let mut s = server.try_open(()).unwrap();
    assert_eq!(s.index(), first);
    s.recv(|_, _| {}).unwrap();
    drop(s);
    drop(client);
    assert_eq!(
        region.client_locks()[0].load(std::sync::atomic::Ordering::Relaxed),
        0,
        "all released"
    );
    for p in 0..32 {
        assert!(region.region().client_owns(p));
    }
}

/// A call made on a stand-in for the handle (`Process::with_stand_in`, as a GPU's shared calls
/// are) leaves the handle as the call on the handle itself would: its kept port, its cursor; the
/// stand-in releases nothing.
#[test]
fn a_stand_in_gives_its_handle_the_kept_port_and_the_cursor() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let server = region.server();
    let client = region.client().keep_port(true).with_cursor(5);
    let call = |value: u64| {
        client.with_stand_in(|stand_in| {
            let mut c = stand_in.try_open(1).expect("a port");
            let index = c.index();
            c.send(|s, _| s.words[0] = value).unwrap();
            let mut s = server.try_open(()).unwrap();
            s.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
            drop(s);
            let mut got = 0;
            c.recv(|s, _| got = s.words[0]).unwrap();
            assert_eq!(got, value + 1);
            index
        })
    };
    let first = call(1);
    assert_eq!(first, 5, "the cursor's port");
    // The stand-in is gone; the port is still locked, kept for the handle.
    assert_ne!(
        region.client_locks()[0].load(std::sync::atomic::Ordering::Relaxed) & (1 << first),
        0
    );
    assert_eq!(client.take_kept(), Some(first));
    // Given back by `take_kept`: the lock is still held (the caller's now); the next call
    // searches from the cursor, which moved past the port.
    region.client_locks()[0].fetch_and(!(1 << first), std::sync::atomic::Ordering::Relaxed);
    assert_eq!(call(2), first, "the cursor stayed on the port");
    drop(client);
    assert_eq!(
        region.client_locks()[0].load(std::sync::atomic::Ordering::Relaxed),
        0,
        "released with the handle, once"
    );
}

#[test]
fn a_group_keeps_its_port_only_if_lane_0_is_in_it() {
    let region = HeapRegion::<PerPort>::new(32, 2).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let server = region
                .server_with(ferry_rpc::Single, Backoff::default())
                .unwrap();
            for lane in [0, 0, 1] {
                let mut port = server.open(()).unwrap();
                assert_eq!(port.lane_mask(), 1 << lane, "lane {lane} called alone");
                port.recv_and_send(|slot, _| slot.words[0] += 1).unwrap();
            }
        });
        // Lane 0 of a two-lane warp calls alone twice, inside a branch lane 1 does not take,
        // then lane 1 alone.
        let ports: Vec<[u32; 3]> = SimWarp::run(2, |lanes| {
            let client = region
                .client_with(lanes, Backoff::default())
                .unwrap()
                .keep_port(true);
            let lanes = client.lanes();
            let mut ports = [u32::MAX; 3];
            for (i, lane) in [0, 0, 1].into_iter().enumerate() {
                lanes.when(ferry_rpc::Lanes::lane_id(lanes) == lane, || {
                    let mut c = client.open(1).unwrap();
                    ports[i] = c.index();
                    c.send_and_recv(|s, _| s.words[0] = 1, |s, _| assert_eq!(s.words[0], 2))
                        .unwrap();
                });
                // The calls in this order: the lanes meet after each.
                ferry_rpc::Lanes::sync(lanes, 0b11);
            }
            if ferry_rpc::Lanes::lane_id(lanes) == 1 {
                // A group lane 0 is not in keeps nothing: lanes calling apart each hold their
                // own copy of the handle, and a divergent warp must not hold a port per group.
                assert_eq!(client.take_kept(), None);
            }
            ports
        });
        // Lane 0 kept its port (its second call took it back), so lane 1 found another.
        assert_eq!(ports[0][0], ports[0][1]);
        assert_ne!(ports[1][2], ports[0][0], "{ports:?}");
    });
    // Every kept port was released with its handle.
    assert_eq!(
        region.client_locks()[0].load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[test]
fn an_adopted_port_is_opened_without_a_search_and_taken_back_locked() {
    use std::sync::atomic::Ordering::Relaxed;
    let region = HeapRegion::<Packed>::new(64, 1).unwrap();
    let server = region.server();
    let locks = region.client_locks();
    // A transport's own claim: port 37's bit set on this handle's behalf.
    locks[1].fetch_or(1 << 5, Relaxed);
    // SAFETY: bit 37 is set for this handle alone and no other client handle exists.
    let client = unsafe { region.client().with_cursor(3).adopt_port(37) };
    for value in 0..3u64 {
        let mut c = client.try_open(9).unwrap();
        assert_eq!(c.index(), 37, "the adopted port, not the cursor's");
        c.send(|s, _| s.words[0] = value).unwrap();
        let mut s = server.try_open(()).unwrap();
        s.recv_and_send(|slot, _| slot.words[0] *= 10).unwrap();
        drop(s);
        c.recv(|s, _| assert_eq!(s.words[0], value * 10)).unwrap();
    }
    assert_eq!(locks[0].load(Relaxed), 0, "no other port was locked");
    assert_eq!(client.take_kept(), Some(37));
    drop(client);
    assert_eq!(
        locks[1].load(Relaxed),
        1 << 5,
        "still locked for the transport"
    );
    assert!(region.region().client_owns(37));
}

/// Announce words: refused at the wrong length; a handle without them arms nothing and waits for
/// nothing; each arming asks for a new value, never 0, counted per port and lane.
#[test]
fn announce_words_are_checked_and_armed_values_never_repeat() {
    use ferry_rpc::sync::AtomicU32;
    let region = ferry_rpc::HeapRegion::<ferry_rpc::PerPort>::new(32, 1).unwrap();
    for wrong in [0usize, 32, 63, 65] {
        let words: Vec<AtomicU32> = (0..wrong).map(|_| AtomicU32::new(0)).collect();
        assert!(
            region.client().with_announce_words(&words).is_err(),
            "{wrong} words for 32 ports of one lane"
        );
    }
    let bare = region.client();
    assert!(!bare.announces());
    {
        let port = bare.open(7).unwrap();
        assert_eq!(port.arm_announce(), None);
        assert_eq!(port.await_announced(5), Ok(()));
    }
    let words: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    // Counts about to wrap: the next value skips 0.
    for count in words.iter().skip(1).step_by(2) {
        count.store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
    }
    let client = region.client().with_announce_words(&words).unwrap();
    assert!(client.announces());
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        let port = client.open(7).unwrap();
        let (address, value) = port.arm_announce().unwrap();
        let index = (address - words.as_ptr() as u64) / 4;
        assert_eq!(
            index,
            2 * port.index() as u64,
            "the lane's word on its port"
        );
        assert_ne!(value, 0);
        assert!(seen.insert((index, value)), "value {value} asked twice");
        // The announce, as the service would write it: the wait ends at once.
        words[index as usize].store(value, std::sync::atomic::Ordering::Release);
        assert_eq!(port.await_announced(value), Ok(()));
    }
}
