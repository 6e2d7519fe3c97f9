//! Two network namespaces joined by a veth pair (`ip`, as root), removed when dropped: the
//! server in one, the caller in the other, so that their traffic crosses a link rather than
//! loopback.

use std::process::Command;

pub struct Namespaces {
    /// The caller's namespace and the server's.
    pub names: [String; 2],
    /// The server's address on the link.
    pub server_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    match Command::new("ip").args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("`ip` (iproute2) could not be run: {e}")),
    }
}

impl Namespaces {
    /// `ferry-bench-a-PID` (10.232.N.1) and `ferry-bench-b-PID` (10.232.N.2); the reason when the
    /// machine does not allow it (not root, no `ip`).
    pub fn make() -> Result<Namespaces, String> {
        if !rustix::process::geteuid().is_root() {
            return Err(
                "network namespaces need root (build, then run the binary with sudo: \
                        `sudo target/release/ferry-zenoh-bench --netns`)"
                    .into(),
            );
        }
        remove_stale();
        let id = std::process::id();
        let made = Namespaces {
            names: [format!("ferry-bench-a-{id}"), format!("ferry-bench-b-{id}")],
            server_ip: format!("10.232.{}.2", id % 250 + 1),
        };
        let [a, b] = &made.names;
        let (va, vb) = (
            format!("fba{}", id % 100_000),
            format!("fbb{}", id % 100_000),
        );
        let caller_ip = format!("10.232.{}.1/24", id % 250 + 1);
        let server_ip = format!("{}/24", made.server_ip);
        ip(&["netns", "add", a])?;
        ip(&["netns", "add", b])?;
        // Made with its ends in the namespaces: nothing is left outside them to remove.
        ip(&[
            "link", "add", &va, "netns", a, "type", "veth", "peer", "name", &vb, "netns", b,
        ])?;
        ip(&["-n", a, "addr", "add", &caller_ip, "dev", &va])?;
        ip(&["-n", b, "addr", "add", &server_ip, "dev", &vb])?;
        for (ns, dev) in [(a, &va), (b, &vb)] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }
}

/// Deletes the namespaces left by a bench that was killed (its `Drop` never ran): those of this
/// bench's naming whose process is gone.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let pid = name
            .strip_prefix("ferry-bench-a-")
            .or_else(|| name.strip_prefix("ferry-bench-b-"));
        let gone = |pid: &str| pid.parse::<u32>().is_ok_and(|pid| !is_running(pid));
        if pid.is_some_and(gone) {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

fn is_running(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // (Deleting a namespace deletes the veth end in it, and so the pair.)
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
