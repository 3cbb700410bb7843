//! Subagents: the `task` tool ([`TaskTool`]) starts a child session — a fresh
//! conversation holding only the task the parent model wrote, the tools its agent
//! definition allows (the parent's read-only tools by default), its own step limit, token
//! budget and time — and returns the child's final answer as the call's result.
//!
//! The child is a session of its own in the parent's store ([`Spawner::create`]): its
//! header cites the parent's call (`spawned_by`: the parent session, its `tool/call` seq
//! and call id, the agent), and the parent's result names the child's session, so either
//! log leads to the other and the child can be resumed alone. Children run with the
//! parent's hooks (the permission policy), are cancelled with the parent's call, run
//! concurrently when one reply starts several, and draw on one token budget per parent
//! session: each child's own [`Budget`] is an allowance taken from the session's
//! [`SharedBudget`]. A child is never offered `task`: children start no children.
//!
//! A cancelled child ends its turn as an aborted turn does, its log closed: it runs in a
//! task of its own, so dropping the parent's call cancels it without cutting it off, and
//! its tools get half the parent's abort grace, so it is done before the parent stops
//! waiting for the call.

mod budget;
mod child;
mod tool;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_llm::ModelClient;
use keel_session::{Event, Session, SessionError, SpawnRef};

use crate::agent::AgentConfig;
use crate::context::SessionContext;
use crate::hooks::Hooks;
use crate::registry::ToolRegistry;

pub use crate::sink::SubagentUpdate;
pub use budget::{Allowance, BUDGET_SPENT, Budget, SharedBudget, spent_in};
pub use tool::{TaskArgs, TaskTool};

/// The tool's name.
pub const NAME: &str = "task";

/// The agent a call gets when it names none.
pub const GENERAL: &str = "general";

/// Most agents the tool's description lists.
pub const MAX_LISTED_AGENTS: usize = 20;

/// Most characters of the description's list of agents.
pub const LIST_BUDGET: usize = 4_000;

/// An agent a `task` call can start: what it is for, the tools it may use, its model and
/// its system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// The name a call chooses it by.
    pub name: String,
    /// What it is for and when to use it, on one line.
    pub description: String,
    /// The tools it may use, by name; `None`: every tool of the parent's that declares
    /// itself read-only.
    pub tools: Option<Vec<String>>,
    /// Its model, when not the parent's (a name the [`Spawner`] resolves).
    pub model: Option<String>,
    /// Its system prompt.
    pub prompt: String,
}

impl AgentDef {
    /// The general-purpose agent: the parent's read-only tools, a prompt for exploring
    /// and reporting.
    pub fn general() -> AgentDef {
        AgentDef {
            name: GENERAL.into(),
            description:
                "General-purpose: explores the project with the read-only tools and reports what it found."
                    .into(),
            tools: None,
            model: None,
            prompt: "You are a subagent: another agent gave you the task below and reads only your final \
answer. Use your tools to find what the task asks, then answer with what you found: concrete, complete, \
with file paths and line numbers where they help, and brief. You cannot ask questions; do the best you can \
with what you have."
                .into(),
        }
    }
}

/// Bounds on every child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// Steps a child's turn may take (default 25); at the limit it is asked for an
    /// answer from what it found.
    pub max_steps: u32,
    /// Tokens one child may spend, prompts and replies (default 400,000).
    pub child_tokens: u64,
    /// Tokens all the children of one parent session may spend together, in every turn
    /// and across resumes (default 1,500,000); a child starts with `child_tokens` or what
    /// is left of these, when less.
    pub session_tokens: u64,
    /// How long a child may run (default 10 minutes).
    pub timeout: Duration,
    /// Most characters of the answer handed back (default 16,000; the whole answer stays
    /// in the child's log).
    pub max_result_chars: usize,
}

impl Default for TaskLimits {
    fn default() -> Self {
        TaskLimits {
            max_steps: 25,
            child_tokens: 400_000,
            session_tokens: 1_500_000,
            timeout: Duration::from_secs(600),
            max_result_chars: 16_000,
        }
    }
}

/// What children are made of: the parent's model, the tools they may be given, the
/// parent's hooks and settings.
#[derive(Clone)]
pub struct Parent {
    /// The model children use unless their definition names another.
    pub model: Arc<dyn ModelClient>,
    /// The tools a definition chooses from (`task` itself is never given).
    pub tools: ToolRegistry,
    /// The hooks (the permission policy) every child's calls go through.
    pub hooks: Arc<dyn Hooks>,
    /// The parent's settings; a child's system prompt and step limit replace its own.
    pub config: AgentConfig,
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// The model its definition names is not available.
    #[error("model `{name}` is not available: {reason}")]
    Model {
        /// The name in the definition.
        name: String,
        /// Why.
        reason: String,
    },
    /// Its session could not be created.
    #[error("the child session could not be created: {0}")]
    Session(#[from] SessionError),
}

/// Where children's sessions live and what else they need from the embedder.
pub trait Spawner: Send + Sync {
    /// Creates a child's session for workspace `cwd`, its header citing `link` (the
    /// parent's store, so the child is listed and resumable).
    fn create(&self, cwd: &str, link: SpawnRef) -> Result<Session, SessionError>;

    /// The context a child's session runs with; the default is `workspace` alone.
    fn context(&self, session: &Session, workspace: &Path) -> SessionContext {
        let _ = session;
        SessionContext::new(workspace)
    }

    /// The log of session `id` (a parent's) in the store children are kept in; the
    /// default has none. The first `task` call of a session here reads from it what the
    /// session's children already spent ([`spent_in`]), so a resumed session's shared
    /// budget is not full again.
    fn log(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        let _ = id;
        Ok(Vec::new())
    }

    /// The model a definition names. The default knows none but the parent's.
    fn model(&self, name: &str) -> Result<Arc<dyn ModelClient>, SubagentError> {
        Err(SubagentError::Model { name: name.into(), reason: "only the parent's model is available".into() })
    }
}

/// Children kept in memory only (no store): embedders without one.
#[derive(Debug, Default, Clone, Copy)]
pub struct InMemory;

impl Spawner for InMemory {
    fn create(&self, cwd: &str, _link: SpawnRef) -> Result<Session, SessionError> {
        Ok(Session::in_memory(cwd))
    }
}
