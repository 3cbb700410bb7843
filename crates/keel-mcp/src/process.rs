//! A stdio server's process: started in its own process group (through keel's launcher
//! when there is one, so it dies with keel even on `kill -9`), with keel's credentials
//! removed from its environment, its stderr kept (the last lines) to say why it failed,
//! and the whole group killed when it is dropped.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_sandbox::launch;
use keel_sandbox::secrets::is_secret;
use keel_sandbox::{Policy, SandboxMode, SandboxSettings};
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::config::ServerConfig;

/// Lines of stderr kept, and characters per line.
const TAIL_LINES: usize = 20;
const TAIL_LINE_CHARS: usize = 300;
/// Bytes of one stderr line read into memory (the rest of a longer line is skipped).
const STDERR_LINE_BYTES: usize = 4096;
/// The longest line (one JSON-RPC message) a server may write on stdout.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// A server's stdout that fails once a line passes [`MAX_MESSAGE_BYTES`]: the MCP
/// library reads whole lines, and a server writing one without end would take all the
/// memory there is.
#[derive(Debug)]
pub(crate) struct BoundedLines<R> {
    inner: R,
    since_newline: usize,
    max: usize,
}

impl<R> BoundedLines<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        BoundedLines { inner, since_newline: 0, max }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
            std::task::Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let new = &buf.filled()[before..];
        this.since_newline = match new.iter().rposition(|&b| b == b'\n') {
            Some(at) => new.len() - at - 1,
            None => this.since_newline.saturating_add(new.len()),
        };
        if this.since_newline > this.max {
            // An error hands over no bytes.
            buf.set_filled(before);
            return std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the server sent a message longer than {} MiB; the connection was closed",
                    this.max >> 20
                ),
            )));
        }
        std::task::Poll::Ready(Ok(()))
    }
}

/// Reads one line, keeping at most `keep` bytes of it (the rest is read and dropped);
/// `None` at the end.
async fn capped_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    keep: usize,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    let mut read_any = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any.then(|| String::from_utf8_lossy(&line).into_owned()));
        }
        read_any = true;
        let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&available[..taken.min(room)]);
        reader.consume(taken);
        if ended {
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
    }
}

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
fn sandbox_policy(
    server: &str,
    config: &ServerConfig,
    hidden: &[PathBuf],
) -> std::io::Result<Option<(Policy, PathBuf)>> {
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
    let settings = SandboxSettings { mode, network: config.network, auto: false, hidden: hidden.to_vec() };
    Ok(Policy::resolve(&settings, &folder, &tmp, &[]).map(|policy| (policy, tmp)))
}

impl StdioProcess {
    /// Starts `config.command` (through `launcher`, the program implementing
    /// [`keel_sandbox::launch`], when given) with piped stdin, stdout and stderr.
    pub(crate) fn spawn(
        server: &str,
        config: &ServerConfig,
        options: &crate::options::McpOptions,
        groups: &Arc<Groups>,
    ) -> std::io::Result<(StdioProcess, BoundedLines<ChildStdout>, ChildStdin)> {
        let program = config.command.clone().unwrap_or_default();
        let sandbox = sandbox_policy(server, config, &options.hidden)?;
        let mut command = match options.launcher.as_deref() {
            Some(launcher) => {
                let mut line: Vec<OsString> = vec![program.into()];
                line.extend(config.args.iter().map(OsString::from));
                let mut command = Command::new(launcher);
                let policy = sandbox.as_ref().map(|(policy, _)| policy);
                command.args(launch::stdio_args(&line, options.pid_namespace, policy));
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
                let mut reader = BufReader::new(err);
                while let Ok(Some(line)) = capped_line(&mut reader, STDERR_LINE_BYTES).await {
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
        let stdout = BoundedLines::new(stdout, MAX_MESSAGE_BYTES);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::AsyncReadExt;

    /// Issue 28, item 6: an endless stderr line took keel to 2.1 GB.
    #[tokio::test]
    async fn stderr_lines_are_kept_short_however_long_they_are() {
        let long = format!("{}\nnext\n", "x".repeat(1 << 20));
        let mut reader = BufReader::with_capacity(1024, long.as_bytes());
        assert_eq!(capped_line(&mut reader, 16).await.unwrap().unwrap(), "x".repeat(16));
        assert_eq!(capped_line(&mut reader, 16).await.unwrap().unwrap(), "next\n");
        assert_eq!(capped_line(&mut reader, 16).await.unwrap(), None);
    }

    /// The same for stdout, where the MCP library would buffer a whole line.
    #[tokio::test]
    async fn a_message_past_the_bound_closes_the_stream() {
        let mut fine = BoundedLines::new(&b"{\"a\":1}\n{\"b\":2}\n"[..], 8);
        let mut out = Vec::new();
        fine.read_to_end(&mut out).await.unwrap();
        assert_eq!(out.len(), 16);
        let endless = [b'x'; 64];
        let mut bounded = BoundedLines::new(&endless[..], 32);
        let error = bounded.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    }
}
