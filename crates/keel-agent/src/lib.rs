//! keel's agent loop.
//!
//! An [`Agent`] is a model, a [`ToolRegistry`] and settings. [`Agent::run_turn`] sends the
//! conversation (derived from the [`Session`] log) and the tool schemas to the model,
//! runs the tool calls that come back, logs every result, and repeats until the model
//! answers without asking for a tool. Everything that happens goes to a [`Sink`].
//!
//! ```
//! use keel_agent::{Agent, NullSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
//! use keel_llm::CancellationToken;
//! use keel_session::Session;
//! use keel_testkit::{ScriptedModel, reply};
//!
//! /// Adds two numbers.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct AddArgs { a: f64, b: f64 }
//!
//! struct Add;
//! impl Tool for Add {
//!     type Args = AddArgs;
//!     fn name(&self) -> &str { "add" }
//!     fn description(&self) -> &str { "Adds two numbers." }
//!     async fn call(&self, args: AddArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text((args.a + args.b).to_string()))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // Any ModelClient works here: a provider from keel-llm, or this script.
//! let model = ScriptedModel::new([reply().call("add", r#"{"a": 2, "b": 3}"#), reply().text("5")]);
//! let agent = Agent::builder(model).system_prompt("You are a calculator.").tool(Add).build();
//! let mut session = Session::in_memory(".");
//! let ctx = SessionContext::new(".");   // per session: workspace, inbox, model override
//! let outcome = agent.run_turn(&mut session, &ctx, "2 + 3?", &NullSink, &CancellationToken::new()).await?;
//! assert_eq!(outcome.final_text, "5");
//! # Ok::<(), keel_agent::AgentError>(()) }).unwrap();
//! ```

mod agent;
pub mod compact;
mod context;
mod ending;
mod execute;
mod finish;
mod hook_calls;
mod hook_points;
mod hooks;
mod inbox;
pub mod intent;
mod loops;
mod narrow;
mod prompt;
mod refusal;
mod refused;
mod registry;
mod restart;
mod run;
pub mod schema;
mod sink;
mod state;
pub mod subagent;
mod tool;
mod tool_error;
mod turn;

pub use agent::{Agent, AgentBuilder, AgentConfig, TurnOutcome};
pub use compact::ContextUsage;
pub use context::SessionContext;
pub use execute::ABORTED;
pub use finish::FinishCheck;
pub use hook_points::{
    AfterToolCall, CompactionStarting, Nudge, PromptDecision, PromptSubmitted, ToolCallDone,
};
pub use hooks::{HookChain, HookDecision, Hooks, NoHooks, ToolCallRequest, TurnStarted, TurnStopping};
pub use inbox::Inbox;
pub use loops::LOOP_SUMMARY_REQUEST;
pub use narrow::narrow;
pub use prompt::{Prompt, PromptError};
pub use registry::{ToolRegistry, ToolRegistryError, ToolRegistryErrorKind};
pub use sink::{AgentEvent, NullSink, RecordedEvent, RecordingSink, Sink};
pub use state::ToolState;
pub use subagent::{AgentDef, SubagentUpdate, TaskTool};
pub use tool::{
    DynTool, PreparedCall, Tool, ToolContext, ToolOutput, json_kind, parse_arguments, path_argument, typed,
};
pub use tool_error::{ToolError, ToolErrorKind};
pub use turn::{AgentError, STEP_LIMIT_SUMMARY_REQUEST};

pub use keel_session::{
    Effect, FileChange, HookOutcome, HookRun, HookVerdict, ModelAside, Session, SpawnRef, TaskIntent, Wants,
};
