//! Two network namespaces joined by a veth pair, for a test or a benchmark whose two sides must
//! talk across a link rather than loopback (made with `ip`, as root).

use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// Two network namespaces, `PREFIX-a-PID` (address [`addr(0)`](Self::addr)) and `PREFIX-b-PID`
/// ([`addr(1)`](Self::addr)), joined by a veth pair; removed when dropped. Those a killed run
/// left (its `Drop` never ran: the process of their name is gone) are removed by the next
/// [`make`](Self::make) of the same prefix.
///
/// ```no_run
/// let namespaces = match ferry_testkit::Namespaces::make("my-test") {
///     Ok(n) => n,
///     Err(why) => return println!("skipped: {why}"),
/// };
/// // `ip netns exec` the two sides in `namespaces.names[0]` and `[1]`; the second listens on
/// // `namespaces.addr(1)`. `namespaces.link(false)` cuts the link between them.
/// ```
pub struct Namespaces {
    /// The two namespaces' names, for `ip netns exec NAME`.
    pub names: [String; 2],
}

/// Runs `ip ARGS`; its error, said, if it fails.
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
    /// Makes the two namespaces and their link; the reason when this machine does not allow it
    /// (not root, no `ip`, no namespaces).
    pub fn make(prefix: &str) -> Result<Namespaces, String> {
        // (`/proc/self` belongs to this process's effective user.)
        if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() != 0) {
            return Err("network namespaces need root".into());
        }
        remove_stale(prefix);
        let id = std::process::id();
        let made = Namespaces {
            names: [format!("{prefix}-a-{id}"), format!("{prefix}-b-{id}")],
        };
        let [a, b] = &made.names;
        ip(&["netns", "add", a])?;
        ip(&["netns", "add", b])?;
        // Made with its ends in the namespaces: nothing is ever left outside them, and the
        // ends' names need be unique only there.
        ip(&[
            "link", "add", "veth-a", "netns", a, "type", "veth", "peer", "name", "veth-b", "netns",
            b,
        ])?;
        for (i, (ns, dev)) in [(a, "veth-a"), (b, "veth-b")].into_iter().enumerate() {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", made.addr(i)),
                "dev",
                dev,
            ])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(made)
    }

    /// The address of namespace `index` (0 or 1) on the link.
    pub fn addr(&self, index: usize) -> String {
        format!("10.231.0.{}", index + 1)
    }

    /// Sets namespace 0's end of the link down (`false`: a partition) or up again.
    pub fn link(&self, up: bool) -> Result<(), String> {
        let state = if up { "up" } else { "down" };
        ip(&["-n", &self.names[0], "link", "set", "veth-a", state])
    }
}

/// Deletes the namespaces of `prefix` whose process is gone.
fn remove_stale(prefix: &str) {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let pid = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("-a-").or(rest.strip_prefix("-b-")))
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // (Deleting a namespace deletes the veth end in it, and so the pair.)
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
