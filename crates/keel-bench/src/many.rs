//! Section 3: many sessions in one process, through the library, against a mock server
//! (in its own process) that answers after 100 ms.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::{
    Agent, AgentConfig, NullSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use keel_llm::CancellationToken;
use keel_llm::{HttpClient, ProviderConfig};
use keel_session::{JsonlStore, SessionStore, TurnEndReason};
use keel_tools::shell::ShellArgs;
use keel_tools::{ToolsConfig, builtin};

use crate::measure::{fmt, mb, peak_rss};
use crate::trajectory;

/// A `shell` stand-in that spawns nothing, so the figures show keel rather than the
/// cost of starting 2,000 processes on 2 cores.
pub(crate) struct InProcessShell;

impl Tool for InProcessShell {
    type Args = ShellArgs;
    fn name(&self) -> &str {
        "shell"
    }
    fn description(&self) -> &str {
        "Run a bash command."
    }
    async fn call(&self, args: ShellArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let output = match args.command.as_str() {
            "python3 hello.py" => "hello from the demo\n".to_owned(),
            "cat NOTES.md" => tokio::fs::read_to_string(ctx.workspace.join("NOTES.md"))
                .await
                .map_err(|e| ToolError::msg(e.to_string()))?,
            other => return Err(ToolError::msg(format!("stand-in shell cannot run {other}"))),
        };
        Ok(ToolOutput::text(format!("{output}[exit code: 0]")))
    }
}

/// Child process: runs `n` sessions concurrently and prints one JSON line of results.
pub fn child(url: &str, n: usize, real_shell: bool) {
    let _ = rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit { current: Some(65536), maximum: Some(65536) },
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let builtins: ToolRegistry = builtin(Arc::new(ToolsConfig::default()));
    // The registry keeps the first tool of a name: the stand-in goes in first.
    let tools = if real_shell {
        builtins
    } else {
        let mut tools = ToolRegistry::new();
        tools.register(InProcessShell);
        for name in builtins.names().filter(|n| *n != "shell") {
            if let Some(tool) = builtins.get(name) {
                tools.register_dyn(Arc::clone(tool));
            }
        }
        tools
    };
    let mut config = ProviderConfig::new(url, "mock");
    config.life.max_retries = 0;
    let client = Arc::new(HttpClient::new(config).unwrap());
    let store = Arc::new(JsonlStore::new(dir.path().join("sessions")).detached_sync(true));
    for i in 0..n {
        trajectory::workspace(&dir.path().join(format!("ws{i}")));
    }
    let started = Instant::now();
    let cpu_before = crate::measure::process_cpu();
    let (user_before, sys_before) = crate::measure::user_sys();
    let correct = runtime.block_on(async {
        let mut tasks = Vec::with_capacity(n);
        // One agent serves every session; each session brings its own context.
        let agent = Arc::new(
            Agent::builder_shared(client.clone())
                .config(AgentConfig { max_steps: 10, ..AgentConfig::default() })
                .tools(tools.clone())
                .build(),
        );
        for i in 0..n {
            let workspace = dir.path().join(format!("ws{i}"));
            let agent = Arc::clone(&agent);
            let store = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                let mut session = store.create(&workspace.display().to_string()).unwrap();
                let outcome = agent
                    .run_turn(
                        &mut session,
                        &SessionContext::new(&workspace),
                        trajectory::TASK,
                        &NullSink,
                        &CancellationToken::new(),
                    )
                    .await;
                check(outcome, &workspace)
            }));
        }
        let mut correct = 0;
        for task in tasks {
            if task.await.unwrap_or(false) {
                correct += 1;
            }
        }
        correct
    });
    let wall = started.elapsed();
    let cpu = crate::measure::process_cpu() - cpu_before;
    let (user, sys) = crate::measure::user_sys();
    println!(
        "{{\"wall_ns\":{},\"cpu_ns\":{},\"user_ns\":{},\"sys_ns\":{},\"correct\":{correct},\"peak_rss\":{}}}",
        wall.as_nanos(),
        cpu.as_nanos(),
        (user - user_before).as_nanos(),
        (sys - sys_before).as_nanos(),
        peak_rss()
    );
}

fn check(outcome: Result<keel_agent::TurnOutcome, keel_agent::AgentError>, workspace: &Path) -> bool {
    let Ok(outcome) = outcome else { return false };
    outcome.reason == TurnEndReason::Completed
        && outcome.steps == 6
        && outcome.tool_calls == 5
        && std::fs::read_to_string(workspace.join("NOTES.md"))
            .is_ok_and(|t| t.contains("hello from the demo"))
}

fn run_child(exe: &Path, url: &str, n: usize, real_shell: bool, tmp: Option<&str>) -> (Duration, usize, u64) {
    let mut command = Command::new(exe);
    command
        .args(["many-child", url, &n.to_string(), if real_shell { "real" } else { "stand-in" }])
        .stderr(Stdio::inherit());
    if let Some(dir) = tmp {
        command.env("TMPDIR", dir);
    }
    let out = command.output().unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        Duration::from_nanos(value["wall_ns"].as_u64().unwrap_or(0)),
        value["correct"].as_u64().unwrap_or(0) as usize,
        value["peak_rss"].as_u64().unwrap_or(0),
    )
}

/// Prints the many-sessions figures. With `real_shell`, the shell steps spawn bash and
/// python3 for real (slow: 2,000 processes on 2 cores).
pub fn many(n: usize, real_shell: bool) {
    let exe = std::env::current_exe().unwrap();
    let mut server = Command::new(&exe).args(["serve", "100"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    if let Some(stdout) = server.stdout.as_mut() {
        use std::io::BufRead;
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let url = line.trim().to_owned();
    println!(
        "\n[many] {n} concurrent sessions in one process (library, 2 worker threads, JSONL sessions), mock server with 100 ms latency in another process"
    );
    let shell = if real_shell {
        "real shell: bash + python3 / cat spawned per call"
    } else {
        "shell steps answered in-process"
    };
    println!("  {shell}");
    let tmpfs = std::path::Path::new("/dev/shm").is_dir().then_some("/dev/shm");
    for (label, tmp) in [("sessions on disk ", None), ("sessions on tmpfs", tmpfs)] {
        if label.contains("tmpfs") && tmp.is_none() {
            continue;
        }
        let (one_wall, one_ok, one_rss) = run_child(&exe, &url, 1, real_shell, tmp);
        let (wall, ok, rss) = run_child(&exe, &url, n, real_shell, tmp);
        println!(
            "  {label}  1 session {} ({}, {one_ok}/1 correct) | {n} sessions {} = {:.2}x, peak RSS {}, {ok}/{n} correct",
            fmt(one_wall),
            mb(one_rss),
            fmt(wall),
            wall.as_secs_f64() / one_wall.as_secs_f64().max(1e-9),
            mb(rss)
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
