//! GPU programs through the loader library, on a real device: hello (every thread prints its
//! line) and an exit code set by an `exit` call.
//!
//! Needs a CUDA driver with a device and the programs built by `scripts/build-ptx`: the folder
//! `FERRY_GPU_PTX` names, else `gpu-out/ptx` of the workspace (or of the current directory).
//! Without them each test prints one line `skipped: <reason>` and passes (CI has no GPU).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use transport_gpu::cuda::Cuda;
use transport_gpu::{run_program, Error, ExitPolicy, PortCount, RunConfig};

/// The driver and the folder holding `program.ptx`, or why the test cannot run here.
fn setup(program: &str) -> Result<(Cuda, Vec<u8>), String> {
    let dirs: Vec<PathBuf> = match std::env::var_os("FERRY_GPU_PTX") {
        Some(d) => vec![d.into()],
        None => vec![
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../gpu-out/ptx"),
            PathBuf::from("gpu-out/ptx"),
        ],
    };
    let Some(path) = dirs
        .iter()
        .map(|d| d.join(format!("{program}.ptx")))
        .find(|p| p.is_file())
    else {
        return Err(format!(
            "no {program}.ptx in {dirs:?} (build it with scripts/build-ptx or set FERRY_GPU_PTX)"
        ));
    };
    let ptx = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    match Cuda::new(0) {
        Ok(cuda) => Ok((cuda, ptx)),
        Err(Error::NoDriver(why)) => Err(format!("no CUDA driver or device: {why}")),
        Err(e) => Err(format!("CUDA did not start: {e}")),
    }
}

fn config() -> RunConfig {
    RunConfig {
        blocks: 4,
        threads: 64,
        ports: PortCount::default(),
        server_threads: 2,
        max_registers: None,
        timeout: Duration::from_secs(60),
        exit: ExitPolicy::Record,
    }
}

#[test]
fn hello_prints_one_line_per_thread_and_exits_0() {
    let (cuda, ptx) = match setup("hello") {
        Ok(s) => s,
        Err(why) => return println!("skipped: {why}"),
    };
    let config = config();
    let mut out = Vec::new();
    let report = run_program(&cuda, &ptx, &["hello".into()], &config, &mut out).unwrap();
    assert_eq!(report.code, 0, "hello's exit code");
    let text = String::from_utf8(out).expect("hello prints UTF-8");
    let threads = config.blocks * config.threads;
    let lines: HashSet<&str> = text.lines().collect();
    assert_eq!(
        text.lines().count(),
        threads as usize,
        "one line per thread"
    );
    for t in 0..threads {
        let line = format!(
            "hello from thread {t} (block {}, thread {})",
            t / config.threads,
            t % config.threads
        );
        assert!(lines.contains(line.as_str()), "missing: {line}");
    }
    // One print call per warp.
    assert_eq!(report.calls[2], (threads / 32) as u64);
}

#[test]
fn an_exit_call_sets_the_exit_code() {
    let (cuda, ptx) = match setup("exit") {
        Ok(s) => s,
        Err(why) => return println!("skipped: {why}"),
    };
    for code in [0, 7, 42] {
        let args = ["exit".to_string(), code.to_string()];
        let report = run_program(&cuda, &ptx, &args, &config(), std::io::sink()).unwrap();
        assert_eq!(report.code, code, "exit code");
        assert!(report.calls[3] > 0, "the exit call was served");
        assert_eq!(report.calls[0], 0, "no unknown calls");
    }
}
