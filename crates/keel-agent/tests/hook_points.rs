#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The hook points a user's hook commands need (issue 33, item 2): a prompt blocked
//! before it is logged, a call denied with a reason the model reads, a turn stopped after
//! a call, a compaction announced; each run reported is logged as `hook/run`.

mod common;

use common::*;
use keel_agent::{Agent, HookChain, HookVerdict, RecordingSink, SessionContext};
use keel_llm::{CancellationToken, Message, UserMessage};
use keel_session::{CompactionReason, EventKind, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn agent(model: ScriptedModel) -> Agent {
    Agent::builder(model).tool(FakeRead).hooks(UserLikeHooks::default()).build()
}

fn kinds(sink: &RecordingSink) -> Vec<&'static str> {
    sink.logged().iter().map(|e| e.kind.type_name()).collect()
}

#[tokio::test]
async fn a_blocked_prompt_is_never_logged_nor_sent_and_the_next_one_is() {
    let model = ScriptedModel::new([reply().text("hello"), reply().text("hello again")]);
    let agent = agent(model.clone());
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default().environment("<environment>/w</environment>");
    let cancel = CancellationToken::new();
    let sink = RecordingSink::new();
    let outcome = agent.run_turn(&mut session, &ctx, "my secret is hunter2", &sink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Blocked);
    assert_eq!(outcome.message.as_deref(), Some("prompts with secrets are refused"));
    assert_eq!(outcome.steps, 0);
    assert!(model.requests().is_empty());
    assert_eq!(kinds(&sink), ["turn/start", "hook/run", "turn/end"]);
    let logged = serde_json::to_string(&sink.logged()).unwrap();
    assert!(!logged.contains("hunter2"), "{logged}");

    let outcome = agent.run_turn(&mut session, &ctx, "say hello", &sink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed, "{:?}", outcome.message);
    let requests = model.requests();
    assert_eq!(
        requests[0].messages,
        [Message::User(UserMessage {
            content: "<environment>/w</environment>\n\nsay hello\n\nThe build is at v2.".into(),
            images: Vec::new(),
        })]
    );
}

#[tokio::test]
async fn a_denied_call_gets_the_hooks_reason_and_the_model_reads_it() {
    let model =
        ScriptedModel::new([reply().call("read_file", r#"{"path":"secret.txt"}"#), reply().text("ok")]);
    let agent = agent(model.clone());
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    let sink = RecordingSink::new();
    agent.run_turn(&mut session, &SessionContext::default(), "read it", &sink, &cancel).await.unwrap();
    let requests = model.requests();
    assert_eq!(
        results(&requests[1].messages),
        [("call_read_file_0".into(), "secret.txt is off limits".into(), true)]
    );
    let events = sink.logged();
    let denied = events.iter().find_map(|e| match &e.kind {
        EventKind::HookRun(run) if run.event == "PreToolUse" => run.decision,
        _ => None,
    });
    assert_eq!(denied, Some(HookVerdict::Deny));
}

#[tokio::test]
async fn a_stop_after_a_call_ends_the_turn_blocked_once_its_result_is_in() {
    let model =
        ScriptedModel::new([reply().call("read_file", r#"{"path":"stop.txt"}"#), reply().text("never")]);
    let agent = agent(model.clone());
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    let sink = RecordingSink::new();
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "read it", &sink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Blocked);
    assert_eq!(outcome.message.as_deref(), Some("the hook stopped the turn"));
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        results(session.messages()),
        [("call_read_file_0".into(), "contents of stop.txt".into(), false)]
    );
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn a_compaction_is_announced_before_it_starts() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"a.txt"}"#),
        reply().text("first"),
        reply().call("read_file", r#"{"path":"c.txt"}"#),
        reply().text("second"),
        reply().text("The summary."),
    ]);
    let hooks = std::sync::Arc::new(UserLikeHooks::default());
    let chain = HookChain::new().with_shared(hooks.clone());
    let agent = Agent::builder(model.clone()).tool(FakeRead).hooks(chain).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    let sink = RecordingSink::new();
    agent.run_turn(&mut session, &ctx, "read a", &sink, &cancel).await.unwrap();
    agent.run_turn(&mut session, &ctx, "read c", &sink, &cancel).await.unwrap();
    let end = agent.compact(&mut session, &ctx, Some("the files"), &sink, &cancel).await.unwrap();
    assert!(end.is_some());
    assert_eq!(*hooks.compactions.lock().unwrap(), [(CompactionReason::Manual, Some("the files".into()))]);
    let kinds = kinds(&sink);
    let at = kinds.iter().position(|k| *k == "compaction/start").unwrap();
    assert_eq!(kinds[at - 1], "hook/run");
}

#[tokio::test]
async fn a_chain_forwards_the_new_hook_points_to_every_hook() {
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"b.txt"}"#),
        reply().text("done"),
        reply().text("done again"),
        reply().text("and again"),
    ]);
    let chain = HookChain::new().with(UserLikeHooks::default()).with(UserLikeHooks::default());
    let agent = Agent::builder(model.clone()).tool(FakeRead).hooks(chain).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let cancel = CancellationToken::new();
    let sink = RecordingSink::new();
    agent.run_turn(&mut session, &SessionContext::default(), "read b", &sink, &cancel).await.unwrap();
    let requests = model.requests();
    let last_user = |i: usize| match requests[i].messages.last() {
        Some(Message::User(user)) => user.content.clone(),
        other => panic!("request {i} ends with {other:?}"),
    };
    assert_eq!(last_user(0), "read b\n\nThe build is at v2.\n\nThe build is at v2.");
    assert_eq!(last_user(1), "b.txt is generated.\n\nb.txt is generated.");
    // Each hook continues the stopping turn once: the first, then the second.
    assert_eq!(requests.len(), 4);
    let outcome =
        agent.run_turn(&mut session, &SessionContext::default(), "a secret", &sink, &cancel).await.unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Blocked);
}
