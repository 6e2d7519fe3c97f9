//! Port ranges: a process restricted with `restrict` searches, locks and opens only its ports.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use ferry_rpc::{HeapRegion, LayoutError, PerPort, SpinLimit};

#[test]
fn ranges_are_checked() {
    let region = HeapRegion::<PerPort>::new(128, 1).unwrap();
    assert_eq!(region.server().port_range(), 0..128);
    assert_eq!(
        region.server().restrict(32, 64).unwrap().port_range(),
        32..96
    );
    assert_eq!(
        region.server().restrict(96, 32).unwrap().port_range(),
        96..128
    );
    for (first, count) in [
        (0, 0),
        (1, 32),
        (0, 33),
        (96, 64),
        (128, 32),
        (u32::MAX - 31, 32),
    ] {
        assert!(
            matches!(
                region.server().restrict(first, count),
                Err(LayoutError::Ports(_))
            ),
            "restrict({first}, {count}) was accepted"
        );
    }
}

/// Puts a request on every port of `region` (one client handle per port, each starting at it).
fn request_everywhere(region: &HeapRegion<PerPort>) {
    let ports = region.layout().ports();
    for p in 0..ports {
        let client = region.client().with_cursor(p);
        let mut port = client.try_open(7).expect("every port is free");
        assert_eq!(port.index(), p);
        port.send(|s, _| s.words[0] = p as u64).unwrap();
        // Closing after the send leaves the request pending on the server's side.
    }
}

#[test]
fn a_restricted_server_never_opens_a_port_outside_its_range() {
    let region = HeapRegion::<PerPort>::new(128, 1).unwrap();
    request_everywhere(&region);
    // The cursor starts outside the range: the search must start inside it.
    let server = region.server().with_cursor(5).restrict(32, 64).unwrap();
    let mut seen = HashSet::new();
    while let Some(mut port) = server.try_open(()) {
        assert!((32..96).contains(&port.index()), "opened {}", port.index());
        let mut got = 0;
        port.recv_and_send(|s, _| got = s.words[0]).unwrap();
        assert_eq!(got, port.index() as u64);
        assert!(seen.insert(port.index()), "served {} twice", port.index());
    }
    assert_eq!(seen.len(), 64, "every port of the range was served");
    // The rest are still pending, for an unrestricted server.
    let rest = region.server();
    let mut others = HashSet::new();
    while let Some(mut port) = rest.try_open(()) {
        port.recv_and_send(|_, _| {}).unwrap();
        others.insert(port.index());
    }
    let expected: HashSet<u32> = (0..32).chain(96..128).collect();
    assert_eq!(others, expected);
}

/// Sets its flag when dropped.
struct Stop<'a>(&'a AtomicU64);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(1, Ordering::Release);
    }
}

#[test]
fn restricted_servers_together_serve_every_port() {
    servers_together_serve_every_port(false);
}

#[test]
fn exclusive_servers_with_outbox_mirrors_together_serve_every_port() {
    servers_together_serve_every_port(true);
}

/// Two servers, half the ports each (holding their halves and scanning with a copy of their
/// outbox bits if `exclusive`), answer a call on every port, round after round.
fn servers_together_serve_every_port(exclusive: bool) {
    const PORTS: u32 = 256;
    const ROUNDS: u64 = 20;
    let region = HeapRegion::<PerPort>::new(PORTS, 1).unwrap();
    let served = [AtomicU64::new(0), AtomicU64::new(0)];
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        // Two servers, half the ports each.
        for (t, count) in served.iter().enumerate() {
            let region = &region;
            let done = &done;
            s.spawn(move || {
                let half = PORTS / 2;
                let server = region
                    .server_with(ferry_rpc::Single, SpinLimit(1 << 24))
                    .unwrap()
                    .restrict(t as u32 * half, half)
                    .unwrap();
                let mirror: Vec<ferry_rpc::sync::AtomicU32> = (0..PORTS / 32)
                    .map(|_| ferry_rpc::sync::AtomicU32::new(0))
                    .collect();
                let server = match exclusive {
                    true => server
                        .exclusive()
                        .unwrap_or_else(|_| panic!("a free range"))
                        .with_outbox_mirror(&mirror)
                        .unwrap(),
                    false => server,
                };
                let range = server.port_range();
                let mut idle = 0u64;
                while done.load(Ordering::Acquire) == 0 || idle < 4 {
                    match server.try_open(()) {
                        Some(mut port) => {
                            assert!(range.contains(&port.index()));
                            port.recv_and_send(|s, _| s.words[0] += 1).unwrap();
                            count.fetch_add(1, Ordering::Relaxed);
                            idle = 0;
                        }
                        None => {
                            idle += (done.load(Ordering::Acquire) != 0) as u64;
                            std::thread::yield_now();
                        }
                    }
                }
            });
        }
        // Clients call on every port, each round, waiting a bounded time for each reply.
        let region = &region;
        let done = &done;
        s.spawn(move || {
            // Ends the servers even if an assertion below fails, so the test fails, not hangs.
            let _stop = Stop(done);
            for round in 0..ROUNDS {
                for p in 0..PORTS {
                    let client = region
                        .client_with(ferry_rpc::Single, SpinLimit(1 << 26))
                        .unwrap()
                        .with_cursor(p);
                    let mut port = client.try_open(1).expect("a free port");
                    assert_eq!(port.index(), p);
                    let mut got = 0;
                    port.send_and_recv(|s, _| s.words[0] = round, |s, _| got = s.words[0])
                        .expect("a server answered");
                    assert_eq!(got, round + 1);
                }
            }
        });
    });
    let counts = served.map(|c| c.into_inner());
    assert_eq!(counts, [ROUNDS * PORTS as u64 / 2; 2]);
}

#[test]
fn an_exclusive_server_holds_its_range_and_serves_it_without_locking() {
    let region = HeapRegion::<PerPort>::new(96, 1).unwrap();
    let locks = region.server_locks();
    // Another handle holds port 40: taking 32..64 is refused and changes nothing.
    locks[1].fetch_or(1 << 8, Ordering::Relaxed);
    let refused = region.server().restrict(32, 32).unwrap().exclusive();
    let server = match refused {
        Ok(_) => panic!("a held port was taken"),
        Err(server) => server,
    };
    assert_eq!(locks[1].load(Ordering::Relaxed), 1 << 8, "bits given back");
    assert!(locks[0].load(Ordering::Relaxed) == 0 && locks[2].load(Ordering::Relaxed) == 0);
    drop(server);
    locks[1].fetch_and(0, Ordering::Relaxed);

    let take_32_to_64 = || {
        region
            .server()
            .restrict(32, 32)
            .unwrap()
            .exclusive()
            .unwrap_or_else(|_| panic!("a free range"))
    };
    let server = take_32_to_64();
    assert_eq!(locks[1].load(Ordering::Relaxed), u32::MAX);
    assert!(
        server.restrict(0, 32).is_err(),
        "an exclusive range cannot move"
    );
    let server = take_32_to_64();
    // Calls on ports of the range, one after another: served, replies right, the bits stay set.
    std::thread::scope(|s| {
        s.spawn(|| {
            let client = region.client().with_cursor(35);
            for i in 0..1000u64 {
                let mut port = client.open(1).unwrap();
                assert!((32..64).contains(&port.index()));
                let mut got = 0;
                port.send_and_recv(|s, _| s.words[0] = i, |s, _| got = s.words[0])
                    .unwrap();
                assert_eq!(got, i * 3);
            }
        });
        let mut served = 0;
        while served < 1000 {
            if let Some(mut port) = server.try_open(()) {
                port.recv_and_send(|s, _| s.words[0] *= 3).unwrap();
                served += 1;
            }
            assert_eq!(locks[1].load(Ordering::Relaxed), u32::MAX);
        }
    });
    drop(server);
    assert!(
        locks.iter().all(|w| w.load(Ordering::Relaxed) == 0),
        "released on drop"
    );
    let mirror: Vec<ferry_rpc::sync::AtomicU32> =
        (0..3).map(|_| ferry_rpc::sync::AtomicU32::new(0)).collect();
    assert!(
        region.server().with_outbox_mirror(&mirror).is_err(),
        "a mirror needs an exclusive handle"
    );
    let exclusive = region
        .server()
        .exclusive()
        .unwrap_or_else(|_| panic!("free"));
    assert!(
        exclusive.with_outbox_mirror(&mirror[..2]).is_err(),
        "a mirror of the wrong length"
    );
}
