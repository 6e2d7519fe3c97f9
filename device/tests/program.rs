//! Whole programs on CPU threads (`sim::run_program`): the launch's shape, the arguments, output,
//! the exit code, files, and the errors a run reports.
#![cfg(feature = "sim")]

use ferry_device::host::{self, mode, Printer};
use ferry_device::program::{self, Args};
use ferry_device::sim::{run_program, MAX_PROGRAM_THREADS};

/// Every thread prints where it is; returns its thread index's lowest bit as a flag.
fn places(args: Args) -> i32 {
    let client = program::client();
    let out = Printer::new(&client);
    let _ = ferry_device::println!(
        &out,
        "{} {} {} {} {} {} {}",
        program::global_thread_id(),
        program::block_idx(),
        program::thread_idx(),
        program::block_dim(),
        program::grid_dim(),
        program::global_warp_id(),
        args.iter().collect::<Vec<_>>().join(",")
    );
    (program::thread_idx() & 1) as i32
}

#[test]
fn each_thread_has_its_place_in_the_launch_and_the_arguments() {
    let run = run_program(places, &["places", "a b", "ü"], 3, 40).unwrap();
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort_by_key(|l| l.split(' ').next().unwrap().parse::<u32>().unwrap());
    assert_eq!(lines.len(), 120);
    for (t, line) in lines.iter().enumerate() {
        let t = t as u32;
        let (block, thread) = (t / 40, t % 40);
        let warp = block * 2 + thread / 32;
        assert_eq!(
            *line,
            format!("{t} {block} {thread} 40 3 {warp} places,a b,ü"),
            "thread {t}"
        );
    }
    // The OR of every thread's return: the odd threads returned 1, thread 0 returned 0 (the code
    // is not thread 0's alone).
    assert_eq!(run.code, 1);
    assert!(run.stderr.is_empty());
}

static ORED: program::ExitOr = program::ExitOr::new();

/// Thread t fails with bit `1 << (t % 3)` if t is argument 1; every code ORed through `ExitOr`.
fn ored(args: Args) -> i32 {
    let client = program::client();
    let me = program::global_thread_id();
    let code = if Some(me) == args.get_u32(1) {
        1 << (me % 3)
    } else {
        0
    };
    ORED.finish(&client, code)
}

#[test]
fn exit_or_makes_every_threads_code_the_programs_and_starts_over_for_the_next_run() {
    // Thread 0 returns 0: without `ExitOr` the code would be 0.
    for (failing, code) in [(5, 4), (7, 2), (120, 0), (0, 1)] {
        let run = run_program(ored, &["ored", &failing.to_string()], 3, 40).unwrap();
        assert_eq!(run.code, code, "thread {failing} failing");
    }
}

fn exits(args: Args) -> i32 {
    let client = program::client();
    if program::global_thread_id() == 5 {
        let _ = host::exit(&client, args.get_u32(1).unwrap_or(99) as i32);
    }
    0
}

#[test]
fn an_exit_call_sets_the_code() {
    let run = run_program(exits, &["exits", "42"], 1, 8).unwrap();
    assert_eq!(run.code, 42);
}

/// Thread t writes its own file in DIR, reads it back at an offset and says whether it matched.
fn files(args: Args) -> i32 {
    let client = program::client();
    let dir = args.get_str(1).unwrap_or("/nonexistent");
    let me = program::global_thread_id();
    let mut path = String::new();
    use core::fmt::Write;
    let _ = write!(path, "{dir}/t{me}");
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 3 + me) as u8).collect();
    let Ok(f) = host::open(&client, &path, mode::from_c("w+").unwrap()) else {
        return 2;
    };
    let wrote = host::write(&client, f, &data) == Ok(data.len());
    let mut back = vec![0u8; 4000];
    let read = host::read_at(&client, f, 1000, &mut back) == Ok(4000) && back[..] == data[1000..];
    let sized = host::size(&client, f) == Ok(5000);
    let _ = host::close(&client, f);
    if wrote && read && sized {
        0
    } else {
        4
    }
}

#[test]
fn threads_use_files_on_this_machine() {
    let dir = std::env::temp_dir().join(format!("ferry-program-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = run_program(files, &["files", dir.to_str().unwrap()], 2, 32).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    for t in 0..64u32 {
        let bytes = std::fs::read(dir.join(format!("t{t}"))).unwrap();
        assert_eq!(bytes.len(), 5000);
        assert_eq!(bytes[7], (21 + t) as u8);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn panics(_: Args) -> i32 {
    if program::global_thread_id() == 3 {
        panic!("thread three gives up");
    }
    0
}

#[test]
fn a_thread_that_panics_is_an_error_naming_it() {
    let err = run_program(panics, &["panics"], 1, 4).unwrap_err();
    assert!(err.contains("thread 3: thread three gives up"), "{err}");
}

fn nothing(_: Args) -> i32 {
    0
}

#[test]
fn launches_of_no_thread_or_too_many_are_refused() {
    for (blocks, threads) in [
        (0, 32),
        (1, 0),
        (MAX_PROGRAM_THREADS, 2),
        (u32::MAX, u32::MAX),
    ] {
        let err = run_program(nothing, &["x"], blocks, threads).unwrap_err();
        assert!(err.contains("run_program runs 1 to"), "{err}");
    }
    let err = run_program(nothing, &["x\0y"], 1, 1).unwrap_err();
    assert!(err.contains("NUL"), "{err}");
}

#[test]
fn outside_a_run_a_thread_is_alone_and_has_no_host() {
    assert_eq!(program::global_thread_id(), 0);
    assert_eq!((program::block_dim(), program::grid_dim()), (1, 1));
    let calling = std::panic::catch_unwind(|| {
        let _ = program::client();
    });
    let payload = calling.unwrap_err();
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(text.contains("outside a GPU kernel"), "{text}");
}

/// Each thread mallocs a block, fills and checks it, frees it; thread 0 reads an environment
/// variable. Returns 1 if malloc failed, 2 if the block did not hold, 4 if getenv failed.
fn heap_and_environment(_: Args) -> i32 {
    let client = program::client();
    let me = program::global_thread_id();
    let mut code = 0;
    match host::malloc(&client, 4096) {
        Ok(p) => {
            // SAFETY: `malloc` returned 4096 bytes of the program's heap, this thread's alone
            // until it frees them.
            let block = unsafe { core::slice::from_raw_parts_mut(p, 4096) };
            block.fill(me as u8);
            if block.iter().any(|&b| b != me as u8) {
                code |= 2;
            }
            let _ = host::free(&client, p);
        }
        Err(_) => code |= 1,
    }
    if me == 0 {
        let mut buf = [0u8; 64];
        if host::getenv(&client, "FERRY_SIM_TEST_VALUE", &mut buf) != Ok("forty-two") {
            code |= 4;
        }
    }
    code
}

#[test]
fn a_program_on_cpu_threads_has_the_loaders_heap_and_environment() {
    std::env::set_var("FERRY_SIM_TEST_VALUE", "forty-two");
    let run = run_program(heap_and_environment, &["heap"], 4, 16).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
}
