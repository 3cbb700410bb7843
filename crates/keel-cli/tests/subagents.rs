#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagents (issue 34, item 2) end to end: the parent model calls `task`, the child runs
//! against the same server and answers, the parent answers. The child is a session of the
//! parent's store (linked both ways), marked in `keel sessions`, resumable on its own, and
//! never what `--continue` picks.

mod common;

use common::*;
use keel_session::{Event, EventKind, SessionStore, SessionSummary};
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;

const TASK: &str = r#"{"prompt":"Find what hello.py prints.","description":"find the greeting"}"#;

/// The parent and its child, from the store (the parent has no `spawned_by`).
fn parent_and_child(env: &Env) -> (SessionSummary, SessionSummary) {
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let (children, parents): (Vec<_>, Vec<_>) = sessions.into_iter().partition(|s| s.spawned_by.is_some());
    assert_eq!((children.len(), parents.len()), (1, 1));
    (parents.into_iter().next().unwrap(), children.into_iter().next().unwrap())
}

fn header(events: &[Event]) -> keel_session::SessionHeader {
    match &events[0].kind {
        EventKind::SessionHeader(header) => header.clone(),
        other => panic!("not a header: {other:?}"),
    }
}

/// Runs `keel` (with `flags` besides) on a task whose parent delegates to a child;
/// returns stdout and stderr.
async fn delegate(env: &Env, server: &MockServer, flags: &[&str]) -> (String, String) {
    server.push(ChatStream::new().tool_call("t1", "task", TASK, 2).finish("tool_calls").response());
    server.push(ChatStream::new().text("hello.py prints `hello from keel`.", 2).finish("stop").response());
    server.push(ChatStream::new().text("It prints hello from keel.", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(flags).args(["--tool-profile", "full", "What does hello.py print? Ask a subagent."]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_call_runs_a_child_session_in_the_parents_store() {
    let env = Env::new();
    let server = MockServer::start().await;
    let (stdout, stderr) = delegate(&env, &server, &[]).await;
    assert_eq!(stdout, "It prints hello from keel.\n");
    let (parent, child) = parent_and_child(&env);
    assert!(
        stderr.contains(&format!("↳ task general: find the greeting · session {}", child.id)),
        "{stderr}"
    );

    // The parent offered `task`; the child's request (the second) had its own prompt,
    // the task as its message, and no `task` among its tools.
    let requests: Vec<serde_json::Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(requests.len(), 3);
    let tools = |body: &serde_json::Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(tools(&requests[0]).contains(&"task".to_owned()), "{:?}", tools(&requests[0]));
    assert!(!tools(&requests[1]).contains(&"task".to_owned()), "{:?}", tools(&requests[1]));
    let child_messages = requests[1]["messages"].as_array().unwrap();
    assert!(child_messages[0]["content"].as_str().unwrap().starts_with("You are a subagent"));
    assert!(child_messages.iter().any(|m| m["role"] == "user"
        && m["content"].as_str().is_some_and(|c| c.contains("Find what hello.py prints."))));
    // The parent's result is the child's answer, naming the child's session.
    let result = requests[2]["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "tool").unwrap();
    let result = result["content"].as_str().unwrap();
    assert!(result.starts_with("hello.py prints `hello from keel`."), "{result}");
    assert!(result.contains(&format!("[subagent general, session {}:", child.id)), "{result}");

    // The child's header cites the parent's call; the parent's log has that call.
    let link = header(&env.store().read(&child.id).unwrap()).spawned_by.unwrap();
    assert_eq!(
        (link.id.as_str(), link.call_id.as_str(), link.agent.as_str()),
        (parent.id.as_str(), "t1", "general")
    );
    let parent_events = env.store().read(&parent.id).unwrap();
    let call = parent_events.iter().find(|e| e.seq == link.seq).unwrap();
    assert!(
        matches!(&call.kind, EventKind::ToolCall(c) if c.call_id == "t1" && c.name == "task"),
        "{call:?}"
    );
    assert_eq!(header(&parent_events).spawned_by, None);

    // `keel sessions` marks the child.
    let mut list = env.keel(&server.base_url());
    list.arg("sessions");
    let out = output(list).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    let line = |id: &str| listed.lines().find(|l| l.starts_with(id)).unwrap().to_owned();
    assert!(line(&child.id).ends_with(&format!("↳ child of {} (general)", parent.id)), "{listed}");
    assert!(!line(&parent.id).contains("child of"), "{listed}");
    let mut show = env.keel(&server.base_url());
    show.args(["sessions", "show", &child.id]);
    let shown = text(&output(show).await.stdout);
    let cited = format!("started by session {}'s task call (seq {}, agent general)", parent.id, link.seq);
    assert!(shown.contains(&cited), "{shown}");

    // The child resumes on its own: its history goes to the model.
    server.push(ChatStream::new().text("It is one print call.", 2).finish("stop").response());
    let mut resume = env.keel(&server.base_url());
    resume.args(["--tool-profile", "full", "--resume", &child.id, "Say more."]);
    let out = output(resume).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It is one print call.\n");
    let body = server.requests()[3].json();
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().any(|m| m["content"] == "hello.py prints `hello from keel`."), "{messages:?}");
    assert_eq!(messages.last().unwrap()["content"], "Say more.");
    assert_eq!(env.store().list().unwrap().len(), 2, "resuming made no new session");
}

#[tokio::test(flavor = "multi_thread")]
async fn continue_skips_a_child_even_when_it_changed_last() {
    let env = Env::new();
    let server = MockServer::start().await;
    delegate(&env, &server, &[]).await;
    let (parent, child) = parent_and_child(&env);
    // The child's log is the newest (as when the parent was killed while it ran).
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    let log = std::fs::File::options().append(true).open(env.store().path_of(&child.id)).unwrap();
    log.set_modified(later).unwrap();

    server.push(ChatStream::new().text("Continued.", 2).finish("stop").response());
    let mut again = env.keel(&server.base_url());
    again.args(["--continue", "Go on."]);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("resumed session {}", parent.id)), "{}", text(&out.stderr));
    let body = server.requests()[3].json();
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().any(|m| m["content"] == "It prints hello from keel."), "{messages:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_store_the_child_runs_in_memory() {
    let env = Env::new();
    let server = MockServer::start().await;
    server.push(ChatStream::new().tool_call("t1", "task", TASK, 2).finish("tool_calls").response());
    server.push(ChatStream::new().text("It prints hello.", 2).finish("stop").response());
    server.push(ChatStream::new().text("hello.", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(["--no-session", "--tool-profile", "full", "What does hello.py print?"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello.\n");
    assert!(
        text(&out.stderr).contains("↳ task general: find the greeting · session "),
        "{}",
        text(&out.stderr)
    );
    assert!(env.store().list().unwrap_or_default().is_empty(), "nothing kept");
}

/// `--json` sends a child's start and end as `subagent/*` events (docs/json-events.md).
#[tokio::test(flavor = "multi_thread")]
async fn the_json_stream_tells_a_childs_start_and_end() {
    let env = Env::new();
    let server = MockServer::start().await;
    let (stdout, _) = delegate(&env, &server, &["--json"]).await;
    let events = json_events(stdout.as_bytes(), "subagent/");
    let child = env.store().list().unwrap().into_iter().find(|s| s.spawned_by.is_some()).unwrap();
    assert_eq!(
        events,
        [
            serde_json::json!({"type": "subagent/started", "data": {
                "call_id": "t1", "session_id": child.id, "agent": "general", "description": "find the greeting"
            }}),
            serde_json::json!({"type": "subagent/finished", "data": {
                "call_id": "t1", "session_id": child.id, "reason": "completed", "steps": 1, "tool_calls": 0,
                "usage": events[1]["data"]["usage"].clone()
            }}),
        ]
    );
    assert!(events[1]["data"]["usage"]["output_tokens"].as_u64().is_some(), "{}", events[1]);
}
