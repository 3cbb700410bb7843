#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Loop detection: a model repeating the same call is warned, then stopped.

mod common;

use common::*;
use keel_agent::{Agent, LOOP_SUMMARY_REQUEST, NullSink, SessionContext};
use keel_llm::{CancellationToken, Message, ToolChoice, UserMessage};
use keel_session::{JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

/// The same read, with its keys in a different order every other time.
fn same_read(i: usize) -> keel_testkit::ReplyBuilder {
    let args = if i.is_multiple_of(2) { r#"{"path":"a.txt"}"# } else { r#"{ "path" : "a.txt" }"# };
    reply().call("read_file", args)
}

#[tokio::test]
async fn a_model_repeating_one_call_is_warned_at_3_and_stopped_at_8() {
    let mut script: Vec<_> = (0..8).map(same_read).collect();
    script.push(reply().text("I kept reading a.txt; it says the same thing."));
    let model = ScriptedModel::new(script);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Looping);
    assert_eq!(outcome.final_text, "I kept reading a.txt; it says the same thing.");
    let results = results(session.messages());
    assert_eq!(results.len(), 8);
    let warned: Vec<bool> = results.iter().map(|r| r.1.contains("same call")).collect();
    assert_eq!(warned, vec![false, false, true, true, true, true, true, true]);
    assert!(results[2].1.contains("3 times in a row"), "{}", results[2].1);
    assert!(results[7].1.starts_with("not run: this call repeats"), "{}", results[7].1);
    // Eight requests with tools, then one for the answer with tools off.
    let requests = model.requests();
    assert_eq!(requests.len(), 9);
    assert_eq!(requests[8].tool_choice, ToolChoice::None);
    assert_eq!(requests[8].messages.last(), Some(&Message::User(UserMessage::text(LOOP_SUMMARY_REQUEST))));
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn the_count_survives_a_crash_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let id = {
        // Five repeats, then keel dies in the middle of the sixth request.
        let mut script: Vec<_> = (0..5).map(same_read).collect();
        script.push(reply().delay(std::time::Duration::from_secs(60)).text("never"));
        let model = ScriptedModel::new(script);
        let agent = Agent::builder(model).tool(FakeRead).build();
        let mut session = store.create("/w").unwrap();
        let ctx = SessionContext::default();
        let cancel = CancellationToken::new();
        let turn = agent.run_turn(&mut session, &ctx, "go", &NullSink, &cancel);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(300), turn).await.is_err());
        session.id().to_owned()
    };
    let mut session = store.open(&id).unwrap();
    let model = ScriptedModel::new([same_read(0), same_read(1), same_read(2), reply().text("stopped")]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go on", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    // 5 before the crash + 3 after = 8: stopped at the third call after the resume.
    assert_eq!(outcome.reason, TurnEndReason::Looping);
    assert_eq!(model.requests().len(), 4);
    // A turn that ended normally starts the count again.
    let model = ScriptedModel::new([same_read(0), reply().text("ok")]);
    let agent = Agent::builder(model).tool(FakeRead).build();
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::default(),
            "read it once more",
            &NullSink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    assert!(!results(session.messages()).last().unwrap().1.contains("same call"));
}
