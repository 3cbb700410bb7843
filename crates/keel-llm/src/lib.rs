//! Provider-neutral messages, the [`ModelClient`] trait, and model providers.
//!
//! The agent loop (`keel-agent`) only sees the types here: [`Message`] for the
//! conversation, [`ModelRequest`] for what is sent, and a stream of [`ModelEvent`]s for
//! what comes back.

mod assemble;
mod client;
mod error;
pub mod lenient;
mod message;
#[cfg(feature = "http")]
pub mod openai;
#[cfg(feature = "http")]
mod retry;
pub mod sse;
pub mod text_calls;

pub use assemble::MessageBuilder;
pub use client::{ModelClient, ModelEvent, ModelInfo, ModelRequest, ModelStream, ToolChoice, ToolDefinition};
pub use error::{ModelError, ModelErrorKind};
pub use message::{
    AssistantMessage, ContentBlock, FinishReason, Message, ToolCall, ToolResultMessage, Usage, UserMessage,
};

/// Re-exported so implementers and callers share one token type.
pub use tokio_util::sync::CancellationToken;
