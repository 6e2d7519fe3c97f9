//! Fuzzing the header check with proptest: whatever the bytes and the file's size, `decode`
//! returns an error or a geometry whose every part lies inside the file, and attaching to a file
//! with such a header is an error or a working attachment, never a crash.

use proptest::prelude::*;
use transport_shm::header::{Geometry, HEADER_SIZE};
use transport_shm::{ClientConfig, ShmClient};

fn check(g: &Geometry, real_size: u64) {
    let l = g.layout();
    assert_eq!(g.file_size() as u64, real_size);
    assert_eq!(g.region_offset() % 64, 0);
    assert!(g.region_offset() >= HEADER_SIZE);
    assert!(g.region_offset() + l.size() <= g.owners_offset());
    assert_eq!(g.owners_offset() + 8 * l.ports() as usize, g.file_size());
}

fn valid() -> (Geometry, [u8; HEADER_SIZE]) {
    let g = Geometry::new(64, 2, 0x1234, std::process::id()).unwrap();
    (g, g.encode())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), size in any::<u64>()) {
        if let Ok(g) = Geometry::decode(&bytes, size, None) {
            check(&g, size);
        }
    }

    #[test]
    fn mutated_headers_are_rejected_or_unchanged(
        edits in proptest::collection::vec((0..HEADER_SIZE, any::<u8>()), 1..8),
        size_delta in -200i64..200,
    ) {
        let (good, mut h) = valid();
        for (at, byte) in edits {
            h[at] = byte;
        }
        let size = (good.file_size() as i64 + size_delta) as u64;
        match Geometry::decode(&h, size, Some(0x1234)) {
            Ok(g) => {
                check(&g, size);
                // Only the state word may change without notice (it is mutable by design).
                prop_assert_eq!(g, good);
                prop_assert_eq!(&h[..84], &good.encode()[..84]);
            }
            Err(e) => prop_assert!(!e.field.is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn attaching_to_fuzzed_files_is_safe(
        edits in proptest::collection::vec((0..HEADER_SIZE, any::<u8>()), 0..4),
        cut in 0usize..64,
    ) {
        let (good, mut h) = valid();
        for (at, byte) in edits {
            h[at] = byte;
        }
        let mut bytes = vec![0u8; good.file_size()];
        bytes[..HEADER_SIZE].copy_from_slice(&h);
        bytes.truncate(bytes.len() - cut * 8);
        let path = format!("/dev/shm/ferry-fuzz-{}", std::process::id());
        std::fs::write(&path, &bytes).unwrap();
        let attached = ShmClient::attach(&path, ClientConfig::default());
        std::fs::remove_file(&path).unwrap();
        if let Ok(c) = attached {
            // Only an intact header attaches (this process's pid is alive, so it looks served).
            prop_assert_eq!(*c.geometry(), good);
            prop_assert_eq!(cut, 0);
        }
    }
}
