//! The loader's command line, checked before any GPU is touched (runs without one).

use std::process::Command;

fn loader(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpc-gpu-run"))
        .args(args)
        .output()
        .expect("the loader runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn word_lines_for_warps_without_word_lines_is_refused() {
    let (code, err) = loader(&["--no-word-lines", "--word-lines-for-warps", "prog.ptx"]);
    assert_eq!(code, Some(125), "{err}");
    assert!(
        err.contains("--word-lines-for-warps needs the word lines"),
        "{err}"
    );
}

#[test]
fn an_unknown_option_is_refused_with_the_usage() {
    let (code, err) = loader(&["--word-lines-for-everyone", "prog.ptx"]);
    assert_eq!(code, Some(125), "{err}");
    assert!(
        err.contains("unknown option --word-lines-for-everyone"),
        "{err}"
    );
    assert!(
        err.contains("--word-lines-for-warps"),
        "the usage names the option: {err}"
    );
}
