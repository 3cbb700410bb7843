//! Settings and presets of the Chat Completions provider.

use std::time::Duration;

use serde_json::{Map, Value};

use super::DecodeLimits;

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

/// Everything the provider needs to talk to one server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Short provider name for logs (`deepseek`, `openai`, `custom`, …).
    pub provider: String,
    /// Base URL; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Model name sent in every request.
    pub model: String,
    /// Bearer token, if the server needs one.
    pub api_key: Option<String>,
    /// The environment variable that holds the key, named in authentication errors.
    pub api_key_env: Option<String>,
    /// Output cap sent with every request (a runaway model cannot generate forever).
    pub max_tokens: u32,
    /// The field name for the cap.
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
    /// event in the stream (keep-alive comments are not progress).
    pub idle_timeout: Duration,
    /// The longest one response may take, from sending the request to its end (30 min;
    /// 2 h for local presets). Past it the request fails, whatever is still arriving.
    pub response_deadline: Duration,
    /// After a chunk with a finish reason, how long to wait for the stream's end (a
    /// usage chunk, `[DONE]`, the body's end) before completing the message anyway: a
    /// server that holds the connection open loses nothing.
    pub finish_grace: Duration,
    /// When reasoning text is sent back.
    pub reasoning_replay: ReasoningReplay,
    /// Turn tool calls written as text into real calls (for small local models).
    pub text_tool_calls: bool,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Extra top-level body fields (e.g. `{"thinking": {"type": "enabled"}}`).
    pub extra_body: Map<String, Value>,
}

impl OpenAiConfig {
    /// A config for any OpenAI-compatible server at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            provider: "custom".into(),
            base_url: base_url.into(),
            model: model.into(),
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
            headers: Vec::new(),
            extra_body: Map::new(),
        }
    }

    /// The size bounds of a reply, derived from `max_tokens`.
    pub fn decode_limits(&self) -> DecodeLimits {
        DecodeLimits::for_max_tokens(self.max_tokens)
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// A named server preset: where it is, which key it needs, its quirks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The preset name (`--provider`).
    pub name: &'static str,
    /// Default base URL.
    pub base_url: &'static str,
    /// Environment variable holding the API key, if the server needs one.
    pub api_key_env: Option<&'static str>,
    /// Default model, if the preset has an obvious one.
    pub default_model: Option<&'static str>,
    /// Reasoning replay policy.
    pub reasoning_replay: ReasoningReplay,
    /// Whether text tool calls are parsed by default.
    pub text_tool_calls: bool,
    /// Output-cap field.
    pub max_tokens_field: MaxTokensField,
    /// Whether this is a server on the user's machine (longer idle timeout and
    /// response deadline, smaller cap).
    pub local: bool,
}

/// Every built-in preset.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "deepseek",
        base_url: "https://api.deepseek.com",
        api_key_env: Some("DEEPSEEK_API_KEY"),
        default_model: Some("deepseek-chat"),
        reasoning_replay: ReasoningReplay::ToolTurns,
        text_tool_calls: false,
        max_tokens_field: MaxTokensField::MaxTokens,
        local: false,
    },
    Preset {
        name: "openai",
        base_url: "https://api.openai.com/v1",
        api_key_env: Some("OPENAI_API_KEY"),
        default_model: Some("gpt-4.1-mini"),
        reasoning_replay: ReasoningReplay::Never,
        text_tool_calls: false,
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        local: false,
    },
    Preset {
        name: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: Some("OPENROUTER_API_KEY"),
        default_model: None,
        reasoning_replay: ReasoningReplay::Never,
        text_tool_calls: false,
        max_tokens_field: MaxTokensField::MaxTokens,
        local: false,
    },
    Preset {
        name: "ollama",
        base_url: "http://localhost:11434/v1",
        api_key_env: None,
        default_model: None,
        reasoning_replay: ReasoningReplay::Never,
        text_tool_calls: true,
        max_tokens_field: MaxTokensField::MaxTokens,
        local: true,
    },
    Preset {
        name: "llamacpp",
        base_url: "http://localhost:8080/v1",
        api_key_env: None,
        // llama-server serves whatever model it loaded, under any name.
        default_model: Some("default"),
        reasoning_replay: ReasoningReplay::Never,
        text_tool_calls: true,
        max_tokens_field: MaxTokensField::MaxTokens,
        local: true,
    },
    Preset {
        name: "vllm",
        base_url: "http://localhost:8000/v1",
        api_key_env: None,
        default_model: None,
        reasoning_replay: ReasoningReplay::Never,
        text_tool_calls: true,
        max_tokens_field: MaxTokensField::MaxTokens,
        local: true,
    },
];

impl Preset {
    /// Finds a preset by name.
    pub fn find(name: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.name == name)
    }

    /// The config this preset implies, with `model` (or the preset's default).
    pub fn config(&self, model: Option<&str>) -> Option<OpenAiConfig> {
        let model = model.or(self.default_model)?;
        let mut config = OpenAiConfig::new(self.base_url, model);
        config.provider = self.name.to_owned();
        config.api_key_env = self.api_key_env.map(str::to_owned);
        config.reasoning_replay = self.reasoning_replay;
        config.text_tool_calls = self.text_tool_calls;
        config.max_tokens_field = self.max_tokens_field;
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
        assert_eq!(deepseek.endpoint(), "https://api.deepseek.com/chat/completions");
        assert_eq!(deepseek.model, "deepseek-chat");
        assert_eq!(deepseek.api_key_env.as_deref(), Some("DEEPSEEK_API_KEY"));
        assert_eq!(deepseek.reasoning_replay, ReasoningReplay::ToolTurns);
        let ollama = Preset::find("ollama").unwrap();
        assert!(ollama.config(None).is_none(), "ollama needs a model name");
        let ollama = ollama.config(Some("qwen2.5-coder:7b")).unwrap();
        assert!(ollama.text_tool_calls);
        assert_eq!(ollama.endpoint(), "http://localhost:11434/v1/chat/completions");
        let mut custom = OpenAiConfig::new("http://h/v1/", "m");
        custom.base_url.push('/');
        assert_eq!(custom.endpoint(), "http://h/v1/chat/completions");
    }
}
