#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel replay` and `keel sessions export` on a session the real binary recorded against
//! the mock server (a model over HTTP, as a real one is): the replay passes unchanged,
//! flags a file changed since and a changed recorded result at their steps, and makes no
//! request; the HTML export holds every step, escaped, and nothing to fetch.

mod common;

use common::*;
use keel_session::{Event, EventKind, SessionStore};
use keel_testkit::{ChatStream, MockResponse, MockServer};

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn call(id: &str, name: &str, args: &str) -> MockResponse {
    ChatStream::new().tool_call(id, name, args, 3).finish("tool_calls").usage(400, 30).response()
}

/// Records one session: reads README.md and hello.py, edits hello.py, runs it, answers.
async fn recorded(env: &Env, server: &MockServer) -> String {
    std::fs::write(env.workspace().join("README.md"), "# Demo\nA tiny project. <script>alert(1)</script>\n")
        .unwrap();
    server.push(call("c1", "read_file", r#"{"path":"README.md"}"#));
    server.push(call("c2", "read_file", r#"{"path":"hello.py"}"#));
    server.push(call(
        "c3",
        "edit_file",
        r#"{"path":"hello.py","old_text":"hello from keel","new_text":"hi from keel"}"#,
    ));
    server.push(call("c4", "shell", r#"{"command":"python3 hello.py; seq 1 2000"}"#));
    server.push(answer("It prints: hi from keel"));
    let mut keel = env.keel(&server.base_url());
    keel.arg("Make hello.py say hi, then run it");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    env.store().list().unwrap()[0].id.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_session_replays_unchanged_and_flags_what_changed() {
    let env = Env::new();
    let server = MockServer::start().await;
    let id = recorded(&env, &server).await;
    let sent = server.requests().len();
    // The command's output was long: it names the file it was saved to, in the session's
    // folder (the replay's is another, shown as this one).
    let spilled =
        env.store().read(&id).unwrap().iter().any(
            |e| matches!(&e.kind, EventKind::ToolResult(r) if r.content.contains("full output saved to")),
        );
    assert!(spilled);

    let mut replay = env.keel(&server.base_url());
    replay.args(["replay", &id[..12]]);
    let out = output(replay).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(stdout, "no differences: 5 model requests, 4 tool results as recorded\n", "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tools run in a copy of {}",
            env.workspace().canonicalize().unwrap().display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("1 file the session changed put back as it was before it"), "{stderr}");
    assert_eq!(server.requests().len(), sent, "a replay sends nothing");
    // The workspace is as the session left it.
    assert_eq!(std::fs::read_to_string(env.workspace().join("hello.py")).unwrap(), "print('hi from keel')\n");

    // A file the session read changed since: flagged at the step that read it.
    std::fs::write(env.workspace().join("README.md"), "# Demo\nA bigger project now.\n").unwrap();
    let mut replay = env.keel(&server.base_url());
    replay.args(["replay", &id]);
    let out = output(replay).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.starts_with("1 difference (5 model requests, 4 tool results replayed):\n"), "{stdout}");
    assert!(stdout.contains("turn 1 step 1 (event "), "{stdout}");
    assert!(stdout.contains("): result of read_file README.md (c1)\n"), "{stdout}");
    assert!(stdout.contains("A tiny project.") && stdout.contains("A bigger project now."), "{stdout}");

    // With the recorded results, only the requests are compared: they are as recorded.
    let mut replay = env.keel(&server.base_url());
    replay.args(["replay", &id, "--tools", "recorded"]);
    let out = output(replay).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("tools do not run"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deliberately_changed_result_in_a_copy_of_the_log_is_flagged() {
    let env = Env::new();
    let server = MockServer::start().await;
    let id = recorded(&env, &server).await;
    // A copy of the log, in a store of its own, where the shell command's output differs.
    let copy = env.root.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let mut log = String::new();
    for mut event in env.store().read(&id).unwrap() {
        if let EventKind::ToolResult(result) = &mut event.kind
            && result.name == "shell"
        {
            result.content = result.content.replace("hi from keel", "HI FROM KEEL");
        }
        let mut line = Vec::new();
        Event::write_line(&event, &mut line).unwrap();
        log.push_str(&String::from_utf8(line).unwrap());
    }
    std::fs::write(copy.join(format!("{id}.jsonl")), log).unwrap();
    // The copy's undo records are the original's.
    let mut replay = env.keel(&server.base_url());
    replay.args(["replay", &id, "--store"]).arg(&copy);
    let out = output(replay).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("turn 1 step 4 (event "), "{stdout}");
    assert!(stdout.contains("): result of shell python3 hello.py; seq 1 2000 (c4)\n    recorded: line 1: HI FROM KEEL\n    now:      line 1: hi from keel"), "{stdout}");

    // Usage errors: no such session, a bad mode.
    let mut missing = env.keel(&server.base_url());
    missing.args(["replay", "nope"]);
    let out = output(missing).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no session `nope`"), "{}", text(&out.stderr));
    let mut bad = env.keel(&server.base_url());
    bad.args(["replay", &id, "--tools", "sideways"]);
    assert_eq!(output(bad).await.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_export_writes_markdown_html_and_json() {
    let env = Env::new();
    let server = MockServer::start().await;
    let id = recorded(&env, &server).await;

    let file = env.root.path().join("session.html");
    let mut export = env.keel(&server.base_url());
    export.args(["sessions", "export", &id[..10], "--format", "html", "-o"]).arg(&file);
    let out = output(export).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for step in [
        "Make hello.py say hi, then run it",
        "<span class=\"tool\">read_file</span> <code>README.md</code>",
        "<span class=\"tool\">read_file</span> <code>hello.py</code>",
        "<span class=\"tool\">edit_file</span> <code>hello.py</code>",
        "<span class=\"add\">+print(&#39;hi from keel&#39;)\n</span>",
        "<span class=\"tool\">shell</span> <code>python3 hello.py; seq 1 2000</code>",
        "It prints: hi from keel",
        "Turn 1 completed",
    ] {
        assert!(html.contains(step), "missing {step:?}");
    }
    // The README's <script> came back in a tool result: shown, inert.
    assert!(!html.to_lowercase().contains("<script"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    let mut export = env.keel(&server.base_url());
    export.args(["sessions", "export", &id]);
    let out = output(export).await;
    let md = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(md.starts_with(&format!("# keel session `{id}`\n")), "{md}");
    assert!(md.contains("**You:**\n\nMake hello.py say hi, then run it\n"), "{md}");

    let mut export = env.keel(&server.base_url());
    export.args(["sessions", "export", &id, "--format", "json"]);
    let out = output(export).await;
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["events"].as_array().unwrap().len(), env.store().read(&id).unwrap().len());
    assert_eq!(value["usage"]["input_tokens"], 2100);

    let mut missing = env.keel(&server.base_url());
    missing.args(["sessions", "export", "nope"]);
    assert_eq!(output(missing).await.status.code(), Some(2));
    // A prefix two sessions share names neither, as `sessions show` says.
    let sessions = env.home().join("sessions");
    std::fs::copy(sessions.join(format!("{id}.jsonl")), sessions.join(format!("{}-copy.jsonl", &id[..10])))
        .unwrap();
    for command in [&["sessions", "export"][..], &["replay"][..]] {
        let mut ambiguous = env.keel(&server.base_url());
        ambiguous.args(command).arg(&id[..10]);
        let out = output(ambiguous).await;
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert!(text(&out.stderr).contains("matches 2 sessions"), "{}", text(&out.stderr));
    }
}
