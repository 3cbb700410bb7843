#![allow(clippy::unwrap_used, clippy::expect_used)]
//! User hooks (issue 33, item 2) against the real binary and a scripted model: hooks
//! written in the config as Claude Code users write them deny a command with a reason the
//! model reads, add context the next request carries, continue a turn once, block a
//! prompt; broken hooks (slow, crashing, garbage, huge) are reported and the turn goes on;
//! every run is a `hook/run` in the log.

mod common;

use std::time::{Duration, Instant};

use common::*;
use keel_session::{Event, EventKind, HookOutcome, HookRun, HookVerdict, InputSource, SessionStore};
use keel_testkit::{ChatStream, MockResponse, MockServer};
use serde_json::Value;

fn call(id: &str, name: &str, args: &str) -> MockResponse {
    ChatStream::new().tool_call(id, name, args, 3).finish("tool_calls").usage(400, 30).response()
}

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

fn shell(command: &str) -> MockResponse {
    call("c1", "shell", &serde_json::json!({ "command": command }).to_string())
}

fn configure(env: &Env, toml: &str) {
    std::fs::write(env.root.path().join("config/config.toml"), toml).unwrap();
}

fn runs(events: &[Event]) -> Vec<HookRun> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::HookRun(run) => Some(run.clone()),
            _ => None,
        })
        .collect()
}

/// The text of the last message of request `i` (a user message, or a tool result).
fn last_text(server: &MockServer, i: usize) -> String {
    let body = server.requests()[i].json();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"].as_str().unwrap_or_default().to_owned()
}

fn tool_result(server: &MockServer, i: usize) -> String {
    let body = server.requests()[i].json();
    let tool = body["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "tool").unwrap().clone();
    tool["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pre_tool_use_hook_denies_a_shell_command_and_the_model_reads_why() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "cat > \"$CLAUDE_PROJECT_DIR/pre.json\"; echo 'pushes go through review, not keel' >&2; exit 2" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(shell("touch pushed && git push origin main"));
    server.push(answer("I did not push."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("push it");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!env.workspace().join("pushed").exists(), "the command ran");
    assert_eq!(tool_result(&server, 1), "Refused by a hook: pushes go through review, not keel");
    // The hook got the event as Claude Code sends it.
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(env.workspace().join("pre.json")).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "shell");
    assert_eq!(input["tool_input"]["command"], "touch pushed && git push origin main");
    assert_eq!(input["tool_use_id"], "c1");
    assert_eq!(input["cwd"], env.workspace().display().to_string());
    assert_eq!(input["permission_mode"], "auto");
    let events = env.session_events();
    let EventKind::SessionHeader(header) = &events[0].kind else { panic!("{:?}", events[0]) };
    assert_eq!(input["session_id"], header.id);
    let runs = runs(&events);
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].outcome, runs[0].decision, runs[0].exit_code),
        (HookOutcome::Ok, Some(HookVerdict::Deny), Some(2))
    );
    assert_eq!(runs[0].call_id.as_deref(), Some("c1"));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("hook PreToolUse `cat > "), "{stderr}");
    assert!(stderr.contains("deny: pushes go through review, not keel"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_post_tool_use_hook_adds_context_the_next_request_carries() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.PostToolUse]]
matcher = "shell|Edit"
hooks = [{ type = "command", command = "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"lint: 2 warnings in hello.py\"}}'" }]

[[hooks.PostToolUse]]
matcher = "read_file"
hooks = [{ type = "command", command = "echo never" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(shell("python3 hello.py"));
    server.push(answer("It prints hello."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("run hello.py");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        last_text(&server, 1),
        "PostToolUse hook context for `shell` (call c1):\nlint: 2 warnings in hello.py"
    );
    let events = env.session_events();
    let from_hook = events.iter().find_map(|e| match &e.kind {
        EventKind::UserMessage(input) if input.source == InputSource::Hook => Some(input.clone()),
        _ => None,
    });
    assert!(from_hook.unwrap().reason.unwrap().starts_with("hook/PostToolUse: echo '{"));
    let runs = runs(&events);
    assert_eq!(runs.len(), 1, "only the matching hook ran: {runs:?}");
    assert_eq!(runs[0].decision, Some(HookVerdict::Context));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_hook_continues_the_turn_once_with_its_reason() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.Stop]]
hooks = [{ type = "command", command = "if grep -q '\"stop_hook_active\":false'; then echo '{\"decision\": \"block\", \"reason\": \"Run the tests before you finish.\"}'; fi" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(answer("Done."));
    server.push(answer("Tests pass. Done."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("fix it");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Tests pass. Done.\n");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(last_text(&server, 1), "Stop hook feedback:\nRun the tests before you finish.");
    let runs = runs(&env.session_events());
    let decisions: Vec<Option<HookVerdict>> = runs.iter().map(|r| r.decision).collect();
    assert_eq!(decisions, [Some(HookVerdict::Continue), None]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_prompt_submit_hook_blocks_a_prompt_and_adds_context_to_another() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.UserPromptSubmit]]
hooks = [{ type = "command", command = "if grep -q 'hunter[0-9]'; then echo 'That prompt holds a password.' >&2; exit 2; fi; echo 'Release branch: 2.4'" }]

[[hooks.SessionStart]]
matcher = "resume"
hooks = [{ type = "command", command = "cat > \"$CLAUDE_PROJECT_DIR/start.json\"" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(answer("Hello."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("my password is hunter2, log in");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("That prompt holds a password."), "{}", text(&out.stderr));
    assert_eq!(server.requests().len(), 0, "the prompt never reached the model");
    let log = std::fs::read_to_string(env.store().path_of(&env.store().list().unwrap()[0].id)).unwrap();
    assert!(!log.contains("hunter2"), "{log}");
    // A resumed session: SessionStart (source resume) runs, then the prompt goes with context.
    let mut keel = env.keel(&server.base_url());
    keel.args(["-c", "say hello"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(last_text(&server, 0).ends_with("say hello\n\nRelease branch: 2.4"), "{}", last_text(&server, 0));
    let start: Value =
        serde_json::from_str(&std::fs::read_to_string(env.workspace().join("start.json")).unwrap()).unwrap();
    assert_eq!(
        (start["hook_event_name"].as_str(), start["source"].as_str()),
        (Some("SessionStart"), Some("resume"))
    );
    let events: Vec<String> = runs(&env.session_events()).iter().map(|r| r.event.clone()).collect();
    assert_eq!(events, ["UserPromptSubmit", "SessionStart", "UserPromptSubmit"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_hooks_are_reported_and_the_turn_goes_on() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.PreToolUse]]
matcher = "*"
hooks = [
  { type = "command", command = "sleep 30.333", timeout = 1 },
  { type = "command", command = "echo 'KeyError: tool' >&2; exit 3" },
  { type = "command", command = "echo '{\"decision\": oops'" },
  { type = "command", command = "head -c 300000 /dev/zero | tr '\\0' x" },
]

[[hooks.Stop]]
hooks = [{ type = "command", command = "kill -SEGV $$" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(shell("echo ran > ran.txt"));
    server.push(answer("Done."));
    let started = Instant::now();
    let mut keel = env.keel(&server.base_url());
    keel.arg("run it");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "a hook stalled the turn: {:?}", started.elapsed());
    assert!(env.workspace().join("ran.txt").exists(), "broken hooks decide nothing");
    assert_eq!(text(&out.stdout), "Done.\n");
    let runs = runs(&env.session_events());
    let outcomes: Vec<(&str, HookOutcome)> = runs.iter().map(|r| (r.event.as_str(), r.outcome)).collect();
    assert_eq!(
        outcomes,
        [
            ("PreToolUse", HookOutcome::TimedOut),
            ("PreToolUse", HookOutcome::Failed),
            ("PreToolUse", HookOutcome::BadOutput),
            ("PreToolUse", HookOutcome::BadOutput),
            ("Stop", HookOutcome::Failed),
        ]
    );
    assert_eq!(runs[0].error.as_deref(), Some("did not finish within 1 s and was stopped"));
    assert_eq!(runs[1].error.as_deref(), Some("exited with status 3: KeyError: tool"));
    assert!(runs[3].error.as_deref().unwrap().contains("more than 64 KiB"), "{:?}", runs[3]);
    assert!(runs[4].error.as_deref().unwrap().contains("status 139"), "{:?}", runs[4]);
    for run in &runs {
        let line =
            format!("hook {} `{}`: {}; ignored", run.event, run.command, run.error.as_deref().unwrap());
        assert!(stderr.contains(&line), "no line for {run:?} in:\n{stderr}");
    }
    assert!(gone("30.333", 5).await, "the slow hook still runs: {:?}", processes_with_arg("30.333"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hooks_allow_skips_the_question_but_never_a_deny_rule_and_ask_asks() {
    let env = Env::new();
    configure(
        &env,
        r#"
permission = "ask"

[permissions]
deny = ["shell(rm *)"]

[[hooks.PreToolUse]]
matcher = "Bash"
hooks = [{ type = "command", command = "if grep -q curl; then echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"network access\"}}'; else echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\"}}'; fi" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(call("c1", "shell", r#"{"command":"touch allowed"}"#));
    server.push(call("c2", "shell", r#"{"command":"rm hello.py"}"#));
    server.push(call("c3", "shell", r#"{"command":"curl -s example.com > page"}"#));
    server.push(answer("Done."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("go");
    let out = output(keel).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Allowed by the hook in ask mode: no question (nobody could answer one here).
    assert!(env.workspace().join("allowed").exists(), "{stderr}");
    // Allowed by the hook, refused by the rule.
    assert!(env.workspace().join("hello.py").exists(), "{stderr}");
    assert!(tool_result(&server, 2).contains("deny: shell(rm *)"), "{}", tool_result(&server, 2));
    // Asked about: with no terminal, the question is answered no.
    assert!(!env.workspace().join("page").exists());
    assert!(tool_result(&server, 3).starts_with("The user declined `shell`"), "{}", tool_result(&server, 3));
    assert!(stderr.contains("shell needs permission, but there is no terminal to ask: denied"), "{stderr}");
}

/// Hooks run where shell commands run: in the project folder, in the sandbox (writes
/// outside the project refused where the kernel enforces it), without keel's keys.
#[tokio::test(flavor = "multi_thread")]
async fn hooks_run_in_the_sandbox_of_shell_commands() {
    let env = Env::new();
    let outside = env.root.path().join("outside.txt");
    configure(
        &env,
        &format!(
            r#"
[[hooks.PostToolUse]]
hooks = [{{ type = "command", command = "env > env.txt; pwd > pwd.txt; echo x > {}; true" }}]
"#,
            outside.display()
        ),
    );
    let server = MockServer::start().await;
    server.push(shell("true"));
    server.push(answer("Done."));
    let mut keel = env.keel(&server.base_url());
    keel.env("OPENAI_API_KEY", "sk-secret-0123456789abcdef").arg("go");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let environment = std::fs::read_to_string(env.workspace().join("env.txt")).unwrap();
    assert!(!environment.contains("sk-secret"), "{environment}");
    assert!(
        environment.contains(&format!("CLAUDE_PROJECT_DIR={}", env.workspace().display())),
        "{environment}"
    );
    let pwd = std::fs::read_to_string(env.workspace().join("pwd.txt")).unwrap();
    assert_eq!(pwd.trim(), env.workspace().display().to_string());
    let probe =
        std::process::Command::new(env!("CARGO_BIN_EXE_keel")).args(["__exec", "--probe"]).output().unwrap();
    if keel_sandbox::Support::parse(&text(&probe.stdout)).landlock() {
        assert!(!outside.exists(), "a hook wrote outside the project");
    } else {
        eprintln!("skipped the write check: this kernel enforces no Landlock rules");
    }
}

/// `--json` (and `keel serve`'s stream, the same objects) passes every run through.
#[tokio::test(flavor = "multi_thread")]
async fn json_mode_shows_each_hook_run() {
    let env = Env::new();
    configure(
        &env,
        r#"
[[hooks.PreToolUse]]
hooks = [{ type = "command", command = "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"read-only day\"}}'" }]
"#,
    );
    let server = MockServer::start().await;
    server.push(shell("touch x"));
    server.push(answer("Not today."));
    let mut keel = env.keel(&server.base_url());
    keel.args(["--json", "touch x"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "hook/run")
        .collect();
    assert_eq!(runs.len(), 1, "{}", text(&out.stdout));
    assert_eq!(runs[0]["data"]["event"], "PreToolUse");
    assert_eq!(runs[0]["data"]["decision"], "deny");
    assert_eq!(runs[0]["data"]["reason"], "read-only day");
    assert_eq!(runs[0]["data"]["tool"], "shell");
}

/// A compaction past the threshold tells PreCompact hooks first (trigger `auto`).
#[tokio::test(flavor = "multi_thread")]
async fn a_pre_compact_hook_is_told_before_a_compaction() {
    let env = Env::new();
    configure(
        &env,
        r#"
context_window = 2048

[[hooks.PreCompact]]
matcher = "auto"
hooks = [{ type = "command", command = "cat > \"$CLAUDE_PROJECT_DIR/compact.json\"" }]
"#,
    );
    let big = "word ".repeat(700);
    let server = MockServer::start().await;
    server.push(call("c1", "shell", &serde_json::json!({ "command": format!("echo {big}") }).to_string()));
    server.push(call(
        "c2",
        "shell",
        &serde_json::json!({ "command": format!("echo {big} again") }).to_string(),
    ));
    server.push(answer("The older steps echoed words."));
    server.push(answer("Done."));
    let mut keel = env.keel(&server.base_url());
    keel.arg("echo things");
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = env.session_events();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    let at = kinds.iter().position(|k| *k == "compaction/start").expect("a compaction ran");
    assert_eq!(kinds[at - 1], "hook/run");
    let told: Value =
        serde_json::from_str(&std::fs::read_to_string(env.workspace().join("compact.json")).unwrap())
            .unwrap();
    assert_eq!(
        (told["hook_event_name"].as_str(), told["trigger"].as_str()),
        (Some("PreCompact"), Some("auto"))
    );
}
