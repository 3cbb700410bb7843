//! What starting a shell command costs: `bash -c` alone, through the launcher
//! (`keel __exec`: parent-death signal, subreaper, status report), with a PID namespace,
//! and in the sandbox (Landlock ruleset, and the seccomp filter with the network off).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::ToolContext;
use keel_sandbox::launch::Launcher;
use keel_sandbox::{SandboxMode, SandboxSettings};
use keel_tools::ToolsConfig;

async fn median_call(config: ToolsConfig, ws: &std::path::Path, rounds: usize) -> Duration {
    let registry = keel_tools::builtin(Arc::new(config));
    let tool = registry.get("shell").unwrap();
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let prepared = tool.prepare(r#"{"command": "true"}"#).unwrap();
        let mut ctx = ToolContext::new(ws);
        ctx.artifacts = Some(Arc::from(ws.join(".artifacts").as_path()));
        let started = Instant::now();
        let out = prepared(ctx).await.unwrap();
        times.push(started.elapsed());
        assert_eq!(out.content, "(no output; exit code 0)", "{}", out.content);
    }
    times.sort();
    times[times.len() / 2]
}

/// Prints the median wall time of one `true` through each way of starting it.
pub fn shell_cost() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let keel = crate::task::keel_binary();
    let launcher = |pid_namespace| Some(Launcher { program: keel.clone(), pid_namespace });
    let sandbox =
        |mode, network| SandboxSettings { mode, network: Some(network), auto: false, hidden: Vec::new() };
    let cases: Vec<(&str, ToolsConfig)> = vec![
        ("bash -c", ToolsConfig::default()),
        ("launcher", ToolsConfig { launcher: launcher(false), ..ToolsConfig::default() }),
        ("launcher + PID namespace", ToolsConfig { launcher: launcher(true), ..ToolsConfig::default() }),
        (
            "launcher + sandbox (workspace-write)",
            ToolsConfig {
                launcher: launcher(false),
                sandbox: sandbox(SandboxMode::WorkspaceWrite, true),
                ..ToolsConfig::default()
            },
        ),
        (
            "launcher + sandbox + network off",
            ToolsConfig {
                launcher: launcher(false),
                sandbox: sandbox(SandboxMode::WorkspaceWrite, false),
                ..ToolsConfig::default()
            },
        ),
        (
            "PID namespace + sandbox (read-only mounts)",
            ToolsConfig {
                launcher: launcher(true),
                sandbox: sandbox(SandboxMode::WorkspaceWrite, true),
                ..ToolsConfig::default()
            },
        ),
    ];
    println!("shell call cost (median of 40 `true` calls, wall time):");
    for (name, config) in cases {
        let median = runtime.block_on(median_call(config, ws.path(), 40));
        println!("  {name:<44} {:>6.2} ms", median.as_secs_f64() * 1000.0);
    }
}
