//! Stopping keel and everything it started (SIGSTOP), and letting them go on (SIGCONT).
//!
//! keel's shell tool starts each command in a process group of its own (and, with a PID
//! namespace, under an `unshare` of its own), so stopping keel's process group would
//! leave a running command free to change the workspace. Instead the process tree under
//! keel is walked in `/proc` (by parent pid) and each process is stopped by its pid; a
//! stopped process cannot start another, so the walk is repeated until it finds no new
//! one. A process that left the tree (a daemon that double-forked, reparented to init)
//! is not found; keel's launcher is a child subreaper, so its commands' orphans stay in
//! the tree. Linux only (elsewhere only keel itself is stopped).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// Processes stopped by [`freeze`]; they go on when this is dropped (or [`Frozen::thaw`]).
#[derive(Debug)]
pub struct Frozen {
    pids: Vec<i32>,
}

impl Frozen {
    /// The processes stopped, keel first.
    pub fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// Lets every stopped process go on.
    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for &pid in &self.pids {
            signal(pid, Signal::CONT);
        }
    }
}

fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process(pid, signal);
    }
}

/// Stops `root` and every process under it, and waits (at most 200 ms) until the
/// kernel reports each one stopped.
pub fn freeze(root: u32) -> Frozen {
    let root = root as i32;
    signal(root, Signal::STOP);
    let mut frozen = Frozen { pids: vec![root] };
    let mut seen: BTreeSet<i32> = [root].into();
    for _ in 0..20 {
        let new: Vec<i32> = descendants(root, &processes()).into_iter().filter(|p| seen.insert(*p)).collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            signal(pid, Signal::STOP);
            frozen.pids.push(pid);
        }
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(200)
        && !frozen.pids.iter().all(|&pid| state(pid).is_none_or(|s| matches!(s, 'T' | 't' | 'Z' | 'X')))
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    frozen
}

/// Every process's parent, from `/proc` (empty where there is none).
fn processes() -> BTreeMap<i32, i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return BTreeMap::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((pid, parse_stat(&stat)?.1))
        })
        .collect()
}

/// The state letter and parent pid in a `/proc/<pid>/stat` line (the command name in
/// parentheses may hold spaces and parentheses itself).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|(state, _)| state)
}

/// The processes under `root` in a pid → parent table.
fn descendants(root: i32, parents: &BTreeMap<i32, i32>) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (&pid, &parent) in parents {
        children.entry(parent).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if child != root && !out.contains(&child) {
                out.push(child);
                queue.push(child);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_stat_line_gives_state_and_parent() {
        assert_eq!(parse_stat("42 (bash) S 7 42 42 0 -1"), Some(('S', 7)));
        assert_eq!(parse_stat("43 (a) b (c)) T 42 43 7 0"), Some(('T', 42)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_are_found_at_any_depth_and_nothing_else() {
        let parents: BTreeMap<i32, i32> = [(10, 1), (11, 10), (12, 11), (13, 10), (20, 1), (21, 20)].into();
        let mut found = descendants(10, &parents);
        found.sort_unstable();
        assert_eq!(found, [11, 12, 13]);
    }

    #[test]
    fn a_tree_of_processes_in_groups_of_their_own_stops_and_goes_on() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        // A shell whose child runs in a process group of its own, as keel's commands do.
        let mut child = Command::new("bash")
            .arg("-c")
            .arg("set -m; sleep 30 & echo $! > /dev/null; wait")
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let started = Instant::now();
        while descendants(root, &processes()).is_empty() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let frozen = freeze(child.id());
        assert!(frozen.pids().len() >= 2, "{:?}", frozen.pids());
        for &pid in frozen.pids() {
            assert_eq!(state(pid), Some('T'), "pid {pid}");
        }
        let pids = frozen.pids().to_vec();
        frozen.thaw();
        let started = Instant::now();
        while pids.iter().any(|&pid| state(pid) == Some('T')) && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        for &pid in &pids {
            assert_ne!(state(pid), Some('T'), "pid {pid}");
        }
        for &pid in pids.iter().rev() {
            signal(pid, Signal::KILL);
        }
        let _ = child.wait();
    }
}
