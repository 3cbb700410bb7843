//! The OpenAI-compatible Chat Completions API: DeepSeek, OpenAI, OpenRouter, Ollama,
//! llama.cpp's llama-server, vLLM, LM Studio — anything that serves
//! `POST {base_url}/chat/completions`. An encoder (`wire`) and a decoder (`decode`,
//! `stream`) for the shared [`HttpClient`](crate::HttpClient).

mod decode;
mod stream;
mod wire;

use serde_json::value::RawValue;

pub use crate::config::{MaxTokensField, PRESETS, Preset, ReasoningReplay};
pub use crate::transport::DecodeLimits;
pub use stream::StreamDecoder;

use crate::client::{ModelRequest, ToolDefinition};
use crate::config::ProviderConfig;
use crate::http_client::WireApi;
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Decode};

/// Chat Completions as a [`WireApi`]: a bearer key, no headers of its own.
#[derive(Debug)]
pub(crate) struct Chat;

impl WireApi for Chat {
    fn names(&self) -> ApiNames {
        ApiNames { api: "an OpenAI-compatible API", document: "a chat completion (no choices)" }
    }

    fn encode_tools(&self, tools: &[ToolDefinition]) -> serde_json::Result<Box<RawValue>> {
        wire::encode_tools(tools)
    }

    fn encode(
        &self,
        request: &ModelRequest<'_>,
        config: &ProviderConfig,
        me: &ModelInfo,
        tools: &RawValue,
    ) -> serde_json::Result<Vec<u8>> {
        wire::encode(request, config, me, Some(tools))
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decode> {
        stream::decoder(limits)
    }
}
