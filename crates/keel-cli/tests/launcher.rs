#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shell tool started through the real launcher (`keel __exec`), with and without a
//! PID namespace: output, exit codes, timeouts, SIGTERM handling, background processes
//! and abort behave exactly as with `bash -c` alone (crates/keel-tools/tests/shell.rs).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{gone, pid_namespaces, processes_with_arg};
use keel_agent::{ToolContext, ToolOutput};
use keel_sandbox::launch::Launcher;
use keel_tools::ToolsConfig;
use serde_json::json;

/// The modes this machine can run: without a namespace always, with one if allowed.
fn modes() -> Vec<bool> {
    if pid_namespaces() { vec![false, true] } else { vec![false] }
}

fn config(pid_namespace: bool) -> ToolsConfig {
    ToolsConfig {
        launcher: Some(Launcher { program: env!("CARGO_BIN_EXE_keel").into(), pid_namespace }),
        kill_grace: Duration::from_millis(500),
        ..ToolsConfig::default()
    }
}

async fn run(pid_namespace: bool, ctx: ToolContext, args: serde_json::Value) -> ToolOutput {
    let registry = keel_tools::builtin(Arc::new(config(pid_namespace)));
    let prepared = registry.get("shell").unwrap().prepare(&args.to_string()).unwrap();
    prepared(ctx).await.unwrap()
}

async fn shell(pid_namespace: bool, ws: &std::path::Path, command: &str) -> ToolOutput {
    run(pid_namespace, ToolContext::new(ws), json!({ "command": command })).await
}

#[tokio::test]
async fn output_order_and_exit_codes_are_bashs() {
    let ws = tempfile::tempdir().unwrap();
    for ns in modes() {
        let out = shell(ns, ws.path(), "echo a; echo b >&2; echo c; exit 3").await;
        assert_eq!(out.content, "a\nb\nc\n[exit code: 3]", "namespace {ns}");
        assert!(out.is_error);
        assert_eq!(shell(ns, ws.path(), "true").await.content, "(no output; exit code 0)");
        assert_eq!(shell(ns, ws.path(), "kill -9 $$").await.content, "(no output; exit code 137)");
        assert_eq!(shell(ns, ws.path(), "cat; read x; echo done").await.content, "done\n[exit code: 0]");
        let out = shell(ns, ws.path(), "basename \"$PWD\"; echo ${KEEL_API_KEY:-no key}").await;
        let name = ws.path().file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(out.content, format!("{name}\nno key\n[exit code: 0]"));
    }
}

#[tokio::test]
async fn a_timeout_stops_the_group_and_sigterm_is_delivered() {
    let ws = tempfile::tempdir().unwrap();
    for ns in modes() {
        let started = Instant::now();
        let out = run(
            ns,
            ToolContext::new(ws.path()),
            json!({"command": "trap 'echo got TERM; exit 7' TERM; sleep 300.41 & sleep 300.42 & wait", "timeout_secs": 1}),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5), "namespace {ns}: {:?}", started.elapsed());
        assert_eq!(out.content, "got TERM\n[timed out after 1s]\n[exit code: 7]", "namespace {ns}");
        assert!(gone("300.41", 5).await && gone("300.42", 5).await, "namespace {ns}");
        // A command ignoring SIGTERM is killed after the grace period.
        let out = run(
            ns,
            ToolContext::new(ws.path()),
            json!({"command": "trap '' TERM; sleep 300.43 & wait; sleep 300.44", "timeout_secs": 1}),
        )
        .await;
        assert!(
            out.content.ends_with("[timed out after 1s]\n[exit code: 137]"),
            "namespace {ns}: {}",
            out.content
        );
        assert!(gone("300.43", 5).await && gone("300.44", 5).await, "namespace {ns}");
    }
}

#[tokio::test]
async fn background_processes_are_stopped_as_before() {
    let ws = tempfile::tempdir().unwrap();
    for ns in modes() {
        // Holding the output: given a moment, then stopped, and said.
        let started = Instant::now();
        let out = shell(ns, ws.path(), "sleep 300.51 & echo launched").await;
        assert!(started.elapsed() < Duration::from_secs(5), "namespace {ns}: {:?}", started.elapsed());
        assert_eq!(
            out.content,
            "launched\n[background processes started by the command were stopped: the shell tool does not keep processes running]\n[exit code: 0]",
            "namespace {ns}"
        );
        assert!(gone("300.51", 5).await, "namespace {ns}");
        // Not holding it: the call ends with bash, the process is stopped silently.
        let started = Instant::now();
        let out = shell(ns, ws.path(), "sleep 300.52 > /dev/null 2>&1 & echo launched").await;
        assert!(started.elapsed() < Duration::from_millis(1500), "namespace {ns}: {:?}", started.elapsed());
        assert_eq!(out.content, "launched\n[exit code: 0]", "namespace {ns}");
        assert!(gone("300.52", 5).await, "namespace {ns}");
    }
}

#[tokio::test]
async fn abort_stops_the_command() {
    let ws = tempfile::tempdir().unwrap();
    for ns in modes() {
        let ctx = ToolContext::new(ws.path());
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        });
        let out = run(ns, ctx, json!({"command": "echo working; sleep 300.61; true"})).await;
        assert!(
            out.content.starts_with("working\n[killed: aborted]\n[exit code: "),
            "namespace {ns}: {}",
            out.content
        );
        assert!(gone("300.61", 5).await, "namespace {ns}: {:?}", processes_with_arg("300.61"));
    }
}

#[tokio::test]
async fn in_a_namespace_the_command_sees_only_its_own_processes() {
    if !pid_namespaces() {
        eprintln!("skipped: this machine does not allow PID namespaces");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let out = shell(true, ws.path(), "ls -d /proc/[0-9]* | wc -l; tr '\\0' ' ' < /proc/1/cmdline").await;
    let mut lines = out.content.lines();
    let count: usize = lines.next().unwrap().trim().parse().unwrap();
    assert!(count <= 6, "the command sees {count} processes: {}", out.content);
    assert!(lines.next().unwrap().contains("__exec --init -- bash -c"), "{}", out.content);
    // `kill -9 -1` reaches only the namespace: its sleeper dies by SIGKILL (status 137),
    // this test runs on. (bash's own "Killed" notice is left out: under load it may not
    // be printed at all.)
    let out = shell(
        true,
        ws.path(),
        "sleep 300.81 & p=$!; sleep 0.2; kill -9 -1; wait $p; echo \"status=$?\"; echo after",
    )
    .await;
    assert!(out.content.ends_with("status=137\nafter\n[exit code: 0]"), "{}", out.content);
    assert!(gone("300.81", 5).await);
}
