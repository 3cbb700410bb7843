//! The `Tool` trait: a typed tool whose JSON schema comes from its argument type.

use crate::tool_error::{ToolError, ToolErrorKind};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_llm::ToolDefinition;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::schema;

/// What a tool returns to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Plain text for the model.
    pub content: String,
    /// True when the call failed; `content` says why and what to do.
    pub is_error: bool,
    /// When true, the turn ends after this step (the tool delivered the final answer).
    pub concludes_turn: bool,
    /// Tokens the tool spent on model calls of its own (counted in the turn's usage).
    pub usage: Option<keel_llm::Usage>,
    /// The model requests the tool made, logged (`model/aside`) before its result.
    pub asides: Vec<keel_session::ModelAside>,
    /// What the call changed in a file, for people (logged with the result, not sent).
    pub change: Option<keel_session::FileChange>,
    /// Images for the model, after the text (an MCP tool's screenshot); at most
    /// [`keel_llm::MAX_IMAGES_PER_MESSAGE`] are kept.
    pub images: Vec<keel_llm::Image>,
}

impl ToolOutput {
    /// A successful result.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            concludes_turn: false,
            usage: None,
            asides: Vec::new(),
            change: None,
            images: Vec::new(),
        }
    }

    /// A failed result the model can act on.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
            concludes_turn: false,
            usage: None,
            asides: Vec::new(),
            change: None,
            images: Vec::new(),
        }
    }

    /// Marks the result as ending the turn.
    pub fn concluding(mut self) -> Self {
        self.concludes_turn = true;
        self
    }

    /// Records the tokens the tool spent on a model call of its own.
    pub fn with_usage(mut self, usage: keel_llm::Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Records what the call changed in a file (shown to people, not to the model).
    pub fn with_change(mut self, change: Option<keel_session::FileChange>) -> Self {
        self.change = change;
        self
    }

    /// Records the model requests the tool made (logged before its result).
    pub fn with_asides(mut self, asides: Vec<keel_session::ModelAside>) -> Self {
        self.asides.extend(asides);
        self
    }
}

/// What a running tool streams: a line of progress, or news of a child session it runs.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub call_id: Arc<str>,
    pub report: Report,
}

/// One piece of [`Progress`].
#[derive(Debug, Clone)]
pub(crate) enum Report {
    /// A line of progress text.
    Text(String),
    /// News of a child session (the `task` tool's subagent).
    Subagent(crate::sink::SubagentUpdate),
}

/// What a running tool can use: cancellation, the workspace, a place for files, and a
/// progress channel.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Fires when the user aborts; a tool should stop and clean up promptly.
    pub cancel: CancellationToken,
    /// The workspace root every path is confined to.
    pub workspace: Arc<Path>,
    /// A folder for files the tool wants to keep (e.g. full command output), if any.
    pub artifacts: Option<Arc<Path>>,
    /// The id of the call being run.
    pub call_id: Arc<str>,
    /// What tools remember between calls in this session.
    pub state: Arc<crate::state::ToolState>,
    /// The text of the user message that started this turn (the task), when the call
    /// runs inside the loop.
    pub task: Option<Arc<str>>,
    /// What the turn's task asks for, as read at its start (all unknown when it was not
    /// read).
    pub intent: keel_session::TaskIntent,
    /// The session's messages before this step's calls, for a tool that reads them
    /// ([`Tool::reads_history`]); `None` for every other tool.
    pub history: Option<Arc<[keel_llm::Message]>>,
    /// The id of the session the call runs in, when it runs inside the loop.
    pub session_id: Option<Arc<str>>,
    /// The seq of the call's `tool/call` event, when it runs inside the loop.
    pub call_seq: Option<u64>,
    pub(crate) progress: Option<mpsc::UnboundedSender<Progress>>,
}

impl ToolContext {
    /// A context for running a tool outside the loop (tests, other harnesses).
    pub fn new(workspace: impl AsRef<Path>) -> Self {
        ToolContext {
            cancel: CancellationToken::new(),
            workspace: Arc::from(workspace.as_ref()),
            artifacts: None,
            call_id: Arc::from("call"),
            state: Arc::new(crate::state::ToolState::new()),
            task: None,
            intent: keel_session::TaskIntent::default(),
            history: None,
            session_id: None,
            call_seq: None,
            progress: None,
        }
    }

    /// Sets the task the call serves (see [`ToolContext::task`]).
    pub fn task(mut self, task: impl Into<Arc<str>>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Streams a line of progress to whoever watches the loop.
    pub fn progress(&self, text: impl Into<String>) {
        if let Some(sender) = &self.progress {
            let _ =
                sender.send(Progress { call_id: self.call_id.clone(), report: Report::Text(text.into()) });
        }
    }

    /// Reports what a child session this call runs is doing (the sink gets it as
    /// [`AgentEvent::Subagent`](crate::AgentEvent::Subagent)).
    pub fn subagent(&self, update: crate::sink::SubagentUpdate) {
        if let Some(sender) = &self.progress {
            let _ = sender.send(Progress { call_id: self.call_id.clone(), report: Report::Subagent(update) });
        }
    }
}

/// A tool with typed arguments. Its schema is generated from `Args` (doc comments become
/// descriptions, `Option` and `#[serde(default)]` fields are optional, enums become JSON
/// `enum`s), so the schema and the code cannot drift.
///
/// Arguments are parsed from the model's raw string with serde; unknown fields are
/// rejected. A parse failure goes back to the model with the schema summary.
pub trait Tool: Send + Sync + 'static {
    /// The argument type.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;

    /// The name the model calls.
    fn name(&self) -> &str;

    /// What the tool does and when to use it, written for a model.
    fn description(&self) -> &str;

    /// True when the tool never changes anything (permission policies rely on it).
    fn is_read_only(&self) -> bool {
        false
    }

    /// True when calls may run at the same time as other safe calls.
    fn is_concurrency_safe(&self) -> bool {
        self.is_read_only()
    }

    /// True when the same call may rightly be made again and again (polling a status):
    /// loop detection leaves it alone.
    fn repeatable(&self) -> bool {
        false
    }

    /// True when the tool reads the conversation so far ([`ToolContext::history`]).
    fn reads_history(&self) -> bool {
        false
    }

    /// What a call with `arguments` (the model's, parsed as JSON; `Null` when they do not
    /// parse) does: reads, writes a file, runs a command, concludes the turn. The loop logs
    /// it with the call, and the rules that care read it instead of the tool's name. The
    /// default says only what [`Tool::is_read_only`] says.
    fn effect(&self, arguments: &serde_json::Value) -> keel_session::Effect {
        let _ = arguments;
        if self.is_read_only() {
            keel_session::Effect::Reads { path: None }
        } else {
            keel_session::Effect::Other
        }
    }

    /// Runs the tool.
    fn call(
        &self,
        args: Self::Args,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}

/// A started call: run it with a context.
pub type PreparedCall =
    Box<dyn FnOnce(ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send>;

/// The object-safe face of a tool, for tools whose schema is not a Rust type (e.g. MCP)
/// and for the registry. Every [`Tool`] gets one through [`typed`].
pub trait DynTool: Send + Sync {
    /// Name, description and schema, as offered to the model.
    fn definition(&self) -> &ToolDefinition;

    /// True when the tool never changes anything.
    fn is_read_only(&self) -> bool;

    /// True when calls may run concurrently with other safe calls.
    fn is_concurrency_safe(&self) -> bool;

    /// True when the same call may rightly be repeated (loop detection leaves it alone).
    fn repeatable(&self) -> bool {
        false
    }

    /// True when the tool reads the conversation so far ([`ToolContext::history`]).
    fn reads_history(&self) -> bool {
        false
    }

    /// Validates the raw arguments and returns the call ready to run, or an
    /// `invalid_arguments` error explaining the problem.
    fn prepare(&self, arguments: &str) -> Result<PreparedCall, ToolError>;

    /// See [`Tool::effect`]; `arguments` is the model's raw string.
    fn effect(&self, arguments: &str) -> keel_session::Effect {
        let _ = arguments;
        if self.is_read_only() {
            keel_session::Effect::Reads { path: None }
        } else {
            keel_session::Effect::Other
        }
    }
}

/// The `path` argument of a call, for [`Tool::effect`].
pub fn path_argument(arguments: &serde_json::Value) -> Option<String> {
    arguments.get("path").and_then(serde_json::Value::as_str).map(str::to_owned)
}

/// Wraps a typed [`Tool`] as a [`DynTool`], generating its definition once.
pub fn typed<T: Tool>(tool: T) -> Arc<dyn DynTool> {
    Arc::new(TypedTool::new(tool))
}

struct TypedTool<T: Tool> {
    tool: Arc<T>,
    definition: ToolDefinition,
    properties: Vec<String>,
    summary: String,
}

impl<T: Tool> TypedTool<T> {
    fn new(tool: T) -> Self {
        let schema = schema::schema_for::<T::Args>();
        let properties = schema::property_names(&schema);
        let summary = schema::summarize(&schema);
        let parameters = serde_json::value::to_raw_value(&schema).unwrap_or_default();
        let definition = ToolDefinition {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            parameters,
        };
        TypedTool { tool: Arc::new(tool), definition, properties, summary }
    }
}

impl<T: Tool> DynTool for TypedTool<T> {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn is_read_only(&self) -> bool {
        self.tool.is_read_only()
    }

    fn is_concurrency_safe(&self) -> bool {
        self.tool.is_concurrency_safe()
    }

    fn repeatable(&self) -> bool {
        self.tool.repeatable()
    }

    fn reads_history(&self) -> bool {
        self.tool.reads_history()
    }

    fn effect(&self, arguments: &str) -> keel_session::Effect {
        let value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
        self.tool.effect(&value)
    }

    fn prepare(&self, arguments: &str) -> Result<PreparedCall, ToolError> {
        let args: T::Args =
            parse_arguments(&self.definition.name, arguments, &self.properties, &self.summary)?;
        let tool = Arc::clone(&self.tool);
        Ok(Box::new(move |ctx| Box::pin(async move { tool.call(args, ctx).await })))
    }
}

/// Parses a model's raw argument string into `A`, rejecting fields not in `properties`.
/// Errors name the problem and show `summary`, the expected shape.
pub fn parse_arguments<A: DeserializeOwned>(
    tool: &str,
    raw: &str,
    properties: &[String],
    summary: &str,
) -> Result<A, ToolError> {
    let invalid = |problem: String| {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("Invalid arguments for `{tool}`: {problem}. Expected a JSON object {summary}."),
        )
    };
    let raw = raw.trim();
    // Models often send nothing at all for a tool without parameters.
    let raw = if raw.is_empty() { "{}" } else { raw };
    let value: Value = serde_json::from_str(raw).map_err(|e| invalid(format!("not valid JSON ({e})")))?;
    let Value::Object(map) = &value else {
        return Err(invalid(format!("expected an object, got {}", json_kind(&value))));
    };
    let unknown: Vec<&str> =
        map.keys().map(String::as_str).filter(|k| !properties.iter().any(|p| p == k)).collect();
    if !unknown.is_empty() {
        let list = unknown.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        return Err(invalid(format!("unknown field {list}")));
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// What kind of JSON value `value` is, as errors for models say it ("an integer",
/// "a string"); every tool's argument errors use these words.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
