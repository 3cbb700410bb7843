#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Hooks that narrow a turn's tools: each turn offers what they chose when it started,
//! the choice is logged, and every request is still derived from the log.

mod common;

use common::*;
use keel_agent::{Agent, HookChain, Hooks, NullSink, SessionContext, ToolRegistry};
use keel_llm::CancellationToken;
use keel_session::{EventKind, JsonlStore, SessionStore, derive_messages};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

/// Offers only the tools whose name is not `hidden`, for tasks that start with `ask:`.
struct Hide(&'static str);

impl Hooks for Hide {
    fn turn_tools(
        &self,
        task: &str,
        _intent: keel_agent::TaskIntent,
        tools: &ToolRegistry,
    ) -> Option<ToolRegistry> {
        task.starts_with("ask:").then(|| tools.filtered(|t| t.definition().name != self.0))
    }
}

fn names(tools: &[keel_llm::ToolDefinition]) -> Vec<String> {
    tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn each_turn_offers_the_tools_its_hooks_chose_and_requests_follow_the_log() {
    let model = ScriptedModel::new([
        // Turn 1 (narrowed): the hidden tool is unknown in this turn.
        reply().call("failing", "{}"),
        reply().call("read_file", r#"{"path":"a.txt"}"#),
        reply().text("read it"),
        // Turn 2 (every tool): it runs again.
        reply().call("failing", "{}"),
        reply().text("failed as expected"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    // Two hooks narrow in turn: each sees what the one before left.
    let hooks = HookChain::new().with(Hide("failing")).with(Hide("finish"));
    let agent = Agent::builder(model.clone()).tool(FakeRead).tool(Failing).tool(Finish).hooks(hooks).build();
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    agent.run_turn(&mut session, &ctx, "ask: what is in a.txt?", &NullSink, &cancel).await.unwrap();
    agent.run_turn(&mut session, &ctx, "run the failing tool", &NullSink, &cancel).await.unwrap();

    let requests = model.requests();
    let offered: Vec<Vec<String>> = requests.iter().map(|r| names(&r.tools)).collect();
    let narrowed = vec!["read_file".to_owned()];
    let all = vec!["read_file".to_owned(), "failing".to_owned(), "finish".to_owned()];
    assert_eq!(offered, [narrowed.clone(), narrowed.clone(), narrowed, all.clone(), all]);
    assert_eq!(
        results(session.messages()).iter().map(|r| (r.1.as_str(), r.2)).collect::<Vec<_>>(),
        vec![
            ("Unknown tool `failing`. Available tools: read_file.", true),
            ("contents of a.txt", false),
            ("disk quota exceeded; free some space and retry", true),
        ]
    );

    // Each request is what the log says: the messages before its step, the tools of the
    // header in force there (one header per turn here, the second after reopening too).
    let events = store.read(session.id()).unwrap();
    let mut header = None;
    let mut steps = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match &event.kind {
            EventKind::RequestHeader(h) => header = Some(h.clone()),
            EventKind::StepStart(_) => steps.push((i, header.clone().unwrap())),
            _ => {}
        }
    }
    assert_eq!(steps.len(), requests.len());
    for (request, (start, header)) in requests.iter().zip(steps) {
        assert_eq!(request.messages, derive_messages(&events[..start]).unwrap());
        assert_eq!(names(&request.tools), names(&header.tools));
    }
    let headers = events.iter().filter(|e| matches!(e.kind, EventKind::RequestHeader(_))).count();
    assert_eq!(headers, 2);
    let id = session.id().to_owned();
    drop(session);
    let reopened = store.open(&id).unwrap();
    assert_eq!(
        names(&reopened.projection().request_header().unwrap().tools),
        ["read_file", "failing", "finish"]
    );
}
