//! The named presets: DeepSeek, OpenAI, Anthropic, OpenRouter and the local servers,
//! each with its API, key variable, default model and quirks.

use std::time::Duration;

use super::{Api, MaxTokensField, ProviderConfig, ReasoningReplay, Thinking};

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
        config.chat.reasoning_replay = self.reasoning_replay;
        config.text_tool_calls = self.text_tool_calls;
        config.thoughts_as_reasoning = self.thoughts_as_reasoning;
        config.chat.max_tokens_field = self.max_tokens_field;
        config.anthropic.thinking = self.thinking;
        if let Some(tokens) = self.max_tokens {
            config.max_tokens = tokens;
        }
        if self.name == "openai" && openai_reasons(model) {
            // Reasoning summaries stream as thinking; models without reasoning refuse
            // the parameter.
            config.responses.reasoning_summary = Some("auto".into());
        }
        if self.local {
            // Prompt processing on a CPU can take minutes before the first token.
            config.life.idle_timeout = Duration::from_secs(300);
            // A CPU can take an hour over a long answer.
            config.life.response_deadline = Duration::from_secs(2 * 60 * 60);
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
        assert_eq!(deepseek.chat.reasoning_replay, ReasoningReplay::ToolTurns);
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
        assert_eq!(anthropic.anthropic.thinking, Thinking::Adaptive);
        let openai = Preset::find("openai").unwrap().config(None).unwrap();
        assert_eq!(openai.api, Api::Responses);
        assert_eq!(openai.endpoint(), "https://api.openai.com/v1/responses");
        assert_eq!(openai.responses.reasoning_summary.as_deref(), Some("auto"));
        let older = Preset::find("openai").unwrap().config(Some("gpt-4.1-mini")).unwrap();
        assert_eq!(older.responses.reasoning_summary, None, "models without reasoning refuse the parameter");
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
