//! The `ferry` command as a user runs it: bad arguments, a busy or missing server, signals.
//!
//! Every wait here is for an event, bounded by a deadline generous enough for a loaded machine
//! (`LIMIT`); no test passes or fails by how fast anything runs.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long anything here may take before the test gives up on it.
const LIMIT: Duration = Duration::from_secs(60);

fn ferry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
}

/// A name no other test (nor another run) uses. When dropped (also when its test fails), every
/// `/dev/shm` entry whose name contains it is removed, so a failed test leaves nothing behind.
struct Token(String);

fn token(test: &str) -> Token {
    Token(format!("cli-{test}-{}", std::process::id()))
}

impl std::ops::Deref for Token {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        for name in leftovers(&self.0, None) {
            let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
        }
    }
}

/// A file removed when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A `ferry` process in a process group of its own (with `demo`'s clients), killed with its
/// group when dropped if still running (so a failed test leaves none).
struct Running(Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // (Not waited for yet, so its pid is still its group's id.)
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0.id())])
                .status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn spawn(args: &[&str], stdout: Stdio) -> Running {
    Running(
        ferry()
            .args(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// The `/dev/shm` entries a run under names containing `token` may have left, and, given a pid,
/// those of that process (a temporary name, or a default name made of the pid).
fn leftovers(token: &str, pid: Option<u32>) -> Vec<String> {
    // The pid whole, not as the start of a longer number (`-2777` is in `-27779-3`).
    let of_pid = |n: &str| {
        pid.is_some_and(|pid| {
            n.contains(&format!(".{pid}."))
                || n.ends_with(&format!("-{pid}"))
                || n.contains(&format!("-{pid}-"))
                || n.contains(&format!("-{pid}."))
        })
    };
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(token) || (n.contains("ferry") && of_pid(n)))
        .collect()
}

fn shm(name: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/ferry-{name}"))
}

/// Reads a child's pipe to its end on a thread.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// Waits for `child` to exit, up to `LIMIT`; kills it and fails the test if it has not.
fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let until = Instant::now() + LIMIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    pid: u32,
    took: Duration,
}

fn run(args: &[&str]) -> Run {
    let start = Instant::now();
    let mut child = spawn(args, Stdio::piped());
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let status = wait(&mut child, &format!("ferry {args:?}"));
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        pid: child.id(),
        took: start.elapsed(),
    }
}

/// Checks that `ferry args` failed as a user should see it: a non-zero exit of its own (not a
/// panic's, not a signal's), one line on stderr mentioning `mention`, nothing left in /dev/shm.
fn assert_refused(args: &[&str], mention: &str, token: &str) -> Run {
    let r = run(args);
    let what = format!("ferry {args:?}: {:?}, stderr {:?}", r.status, r.stderr);
    assert!(!r.status.success(), "{what}");
    assert!(
        matches!(r.status.code(), Some(c) if c != 0 && c != 101),
        "{what}"
    );
    assert!(!r.stderr.contains("panicked"), "{what}");
    assert_eq!(r.stderr.lines().count(), 1, "{what}");
    assert!(r.stderr.starts_with("ferry: "), "{what}");
    assert!(
        r.stderr.contains(mention),
        "{what}: should mention {mention}"
    );
    assert_eq!(
        leftovers(token, Some(r.pid)),
        Vec::<String>::new(),
        "{what}"
    );
    r
}

/// Waits until `path` exists (the server is up), up to `LIMIT`; fails if `child` exits first.
fn wait_for_file(child: &mut Child, path: &Path) {
    let until = Instant::now() + LIMIT;
    while !path.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "ferry exited ({status:?}) before {} appeared",
                path.display()
            );
        }
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` (`TERM`, `INT`, `HUP`) to `child` with kill(1). (The child is not waited for
/// yet, so its pid is still its own.)
fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} failed");
}

/// Processes (other than this one) whose command line contains `token`.
fn processes_with(token: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n != me && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(token).then_some(cmdline)
        })
        .collect()
}

fn spawn_serve(name: &str, extra: &[&str]) -> Running {
    spawn(
        &[&["serve", "--name", name][..], extra].concat(),
        Stdio::null(),
    )
}

/// Stops a server started by `spawn_serve` with `sig`; checks it said nothing alarming, exited
/// with `code` and removed its file.
fn stop_serve(mut child: Running, name: &str, sig: &str, code: i32) {
    let err = drain(child.stderr.take());
    signal(&child, sig);
    let status = wait(&mut child, &format!("ferry serve after SIG{sig}"));
    let stderr = err.join().unwrap();
    assert_eq!(
        status.code(),
        Some(code),
        "SIG{sig}: {status:?}, stderr {stderr:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!shm(name).exists(), "SIG{sig} left {}", shm(name).display());
    assert_eq!(leftovers(name, Some(child.id())), Vec::<String>::new());
}

#[test]
fn zero_counts_are_refused() {
    let t = token("zero");
    let n = &*t;
    for (args, mention) in [
        (&["demo", "--name", n, "--clients", "0"][..], "--clients"),
        (&["demo", "--name", n, "--calls", "0"], "--calls"),
        (&["call", "--name", n, "--calls", "0"], "--calls"),
        (&["call", "--name", n, "--deadline", "0"], "--deadline"),
        (&["demo", "--name", n, "--workers", "0"], "--workers"),
        (&["bench", "--trips", "0"], "--trips"),
        (&["bench", "--runs", "0"], "--runs"),
        (&["bench", "--load-calls", "0"], "--load-calls"),
        (&["bench", "--clients", "1,0"], "--clients"),
        (&["bench", "--workers", "0"], "--workers"),
    ] {
        assert_refused(args, mention, n);
    }
}

#[test]
fn serve_refuses_zero_workers_instead_of_running_one() {
    let t = token("workers0");
    let r = assert_refused(
        &["serve", "--name", &t, "--seconds", "0", "--workers", "0"],
        "--workers",
        &t,
    );
    assert!(!r.stdout.contains("0 workers"), "{}", r.stdout);
}

#[test]
fn huge_counts_are_refused() {
    let t = token("huge");
    let n = &*t;
    let max = u64::MAX.to_string();
    let max = max.as_str();
    let cpus = std::thread::available_parallelism().unwrap().get();
    let over_cpus = (cpus + 1).to_string();
    let mut cases = vec![
        (
            vec!["serve", "--name", n, "--workers", "100000"],
            "--workers",
        ),
        (
            vec!["demo", "--name", n, "--workers", "100000"],
            "--workers",
        ),
        (vec!["bench", "--workers", "100000"], "--workers"),
        (
            vec!["serve", "--name", n, "--ports", "64", "--workers", "65"],
            "--workers",
        ),
        (
            vec!["demo", "--name", n, "--clients", "100000"],
            "--clients",
        ),
        (vec!["bench", "--clients", "1,100000"], "--clients"),
        (vec!["demo", "--name", n, "--calls", max], "--calls"),
        (vec!["call", "--name", n, "--calls", max], "--calls"),
        (vec!["call", "--name", n, "--size", max], "--size"),
        (vec!["call", "--name", n, "--id", max], "--id"),
        (vec!["serve", "--name", n, "--ports", "33"], "--ports"),
        (vec!["serve", "--name", n, "--ports", "0"], "--ports"),
    ];
    // More workers than CPUs (where that is still no more than the ports).
    if cpus < 64 {
        cases.push((
            vec!["serve", "--name", n, "--workers", &over_cpus],
            "--workers",
        ));
    }
    for (args, mention) in cases {
        assert_refused(&args, mention, n);
    }
}

#[test]
fn bad_names_are_refused() {
    let t = token("names");
    let missing_dir = format!("/nonexistent-{}/x", &*t);
    let relative = format!("{}-nodir/x", &*t);
    // The empty name must not become /dev/shm/ferry- (removed after the test if it does).
    let empty = (!shm("").exists()).then(|| RemoveOnDrop(shm("")));
    // Longer than a file name may be (255 bytes), as ferry-<name> and as a path's last part.
    let long = format!("{}-{}", &*t, "x".repeat(250));
    let long_path = format!("/tmp/{}", "x".repeat(256));
    for name in [
        "",
        "/",
        "/tmp/",
        "/tmp/..",
        &missing_dir,
        &relative,
        &long,
        &long_path,
    ] {
        for command in ["serve", "call", "demo"] {
            assert_refused(&[command, "--name", name], "--name", &t);
        }
    }
    if let Some(empty) = &empty {
        assert!(!empty.0.exists(), "--name \"\" made {}", empty.0.display());
    }
}

#[test]
fn unparsable_arguments_are_one_line() {
    let t = token("parse");
    assert_refused(
        &["serve", "--name", &t, "--workers", "abc"],
        "--workers",
        &t,
    );
    assert_refused(&["call", "--name", &t, "--calls=-1"], "--calls", &t);
    assert_refused(
        &["demo", "--name", &t, "--no-such-flag"],
        "--no-such-flag",
        &t,
    );
}

#[test]
fn serve_refuses_a_name_already_served() {
    let t = token("busy");
    let mut first = spawn_serve(&t, &[]);
    wait_for_file(&mut first, &shm(&t));
    let r = run(&["serve", "--name", &t]);
    let what = format!("{:?}, stderr {:?}", r.status, r.stderr);
    assert!(
        matches!(r.status.code(), Some(c) if c != 0 && c != 101),
        "{what}"
    );
    assert_eq!(r.stderr.lines().count(), 1, "{what}");
    assert!(r.stderr.contains("already served"), "{what}");
    assert!(r.stderr.contains("--name"), "{what}: should say what to do");
    // The first server is untouched: its file is there and it serves.
    assert!(shm(&t).exists());
    let call = run(&["call", "--name", &t, "--calls", "10"]);
    assert!(call.status.success(), "{:?} {}", call.status, call.stderr);
    stop_serve(first, &t, "TERM", 143);
}

#[test]
fn serve_never_replaces_a_file_it_did_not_make() {
    // A typo in --name that names a user's file: refused in one line naming it, the file kept.
    let t = token("users-file");
    let dir = std::env::temp_dir().join(&*t);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data.bin");
    std::fs::write(&data, b"precious\n").unwrap();
    let r = assert_refused(&["serve", "--name", data.to_str().unwrap()], "data.bin", &t);
    assert!(r.stderr.contains("refusing to replace"), "{}", r.stderr);
    assert_eq!(std::fs::read(&data).unwrap(), b"precious\n");
    // The same for demo, and for a file another program made under ferry's own name.
    let r = assert_refused(&["demo", "--name", data.to_str().unwrap()], "data.bin", &t);
    assert!(r.stderr.contains("refusing to replace"), "{}", r.stderr);
    assert_eq!(std::fs::read(&data).unwrap(), b"precious\n");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(shm(&t), b"not ferry's").unwrap();
    let r = run(&["serve", "--name", &t]);
    let what = format!("{:?}, stderr {:?}", r.status, r.stderr);
    assert!(
        matches!(r.status.code(), Some(c) if c != 0 && c != 101),
        "{what}"
    );
    assert_eq!(r.stderr.lines().count(), 1, "{what}");
    assert!(r.stderr.contains(&*shm(&t).to_string_lossy()), "{what}");
    assert_eq!(std::fs::read(shm(&t)).unwrap(), b"not ferry's");
}

#[test]
fn call_without_a_server_waits_out_its_deadline_then_says_so() {
    let t = token("noserver");
    let r = assert_refused(&["call", "--name", &t, "--deadline", "2"], "no server", &t);
    assert!(
        r.took >= Duration::from_secs(2),
        "gave up after {:?}",
        r.took
    );
    assert!(r.stderr.contains("waited 2 s"), "{}", r.stderr);
}

#[test]
fn call_waits_for_a_server_started_after_it() {
    let t = token("later");
    let mut call = spawn(
        &["call", "--name", &t, "--calls", "100", "--deadline", "120"],
        Stdio::null(),
    );
    let err = drain(call.stderr.take());
    // Let the call look for the file first (it passes the same if it starts looking later).
    std::thread::sleep(Duration::from_millis(500));
    let mut server = spawn_serve(&t, &[]);
    wait_for_file(&mut server, &shm(&t));
    let status = wait(&mut call, "ferry call");
    let stderr = err.join().unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    stop_serve(server, &t, "TERM", 143);
}

fn serve_stops_on(sig: &str, code: i32) {
    let t = token(&format!("serve-{sig}"));
    let mut child = spawn_serve(&t, &[]);
    wait_for_file(&mut child, &shm(&t));
    stop_serve(child, &t, sig, code);
}

#[test]
fn serve_removes_its_file_on_sigterm() {
    serve_stops_on("TERM", 143);
}

#[test]
fn serve_removes_its_file_on_sigint() {
    serve_stops_on("INT", 130);
}

#[test]
fn serve_removes_its_file_on_sighup() {
    serve_stops_on("HUP", 129);
}

/// `/dev/shm` entries and processes `ferry bench` (process `pid`) made: files named after its pid,
/// processes started with its pid as their parent's.
fn bench_leftovers(pid: u32) -> (Vec<String>, Vec<String>) {
    let suffix = format!("-{pid}");
    let files = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains("ferry") && n.contains(&suffix))
        .collect();
    let peers = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let environ = String::from_utf8_lossy(&environ).into_owned();
            environ
                .split('\0')
                .any(|v| v == format!("FERRY_BENCH_PARENT={pid}"))
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    (files, peers)
}

#[test]
fn bench_stopped_by_a_signal_leaves_no_file_and_no_process() {
    for (sig, code) in [("TERM", 143), ("INT", 130)] {
        let mut child = spawn(
            &["bench", "--trips", "20000000", "--runs", "3"],
            Stdio::null(),
        );
        let err = drain(child.stderr.take());
        let pid = child.id();
        // Wait until its first mapping and peer are there.
        let until = Instant::now() + LIMIT;
        loop {
            let (files, peers) = bench_leftovers(pid);
            if !files.is_empty() && !peers.is_empty() {
                break;
            }
            assert!(Instant::now() < until, "bench made no file or peer");
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(&child, sig);
        let status = wait(&mut child, &format!("ferry bench after SIG{sig}"));
        let stderr = err.join().unwrap();
        assert_eq!(status.code(), Some(code), "{status:?}, stderr {stderr:?}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        // Its peers are killed by the kernel as it exits: give them a moment to go.
        let until = Instant::now() + LIMIT;
        loop {
            let (files, peers) = bench_leftovers(pid);
            assert_eq!(files, Vec::<String>::new(), "SIG{sig} left files");
            if peers.is_empty() {
                break;
            }
            assert!(Instant::now() < until, "SIG{sig} left peers {peers:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn serve_seconds_too_large_for_the_clock_means_forever() {
    let t = token("forever");
    let mut child = spawn_serve(&t, &["--seconds", &u64::MAX.to_string()]);
    wait_for_file(&mut child, &shm(&t));
    assert!(child.try_wait().unwrap().is_none(), "it stopped by itself");
    stop_serve(child, &t, "TERM", 143);
}

fn demo_stops_on(sig: &str, code: i32) {
    let t = token(&format!("demo-{sig}"));
    let mut child = spawn(
        &[
            "demo",
            "--name",
            &t,
            "--clients",
            "2",
            "--calls",
            "100000000",
        ],
        Stdio::null(),
    );
    let err = drain(child.stderr.take());
    wait_for_file(&mut child, &shm(&t));
    // Its client processes are running.
    let until = Instant::now() + LIMIT;
    while !processes_with(&t).iter().any(|c| c.contains(" call ")) {
        assert!(Instant::now() < until, "no client process started");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, sig);
    let status = wait(&mut child, &format!("ferry demo after SIG{sig}"));
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(code), "{status:?}, stderr {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!shm(&t).exists(), "SIG{sig} left {}", shm(&t).display());
    assert_eq!(leftovers(&t, Some(child.id())), Vec::<String>::new());
    // Its clients are gone too (it waited for them before exiting).
    assert_eq!(processes_with(&t), Vec::<String>::new());
}

#[test]
fn demo_removes_its_file_and_stops_its_clients_on_sigterm() {
    demo_stops_on("TERM", 143);
}

#[test]
fn demo_removes_its_file_and_stops_its_clients_on_sigint() {
    demo_stops_on("INT", 130);
}

#[test]
fn demo_removes_its_file_and_stops_its_clients_on_sighup() {
    demo_stops_on("HUP", 129);
}

/// Ctrl-C in a terminal signals the whole foreground process group: the demo and its clients
/// at once. The demo, under its default name (`demo-<pid>`), still removes its file.
#[test]
fn ctrl_c_to_the_demo_and_its_clients_removes_the_default_file() {
    let mut child = spawn(
        &["demo", "--clients", "2", "--calls", "100000000"],
        Stdio::null(),
    );
    let name = format!("demo-{}", child.id());
    let err = drain(child.stderr.take());
    wait_for_file(&mut child, &shm(&name));
    let until = Instant::now() + LIMIT;
    while !processes_with(&format!("ferry-{name}"))
        .iter()
        .any(|c| c.contains(" call "))
    {
        assert!(Instant::now() < until, "no client process started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The group's id is the demo's pid (`spawn` starts it in a group of its own).
    let status = Command::new("kill")
        .args(["-INT", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wait(&mut child, "ferry demo after Ctrl-C");
    let stderr = err.join().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}, stderr {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!shm(&name).exists(), "Ctrl-C left {}", shm(&name).display());
    assert_eq!(leftovers(&name, Some(child.id())), Vec::<String>::new());
}

/// A server that does not answer (stopped) makes `call` fail once, after `--deadline`: it does
/// not wait the deadline out again for every call it was asked to make.
#[test]
fn call_to_a_server_that_does_not_answer_fails_at_the_first_deadline() {
    let t = token("stopped");
    let mut server = spawn_serve(&t, &[]);
    wait_for_file(&mut server, &shm(&t));
    signal(&server, "STOP");
    let r = run(&["call", "--name", &t, "--calls", "1000", "--deadline", "1"]);
    signal(&server, "CONT");
    let what = format!("{:?}, stderr {:?}", r.status, r.stderr);
    assert_eq!(r.status.code(), Some(1), "{what}");
    assert!(r.stderr.contains("1 of 1 calls failed"), "{what}");
    stop_serve(server, &t, "TERM", 143);
}

/// `nohup ferry serve` keeps serving through a hangup: a signal ignored when ferry starts stays
/// ignored.
#[test]
fn serve_under_nohup_ignores_sighup() {
    let t = token("nohup");
    let mut child = Running(
        Command::new("nohup")
            .arg(env!("CARGO_BIN_EXE_ferry"))
            .args(["serve", "--name", &t])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_file(&mut child, &shm(&t));
    signal(&child, "HUP");
    // Still serving after the hangup: a call is answered.
    let call = run(&["call", "--name", &t, "--calls", "10"]);
    assert!(call.status.success(), "{:?} {}", call.status, call.stderr);
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP stopped it");
    stop_serve(child, &t, "TERM", 143);
}

/// One row of `ferry demo`'s table: calls, errors, wrong, then p50, p90, p99, max in µs.
fn row(stdout: &str, name: &str) -> (u64, [f64; 4]) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row {name:?} in {stdout}"));
    let f: Vec<&str> = line[name.len()..].split_whitespace().collect();
    let pct = [3, 4, 5, 6].map(|i| f[i].parse::<f64>().unwrap());
    (f[0].parse().unwrap(), pct)
}

/// The `all` row counts every client's calls, and its percentiles are of all of them together:
/// each between the clients' lowest and highest, the maximum the highest.
#[test]
fn demo_all_row_is_every_call_together() {
    let t = token("all");
    let r = run(&["demo", "--name", &t, "--clients", "2", "--calls", "3000"]);
    assert!(r.status.success(), "{:?} {}", r.status, r.stderr);
    let (c0, p0) = row(&r.stdout, "client 0");
    let (c1, p1) = row(&r.stdout, "client 1");
    let (all, pa) = row(&r.stdout, "all");
    assert_eq!((c0, c1, all), (3000, 3000, 6000), "{}", r.stdout);
    for k in 0..4 {
        let (lo, hi) = (p0[k].min(p1[k]), p0[k].max(p1[k]));
        assert!(lo <= pa[k] && pa[k] <= hi, "column {k}: {}", r.stdout);
    }
    assert_eq!(pa[3], p0[3].max(p1[3]), "{}", r.stdout);
}

/// A user's own service, as `ferry ls` and `ferry call` meet it: served from this test's process.
mod shop {
    use ferry_shm::{wire, Bytes, RpcOpcodes, Text};

    #[wire]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Refused {
        Negative = 7,
    }

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("negative")
        }
    }

    #[wire]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Point {
        pub x: i32,
        pub y: i32,
    }

    #[derive(RpcOpcodes)]
    #[rpc(service = "shop")]
    pub enum Shop {
        #[rpc(response = u64)]
        Add { a: u64, b: u32 },
        #[rpc(response = Text)]
        Greet { name: Text },
        #[rpc(response = u64, error = Refused)]
        Take { n: i32 },
        #[rpc(response = Bytes)]
        Repeat { times: u8, data: Bytes },
        #[rpc(oneway)]
        Note { v: u64 },
        #[rpc(response = Point)]
        Origin,
    }

    pub struct Store;

    impl ShopServer for Store {
        fn add(&self, a: u64, b: u32) -> u64 {
            a + b as u64
        }
        fn greet(&self, name: &str) -> impl AsRef<str> {
            format!("hello {name}")
        }
        fn take(&self, n: i32) -> Result<u64, Refused> {
            u64::try_from(n).map_err(|_| Refused::Negative)
        }
        fn repeat(&self, times: u8, data: &[u8]) -> impl AsRef<[u8]> {
            data.repeat(times as usize)
        }
        fn note(&self, _v: u64) {}
        fn origin(&self) -> Point {
            Point { x: 1, y: -1 }
        }
    }
}

#[test]
fn ls_and_call_reach_a_users_own_service() {
    use ferry_shm::{path_for, ServerConfig, ShmServer};
    let name = token("any-service");
    let server = ShmServer::start(
        path_for(&name),
        ServerConfig::default(),
        shop::Shop::server(shop::Store),
    )
    .unwrap();

    let ls = run(&["ls", &name]);
    assert!(ls.status.success(), "{}", ls.stderr);
    for line in [
        "shop  (fingerprint 0x",
        "  add(a: u64, b: u32) -> u64",
        "  greet(name: Text) -> Text",
        "  take(n: i32) -> Result<u64, Refused>",
        "  repeat(times: u8, data: Bytes) -> Bytes",
        "  note(v: u64)  (one-way)",
        "  origin() -> Point",
    ] {
        assert!(ls.stdout.contains(line), "no `{line}` in:\n{}", ls.stdout);
    }

    let call = |args: &[&str]| {
        let mut all = vec!["call", &*name];
        all.extend_from_slice(args);
        run(&all)
    };
    let r = call(&["shop.add", "a=40", "b=2"]);
    assert_eq!(
        (r.status.code(), r.stdout.trim()),
        (Some(0), "42"),
        "{}",
        r.stderr
    );
    let r = call(&["shop.greet", "name=ferry"]);
    assert_eq!(r.stdout.trim(), "hello ferry", "{}", r.stderr);
    let r = call(&["shop.take", "n=5"]);
    assert_eq!(r.stdout.trim(), "5", "{}", r.stderr);
    let file = std::env::temp_dir().join(format!("{}-data", &*name));
    std::fs::write(&file, b"ab").unwrap();
    let at = format!("data=@{}", file.display());
    let r = call(&["shop.repeat", "times=3", &at]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.stdout, "ababab", "{}", r.stderr);
    let r = call(&["shop.note", "v=1"]);
    assert!(
        r.status.success() && r.stdout.contains("one-way"),
        "{}",
        r.stderr
    );
    let r = call(&["shop.origin"]);
    assert_eq!(r.stdout.trim(), "Point { bytes: 01 00 00 00 ff ff ff ff }");

    // The handler's error, and what the command line gets wrong: one line each, exit 1.
    for (args, mention) in [
        (&["shop.take", "n=-1"][..], "error Refused"),
        (&["shop.add", "a=1"][..], "argument `b` missing"),
        (&["shop.add", "a=x", "b=1"][..], "not a u64"),
        (&["shop.add", "a=1", "b=1", "c=2"][..], "no argument `c`"),
        (&["shop.nothing"][..], "no call `nothing`"),
        (&["shelf.add"][..], "no service `shelf`"),
        (&["add"][..], "SERVICE.METHOD"),
    ] {
        let r = call(args);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(mention), "{args:?}: {}", r.stderr);
    }
    drop(server);
}

/// `ferry bridge --name NAME` listening on a free loopback port (its output to `stdout()`), and
/// a client of the demo service through it (with its session). A port found free can be taken
/// before the bridge binds it: a bridge that ended without serving is started again on another.
#[cfg(feature = "zenoh")]
fn bridge_demo(
    name: &str,
    stdout: fn() -> Stdio,
) -> (
    Running,
    ferry_zenoh::zenoh::Session,
    ferry_zenoh::ZenohClient,
) {
    use ferry_zenoh::zenoh::Wait;
    let mut refused = String::new();
    for _ in 0..5 {
        let port = ferry_testkit::free_port();
        let listen = format!("tcp/127.0.0.1:{port}");
        let mut bridge = spawn(&["bridge", "--name", name, "--listen", &listen], stdout());
        let session = ferry_zenoh::zenoh::open(ferry_zenoh::peer_config(&[], &[&listen]).unwrap())
            .wait()
            .unwrap();
        let client = ferry_zenoh::ZenohClient::connect(
            &session,
            name,
            ferry_zenoh::ClientConfig::default()
                .service::<ferry_demo::Demo>()
                .attach(LIMIT),
        );
        match client {
            Ok(client) => return (bridge, session, client),
            Err(e) if matches!(bridge.try_wait(), Ok(Some(_))) => refused = e.to_string(),
            Err(e) => panic!("no client through the bridge: {e}"),
        }
    }
    panic!("the bridge never served: {refused}");
}

/// `ferry bridge` (the `zenoh` feature) exports a running `ferry serve` to zenoh: a client on
/// another session calls the demo service through it, and SIGTERM stops it with status 143,
/// leaving the server serving.
#[cfg(feature = "zenoh")]
#[test]
fn bridge_exports_a_running_server_to_zenoh() {
    let name = token("bridge");
    let mut server = spawn_serve(&name, &[]);
    wait_for_file(&mut server, &shm(&name));
    let (mut bridge, _session, client) = bridge_demo(&name, Stdio::null);
    let demo = ferry_demo::Demo::client(&client);
    assert_eq!(demo.add(2, 3), Ok(5));
    assert_eq!(demo.sum(&[1, 2, 3]).map(|s| (s.len, s.sum)), Ok((3, 6)));
    signal(&bridge, "TERM");
    assert_eq!(
        wait(&mut bridge, "ferry bridge after SIGTERM").code(),
        Some(143)
    );
    // The server it bridged goes on.
    assert!(shm(&name).exists());
    stop_serve(server, &name, "TERM", 143);
    // A name that cannot be a key is refused before anything runs, with a way out.
    assert_refused(&["bridge", "--name", "/dev/shm/a b"], "--as", &name);
}

/// `ferry bridge` outlives its server: killed, calls through the bridge fail within their
/// deadline (no server); started again with the same services, calls go through again; a server
/// of another service under the name is never called (refused as not served), and the bridge
/// says each of these.
#[cfg(feature = "zenoh")]
#[test]
fn bridge_reattaches_to_a_restarted_server_and_refuses_another_schema() {
    use ferry_rpc::service::{Error, Transport};
    let name = token("bridge-restart");
    let mut server = spawn_serve(&name, &[]);
    wait_for_file(&mut server, &shm(&name));
    let (mut bridge, _session, client) = bridge_demo(&name, Stdio::piped);
    let (out, err) = (drain(bridge.stdout.take()), drain(bridge.stderr.take()));
    let deadline = Duration::from_secs(2);
    let demo = ferry_demo::Demo::client(&client).with_deadline(deadline);
    assert_eq!(demo.add(2, 3), Ok(5));
    // Calls until one returns `done`'s result (each within its deadline, none answered with a
    // value it should not have).
    let until = |done: &dyn Fn(&Result<u64, Error>) -> bool, what: &str| {
        let give_up = Instant::now() + LIMIT;
        loop {
            let started = Instant::now();
            let result = demo.add(2, 3);
            let took = started.elapsed();
            assert!(
                took < deadline * 2,
                "{what}: a call took {took:?}: {result:?}"
            );
            if done(&result) {
                return;
            }
            assert!(Instant::now() < give_up, "{what}: still {result:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Killed: calls fail, soon with "no server", never a value.
    signal(&server, "KILL");
    wait(&mut server, "ferry serve after SIGKILL");
    let no_server = |r: &Result<u64, Error>| {
        assert!(r.is_err(), "a call answered with no server: {r:?}");
        *r == Err(Error::Transport(Transport::NoServer))
    };
    until(&no_server, "the server killed");
    // Started again (over its stale file): calls go through again.
    let mut server = spawn_serve(&name, &[]);
    until(&|r| *r == Ok(5), "the server started again");
    // Another service served under the name: never called.
    stop_serve(server, &name, "TERM", 143);
    let other = ferry_shm::ShmServer::start(
        ferry_shm::path_for(&name),
        ferry_shm::ServerConfig::default(),
        shop::Shop::server(shop::Store),
    )
    .unwrap();
    let not_served = |r: &Result<u64, Error>| {
        assert!(r.is_err(), "a call answered by another service: {r:?}");
        matches!(r, Err(Error::Transport(Transport::NotServed { .. })))
    };
    until(&not_served, "another service under the name");
    other.shutdown(Duration::from_secs(5));
    // The right one back.
    server = spawn_serve(&name, &[]);
    wait_for_file(&mut server, &shm(&name));
    until(&|r| *r == Ok(5), "the server of the bridged services back");
    signal(&bridge, "TERM");
    assert_eq!(wait(&mut bridge, "ferry bridge").code(), Some(143));
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(err.contains("is gone"), "{err}");
    assert!(err.contains("serves other services"), "{err}");
    assert!(err.contains("shop 0x"), "{err}");
    assert!(out.contains("is back"), "{out}");
    stop_serve(server, &name, "TERM", 143);
}
