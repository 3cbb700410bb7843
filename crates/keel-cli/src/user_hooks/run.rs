//! Running one hook command as shell commands run: `bash -c` through keel's launcher
//! (`keel __exec --stdio`, so it dies with keel and runs in a PID namespace where
//! possible) inside the shell's sandbox, in its own process group, without keel's keys
//! in its environment; the event's JSON on stdin; stopped (the whole group) at its
//! timeout, when its output passes the limit, or when the turn no longer waits for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_sandbox::launch::{self, Launcher};
use keel_sandbox::{GitGuard, Policy, SandboxMode, SandboxSettings};
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Most stdout a hook may write: a decision is a few lines of JSON. Past it the hook is
/// stopped and its answer not used.
pub const STDOUT_LIMIT: usize = 64 * 1024;

/// Most stderr kept (the rest is read and dropped): a reason, or why it failed.
pub const STDERR_KEPT: usize = 16 * 1024;

/// How long output may still arrive once the command ended (a background process
/// holding the pipes is then stopped with the group).
const DRAIN: Duration = Duration::from_millis(500);

/// How hook commands start: as the shell tool's commands do.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// keel's launcher, when there is one (the `keel` binary).
    pub launcher: Option<Launcher>,
    /// The shell's sandbox.
    pub sandbox: SandboxSettings,
    /// Folders outside the project the sandbox lets commands write.
    pub allowed_roots: Vec<PathBuf>,
    /// Variables commands get although they look like credentials.
    pub env_passthrough: Vec<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code (128 + N for signal N).
    Exited(i32),
    /// It ran past its timeout and was stopped.
    TimedOut(Duration),
    /// Its stdout passed [`STDOUT_LIMIT`] and it was stopped.
    TooLarge,
    /// It could not start, and why.
    NotStarted(String),
}

/// What a run left.
#[derive(Debug, Clone)]
pub struct Output {
    /// How it ended.
    pub ended: Ended,
    /// Its stdout (at most [`STDOUT_LIMIT`] bytes).
    pub stdout: Vec<u8>,
    /// Its stderr, at most [`STDERR_KEPT`] bytes of it, lossily decoded.
    pub stderr: String,
    /// How long it ran.
    pub took: Duration,
}

/// Kills the command's whole process group when dropped: a hook never outlives the run
/// that waited for it, whatever path ends the wait (an abort drops the future).
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = rustix::process::kill_process_group(group, Signal::KILL);
        }
    }
}

/// The sandbox of one run: its policy and private TMPDIR, and the guard of git's hooks
/// and config. `Err` when a sandbox that was asked for cannot be set up.
struct Confined {
    policy: Option<Policy>,
    tmp: Option<PathBuf>,
    git: Option<GitGuard>,
}

impl Confined {
    async fn new(launch: &Launch, workspace: &Path) -> Result<Confined, String> {
        let none = Confined { policy: None, tmp: None, git: None };
        if launch.sandbox.mode == SandboxMode::Off {
            return Ok(none);
        }
        let Some(launcher) = &launch.launcher else {
            if launch.sandbox.auto {
                return Ok(none);
            }
            return Err("the sandbox needs keel's launcher, so the hook was not run".to_owned());
        };
        if launch.sandbox.auto && !launch::sandbox_support(&launcher.program).await.enforces(&launch.sandbox)
        {
            return Ok(none);
        }
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let tmp = std::env::temp_dir().join(format!("keel-hook-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&tmp)
            .map_err(|e| format!("cannot create the hook's TMPDIR {}: {e}", tmp.display()))?;
        let policy = Policy::resolve(&launch.sandbox, workspace, &tmp, &launch.allowed_roots);
        let git = policy
            .as_ref()
            .filter(|p| p.mode == SandboxMode::WorkspaceWrite)
            .and_then(|_| GitGuard::take(workspace));
        Ok(Confined { policy, tmp: Some(tmp), git })
    }

    fn finish(self, command: &str) {
        if let Some(git) = &self.git {
            let restored = git.restore();
            if !restored.is_empty() {
                tracing::warn!(hook = command, "a hook changed {}; undone", restored.join(", "));
            }
        }
        if let Some(tmp) = &self.tmp {
            let _ = std::fs::remove_dir_all(tmp);
        }
    }
}

/// Runs `command` in `workspace` with `input` on stdin, for at most `timeout`.
pub async fn run(
    launch: &Launch,
    command: &str,
    workspace: &Path,
    input: &[u8],
    timeout: Duration,
) -> Output {
    let started = Instant::now();
    let confined = match Confined::new(launch, workspace).await {
        Ok(confined) => confined,
        Err(why) => return not_started(why, started),
    };
    let output = match spawn(launch, command, workspace, &confined).await {
        Ok(child) => watch(child, input, timeout, started).await,
        Err(e) => not_started(format!("cannot start bash: {e}"), started),
    };
    confined.finish(command);
    output
}

fn not_started(why: String, started: Instant) -> Output {
    Output {
        ended: Ended::NotStarted(why),
        stdout: Vec::new(),
        stderr: String::new(),
        took: started.elapsed(),
    }
}

async fn spawn(
    launch: &Launch,
    command_line: &str,
    workspace: &Path,
    confined: &Confined,
) -> std::io::Result<tokio::process::Child> {
    let mut command = match &launch.launcher {
        Some(launcher) => {
            let pid_namespace = launcher.pid_namespace && launch::pid_namespace_available().await;
            let line: Vec<OsString> = vec!["bash".into(), "-c".into(), command_line.into()];
            let mut command = tokio::process::Command::new(&launcher.program);
            command.args(launch::stdio_args(&line, pid_namespace, confined.policy.as_ref()));
            command
        }
        None if confined.policy.is_some() => {
            return Err(std::io::Error::other("a sandboxed hook needs keel's launcher"));
        }
        None => {
            let mut command = tokio::process::Command::new("bash");
            command.arg("-c").arg(command_line);
            command
        }
    };
    for (name, value) in std::env::vars_os() {
        let Some(text) = name.to_str() else { continue };
        let secret = keel_sandbox::secrets::is_secret(text, &value.to_string_lossy());
        if secret && !launch.env_passthrough.iter().any(|keep| keep == text) {
            command.env_remove(&name);
        }
    }
    if let Some(tmp) = &confined.tmp {
        for name in ["TMPDIR", "TMP", "TEMP"] {
            command.env(name, tmp);
        }
    }
    command
        .current_dir(workspace)
        .env("KEEL_PROJECT_DIR", workspace)
        // Scripts written for Claude Code find the project there.
        .env("CLAUDE_PROJECT_DIR", workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command.spawn()
}

/// Feeds stdin, reads both outputs and waits, under the timeout.
async fn watch(
    mut child: tokio::process::Child,
    input: &[u8],
    timeout: Duration,
    started: Instant,
) -> Output {
    let guard = GroupGuard(child.id().and_then(|id| Pid::from_raw(id as i32)));
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return not_started("its pipes were not set up".to_owned(), started);
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let work = async {
        // A hook that does not read its stdin ends the write when it exits (EPIPE).
        let feed = async move {
            let _ = stdin.write_all(input).await;
        };
        let io = async { tokio::join!(feed, read_capped(stdout, &mut out), read_kept(stderr, &mut err)).1 };
        let mut io = std::pin::pin!(io);
        let status = tokio::select! {
            too_large = &mut io => match too_large {
                true => return Ended::TooLarge,
                false => None,
            },
            status = child.wait() => status.ok(),
        };
        // The command ended: its output may still be draining, briefly.
        if status.is_some() && tokio::time::timeout(DRAIN, io).await.unwrap_or(false) {
            return Ended::TooLarge;
        }
        let status = match status {
            Some(status) => Some(status),
            None => child.wait().await.ok(),
        };
        Ended::Exited(status.map_or(127, code))
    };
    let ended = match tokio::time::timeout(timeout, work).await {
        Ok(ended) => ended,
        Err(_) => Ended::TimedOut(timeout),
    };
    drop(guard);
    Output {
        ended,
        stdout: out,
        stderr: String::from_utf8_lossy(&err).trim_end().to_owned(),
        took: started.elapsed(),
    }
}

fn code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Reads `pipe` into `into` up to [`STDOUT_LIMIT`]; `true` when it wrote more.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, into: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) if into.len() + n > STDOUT_LIMIT => return true,
            Ok(n) => into.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads `pipe` to its end, keeping its first [`STDERR_KEPT`] bytes in `into`.
async fn read_kept(mut pipe: impl AsyncRead + Unpin, into: &mut Vec<u8>) {
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = STDERR_KEPT.saturating_sub(into.len()).min(n);
                into.extend_from_slice(&buf[..room]);
            }
        }
    }
}
