#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagents: the `task` tool runs a child session with its own tools and limits, kept
//! in the parent's store and linked from both sides, cancelled with the parent, side by
//! side with its siblings, within a shared token budget.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use keel_agent::subagent::{Parent, Spawner, SubagentError, TaskLimits};
use keel_agent::{
    Agent, AgentConfig, AgentDef, NoHooks, RecordedEvent, RecordingSink, SessionContext, SubagentUpdate,
    TaskTool, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use keel_llm::{CancellationToken, ModelClient, Usage};
use keel_session::{
    Event, EventKind, JsonlStore, Session, SessionError, SessionStore, SpawnRef, ToolResultData,
    TurnEndReason,
};
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

/// A tool that would change a file (not read-only).
struct Write;

impl Tool for Write {
    type Args = PathArgs;
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Writes a file."
    }
    async fn call(&self, args: PathArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("wrote {}", args.path)))
    }
}

/// Children in a JSONL store; models by name from a table.
struct Store {
    store: Arc<JsonlStore>,
    models: BTreeMap<String, ScriptedModel>,
}

impl Spawner for Store {
    fn create(&self, cwd: &str, link: SpawnRef) -> Result<Session, SessionError> {
        self.store.create_spawned(cwd, link)
    }

    fn model(&self, name: &str) -> Result<Arc<dyn ModelClient>, SubagentError> {
        match self.models.get(name) {
            Some(model) => Ok(Arc::new(model.clone())),
            None => Err(SubagentError::Model { name: name.into(), reason: "not in the table".into() }),
        }
    }
}

struct Setup {
    agent: Agent,
    store: Arc<JsonlStore>,
    _dir: tempfile::TempDir,
}

/// A parent agent on `model` with read_file, write_file and `task` (agents `defs`).
fn setup(
    model: &ScriptedModel,
    defs: Vec<AgentDef>,
    models: &[(&str, &ScriptedModel)],
    limits: TaskLimits,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(JsonlStore::new(dir.path()));
    let mut tools = ToolRegistry::new();
    tools.register(FakeRead).register(Write);
    let shared: Arc<dyn ModelClient> = Arc::new(model.clone());
    let parent = Parent {
        model: Arc::clone(&shared),
        tools: tools.clone(),
        hooks: Arc::new(NoHooks),
        config: AgentConfig::default(),
    };
    let models = models.iter().map(|(name, m)| ((*name).to_owned(), (*m).clone())).collect();
    let spawner = Arc::new(Store { store: Arc::clone(&store), models });
    let (task, notes) = TaskTool::new(parent, defs, spawner, limits);
    assert_eq!(notes, Vec::<String>::new());
    tools.register(task);
    let agent = Agent::builder_shared(shared).tools(tools).build();
    Setup { agent, store, _dir: dir }
}

impl Setup {
    /// One parent turn on a new session ("go"): its outcome and what its sink heard.
    async fn turn(&self) -> (keel_agent::TurnOutcome, RecordingSink) {
        let mut session = self.store.create("/w").unwrap();
        self.turn_on(&mut session).await
    }

    /// One parent turn ("go") on `session`.
    async fn turn_on(&self, session: &mut Session) -> (keel_agent::TurnOutcome, RecordingSink) {
        let sink = RecordingSink::new();
        let outcome = self
            .agent
            .run_turn(session, &SessionContext::new("/w"), "go", &sink, &CancellationToken::new())
            .await
            .unwrap();
        (outcome, sink)
    }
}

/// The id a session's log names in its header.
fn session_id(log: &[Event]) -> String {
    match &log[0].kind {
        EventKind::SessionHeader(header) => header.id.clone(),
        other => panic!("not a header: {other:?}"),
    }
}

fn def(name: &str, tools: Option<&[&str]>, model: Option<&str>) -> AgentDef {
    AgentDef {
        name: name.into(),
        description: format!("The {name} agent."),
        tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        model: model.map(str::to_owned),
        prompt: format!("You are {name}."),
    }
}

fn results(events: &[Event]) -> Vec<ToolResultData> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The child sessions in `store`: their headers' links and logs.
fn children(store: &JsonlStore) -> Vec<(SpawnRef, Vec<Event>)> {
    let mut found = Vec::new();
    for summary in store.list().unwrap() {
        if let Some(link) = summary.spawned_by {
            found.push((link, store.read(&summary.id).unwrap()));
        }
    }
    found.sort_by(|a, b| a.0.call_id.cmp(&b.0.call_id));
    found
}

fn turn_end(events: &[Event]) -> Option<TurnEndReason> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnEnd(end) => Some(end.reason),
        _ => None,
    })
}

#[tokio::test]
async fn a_child_runs_its_tools_and_its_answer_is_the_result() {
    // One script serves the parent and the child in turn.
    let model = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Where is main?", "description": "find main"}"#),
        reply().call("read_file", r#"{"path": "src/main.rs"}"#),
        reply().text("main is in src/main.rs"),
        reply().text("Found it."),
    ]);
    let s = setup(&model, Vec::new(), &[], TaskLimits::default());
    let mut session = s.store.create("/w").unwrap();
    let (outcome, sink) = s.turn_on(&mut session).await;
    assert_eq!(outcome.final_text, "Found it.");
    // The child's tokens count in the parent's turn.
    assert_eq!(outcome.usage, Usage { input_tokens: 400, output_tokens: 40, ..Usage::default() });

    let kids = children(&s.store);
    assert_eq!(kids.len(), 1);
    let (link, log) = &kids[0];
    let child_id = session_id(log);
    let call_seq = sink.logged().iter().find(|e| matches!(e.kind, EventKind::ToolCall(_))).unwrap().seq;
    assert_eq!(
        link,
        &SpawnRef { id: session.id().into(), seq: call_seq, call_id: "t1".into(), agent: "general".into() }
    );
    assert_eq!(turn_end(log), Some(TurnEndReason::Completed));
    assert_eq!(results(log)[0].content, "contents of src/main.rs");

    let result = &results(&sink.logged())[0];
    assert_eq!(
        (result.content.as_str(), result.is_error),
        (
            format!("main is in src/main.rs\n\n[subagent general, session {child_id}: 2 step(s), 1 tool call(s), 220 tokens]")
                .as_str(),
            false
        )
    );
    // The child saw only its task, the general prompt and the read-only tools.
    let requests = model.requests();
    assert_eq!(requests[1].system, AgentDef::general().prompt);
    assert_eq!(requests[1].tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["read_file"]);
    assert_eq!(requests[1].messages.len(), 1);
    // The sink heard the child start, call a tool and finish.
    let updates: Vec<SubagentUpdate> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            RecordedEvent::Subagent { call_id, update } if call_id == "t1" => Some(update),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [
            SubagentUpdate::Started {
                session_id: child_id.clone(),
                agent: "general".into(),
                description: Some("find main".into())
            },
            SubagentUpdate::Tool {
                session_id: child_id.clone(),
                step: 1,
                name: "read_file".into(),
                arguments: r#"{"path": "src/main.rs"}"#.into()
            },
            SubagentUpdate::Finished {
                session_id: child_id.clone(),
                reason: TurnEndReason::Completed,
                steps: 2,
                tool_calls: 1,
                usage: Usage { input_tokens: 200, output_tokens: 20, ..Usage::default() }
            },
        ]
    );
    // The child resumes on its own.
    drop(session);
    let mut child = s.store.open(&child_id).unwrap();
    assert!(child.repair().unwrap().is_clean());
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_child() {
    let model = ScriptedModel::new([
        reply().call("task", r#"{"prompt": "Look around."}"#),
        reply().text("Looking").hang(),
    ]);
    let s = setup(&model, Vec::new(), &[], TaskLimits::default());
    let mut session = s.store.create("/w").unwrap();
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stopper.cancel();
    });
    let (ctx, sink) = (SessionContext::new("/w"), RecordingSink::new());
    let outcome = s.agent.run_turn(&mut session, &ctx, "go", &sink, &cancel);
    let outcome = tokio::time::timeout(Duration::from_secs(10), outcome).await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Aborted);
    let kids = children(&s.store);
    assert_eq!(kids.len(), 1);
    assert_eq!(turn_end(&kids[0].1), Some(TurnEndReason::Aborted));
}

#[tokio::test(start_paused = true)]
async fn two_children_run_side_by_side_each_on_its_own_model() {
    let model = ScriptedModel::new([
        reply().call_id("ta", "task", r#"{"prompt": "A?", "agent": "a"}"#).call_id(
            "tb",
            "task",
            r#"{"prompt": "B?", "agent": "b"}"#,
        ),
        reply().text("Both done."),
    ]);
    let model_a = ScriptedModel::new([reply().text("answer A").delay(Duration::from_secs(5))]);
    let model_b = ScriptedModel::new([reply().text("answer B").delay(Duration::from_secs(5))]);
    let defs = vec![def("a", None, Some("ma")), def("b", None, Some("mb"))];
    let s = setup(&model, defs, &[("ma", &model_a), ("mb", &model_b)], TaskLimits::default());
    let started = tokio::time::Instant::now();
    let (outcome, sink) = s.turn().await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the children ran one after the other: {:?}",
        started.elapsed()
    );
    assert_eq!(outcome.final_text, "Both done.");
    let answers: Vec<String> = results(&sink.logged())
        .iter()
        .map(|r| r.content.lines().next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(answers, ["answer A", "answer B"]);
    assert_eq!(
        (model_a.requests()[0].system.as_str(), model_b.requests()[0].system.as_str()),
        ("You are a.", "You are b.")
    );
    let links: Vec<(String, String)> =
        children(&s.store).into_iter().map(|(l, _)| (l.call_id, l.agent)).collect();
    assert_eq!(links, [("ta".to_owned(), "a".to_owned()), ("tb".to_owned(), "b".to_owned())]);
}

#[tokio::test]
async fn a_definition_s_tool_subset_is_honoured() {
    let model = ScriptedModel::new([
        reply().call("task", r#"{"prompt": "Note it.", "agent": "writer"}"#),
        reply().call("read_file", r#"{"path": "a.txt"}"#),
        reply().call("write_file", r#"{"path": "b.txt"}"#),
        reply().text("Could not write."),
        reply().text("ok"),
    ]);
    let s = setup(&model, vec![def("writer", Some(&["read_file"]), None)], &[], TaskLimits::default());
    assert_eq!(s.agent.tools().get("task").unwrap().is_read_only(), true);
    let mut session = s.store.create("/w").unwrap();
    s.agent
        .run_turn(
            &mut session,
            &SessionContext::new("/w"),
            "go",
            &RecordingSink::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(model.requests()[1].tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["read_file"]);
    let kids = children(&s.store);
    let refused = &results(&kids[0].1)[1];
    assert_eq!(refused.is_error, true);
    assert_eq!(refused.error_code.as_deref(), Some("unknown_tool"));
    assert_eq!(refused.content.starts_with("Unknown tool `write_file`"), true, "{}", refused.content);
}

#[tokio::test]
async fn a_spent_budget_stops_a_child_cleanly() {
    let model = ScriptedModel::new([
        reply().call("task", r#"{"prompt": "Read everything."}"#),
        reply().text("Reading a.").call("read_file", r#"{"path": "a.txt"}"#).usage(90, 30),
        reply().text("The parent goes on."),
    ]);
    let limits = TaskLimits { child_tokens: 100, ..TaskLimits::default() };
    let s = setup(&model, Vec::new(), &[], limits);
    let (_, sink) = s.turn().await;
    let kids = children(&s.store);
    let child_id = kids[0].0.clone();
    assert_eq!(turn_end(&kids[0].1), Some(TurnEndReason::Error));
    let id = session_id(&kids[0].1);
    let result = &results(&sink.logged())[0];
    assert_eq!(child_id.agent, "general");
    assert_eq!(
        (result.content.clone(), result.is_error),
        (
            format!(
                "The subagent stopped before it finished: the subagent's token budget is spent (120 of 100 tokens). \
What it wrote last:\nReading a.\n\n[subagent general, session {id}: 2 step(s), 1 tool call(s), 120 tokens]"
            ),
            true
        )
    );
}

/// Issue 34: a child has its own step limit; at it, it is asked once with tools off for
/// what it found, and that answer is the call's result.
#[tokio::test]
async fn a_child_stops_at_its_own_step_limit_and_answers_from_what_it_found() {
    let model = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Read everything."}"#),
        reply().call("read_file", r#"{"path": "a.txt"}"#),
        reply().call("read_file", r#"{"path": "b.txt"}"#),
        reply().text("a and b are read; c is left."),
        reply().text("The parent goes on."),
    ]);
    let limits = TaskLimits { max_steps: 2, ..TaskLimits::default() };
    let s = setup(&model, Vec::new(), &[], limits);
    let (outcome, sink) = s.turn().await;
    assert_eq!(outcome.final_text, "The parent goes on.");
    let kids = children(&s.store);
    assert_eq!(turn_end(&kids[0].1), Some(TurnEndReason::MaxSteps));
    // Two steps with tools, then the summary request with none offered to call.
    assert_eq!(results(&kids[0].1).len(), 2);
    let summary_request = &model.requests()[3];
    assert_eq!(summary_request.tool_choice, keel_llm::ToolChoice::None);
    let result = &results(&sink.logged())[0];
    assert_eq!(result.is_error, false);
    assert_eq!(result.content.lines().next(), Some("a and b are read; c is left."));
    assert!(result.content.contains(": 3 step(s), 2 tool call(s), "), "{}", result.content);
}

/// Issue 34: a child has its own time limit; past it the child is cancelled, its log
/// closed, and the result says so (the parent goes on).
#[tokio::test]
async fn a_child_past_its_time_limit_is_stopped_and_says_so() {
    let model = ScriptedModel::new([
        reply().call_id("t1", "task", r#"{"prompt": "Look around."}"#),
        reply().text("Looking").hang(),
        reply().text("It took too long."),
    ]);
    let limits = TaskLimits { timeout: Duration::from_millis(200), ..TaskLimits::default() };
    let s = setup(&model, Vec::new(), &[], limits);
    let (outcome, sink) = s.turn().await;
    assert_eq!(outcome.final_text, "It took too long.");
    let kids = children(&s.store);
    assert_eq!(turn_end(&kids[0].1), Some(TurnEndReason::Aborted));
    let id = session_id(&kids[0].1);
    // The reply cut short is not kept (the child's log has no half message).
    let result = &results(&sink.logged())[0];
    assert_eq!(
        (result.content.clone(), result.is_error),
        (
            format!(
                "The subagent stopped before it finished: it ran out of time (0.2 s). What it wrote last:\n\
(it wrote nothing)\n\n[subagent general, session {id}: 1 step(s), 0 tool call(s), 0 tokens]"
            ),
            true
        )
    );
}
