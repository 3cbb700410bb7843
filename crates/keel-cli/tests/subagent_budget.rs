#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The token budget a session's subagents share is not given back by resuming the
//! session: what its children spent is read back from its log.

mod common;

use common::*;
use keel_session::SessionStore;
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;

const TASK: &str = r#"{"prompt":"Find what hello.py prints."}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_session_does_not_get_its_subagents_budget_back() {
    let env = Env::new();
    let server = MockServer::start().await;
    // The child spends the whole budget the children of a session share (1.5 M tokens).
    server.push(ChatStream::new().tool_call("t1", "task", TASK, 2).finish("tool_calls").response());
    server.push(ChatStream::new().text("It prints hello.", 2).usage(1_500_000, 10).finish("stop").response());
    server.push(ChatStream::new().text("hello.", 2).finish("stop").response());
    let mut first = env.keel(&server.base_url());
    first.args(["--tool-profile", "full", "What does hello.py print?"]);
    let out = output(first).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Continued in a new process, the session's children have nothing left.
    server.push(ChatStream::new().tool_call("t2", "task", TASK, 2).finish("tool_calls").response());
    server.push(ChatStream::new().text("Then not.", 2).finish("stop").response());
    let mut again = env.keel(&server.base_url());
    again.args(["--tool-profile", "full", "--continue", "Ask again."]);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Then not.\n");
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "no child ran the second time");
    let body = requests[4].json();
    let result = body["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        result["content"],
        "Not started: the subagents of this session have spent their token budget (1500000 tokens). Go on \
without them."
    );
    assert_eq!(env.store().list().unwrap().len(), 2, "one parent, one child");
}
