//! Fuzzing the header check with proptest: whatever the bytes and the file's size, `decode`
//! returns an error or a geometry whose every part lies inside the file, and attaching to a file
//! with such a header is an error or a working attachment, never a crash.

use ferry_rpc::service::{fnv1a_64, FNV64_OFFSET, SERVICE_NAME_BYTES};
use ferry_shm::header::{Geometry, HEADER_SIZE, SERVICE_ENTRY};
use ferry_shm::{ClientConfig, ShmClient};
use proptest::prelude::*;

fn check(g: &Geometry, real_size: u64) {
    let l = g.layout();
    let ports = l.ports() as usize;
    assert_eq!(g.file_size() as u64, real_size);
    assert_eq!(g.region_offset() % 64, 0);
    assert!(g.region_offset() >= HEADER_SIZE);
    assert!(g.region_offset() + l.size() <= g.owners_offset());
    assert!(g.owners_offset() + 8 * ports <= g.inline_offset());
    assert!(g.inline_offset() <= g.inline_lines_offset());
    assert!(g.inline_lines_offset() + 64 * ports <= g.services_offset());
    assert_eq!(
        g.services_offset() + g.services() as usize * SERVICE_ENTRY,
        g.file_size()
    );
}

/// The services the valid file lists.
const SERVICES: [(&str, u64); 2] = [("fuzz.one", 0x1111), ("fuzz.two", 0x2222)];

/// The services table of [`SERVICES`], laid out as the header's documentation says: per entry
/// the name zero-padded to 48 bytes, the fingerprint, 8 zero bytes.
fn table() -> Vec<u8> {
    let mut out = vec![0u8; SERVICES.len() * SERVICE_ENTRY];
    for (entry, (name, fp)) in out.chunks_exact_mut(SERVICE_ENTRY).zip(SERVICES) {
        entry[..name.len()].copy_from_slice(name.as_bytes());
        entry[SERVICE_NAME_BYTES..SERVICE_NAME_BYTES + 8].copy_from_slice(&fp.to_le_bytes());
    }
    out
}

fn valid() -> (Geometry, [u8; HEADER_SIZE]) {
    let g = Geometry::new(64, 2, fnv1a_64(FNV64_OFFSET, &table()), std::process::id())
        .unwrap()
        .with_services(SERVICES.len() as u32);
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
        match Geometry::decode(&h, size, Some(good.fingerprint())) {
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
        // Edits in the header (below HEADER_SIZE) or in the services table (above).
        edits in proptest::collection::vec(
            (0..HEADER_SIZE + SERVICES.len() * SERVICE_ENTRY, any::<u8>()),
            0..4,
        ),
        cut in 0usize..64,
    ) {
        let (good, h) = valid();
        let mut bytes = vec![0u8; good.file_size()];
        bytes[..HEADER_SIZE].copy_from_slice(&h);
        bytes[good.services_offset()..].copy_from_slice(&table());
        let intact = bytes.clone();
        for (at, byte) in edits {
            let at = if at < HEADER_SIZE {
                at
            } else {
                good.services_offset() + at - HEADER_SIZE
            };
            bytes[at] = byte;
        }
        bytes.truncate(bytes.len() - cut * 8);
        let path = format!("/dev/shm/ferry-fuzz-{}", std::process::id());
        std::fs::write(&path, &bytes).unwrap();
        let attached = ShmClient::attach(&path, ClientConfig::default());
        std::fs::remove_file(&path).unwrap();
        if let Ok(c) = attached {
            // Only an intact header and table attach (this process's pid is alive, so it looks
            // served); the state word is the one part that may differ.
            prop_assert_eq!(*c.geometry(), good);
            prop_assert_eq!(cut, 0);
            let listed: Vec<(String, u64)> =
                SERVICES.iter().map(|&(n, f)| (n.to_string(), f)).collect();
            prop_assert_eq!(c.services(), &listed[..]);
            let mut but_state = bytes.clone();
            but_state[84..88].copy_from_slice(&intact[84..88]);
            prop_assert!(but_state == intact, "a changed file attached");
        }
    }
}
