//! The `ModelClient` trait: how the loop talks to any model.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::error::ModelError;
use crate::message::{AssistantMessage, Message, ModelInfo};

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
/// request copies nothing. Built with [`ModelRequest::new`] (fields keep being added).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation, derived from the session log.
    pub messages: &'a [Message],
    /// The tools on offer.
    pub tools: &'a [ToolDefinition],
    /// Whether tools may be called.
    pub tool_choice: ToolChoice,
    /// A stable key for the conversation (the session id): providers that route
    /// requests to a prompt cache by key (OpenAI Responses `prompt_cache_key`) send it.
    pub cache_key: Option<&'a str>,
    /// A sampling temperature for this request alone, over the client's configured one
    /// (a tool's own model call that must copy text faithfully asks for a low one).
    pub temperature: Option<f32>,
    /// A cap on this reply's tokens, below the client's configured one (a request that
    /// wants a few words must not run on for thousands of tokens).
    pub max_tokens: Option<u32>,
}

impl<'a> ModelRequest<'a> {
    /// A request with `system`, `messages` and `tools`, the model choosing whether to
    /// call tools, and no cache key.
    pub fn new(system: &'a str, messages: &'a [Message], tools: &'a [ToolDefinition]) -> Self {
        ModelRequest {
            system,
            messages,
            tools,
            tool_choice: ToolChoice::Auto,
            cache_key: None,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Sets whether tools may be called.
    pub fn tool_choice(mut self, tool_choice: ToolChoice) -> Self {
        self.tool_choice = tool_choice;
        self
    }

    /// Sets the conversation's cache key.
    pub fn cache_key(mut self, key: &'a str) -> Self {
        self.cache_key = Some(key);
        self
    }

    /// Sets the sampling temperature of this request.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Caps this reply's tokens (never above the client's configured cap).
    pub fn max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// The reply's token cap: this request's, within `configured`.
    pub fn token_cap(&self, configured: u32) -> u32 {
        self.max_tokens.map_or(configured, |cap| cap.min(configured))
    }
}

/// One item of a model's streamed reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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

/// A source of assistant messages: a remote provider, a local model, or a script.
///
/// `stream` yields deltas as they arrive and ends with [`ModelEvent::Completed`], or with
/// an error. Dropping the stream cancels the request and closes its connection.
pub trait ModelClient: Send + Sync {
    /// Which provider and model this client talks to.
    fn info(&self) -> ModelInfo;

    /// The model's context window in tokens, when known (configured, from a table of
    /// known models, or told by the server). Long sessions are compacted to fit it.
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// Whether the model takes images: `Some(false)` when it certainly does not (a
    /// text-only local model; keel then refuses a prompt with images before sending
    /// anything), `Some(true)` when it does, `None` when unknown (images are sent and the
    /// provider's answer decides).
    fn accepts_images(&self) -> Option<bool> {
        None
    }

    /// Start a request. `cancel` fires when the user aborts; implementations should stop
    /// promptly (the caller also drops the stream).
    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a>;
}

impl<T: ModelClient + ?Sized> ModelClient for std::sync::Arc<T> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn context_window(&self) -> Option<u64> {
        (**self).context_window()
    }

    fn accepts_images(&self) -> Option<bool> {
        (**self).accepts_images()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        (**self).stream(request, cancel)
    }
}

impl<T: ModelClient + ?Sized> ModelClient for Box<T> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn context_window(&self) -> Option<u64> {
        (**self).context_window()
    }

    fn accepts_images(&self) -> Option<bool> {
        (**self).accepts_images()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        (**self).stream(request, cancel)
    }
}
