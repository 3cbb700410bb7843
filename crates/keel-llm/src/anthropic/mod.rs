//! The Anthropic Messages API: `POST {base_url}/messages` (Anthropic's API, and servers
//! that speak it, such as llama.cpp's llama-server). An encoder (`wire`) and a decoder
//! (`decode`) for the shared [`HttpClient`](crate::HttpClient).
//!
//! The key goes in `x-api-key`, with `anthropic-version: 2023-06-01`; a thinking
//! budget adds the interleaved-thinking beta so the model thinks between tool calls
//! (adaptive thinking does that by itself). 429 and 529 (overloaded) are retried with
//! capped backoff honouring `retry-after`, like every 5xx but 501.

mod decode;
mod wire;

use serde_json::value::RawValue;

use crate::client::{ModelRequest, ToolDefinition};
use crate::config::{ProviderConfig, Thinking};
use crate::http_client::WireApi;
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Auth, Decode, DecodeLimits, EventStream};

pub use crate::config::ANTHROPIC_VERSION;

/// The beta that lets a model with a thinking budget think between tool calls.
const INTERLEAVED_THINKING: &str = "interleaved-thinking-2025-05-14";

/// Anthropic Messages as a [`WireApi`].
#[derive(Debug)]
pub(crate) struct Messages;

impl WireApi for Messages {
    fn names(&self) -> ApiNames {
        ApiNames { api: "an Anthropic Messages API", document: "a message (no content)" }
    }

    fn auth(&self) -> Auth {
        Auth::Header("x-api-key")
    }

    fn headers(&self, config: &ProviderConfig) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Thinking::Budget(_) = config.anthropic.thinking {
            headers.push(("anthropic-beta", INTERLEAVED_THINKING.to_owned()));
        }
        headers
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
        wire::encode(request, config, me, tools)
    }

    fn decoder(&self, limits: DecodeLimits) -> Box<dyn Decode> {
        Box::new(EventStream::new(limits, decode::Decoder::with_output_limit(limits.max_output_bytes)))
    }
}
