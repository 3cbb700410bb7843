//! A stdio server's process: started in its own process group (through keel's launcher
//! when there is one, so it dies with keel even on `kill -9`), with keel's credentials
//! removed from its environment, its stderr kept (the last lines) to say why it failed,
//! and the whole group killed when it is dropped.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools::launch;
use keel_tools::sandbox::{Policy, SandboxMode, SandboxSettings};
use keel_tools::shell::is_secret;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::config::ServerConfig;

/// Lines of stderr kept, and characters per line.
const TAIL_LINES: usize = 20;
const TAIL_LINE_CHARS: usize = 300;

/// The last lines a server wrote on stderr.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: Mutex<VecDeque<String>>,
    /// Set once stderr is closed (every line is in).
    closed: tokio::sync::Notify,
    done: std::sync::atomic::AtomicBool,
}

impl StderrTail {
    fn close(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Release);
        self.closed.notify_waiters();
    }

    /// Waits up to `wait` for stderr to close, so the last lines are in.
    pub(crate) async fn settled(&self, wait: Duration) {
        let closed = self.closed.notified();
        if !self.done.load(std::sync::atomic::Ordering::Acquire) {
            let _ = tokio::time::timeout(wait, closed).await;
        }
    }

    fn push(&self, line: &str) {
        let mut line = line.trim_end().to_owned();
        if let Some((cut, _)) = line.char_indices().nth(TAIL_LINE_CHARS) {
            line.truncate(cut);
            line.push('…');
        }
        if let Ok(mut lines) = self.lines.lock() {
            if lines.len() == TAIL_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }

    /// The last `n` non-empty lines, joined with ` | `.
    pub(crate) fn last(&self, n: usize) -> String {
        let Ok(lines) = self.lines.lock() else { return String::new() };
        let kept: Vec<&str> = lines.iter().map(String::as_str).filter(|l| !l.trim().is_empty()).collect();
        kept[kept.len().saturating_sub(n)..].join(" | ")
    }
}

/// The process groups of a server's live processes, so they can be killed even while
/// their owner is busy (e.g. in the middle of a handshake).
#[derive(Debug, Default)]
pub(crate) struct Groups {
    live: Mutex<Vec<Pid>>,
}

impl Groups {
    /// Kills every live group at once.
    pub(crate) fn kill_all(&self) {
        if let Ok(live) = self.live.lock() {
            for group in live.iter() {
                let _ = rustix::process::kill_process_group(*group, Signal::KILL);
            }
        }
    }

    fn add(&self, group: Pid) {
        if let Ok(mut live) = self.live.lock() {
            live.push(group);
        }
    }

    fn remove(&self, group: Pid) {
        if let Ok(mut live) = self.live.lock() {
            live.retain(|g| *g != group);
        }
    }
}

/// A running stdio server. Dropping it kills its process group.
#[derive(Debug)]
pub(crate) struct StdioProcess {
    group: Option<Pid>,
    groups: Arc<Groups>,
    stderr: Arc<StderrTail>,
    /// How the process ended (`None` while it runs), from a task that waits for it.
    exit: watch::Receiver<Option<String>>,
}

/// The environment a server gets: keel's, minus credentials (by name or value) except
/// the ones named in `env_vars`, plus `env`.
fn environment(command: &mut Command, config: &ServerConfig) {
    for (name, value) in std::env::vars_os() {
        let Some(text) = name.to_str() else { continue };
        if is_secret(text, &value.to_string_lossy()) && !config.env_vars.iter().any(|keep| keep == text) {
            command.env_remove(&name);
        }
    }
    command.envs(&config.env);
}

/// The sandbox policy of a stdio server: its folder (`cwd`, else keel's) writable under
/// `workspace-write`, a private temporary folder (which stays until keel ends: the
/// server may keep files there for its whole life), package caches as for shell commands.
fn sandbox_policy(server: &str, config: &ServerConfig) -> std::io::Result<Option<(Policy, PathBuf)>> {
    let Some(mode) = config.sandbox.as_deref().and_then(SandboxMode::parse) else {
        return Ok(None);
    };
    if mode == SandboxMode::Off {
        return Ok(None);
    }
    let folder = match &config.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let tmp = std::env::temp_dir().join(format!("keel-mcp-{}-{server}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let settings = SandboxSettings { mode, network: config.network, auto: false };
    Ok(Policy::resolve(&settings, &folder, &tmp, &[]).map(|policy| (policy, tmp)))
}

impl StdioProcess {
    /// Starts `config.command` (through `launcher`, the program implementing
    /// [`keel_tools::launch`], when given) with piped stdin, stdout and stderr.
    pub(crate) fn spawn(
        server: &str,
        config: &ServerConfig,
        launcher: Option<&Path>,
        groups: &Arc<Groups>,
    ) -> std::io::Result<(StdioProcess, ChildStdout, ChildStdin)> {
        let program = config.command.clone().unwrap_or_default();
        let sandbox = sandbox_policy(server, config)?;
        let mut command = match launcher {
            Some(launcher) => {
                let mut line: Vec<OsString> = vec![program.into()];
                line.extend(config.args.iter().map(OsString::from));
                let mut command = Command::new(launcher);
                command.args(launch::stdio_args(&line, sandbox.as_ref().map(|(policy, _)| policy)));
                command
            }
            None if sandbox.is_some() => {
                return Err(std::io::Error::other(
                    "a sandboxed server needs keel's launcher (the keel binary); set sandbox = \"off\" for this server",
                ));
            }
            None => {
                let mut command = Command::new(program);
                command.args(&config.args);
                command
            }
        };
        if let Some(dir) = &config.cwd {
            command.current_dir(dir);
        }
        environment(&mut command, config);
        if let Some((_, tmp)) = &sandbox {
            command.env("TMPDIR", tmp);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let group = child.id().and_then(|id| Pid::from_raw(id as i32));
        if let Some(group) = group {
            groups.add(group);
        }
        let stderr = Arc::new(StderrTail::default());
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(std::io::Error::other("the server's pipes were not set up"));
        };
        if let Some(err) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            let server = server.to_owned();
            tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %server, "stderr: {line}");
                    tail.push(&line);
                }
                tail.close();
            });
        }
        let (report, exit) = watch::channel(None);
        tokio::spawn(async move {
            let ended = match child.wait().await {
                Ok(status) => describe(status),
                Err(e) => format!("could not be waited for ({e})"),
            };
            let _ = report.send(Some(ended));
        });
        Ok((StdioProcess { group, groups: Arc::clone(groups), stderr, exit }, stdout, stdin))
    }

    /// What the server wrote last on stderr.
    pub(crate) fn stderr(&self) -> &Arc<StderrTail> {
        &self.stderr
    }

    /// A receiver of how the process ended (`None` while it runs).
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<String>> {
        self.exit.clone()
    }

    /// How the process ended, if it has: `exited with status 3`, `killed by signal 9`.
    pub(crate) fn ended(&self) -> Option<String> {
        self.exit.borrow().clone()
    }

    /// Waits for the process to end and says how it did.
    pub(crate) async fn exited(&self) -> String {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().unwrap_or_default(),
            Err(_) => "ended".to_owned(),
        }
    }

    /// Waits up to `wait` for the process to end, then says how it did, if it has.
    pub(crate) async fn ended_within(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.exited()).await.ok()
    }

    fn signal(&self, signal: Signal) {
        if let Some(group) = self.group {
            let _ = rustix::process::kill_process_group(group, signal);
        }
    }

    /// Asks the group to stop (SIGTERM), waits up to `grace`, then kills it.
    pub(crate) async fn stop(&self, grace: Duration) {
        self.signal(Signal::TERM);
        let _ = self.ended_within(grace).await;
        self.signal(Signal::KILL);
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".to_owned(),
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        self.signal(Signal::KILL);
        if let Some(group) = self.group {
            self.groups.remove(group);
        }
    }
}
