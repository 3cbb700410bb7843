#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A child cancelled with its parent ends its turn as any aborted turn does: its log is
//! closed (`turn/end` aborted, every call answered), never cut off mid-turn.

mod common;
mod subagent_support;

use std::collections::BTreeSet;
use std::time::Duration;

use keel_agent::subagent::TaskLimits;
use keel_agent::{AgentConfig, RecordingSink, SessionContext};
use keel_llm::CancellationToken;
use keel_session::{Event, EventKind, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;
use subagent_support::*;

/// The ids of the calls a log started and of those it answered.
fn calls_and_answers(events: &[Event]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut calls = BTreeSet::new();
    let mut answers = BTreeSet::new();
    for event in events {
        match &event.kind {
            EventKind::ToolCall(call) => {
                calls.insert(call.call_id.clone());
            }
            EventKind::ToolResult(result) => {
                answers.insert(result.call_id.clone());
            }
            _ => {}
        }
    }
    (calls, answers)
}

/// Checks the child's log is closed as an aborted turn and opens with nothing to repair.
fn assert_closed(s: &Setup, log: &[Event]) {
    assert_eq!(turn_end(log), Some(TurnEndReason::Aborted), "{log:#?}");
    assert!(matches!(log.last().map(|e| &e.kind), Some(EventKind::TurnEnd(_))), "{log:#?}");
    let (calls, answers) = calls_and_answers(log);
    assert_eq!(calls, BTreeSet::from(["s1".to_owned()]));
    assert_eq!(answers, calls);
    let id = match &log[0].kind {
        EventKind::SessionHeader(header) => header.id.clone(),
        other => panic!("{other:?}"),
    };
    let mut child = s.store.open(&id).unwrap();
    assert!(child.repair().unwrap().is_clean());
}

#[tokio::test(start_paused = true)]
async fn aborting_the_parent_closes_the_log_of_a_child_stuck_in_a_tool() {
    // One script serves the parent and then the child; the child's tool ignores the abort.
    let model = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Look around."}"#),
        reply().call_id("s1", "stubborn", "{}"),
    ]);
    let s = setup(&model, Vec::new(), &[], TaskLimits::default(), None);
    let mut session = s.store.create("/w").unwrap();
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        stopper.cancel();
    });
    let (ctx, sink) = (SessionContext::new("/w"), RecordingSink::new());
    let turn = s.agent.run_turn(&mut session, &ctx, "go", &sink, &cancel);
    let outcome = tokio::time::timeout(Duration::from_secs(600), turn).await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted);

    let kids = children(&s.store);
    assert_eq!(kids.len(), 1);
    assert_closed(&s, &kids[0].1);
    // The parent's result says the child was cut short by the abort.
    let result = &results(&sink.logged())[0];
    assert_eq!((result.call_id.as_str(), result.is_error), ("t1", true));
    assert!(result.content.starts_with("Operation aborted"), "{}", result.content);
    assert!(result.content.contains("it was aborted"), "{}", result.content);
}

#[tokio::test(start_paused = true)]
async fn a_child_whose_call_is_dropped_is_cancelled_and_closes_its_log() {
    // The parent gives a call 2 s: its `task` call is dropped while the child's tool runs.
    let model = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Look around."}"#),
        reply().call_id("s1", "stubborn", "{}"),
        reply().text("The parent goes on."),
    ]);
    let mut s = setup(&model, Vec::new(), &[], TaskLimits::default(), None);
    let config = AgentConfig { tool_timeout: Some(Duration::from_secs(2)), ..AgentConfig::default() };
    s.agent = keel_agent::Agent::builder_shared(std::sync::Arc::new(model.clone()))
        .config(config)
        .tools(s.agent.tools().clone())
        .build();
    let mut session = s.store.create("/w").unwrap();
    let (ctx, sink) = (SessionContext::new("/w"), RecordingSink::new());
    let outcome = s.agent.run_turn(&mut session, &ctx, "go", &sink, &CancellationToken::new()).await.unwrap();
    assert_eq!(outcome.final_text, "The parent goes on.");
    assert_eq!(results(&sink.logged())[0].error_code.as_deref(), Some("timeout"));

    // The child was not left running for an hour: it was cancelled and closed its log.
    let mut log = Vec::new();
    for _ in 0..60 {
        log = children(&s.store).remove(0).1;
        if turn_end(&log).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_closed(&s, &log);
}
