//! The shell tool: `bash -c` in its own process group, output bounded, the whole group
//! stopped on timeout, abort or exit.

use keel_agent::ToolErrorKind;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use rustix::process::{Pid, Signal};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

use crate::ToolsConfig;
use crate::output::Capture;
use crate::sandboxed::Prepared;
use crate::workspace::Roots;
use keel_sandbox::launch;
use keel_sandbox::secrets::is_secret;

/// Arguments of `shell`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The bash command line to run.
    pub command: String,
    /// Seconds before the command is stopped (default 120).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Folder to run in (default: the workspace root).
    #[serde(default)]
    pub workdir: Option<String>,
}

/// Runs shell commands.
#[derive(Debug, Clone)]
pub struct Shell {
    config: Arc<ToolsConfig>,
}

impl Shell {
    /// A shell tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        Shell { config }
    }
}

/// Removes credentials from a command's environment, except the names in `passthrough`.
fn scrub_environment(command: &mut tokio::process::Command, passthrough: &[String]) {
    for (name, value) in std::env::vars_os() {
        let Some(name_text) = name.to_str() else { continue };
        if is_secret(name_text, &value.to_string_lossy()) && !passthrough.iter().any(|p| p == name_text) {
            command.env_remove(&name);
        }
    }
}

/// Kills the whole process group when dropped, so no path leaves an orphan behind.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            let _ = rustix::process::kill_process_group(pgid, signal);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::KILL);
    }
}

async fn maybe(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(timer) => timer.as_mut().await,
        None => std::future::pending().await,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Timeout(u64),
    Aborted,
    Background,
}

impl Tool for Shell {
    type Args = ShellArgs;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Run a bash command in the workspace (stdin closed, stderr merged into stdout). Output ends with [exit code: N] (or (no output; exit code N)); long output is cut in the middle and saved whole to a file it names."
    }

    fn effect(&self, _arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Runs
    }

    fn call(
        &self,
        args: ShellArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let config = Arc::clone(&self.config);
        async move { run(&config, args, ctx).await }
    }
}

async fn run(config: &ToolsConfig, args: ShellArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::new(ToolErrorKind::InvalidArguments, "the command is empty"));
    }
    let roots = Roots::for_call(&ctx, config)?;
    let workdir = match args.workdir.as_deref().filter(|w| !w.trim().is_empty()) {
        Some(dir) => {
            let path = roots.resolve_existing(dir, false)?;
            if !path.is_dir() {
                return Err(ToolError::new(
                    ToolErrorKind::NotADirectory,
                    format!("workdir `{dir}` is not a folder"),
                ));
            }
            path
        }
        None => roots.root().to_path_buf(),
    };
    let timeout_secs = args
        .timeout_secs
        .unwrap_or(config.shell_timeout.as_secs())
        .clamp(1, config.shell_max_timeout.as_secs());
    let artifacts = crate::artifacts_dir(&ctx);
    let started = std::time::Instant::now();
    let sandbox = Prepared::new(config, roots.root(), &artifacts, &sanitize(&ctx.call_id)).await?;
    let prepared = started.elapsed();
    let mut running = spawn(config, &args.command, &workdir, sandbox.as_ref()).await?;
    let spawned = started.elapsed();
    let spill = artifacts.join(format!("shell-{}.log", sanitize(&ctx.call_id)));
    let mut capture = Capture::new(config.output_limits, spill);
    let watched = watch(&mut running, &mut capture, config, timeout_secs, &ctx).await;
    // Anything left in the group (e.g. a detached background job) is stopped too.
    drop(running);
    tracing::debug!(?prepared, ?spawned, done = ?started.elapsed(), "shell call's phases");
    let mut output = render(capture, watched);
    if let Some(note) = crate::no_repository::note(&args.command, output.is_error, &workdir) {
        output.content.push('\n');
        output.content.push_str(note);
    }
    if config.relative_output_paths {
        let forms = [roots.root(), &*ctx.workspace];
        output.content = crate::output::relative_paths(&output.content, &forms);
    }
    if let Some(sandbox) = sandbox {
        sandbox.finish(&mut output);
    }
    if config.read_before_change {
        crate::seen::mark_shown(&roots, &ctx.state, &args.command, &output.content);
    }
    Ok(output)
}

/// A started command: the process keel waits on (bash, or the launcher), the guard of
/// its group, the output pipe, and the launcher's status pipe.
struct Running {
    child: tokio::process::Child,
    guard: GroupGuard,
    output: tokio::net::unix::pipe::Receiver,
    status: Option<tokio::net::unix::pipe::Receiver>,
}

/// Starts `bash -c command` in its own process group, through the launcher when one is
/// configured (directly if the launcher cannot be started), with stdin closed, stdout
/// and stderr on one pipe, credentials removed.
async fn spawn(
    config: &ToolsConfig,
    command_line: &str,
    workdir: &std::path::Path,
    sandbox: Option<&Prepared>,
) -> Result<Running, ToolError> {
    if let Some(launcher) = &config.launcher {
        let pid_namespace = launcher.pid_namespace && launch::pid_namespace_available().await;
        match start(config, Some((launcher, pid_namespace)), command_line, workdir, sandbox) {
            Ok(running) => return Ok(running),
            // A sandboxed command never runs without its launcher.
            Err(e) if sandbox.is_some() => {
                return Err(ToolError::new(
                    ToolErrorKind::SandboxUnavailable,
                    format!(
                        "cannot start the sandbox launcher {}: {e}; the command was not run",
                        launcher.program.display()
                    ),
                ));
            }
            Err(e) => tracing::warn!(
                "cannot start the launcher {}: {e}; running the command without it",
                launcher.program.display()
            ),
        }
    }
    start(config, None, command_line, workdir, None)
        .map_err(|e| ToolError::msg(format!("cannot start bash: {e}")))
}

fn start(
    config: &ToolsConfig,
    launcher: Option<(&launch::Launcher, bool)>,
    command_line: &str,
    workdir: &std::path::Path,
    sandbox: Option<&Prepared>,
) -> std::io::Result<Running> {
    let (reader, writer) = std::io::pipe()?;
    let writer_err = writer.try_clone()?;
    let mut status = None;
    let mut command = match launcher {
        Some((launcher, pid_namespace)) => {
            let mut command = tokio::process::Command::new(&launcher.program);
            command.args(launch::launcher_args(command_line, pid_namespace, sandbox.map(|s| &s.policy)));
            // The launcher reports bash's wait status on its fd 0.
            let (status_reader, status_writer) = std::io::pipe()?;
            command.stdin(Stdio::from(OwnedFd::from(status_writer)));
            status = Some(status_reader);
            command
        }
        None => {
            let mut command = tokio::process::Command::new("bash");
            command.arg("-c").arg(command_line).stdin(Stdio::null());
            command
        }
    };
    command
        .current_dir(workdir)
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::from(OwnedFd::from(writer_err)))
        .process_group(0)
        .kill_on_drop(true)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("NO_COLOR", "1");
    scrub_environment(&mut command, &config.env_passthrough);
    if let Some(sandbox) = sandbox {
        for name in ["TMPDIR", "TMP", "TEMP"] {
            command.env(name, &sandbox.tmp);
        }
    }
    let child = command.spawn()?;
    // Our copies of the pipes' write ends must close, or the reads never end.
    drop(command);
    let guard = GroupGuard { pgid: child.id().and_then(|id| Pid::from_raw(id as i32)) };
    let receiver =
        |fd: std::io::PipeReader| tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(fd));
    let status = status.map(receiver).transpose()?;
    Ok(Running { child, guard, output: receiver(reader)?, status })
}

/// How watching a command ended.
struct Watched {
    status: Option<std::process::ExitStatus>,
    stop: Option<Stop>,
    /// A process outside the stopped group still held the output; it was no longer read.
    abandoned: bool,
}

/// Reads the output until the command is done and its output closed; stops the group on
/// timeout, abort, or background processes lingering after bash ended.
async fn watch(
    running: &mut Running,
    capture: &mut Capture,
    config: &ToolsConfig,
    timeout_secs: u64,
    ctx: &ToolContext,
) -> Watched {
    let mut buf = vec![0u8; 64 * 1024];
    let mut report = Vec::new();
    let mut deadline: Option<Pin<Box<Sleep>>> =
        Some(Box::pin(tokio::time::sleep(Duration::from_secs(timeout_secs))));
    let mut escalate: Option<Pin<Box<Sleep>>> = None;
    let mut linger: Option<Pin<Box<Sleep>>> = None;
    let mut abandon: Option<Pin<Box<Sleep>>> = None;
    // Bash's status: reported by the launcher, or the waited process's own.
    let mut status: Option<std::process::ExitStatus> = None;
    let mut exited: Option<std::process::ExitStatus> = None;
    let mut child_done = false;
    let mut status_open = running.status.is_some();
    let mut stop: Option<Stop> = None;
    let mut pipe_open = true;
    let mut abandoned = false;
    // The last line of output, shown to whoever watches the loop, at most 4 times a second.
    let mut live = crate::output::LiveTail::default();
    let mut live_tick = tokio::time::interval(Duration::from_millis(250));
    live_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let guard = &running.guard;
    let terminate = |stop_now: Stop, escalate: &mut Option<Pin<Box<Sleep>>>| {
        guard.signal(Signal::TERM);
        *escalate = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
        stop_now
    };

    while pipe_open || status.is_none() {
        let known = status.is_some();
        tokio::select! {
            read = running.output.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => {
                    capture.push(&buf[..n]);
                    live.push(&buf[..n]);
                }
            },
            _ = live_tick.tick(), if pipe_open => {
                if let Some(line) = live.take_new() {
                    ctx.progress(line);
                }
            },
            read = read_some(&mut running.status, &mut report), if status_open => match read {
                Some(reported) => status = status.or(reported),
                None => status_open = false,
            },
            waited = running.child.wait(), if !child_done => {
                child_done = true;
                exited = waited.ok();
                if exited.is_none() {
                    break;
                }
            },
            _ = maybe(&mut deadline), if stop.is_none() => {
                deadline = None;
                stop = Some(terminate(Stop::Timeout(timeout_secs), &mut escalate));
            },
            _ = ctx.cancel.cancelled(), if stop.is_none() => {
                stop = Some(terminate(Stop::Aborted, &mut escalate));
            },
            _ = maybe(&mut linger) => {
                linger = None;
                if stop.is_none() {
                    stop = Some(terminate(Stop::Background, &mut escalate));
                }
            },
            _ = maybe(&mut escalate) => {
                escalate = None;
                guard.signal(Signal::KILL);
                abandon = Some(Box::pin(tokio::time::sleep(config.kill_grace.max(Duration::from_millis(500)))));
            },
            _ = maybe(&mut abandon) => {
                // Killed, yet the output is still open: a process that left the group
                // (setsid) holds it. Waiting for it could take forever.
                abandoned = pipe_open;
                break;
            },
        }
        // Without a report (no launcher, or it died first), the waited process's status.
        if status.is_none() && child_done && !status_open {
            status = exited;
        }
        // The command is done; output may still be draining. A background process
        // holding the pipe open gets a moment, then is stopped.
        if !known && status.is_some() && pipe_open && linger.is_none() {
            linger = Some(Box::pin(tokio::time::sleep(Duration::from_millis(300))));
        }
    }
    Watched { status: status.or(exited), stop, abandoned }
}

/// Reads the launcher's report: `Some(status)` once a whole line is in, `Some(None)`
/// for a partial read, `None` at the end of the pipe.
async fn read_some(
    pipe: &mut Option<tokio::net::unix::pipe::Receiver>,
    report: &mut Vec<u8>,
) -> Option<Option<std::process::ExitStatus>> {
    let pipe = pipe.as_mut()?;
    let mut buf = [0u8; 64];
    match pipe.read(&mut buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            report.extend_from_slice(&buf[..n]);
            let line = report.iter().position(|b| *b == b'\n')?;
            Some(launch::parse_report(&report[..line]))
        }
    }
}

/// The result the model sees: the output, what stopped the command, the exit code.
fn render(capture: Capture, watched: Watched) -> ToolOutput {
    let Watched { status, stop, abandoned } = watched;
    let code = status.map(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
    });
    let captured = capture.finish();
    let mut text = captured.text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match stop {
        Some(Stop::Timeout(secs)) => text.push_str(&format!("[timed out after {secs}s]\n")),
        Some(Stop::Aborted) => text.push_str("[killed: aborted]\n"),
        Some(Stop::Background) => text.push_str(
            "[background processes started by the command were stopped: the shell tool does not keep processes running]\n",
        ),
        None => {}
    }
    if abandoned {
        text.push_str("[a process that left the command's process group (setsid?) still runs and holds the output; its output is no longer read]\n");
    }
    let code_text = code.map_or_else(|| "unknown".to_owned(), |c| c.to_string());
    if text.is_empty() {
        // Said in one line, so a small model cannot read "no output" as a failure.
        text.push_str(&format!("(no output; exit code {code_text})"));
    } else {
        text.push_str(&format!("[exit code: {code_text}]"));
    }
    let failed = code != Some(0) || matches!(stop, Some(Stop::Timeout(_) | Stop::Aborted));
    if failed { ToolOutput::error(text) } else { ToolOutput::text(text) }
}

fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(64)
        .collect()
}

/// Where shell output files go when the context names no folder.
pub(crate) fn fallback_artifacts() -> PathBuf {
    std::env::temp_dir().join(format!("keel-artifacts-{}", std::process::id()))
}
