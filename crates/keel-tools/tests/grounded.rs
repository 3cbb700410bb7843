#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The small profile's `answer`: a question answered plainly from the turn's outputs.

use std::sync::Arc;

use keel_agent::{Agent, AgentConfig, RecordingSink, Session, SessionContext};
use keel_llm::{CancellationToken, Message, ToolChoice};
use keel_testkit::{ScriptedModel, intent, reply};
use keel_tools::changes::ChangeCheck;
use keel_tools::grounded::GroundedAnswer;
use keel_tools::{ToolsConfig, builtin};

async fn run(
    task: &str,
    wants: &str,
    script: Vec<keel_testkit::ReplyBuilder>,
) -> (keel_agent::TurnOutcome, ScriptedModel, Vec<keel_session::Event>) {
    run_read_as(task, [wants, wants], script).await
}

/// [`run`] with the intent's two readings given apart (they may disagree).
async fn run_read_as(
    task: &str,
    readings: [&str; 2],
    script: Vec<keel_testkit::ReplyBuilder>,
) -> (keel_agent::TurnOutcome, ScriptedModel, Vec<keel_session::Event>) {
    let ws = tempfile::tempdir().unwrap();
    let mut script = script;
    // The intent is read twice (two orders of its questions).
    script.insert(0, intent(readings[1], false, false).usage(0, 0));
    script.insert(0, intent(readings[0], false, false).usage(0, 0));
    let model = ScriptedModel::new(script);
    let mut tools = builtin(Arc::new(ToolsConfig::default()));
    tools.register(GroundedAnswer::new(Arc::new(model.clone())));
    let config = AgentConfig { always_call: true, read_intent: true, ..AgentConfig::default() };
    // The session's ChangeCheck takes the snapshot the grounded answer compares with.
    let agent = Agent::builder(model.clone()).config(config).tools(tools).hooks(ChangeCheck).build();
    let mut session = Session::in_memory(&ws.path().display().to_string());
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::new(ws.path()), task, &sink, &CancellationToken::new())
        .await
        .unwrap();
    let events = sink.logged();
    (outcome, model, events)
}

#[tokio::test]
async fn a_question_is_answered_by_a_plain_request_from_the_outputs() {
    let (outcome, model, events) = run(
        "What does `echo product=42` print?",
        "answer",
        vec![
            reply().call("shell", r#"{"command": "echo product=42"}"#).usage(1, 1),
            reply().call("answer", r#"{"text": "The product is 42."}"#).usage(100, 10),
            reply().text("It prints `product=42`.").usage(40, 6),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "It prints `product=42`.");
    assert_eq!((outcome.usage.input_tokens, outcome.usage.output_tokens), (141, 17));
    let requests = model.requests();
    let plain = requests.last().unwrap();
    assert!(plain.tools.is_empty() && plain.tool_choice == ToolChoice::None);
    let [Message::User(user)] = &plain.messages[..] else { panic!("one user message: {:?}", plain.messages) };
    assert_eq!(
        user.content,
        "Output of `echo product=42`:\n```\nproduct=42\n[exit code: 0]\n```\n\nWhat does `echo product=42` print? Answer from the output above, briefly; quote it exactly."
    );
    // The tool's own request is logged (issue 29): whole, with its reply, under its call.
    let asides: Vec<keel_session::ModelAside> = events
        .iter()
        .filter_map(|e| match &e.kind {
            keel_session::EventKind::ModelAside(aside) if aside.purpose == "answer" => Some(aside.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asides.len(), 1);
    assert_eq!(asides[0].prompt, user.content);
    assert!(asides[0].call_id.is_some());
    assert_eq!(asides[0].reply.as_ref().map(|r| r.text()), Some("It prints `product=42`.".to_owned()));
}

#[tokio::test]
async fn a_change_task_or_a_failed_request_keeps_the_models_own_answer() {
    let (outcome, model, _) = run(
        "Create notes.txt saying hi",
        "change",
        vec![
            reply().call("shell", r#"{"command": "echo hi > notes.txt"}"#),
            reply().call("answer", r#"{"text": "Created notes.txt."}"#),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "Created notes.txt.");
    assert_eq!(model.requests().len(), 4, "the intent twice, two steps, no plain request for a change task");

    // A change request phrased as a question is not a question: its answer says what
    // was done (it was answered from the outputs when only sure changes kept the draft).
    let (outcome, model, _) = run(
        "Can you fix the greeting in hello.txt?",
        "change",
        vec![
            reply().call("shell", r#"{"command": "echo hello > hello.txt"}"#),
            reply().call("answer", r#"{"text": "Fixed the greeting."}"#),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "Fixed the greeting.");
    assert_eq!(model.requests().len(), 4, "no plain request for a change asked as a question");

    let (outcome, _, _) = run(
        "Which branch is this?",
        "answer",
        vec![
            reply().call("shell", r#"{"command": "echo main"}"#),
            reply().call("answer", r#"{"text": "main"}"#),
            reply().fail(keel_llm::ModelError::new(keel_llm::ModelErrorKind::InvalidRequest, "bad")),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "main");
}

#[tokio::test]
async fn an_unread_intent_is_answered_from_the_outputs_only_when_nothing_changed() {
    // The two readings disagree ("which files…?" read once as a change): the intent is
    // unknown. Nothing changed, so the turn answered a question, and that answer is
    // written from the outputs.
    let (outcome, model, _) = run_read_as(
        "Which files have uncommitted changes?",
        ["change", "answer"],
        vec![
            reply().call("shell", r#"{"command": "echo ' M src/app.py'"}"#),
            reply().call("answer", r#"{"text": "No uncommitted changes."}"#),
            reply().text("src/app.py"),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "src/app.py");
    assert_eq!(model.requests().len(), 5, "the intent twice, two steps, the plain request");

    // The same unknown intent after a change: the draft says what was done.
    let (outcome, model, _) = run_read_as(
        "Could you create notes.txt saying hi?",
        ["change", "answer"],
        vec![
            reply().call("shell", r#"{"command": "echo hi > notes.txt"}"#),
            reply().call("answer", r#"{"text": "Created notes.txt."}"#),
        ],
    )
    .await;
    assert_eq!(outcome.final_text, "Created notes.txt.");
    assert_eq!(model.requests().len(), 4, "no plain request after a change");
}
