//! What a turn needs besides the session log: where its tools run, its steering inbox,
//! and the choices made for this session alone. One [`Agent`](crate::Agent) serves any
//! number of sessions, each with its own context.

use std::path::PathBuf;
use std::sync::Arc;

use keel_llm::ModelClient;

use crate::inbox::Inbox;
use crate::registry::ToolRegistry;
use crate::state::ToolState;

/// Per-session state and settings, passed to every turn of the session.
#[derive(Clone)]
pub struct SessionContext {
    /// The workspace root handed to tools.
    pub workspace: PathBuf,
    /// This session's folder for files tools keep (full command output), if any.
    pub artifacts: Option<PathBuf>,
    /// Steering and follow-up input for this session.
    pub inbox: Inbox,
    /// The model for this session, instead of the agent's.
    pub model: Option<Arc<dyn ModelClient>>,
    /// The system prompt for this session, instead of the agent's.
    pub system_prompt: Option<String>,
    /// The tools for this session, instead of the agent's. A turn reads them once when
    /// it starts, so the list stays the same for the whole turn; change it between turns
    /// (e.g. when an MCP server that started late is ready).
    pub tools: Option<ToolRegistry>,
    /// Facts about the environment (folder, files, git state, date), logged as the first
    /// user message of a new session, so they stay the same in every request.
    pub environment: Option<String>,
    /// What tools remember between calls in this session.
    pub tool_state: Arc<ToolState>,
}

impl SessionContext {
    /// A context for a session working in `workspace`.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        SessionContext {
            workspace: workspace.into(),
            artifacts: None,
            inbox: Inbox::new(),
            model: None,
            system_prompt: None,
            tools: None,
            environment: None,
            tool_state: Arc::new(ToolState::new()),
        }
    }

    /// Sets the folder for files tools keep.
    pub fn artifacts(mut self, dir: impl Into<PathBuf>) -> Self {
        self.artifacts = Some(dir.into());
        self
    }

    /// Uses an existing inbox handle.
    pub fn inbox(mut self, inbox: Inbox) -> Self {
        self.inbox = inbox;
        self
    }

    /// Runs this session on `model` instead of the agent's.
    pub fn model(mut self, model: Arc<dyn ModelClient>) -> Self {
        self.model = Some(model);
        self
    }

    /// Uses `prompt` as this session's system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Offers `tools` in this session instead of the agent's.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Logs `text` as the environment block of a new session.
    pub fn environment(mut self, text: impl Into<String>) -> Self {
        self.environment = Some(text.into());
        self
    }

    /// Records the run of a hook (a user's hook command and its decision): the loop logs
    /// it as `hook/run` as soon as the hook that ran it returns.
    pub fn report_hook_run(&self, run: keel_session::HookRun) {
        self.tool_state.with(|runs: &mut HookRuns| runs.0.push(run));
    }

    /// The hook runs reported since the last call.
    pub(crate) fn take_hook_runs(&self) -> Vec<keel_session::HookRun> {
        self.tool_state.with(|runs: &mut HookRuns| std::mem::take(&mut runs.0))
    }
}

/// Hook runs reported and not yet logged (a slot of the session's [`ToolState`]).
#[derive(Default)]
struct HookRuns(Vec<keel_session::HookRun>);

impl Default for SessionContext {
    /// A context for the current folder.
    fn default() -> Self {
        SessionContext::new(".")
    }
}

impl std::fmt::Debug for SessionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionContext")
            .field("workspace", &self.workspace)
            .field("artifacts", &self.artifacts)
            .field("model", &self.model.as_ref().map(|m| m.info()))
            .field("system_prompt", &self.system_prompt.as_ref().map(String::len))
            .field("tools", &self.tools)
            .field("environment", &self.environment.as_ref().map(String::len))
            .finish_non_exhaustive()
    }
}
