#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `keel` binary end to end against the mock server: print mode, JSON mode, exit
//! codes, configuration errors, sessions, crash resume, Ctrl-C, locking.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use keel_session::{EventKind, NOT_STARTED, OUTCOME_UNKNOWN, SessionStore, TurnEndReason};
use keel_testkit::{ChatStream, MockResponse, MockServer};
use pretty_assertions::assert_eq;

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn call(id: &str, name: &str, args: &str) -> MockResponse {
    ChatStream::new().tool_call(id, name, args, 3).finish("tool_calls").usage(400, 30).response()
}

#[tokio::test(flavor = "multi_thread")]
async fn print_mode_prints_only_the_answer_on_stdout() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "list_files", "{}"));
    server.push(call("c2", "shell", r#"{"command":"python3 hello.py"}"#));
    server.push(answer("It prints: hello from keel"));
    let mut keel = env.keel(&server.base_url());
    keel.arg("What does hello.py print?");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It prints: hello from keel\n");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("list_files"), "{stderr}");
    assert!(stderr.contains("shell python3 hello.py  → exit 0: hello from keel"), "{stderr}");
    assert!(stderr.contains("completed · 3 steps · 2 tool calls · 1,300 in · 80 out"), "{stderr}");
    // The session was kept, and the requests carried the tool results.
    let events = env.session_events();
    assert!(
        matches!(events.last().unwrap().kind, EventKind::TurnEnd(ref t) if t.reason == TurnEndReason::Completed)
    );
    let third = server.requests()[2].json();
    let tool_message =
        third["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(tool_message["content"], "hello from keel\n[exit code: 0]");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_task_can_come_from_stdin_and_agents_md_reaches_the_prompt() {
    let env = Env::new();
    std::fs::write(env.workspace().join("AGENTS.md"), "Always answer in French.\n").unwrap();
    let server = MockServer::start().await;
    server.push(answer("Bonjour"));
    let mut keel = env.keel(&server.base_url());
    keel.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = tokio::task::spawn_blocking(move || {
        let mut child = keel.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"Say hello").unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Bonjour\n");
    let body = server.requests()[0].json();
    // The first message: the environment block, then the task.
    let first = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.starts_with("<environment>\nProject folder: ")
            && first.ends_with("</environment>\n\nSay hello"),
        "{first}"
    );
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.ends_with("# Project instructions (AGENTS.md)\nAlways answer in French."), "{system}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_mode_streams_one_event_per_line() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "read_file", r#"{"path":"README.md"}"#));
    server.push(answer("A tiny project."));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--json", "Describe the project"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> =
        text(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("every line is JSON")).collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    for expected in [
        "turn/start",
        "user/message",
        "request/header",
        "step/start",
        "delta/tool_call",
        "tool/call",
        "tool/started",
        "tool/result",
        "delta/text",
        "assistant/message",
        "turn/end",
        "keel/done",
    ] {
        assert!(types.contains(&expected), "missing {expected} in {types:?}");
    }
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "keel/done");
    assert_eq!(done["data"]["final_text"], "A tiny project.");
    assert_eq!(done["data"]["exit_code"], 0);
    // Logged events carry seq and time, exactly as in the session file.
    let logged: Vec<&serde_json::Value> = lines.iter().filter(|l| l.get("seq").is_some()).collect();
    let on_disk = env.session_events();
    assert_eq!(logged.len(), on_disk.len() - 1, "every event but the header");
    assert_eq!(*logged[0], serde_json::to_value(&on_disk[1]).unwrap());
    assert!(text(&out.stderr).is_empty(), "nothing on stderr in JSON mode: {}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn step_limit_exits_3_with_a_summary_answer() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "list_files", "{}"));
    server.push(call("c2", "list_files", "{}"));
    server.push(answer("Partial: I listed the files."));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--max-steps", "2", "Explore"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Partial: I listed the files.\n");
    assert!(text(&out.stderr).contains("step limit reached"), "{}", text(&out.stderr));
    assert_eq!(server.requests()[2].json()["tool_choice"], "none");
}

#[tokio::test(flavor = "multi_thread")]
async fn model_errors_exit_1_with_the_fix() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(MockResponse::json(401, &serde_json::json!({"error": {"message": "Invalid API key"}})));
    let mut keel = env.keel(&server.base_url());
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rejected the credentials (HTTP 401): Invalid API key"), "{stderr}");
    assert!(stderr.contains("KEEL_API_KEY"), "{stderr}");
    assert_eq!(text(&out.stdout), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_configuration_says_exactly_what_to_set() {
    let env = Env::new();
    let mut keel = env.keel_unconfigured();
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("keel: no model is configured."), "{stderr}");
    for needle in [
        "export DEEPSEEK_API_KEY=",
        "export OPENAI_API_KEY=",
        "--provider llamacpp",
        "--provider ollama",
        "config.toml",
    ] {
        assert!(stderr.contains(needle), "missing {needle}: {stderr}");
    }
    let mut keel = env.keel_unconfigured();
    keel.args(["--provider", "deepseek", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("DEEPSEEK_API_KEY is not set"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_exit_2() {
    let env = Env::new();
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.arg("--no-such-flag");
    assert_eq!(output(keel).await.status.code(), Some(2));
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.args(["--permission", "yolo", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("auto, ask or read-only"));
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.args(["--cwd", "/definitely/not/here", "hi"]);
    assert_eq!(output(keel).await.status.code(), Some(2));
    std::fs::write(env.root.path().join("config/config.toml"), "provider = [broken").unwrap();
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("config.toml"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn config_file_profiles_are_used_and_flags_win() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(answer("one"));
    server.push(answer("two"));
    std::fs::write(
        env.root.path().join("config/config.toml"),
        format!(
            "profile = \"mock\"\nmax_steps = 7\n[profiles.mock]\nprovider = \"custom\"\nbase_url = \"{}\"\nmodel = \"from-profile\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let mut keel = env.keel_unconfigured();
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(server.requests()[0].json()["model"], "from-profile");
    let mut keel = env.keel_unconfigured();
    keel.args(["--model", "from-flag", "hi"]);
    output(keel).await;
    assert_eq!(server.requests()[1].json()["model"], "from-flag");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_session_keeps_nothing() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(answer("ok"));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--no-session", "hi"]);
    assert_eq!(output(keel).await.status.code(), Some(0));
    assert!(!env.home().join("sessions").exists() || env.store().list().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_killed_during_a_tool_resumes_with_repair() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "shell", r#"{"command":"touch started && sleep 30"}"#));
    let mut keel = env.keel(&server.base_url());
    keel.arg("long task").stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = keel.spawn().unwrap();
    wait_for(&env.workspace().join("started")).await;
    child.kill().unwrap(); // SIGKILL: no cleanup at all
    child.wait().unwrap();

    server.push(answer("Picked up where we left off."));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--continue", "Go on"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("it was interrupted: 1 call(s) closed as outcome unknown"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "Picked up where we left off.\n");
    let body = server.requests()[1].json();
    let messages = body["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["content"], OUTCOME_UNKNOWN);
    assert_eq!(messages.last().unwrap()["content"], "Go on");
    let ends: Vec<TurnEndReason> = env
        .session_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::TurnEnd(t) => Some(t.reason),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![TurnEndReason::Interrupted, TurnEndReason::Completed]);
    let _ = NOT_STARTED;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_killed_during_the_stream_resumes() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("Let me think about", 1).finish("stop").response().stall_after(2));
    let mut keel = env.keel(&server.base_url());
    keel.arg("task").stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = keel.spawn().unwrap();
    // Wait until the request is in flight and the first delta was sent.
    let started = std::time::Instant::now();
    while server.request_count() == 0 {
        assert!(started.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    server.push(answer("Done now."));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--continue", "again"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Done now.\n");
    let body = server.requests()[1].json();
    let roles: Vec<&str> =
        body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, vec!["system", "user"], "the unfinished reply was never logged");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.ends_with("\n\ntask\n\nagain"), "both inputs are kept, in one message: {user}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_aborts_the_turn_cleanly_and_exits_130() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "shell", r#"{"command":"touch started; sleep 30.131; true"}"#));
    let mut keel = env.keel(&server.base_url());
    keel.arg("long task").stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = keel.spawn().unwrap();
    wait_for(&env.workspace().join("started")).await;
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("aborted"), "{}", text(&out.stderr));
    let events = env.session_events();
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.content.starts_with("Operation aborted"), "{}", result.content);
    assert!(result.content.contains("[killed: aborted]"), "{}", result.content);
    assert!(
        matches!(events.last().unwrap().kind, EventKind::TurnEnd(ref t) if t.reason == TurnEndReason::Aborted)
    );
    // The shell and its sleep are gone.
    assert!(gone("30.131", 5).await, "the command still runs: {:?}", processes_with_arg("30.131"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_cannot_write_the_same_session() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "shell", r#"{"command":"touch started && sleep 30"}"#));
    let mut keel = env.keel(&server.base_url());
    keel.arg("long task").stdout(Stdio::null()).stderr(Stdio::null());
    let mut first = keel.spawn().unwrap();
    wait_for(&env.workspace().join("started")).await;
    let id = env.store().list().unwrap()[0].id.clone();
    let mut second = env.keel(&server.base_url());
    second.args(["--resume", &id, "meanwhile"]);
    let out = output(second).await;
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is open in another keel process"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_list_show_and_fork() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(call("c1", "read_file", r#"{"path":"README.md"}"#));
    server.push(answer("It is a demo."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("What is this project?");
    assert_eq!(output(keel).await.status.code(), Some(0));
    let id = env.store().list().unwrap()[0].id.clone();

    let mut list = env.keel(&server.base_url());
    list.arg("sessions");
    let out = output(list).await;
    let listing = text(&out.stdout);
    assert!(listing.starts_with("ID "), "{listing}");
    assert!(listing.contains(&id) && listing.contains("What is this project?"), "{listing}");

    let mut show = env.keel(&server.base_url());
    show.args(["sessions", "show", &id[..12]]);
    let out = output(show).await;
    let transcript = text(&out.stdout);
    for needle in [
        "> What is this project?",
        "→ read_file README.md",
        "✓ read_file 2 lines",
        "It is a demo.",
        "── completed",
    ] {
        assert!(transcript.contains(needle), "missing {needle:?} in\n{transcript}");
    }

    let mut fork = env.keel(&server.base_url());
    fork.args(["sessions", "fork", &id, "--at-event", "3"]);
    let out = output(fork).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fork_id = text(&out.stdout).trim().to_owned();
    let events = env.store().read(&fork_id).unwrap();
    match &events[0].kind {
        EventKind::SessionHeader(h) => {
            assert_eq!(h.parent.as_ref().map(|p| (p.id.as_str(), p.seq)), Some((id.as_str(), 3)))
        }
        other => panic!("{other:?}"),
    }
    // Issue 32, item 8: `--at` counts turns, as `sessions show` numbers them.
    let turn_end = env
        .store()
        .read(&id)
        .unwrap()
        .iter()
        .find(|e| matches!(e.kind, EventKind::TurnEnd(_)))
        .map(|e| e.seq)
        .unwrap();
    let mut by_turn = env.keel(&server.base_url());
    by_turn.args(["sessions", "fork", &id, "--at", "1"]);
    let out = output(by_turn).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fork_id = text(&out.stdout).trim().to_owned();
    match &env.store().read(&fork_id).unwrap()[0].kind {
        EventKind::SessionHeader(h) => assert_eq!(h.parent.as_ref().map(|p| p.seq), Some(turn_end)),
        other => panic!("{other:?}"),
    }
    let mut past = env.keel(&server.base_url());
    past.args(["sessions", "fork", &id, "--at", "2"]);
    let out = output(past).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no finished turn 2 (its turns: 1 to 1)"), "{}", text(&out.stderr));
    let mut missing = env.keel(&server.base_url());
    missing.args(["sessions", "show", "nope"]);
    let out = output(missing).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no session `nope`"));
    // Issue 32: one rule for a session the user names that is not there: exit 2 when
    // resuming it too (it was 1), and when there is none to continue.
    let mut resume = env.keel(&server.base_url());
    resume.args(["--resume", "nope", "go on"]);
    let out = output(resume).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("no session `nope`"), "{}", text(&out.stderr));
    let elsewhere = tempfile::tempdir().unwrap();
    let mut again = env.keel(&server.base_url());
    again.current_dir(elsewhere.path()).args(["--continue", "go on"]);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("to continue"), "{}", text(&out.stderr));
}

/// Issue 10, item 5: a workspace AGENTS.md that is a symlink outside was read into the
/// system prompt and the log; a FIFO hung start-up.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_agents_md_is_refused_and_said() {
    let env = Env::new();
    std::fs::write(env.root.path().join("private-notes.md"), "SECRET-OUTSIDE\n").unwrap();
    std::os::unix::fs::symlink(env.root.path().join("private-notes.md"), env.workspace().join("AGENTS.md"))
        .unwrap();
    let server = MockServer::start().await;
    server.push(answer("ok"));
    server.push(answer("ok"));
    let mut keel = env.keel(&server.base_url());
    keel.arg("hi");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("keel: AGENTS.md was not read: it leads outside the project folder"),
        "{}",
        text(&out.stderr)
    );
    let system = server.requests()[0].json()["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(!system.contains("SECRET-OUTSIDE"), "{system}");
    assert!(!serde_json::to_string(&env.session_events()).unwrap().contains("SECRET-OUTSIDE"));

    std::fs::remove_file(env.workspace().join("AGENTS.md")).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(env.workspace().join("AGENTS.md"))
            .status()
            .unwrap()
            .success()
    );
    let mut keel = env.keel(&server.base_url());
    keel.args(["--no-session", "hi"]);
    let out =
        tokio::time::timeout(Duration::from_secs(20), output(keel)).await.expect("start-up hung on a FIFO");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("AGENTS.md was not read: `AGENTS.md` is a FIFO"),
        "{}",
        text(&out.stderr)
    );
}
