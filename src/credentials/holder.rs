//! Who holds a refresh lease ([`super::flow`]), told well enough that a process on the same
//! machine can see that the holder is gone.
//!
//! A lease names its holder by a random id. Where the machine lets a process be told apart
//! (Linux: `/proc`), the id also carries the machine's boot, the PID namespace, the process id
//! and the process's start time: a process that finds a lease of the same boot and namespace
//! whose process is no longer there (no such process, or another one started since under that
//! id) knows its holder died, and takes the lease over at once rather than waiting for it.
//! Anything else (another machine, another namespace, a platform without `/proc`, a lease of
//! an older postonce) is not known to be gone: the lease is waited for, as before.

/// A new holder id for this process: `<random>` or `<random>@<boot>/<namespace>/<pid>/<start>`.
pub fn new_id() -> String {
    let id = format!("{:016x}", rand::random::<u64>());
    match this_process() {
        Some(at) => format!("{id}@{at}"),
        None => id,
    }
}

/// Whether the lease holder `by` is known to be gone (see the module docs).
pub fn gone(by: Option<&str>) -> bool {
    let Some((_, at)) = by.and_then(|b| b.split_once('@')) else {
        return false;
    };
    let parts: Vec<&str> = at.split('/').collect();
    let [boot, namespace, pid, start] = parts.as_slice() else {
        return false;
    };
    let here = (boot_id(), pid_namespace());
    if here.0.as_deref() != Some(*boot) || here.1.as_deref() != Some(*namespace) {
        return false;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    start_time(pid).as_deref() != Some(*start)
}

fn this_process() -> Option<String> {
    let pid = std::process::id();
    Some(format!(
        "{}/{}/{pid}/{}",
        boot_id()?,
        pid_namespace()?,
        start_time(pid)?
    ))
}

/// The machine's boot: a process of another boot is on another machine (or ran before a
/// restart).
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(['/', '@'])).then(|| id.to_owned())
}

/// This process's PID namespace (`pid:[4026531836]`): a process id means the same process only
/// within one namespace (two containers on one machine share the boot, not the namespace).
fn pid_namespace() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let name = link.to_str()?.to_owned();
    (!name.is_empty() && !name.contains(['/', '@'])).then_some(name)
}

/// When process `pid` started (clock ticks since boot, `/proc/<pid>/stat` field 22), or `None`
/// when there is no such process: with the id, it names one process, never a later one that
/// was given the same id.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_is_not_gone_and_a_dead_one_on_this_machine_is() {
        let me = new_id();
        assert!(!gone(Some(&me)), "this process holds it: {me}");
        assert!(!gone(None));
        assert!(!gone(Some("0123456789abcdef")), "an older holder id");
        let Some((id, at)) = me.split_once('@') else {
            return; // no /proc here: nothing is ever known to be gone
        };
        let parts: Vec<&str> = at.split('/').collect();
        let dead = format!("{id}@{}/{}/{}/{}", parts[0], parts[1], parts[2], "1");
        assert!(gone(Some(&dead)), "another start time: another process");
        let elsewhere = format!("{id}@other-boot/{}/{}/{}", parts[1], parts[2], parts[3]);
        assert!(!gone(Some(&elsewhere)), "another machine is not known");
    }
}
