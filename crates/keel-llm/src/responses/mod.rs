//! The OpenAI Responses API: `POST {base_url}/responses` (OpenAI, and servers that
//! speak it, such as llama.cpp's llama-server). An encoder (`wire`) and a decoder
//! (`decode`) for the shared [`HttpClient`](crate::HttpClient).
//!
//! Nothing is stored at the provider (`store: false`): each request carries the whole
//! history, reasoning included as the encrypted items the model returned, so a
//! reasoning model keeps its reasoning from one step to the next.

mod decode;
mod wire;

use serde_json::value::RawValue;

use crate::client::{ModelRequest, ToolDefinition};
use crate::config::ProviderConfig;
use crate::http_client::WireApi;
use crate::message::ModelInfo;
use crate::transport::{ApiNames, Decode, DecodeLimits, EventStream};

/// OpenAI Responses as a [`WireApi`]: a bearer key, no headers of its own.
#[derive(Debug)]
pub(crate) struct Responses;

impl WireApi for Responses {
    fn names(&self) -> ApiNames {
        ApiNames { api: "an OpenAI Responses API", document: "a response (no output)" }
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
