//! What an HTTP provider needs, whatever its wire API: where the server is, which key
//! it takes, the bounds of a request's life, and each API's own options; the named
//! presets. [`crate::connect`] is where a configuration becomes a client.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::{ModelError, ModelErrorKind};
use crate::transport::limits::DecodeLimits;

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

/// Anthropic extended thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Thinking {
    /// No `thinking` parameter: the model does not think.
    #[default]
    Off,
    /// `{"type": "adaptive"}`: the model decides when and how much (Claude 4.6 and
    /// later; thinking between tool calls comes with it).
    Adaptive,
    /// `{"type": "enabled", "budget_tokens": n}` (older models), with the
    /// interleaved-thinking beta so the model thinks between tool calls too. The budget
    /// is kept below `max_tokens`.
    Budget(u32),
}

impl Thinking {
    /// Parses `off`, `adaptive` or a token budget (at least 1024).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "off" | "none" | "0" => Some(Thinking::Off),
            "adaptive" | "on" => Some(Thinking::Adaptive),
            number => number.parse::<u32>().ok().filter(|n| *n >= 1024).map(Thinking::Budget),
        }
    }
}

/// When reasoning text is sent back to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningReplay {
    /// Never (providers that reject unknown message fields).
    #[default]
    Never,
    /// On assistant messages that made tool calls (DeepSeek thinking mode requires it
    /// there and ignores it elsewhere).
    ToolTurns,
    /// On every assistant message that has reasoning.
    Always,
}

impl ReasoningReplay {
    /// Parses `never`, `tool_turns` or `always`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "never" => Some(Self::Never),
            "tool_turns" => Some(Self::ToolTurns),
            "always" => Some(Self::Always),
            _ => None,
        }
    }
}

/// Which body field carries the output cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens` (most servers).
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's newer models reject `max_tokens`).
    MaxCompletionTokens,
}

/// Everything an HTTP provider needs to talk to one server. `api` chooses the wire API
/// ([`ProviderConfig::client`]); options of one API are ignored by the others.
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
    /// The field name for the cap (Chat Completions only).
    pub max_tokens_field: MaxTokensField,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// Stream the reply (default) or wait for the whole response.
    pub stream: bool,
    /// Retries of a failed request (429, 5xx, connection errors) before any output.
    pub max_retries: u32,
    /// Upper bound of one retry wait, whatever `Retry-After` says.
    pub max_retry_delay: Duration,
    /// A request with no progress for this long fails: no response headers, or no
    /// output in the stream (keep-alive comments, empty chunks and status events are not
    /// progress).
    pub idle_timeout: Duration,
    /// The longest one response may take, from sending the request to its end (30 min;
    /// 2 h for local presets). Past it the request fails, whatever is still arriving.
    pub response_deadline: Duration,
    /// After a chunk with a finish reason, how long to wait for the stream's end (a
    /// usage chunk, `[DONE]`, the body's end) before completing the message anyway: a
    /// server that holds the connection open loses nothing.
    pub finish_grace: Duration,
    /// When reasoning text is sent back (Chat Completions only; the other APIs send
    /// back what their model signed or encrypted, to that model only).
    pub reasoning_replay: ReasoningReplay,
    /// Turn tool calls written as text into real calls (for small local models), on
    /// every API.
    pub text_tool_calls: bool,
    /// Keep the text before a reply's first tool call as reasoning, which is not sent
    /// back (see [`crate::text_calls::thoughts_as_reasoning`]); on for local presets,
    /// whose small models otherwise copy their own earlier notes.
    pub thoughts_as_reasoning: bool,
    /// Extended thinking (Anthropic only).
    pub thinking: Thinking,
    /// `reasoning.effort` (Responses only): `minimal`, `low`, `medium`, `high`; none
    /// leaves the model's default.
    pub reasoning_effort: Option<String>,
    /// `reasoning.summary` (Responses only): `auto`, `concise`, `detailed`; none asks
    /// for no summaries. Models without reasoning refuse the `reasoning` parameter.
    pub reasoning_summary: Option<String>,
    /// The model's context window in tokens, if known (by default from
    /// [`crate::known_context_window`]).
    pub context_window: Option<u64>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Extra top-level body fields (e.g. `{"thinking": {"type": "enabled"}}`).
    pub extra_body: Map<String, Value>,
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
            max_tokens_field: MaxTokensField::MaxTokens,
            temperature: None,
            stream: true,
            max_retries: 4,
            max_retry_delay: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            response_deadline: Duration::from_secs(30 * 60),
            finish_grace: Duration::from_millis(1500),
            reasoning_replay: ReasoningReplay::Never,
            text_tool_calls: false,
            thoughts_as_reasoning: false,
            thinking: Thinking::Off,
            reasoning_effort: None,
            reasoning_summary: None,
            headers: Vec::new(),
            extra_body: Map::new(),
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

/// A named server preset: where it is, which API and key it takes, its quirks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The preset name (`--provider`).
    pub name: &'static str,
    /// The wire API it speaks unless `--api` says otherwise.
    pub api: Api,
    /// Default base URL, `/v1` included.
    pub base_url: &'static str,
    /// Environment variable holding the API key, if the server needs one.
    pub api_key_env: Option<&'static str>,
    /// Default model, if the preset has an obvious one.
    pub default_model: Option<&'static str>,
    /// Reasoning replay policy (Chat Completions).
    pub reasoning_replay: ReasoningReplay,
    /// Whether text tool calls are parsed by default.
    pub text_tool_calls: bool,
    /// Whether text before a tool call is kept as reasoning by default.
    pub thoughts_as_reasoning: bool,
    /// Output-cap field (Chat Completions).
    pub max_tokens_field: MaxTokensField,
    /// The output cap, when it differs from the default 8192 (reasoning models think
    /// within it).
    pub max_tokens: Option<u32>,
    /// Extended thinking (Anthropic).
    pub thinking: Thinking,
    /// Whether this is a server on the user's machine (longer idle timeout and
    /// response deadline, smaller cap).
    pub local: bool,
}

impl Preset {
    /// A preset of `api` at `base_url` with the common defaults.
    const fn base(name: &'static str, api: Api, base_url: &'static str) -> Preset {
        Preset {
            name,
            api,
            base_url,
            api_key_env: None,
            default_model: None,
            reasoning_replay: ReasoningReplay::Never,
            text_tool_calls: false,
            thoughts_as_reasoning: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            max_tokens: None,
            thinking: Thinking::Off,
            local: false,
        }
    }

    /// A server on the user's machine: text tool calls on, longer time bounds.
    const fn local(
        name: &'static str,
        base_url: &'static str,
        default_model: Option<&'static str>,
    ) -> Preset {
        Preset {
            default_model,
            text_tool_calls: true,
            thoughts_as_reasoning: true,
            local: true,
            ..Preset::base(name, Api::Chat, base_url)
        }
    }
}

/// Every built-in preset.
pub const PRESETS: &[Preset] = &[
    Preset {
        api_key_env: Some("ANTHROPIC_API_KEY"),
        default_model: Some("claude-sonnet-4-6"),
        max_tokens: Some(16_384),
        thinking: Thinking::Adaptive,
        ..Preset::base("anthropic", Api::Anthropic, "https://api.anthropic.com/v1")
    },
    Preset {
        api_key_env: Some("OPENAI_API_KEY"),
        default_model: Some("gpt-5-mini"),
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        max_tokens: Some(16_384),
        ..Preset::base("openai", Api::Responses, "https://api.openai.com/v1")
    },
    Preset {
        api_key_env: Some("DEEPSEEK_API_KEY"),
        default_model: Some("deepseek-chat"),
        reasoning_replay: ReasoningReplay::ToolTurns,
        ..Preset::base("deepseek", Api::Chat, "https://api.deepseek.com/v1")
    },
    Preset {
        api_key_env: Some("OPENROUTER_API_KEY"),
        ..Preset::base("openrouter", Api::Chat, "https://openrouter.ai/api/v1")
    },
    Preset::local("ollama", "http://localhost:11434/v1", None),
    // llama-server serves whatever model it loaded, under any name.
    Preset::local("llamacpp", "http://localhost:8080/v1", Some("default")),
    Preset::local("vllm", "http://localhost:8000/v1", None),
];

/// Whether an OpenAI model reasons (and so takes the `reasoning` parameter): the
/// gpt-5 family, codex models and the o-series.
fn openai_reasons(model: &str) -> bool {
    let model = model.rsplit('/').next().unwrap_or(model);
    model.starts_with("gpt-5")
        || model.contains("codex")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|family| model == *family || model.starts_with(&format!("{family}-")))
}

impl Preset {
    /// Finds a preset by name.
    pub fn find(name: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.name == name)
    }

    /// The config this preset implies, with `model` (or the preset's default).
    pub fn config(&self, model: Option<&str>) -> Option<ProviderConfig> {
        let model = model.or(self.default_model)?;
        let mut config = ProviderConfig::for_api(self.api, self.base_url, model);
        config.provider = self.name.to_owned();
        config.api_key_env = self.api_key_env.map(str::to_owned);
        config.reasoning_replay = self.reasoning_replay;
        config.text_tool_calls = self.text_tool_calls;
        config.thoughts_as_reasoning = self.thoughts_as_reasoning;
        config.max_tokens_field = self.max_tokens_field;
        config.thinking = self.thinking;
        if let Some(tokens) = self.max_tokens {
            config.max_tokens = tokens;
        }
        if self.name == "openai" && openai_reasons(model) {
            // Reasoning summaries stream as thinking; models without reasoning refuse
            // the parameter.
            config.reasoning_summary = Some("auto".into());
        }
        if self.local {
            // Prompt processing on a CPU can take minutes before the first token.
            config.idle_timeout = Duration::from_secs(300);
            // A CPU can take an hour over a long answer.
            config.response_deadline = Duration::from_secs(2 * 60 * 60);
            // A small model that runs away should not hold the user for minutes.
            config.max_tokens = 2048;
        }
        if self.name == "openrouter" {
            config.headers.push(("X-Title".into(), "keel".into()));
        }
        Some(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_fill_in_defaults() {
        let deepseek = Preset::find("deepseek").unwrap().config(None).unwrap();
        assert_eq!(deepseek.endpoint(), "https://api.deepseek.com/v1/chat/completions");
        assert_eq!(deepseek.model, "deepseek-chat");
        assert_eq!(deepseek.api_key_env.as_deref(), Some("DEEPSEEK_API_KEY"));
        assert_eq!(deepseek.reasoning_replay, ReasoningReplay::ToolTurns);
        let ollama = Preset::find("ollama").unwrap();
        assert!(ollama.config(None).is_none(), "ollama needs a model name");
        let ollama = ollama.config(Some("qwen2.5-coder:7b")).unwrap();
        assert!(ollama.text_tool_calls);
        assert_eq!(ollama.endpoint(), "http://localhost:11434/v1/chat/completions");
        let mut custom = ProviderConfig::new("http://h/v1/", "m");
        custom.base_url.push('/');
        assert_eq!(custom.endpoint(), "http://h/v1/chat/completions");
    }

    #[test]
    fn every_api_has_its_preset_and_its_path_under_v1() {
        let anthropic = Preset::find("anthropic").unwrap().config(None).unwrap();
        assert_eq!(anthropic.api, Api::Anthropic);
        assert_eq!(anthropic.endpoint(), "https://api.anthropic.com/v1/messages");
        assert_eq!(anthropic.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(anthropic.model, "claude-sonnet-4-6");
        assert_eq!(anthropic.thinking, Thinking::Adaptive);
        let openai = Preset::find("openai").unwrap().config(None).unwrap();
        assert_eq!(openai.api, Api::Responses);
        assert_eq!(openai.endpoint(), "https://api.openai.com/v1/responses");
        assert_eq!(openai.reasoning_summary.as_deref(), Some("auto"));
        let older = Preset::find("openai").unwrap().config(Some("gpt-4.1-mini")).unwrap();
        assert_eq!(older.reasoning_summary, None, "models without reasoning refuse the parameter");
        let llamacpp =
            ProviderConfig { api: Api::Anthropic, ..Preset::find("llamacpp").unwrap().config(None).unwrap() };
        assert_eq!(llamacpp.endpoint(), "http://localhost:8080/v1/messages");
        for api in Api::ALL {
            assert_eq!(Api::parse(api.as_str()), Some(api));
        }
        assert_eq!(Api::parse("completions"), None);
    }

    #[test]
    fn thinking_settings_parse() {
        assert_eq!(Thinking::parse("off"), Some(Thinking::Off));
        assert_eq!(Thinking::parse("adaptive"), Some(Thinking::Adaptive));
        assert_eq!(Thinking::parse("4096"), Some(Thinking::Budget(4096)));
        assert_eq!(Thinking::parse("100"), None, "the API's minimum budget is 1024");
        assert!(openai_reasons("gpt-5.1-codex") && openai_reasons("o3") && openai_reasons("o4-mini"));
        assert!(!openai_reasons("gpt-4.1") && !openai_reasons("gpt-4o") && !openai_reasons("o1x"));
    }
}
