//! The agent: a model, tools, hooks and settings. Runs turns against a session.

use std::sync::Arc;
use std::time::Duration;

use keel_llm::{ModelClient, Usage};
use keel_session::{RequestHeader, TurnEndReason};

use crate::context::SessionContext;
use crate::hooks::{Hooks, NoHooks};
use crate::registry::ToolRegistry;
use crate::tool::{DynTool, Tool};

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The system prompt sent with every request.
    pub system_prompt: String,
    /// Steps allowed per turn before it ends with `max_steps` (default 50).
    pub max_steps: u32,
    /// When the step limit is hit, make one more request with tools disabled so the user
    /// gets an answer built from what was learned (default off).
    pub summary_on_step_limit: bool,
    /// A step that answers user input (the prompt, steering, a hook's request) must call a
    /// tool (default off). Small models often answer a task, or a request to finish it,
    /// with a plan instead of acting; a required call gets them started.
    pub tool_first: bool,
    /// Every step must call a tool (default off); the model ends a turn by calling a tool
    /// that concludes it (such as an `answer` tool). For small models whose free text is
    /// narration rather than work.
    pub always_call: bool,
    /// Concurrency-safe calls run together, at most this many at once (default 8).
    pub max_parallel_tools: usize,
    /// A call running longer than this ends with a `timeout` error (default none; tools
    /// such as the shell have their own).
    pub tool_timeout: Option<Duration>,
    /// After an abort, how long a started tool may take to clean up before it is dropped
    /// (default 5 s).
    pub abort_grace: Duration,
    /// The same call (or cycle of calls) made this many times in a row gets a note in
    /// its result saying so (default 3; 0 never).
    pub loop_warn_at: u32,
    /// ... and at this many the turn stops with `looping`, after a request for a final
    /// answer with tools off (default 8; 0 never).
    pub loop_stop_at: u32,
    /// A turn stuck repeating calls or out of steps starts again once from its task with
    /// a fresh context, instead of ending (default off). The
    /// second attempt gets half of `max_steps`, so a turn takes at most 1.5 times as many.
    pub fresh_start: bool,
    /// The model's context window in tokens; default: what the model client knows
    /// ([`ModelClient::context_window`]). Without one, sessions are compacted only when
    /// the provider says the context overflowed.
    pub context_window: Option<u64>,
    /// Compact when the context passes this share of the window (default 0.8); old tool
    /// results are pruned from three quarters of it. 0 never compacts.
    pub compact_at: f64,
    /// About this share of the window is kept verbatim by a compaction (default 0.2).
    pub compact_keep: f64,
    /// At the start of each turn, ask the model what the task wants (a change, an answer,
    /// a check, layout) and log it ([`crate::intent`]); hooks and tools read it (default
    /// off: the aids for small models act on it).
    pub read_intent: bool,
    /// The harness profile and why, logged in each `request/header` (default none).
    pub profile: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system_prompt: String::new(),
            max_steps: 50,
            summary_on_step_limit: false,
            tool_first: false,
            always_call: false,
            max_parallel_tools: 8,
            tool_timeout: None,
            abort_grace: Duration::from_secs(5),
            loop_warn_at: 3,
            loop_stop_at: 8,
            fresh_start: false,
            context_window: None,
            compact_at: 0.8,
            compact_keep: 0.2,
            read_intent: false,
            profile: None,
        }
    }
}

/// How a turn ended, with what it produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnOutcome {
    /// The turn number in the session.
    pub turn: u32,
    /// Why it ended.
    pub reason: TurnEndReason,
    /// Explanation for anything but a normal completion.
    pub message: Option<String>,
    /// The text of the last assistant message.
    pub final_text: String,
    /// Steps taken.
    pub steps: u32,
    /// Tool calls answered.
    pub tool_calls: u32,
    /// Tokens used by the turn's requests.
    pub usage: Usage,
}

/// A model, its tools and the loop's settings. Cheap to share across tasks; run as many
/// sessions through one agent as you like, each with its own [`SessionContext`].
pub struct Agent {
    pub(crate) model: Arc<dyn ModelClient>,
    pub(crate) tools: ToolRegistry,
    pub(crate) hooks: Arc<dyn Hooks>,
    pub(crate) config: AgentConfig,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.info())
            .field("tools", &self.tools)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent around `model`.
    pub fn builder(model: impl ModelClient + 'static) -> AgentBuilder {
        AgentBuilder::new(Arc::new(model))
    }

    /// Like [`Agent::builder`], for a model already shared.
    pub fn builder_shared(model: Arc<dyn ModelClient>) -> AgentBuilder {
        AgentBuilder::new(model)
    }

    /// The tools on offer (a session may offer others: [`SessionContext::tools`]).
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The tools a session's turns offer: its context's, else the agent's.
    pub fn tools_for<'a>(&'a self, ctx: &'a SessionContext) -> &'a ToolRegistry {
        ctx.tools.as_ref().unwrap_or(&self.tools)
    }

    /// The loop's settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The model client.
    pub fn model(&self) -> &Arc<dyn ModelClient> {
        &self.model
    }

    /// The model and system prompt a session uses: its context's, else the agent's.
    pub(crate) fn resolve<'a>(&'a self, ctx: &'a SessionContext) -> (&'a Arc<dyn ModelClient>, &'a str) {
        let model = ctx.model.as_ref().unwrap_or(&self.model);
        let system = ctx.system_prompt.as_deref().unwrap_or(&self.config.system_prompt);
        (model, system)
    }

    /// The `request/header` a session's requests are built with.
    pub(crate) fn request_header(&self, ctx: &SessionContext) -> RequestHeader {
        let (model, system) = self.resolve(ctx);
        let info = model.info();
        RequestHeader {
            provider: info.provider,
            model: info.model,
            system_prompt: system.to_owned(),
            tools: self.tools_for(ctx).definitions().to_vec(),
            profile: self.config.profile.clone(),
        }
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    model: Arc<dyn ModelClient>,
    tools: ToolRegistry,
    hooks: Arc<dyn Hooks>,
    config: AgentConfig,
}

impl AgentBuilder {
    fn new(model: Arc<dyn ModelClient>) -> Self {
        AgentBuilder {
            model,
            tools: ToolRegistry::new(),
            hooks: Arc::new(NoHooks),
            config: AgentConfig::default(),
        }
    }

    /// Sets the system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.config.system_prompt = prompt.into();
        self
    }

    /// Adds a typed tool (a name already taken is refused, with a warning in the log).
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.tools.register(tool);
        self
    }

    /// Adds an object-safe tool (a name already taken is refused, with a warning in the
    /// log).
    pub fn tool_dyn(mut self, tool: Arc<dyn DynTool>) -> Self {
        self.tools.register_dyn(tool);
        self
    }

    /// Replaces the tool set.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the hooks.
    pub fn hooks(mut self, hooks: impl Hooks + 'static) -> Self {
        self.hooks = Arc::new(hooks);
        self
    }

    /// Sets shared hooks.
    pub fn hooks_shared(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Sets the step limit per turn.
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.config.max_steps = steps;
        self
    }

    /// Replaces all settings (the system prompt included).
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// Builds the agent.
    pub fn build(self) -> Agent {
        Agent { model: self.model, tools: self.tools, hooks: self.hooks, config: self.config }
    }
}
