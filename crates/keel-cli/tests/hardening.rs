#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 10 against the real binary: SIGTERM and SIGHUP end a turn like Ctrl-C (item 4);
//! a command dies with keel even on `kill -9` (item 4); the shell cannot read keel's keys
//! through /proc or its environment (item 3).

mod common;

use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use keel_session::{EventKind, TurnEndReason};
use keel_testkit::{ChatStream, MockResponse, MockServer};
use rustix::process::{Pid, Signal, kill_process};

fn call(id: &str, name: &str, args: &str) -> MockResponse {
    ChatStream::new().tool_call(id, name, args, 3).finish("tool_calls").usage(400, 30).response()
}

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn shell(command: &str) -> MockResponse {
    call("c1", "shell", &serde_json::json!({ "command": command }).to_string())
}

/// Waits until a process with `arg` among its arguments runs.
async fn appears(arg: &str) {
    let started = std::time::Instant::now();
    while processes_with_arg(arg).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "no process with {arg} started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn set_pid_namespace(env: &Env, on: bool) {
    std::fs::write(env.root.path().join("config/config.toml"), format!("pid_namespace = {on}\n")).unwrap();
}

/// Issue 10, item 4: on SIGTERM (`timeout`) or SIGHUP (a closed terminal), bash and its
/// children ran on under PID 1 and the session said "outcome unknown" while they ran.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_and_sighup_end_the_turn_like_ctrl_c() {
    for (signal, marker) in [(Signal::TERM, "30.241"), (Signal::HUP, "30.242")] {
        let env = Env::new();
        let server = MockServer::start().await;
        server.push(shell(&format!("sleep {marker} & touch started; sleep {marker}; true")));
        let mut keel = env.keel(&server.base_url());
        keel.arg("long task").stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = keel.spawn().unwrap();
        wait_for(&env.workspace().join("started")).await;
        appears(marker).await;
        kill_process(Pid::from_raw(child.id() as i32).unwrap(), signal).unwrap();
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
        assert_eq!(out.status.code(), Some(130), "{signal:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("aborted"), "{signal:?}: {}", text(&out.stderr));
        let events = env.session_events();
        let result = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ToolResult(r) => Some(r.content.clone()),
                _ => None,
            })
            .unwrap();
        assert!(result.starts_with("Operation aborted"), "{signal:?}: {result}");
        assert!(result.contains("[killed: aborted]"), "{signal:?}: {result}");
        assert!(
            matches!(events.last().unwrap().kind, EventKind::TurnEnd(ref t) if t.reason == TurnEndReason::Aborted),
            "{signal:?}"
        );
        assert!(gone(marker, 5).await, "{signal:?}: still running: {:?}", processes_with_arg(marker));
    }
}

/// Issue 10, item 4: a command's processes must die with keel even on `kill -9`, which
/// keel cannot handle: the launcher's parent-death signal does it.
#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_keel_kills_the_command() {
    for namespace in [false, true] {
        if namespace && !pid_namespaces() {
            eprintln!("skipped with a PID namespace: this machine does not allow one");
            continue;
        }
        let env = Env::new();
        set_pid_namespace(&env, namespace);
        let server = MockServer::start().await;
        server.push(shell(
            "sleep 300.31 & (sleep 300.32; true) & setsid sleep 300.33 & echo $! > escaped.pid; touch started; sleep 300.34; true",
        ));
        let mut keel = env.keel(&server.base_url());
        keel.arg("long task").stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = keel.spawn().unwrap();
        wait_for(&env.workspace().join("started")).await;
        for marker in ["300.31", "300.32", "300.33", "300.34"] {
            appears(marker).await;
        }
        child.kill().unwrap(); // SIGKILL: keel runs no code at all
        child.wait().unwrap();
        for marker in ["300.31", "300.32", "300.34"] {
            assert!(gone(marker, 5).await, "namespace {namespace}: {marker} survived keel");
        }
        if namespace {
            // Even a process that left the group: the whole namespace went.
            assert!(gone("300.33", 5).await, "the setsid process survived the namespace");
        } else {
            // Without a namespace it survives (documented); end our own escapee.
            for pid in processes_with_arg("300.33") {
                let _ = kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
            }
        }
    }
}

const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-openai-zz91"),
    ("AWS_SECRET_ACCESS_KEY", "aws-secret-zz92"),
    ("GITHUB_TOKEN", "ghp-zz93"),
    ("HF_TOKEN", "hf-zz94"),
    ("DATABASE_URL", "postgres://app:pw-zz95@db/app"),
];

/// Issue 10, item 3: `cat /proc/$PPID/environ` returned every key keel was started with,
/// and `env` showed GITHUB_TOKEN, HF_TOKEN and a DATABASE_URL with a password.
#[tokio::test(flavor = "multi_thread")]
async fn the_shell_cannot_read_keels_keys() {
    let env = Env::new();
    let server = MockServer::start().await;
    let probe = "env; tr '\\0' '\\n' < /proc/$PPID/environ; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null; echo listed";
    server.push(shell(probe));
    server.push(answer("done"));
    let mut keel = env.keel(&server.base_url());
    keel.env("KEEL_API_KEY", "sk-keel-zz90");
    for (name, value) in SECRETS {
        keel.env(name, value);
    }
    keel.arg("look around");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = text(&server.requests()[1].body);
    assert!(body.contains("listed") && body.contains("PATH="), "the probe did not run: {body}");
    let namespace = pid_namespaces();
    let root = rustix::process::geteuid().is_root();
    if root && !namespace {
        // Root reads any process's environ; only a PID namespace hides keel from it.
        eprintln!("skipped the /proc part: running as root without PID namespaces");
        return;
    }
    for value in ["sk-keel-zz90"].iter().chain(SECRETS.iter().map(|(_, v)| v)) {
        assert!(!body.contains(value), "{value} leaked to the model: {body}");
    }
}

/// Issue 10, item 3: keel is not dumpable, so a process of the same (non-root) user
/// cannot read /proc/<keel>/environ even without a PID namespace.
#[tokio::test(flavor = "multi_thread")]
async fn keel_is_not_dumpable() {
    let env = Env::new();
    set_pid_namespace(&env, false);
    let server = MockServer::start().await;
    server.push(shell(
        "keel=$(awk '{print $4}' /proc/$PPID/stat); echo \"keel is $keel\"; tr '\\0' '\\n' < /proc/$keel/environ; grep -c . /proc/$keel/maps",
    ));
    server.push(answer("done"));
    let mut keel = env.keel(&server.base_url());
    keel.env("OPENAI_API_KEY", "sk-openai-zz96").arg("look");
    if rustix::process::geteuid().is_root() {
        // Run keel as another user: root could read anything.
        chmod_tree(env.root.path());
        keel.uid(65534).gid(65534);
    }
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = text(&server.requests()[1].body);
    assert!(body.contains("keel is "), "{body}");
    assert!(!body.contains("sk-openai-zz96"), "keel's environ was read: {body}");
    assert!(body.contains("Permission denied"), "{body}");
}

fn chmod_tree(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            chmod_tree(&entry.path());
        }
    }
}
