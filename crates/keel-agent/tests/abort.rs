#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Abort is a state: partial text kept, every call answered, turn ends `aborted`, the
//! session stays usable.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::future::BoxFuture;
use keel_agent::{ABORTED, Agent, HookDecision, Hooks, NullSink, SessionContext, ToolCallRequest};

use keel_llm::{CancellationToken, ContentBlock, FinishReason, Message, UserMessage};
use keel_session::{EventKind, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn cancel_after(cancel: &CancellationToken, ms: u64) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        cancel.cancel();
    });
}

#[tokio::test]
async fn abort_during_the_model_stream_keeps_the_partial_text() {
    let model = ScriptedModel::new([
        reply().thinking("let me think").text("The answer starts").hang(),
        reply().text("next"),
    ]);
    let agent = Agent::builder(model.clone()).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let cancel = CancellationToken::new();
    cancel_after(&cancel, 50);
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    match session.messages().last().unwrap() {
        Message::Assistant(m) => {
            assert!(m.interrupted);
            assert_eq!(m.finish_reason, FinishReason::Aborted);
            assert_eq!(
                m.content,
                vec![
                    ContentBlock::Thinking { text: "let me think".into(), signature: None },
                    ContentBlock::Text { text: "The answer starts".into() }
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    // The session stays usable and the next request is valid.
    let next = agent
        .run_turn(&mut session, &SessionContext::default(), "continue", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(next.reason, TurnEndReason::Completed);
    assert_provider_valid(&model.requests()[1].messages);
    let kinds: Vec<&str> = store.read(session.id()).unwrap().iter().map(|e| e.kind.type_name()).collect();
    assert!(kinds.windows(3).any(|w| w == ["assistant/message", "step/end", "turn/end"]));
}

#[tokio::test]
async fn abort_during_a_tool_answers_started_and_unstarted_calls() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        reply()
            .text("Running two things.")
            .call("exclusive_sleep", r#"{"ms":5000,"label":"long"}"#)
            .call("exclusive_sleep", r#"{"ms":10,"label":"later"}"#),
        reply().text("after abort"),
    ]);
    let agent = Agent::builder(model.clone()).tool(ExclusiveSleep(timeline.clone())).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    cancel_after(&cancel, 100);
    let started = std::time::Instant::now();
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &cancel).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "the tool was not stopped promptly");
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    let results = results(session.messages());
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].1, format!("{ABORTED}\nlong interrupted"));
    assert!(results[0].2);
    assert!(results[1].1.starts_with("not started"), "{:?}", results[1]);
    assert_eq!(timeline.lock().unwrap().len(), 1, "the second call never ran");

    agent
        .run_turn(&mut session, &SessionContext::default(), "go on", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_provider_valid(&model.requests()[1].messages);
}

/// A hook that cancels the turn after the first call it sees, i.e. between tools.
struct CancelBetween(CancellationToken, Mutex<u32>);

impl Hooks for CancelBetween {
    fn before_tool_call<'a>(&'a self, _request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            let mut seen = self.1.lock().unwrap();
            *seen += 1;
            if *seen == 2 {
                self.0.cancel();
            }
            HookDecision::Allow
        })
    }
}

#[tokio::test]
async fn abort_between_tools_leaves_later_calls_not_started() {
    let timeline: Timeline = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        reply()
            .call("exclusive_sleep", r#"{"ms":1,"label":"one"}"#)
            .call("exclusive_sleep", r#"{"ms":1,"label":"two"}"#)
            .call("exclusive_sleep", r#"{"ms":1,"label":"three"}"#),
        reply().text("fine"),
    ]);
    let cancel = CancellationToken::new();
    let agent = Agent::builder(model.clone())
        .tool(ExclusiveSleep(timeline.clone()))
        .hooks(CancelBetween(cancel.clone(), Mutex::new(0)))
        .build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    let results = results(session.messages());
    assert_eq!(results[0].1, "one slept");
    assert!(results[1].1.starts_with("not started"), "{:?}", results[1]);
    assert!(results[2].1.starts_with("not started"), "{:?}", results[2]);
    agent
        .run_turn(&mut session, &SessionContext::default(), "again", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_provider_valid(&model.requests()[1].messages);
}

#[tokio::test]
async fn abort_before_any_output_logs_an_empty_interrupted_message_not_sent_back() {
    let model = ScriptedModel::new([reply().delay(Duration::from_secs(30)), reply().text("ok")]);
    let agent = Agent::builder(model.clone()).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    cancel_after(&cancel, 20);
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    agent
        .run_turn(&mut session, &SessionContext::default(), "again", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let sent = &model.requests()[1].messages;
    // No empty assistant message; the two user inputs are one message (turns alternate).
    assert_eq!(sent, &vec![Message::User(UserMessage::text("go\n\nagain"))]);
    assert_provider_valid(sent);
}

#[tokio::test]
async fn a_tool_ignoring_cancellation_is_dropped_after_the_grace_period() {
    struct Stubborn;
    impl keel_agent::Tool for Stubborn {
        type Args = NoArgs;
        fn name(&self) -> &str {
            "stubborn"
        }
        fn description(&self) -> &str {
            "Ignores cancellation."
        }
        async fn call(
            &self,
            _a: NoArgs,
            _c: keel_agent::ToolContext,
        ) -> Result<keel_agent::ToolOutput, keel_agent::ToolError> {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(keel_agent::ToolOutput::text("late"))
        }
    }
    let model = ScriptedModel::new([reply().call("stubborn", "{}")]);
    let config = keel_agent::AgentConfig { abort_grace: Duration::from_millis(100), ..Default::default() };
    let agent = Agent::builder(model).config(config).tool(Stubborn).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    cancel_after(&cancel, 50);
    let started = std::time::Instant::now();
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &cancel).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    assert_eq!(results(session.messages())[0].1, ABORTED);
    let _ = EventKind::TurnStart(keel_session::TurnStart { turn: 0 });
}
