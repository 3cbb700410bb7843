//! The `ModelClient` trait: how the loop talks to any model.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::error::ModelError;
use crate::message::{AssistantMessage, Message};

/// A tool as offered to the model: name, description and JSON schema of its arguments.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// JSON schema of the arguments object, kept as compact JSON text.
    pub parameters: Box<RawValue>,
}

impl PartialEq for ToolDefinition {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.description == other.description
            && self.parameters.get() == other.parameters.get()
    }
}

impl Eq for ToolDefinition {}

/// Whether the model may call tools in this request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call at least one tool (small models that describe instead of
    /// acting; the first step of a turn).
    Required,
    /// Tools are described but must not be called (used for a final summary).
    None,
}

/// Everything a model needs for one request. Borrowed from the session, so building a
/// request copies nothing.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation, derived from the session log.
    pub messages: &'a [Message],
    /// The tools on offer.
    pub tools: &'a [ToolDefinition],
    /// Whether tools may be called.
    pub tool_choice: ToolChoice,
}

/// One item of a model's streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning text.
    ThinkingDelta(String),
    /// A piece of a tool call. `id` and `name` usually arrive once; arguments in fragments.
    ToolCallDelta {
        /// Position of the call in the message (provider's index).
        index: usize,
        /// The call id, when this fragment carries it.
        id: Option<String>,
        /// The tool name, when this fragment carries it.
        name: Option<String>,
        /// A fragment of the raw argument text.
        arguments: String,
    },
    /// The request failed in a retryable way and will be sent again after `delay`.
    Retrying {
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// How many retries are allowed in all.
        max_retries: u32,
        /// How long the client waits before retrying.
        delay: Duration,
        /// What went wrong.
        reason: String,
    },
    /// The whole message, assembled. Always the last event of a successful stream.
    Completed(AssistantMessage),
}

/// A boxed stream of model events.
pub type ModelStream<'a> = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'a>>;

/// Identifies a model for the session's `request/header`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Provider name, e.g. `deepseek`, `openai`, `scripted`.
    pub provider: String,
    /// Model name as sent to the provider.
    pub model: String,
}

/// A source of assistant messages: a remote provider, a local model, or a script.
///
/// `stream` yields deltas as they arrive and ends with [`ModelEvent::Completed`], or with
/// an error. Dropping the stream cancels the request and closes its connection.
pub trait ModelClient: Send + Sync {
    /// Which provider and model this client talks to.
    fn info(&self) -> ModelInfo;

    /// Start a request. `cancel` fires when the user aborts; implementations should stop
    /// promptly (the caller also drops the stream).
    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a>;
}

impl<T: ModelClient + ?Sized> ModelClient for std::sync::Arc<T> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        (**self).stream(request, cancel)
    }
}

impl<T: ModelClient + ?Sized> ModelClient for Box<T> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        (**self).stream(request, cancel)
    }
}
