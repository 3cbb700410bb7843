//! keel's side of the engine process: starting it, sending it jobs, relaying what it
//! says, and noticing when it dies.
//!
//! The engine is a child process (Ollama and LM Studio run their engines the same way):
//! a crash in llama.cpp's native code ends that process, not keel. Its stdout carries the
//! protocol ([`super::protocol`]); its stderr is read into a short tail for the crash
//! report and the log.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_llm::CancellationToken;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use super::protocol::{FromEngine, Hello, JobSpec, KernelReport, Loaded, MAX_LINE, Probe, ToEngine};
use crate::LocalError;

/// How to start the engine process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl EngineCommand {
    /// The argument that makes a program embedding the engine run it (see
    /// [`super::child::main`]): `keel __engine`.
    pub const SUBCOMMAND: &'static str = "__engine";

    /// This program, as `<this program> __engine`.
    pub fn current_exe() -> Result<EngineCommand, LocalError> {
        let program = std::env::current_exe().map_err(|e| {
            LocalError::Engine(format!("cannot find keel's own program to start the engine: {e}"))
        })?;
        Ok(EngineCommand { program, args: vec![Self::SUBCOMMAND.into()] })
    }
}

/// Lines of the engine's stderr kept for a crash report.
const STDERR_LINES: usize = 12;
/// How long a cancelled job may take to stop before its engine is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// How the engine process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The last lines it wrote to stderr.
    pub stderr: Vec<String>,
    /// The kernels it ran.
    pub kernels: KernelReport,
}

impl Crash {
    /// `SIGSEGV`, `exit code 3`, or `a broken reply`.
    pub fn how(&self) -> String {
        match (self.signal, self.code) {
            (Some(signal), _) => signal_name(signal),
            (None, Some(code)) => format!("exit code {code}"),
            (None, None) => "an unreadable reply".into(),
        }
    }

    /// The engine's last stderr line that says something, if any.
    pub fn last_words(&self) -> Option<&str> {
        self.stderr.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty())
    }
}

/// `SIGSEGV` for 11 and so on (`signal N` for the rest).
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        31 => "SIGSYS",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

/// How a job ended for the engine that ran it.
#[derive(Debug)]
pub(crate) enum JobEnd {
    /// The engine answered it (done, cancelled or failed) and waits for the next.
    Answered,
    /// The job was cancelled and the engine did not stop in time: it was killed.
    Killed,
    /// The engine died.
    Crashed(Crash),
}

/// A running engine process with a model loaded.
pub(crate) struct EngineProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    loaded: Loaded,
    next_id: u64,
}

impl std::fmt::Debug for EngineProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineProcess").field("pid", &self.child.id()).finish_non_exhaustive()
    }
}

/// A started process, before its first answer.
struct Started {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

async fn start(command: &EngineCommand, hello: &Hello) -> Result<Started, LocalError> {
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            LocalError::Engine(format!("cannot start the model engine ({}): {e}", command.program.display()))
        })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(LocalError::Engine("the model engine started without its pipes".into()));
    };
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_LINES)));
    tokio::spawn(keep_stderr(BufReader::new(stderr), Arc::clone(&tail)));
    let line = line_of(hello)?;
    if let Err(e) = stdin.write_all(line.as_bytes()).await {
        tracing::debug!("writing to the engine failed: {e}");
    }
    Ok(Started { child, stdin, stdout: BufReader::new(stdout), stderr: tail })
}

/// Starts an engine for `hello` (a [`Hello::Serve`]) and waits until its model is loaded.
pub(crate) async fn spawn(command: &EngineCommand, hello: &Hello) -> Result<EngineProcess, LocalError> {
    let mut started = start(command, hello).await?;
    match read_message(&mut started.stdout).await {
        Ok(Some(FromEngine::Loaded(loaded))) => Ok(EngineProcess {
            child: started.child,
            stdin: started.stdin,
            stdout: started.stdout,
            stderr: started.stderr,
            loaded,
            next_id: 1,
        }),
        Ok(Some(FromEngine::Failed { message, .. })) => Err(LocalError::Engine(message)),
        Ok(Some(other)) => {
            Err(LocalError::Engine(format!("the model engine answered {other:?} instead of loading")))
        }
        Ok(None) | Err(_) => {
            let crash = ended(&mut started.child, &started.stderr, KernelReport::default()).await;
            Err(LocalError::Engine(load_failure(&crash)))
        }
    }
}

/// Asks an engine what CPU it runs on and which kernels it would load.
pub(crate) async fn probe(command: &EngineCommand, hello: &Hello) -> Result<Probe, LocalError> {
    let mut started = start(command, hello).await?;
    let answer = read_message(&mut started.stdout).await;
    let _ = started.child.wait().await;
    match answer {
        Ok(Some(FromEngine::Probed(probe))) => Ok(probe),
        Ok(Some(FromEngine::Failed { message, .. })) => Err(LocalError::Engine(message)),
        _ => {
            let crash = ended(&mut started.child, &started.stderr, KernelReport::default()).await;
            Err(LocalError::Engine(load_failure(&crash)))
        }
    }
}

fn load_failure(crash: &Crash) -> String {
    let words = crash.last_words().map(|w| format!(": {w}")).unwrap_or_default();
    format!("the model engine stopped while starting ({}){words}", crash.how())
}

impl EngineProcess {
    /// What the engine reported when it loaded.
    pub(crate) fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Runs one job, relaying the engine's messages for it (text, restarts, then one of
    /// done, cancelled, failed) through `map` to `relay`. A cancel of `cancel`, or `relay`
    /// closing, stops the job between two tokens.
    pub(crate) async fn run_job<T>(
        &mut self,
        mut spec: JobSpec,
        cancel: &CancellationToken,
        relay: &mpsc::UnboundedSender<T>,
        mut map: impl FnMut(FromEngine) -> T,
    ) -> JobEnd {
        spec.id = self.next_id;
        self.next_id += 1;
        let id = spec.id;
        let sent = match line_of(&ToEngine::Job(spec)) {
            Ok(line) => self.stdin.write_all(line.as_bytes()).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            return JobEnd::Crashed(self.ended().await);
        }
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let stop = async {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = relay.closed() => {}
                }
            };
            let message = tokio::select! {
                message = read_message(&mut self.stdout) => message,
                _ = stop, if deadline.is_none() => {
                    deadline = Some(tokio::time::Instant::now() + CANCEL_GRACE);
                    if let Ok(line) = line_of(&ToEngine::Cancel { id }) {
                        let _ = self.stdin.write_all(line.as_bytes()).await;
                    }
                    continue;
                }
                _ = sleep_until(deadline) => {
                    tracing::warn!("the model engine did not stop within {CANCEL_GRACE:?} of a cancel; killing it");
                    let _ = self.child.start_kill();
                    let _ = self.child.wait().await;
                    let _ = relay.send(map(FromEngine::Cancelled));
                    return JobEnd::Killed;
                }
            };
            match message {
                Ok(Some(message @ (FromEngine::Text { .. } | FromEngine::Restarted { .. }))) => {
                    let _ = relay.send(map(message));
                }
                Ok(Some(
                    message @ (FromEngine::Done { .. } | FromEngine::Cancelled | FromEngine::Failed { .. }),
                )) => {
                    let _ = relay.send(map(message));
                    return JobEnd::Answered;
                }
                Ok(Some(other)) => {
                    tracing::warn!("the model engine sent {other:?} during a job; stopping it");
                    let _ = self.child.start_kill();
                    return JobEnd::Crashed(self.ended().await);
                }
                Ok(None) | Err(_) => return JobEnd::Crashed(self.ended().await),
            }
        }
    }

    async fn ended(&mut self) -> Crash {
        ended(&mut self.child, &self.stderr, self.loaded.kernels.clone()).await
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Waits (briefly) for a child whose stdout ended, and says how it ended.
async fn ended(child: &mut Child, stderr: &Arc<Mutex<VecDeque<String>>>, kernels: KernelReport) -> Crash {
    let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
        Ok(Ok(status)) => Some(status),
        _ => {
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    };
    // The stderr reader may still hold the last lines.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stderr = stderr.lock().map(|tail| tail.iter().cloned().collect()).unwrap_or_default();
    let (signal, code) = match status {
        Some(status) => (ExitStatus::signal(&status), status.code()),
        None => (None, None),
    };
    Crash { signal, code, stderr, kernels }
}

fn line_of<T: serde::Serialize>(message: &T) -> Result<String, LocalError> {
    let mut line = serde_json::to_string(message).map_err(|e| LocalError::Engine(e.to_string()))?;
    line.push('\n');
    Ok(line)
}

/// Reads one message; `None` at the end of the stream. A line over [`MAX_LINE`] or one
/// that does not parse is an error.
pub(crate) async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<FromEngine>> {
    let Some(line) = read_line(reader, MAX_LINE).await? else { return Ok(None) };
    serde_json::from_slice(&line).map(Some).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("the model engine sent a bad line: {e}"))
    })
}

/// One line without its newline, at most `max` bytes; `None` at the end of the stream.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (taken, ended) = super::protocol::take_line(&mut line, available, max)?;
        reader.consume(taken);
        if ended {
            return Ok(Some(line));
        }
    }
}

/// Keeps the engine's last stderr lines (each cut to 500 bytes) and logs them.
async fn keep_stderr<R: AsyncBufRead + Unpin>(mut reader: R, tail: Arc<Mutex<VecDeque<String>>>) {
    loop {
        match read_line(&mut reader, 64 << 10).await {
            Ok(Some(line)) => {
                let mut text = String::from_utf8_lossy(&line).into_owned();
                if text.len() > 500 {
                    let cut = (0..=500).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
                    text.truncate(cut);
                }
                tracing::debug!(target: "keel_local::engine", "{text}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(text);
                }
            }
            Ok(None) => return,
            // A line too long: skip to the next.
            Err(_) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[tokio::test]
    async fn lines_are_bounded() {
        let mut reader = BufReader::with_capacity(4, &b"abc\ndefgh\nij"[..]);
        assert_eq!(read_line(&mut reader, 8).await.unwrap(), Some(b"abc".to_vec()));
        assert_eq!(read_line(&mut reader, 8).await.unwrap(), Some(b"defgh".to_vec()));
        assert_eq!(read_line(&mut reader, 8).await.unwrap(), Some(b"ij".to_vec()));
        assert_eq!(read_line(&mut reader, 8).await.unwrap(), None);
        let mut long = BufReader::with_capacity(4, &b"0123456789\n"[..]);
        assert_eq!(read_line(&mut long, 8).await.unwrap_err().kind(), std::io::ErrorKind::InvalidData);
        let mut exact = BufReader::new(&b"01234567\n"[..]);
        assert_eq!(read_line(&mut exact, 8).await.unwrap(), Some(b"01234567".to_vec()));
    }

    #[test]
    fn crashes_say_how() {
        let crash = Crash {
            signal: Some(11),
            code: None,
            stderr: vec!["loading".into(), "ggml_abort: oops ".into(), "  ".into()],
            kernels: KernelReport::default(),
        };
        assert_eq!((crash.how(), crash.last_words()), ("SIGSEGV".to_owned(), Some("ggml_abort: oops")));
        assert_eq!(signal_name(64), "signal 64");
        let exited =
            Crash { signal: None, code: Some(3), stderr: Vec::new(), kernels: KernelReport::default() };
        assert_eq!((exited.how(), exited.last_words()), ("exit code 3".to_owned(), None));
    }
}
