//! The program on CPU threads against the real host services: its histogram against a count
//! made here, at several launch shapes and read sizes, and its failures in its exit code.

use ferry_device::sim::run_program;
use ferry_histogram::{main, OPEN_FAILED, USAGE};

/// `len` bytes of every value, unevenly spread.
fn data(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9u32;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Skewed toward low values, every value present.
            ((x % 256) as u8).min(((i % 256) as u8) | (x >> 24) as u8)
        })
        .collect()
}

fn histogram(bytes: &[u8]) -> String {
    let mut counts = [0u64; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    counts
        .iter()
        .enumerate()
        .map(|(v, n)| format!("{v} {n}\n"))
        .collect()
}

/// The program's statics (its grid-wide counts, its last-one-out) are the process's on the CPU:
/// one run at a time.
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ferry-histogram-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_histogram_matches_a_count_made_here_at_every_launch_shape() {
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let d = dir("shapes");
    let input = d.join("input.bin");
    let output = d.join("histogram.txt");
    // Not a multiple of any launch's thread count or of the read size.
    let bytes = data(1_000_003);
    std::fs::write(&input, &bytes).unwrap();
    let want = histogram(&bytes);
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    for (blocks, threads, chunk) in [
        (1, 1, "4096"),
        (1, 32, "4096"),
        (3, 40, "1000"),
        (8, 64, "64"),
    ] {
        std::env::set_var("HISTOGRAM_CHUNK", chunk);
        let run = run_program(main, &["histogram", i, o], blocks, threads).unwrap();
        assert_eq!(run.code, 0, "{blocks}x{threads}: {}", run.stderr);
        assert_eq!(
            std::fs::read_to_string(&output).unwrap(),
            want,
            "{blocks}x{threads}"
        );
        assert_eq!(
            run.stdout,
            format!("1000003 bytes counted, 256 distinct values, histogram in {o}\n")
        );
        std::fs::remove_file(&output).unwrap();
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_missing_input_fails_every_thread_and_the_exit_code_says_so() {
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let d = dir("missing");
    let output = d.join("histogram.txt");
    let missing = d.join("no-such-file");
    let run = run_program(
        main,
        &[
            "histogram",
            missing.to_str().unwrap(),
            output.to_str().unwrap(),
        ],
        2,
        16,
    )
    .unwrap();
    // Every thread failed to open, so the program cannot exit 0 (the counts written are zeros).
    assert_eq!(run.code, OPEN_FAILED);
    assert_eq!(run.stderr.lines().count(), 32, "{}", run.stderr);
    let run = run_program(main, &["histogram"], 1, 4).unwrap();
    assert_eq!(run.code, USAGE);
    std::fs::remove_dir_all(&d).unwrap();
}
