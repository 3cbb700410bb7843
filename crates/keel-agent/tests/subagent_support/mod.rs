#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! What the tests of a subagent's bounds share: a parent agent with `task` whose children
//! are sessions of a JSONL store, and readers for those sessions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use keel_agent::subagent::{Parent, Spawner, SubagentError, TaskLimits};
use keel_agent::{
    Agent, AgentConfig, AgentDef, NoHooks, TaskTool, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use keel_llm::ModelClient;
use keel_session::{
    Event, EventKind, JsonlStore, Session, SessionError, SessionStore, SpawnRef, ToolResultData,
    TurnEndReason,
};
use keel_testkit::ScriptedModel;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::common::FakeRead;

/// Arguments of tools that take nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// A read-only tool that takes an hour and does not listen for cancellation (a command
/// stuck in a system call, a server that never answers).
pub struct Stubborn;

impl Tool for Stubborn {
    type Args = Nothing;
    fn name(&self) -> &str {
        "stubborn"
    }
    fn description(&self) -> &str {
        "Takes an hour, whatever happens."
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, _args: Nothing, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(ToolOutput::text("done at last"))
    }
}

/// Children in a JSONL store; models by name from a table.
pub struct Store {
    pub store: Arc<JsonlStore>,
    pub models: BTreeMap<String, ScriptedModel>,
}

impl Spawner for Store {
    fn create(&self, cwd: &str, link: SpawnRef) -> Result<Session, SessionError> {
        self.store.create_spawned(cwd, link)
    }

    fn log(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        self.store.read(id)
    }

    fn model(&self, name: &str) -> Result<Arc<dyn ModelClient>, SubagentError> {
        match self.models.get(name) {
            Some(model) => Ok(Arc::new(model.clone())),
            None => Err(SubagentError::Model { name: name.into(), reason: "not in the table".into() }),
        }
    }
}

pub struct Setup {
    pub agent: Agent,
    pub store: Arc<JsonlStore>,
    pub dir: tempfile::TempDir,
}

/// A parent agent on `model` with read_file, stubborn and `task` (agents `defs`, models
/// by name `models`), its children in a JSONL store in `dir` (a new one when `None`).
pub fn setup(
    model: &ScriptedModel,
    defs: Vec<AgentDef>,
    models: &[(&str, &ScriptedModel)],
    limits: TaskLimits,
    dir: Option<tempfile::TempDir>,
) -> Setup {
    let dir = dir.unwrap_or_else(|| tempfile::tempdir().unwrap());
    let store = Arc::new(JsonlStore::new(dir.path()));
    let mut tools = ToolRegistry::new();
    tools.register(FakeRead).register(Stubborn);
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
    Setup { agent, store, dir }
}

/// An agent on model `model` with its own prompt and the default tools.
pub fn def(name: &str, model: &str) -> AgentDef {
    AgentDef {
        name: name.into(),
        description: format!("The {name} agent."),
        tools: None,
        model: Some(model.into()),
        prompt: format!("You are {name}."),
    }
}

/// The tool results of a log.
pub fn results(events: &[Event]) -> Vec<ToolResultData> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The child sessions in `store`: their headers' links and logs, by call id.
pub fn children(store: &JsonlStore) -> Vec<(SpawnRef, Vec<Event>)> {
    let mut found = Vec::new();
    for summary in store.list().unwrap() {
        if let Some(link) = summary.spawned_by {
            found.push((link, store.read(&summary.id).unwrap()));
        }
    }
    found.sort_by(|a, b| a.0.call_id.cmp(&b.0.call_id));
    found
}

/// Why the log's last turn ended, if it did.
pub fn turn_end(events: &[Event]) -> Option<TurnEndReason> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnEnd(end) => Some(end.reason),
        _ => None,
    })
}

/// The tokens a log's model replies used, prompts and replies.
pub fn tokens(events: &[Event]) -> u64 {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AssistantMessage(m) => Some(m.usage.input_tokens + m.usage.output_tokens),
            _ => None,
        })
        .sum()
}
