//! What an HTTP provider needs, whatever its wire API: where the server is, which key
//! it takes, the bounds of a request's life, and each API's own options; the named
//! presets. [`crate::connect`] is where a configuration becomes a client.

mod options;
mod presets;

use serde_json::{Map, Value};

use crate::error::{ModelError, ModelErrorKind};
use crate::transport::limits::DecodeLimits;

pub use options::{
    AnthropicOptions, ChatOptions, MaxTokensField, ReasoningReplay, RequestLife, ResponsesOptions, Thinking,
};
pub use presets::{PRESETS, Preset};

/// The Anthropic API version sent with every request to an Anthropic server.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The wire API a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Api {
    /// OpenAI-compatible Chat Completions: `POST {base}/chat/completions`.
    #[default]
    Chat,
    /// OpenAI Responses: `POST {base}/responses`.
    Responses,
    /// Anthropic Messages: `POST {base}/messages`.
    Anthropic,
}

impl Api {
    /// Every API, for listings.
    pub const ALL: [Api; 3] = [Api::Chat, Api::Responses, Api::Anthropic];

    /// Parses `chat`, `responses` or `anthropic`.
    pub fn parse(text: &str) -> Option<Self> {
        Api::ALL.into_iter().find(|api| api.as_str() == text)
    }

    /// The name used by `--api` and in configs.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Anthropic => "anthropic",
        }
    }

    /// The path after the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "chat/completions",
            Api::Responses => "responses",
            Api::Anthropic => "messages",
        }
    }
}

/// Everything an HTTP provider needs to talk to one server. `api` chooses the wire API
/// ([`ProviderConfig::client`]); the options of one API are in their own field, read by
/// that API only.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// The wire API.
    pub api: Api,
    /// Short provider name for logs (`deepseek`, `openai`, `anthropic`, `custom`, …).
    pub provider: String,
    /// Base URL, `/v1` included; requests go to `{base_url}/chat/completions`,
    /// `{base_url}/responses` or `{base_url}/messages`.
    pub base_url: String,
    /// Model name sent in every request.
    pub model: String,
    /// The key, if the server needs one: a bearer token (Chat Completions, Responses)
    /// or `x-api-key` (Anthropic).
    pub api_key: Option<String>,
    /// The environment variable that holds the key, named in authentication errors.
    pub api_key_env: Option<String>,
    /// Output cap sent with every request (a runaway model cannot generate forever).
    pub max_tokens: u32,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// Stream the reply (default) or wait for the whole response.
    pub stream: bool,
    /// Retries and time bounds of one request.
    pub life: RequestLife,
    /// Turn tool calls written as text into real calls (for small local models), on
    /// every API.
    pub text_tool_calls: bool,
    /// Keep the text before a reply's first tool call as reasoning, which is not sent
    /// back (see [`crate::text_calls::thoughts_as_reasoning`]); on for local presets,
    /// whose small models otherwise copy their own earlier notes.
    pub thoughts_as_reasoning: bool,
    /// The model's context window in tokens, if known (by default from
    /// [`crate::known_context_window`]).
    pub context_window: Option<u64>,
    /// Whether the model takes images (config `images`, or what its server says);
    /// `None`: unknown, images are sent and the provider decides.
    pub images: Option<bool>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Extra top-level body fields (e.g. `{"thinking": {"type": "enabled"}}`).
    pub extra_body: Map<String, Value>,
    /// Chat Completions' own options.
    pub chat: ChatOptions,
    /// Anthropic Messages' own options.
    pub anthropic: AnthropicOptions,
    /// OpenAI Responses' own options.
    pub responses: ResponsesOptions,
}

impl ProviderConfig {
    /// A config for any OpenAI-compatible Chat Completions server at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let model = model.into();
        ProviderConfig {
            context_window: crate::known_context_window(&model),
            api: Api::Chat,
            provider: "custom".into(),
            base_url: base_url.into(),
            model,
            api_key: None,
            api_key_env: None,
            max_tokens: 8192,
            temperature: None,
            stream: true,
            life: RequestLife::default(),
            text_tool_calls: false,
            thoughts_as_reasoning: false,
            images: None,
            headers: Vec::new(),
            extra_body: Map::new(),
            chat: ChatOptions::default(),
            anthropic: AnthropicOptions::default(),
            responses: ResponsesOptions::default(),
        }
    }

    /// A config for a server speaking `api` at `base_url`.
    pub fn for_api(api: Api, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ProviderConfig { api, ..ProviderConfig::new(base_url, model) }
    }

    /// The size bounds of a reply, derived from `max_tokens`.
    pub fn decode_limits(&self) -> DecodeLimits {
        DecodeLimits::for_max_tokens(self.max_tokens)
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/{}", self.base_url.trim_end_matches('/'), self.api.path())
    }

    /// Checks what every API needs: a model name and an http(s) URL.
    pub(crate) fn validate(&self) -> Result<(), ModelError> {
        if self.model.trim().is_empty() {
            return Err(ModelError::new(ModelErrorKind::Config, "no model name is set"));
        }
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return Err(ModelError::new(
                ModelErrorKind::Config,
                format!("the base URL `{}` must start with http:// or https://", self.base_url),
            ));
        }
        Ok(())
    }
}
