//! `ferry-ptx`: builds a ferry GPU program from the user's own crate to PTX.
//!
//! ```text
//! ferry-ptx build [CARGO BUILD ARGS...]    build the crate's cdylib(s) to PTX, then check them
//! ferry-ptx check FILE.ptx...              check that each is a ferry program the loader runs
//! ```
//!
//! `build` runs `cargo build --release --target nvptx64-nvidia-cuda -Zbuild-std=core` in the
//! current directory with what NVPTX needs and nothing the crate has to write down:
//!
//! | setting | why |
//! |---|---|
//! | `-Zbuild-std=core` (and `RUSTC_BOOTSTRAP=1`, so a stable or Debian compiler accepts it) | no `core` is shipped for the target |
//! | `-Ctarget-cpu=sm_90` (`FERRY_PTX_CPU`) | the GPU generation the PTX is for |
//! | the linker: this program (`ferry-ptx link`) | links the whole program's LLVM bitcode and emits PTX with LLVM's tools (`llvm-link`, `opt`, `llc`, version `FERRY_LLVM_VERSION`, default 22), for toolchains without `llvm-bitcode-linker` (Debian's `rustc-web`) |
//! | PTX ISA `+ptx86` (`FERRY_PTX_ATTRS`) | one-way fences (`fence.acquire`/`fence.release`) on sm_90 |
//! | release profile: `lto = true`, `codegen-units = 1`, `panic = "abort"` | one bitcode module holding the whole program; no unwinding on a GPU |
//! | `-Csymbol-mangling-version=legacy` | short symbol names (a path and a hash, not every generic argument spelled out): a smaller PTX for the driver to read |
//!
//! The compiler is `FERRY_RUSTC` if set, else Debian's `/usr/bin/rustc` if it has the NVPTX back
//! end and the library sources (`apt-get install rustc-web rust-web-src llvm-22`), else `rustc`
//! from the `PATH` (rustup nightly with the `rust-src` component). Each `.ptx` built is then
//! checked (`check`): it has the entry kernel `_start` (`ferry_device::entry!`) and the
//! descriptor global `FERRY_RPC` the loader fills, and the paths are printed, one per line.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TARGET: &str = "nvptx64-nvidia-cuda";

/// The symbols' names mangled the legacy way, a path and a hash: a compiler taken for nightly
/// (as `RUSTC_BOOTSTRAP` makes one) mangles them `v0`, which spells out every generic argument,
/// and a PTX names each function at its definition and at every call.
const MANGLING: [&str; 2] = ["-Zunstable-options", "-Csymbol-mangling-version=legacy"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // rustc runs its linker with the link arguments only: this program is that linker when the
    // build set it up (FERRY_PTX_LINK), or when called as `ferry-ptx link ...`.
    let result = if std::env::var_os("FERRY_PTX_LINK").is_some() {
        link(&args)
    } else {
        match args.first().map(String::as_str) {
            Some("build") => build(&args[1..]),
            Some("check") if args.len() > 1 => args[1..]
                .iter()
                .try_for_each(|p| check(Path::new(p)).map(|()| println!("{p}"))),
            Some("link") => link(&args[1..]),
            Some("--help" | "-h" | "help") => {
                println!("{}", usage());
                Ok(())
            }
            _ => Err(usage()),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-ptx: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage() -> String {
    "usage: ferry-ptx build [CARGO BUILD ARGS...] | ferry-ptx check FILE.ptx... \
     (see the crate docs for the settings `build` makes)"
        .into()
}

/// The compiler to build with (see the module docs).
fn rustc() -> PathBuf {
    if let Some(r) = std::env::var_os("FERRY_RUSTC") {
        return r.into();
    }
    let debian = Path::new("/usr/bin/rustc");
    let has = |rustc: &Path| -> bool {
        let targets = Command::new(rustc)
            .args(["--print", "target-list"])
            .output();
        let sysroot = Command::new(rustc).args(["--print", "sysroot"]).output();
        match (targets, sysroot) {
            (Ok(t), Ok(s)) => {
                let root = String::from_utf8_lossy(&s.stdout).trim().to_string();
                String::from_utf8_lossy(&t.stdout)
                    .lines()
                    .any(|l| l == TARGET)
                    && Path::new(&root)
                        .join("lib/rustlib/src/rust/library/core")
                        .is_dir()
            }
            _ => false,
        }
    };
    if debian.exists() && has(debian) {
        debian.into()
    } else {
        "rustc".into()
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn build(cargo_args: &[String]) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let cpu = env_or("FERRY_PTX_CPU", "sm_90");
    let attrs = env_or("FERRY_PTX_ATTRS", "+ptx86");
    // Added to what the user's environment asks for; the attributes are a link argument, so
    // changing them rebuilds.
    let mut flags: Vec<String> = std::env::var("CARGO_ENCODED_RUSTFLAGS")
        .ok()
        .filter(|f| !f.is_empty())
        .map(|f| f.split('\x1f').map(String::from).collect())
        .unwrap_or_default();
    flags.push(format!("-Ctarget-cpu={cpu}"));
    flags.push(format!("-Clink-arg=--ptx-attrs={attrs}"));
    flags.extend(MANGLING.map(String::from));
    let target_dir = cargo_target_dir()?;
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", TARGET, "-Zbuild-std=core"])
        .args(cargo_args)
        .env("RUSTC", rustc())
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
        .env("CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER", &me)
        .env("FERRY_PTX_LINK", "1")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "0")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("cargo build failed (its errors are above)".into());
    }
    let out = target_dir.join(TARGET).join("release");
    let mut built: Vec<PathBuf> = std::fs::read_dir(&out)
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
        .collect();
    built.sort();
    if built.is_empty() {
        return Err(format!(
            "no .ptx in {}: is the crate a `cdylib` (`[lib] crate-type = [\"cdylib\"]`)?",
            out.display()
        ));
    }
    for p in &built {
        check(p)?;
        println!("{}", p.display());
    }
    Ok(())
}

/// Where cargo puts its output for the crate in the current directory.
fn cargo_target_dir() -> Result<PathBuf, String> {
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // `"target_directory":"<path>"`: a JSON string (paths with quotes or escapes are refused).
    let key = "\"target_directory\":\"";
    let start = text
        .find(key)
        .ok_or("cargo metadata gave no target_directory")?
        + key.len();
    let end = text[start..]
        .find('"')
        .ok_or("cargo metadata's target_directory is cut short")?;
    let dir = &text[start..start + end];
    if dir.contains('\\') {
        return Err(format!(
            "a target directory with escapes is not supported: {dir}"
        ));
    }
    Ok(PathBuf::from(dir))
}

/// Whether `path` is a ferry program the loader runs: the entry kernel and the descriptor.
fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !text
        .lines()
        .any(|l| l.starts_with(".visible .entry _start("))
    {
        return Err(format!(
            "{}: no entry kernel `_start`: define it with `ferry_device::entry!(main)`",
            path.display()
        ));
    }
    if !text
        .lines()
        .any(|l| l.starts_with(".visible .global") && l.contains(" FERRY_RPC["))
    {
        return Err(format!(
            "{}: no `FERRY_RPC` descriptor: the program does not use the ferry-device crate",
            path.display()
        ));
    }
    Ok(())
}

/// The name of LLVM tool `name`: `name-VERSION` if on the PATH, else `name`.
fn tool(name: &str) -> Result<String, String> {
    let version = env_or("FERRY_LLVM_VERSION", "22");
    for candidate in [format!("{name}-{version}"), name.to_string()] {
        if Command::new(&candidate).arg("--version").output().is_ok() {
            return Ok(candidate);
        }
    }
    Err(format!(
        "neither {name}-{version} nor {name} found (install llvm-{version})"
    ))
}

fn run(program: &str, args: &[String]) -> Result<(), String> {
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} failed ({status})"))
    }
}

/// The link step, as rustc calls its NVPTX linker:
/// `--export-symbol NAME ... INPUT.o|INPUT.rlib ... -o OUT.ptx [other flags]`. With LTO the
/// inputs are LLVM bitcode holding the whole program: they are linked (`llvm-link`), everything
/// but the exported symbols internalized and optimized (`opt`), and PTX emitted (`llc`), its
/// comments left out ([`without_comments`]).
fn link(args: &[String]) -> Result<(), String> {
    let mut exports = Vec::new();
    let mut inputs = Vec::new();
    let mut out = None;
    let mut attrs = env_or("FERRY_PTX_ATTRS", "+ptx86");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--export-symbol" => exports.extend(it.next().cloned()),
            "-o" => out = it.next().cloned(),
            "--target"
            | "--target-cpu"
            | "--linker-plugin-lto-flavor"
            | "--llvm-bin-dir"
            | "-L" => {
                it.next();
            }
            a if a.starts_with("--export-symbol=") => exports.push(a[16..].to_string()),
            a if a.starts_with("--ptx-attrs=") => attrs = a[12..].to_string(),
            a if a.starts_with('-') => {}
            a => inputs.push(a.to_string()),
        }
    }
    let out = out.ok_or("the link step got no -o OUTPUT")?;
    if exports.is_empty() {
        return Err("nothing exported: the program has no kernels".into());
    }
    let work = std::env::temp_dir().join(format!("ferry-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let linked = (|| -> Result<(), String> {
        let mut bitcode = Vec::new();
        for (i, f) in inputs.iter().enumerate() {
            if f.ends_with(".rlib") {
                // An rlib built for LTO holds bitcode members (`*.o`).
                let d = work.join(format!("rlib{i}"));
                std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                let status = Command::new("ar")
                    .arg("x")
                    .arg(std::path::absolute(f).map_err(|e| format!("{f}: {e}"))?)
                    .current_dir(&d)
                    .status()
                    .map_err(|e| format!("cannot run ar: {e}"))?;
                if !status.success() {
                    return Err(format!("ar x {f} failed"));
                }
                let mut members: Vec<String> = std::fs::read_dir(&d)
                    .map_err(|e| format!("{}: {e}", d.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "o"))
                    .map(|p| p.display().to_string())
                    .collect();
                members.sort();
                bitcode.extend(members);
            } else {
                bitcode.push(f.clone());
            }
        }
        let linked = work.join("linked.bc").display().to_string();
        let opt = work.join("opt.bc").display().to_string();
        let mut a = bitcode;
        a.extend(["-o".into(), linked.clone()]);
        run(&tool("llvm-link")?, &a)?;
        run(
            &tool("opt")?,
            &[
                linked,
                "-o".into(),
                opt.clone(),
                "-passes=internalize,globaldce,default<O3>".into(),
                format!("-internalize-public-api-list={}", exports.join(",")),
            ],
        )?;
        let cpu = env_or("FERRY_PTX_CPU", "sm_90");
        run(
            &tool("llc")?,
            &[
                opt,
                "-o".into(),
                out.clone(),
                "-march=nvptx64".into(),
                format!("-mcpu={cpu}"),
                format!("-mattr={attrs}"),
                "-O3".into(),
            ],
        )?;
        let ptx = std::fs::read_to_string(&out).map_err(|e| format!("{out}: {e}"))?;
        std::fs::write(&out, without_comments(&ptx)).map_err(|e| format!("{out}: {e}"))
    })();
    let _ = std::fs::remove_dir_all(&work);
    linked
}

/// `ptx` without its comments: `llc` writes one or more on most lines (the blocks' names, the
/// loops' nesting, the inline assembly's bounds, each function's name again), which the driver
/// reads and throws away at every first load. A comment is `//` to the end of its line; a line
/// with a `"` (a `.file` path) is left whole, and no other PTX text holds `//`.
fn without_comments(ptx: &str) -> String {
    let mut kept = String::with_capacity(ptx.len());
    for line in ptx.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let code = match line.find("//") {
            Some(at) if !line.contains('"') => line[..at].trim_end(),
            _ => line,
        };
        kept.push_str(code);
        kept.push('\n');
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::without_comments;

    #[test]
    fn comments_go_and_code_stays() {
        let ptx = "//\n// Generated by LLVM\n.version 8.6\n\n.func f()  // -- Begin function f\n{\n// %bb.0:\n\t// begin inline asm\n\tactivemask.b32 %r1;\n\tret;\n}\n\t.file\t1 \"/a//b.rs\"\n";
        assert_eq!(
            without_comments(ptx),
            ".version 8.6\n\n.func f()\n{\n\tactivemask.b32 %r1;\n\tret;\n}\n\t.file\t1 \"/a//b.rs\"\n"
        );
    }
}
