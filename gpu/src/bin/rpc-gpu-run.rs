//! `rpc-gpu-run`: runs a GPU program and serves its calls to the host.
//!
//! ```text
//! rpc-gpu-run [OPTIONS] PROGRAM.ptx [ARGS...]
//!   --blocks N           blocks in the grid (default 1)
//!   --threads N          threads per block (default 32)
//!   --ports N            region ports (default: one per warp of the launch, at most one per
//!                        resident warp of the device, and one more; rounded up to 32)
//!   --bulk SIZE          bytes of each lane's share of a port's bulk area, a multiple of 64
//!                        (K, M suffixes): a lane's file read or write moves up to this much per
//!                        call (default: 512M of mapped host memory shared out, 512 to 4K; 0: none)
//!   --server-threads N   host threads serving calls (default: half the CPUs, 1 to 8)
//!   --max-registers N    register cap for the JIT (32 lets 2048 threads share an SM)
//!   --timeout SECS       give up on the kernel after this long (default 600)
//!   --heap SIZE          device memory reserved for malloc before launch, in bytes or with a
//!                        K, M or G suffix (default 64M; 0: none)
//!   --stack SIZE         stack per GPU thread, as --heap (default 16K; 0: the driver's, 1K)
//!   --max-files N        file handles the program may hold at once (default 1048576; read-only
//!                        opens of one file share a few descriptors of the loader (one per server thread), each handle
//!                        with its own position)
//!   --max-sleep-ns N     longest pause of a waiting warp between two polls of host memory
//!                        (default 0: the device library's, 4096)
//!   --no-word-lines      every call through the packets (by default a lone lane's small
//!                        call crosses on a word line, `ferry_rpc::words`)
//!   --word-lines-for-warps
//!                        whole warps' small calls on word lines too (faster with many
//!                        server threads: BENCHMARKS.md)
//!   --stats              print calls served, the kernel's time and the loader's start-up on
//!                        standard error
//! ```
//!
//! The program is PTX (compiled by the driver the first time it is loaded, then taken from the
//! driver's cache), or a cubin built ahead of time from it (`ptxas -arch=sm_90 PROGRAM.ptx -o
//! PROGRAM.cubin`, where the CUDA toolkit is installed), which loads without compiling. The
//! driver compiles PTX one function at a time on all of the machine's CPUs and links the
//! result (`ferry_gpu::cuda::Jit`); `FERRY_JIT_THREADS=N` sets how many CPUs, and
//! `FERRY_JIT=whole` compiles the program as one whole instead, which takes several times as
//! long (BENCHMARKS-history.md has both). Its entry
//! kernel is `_start(argc: u32, argv: *const *const u8, ret: *mut i32)` (Rust programs get it
//! from `ferry_device::entry!`) and it holds the `FERRY_RPC` descriptor global. Every thread runs
//! `main`; the exit code is the first `exit` call's code, else the OR of every thread's return
//! value (`ferry_device::program`'s rule). An `exit` call records the code: the program ends when its threads do, and every call they made is
//! answered (every line printed) before the loader exits. Errors of the loader itself exit with
//! 125.
//!
//! The loader serves the C-library services (`ferry_libc::Libc`: a no-op, print, files, exit,
//! malloc from the reserved heap, clock; `system` stays off). Standard
//! output is line-buffered on a terminal and block-buffered otherwise (as C's stdio), flushed at
//! exit and at the end.
//!
//! Files: the program holds at most `--max-files` handles at once. Every thread may open the same
//! input read-only: those opens share a descriptor per server thread. Other opens (writable, or of distinct
//! files) take one descriptor each, of the loader's limit (`RLIMIT_NOFILE`), which the loader
//! raises to its hard limit at start. At the end the loader says how many opens either limit
//! refused, and what raises it.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use ferry_gpu::cuda::Cuda;
use ferry_gpu::host::{opcode, Libc};
use ferry_gpu::{run_program, ExitPolicy, PortCount, RunConfig};

const USAGE: &str =
    "usage: rpc-gpu-run [--blocks N] [--threads N] [--ports N] [--server-threads N] \
[--max-registers N] [--timeout SECS] [--heap SIZE] [--bulk SIZE] [--stack SIZE] [--max-files N] [--max-sleep-ns N] [--no-word-lines] [--word-lines-for-warps] [--stats] \
PROGRAM.ptx|PROGRAM.cubin [ARGS...]";

/// A size in bytes: digits with an optional K, M or G suffix (powers of 1024).
fn size(v: &str) -> Option<usize> {
    let (digits, shift) = match v.as_bytes().last()? {
        b'K' | b'k' => (&v[..v.len() - 1], 10),
        b'M' | b'm' => (&v[..v.len() - 1], 20),
        b'G' | b'g' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    let n: usize = digits.parse().ok()?;
    n.checked_mul(1 << shift)
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("rpc-gpu-run: {message}");
    ExitCode::from(125)
}

fn main() -> ExitCode {
    // Opens of distinct or writable files take a descriptor each: all the system lets this
    // process have.
    let descriptors = ferry_gpu::host::raise_descriptor_limit();
    // Arguments reach the program as text: one that is not UTF-8 is refused here, by name.
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(args) => args,
        Err(a) => {
            return fail(format_args!(
                "argument {a:?} is not UTF-8: a program gets its arguments as text"
            ))
        }
    };
    let mut args = args.into_iter();
    let mut config = RunConfig {
        // The first exit call's code is kept; the run ends when the kernel does, after every
        // call is answered, so output in flight is not lost.
        exit: ExitPolicy::Record,
        ..RunConfig::default()
    };
    let mut stats = false;
    let program = loop {
        let Some(arg) = args.next() else {
            return fail(USAGE);
        };
        let mut number = |name: &str| -> Result<u32, String> {
            let v = args.next().ok_or(format!("{name} needs a value"))?;
            v.parse()
                .map_err(|_| format!("{name}: `{v}` is not a number"))
        };
        let parsed = match arg.as_str() {
            "--blocks" => number("--blocks").map(|n| config.blocks = n),
            "--threads" => number("--threads").map(|n| config.threads = n),
            "--ports" => number("--ports").map(|n| config.ports = PortCount::Exactly(n)),
            "--server-threads" => number("--server-threads").map(|n| config.server_threads = n),
            "--max-registers" => number("--max-registers").map(|n| config.max_registers = Some(n)),
            "--timeout" => {
                number("--timeout").map(|n| config.timeout = Duration::from_secs(n.into()))
            }
            "--heap" => match args.next() {
                Some(v) => size(&v)
                    .map(|n| config.heap = n)
                    .ok_or(format!("--heap: `{v}` is not a size")),
                None => Err("--heap needs a value".into()),
            },
            "--bulk" => match args.next() {
                Some(v) => match size(&v) {
                    Some(n) if n % 64 == 0 && n <= u32::MAX as usize => {
                        config.bulk = Some(n as u32);
                        Ok(())
                    }
                    _ => Err(format!("--bulk: `{v}` is not a multiple of 64 bytes")),
                },
                None => Err("--bulk needs a value".into()),
            },
            "--stack" => match args.next() {
                Some(v) => size(&v)
                    .map(|n| config.stack = (n > 0).then_some(n))
                    .ok_or(format!("--stack: `{v}` is not a size")),
                None => Err("--stack needs a value".into()),
            },
            "--max-files" => number("--max-files").and_then(|n| {
                if n == 0 {
                    return Err("--max-files: at least 1".to_string());
                }
                config.max_files = n as usize;
                Ok(())
            }),
            "--max-sleep-ns" => number("--max-sleep-ns").map(|n| config.max_sleep_ns = n),
            "--no-word-lines" => {
                config.word_lines = false;
                Ok(())
            }
            "--word-lines-for-warps" => {
                config.words_for_warps = true;
                Ok(())
            }
            "--stats" => {
                stats = true;
                Ok(())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with("--") => Err(format!("unknown option {s}\n{USAGE}")),
            _ => break arg,
        };
        if let Err(e) = parsed {
            return fail(e);
        }
    };
    if config.words_for_warps && !config.word_lines {
        return fail("--word-lines-for-warps needs the word lines: drop --no-word-lines");
    }
    let ptx = match std::fs::read(&program) {
        Ok(p) => p,
        Err(e) => return fail(format_args!("cannot read {program}: {e}")),
    };
    let argv: Vec<String> = std::iter::once(program.clone()).chain(args).collect();
    let context_started = std::time::Instant::now();
    let cuda = match Cuda::new(0) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let context = context_started.elapsed();
    let out: Box<dyn Write + Send> = if std::io::stdout().is_terminal() {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::io::BufWriter::with_capacity(
            1 << 16,
            std::io::stdout(),
        ))
    };
    match run_program(&cuda, &ptx, &argv, &config, out) {
        Ok(report) => {
            let refused = (report.refused_opens, report.refused_descriptors);
            for line in refusals(refused, config.max_files, descriptors) {
                eprintln!("rpc-gpu-run: {line}");
            }
            if report.stats.panicked > 0 {
                eprintln!(
                    "rpc-gpu-run: {} calls' handlers panicked (each answered SERVER_ERROR; the \
                     panics are printed above)",
                    report.stats.panicked
                );
            }
            if stats {
                let count = |op| report.libc_calls[libc_index(op)];
                eprintln!(
                    "rpc-gpu-run: {} ({} SMs), {} ports, {} blocks x {} threads, kernel {:.3} s, \
                     calls served {} (no-op {}, print {}, exit {}, unknown {}) by {} server threads {:?}, exit code {}",
                    cuda.name, cuda.sms, report.ports, config.blocks, config.threads,
                    report.elapsed.as_secs_f64(), report.stats.calls(), count(opcode::NOOP),
                    count(opcode::PRINT), count(opcode::EXIT),
                    report.libc_calls[Libc::CALLS], config.server_threads,
                    report.stats.per_thread, report.code
                );
                let mut spent = report.stats.time_by_opcode.clone();
                spent.sort_by_key(|&(_, t)| std::cmp::Reverse(t));
                let spent: Vec<String> = spent
                    .iter()
                    .map(|&(op, t)| {
                        format!(
                            "{} {} in {:.1} ms",
                            call_name(op),
                            report.stats.count(op),
                            t.as_secs_f64() * 1e3
                        )
                    })
                    .collect();
                eprintln!(
                    "rpc-gpu-run: server threads' time in handlers (messages of up to 32 lanes): {}",
                    spent.join(", ")
                );
                eprintln!(
                    "rpc-gpu-run: start-up {:.3} s before the launch: driver and context {:.3} s, \
                     module {:.3} s (a PTX is compiled by the driver the first time; a cubin loads \
                     as it is), region, heap and staging {:.3} s",
                    (context + report.startup).as_secs_f64(),
                    context.as_secs_f64(),
                    report.module_load.as_secs_f64(),
                    (report.startup - report.module_load).as_secs_f64()
                );
            }
            ExitCode::from(report.code as u8)
        }
        Err(e) => {
            if let ferry_gpu::Error::Cuda {
                code: 700 | 719, ..
            } = e
            {
                // An illegal address is what a thread's stack overflow looks like.
                eprintln!(
                    "rpc-gpu-run: a thread that overflows its stack ends the kernel so: each had \
                     {} (--stack SIZE gives more)",
                    config
                        .stack
                        .map_or("the driver's 1K".to_string(), |s| format!("{s} bytes"))
                );
            }
            fail(e)
        }
    }
}

/// What the run's refused opens were refused by, one line a cause (none if none was refused):
/// `refused` counts those refused by the program's limit of `max_files` handles and by this
/// process's limit of descriptors (`limit`, the soft `RLIMIT_NOFILE` after it was raised).
fn refusals(refused: (u64, u64), max_files: usize, limit: Option<u64>) -> Vec<String> {
    let (opens, descriptors) = refused;
    let mut lines = Vec::new();
    if opens > 0 {
        lines.push(format!(
            "{opens} opens refused (too many open files): the program held its limit of \
             {max_files} file handles (--max-files N raises it)"
        ));
    }
    if descriptors > 0 {
        let why = match limit {
            Some(n) => format!(
                "this process held its limit of {n} descriptors (RLIMIT_NOFILE, raised to its \
                 hard limit at start: `ulimit -Hn`, set by the administrator, raises that), or \
                 the system's table of open files was full"
            ),
            None => "the system's table of open files was full".to_string(),
        };
        lines.push(format!(
            "{descriptors} opens refused (out of file descriptors): {why}. Read-only opens of \
             one file share a descriptor per server thread; every writable open, and each other file, takes one"
        ));
    }
    lines
}

/// The `Libc` call's name of `opcode`, as C names it.
fn call_name(opcode: u32) -> String {
    use ferry_libc::opcode::*;
    let names = [
        (NOOP, "noop"),
        (PRINT, "print"),
        (E_PRINT, "eprint"),
        (OPEN, "open"),
        (READ, "read"),
        (GETS, "gets"),
        (WRITE, "write"),
        (READ_AT, "read_at"),
        (WRITE_AT, "write_at"),
        (SIZE, "size"),
        (READ_TO_DEVICE, "read_to_device"),
        (WRITE_FROM_DEVICE, "write_from_device"),
        (SEEK, "seek"),
        (TELL, "tell"),
        (FLUSH, "flush"),
        (CLOSE, "close"),
        (REMOVE, "remove"),
        (RENAME, "rename"),
        (EXIT, "exit"),
        (ABORT, "abort"),
        (MALLOC, "malloc"),
        (FREE, "free"),
        (CLOCK, "clock"),
        (GET_ENV, "getenv"),
        (SYSTEM, "system"),
    ];
    names
        .iter()
        .find(|&&(o, _)| o == opcode)
        .map_or_else(|| format!("{opcode:#x}"), |&(_, n)| n.to_string())
}

/// The index of the call with `opcode` in the counts.
fn libc_index(opcode: u32) -> usize {
    use ferry_rpc::service::Service;
    <Libc as Service>::OPCODES
        .iter()
        .position(|&o| o == opcode)
        .unwrap_or(Libc::CALLS)
}

#[cfg(test)]
mod tests {
    use super::refusals;

    #[test]
    fn each_cause_of_refused_opens_gets_its_line_and_what_raises_its_limit() {
        assert!(refusals((0, 0), 256, Some(1024)).is_empty());
        let lines = refusals((7, 0), 256, Some(1024));
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("7 opens refused (too many open files)"));
        assert!(lines[0].contains("limit of 256 file handles (--max-files N raises it)"));
        let lines = refusals((0, 3), 256, Some(1024));
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("3 opens refused (out of file descriptors)"));
        assert!(lines[0].contains("limit of 1024 descriptors (RLIMIT_NOFILE"));
        let lines = refusals((1, 1), 256, None);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains("the system's table of open files was full"));
    }
}
