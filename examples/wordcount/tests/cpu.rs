//! The program on CPU threads against the real host services: its totals against a count made
//! here (and `wc`'s, where the machine has it).

use std::process::Command;

use ferry_device::sim::run_program;

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Lines, words, bytes, as `wc` counts them.
fn count(text: &[u8]) -> (u64, u64, u64) {
    let lines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut words = 0;
    let mut prev = b' ';
    for &b in text {
        words += (!is_space(b) && is_space(prev)) as u64;
        prev = b;
    }
    (lines, words, text.len() as u64)
}

/// About 300 KB of text: words of 1 to 12 letters, runs of every kind of white space, long and
/// empty lines, and no newline at the end.
fn text() -> Vec<u8> {
    let mut t = Vec::new();
    let mut x = 12345u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    while t.len() < 300_000 {
        let r = next();
        for _ in 0..1 + r % 12 {
            t.push(b'a' + (next() % 26) as u8);
        }
        let gap: &[u8] = match next() % 20 {
            0 => b"\n",
            1 => b"\n\n\n",
            2 => b" \t ",
            3 => b"\r\n",
            4 => b"\x0b",
            5 => b"\x0c",
            _ => b" ",
        };
        t.extend_from_slice(gap);
    }
    t.extend_from_slice(b"last");
    t
}

#[test]
fn counts_match_a_count_made_here_and_wc() {
    let dir = std::env::temp_dir().join(format!("ferry-wordcount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input.txt");
    let summary = dir.join("summary.txt");
    let data = text();
    std::fs::write(&input, &data).unwrap();
    let want = count(&data);

    // 3 blocks of 40 threads: parts of uneven sizes, warps cut by blocks.
    let args = [
        "ferry_wordcount",
        input.to_str().unwrap(),
        summary.to_str().unwrap(),
    ];
    let run = run_program(ferry_wordcount::main, &args, 3, 40).unwrap();
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let got = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(got, format!("{} {} {}\n", want.0, want.1, want.2));
    // A line per thread, and the totals.
    let per_thread = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("thread "))
        .count();
    assert_eq!(per_thread, 120);
    assert!(run
        .stdout
        .contains(&format!("{} {} {} ", want.0, want.1, want.2)));
    if let Ok(out) = Command::new("wc").arg("-lwc").arg(&input).output() {
        let wc: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .take(3)
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(wc, [want.0, want.1, want.2], "wc disagrees");
    }

    // Missing arguments, a missing input: exit codes, nothing written.
    let run = run_program(ferry_wordcount::main, &["ferry_wordcount"], 1, 4).unwrap();
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("usage"));
    let missing = dir.join("missing.txt");
    let args = [
        "ferry_wordcount",
        missing.to_str().unwrap(),
        summary.to_str().unwrap(),
    ];
    let run = run_program(ferry_wordcount::main, &args, 1, 4).unwrap();
    assert_eq!(run.code, 4, "{}", run.stderr);
    // And the program runs again in the same process (its statics put back by the last thread).
    std::fs::write(&input, b"one two\nthree\n").unwrap();
    let args = [
        "ferry_wordcount",
        input.to_str().unwrap(),
        summary.to_str().unwrap(),
    ];
    let run = run_program(ferry_wordcount::main, &args, 2, 3).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), "2 3 14\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
