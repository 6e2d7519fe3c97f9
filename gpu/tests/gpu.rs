//! GPU programs through the loader library, on a real device: hello (every thread prints its
//! line), an exit code set by an `exit` call, and files (print, files, malloc and exit through the
//! `Libc` services).
//!
//! Needs a CUDA driver with a device and the programs built by `scripts/build-ptx`: the folder
//! `FERRY_GPU_PTX` names, else `gpu-out/ptx` of the workspace (or of the current directory).
//! Without them each test prints one line `skipped: <reason>` and passes (CI has no GPU).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use ferry_gpu::cuda::Cuda;
use ferry_gpu::host::{opcode, Libc};
use ferry_gpu::{run_program, Error, ExitPolicy, PortCount, RunConfig};
use ferry_tests::Capture;

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
        heap: 1 << 20,
        stack: Some(8 << 10),
        max_files: 256,
        ..RunConfig::default()
    }
}

#[test]
fn hello_prints_one_line_per_thread_and_exits_0() {
    let (cuda, ptx) = match setup("hello") {
        Ok(s) => s,
        Err(why) => return println!("skipped: {why}"),
    };
    let config = config();
    let out = Capture::default();
    let report = run_program(&cuda, &ptx, &["hello".into()], &config, out.clone()).unwrap();
    assert_eq!(report.code, 0, "hello's exit code");
    let text = out.text();
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
    // One print message per warp.
    assert_eq!(report.stats.count(opcode::PRINT), (threads / 32) as u64);
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
        assert!(
            report.stats.count(opcode::EXIT) > 0,
            "the exit call was served"
        );
        assert_eq!(report.libc_calls[Libc::CALLS], 0, "no unknown calls");
    }
}

#[test]
fn files_writes_reads_back_mallocs_and_passes_its_code() {
    let (cuda, ptx) = match setup("files") {
        Ok(s) => s,
        Err(why) => return println!("skipped: {why}"),
    };
    let dir = std::env::temp_dir().join(format!("ferry-gpu-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = RunConfig {
        blocks: 2,
        ..config()
    };
    let threads = (config.blocks * config.threads) as usize;
    let dir_arg = dir.to_str().unwrap().to_string();
    for exit in [false, true] {
        let mut args = vec!["files".to_string(), dir_arg.clone(), "9".into()];
        if exit {
            args.push("exit".into());
        }
        let out = Capture::default();
        let report = run_program(&cuda, &ptx, &args, &config, out.clone()).unwrap();
        assert_eq!(report.code, 9, "exit code (exit call: {exit})");
        let text = out.text();
        // With `Record`, the exit call is answered and every line arrives.
        assert_eq!(text.lines().count(), 2 * threads, "{text}");
        let lines: HashSet<&str> = text.lines().collect();
        for t in 0..threads {
            let ok = format!("thread {t}: ok");
            assert!(lines.contains(ok.as_str()), "missing: {ok}\n{text}");
        }
        assert_eq!(report.libc_calls[Libc::CALLS], 0, "no unknown calls");
        let leftover: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(leftover.is_empty(), "files left behind: {leftover:?}");
    }
    // Without a heap every malloc fails, and the program says so in its code (64 | MALLOC |
    // DEVICE_COPY: the copies need a block).
    let args = vec!["files".to_string(), dir_arg, "9".into()];
    let no_heap = RunConfig { heap: 0, ..config };
    let report = run_program(&cuda, &ptx, &args, &no_heap, std::io::sink()).unwrap();
    assert_eq!(report.code, 64 | 16 | 128);
    std::fs::remove_dir_all(&dir).unwrap();
}
