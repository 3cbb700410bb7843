//! The `task` tool: its arguments, its description (the agents on offer), and which
//! tools each agent gets.

use std::sync::Arc;

use keel_session::Effect;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{AgentDef, GENERAL, LIST_BUDGET, MAX_LISTED_AGENTS, NAME, Parent, Spawner, TaskLimits};
use crate::registry::ToolRegistry;
use crate::tool::{Tool, ToolContext, ToolOutput};
use crate::tool_error::{ToolError, ToolErrorKind};

/// Arguments of `task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// The task, complete: the subagent sees nothing of this conversation, so say what to
    /// find or do, where to look and what to report.
    pub prompt: String,
    /// Which agent does it (default `general`).
    #[serde(default)]
    pub agent: Option<String>,
    /// A few words on what it is doing, for the people watching.
    #[serde(default)]
    pub description: Option<String>,
}

/// An agent ready to start: its definition and the tools it gets.
#[derive(Clone)]
pub(crate) struct Ready {
    pub def: AgentDef,
    pub tools: ToolRegistry,
}

/// Starts subagents: see [the module](super).
pub struct TaskTool {
    pub(crate) parent: Parent,
    pub(crate) agents: Vec<Ready>,
    pub(crate) spawner: Arc<dyn Spawner>,
    pub(crate) limits: TaskLimits,
    description: String,
}

impl std::fmt::Debug for TaskTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.agents.iter().map(|a| a.def.name.as_str()).collect();
        f.debug_struct("TaskTool")
            .field("agents", &names)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TaskTool {
    /// The tool with `defs` on offer besides the general-purpose agent (a definition named
    /// `general` replaces it), children made from `parent` and kept by `spawner`. Also
    /// returns notes for the user: tools a definition names that the parent lacks, and
    /// agents left out of the description.
    pub fn new(
        parent: Parent,
        defs: Vec<AgentDef>,
        spawner: Arc<dyn Spawner>,
        limits: TaskLimits,
    ) -> (TaskTool, Vec<String>) {
        let mut notes = Vec::new();
        let mut all = defs;
        if !all.iter().any(|d| d.name == GENERAL) {
            all.insert(0, AgentDef::general());
        }
        let mut agents = Vec::new();
        let mut listed = 0;
        let mut left_out = Vec::new();
        for def in all {
            if agents.iter().any(|a: &Ready| a.def.name == def.name) {
                continue;
            }
            let line = list_line(&def);
            if agents.len() >= MAX_LISTED_AGENTS || listed + line.len() > LIST_BUDGET {
                left_out.push(def.name);
                continue;
            }
            listed += line.len();
            let tools = tools_for(&parent.tools, &def, &mut notes);
            agents.push(Ready { def, tools });
        }
        if !left_out.is_empty() {
            notes.push(format!(
                "agents not offered (the task tool lists at most {MAX_LISTED_AGENTS} in {LIST_BUDGET} characters): {}",
                left_out.join(", ")
            ));
        }
        let description = describe(&agents);
        (TaskTool { parent, agents, spawner, limits, description }, notes)
    }

    /// The agents on offer, by name.
    pub fn agents(&self) -> impl Iterator<Item = &AgentDef> {
        self.agents.iter().map(|a| &a.def)
    }

    /// The tools the agent `name` gets, by name.
    pub fn tools_of(&self, name: &str) -> Option<Vec<&str>> {
        self.agents.iter().find(|a| a.def.name == name).map(|a| a.tools.names().collect())
    }

    fn find(&self, name: Option<&str>) -> Result<&Ready, ToolError> {
        let name = name.map(str::trim).filter(|n| !n.is_empty()).unwrap_or(GENERAL);
        self.agents.iter().find(|a| a.def.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.agents.iter().map(|a| a.def.name.as_str()).collect();
            ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("no agent is named `{name}`; the agents are: {}", names.join(", ")),
            )
        })
    }
}

/// Whether every tool of `tools` declares itself read-only.
fn read_only(tools: &ToolRegistry) -> bool {
    tools.names().all(|name| tools.get(name).is_some_and(|t| t.is_read_only()))
}

/// The tools `def` gets from `pool`: those it names (never `task`), or every read-only one.
fn tools_for(pool: &ToolRegistry, def: &AgentDef, notes: &mut Vec<String>) -> ToolRegistry {
    match &def.tools {
        None => pool.filtered(|t| t.is_read_only() && t.definition().name != NAME),
        Some(names) => {
            for name in names {
                if name == NAME {
                    notes.push(format!(
                        "agent {}: a subagent cannot start subagents; `{NAME}` is left out",
                        def.name
                    ));
                } else if pool.get(name).is_none() {
                    notes.push(format!("agent {}: there is no tool `{name}` here; it is left out", def.name));
                }
            }
            pool.filtered(|t| t.definition().name != NAME && names.contains(&t.definition().name))
        }
    }
}

/// An agent's line in the description.
fn list_line(def: &AgentDef) -> String {
    format!("- {}: {}\n", def.name, def.description)
}

/// The tool's description: what it does, and the agents with their tools.
fn describe(agents: &[Ready]) -> String {
    let mut text = String::from(
        "Start a subagent: a fresh session that does the task you write in `prompt` with its own tools and \
context, then returns its final answer. Use it for searches and side tasks that would fill your context. It \
sees nothing of this conversation: say everything it needs. Several task calls in one reply run at the same \
time. Agents (`agent`, default general):\n",
    );
    for agent in agents {
        let tools: Vec<&str> = agent.tools.names().collect();
        text.push_str(list_line(&agent.def).trim_end());
        text.push_str(&format!(
            " (tools: {})\n",
            if tools.is_empty() { "none".into() } else { tools.join(", ") }
        ));
    }
    text.trim_end().to_owned()
}

impl Tool for TaskTool {
    type Args = TaskArgs;

    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    /// Read-only when every agent's tools are: a child changes only what its tools may.
    fn is_read_only(&self) -> bool {
        self.agents.iter().all(|a| read_only(&a.tools))
    }

    /// Children run side by side (the point of several calls in one reply).
    fn is_concurrency_safe(&self) -> bool {
        true
    }

    fn effect(&self, arguments: &serde_json::Value) -> Effect {
        let name = arguments.get("agent").and_then(serde_json::Value::as_str);
        match self.find(name) {
            Ok(agent) if read_only(&agent.tools) => Effect::Reads { path: None },
            _ => Effect::Other,
        }
    }

    async fn call(&self, args: TaskArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let agent = self.find(args.agent.as_deref())?.clone();
        if args.prompt.trim().is_empty() {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                "the prompt is empty; write the task for the subagent",
            ));
        }
        let job = super::child::Job {
            parent: &self.parent,
            spawner: self.spawner.as_ref(),
            limits: self.limits,
            def: agent.def,
            tools: agent.tools,
        };
        super::child::run(job, args.prompt, args.description, ctx).await
    }
}
