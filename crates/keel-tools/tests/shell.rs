#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shell tool: markers, ordering, stdin, timeouts, process groups, big output, secrets.

mod common;

use keel_agent::ToolErrorKind;
use std::time::{Duration, Instant};

use common::*;
use keel_agent::ToolContext;
use keel_tools::ToolsConfig;
use serde_json::json;

fn alive(pid: i32) -> bool {
    // A zombie waiting for its reaper counts as dead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"),
        Err(_) => false,
    }
}

fn wait_dead(pid: i32) -> bool {
    for _ in 0..50 {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[tokio::test]
async fn output_in_arrival_order_ends_with_the_exit_code() {
    let ws = tempfile::tempdir().unwrap();
    let out =
        call(ws.path(), "shell", json!({"command": "echo a; echo b >&2; echo c; exit 3"})).await.unwrap();
    assert_eq!(out.content, "a\nb\nc\n[exit code: 3]");
    assert!(out.is_error);
    let out = call(ws.path(), "shell", json!({"command": "true"})).await.unwrap();
    assert_eq!(out.content, "(no output; exit code 0)");
    assert!(!out.is_error);
}

#[tokio::test]
async fn stdin_is_closed_so_readers_do_not_hang() {
    let ws = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = ok(ws.path(), "shell", json!({"command": "cat; read x; echo done"})).await;
    assert_eq!(out, "done\n[exit code: 0]");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn timeout_kills_the_whole_group_including_a_background_sleeper() {
    let ws = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = call(
        ws.path(),
        "shell",
        json!({"command": "sleep 300 & echo $! > bg.pid; echo started; sleep 300", "timeout_secs": 1}),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(out.content.starts_with("started\n[timed out after 1s]\n[exit code: "), "{}", out.content);
    assert!(out.is_error);
    let pid: i32 = std::fs::read_to_string(ws.path().join("bg.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid), "background sleeper {pid} survived");
}

#[tokio::test]
async fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let ws = tempfile::tempdir().unwrap();
    let config = ToolsConfig { kill_grace: Duration::from_millis(300), ..ToolsConfig::default() };
    let started = Instant::now();
    let out = call_with(
        config,
        ToolContext::new(ws.path()),
        "shell",
        &json!({"command": "trap '' TERM; echo $$ > sh.pid; sleep 100 & wait; sleep 100", "timeout_secs": 1}),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(out.content.contains("[timed out after 1s]"), "{}", out.content);
    assert!(out.content.ends_with("[exit code: 137]"), "{}", out.content);
    let pid: i32 = std::fs::read_to_string(ws.path().join("sh.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid));
}

#[tokio::test]
async fn abort_stops_the_command_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(ws.path());
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out = call_with(
        ToolsConfig::default(),
        ctx,
        "shell",
        &json!({"command": "echo $$ > sh.pid; echo working; sleep 60"}),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.content.starts_with("working\n[killed: aborted]\n[exit code: "), "{}", out.content);
    let pid: i32 = std::fs::read_to_string(ws.path().join("sh.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid));
}

#[tokio::test]
async fn background_jobs_holding_the_pipe_do_not_hang_the_call() {
    let ws = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = ok(ws.path(), "shell", json!({"command": "sleep 60 & echo $! > bg.pid; echo launched"})).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(out.starts_with("launched\n[background processes started by the command were stopped"), "{out}");
    assert!(out.ends_with("[exit code: 0]"));
    let pid: i32 = std::fs::read_to_string(ws.path().join("bg.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid));
}

#[tokio::test]
async fn ten_megabytes_of_output_keep_head_and_tail_and_the_full_file() {
    let ws = tempfile::tempdir().unwrap();
    let out = ok(
        ws.path(),
        "shell",
        json!({"command": "for i in $(seq 1 9); do echo first-$i; done; yes 0123456789abcdef | head -c 10000000; echo; echo last-line"}),
    )
    .await;
    assert!(out.len() < 20_000, "result is {} bytes", out.len());
    assert!(out.starts_with("first-1\nfirst-2\n"));
    assert!(out.ends_with("last-line\n[exit code: 0]"), "{}", &out[out.len() - 200..]);
    let marker = out.lines().find(|l| l.starts_with("[... ")).unwrap();
    assert!(marker.contains("lines / ") && marker.contains("bytes omitted"), "{marker}");
    let path = marker.split("full output saved to ").nth(1).unwrap().trim_end_matches(" ...]");
    let saved = std::fs::metadata(path).unwrap().len();
    assert_eq!(saved, 10_000_000 + 9 * 8 + 1 + 10);
    // The model can read the saved file with read_file.
    let page = ok(ws.path(), "read_file", json!({"path": path, "limit": 2})).await;
    assert!(page.contains("first-1"), "{page}");
}

#[tokio::test]
async fn non_utf8_output_is_replaced_not_fatal() {
    let ws = tempfile::tempdir().unwrap();
    let out = ok(ws.path(), "shell", json!({"command": "printf 'a\\xffb\\n'"})).await;
    assert_eq!(out, "a\u{fffd}b\n[exit code: 0]");
}

#[tokio::test]
async fn workdir_is_confined() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let out = ok(ws.path(), "shell", json!({"command": "basename \"$PWD\"", "workdir": "sub"})).await;
    assert_eq!(out, "sub\n[exit code: 0]");
    let error = err(ws.path(), "shell", json!({"command": "pwd", "workdir": "../"})).await;
    assert_eq!(error.kind, ToolErrorKind::OutsideWorkspace);
}

/// Issue 10, item 3: `env` in the shell still showed GITHUB_TOKEN, HF_TOKEN and a
/// DATABASE_URL with a password.
#[test]
fn secrets_are_removed_from_the_environment() {
    if std::env::var_os("KEEL_TOOLS_SECRET_CHILD").is_none() {
        // Re-run this test in a child process whose environment holds secrets.
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["secrets_are_removed_from_the_environment", "--exact", "--nocapture"])
            .env("KEEL_TOOLS_SECRET_CHILD", "1")
            .env("DEMO_API_KEY", "sk-live-secret")
            .env("DEEPSEEK_API_KEY", "sk-ds")
            .env("KEEL_API_KEY", "sk-keel")
            .env("GITHUB_TOKEN", "ghp_secret")
            .env("HF_TOKEN", "hf_secret")
            .env("DATABASE_URL", "postgres://app:hunter2@db:5432/app")
            .env("DB_PASSWORD", "hunter2")
            .env("NPM_TOKEN", "npm_secret")
            .env("HARMLESS_SETTING", "kept")
            .env("PUBLIC_URL", "https://example.com/app")
            .status()
            .unwrap();
        assert!(status.success());
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = runtime.block_on(ok(
        ws.path(),
        "shell",
        json!({"command": "env | grep -E '_secret|hunter2|sk-|KEEL_API' || echo none; echo \"${HARMLESS_SETTING:-gone} ${PUBLIC_URL:-gone}\""}),
    ));
    assert_eq!(out, "none\nkept https://example.com/app\n[exit code: 0]");
    // The user can pass a named variable on purpose.
    let config = ToolsConfig { env_passthrough: vec!["GITHUB_TOKEN".into()], ..ToolsConfig::default() };
    let out = runtime
        .block_on(call_with(
            config,
            ToolContext::new(ws.path()),
            "shell",
            &json!({"command": "echo \"${GITHUB_TOKEN:-gone} ${HF_TOKEN:-gone}\""}),
        ))
        .unwrap();
    assert_eq!(out.content, "ghp_secret gone\n[exit code: 0]");
}

#[test]
fn secret_names() {
    use keel_sandbox::secrets::{has_url_credentials, is_secret_var};
    for name in [
        "OPENAI_API_KEY",
        "my_api_key",
        "KEEL_MODEL",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "DEEPSEEK_BASE",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "CLIENT_SECRET",
        "PGPASSWORD",
        "DB_PASS",
        "MYSQL_PWD",
        "SSHPASS",
        "NPM_CONFIG__AUTH",
        "SIGNING_PRIVATE_KEY",
        // Issue 28, item 14: these reached commands.
        "AZURE_OPENAI_KEY",
        "GH_PAT",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "DISCORD_WEBHOOK",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "STRIPE_KEY",
    ] {
        assert!(is_secret_var(name), "{name}");
    }
    for name in
        ["PATH", "HOME", "PWD", "OLDPWD", "CARGO_HOME", "API_URL", "SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM"]
    {
        assert!(!is_secret_var(name), "{name}");
    }
    for value in ["postgres://app:hunter2@db/app", "https://user:tok@proxy:8080", "a https://x:y@h b"] {
        assert!(has_url_credentials(value), "{value}");
    }
    for (value, token) in [
        ("ghp_0123456789abcdefghijABCDEFGHIJ", true),
        ("sk-ant-api03-abcdefghijklmnopqrstu", true),
        ("AKIAIOSFODNN7EXAMPLE", true),
        ("sk-", false),
        ("skeleton-of-a-plain-value-here", false),
        ("/usr/local/bin:/usr/bin", false),
    ] {
        assert_eq!(keel_sandbox::secrets::looks_like_token(value), token, "{value}");
    }
    for value in ["https://example.com:8080/a@b", "ssh://git@github.com/x.git", "git@github.com:x/y", "plain"]
    {
        assert!(!has_url_credentials(value), "{value}");
    }
}

/// Found while fixing issue 10: a process that leaves the group (`setsid`) and keeps the
/// output open made the call wait for it, past its own timeout, forever for a daemon.
#[tokio::test]
async fn a_process_that_left_the_group_does_not_hang_the_call() {
    let ws = tempfile::tempdir().unwrap();
    let config = ToolsConfig { kill_grace: Duration::from_millis(300), ..ToolsConfig::default() };
    let started = Instant::now();
    let out = call_with(
        config,
        ToolContext::new(ws.path()),
        "shell",
        &json!({"command": "setsid sleep 60 & echo $! > escaped.pid; echo launched", "timeout_secs": 2}),
    )
    .await
    .unwrap();
    let pid: i32 = std::fs::read_to_string(ws.path().join("escaped.pid")).unwrap().trim().parse().unwrap();
    // Our own escaped sleeper, by its pid.
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    );
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(
        out.content.starts_with("launched\n[background processes started by the command were stopped"),
        "{}",
        out.content
    );
    assert!(out.content.contains("still runs and holds the output"), "{}", out.content);
    assert!(out.content.ends_with("[exit code: 0]"), "{}", out.content);
}

#[tokio::test]
async fn small_models_see_paths_under_the_project_relative_to_it() {
    let ws = tempfile::tempdir().unwrap();
    let run = |relative: bool| {
        let config = ToolsConfig { relative_output_paths: relative, ..ToolsConfig::default() };
        let ctx = ToolContext::new(ws.path());
        async move {
            let args =
                json!({"command": "python3 missing.py 2>&1 | sed 's/^.*: can/can/'; echo \"in $PWD\""});
            call_with(config, ctx, "shell", &args).await.unwrap().content
        }
    };
    let shown = run(true).await;
    let root = ws.path().canonicalize().unwrap().display().to_string();
    assert!(!shown.contains(&root), "{shown}");
    assert!(shown.contains("in .\n"), "{shown}");
    if shown.contains("can't open file") {
        assert!(shown.contains("'missing.py'"), "{shown}");
    }
    assert!(run(false).await.contains(&format!("in {root}\n")));
}

/// A git command that fails where there is no repository gets a note under its output
/// (small models were seen to `git init` the user's folder after "not a git
/// repository"); one that works, or fails inside a repository, gets none. Git runs only
/// through bash here: the test needs git on the machine and says so when it is missing.
#[tokio::test]
async fn a_failed_git_command_outside_a_repository_is_explained() {
    let ws = tempfile::tempdir().unwrap();
    assert!(std::process::Command::new("git").arg("--version").output().is_ok(), "this test needs git");
    let out = call(ws.path(), "shell", json!({"command": "git status"})).await.unwrap();
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("not a git repository"), "{}", out.content);
    assert!(out.content.ends_with("read and change them with your tools.]"), "{}", out.content);
    assert!(
        !out.content.contains("make a repository"),
        "what a note names last, a small model does: {}",
        out.content
    );
    let out = call(ws.path(), "shell", json!({"command": "git --version"})).await.unwrap();
    assert!(!out.is_error && !out.content.contains("[keel:"), "{}", out.content);
    let out = call(ws.path(), "shell", json!({"command": "git init -q && git log"})).await.unwrap();
    assert!(out.is_error, "an empty repository has no log: {}", out.content);
    assert!(!out.content.contains("[keel:"), "{}", out.content);
}
