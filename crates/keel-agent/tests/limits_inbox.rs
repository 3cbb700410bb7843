#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Step limit, steering, follow-up and the turn-stopping hook.

mod common;

use common::*;
use futures::future::BoxFuture;
use keel_agent::{
    Agent, AgentConfig, Hooks, Inbox, NullSink, STEP_LIMIT_SUMMARY_REQUEST, SessionContext, TurnStopping,
};
use keel_llm::{CancellationToken, Message, ToolChoice, UserMessage};
use keel_session::{EventKind, InputSource, JsonlStore, SessionStore, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn looping_model(steps: usize) -> ScriptedModel {
    ScriptedModel::new((0..steps).map(|i| reply().call("read_file", &format!(r#"{{"path":"f{i}"}}"#))))
}

#[tokio::test]
async fn step_limit_ends_the_turn_with_a_clear_message() {
    let model = looping_model(10);
    let agent = Agent::builder(model.clone()).tool(FakeRead).max_steps(3).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "loop", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    assert_eq!(outcome.steps, 3);
    assert!(outcome.message.as_deref().unwrap().contains("stopped after 3 steps"), "{:?}", outcome.message);
    assert_eq!(model.requests().len(), 3);
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn step_limit_summary_request_has_tools_disabled() {
    let model = looping_model(3);
    model.push(reply().text("Summary: read f0..f2."));
    let config = AgentConfig { max_steps: 3, summary_on_step_limit: true, ..AgentConfig::default() };
    let agent = Agent::builder(model.clone()).config(config).tool(FakeRead).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "loop", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    assert_eq!(outcome.final_text, "Summary: read f0..f2.");
    // Issue 32: "stopped after 3 steps" beside a summary of 4 steps.
    assert_eq!(outcome.steps, 4);
    let message = outcome.message.as_deref().unwrap_or_default();
    assert!(message.contains("(3 steps), then one step more for a summary"), "{message}");
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    let last = &requests[3];
    assert_eq!(last.tool_choice, ToolChoice::None);
    assert_eq!(last.messages.last(), Some(&Message::User(UserMessage::text(STEP_LIMIT_SUMMARY_REQUEST))));
    // The harness's request is logged like any other input (model-visible means logged).
    let harness_inputs = store
        .read(session.id())
        .unwrap()
        .into_iter()
        .filter(|e| matches!(&e.kind, EventKind::UserMessage(u) if u.source == InputSource::Harness))
        .count();
    assert_eq!(harness_inputs, 1);
}

#[tokio::test]
async fn a_summary_reply_that_still_calls_tools_gets_refusals() {
    let model = looping_model(2);
    model.push(reply().call("read_file", r#"{"path":"again"}"#));
    let config = AgentConfig { max_steps: 2, summary_on_step_limit: true, ..AgentConfig::default() };
    let agent = Agent::builder(model.clone()).config(config).tool(FakeRead).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "loop", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::MaxSteps);
    let last = results(session.messages()).pop().unwrap();
    assert!(last.2 && last.1.contains("step limit"), "{last:?}");
    assert_provider_valid(session.messages());
}

#[tokio::test]
async fn steering_sent_while_tools_run_is_seen_in_the_next_step() {
    let inbox = Inbox::new();
    let model = ScriptedModel::new([reply().call("steerer", "{}"), reply().text("checked the tests too")]);
    let agent = Agent::builder(model.clone()).tool(Steerer(inbox.clone())).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::new("/w").inbox(inbox.clone());
    let outcome = agent
        .run_turn(&mut session, &ctx, "fix the bug", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let second = &model.requests()[1].messages;
    assert_eq!(second.last(), Some(&Message::User(UserMessage::text("also check the tests"))));
    assert_provider_valid(second);
}

#[tokio::test]
async fn steering_after_a_final_answer_continues_the_turn() {
    let inbox = Inbox::new();
    let model = ScriptedModel::new([reply().text("done?"), reply().text("now really done")]);
    struct SteerOnce(Inbox, std::sync::Mutex<bool>);
    impl keel_agent::Sink for SteerOnce {
        fn emit(&self, event: &keel_agent::AgentEvent<'_>) {
            if let keel_agent::AgentEvent::Logged(e) = event
                && matches!(e.kind, EventKind::AssistantMessage(_))
            {
                let mut done = self.1.lock().unwrap();
                if !*done {
                    *done = true;
                    self.0.steer("wait, one more thing");
                }
            }
        }
    }
    let agent = Agent::builder(model.clone()).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::new("/w").inbox(inbox.clone());
    let sink = SteerOnce(inbox, std::sync::Mutex::new(false));
    let outcome = agent.run_turn(&mut session, &ctx, "go", &sink, &CancellationToken::new()).await.unwrap();
    assert_eq!((outcome.steps, outcome.final_text.as_str()), (2, "now really done"));
}

#[tokio::test]
async fn follow_up_starts_a_new_turn_after_the_current_one() {
    let inbox = Inbox::new();
    let model = ScriptedModel::new([
        reply().call("read_file", r#"{"path":"a"}"#),
        reply().text("one"),
        reply().text("two"),
    ]);
    let agent = Agent::builder(model.clone()).tool(FakeRead).build();
    inbox.follow_up("and then summarize");
    let mut session = keel_agent::Session::in_memory("/w");
    let ctx = SessionContext::new("/w").inbox(inbox.clone());
    let outcomes =
        agent.run(&mut session, &ctx, "first task", &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(
        outcomes.iter().map(|o| (o.turn, o.final_text.as_str())).collect::<Vec<_>>(),
        vec![(1, "one"), (2, "two")]
    );
    // The follow-up was not injected into the first turn.
    assert!(
        model.requests()[1]
            .messages
            .iter()
            .all(|m| !matches!(m, Message::User(u) if u.content.contains("summarize")))
    );
    assert_eq!(
        model.requests()[2].messages.last(),
        Some(&Message::User(UserMessage::text("and then summarize")))
    );
}

struct KeepGoingOnce(std::sync::Mutex<bool>);

impl Hooks for KeepGoingOnce {
    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<keel_agent::Nudge>> {
        Box::pin(async move {
            let mut fired = self.0.lock().unwrap();
            if *fired || state.final_text.contains("tests pass") {
                return None;
            }
            *fired = true;
            Some(keel_agent::Nudge::new("Run the tests before you stop.", "test: tests not run"))
        })
    }
}

#[tokio::test]
async fn turn_stopping_hook_can_continue_the_turn() {
    let model = ScriptedModel::new([reply().text("done"), reply().text("tests pass")]);
    let agent = Agent::builder(model.clone()).hooks(KeepGoingOnce(std::sync::Mutex::new(false))).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "go", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((outcome.reason, outcome.steps), (TurnEndReason::Completed, 2));
    assert_eq!(
        model.requests()[1].messages.last(),
        Some(&Message::User(UserMessage::text("Run the tests before you stop.")))
    );
}
