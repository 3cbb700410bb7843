//! Provider-neutral messages, the [`ModelClient`] trait, and model providers.
//!
//! The agent loop (`keel-agent`) only sees the types here: [`Message`] for the
//! conversation, [`ModelRequest`] for what is sent, and a stream of [`ModelEvent`]s for
//! what comes back.
//!
//! With the `http` feature (default), three wire APIs over one transport: [`openai`]
//! (Chat Completions), [`anthropic`] (Messages) and [`responses`] (OpenAI Responses),
//! each spoken by one [`HttpClient`]; a [`ProviderConfig`] (from a [`Preset`] or by
//! hand) makes the client for its [`Api`].
//! On the same transport, [`completion`]: llama.cpp's native `/completion` with a prompt
//! the caller renders (keel-local's templated route).

#[cfg(feature = "http")]
pub mod anthropic;
mod assemble;
mod client;
#[cfg(feature = "http")]
pub mod completion;
#[cfg(feature = "http")]
mod config;
#[cfg(feature = "http")]
mod connect;
mod error;
pub mod facts;
#[cfg(feature = "http")]
mod http_client;
mod image;
pub mod lenient;
mod message;
#[cfg(feature = "http")]
pub mod openai;
pub mod repeats;
#[cfg(feature = "http")]
pub mod responses;
pub mod sse;
pub mod text_calls;
#[cfg(feature = "http")]
mod transport;
mod windows;

pub use assemble::MessageBuilder;
pub use client::{ModelClient, ModelEvent, ModelRequest, ModelStream, ToolChoice, ToolDefinition};
#[cfg(feature = "http")]
pub use config::{
    AnthropicOptions, Api, ChatOptions, MaxTokensField, PRESETS, Preset, ProviderConfig, ReasoningReplay,
    RequestLife, ResponsesOptions, Thinking,
};
pub use error::{ModelError, ModelErrorKind};
#[cfg(feature = "http")]
pub use http_client::HttpClient;
pub use image::{
    Image, ImageError, ImageType, MAX_IMAGE_BYTES, MAX_IMAGES_PER_MESSAGE, MAX_REQUEST_IMAGE_BYTES,
    images_sent, withdraw_images, within_image_budget, without_images,
};
pub use message::{
    AssistantMessage, ContentBlock, FinishReason, Message, ModelInfo, ToolCall, ToolResultMessage, Usage,
    UserMessage,
};
#[cfg(feature = "http")]
pub use transport::models::list_models;
pub use windows::known_context_window;

/// Re-exported so implementers and callers share one token type.
pub use tokio_util::sync::CancellationToken;
