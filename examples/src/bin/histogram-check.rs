//! The host side of `examples/histogram`'s runs on a GPU machine: makes an input of a given size
//! (the same bytes for the same size, every time) and checks a histogram the program wrote
//! against a count made here.
//!
//! ```text
//! histogram-check make FILE SIZE       # SIZE in bytes, or with K, M or G
//! histogram-check check INPUT OUTPUT   # exit 0 if OUTPUT is INPUT's histogram
//! ```

use std::io::Write;
use std::process::ExitCode;

/// Bytes of every value, unevenly spread (so a slice read twice or not at all changes the
/// counts), from a fixed seed.
fn make(path: &str, size: u64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut block = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for b in block.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Low values more often than high ones.
            *b = ((x & 0xff) as u8).min((x >> 8) as u8);
        }
        let n = left.min(block.len() as u64) as usize;
        out.write_all(&block[..n])?;
        left -= n as u64;
    }
    out.flush()
}

fn check(input: &str, output: &str) -> Result<String, String> {
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let mut counts = [0u64; 256];
    for &b in &bytes {
        counts[b as usize] += 1;
    }
    let want: String = counts
        .iter()
        .enumerate()
        .map(|(v, n)| format!("{v} {n}\n"))
        .collect();
    let got = std::fs::read_to_string(output).map_err(|e| format!("{output}: {e}"))?;
    if got == want {
        return Ok(format!("right: {} bytes", bytes.len()));
    }
    let total: u64 = got
        .lines()
        .filter_map(|l| l.split_once(' ')?.1.parse::<u64>().ok())
        .sum();
    Err(format!(
        "WRONG: {} bytes counted of {} ({} lines)",
        total,
        bytes.len(),
        got.lines().count()
    ))
}

fn size(s: &str) -> Option<u64> {
    let (n, shift) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 10),
        b'M' | b'm' => (&s[..s.len() - 1], 20),
        b'G' | b'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    n.parse::<u64>().ok()?.checked_mul(1 << shift)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args[1..] {
        ["make", path, s] => match size(s) {
            Some(n) => make(path, n)
                .map(|()| format!("{path}: {n} bytes"))
                .map_err(|e| format!("{path}: {e}")),
            None => Err(format!("`{s}` is not a size")),
        },
        ["check", input, output] => check(input, output),
        _ => Err("usage: histogram-check make FILE SIZE | check INPUT OUTPUT".into()),
    };
    match result {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(line) => {
            eprintln!("histogram-check: {line}");
            ExitCode::FAILURE
        }
    }
}
