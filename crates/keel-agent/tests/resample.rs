#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A reply that only makes again a call that just failed is set aside (`step/resampled`,
//! between the step's `step/start` and its reply) and the step's request made once more,
//! hotter; the call set aside never runs. Off unless configured; one resample per step.

mod common;

use common::*;
use keel_agent::{Agent, AgentConfig, RecordedEvent, RecordingSink, SessionContext};
use keel_llm::{CancellationToken, Usage};
use keel_session::{Event, EventKind, JsonlStore, Session, SessionStore, StepResampled, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

const MISSING: &str = r#"{"path":"missing.txt"}"#;

fn logged(sink: &RecordingSink) -> Vec<Event> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            RecordedEvent::Logged(event) => Some(event),
            _ => None,
        })
        .collect()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.type_name()).collect()
}

fn agent(model: &ScriptedModel, resample: Option<f32>) -> Agent {
    let config = AgentConfig { resample_failed_repeat: resample, ..AgentConfig::default() };
    Agent::builder(model.clone()).tool(FakeRead).config(config).build()
}

/// The calls that started, by their arguments.
fn started(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall(call) => Some(call.arguments.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_failed_call_made_again_is_set_aside_and_asked_for_hotter() {
    let model = ScriptedModel::new([
        reply().call("read_file", MISSING).usage(100, 5),
        // The same call, keys in another order: set aside.
        reply().call("read_file", r#"{ "path": "missing.txt" }"#).usage(120, 6),
        reply().call("read_file", r#"{"path":"notes.txt"}"#).usage(120, 7),
        reply().text("notes.txt holds the notes.").usage(140, 8),
    ]);
    let agent = agent(&model, Some(0.8));
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let sink = RecordingSink::new();
    let ctx = SessionContext::new("/w");
    let outcome = agent
        .run_turn(&mut session, &ctx, "Read the notes.", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let events = logged(&sink);
    let at = kinds(&events).iter().position(|k| *k == "step/resampled").unwrap();
    assert_eq!(kinds(&events)[at - 1..=at + 1], ["step/start", "step/resampled", "assistant/message"]);
    let EventKind::StepResampled(resampled) = &events[at].kind else { unreachable!() };
    let expected = StepResampled {
        reply: reply().call("read_file", r#"{ "path": "missing.txt" }"#).usage(120, 6).message(),
        reason: "every call in it repeats a call of the step before that failed".into(),
        temperature: serde_json::Number::from_f64(f64::from(0.8f32)).unwrap(),
    };
    assert_eq!(resampled, &expected);
    // The call set aside never ran; the one asked for instead did.
    assert_eq!(started(&events), vec![MISSING.to_owned(), r#"{"path":"notes.txt"}"#.to_owned()]);
    // Requests 2 and 3 carry the same history; only the second asks for a temperature.
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[1].messages, requests[2].messages);
    let temperatures: Vec<Option<f32>> = requests.iter().map(|r| r.temperature).collect();
    assert_eq!(temperatures, vec![None, None, Some(0.8), None]);
    // Every request is rebuilt from the log; the reply set aside is in none of them.
    let rebuilt = requests_from_log(&store.read(session.id()).unwrap());
    let sent: Vec<_> = requests.iter().map(|r| r.messages.clone()).collect();
    assert_eq!(rebuilt, sent);
    assert_provider_valid(session.messages());
    // Its tokens were spent: the turn and the session count them.
    let total = Usage { input_tokens: 480, output_tokens: 26, ..Usage::default() };
    assert_eq!((outcome.usage, session.projection().usage()), (total, total));
    let (id, messages) = (session.id().to_owned(), session.messages().to_vec());
    drop(session);
    let reopened = store.open(&id).unwrap();
    assert_eq!((reopened.messages(), reopened.projection().usage()), (messages.as_slice(), total));
}

#[tokio::test]
async fn the_second_reply_stands_even_if_it_repeats_the_call_again() {
    let model = ScriptedModel::new([
        reply().call("read_file", MISSING),
        reply().call("read_file", MISSING),
        reply().call("read_file", MISSING),
        reply().text("missing.txt does not exist."),
    ]);
    let agent = agent(&model, Some(0.8));
    let mut session = Session::in_memory("/w");
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(
            &mut session,
            &SessionContext::new("/w"),
            "Read missing.txt.",
            &sink,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let events = logged(&sink);
    // One set aside in step 2; its second reply ran; step 3 answers.
    assert_eq!(kinds(&events).iter().filter(|k| **k == "step/resampled").count(), 1);
    assert_eq!(started(&events), vec![MISSING.to_owned(), MISSING.to_owned()]);
    assert_eq!(outcome.steps, 3);
}

#[tokio::test]
async fn off_unless_configured_and_never_for_a_call_that_worked() {
    // Off: the repeat runs as it is.
    let model = ScriptedModel::new([
        reply().call("read_file", MISSING),
        reply().call("read_file", MISSING),
        reply().text("It is missing."),
    ]);
    let mut session = Session::in_memory("/w");
    let sink = RecordingSink::new();
    agent(&model, None)
        .run_turn(&mut session, &SessionContext::new("/w"), "Read it.", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!kinds(&logged(&sink)).contains(&"step/resampled"));
    assert_eq!(started(&logged(&sink)).len(), 2);
    // On, but the call worked the first time: reading again is not set aside.
    let ok = r#"{"path":"notes.txt"}"#;
    let model = ScriptedModel::new([
        reply().call("read_file", ok),
        reply().call("read_file", ok),
        reply().text("Read."),
    ]);
    let mut session = Session::in_memory("/w");
    let sink = RecordingSink::new();
    agent(&model, Some(0.8))
        .run_turn(&mut session, &SessionContext::new("/w"), "Read it.", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!kinds(&logged(&sink)).contains(&"step/resampled"));
    assert_eq!(model.requests().iter().filter(|r| r.temperature.is_some()).count(), 0);
}
