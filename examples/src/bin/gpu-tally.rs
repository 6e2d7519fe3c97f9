//! A user's own service on the GPU, end to end: this host program loads the `tally` kernel
//! (`device/examples/tally.rs`, built to PTX by `scripts/build-ptx`), serves it the `Tally`
//! service (`ferry-example-tally`) with its own handler plus the C-library services
//! (`ferry_libc::Libc`: the kernel prints through them), runs it, and checks that every total
//! the kernel kept agrees with the host's.
//!
//! ```text
//! gpu-tally TALLY.ptx [--blocks N] [--threads N] [--rounds N]
//! ```
//!
//! Exit status: 0 when every check passed, or when there is no GPU (it says so on standard error
//! and checks nothing, so CI without a GPU can run it); 1 on any mismatch; 2 for a bad command
//! line or unreadable PTX; 3 when the driver or the run failed.

use std::process::ExitCode;

use ferry_example_tally::{expected_total, Tally, DEFAULT_ROUNDS};
use ferry_examples::tally::HostTally;
use ferry_gpu::cuda::Cuda;
use ferry_gpu::host::Libc;
use ferry_gpu::{Error, ExitPolicy, Program, RunConfig};

const USAGE: &str = "usage: gpu-tally TALLY.ptx [--blocks N] [--threads N] [--rounds N]";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut ptx_path, mut blocks, mut threads, mut rounds) = (None, 2u32, 64u32, DEFAULT_ROUNDS);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| {
            args.next()
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or(name.to_string())
        };
        let parsed = match arg.as_str() {
            "--blocks" => number("--blocks").map(|n| blocks = n),
            "--threads" => number("--threads").map(|n| threads = n),
            "--rounds" => number("--rounds").map(|n| rounds = n),
            s if s.starts_with("--") || ptx_path.is_some() => Err(s.to_string()),
            _ => {
                ptx_path = Some(arg.clone());
                Ok(())
            }
        };
        if let Err(bad) = parsed {
            eprintln!("gpu-tally: bad argument {bad}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let Some(ptx_path) = ptx_path else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let cuda = match Cuda::new(0) {
        Ok(c) => c,
        Err(Error::NoDriver(why)) => {
            eprintln!("gpu-tally: skipped, no GPU: {why}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gpu-tally: {e}");
            return ExitCode::from(3);
        }
    };
    let ptx = match std::fs::read(&ptx_path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("gpu-tally: cannot read {ptx_path}: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cuda, &ptx, blocks, threads, rounds) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("gpu-tally: {e}");
            ExitCode::from(3)
        }
    }
}

/// Runs the kernel serving `Tally` and `Libc`; returns whether every check passed.
fn run(cuda: &Cuda, ptx: &[u8], blocks: u32, threads: u32, rounds: u32) -> Result<bool, Error> {
    // The user-facing part: load, serve our service and the C library, run.
    let config = RunConfig {
        blocks,
        threads,
        exit: ExitPolicy::Record,
        ..RunConfig::default()
    };
    let program = Program::load(cuda, ptx, &config)?;
    let services =
        Tally::server(HostTally::default()).and(Libc::server(program.libc().for_program()));
    let report = program.run(&["tally".into(), rounds.to_string()], &services)?;

    // The checks: the kernel's verdict (its exit code), every key's total, the calls served.
    let host = services.0.handler();
    let gpu_threads = blocks * threads;
    let mut ok = true;
    if report.code != 0 {
        eprintln!(
            "gpu-tally: the kernel saw a mismatch (exit code {:#x})",
            report.code
        );
        ok = false;
    }
    let keys = host.keys();
    let mut bad_keys = 0;
    for key in 0..gpu_threads {
        let want = (rounds, expected_total(key, rounds));
        let got = keys.get(&key).copied().unwrap_or_default();
        if got != want && rounds > 0 {
            if bad_keys < 5 {
                eprintln!(
                    "gpu-tally: key {key}: host has {got:?} (adds, total), expected {want:?}"
                );
            }
            bad_keys += 1;
        }
    }
    let extra = keys.keys().filter(|&&k| k >= gpu_threads).count();
    if bad_keys > 0 || extra > 0 {
        eprintln!("gpu-tally: {bad_keys} keys wrong, {extra} keys no thread has");
        ok = false;
    }
    let sum: u64 = keys.values().map(|&(_, t)| t).sum();
    let want_sum: u64 = (0..gpu_threads).map(|k| expected_total(k, rounds)).sum();
    // One call per warp per round (its lanes travel together).
    let warps = blocks as u64 * threads.div_ceil(32) as u64;
    let adds = report.stats.count(Tally::Add { key: 0, n: 0 }.opcode());
    if adds != warps * rounds as u64 {
        eprintln!(
            "gpu-tally: {adds} add calls served, expected {}",
            warps * rounds as u64
        );
        ok = false;
    }
    eprintln!(
        "gpu-tally: {} ({} SMs): {blocks} blocks x {threads} threads, {rounds} rounds: \
         {} keys, grand total {sum} (expected {want_sum}), {} calls served ({adds} adds), \
         kernel {:.3} ms: {}",
        cuda.name,
        cuda.sms,
        keys.len(),
        report.stats.calls(),
        report.elapsed.as_secs_f64() * 1e3,
        if ok && sum == want_sum {
            "ok"
        } else {
            "MISMATCH"
        }
    );
    Ok(ok && sum == want_sum)
}
