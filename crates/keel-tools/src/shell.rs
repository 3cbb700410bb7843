//! The shell tool: `bash -c` in its own process group, output bounded, the whole group
//! stopped on timeout, abort or exit.

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
use crate::workspace::Roots;

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

/// True for variables that hold credentials (API keys, keel's own settings).
pub fn is_secret_var(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("KEEL_")
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_APIKEY")
        || upper == "API_KEY"
        || upper.ends_with("_SECRET")
        || upper.ends_with("_SECRET_KEY")
        || upper.ends_with("_SECRET_ACCESS_KEY")
        || ["OPENAI_", "ANTHROPIC_", "DEEPSEEK_", "OPENROUTER_"].iter().any(|p| upper.starts_with(p))
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
        return Err(ToolError::new("invalid_arguments", "the command is empty"));
    }
    let roots = Roots::for_call(&ctx, config)?;
    let workdir = match args.workdir.as_deref().filter(|w| !w.trim().is_empty()) {
        Some(dir) => {
            let path = roots.resolve_existing(dir, false)?;
            if !path.is_dir() {
                return Err(ToolError::new("not_a_directory", format!("workdir `{dir}` is not a folder")));
            }
            path
        }
        None => roots.root().to_path_buf(),
    };
    let timeout_secs = args
        .timeout_secs
        .unwrap_or(config.shell_timeout.as_secs())
        .clamp(1, config.shell_max_timeout.as_secs());

    let (reader, writer) =
        std::io::pipe().map_err(|e| ToolError::msg(format!("cannot create a pipe: {e}")))?;
    let writer_err = writer.try_clone().map_err(|e| ToolError::msg(format!("cannot create a pipe: {e}")))?;
    let mut command = tokio::process::Command::new("bash");
    command
        .arg("-c")
        .arg(&args.command)
        .current_dir(&workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(OwnedFd::from(writer)))
        .stderr(Stdio::from(OwnedFd::from(writer_err)))
        .process_group(0)
        .kill_on_drop(true)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("NO_COLOR", "1");
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_secret_var) {
            command.env_remove(&name);
        }
    }
    let mut child = command.spawn().map_err(|e| ToolError::msg(format!("cannot start bash: {e}")))?;
    // Our copies of the pipe's write end must close, or the read never ends.
    drop(command);
    let guard = GroupGuard { pgid: child.id().and_then(|id| Pid::from_raw(id as i32)) };
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| ToolError::msg(format!("cannot read the command's output: {e}")))?;

    let spill = crate::artifacts_dir(&ctx).join(format!("shell-{}.log", sanitize(&ctx.call_id)));
    let mut capture = Capture::new(config.output_limits, spill);
    let mut buf = vec![0u8; 64 * 1024];
    let mut deadline: Option<Pin<Box<Sleep>>> =
        Some(Box::pin(tokio::time::sleep(Duration::from_secs(timeout_secs))));
    let mut escalate: Option<Pin<Box<Sleep>>> = None;
    let mut linger: Option<Pin<Box<Sleep>>> = None;
    let mut status: Option<std::process::ExitStatus> = None;
    let mut stop: Option<Stop> = None;
    let mut pipe_open = true;

    let terminate = |stop_now: Stop, escalate: &mut Option<Pin<Box<Sleep>>>| {
        guard.signal(Signal::TERM);
        *escalate = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
        stop_now
    };

    while pipe_open || status.is_none() {
        tokio::select! {
            read = pipe.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => capture.push(&buf[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                status = exited.ok();
                if status.is_none() {
                    break;
                }
                // The command is done; output may still be draining. A background
                // process holding the pipe open gets a moment, then is stopped.
                if pipe_open && linger.is_none() {
                    linger = Some(Box::pin(tokio::time::sleep(Duration::from_millis(300))));
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
            },
        }
    }
    // Anything left in the group (e.g. a detached background job) is stopped too.
    drop(guard);

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
    let code_text = code.map_or_else(|| "unknown".to_owned(), |c| c.to_string());
    if text.is_empty() {
        // Said in one line, so a small model cannot read "no output" as a failure.
        text.push_str(&format!("(no output; exit code {code_text})"));
    } else {
        text.push_str(&format!("[exit code: {code_text}]"));
    }
    let failed = code != Some(0) || matches!(stop, Some(Stop::Timeout(_) | Stop::Aborted));
    Ok(ToolOutput { content: text, is_error: failed, concludes_turn: false })
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
