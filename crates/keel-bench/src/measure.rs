//! Clocks, memory readings and child-process accounting.

#![allow(unsafe_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// CPU time (user + system) used by this process so far.
pub fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts);
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Peak resident set size of this process, from /proc (bytes).
pub fn peak_rss() -> u64 {
    status_bytes("self", "VmHWM:")
}

/// A size field (`VmHWM:`, `VmRSS:`) of process `pid` (or `self`), in bytes; 0 if unreadable.
pub fn status_bytes(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        })
        .unwrap_or(0)
        * 1024
}

/// What a finished child used.
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    /// Exit status (or 128+signal).
    pub status: i32,
    /// Wall time from spawn to exit.
    pub wall: Duration,
    /// User + system CPU.
    pub cpu: Duration,
    /// Peak RSS in bytes.
    pub max_rss: u64,
}

/// Spawns `command`, waits with `wait4`, and returns its resource usage.
pub fn run_measured(mut command: Command) -> ChildUsage {
    let started = Instant::now();
    let child = command.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own un-reaped child; status and usage point to our locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    std::mem::forget(child);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let code = if rc < 0 {
        -1
    } else if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    ChildUsage {
        status: code,
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss: usage.ru_maxrss as u64 * 1024,
    }
}

/// The median of `values`.
pub fn median<T: Ord + Copy + Default>(values: &mut [T]) -> T {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

/// Formats a duration in the most readable unit.
pub fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.1} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1_000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// Formats bytes as MB.
pub fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_048_576.0)
}

/// User and system CPU time of this process so far.
pub fn user_sys() -> (Duration, Duration) {
    // SAFETY: an all-zero rusage is valid; getrusage fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: usage points to our local.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(usage.ru_utime), tv(usage.ru_stime))
}
