//! The launcher: how the shell tool starts a command so that the command dies with keel,
//! even when keel itself is killed with `kill -9`, and cannot see keel's process.
//!
//! keel sets no process attributes between `fork` and `exec` (that needs `unsafe`
//! `pre_exec`). Instead the shell tool starts a launcher, a program implementing this
//! module's protocol (the `keel` binary, through the hidden `keel __exec`), and the
//! launcher sets what it needs on itself with safe calls before running `bash -c`:
//!
//! ```text
//! keel ── launcher (group leader; parent-death signal; reports bash's status on fd 0)
//!          ├─ with a PID namespace: execs `unshare --pid --fork --kill-child --mount-proc`
//!          │    └─ `keel __exec --init` (PID 1 of the namespace) ── bash -c COMMAND
//!          └─ without:            bash -c COMMAND (the launcher is a child subreaper)
//! ```
//!
//! What is enforced:
//! - **Death with keel.** The launcher asks the kernel for a signal when keel's thread
//!   that started it dies (`PR_SET_PDEATHSIG`), and checks keel is still its parent
//!   right after (keel may have died before). In a PID namespace the signal is SIGKILL
//!   for `unshare`, `--kill-child` passes it to the namespace's PID 1, and when PID 1
//!   dies the kernel kills every process of the namespace, including ones that left the
//!   process group. Without a namespace the launcher kills its process group; a process
//!   that left the group (`setsid`) survives there.
//! - **keel out of sight.** In a PID namespace with its own `/proc`, the command sees
//!   only its own processes: not keel, not its environment or memory (and `kill -9 -1`
//!   reaches only the namespace). Without one (creating it needs `CAP_SYS_ADMIN`: root,
//!   or a container that allows it), keel relies on being non-dumpable, which keeps a
//!   process of the same user (not root) out of `/proc/<keel>/environ` and `mem`.
//! - **The same semantics as `bash -c` alone.** The launcher is the process group
//!   leader the shell tool signals; it handles (and ignores) the signals a group gets,
//!   so SIGTERM reaches bash and its children exactly as before, and it reports bash's
//!   own wait status as soon as bash ends (one line on its fd 0, a pipe keel reads), so
//!   the tool's timeout, output draining and "background processes were stopped" logic
//!   see bash, not the launcher. It then stays until every descendant is gone.
//!
//! **Stdio mode** (`--stdio`, [`stdio_args`]) runs a long-lived server that speaks on its
//! stdin and stdout (an MCP server): the child inherits the launcher's stdin, the
//! launcher reports nothing on fd 0 and lets go of stdin, stdout and stderr once the
//! child has them (so keel sees the server's output end when the server's processes
//! do), and the parent-death signal kills the group as above.
//!
//! A library user gets none of this unless it sets `keel_tools::ToolsConfig::launcher`;
//! without it the shell tool runs `bash -c` directly as before. The kernel sends the
//! parent-death signal when the *thread* that started the launcher ends: the shell tool
//! starts it from the async runtime's thread (keel's only thread for tools; a
//! multi-threaded runtime's workers live as long as the runtime), never from a
//! short-lived blocking-pool thread.

use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use crate as sandbox;
use crate::Policy;

/// The hidden subcommand of the launcher program: `PROGRAM __exec …`.
pub const SUBCOMMAND: &str = "__exec";

/// A launcher program and how it runs commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The program that implements [`main`] behind [`SUBCOMMAND`] (the `keel` binary).
    pub program: PathBuf,
    /// Run each command in its own PID namespace when the system allows it.
    pub pid_namespace: bool,
}

impl Launcher {
    /// Starts the one-time probes a first command would otherwise wait for
    /// ([`sandbox_support`] when `sandbox`, [`pid_namespace_available`]) in the
    /// background, so they overlap the first model request. Without a Tokio runtime,
    /// nothing happens (the first command probes as before).
    pub fn warm_up(&self, sandbox: bool) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let program = self.program.clone();
        let pid_namespace = self.pid_namespace;
        runtime.spawn(async move {
            let support = async {
                if sandbox {
                    sandbox_support(&program).await;
                }
            };
            let namespace = async {
                if pid_namespace {
                    pid_namespace_available().await;
                }
            };
            futures::join!(support, namespace);
        });
    }
}

/// The `unshare` invocation that gives a command its own PID namespace and `/proc`.
const UNSHARE: &[&str] = &["--pid", "--fork", "--kill-child", "--mount-proc"];

/// Whether this process may create a PID namespace with `unshare` (probed once, by
/// running `unshare … true`).
pub async fn pid_namespace_available() -> bool {
    static PROBE: tokio::sync::OnceCell<bool> = tokio::sync::OnceCell::const_new();
    *PROBE
        .get_or_init(|| async {
            let probe = tokio::process::Command::new("unshare")
                .args(UNSHARE)
                .arg("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .status();
            let ok = matches!(
                tokio::time::timeout(std::time::Duration::from_secs(5), probe).await,
                Ok(Ok(status)) if status.success()
            );
            tracing::debug!(available = ok, "PID namespace for shell commands");
            ok
        })
        .await
}

/// What the system enforces of the sandbox, from `program __exec --probe` (probed once).
pub async fn sandbox_support(program: &std::path::Path) -> sandbox::Support {
    static PROBE: tokio::sync::OnceCell<sandbox::Support> = tokio::sync::OnceCell::const_new();
    PROBE
        .get_or_init(|| async {
            let probe = tokio::process::Command::new(program)
                .args([SUBCOMMAND, "--probe"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .output();
            let text = match tokio::time::timeout(std::time::Duration::from_secs(5), probe).await {
                Ok(Ok(output)) => String::from_utf8_lossy(&output.stdout).into_owned(),
                _ => String::new(),
            };
            sandbox::Support::parse(&text)
        })
        .await
        .clone()
}

/// The arguments after `program` that launch `bash -c command`, confined by `sandbox`.
pub fn launcher_args(command: &str, pid_namespace: bool, sandbox: Option<&Policy>) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        vec![SUBCOMMAND.into(), "--parent".into(), std::process::id().to_string().into()];
    if pid_namespace {
        args.push("--pid-ns".into());
    }
    if let Some(policy) = sandbox {
        args.extend(policy.to_args());
    }
    args.extend(["--".into(), "bash".into(), "-c".into(), command.into()]);
    args
}

/// The arguments after the launcher program that run `command` (a program and its
/// arguments) in stdio mode, confined by `sandbox`: its stdin and stdout are the
/// launcher's, it dies with this process, nothing is reported on fd 0.
pub fn stdio_args(command: &[OsString], pid_namespace: bool, sandbox: Option<&Policy>) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        vec![SUBCOMMAND.into(), "--parent".into(), std::process::id().to_string().into(), "--stdio".into()];
    if pid_namespace {
        args.push("--pid-ns".into());
    }
    if let Some(policy) = sandbox {
        args.extend(policy.to_args());
    }
    args.push("--".into());
    args.extend(command.iter().cloned());
    args
}

/// Parses a wait status reported by a launcher: one decimal line.
pub fn parse_report(line: &[u8]) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let raw: i32 = std::str::from_utf8(line).ok()?.trim().parse().ok()?;
    Some(std::process::ExitStatus::from_raw(raw))
}

/// What the launcher was asked to be.
#[derive(Debug, PartialEq, Eq)]
enum Role {
    /// Started by keel (`--parent PID`), optionally entering a PID namespace, optionally
    /// passing its stdin to the command (`--stdio`).
    Launcher { parent: Pid, pid_namespace: bool, stdio: bool },
    /// PID 1 of a namespace (`--init`), passing its stdin to the command with `--stdio`.
    Init { stdio: bool },
}

/// A parsed launcher invocation.
#[derive(Debug, PartialEq, Eq)]
struct Invocation {
    role: Role,
    /// The sandbox to enter before the command starts.
    sandbox: Option<Policy>,
    command: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Option<Invocation> {
    let split = args.iter().position(|a| a == "--")?;
    let (flags, command) = (&args[..split], args[split + 1..].to_vec());
    if command.is_empty() {
        return None;
    }
    let mut parent = None;
    let mut pid_namespace = false;
    let mut stdio = false;
    let mut init = false;
    let mut sandbox = None;
    let mut flags = flags.iter();
    while let Some(flag) = flags.next() {
        match flag.to_str()? {
            "--parent" => parent = Some(Pid::from_raw(flags.next()?.to_str()?.parse().ok()?)?),
            "--pid-ns" => pid_namespace = true,
            "--stdio" => stdio = true,
            "--init" => init = true,
            other if Policy::parse_flag(&mut sandbox, other, &mut flags)? => {}
            _ => return None,
        }
    }
    let role = match (init, parent) {
        (true, None) => Role::Init { stdio },
        (false, Some(parent)) => Role::Launcher { parent, pid_namespace, stdio },
        _ => return None,
    };
    Some(Invocation { role, sandbox, command })
}

/// The launcher's entry point: `args` are what follows [`SUBCOMMAND`]. Returns the exit
/// code (bash's, or 128 + the signal that ended it).
pub fn main(args: &[OsString]) -> i32 {
    if args.len() == 1 && args[0] == "--probe" {
        return probe();
    }
    let Some(Invocation { role, sandbox, command }) = parse(args) else {
        eprintln!(
            "keel {SUBCOMMAND}: internal launcher; usage: --parent PID [--pid-ns] [--stdio] [--sandbox MODE …] -- PROGRAM ARGS…"
        );
        return 2;
    };
    if std::io::stdin().is_terminal() {
        eprintln!("keel {SUBCOMMAND}: internal launcher, started by keel's shell tool only");
        return 2;
    }
    match role {
        Role::Init { stdio } => {
            // The namespace's own mounts: metadata outside the writable roots read-only.
            if let Some(policy) = &sandbox
                && let Err(e) = sandbox::protect_metadata(policy)
            {
                eprintln!("keel: file metadata outside the writable folders is not protected ({e})");
            }
            supervise(&command, None, sandbox.as_ref(), stdio)
        }
        Role::Launcher { parent, pid_namespace, stdio } => {
            let death = if pid_namespace { Signal::KILL } else { Signal::TERM };
            let _ = rustix::process::set_parent_process_death_signal(Some(death));
            // keel may have died before the request took effect.
            if rustix::process::getppid() != Some(parent) {
                return 128 + Signal::KILL.as_raw();
            }
            if pid_namespace {
                let error = enter_pid_namespace(&command, sandbox.as_ref(), stdio);
                eprintln!("keel: cannot enter a PID namespace ({error}); running the command without one");
                let _ = rustix::process::set_parent_process_death_signal(Some(Signal::TERM));
            }
            let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
            supervise(&command, Some(parent), sandbox.as_ref(), stdio)
        }
    }
}

/// Replaces this process with `unshare`, which runs `<this program> __exec --init --
/// command` as PID 1 of a new PID namespace. Returns only on failure.
fn enter_pid_namespace(command: &[OsString], sandbox: Option<&Policy>, stdio: bool) -> std::io::Error {
    let program = match std::env::current_exe() {
        // Replaced or deleted since keel started: the path no longer names this program.
        Ok(program) if !program.exists() => {
            return std::io::Error::new(std::io::ErrorKind::NotFound, "the keel binary was removed");
        }
        Ok(program) => program,
        Err(e) => return e,
    };
    Command::new("unshare")
        .args(UNSHARE)
        .arg("--")
        .arg(program)
        .args([SUBCOMMAND, "--init"])
        .args(stdio.then_some("--stdio"))
        .args(sandbox.map(Policy::to_args).unwrap_or_default())
        .arg("--")
        .args(command)
        .exec()
}

/// Runs `command` as a child and reports its status on fd 0 as soon as it ends. The
/// launcher keeps no copy of the output pipe (its own stdout and stderr become
/// `/dev/null` once the child has them), so keel sees the output end exactly when the
/// command's processes stop writing. Then a launcher (`parent` set) reaps descendants
/// until none is left; PID 1 of a namespace (`parent` unset) stays only while another
/// process of the namespace still holds the output, since leaving ends them all.
///
/// With `stdio` the child gets this process's stdin instead of `/dev/null`, nothing is
/// reported, and the launcher lets go of its stdin too.
fn supervise(command: &[OsString], parent: Option<Pid>, sandbox: Option<&Policy>, stdio: bool) -> i32 {
    if let Err(e) = handle_signals(parent) {
        eprintln!("keel: cannot handle signals in the launcher: {e}");
    }
    // The sandbox, if any, holds this process and so everything it starts; a sandbox that
    // cannot be enforced runs nothing.
    if let Some(policy) = sandbox
        && let Err(reason) = sandbox::enforce(policy)
    {
        eprintln!(
            "keel: the {} sandbox cannot be enforced on this system ({reason}), so the command was not run. \
             Run `keel sandbox` for details; set sandbox = \"off\" in the config (or --sandbox off) to run commands unconfined.",
            policy.mode.as_str()
        );
        if !stdio {
            report_raw(sandbox::REFUSED << 8);
        }
        return sandbox::REFUSED;
    }
    let output = rustix::fs::fstat(std::io::stdout().as_fd()).ok().map(|s| (s.st_dev, s.st_ino));
    let input = if stdio { Stdio::inherit() } else { Stdio::null() };
    let child = match Command::new(&command[0]).args(&command[1..]).stdin(input).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("keel: cannot start {}: {e}", OsStr::to_string_lossy(&command[0]));
            if !stdio {
                report_raw(127 << 8);
            }
            return 127;
        }
    };
    release_output(stdio);
    let child_pid = Pid::from_raw(child.id() as i32);
    let code = loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if Some(pid) == child_pid => {
                if !stdio {
                    report_raw(status.as_raw());
                }
                break exit_code(status);
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return 127,
        }
    };
    match parent {
        Some(_) => reap_all(),
        None => {
            while output.is_some_and(others_hold) {
                if reap_ready().is_err() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    code
}

/// `--probe`: confines this (throwaway) process as far as the system allows and prints
/// what was enforced (see [`sandbox::probe`]).
fn probe() -> i32 {
    #[cfg(target_os = "linux")]
    print!("{}", sandbox::probe());
    #[cfg(not(target_os = "linux"))]
    println!("landlock: none (not Linux)\nseccomp: none (not Linux)");
    0
}

/// Points this process's stdout and stderr (and with `input`, its stdin) at `/dev/null`.
fn release_output(input: bool) {
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
        if input {
            let _ = rustix::stdio::dup2_stdin(&null);
        }
    }
}

/// Waits for every child (orphans are re-parented here) until none is left.
fn reap_all() {
    loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// Reaps children that have ended, without waiting; an error once none is left.
fn reap_ready() -> rustix::io::Result<()> {
    while rustix::process::wait(WaitOptions::NOHANG)?.is_some() {}
    Ok(())
}

/// Whether a process other than this one has the pipe `(device, inode)` open (in a PID
/// namespace's own `/proc`, the namespace's processes).
fn others_hold((device, inode): (u64, u64)) -> bool {
    let me = std::process::id().to_string();
    let Ok(processes) = std::fs::read_dir("/proc") else { return false };
    processes.flatten().any(|process| {
        let name = process.file_name();
        let is_pid = name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n != me);
        is_pid
            && std::fs::read_dir(process.path().join("fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    rustix::fs::stat(fd.path()).is_ok_and(|s| s.st_dev == device && s.st_ino == inode)
                })
            })
    })
}

fn exit_code(status: WaitStatus) -> i32 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 127,
    }
}

/// Reports a wait status to keel on fd 0 (a pipe keel reads); nothing when fd 0 is not
/// that pipe.
fn report_raw(raw: i32) {
    let stdin = std::io::stdin();
    let _ = rustix::io::write(stdin.as_fd(), format!("{raw}\n").as_bytes());
}

/// The signals a process group gets from keel or from the command itself. The launcher
/// handles them (its children get them directly from the group), so it stays to report.
const HANDLED: &[tokio::signal::unix::SignalKind] = &[
    tokio::signal::unix::SignalKind::terminate(),
    tokio::signal::unix::SignalKind::interrupt(),
    tokio::signal::unix::SignalKind::hangup(),
    tokio::signal::unix::SignalKind::quit(),
    tokio::signal::unix::SignalKind::user_defined1(),
    tokio::signal::unix::SignalKind::user_defined2(),
    tokio::signal::unix::SignalKind::alarm(),
];

/// Handles [`HANDLED`] on a thread of its own; returns once the handlers are installed
/// (before the child starts, so no signal can kill the launcher in between). With
/// `parent`, a signal that arrives once the parent is gone (the parent-death signal)
/// kills the process group.
fn handle_signals(parent: Option<Pid>) -> std::io::Result<()> {
    let (ready, installed) = std::sync::mpsc::channel();
    std::thread::Builder::new().name("keel-launcher-signals".into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        runtime.block_on(async move {
            let mut streams = Vec::new();
            for kind in HANDLED {
                match tokio::signal::unix::signal(*kind) {
                    Ok(stream) => streams.push(stream),
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                }
            }
            let _ = ready.send(Ok(()));
            loop {
                let arrivals = streams.iter_mut().map(|s| Box::pin(s.recv()));
                futures::future::select_all(arrivals).await;
                if let Some(parent) = parent
                    && rustix::process::getppid() != Some(parent)
                {
                    let _ = rustix::process::kill_process_group(rustix::process::getpgrp(), Signal::KILL);
                    std::process::exit(128 + Signal::KILL.as_raw());
                }
            }
        });
    })?;
    installed.recv().map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &[&str]) -> Vec<OsString> {
        text.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_protocol_round_trips() {
        let launched = launcher_args("echo hi", true, None);
        let invocation = parse(&launched[1..]).unwrap();
        assert_eq!(
            invocation.role,
            Role::Launcher {
                parent: Pid::from_raw(std::process::id() as i32).unwrap(),
                pid_namespace: true,
                stdio: false
            }
        );
        assert_eq!(invocation.command, args(&["bash", "-c", "echo hi"]));
        assert_eq!(invocation.sandbox, None);
        assert_eq!(parse(&args(&["--init", "--", "bash"])).unwrap().role, Role::Init { stdio: false });
        assert_eq!(parse(&args(&["--init", "--stdio", "--", "a"])).unwrap().role, Role::Init { stdio: true });
        let policy = Policy {
            mode: crate::SandboxMode::WorkspaceWrite,
            network: false,
            writable: vec!["/w".into(), "/t".into()],
            hidden: vec!["/h".into()],
        };
        let launched = launcher_args("ls", false, Some(&policy));
        assert_eq!(parse(&launched[1..]).unwrap().sandbox, Some(policy.clone()));
        let launched = stdio_args(&args(&["npx", "-y", "server"]), true, Some(&policy));
        let invocation = parse(&launched[1..]).unwrap();
        assert_eq!(
            invocation.role,
            Role::Launcher {
                parent: Pid::from_raw(std::process::id() as i32).unwrap(),
                pid_namespace: true,
                stdio: true
            }
        );
        assert_eq!(invocation.command, args(&["npx", "-y", "server"]));
        assert_eq!(invocation.sandbox, Some(policy));
        for bad in [&["--", "bash"][..], &["--init"], &["--parent", "x", "--", "a"], &["--init", "--"]] {
            assert!(parse(&args(bad)).is_none(), "{bad:?}");
        }
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(parse_report(b"768\n").and_then(|s| s.code()), Some(3));
        assert_eq!(parse_report(b"9\n").and_then(|s| s.signal()), Some(9));
        assert!(parse_report(b"nope").is_none());
    }
}
