//! Clients whose locks are port words (`Process::with_port_words`, a GPU's clients): the API's
//! refusals, and the lock's behaviour seen from other handles.

use ferry_rpc::{ClientProcess, HeapRegion, LayoutError, PerPort, Single, Spin};

fn client(region: &HeapRegion<PerPort>) -> ClientProcess<'_> {
    ClientProcess::with_port_words(region.region(), region.client_memory(), Single, Spin).unwrap()
}

#[test]
fn port_words_of_the_wrong_length_are_refused() {
    let region = HeapRegion::<PerPort>::new(64, 1).unwrap();
    let words = region.client_memory();
    for wrong in [&words[..0], &words[..32], &words[..63]] {
        let refused = ClientProcess::with_port_words(region.region(), wrong, Single, Spin);
        assert!(matches!(refused, Err(LayoutError::Ports(64))));
    }
    assert!(client(&region).has_port_words());
    assert!(!region.client().has_port_words());
}

#[test]
fn a_port_held_on_its_word_is_held_for_every_handle_of_the_words() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    let (a, b) = (client(&region), client(&region));
    let held = a.try_hold(3).expect("port 3 is free");
    assert!(b.try_hold(3).is_none(), "a second handle takes a held port");
    assert!(b.try_hold(4).is_some(), "another port is free");
    drop(held);
    assert!(b.try_hold(3).is_some(), "the port is free once released");
}

#[test]
fn an_exclusive_client_on_port_words_holds_its_range_until_dropped() {
    let region = HeapRegion::<PerPort>::new(64, 1).unwrap();
    let other = client(&region);
    // Refused while another handle holds a port of the range, and nothing is left taken.
    let held = other.try_hold(40).unwrap();
    let refused = client(&region).restrict(32, 32).unwrap().exclusive();
    assert!(refused.is_err());
    assert!(
        other.try_hold(33).is_some(),
        "a refused exclusive handle gave its ports back"
    );
    drop(held);
    let sole = client(&region)
        .restrict(32, 32)
        .unwrap()
        .exclusive()
        .ok()
        .unwrap();
    assert!(
        other.try_hold(40).is_none(),
        "an exclusive handle holds its range"
    );
    assert!(other.try_hold(5).is_some(), "and nothing outside it");
    // It opens and closes its ports without taking or releasing their locks.
    for _ in 0..3 {
        drop(sole.try_open(1).expect("a port of its range"));
        assert!(other.try_hold(32).is_none());
    }
    drop(sole);
    assert!(
        other.try_hold(40).is_some(),
        "its range is free once it is dropped"
    );
}

#[test]
fn an_outbox_mirror_is_checked_against_the_region_on_port_words_too() {
    let region = HeapRegion::<PerPort>::new(64, 1).unwrap();
    let mirror: Vec<_> = (0..2).map(|_| ferry_rpc::sync::AtomicU32::new(0)).collect();
    // Not exclusive: refused, whatever the mirror.
    assert!(client(&region).with_outbox_mirror(&mirror).is_err());
    let sole = || client(&region).exclusive().ok().unwrap();
    // Exclusive: a mirror of the wrong length refused (not a panic), the right one taken.
    assert!(sole().with_outbox_mirror(&[]).is_err());
    assert!(sole().with_outbox_mirror(&mirror[..1]).is_err());
    assert!(sole().with_outbox_mirror(&mirror).is_ok());
}

/// A handle keeping its port (`keep_port`) with two ports open closes both: the second close
/// keeps the second port and releases the first, which `other` (a handle on the same locks) can
/// then take.
fn two_open_ports_of_a_keeping_handle(keeper: ClientProcess<'_>, other: ClientProcess<'_>) {
    let keeper = keeper.keep_port(true);
    let a = keeper.open(1).unwrap();
    let b = keeper.open(1).unwrap();
    let (pa, pb) = (a.index(), b.index());
    assert_ne!(pa, pb);
    drop(a);
    drop(b);
    assert!(
        other.try_hold(pa).is_some(),
        "the port kept first is released"
    );
    assert!(other.try_hold(pb).is_none(), "the last port closed is kept");
    drop(keeper);
    assert!(other.try_hold(pb).is_some(), "and released with the handle");
}

#[test]
fn a_keeping_handle_with_two_ports_open_leaves_neither_locked() {
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    two_open_ports_of_a_keeping_handle(client(&region), client(&region));
    // The same on the lock bitmap.
    let region = HeapRegion::<PerPort>::new(32, 1).unwrap();
    two_open_ports_of_a_keeping_handle(region.client(), region.client());
}

#[test]
fn a_word_open_takes_its_cursor_port_if_free_and_searches_if_not() {
    let region = HeapRegion::<PerPort>::with_words(64, 1).unwrap();
    let caller = client(&region).with_cursor(5);
    let other = client(&region);
    let port = caller.open_for_words(1).unwrap();
    assert_eq!(port.index(), 5, "the cursor port, free, is the one opened");
    assert!(other.try_hold(5).is_none(), "and it is locked while open");
    drop(port);
    let held = other.try_hold(5).expect("closed: free again");
    let port = caller.open_for_words(1).unwrap();
    let index = port.index();
    assert_ne!(index, 5, "a cursor port another handle holds is not opened");
    assert!(other.try_hold(index).is_none(), "the port found is locked");
    drop(port);
    drop(held);
    // The cursor moved to the port the search found: the next open takes that one.
    let port = caller.open_for_words(1).unwrap();
    assert_eq!(port.index(), index);
}
