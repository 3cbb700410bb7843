#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every failure path ends as exactly one `is_error` result with an actionable message.

mod common;

use common::*;
use futures::future::BoxFuture;
use keel_agent::{Agent, HookDecision, Hooks, NullSink, SessionContext, ToolCallRequest};
use keel_llm::CancellationToken;
use keel_session::{EventKind, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

struct DenyFailing;

impl Hooks for DenyFailing {
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            if request.call.arguments.contains("forbidden") {
                HookDecision::Deny {
                    reason: "reading forbidden files is not allowed by the user's policy".into(),
                }
            } else {
                HookDecision::Allow
            }
        })
    }
}

/// Runs one step with `calls` and returns each result (content, is_error, error_code).
async fn run_calls(calls: &[(&str, &str)]) -> Vec<(String, bool, Option<String>)> {
    let mut first = reply();
    for (name, args) in calls {
        first = first.call(name, args);
    }
    let model = ScriptedModel::new([first, reply().text("done")]);
    let agent = Agent::builder(model).tool(FakeRead).tool(Failing).tool(Panicking).hooks(DenyFailing).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert_provider_valid(session.messages());
    store
        .read(session.id())
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult(r) => Some((r.content, r.is_error, r.error_code)),
            _ => None,
        })
        .collect()
}

async fn single(name: &str, args: &str) -> (String, bool, Option<String>) {
    let mut results = run_calls(&[(name, args)]).await;
    assert_eq!(results.len(), 1, "exactly one result");
    results.remove(0)
}

#[tokio::test]
async fn unknown_tool_lists_available_names() {
    let (content, is_error, code) = single("reed_file", r#"{"path":"a"}"#).await;
    assert!(is_error);
    assert_eq!(code.as_deref(), Some("unknown_tool"));
    assert_eq!(content, "Unknown tool `reed_file`. Available tools: read_file, failing, panicking.");
}

#[tokio::test]
async fn malformed_json_is_reported_with_the_expected_shape() {
    let (content, is_error, code) = single("read_file", r#"{"path": "a""#).await;
    assert!(is_error);
    assert_eq!(code.as_deref(), Some("invalid_arguments"));
    assert!(content.starts_with("Invalid arguments for `read_file`: not valid JSON"), "{content}");
    assert!(content.ends_with("Expected a JSON object {path: string (required)}."), "{content}");
}

#[tokio::test]
async fn missing_required_field_is_named() {
    let (content, is_error, _) = single("read_file", "{}").await;
    assert!(is_error);
    assert!(content.contains("missing field `path`"), "{content}");
}

#[tokio::test]
async fn extra_field_is_rejected() {
    let (content, is_error, _) = single("read_file", r#"{"path":"a","encoding":"utf8"}"#).await;
    assert!(is_error);
    assert!(content.contains("unknown field `encoding`"), "{content}");
}

#[tokio::test]
async fn wrong_type_is_named() {
    let (content, is_error, _) = single("read_file", r#"{"path": 42}"#).await;
    assert!(is_error);
    assert!(content.contains("invalid type: integer `42`, expected a string"), "{content}");
}

#[tokio::test]
async fn non_object_arguments_are_rejected() {
    let (content, is_error, _) = single("read_file", r#"["a"]"#).await;
    assert!(is_error);
    assert!(content.contains("expected an object, got an array"), "{content}");
}

#[tokio::test]
async fn tool_error_keeps_its_message_and_code() {
    let (content, is_error, code) = single("failing", "").await;
    assert!(is_error);
    assert_eq!(code.as_deref(), Some("tool_error"));
    assert_eq!(content, "disk quota exceeded; free some space and retry");
}

#[tokio::test]
async fn tool_panic_becomes_an_error_result_and_the_loop_lives_on() {
    let (content, is_error, code) = single("panicking", "{}").await;
    assert!(is_error);
    assert_eq!(code.as_deref(), Some("panic"));
    assert!(content.contains("index out of bounds in the tool"), "{content}");
}

#[tokio::test]
async fn hook_denial_is_an_error_result_and_the_turn_goes_on() {
    let (content, is_error, code) = single("read_file", r#"{"path":"forbidden.txt"}"#).await;
    assert!(is_error);
    assert_eq!(code.as_deref(), Some("denied"));
    assert_eq!(content, "reading forbidden files is not allowed by the user's policy");
}

#[tokio::test]
async fn all_failures_in_one_message_keep_call_order() {
    let results = run_calls(&[
        ("nope", "{}"),
        ("read_file", "{bad"),
        ("read_file", r#"{"path":"ok.txt"}"#),
        ("panicking", "{}"),
        ("failing", "{}"),
        ("read_file", r#"{"path":"forbidden"}"#),
    ])
    .await;
    let codes: Vec<Option<&str>> = results.iter().map(|r| r.2.as_deref()).collect();
    assert_eq!(
        codes,
        vec![
            Some("unknown_tool"),
            Some("invalid_arguments"),
            None,
            Some("panic"),
            Some("tool_error"),
            Some("denied")
        ]
    );
    assert_eq!(results[2].0, "contents of ok.txt");
}

struct StopOnFailing;

impl Hooks for StopOnFailing {
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            if request.call.name == "failing" {
                HookDecision::DenyAndStop { reason: "policy forbids `failing`; stopping".into() }
            } else {
                HookDecision::Allow
            }
        })
    }
}

#[tokio::test]
async fn deny_and_stop_blocks_the_turn_and_answers_every_call() {
    let model = ScriptedModel::new([
        reply()
            .call("read_file", r#"{"path":"a"}"#)
            .call("failing", "{}")
            .call("read_file", r#"{"path":"b"}"#),
        reply().text("unreachable"),
    ]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).tool(Failing).hooks(StopOnFailing).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Blocked);
    assert_eq!(outcome.message.as_deref(), Some("policy forbids `failing`; stopping"));
    assert_provider_valid(session.messages());
    let results = results(session.messages());
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].1, "contents of a");
    assert!(results[1].2 && results[1].1.contains("policy forbids"));
    assert!(results[2].2 && results[2].1.starts_with("not started"), "{:?}", results[2]);
    assert_eq!(model.remaining(), 1, "no request after a blocked step");
}
