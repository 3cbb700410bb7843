//! Which model a layer of settings names: the provider's configuration (preset or
//! custom server, wire API, key, bounds, each API's options), and what `/model`
//! switches to.

use keel_llm::{Api, Preset, ProviderConfig, ReasoningReplay, Thinking};

use crate::config::layer::{ConfigError, ConfigErrorKind, Layer, env};

/// The provider a layer names, or the first whose key is in the environment (`vars`).
fn pick_provider_in(layer: &Layer, vars: impl Fn(&str) -> Option<String>) -> Option<String> {
    layer.provider.clone().or_else(|| {
        if layer.base_url.is_some() {
            return None;
        }
        ["deepseek", "openai", "openrouter", "anthropic"]
            .into_iter()
            .find(|name| Preset::find(name).and_then(|p| p.api_key_env).and_then(&vars).is_some())
            .map(str::to_owned)
    })
}

/// [`pick_provider_in`] the process environment.
pub(crate) fn pick_provider(layer: &Layer) -> Option<String> {
    pick_provider_in(layer, env)
}

/// The preset's config (or a custom one) for the layer's provider and model.
pub(crate) fn base_config(layer: &Layer, provider: Option<&str>) -> Result<ProviderConfig, ConfigError> {
    match provider {
        Some("custom") | None => {
            let Some(base_url) = layer.base_url.clone() else {
                return Err(ConfigError { kind: ConfigErrorKind::NoModel, message: missing_model_help() });
            };
            let Some(model) = layer.model.clone() else {
                return Err(ConfigError::new(format!(
                    "a model name is needed for {base_url}: pass --model NAME or set KEEL_MODEL"
                )));
            };
            Ok(ProviderConfig { provider: "custom".into(), ..ProviderConfig::new(base_url, model) })
        }
        Some(name) => {
            let Some(preset) = Preset::find(name) else {
                let names: Vec<&str> = keel_llm::PRESETS.iter().map(|p| p.name).collect();
                return Err(ConfigError::new(format!(
                    "unknown provider `{name}`; known: {}, custom",
                    names.join(", ")
                )));
            };
            let Some(mut config) = preset.config(layer.model.as_deref()) else {
                return Err(ConfigError::new(format!(
                    "provider `{name}` needs a model name: pass --model NAME or set KEEL_MODEL"
                )));
            };
            if let Some(url) = &layer.base_url {
                config.base_url = url.clone();
            }
            Ok(config)
        }
    }
}

/// The options of each API a layer sets.
fn api_options(layer: &Layer, client: &mut ProviderConfig) -> Result<(), ConfigError> {
    if let Some(api) = &layer.api {
        client.api = Api::parse(api).ok_or_else(|| {
            ConfigError::new(format!("--api must be chat, responses or anthropic (got `{api}`)"))
        })?;
    }
    if let Some(replay) = &layer.reasoning_replay {
        client.chat.reasoning_replay = ReasoningReplay::parse(replay).ok_or_else(|| {
            ConfigError::new(format!("reasoning_replay must be never, tool_turns or always (got `{replay}`)"))
        })?;
    }
    if let Some(thinking) = &layer.thinking {
        client.anthropic.thinking = Thinking::parse(thinking).ok_or_else(|| {
            ConfigError::new(format!(
                "thinking must be off, adaptive or a budget of at least 1024 tokens (got `{thinking}`)"
            ))
        })?;
    }
    if let Some(effort) = &layer.reasoning_effort {
        client.responses.reasoning_effort = Some(effort.clone());
    }
    match layer.reasoning_summary.as_deref() {
        Some("none" | "off") => client.responses.reasoning_summary = None,
        Some(summary) => client.responses.reasoning_summary = Some(summary.to_owned()),
        None => {}
    }
    Ok(())
}

/// The model configuration a layer describes: preset, API, key and bounds.
pub fn provider_config(layer: &Layer) -> Result<ProviderConfig, ConfigError> {
    let provider = pick_provider(layer);
    let mut client = base_config(layer, provider.as_deref())?;
    client.api_key = layer.api_key.clone().or_else(|| client.api_key_env.as_deref().and_then(env));
    if client.api_key.is_none()
        && let Some(var) = &client.api_key_env
        && client.base_url == Preset::find(&client.provider).map(|p| p.base_url).unwrap_or_default()
    {
        return Err(ConfigError::new(format!(
            "{var} is not set. Get a key from the provider, then:\n  export {var}=sk-...\n(or set KEEL_API_KEY)"
        )));
    }
    if let Some(tokens) = layer.max_tokens {
        client.max_tokens = tokens;
    }
    if let Some(retries) = layer.max_retries {
        client.life.max_retries = retries;
    }
    if let Some(secs) = layer.idle_timeout_secs {
        client.life.idle_timeout = std::time::Duration::from_secs(secs.max(1));
    }
    client.temperature = layer.temperature.or(client.temperature);
    if let Some(seed) = layer.seed {
        client.extra_body.insert("seed".into(), seed.into());
    }
    if let Some(text_calls) = layer.text_tool_calls {
        client.text_tool_calls = text_calls;
    }
    if let Some(thoughts) = layer.thoughts_as_reasoning {
        client.thoughts_as_reasoning = thoughts;
    }
    if let Some(stream) = layer.stream {
        client.stream = stream;
    }
    if let Some(window) = layer.context_window {
        client.context_window = Some(window);
    }
    if let Some(images) = layer.images {
        client.images = Some(images);
    }
    api_options(layer, &mut client)?;
    Ok(client)
}

/// The message shown when no model is configured.
pub fn missing_model_help() -> String {
    format!(
        "no model is configured. Pick one and run keel again:

  No account   keel --local \"your task\"
               (the model runs inside keel; fetched on first use){}

  Anthropic    export ANTHROPIC_API_KEY=sk-ant-...
               keel --provider anthropic \"your task\"

  OpenAI       export OPENAI_API_KEY=sk-...
               keel --provider openai \"your task\"

  DeepSeek     export DEEPSEEK_API_KEY=sk-...
               keel --provider deepseek \"your task\"

  llama.cpp    llama-server -m model.gguf --jinja --port 8080
               keel --provider llamacpp \"your task\"

  Ollama       ollama pull qwen2.5-coder:7b
               keel --provider ollama --model qwen2.5-coder:7b \"your task\"

  Any server:  keel --base-url http://host:port/v1 --model NAME \"your task\"
               (--api chat, responses or anthropic: the API it speaks; chat by default)

To make it stick, put it in {}:
  provider = \"anthropic\"
  model = \"claude-sonnet-4-6\"",
        local_note(),
        crate::paths::config_file().display(),
    )
}

/// Whether `error` says no model is configured at all.
pub fn names_no_model(error: &ConfigError) -> bool {
    error.kind == ConfigErrorKind::NoModel
}

/// What `--local` needs that this build may lack, for the help above.
fn local_note() -> &'static str {
    if cfg!(feature = "local") {
        ""
    } else {
        "\n               this keel was built without it; install one that has it:\n               cargo install --locked --path crates/keel-cli --features local"
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::settings_from;

    #[test]
    fn the_api_comes_from_the_preset_or_the_flag() {
        let layer = |provider: &str, api: Option<&str>| Layer {
            provider: Some(provider.into()),
            api: api.map(str::to_owned),
            api_key: Some("k".into()),
            ..Layer::default()
        };
        let config = |layer: Layer| provider_config(&layer).unwrap();
        let anthropic = config(layer("anthropic", None));
        assert_eq!((anthropic.api, anthropic.model.as_str()), (Api::Anthropic, "claude-sonnet-4-6"));
        assert_eq!(anthropic.endpoint(), "https://api.anthropic.com/v1/messages");
        assert_eq!(config(layer("openai", None)).api, Api::Responses);
        assert_eq!(
            config(layer("openai", Some("chat"))).endpoint(),
            "https://api.openai.com/v1/chat/completions"
        );
        let llamacpp = config(layer("llamacpp", Some("anthropic")));
        assert_eq!(llamacpp.endpoint(), "http://localhost:8080/v1/messages");
        assert!(llamacpp.text_tool_calls);
        assert!(llamacpp.thoughts_as_reasoning);
        let custom = Layer {
            base_url: Some("http://127.0.0.1:8092/v1".into()),
            model: Some("m".into()),
            api: Some("responses".into()),
            thinking: Some("2048".into()),
            reasoning_effort: Some("low".into()),
            ..Layer::default()
        };
        let custom = config(custom);
        assert_eq!(custom.endpoint(), "http://127.0.0.1:8092/v1/responses");
        assert_eq!(custom.anthropic.thinking, Thinking::Budget(2048));
        assert_eq!(custom.responses.reasoning_effort.as_deref(), Some("low"));
        let bad = provider_config(&layer("openai", Some("completions"))).unwrap_err().message;
        assert!(bad.contains("--api must be chat, responses or anthropic"), "{bad}");
        let bad = provider_config(&Layer { thinking: Some("lots".into()), ..layer("anthropic", None) })
            .unwrap_err()
            .message;
        assert!(bad.contains("thinking must be off, adaptive"), "{bad}");
    }

    #[test]
    fn model_switches_to_a_name_a_preset_or_a_profile() {
        let layer = Layer {
            provider: Some("llamacpp".into()),
            base_url: Some("http://127.0.0.1:8092/v1".into()),
            api: Some("responses".into()),
            ..Layer::default()
        };
        let mut settings = settings_from(layer, BTreeMap::new(), None, false).unwrap();
        let claude = Layer {
            provider: Some("anthropic".into()),
            base_url: Some("http://mock/v1".into()),
            model: Some("claude-a".into()),
            api_key: Some("k".into()),
            ..Layer::default()
        };
        settings.profiles.insert("claude".into(), claude);
        let switch = |arg: &str| {
            let config = settings.switch_model(arg).unwrap();
            (config.provider.clone(), config.api, config.endpoint(), config.model.clone())
        };
        let (local, responses) = ("http://127.0.0.1:8092/v1/responses".to_owned(), Api::Responses);
        assert_eq!(
            switch("qwen2.5-coder:7b"),
            ("llamacpp".into(), responses, local.clone(), "qwen2.5-coder:7b".into())
        );
        assert_eq!(switch("llamacpp other"), ("llamacpp".into(), responses, local, "other".into()));
        assert_eq!(
            switch("ollama qwen"),
            ("ollama".into(), Api::Chat, "http://localhost:11434/v1/chat/completions".into(), "qwen".into())
        );
        assert_eq!(
            switch("claude"),
            ("anthropic".into(), Api::Anthropic, "http://mock/v1/messages".into(), "claude-a".into())
        );
        let error = settings.switch_model("ollama").unwrap_err().message;
        assert!(error.contains("needs a model name"), "{error}");
    }

    #[test]
    fn an_anthropic_key_in_the_environment_picks_anthropic() {
        let only = |var: &'static str| move |name: &str| (name == var).then(|| "key".to_owned());
        assert_eq!(
            pick_provider_in(&Layer::default(), only("ANTHROPIC_API_KEY")).as_deref(),
            Some("anthropic")
        );
        assert_eq!(pick_provider_in(&Layer::default(), only("OPENAI_API_KEY")).as_deref(), Some("openai"));
        assert_eq!(pick_provider_in(&Layer::default(), only("NOTHING")), None);
        let with_url = Layer { base_url: Some("http://h/v1".into()), ..Layer::default() };
        assert_eq!(
            pick_provider_in(&with_url, only("ANTHROPIC_API_KEY")),
            None,
            "a base URL means a custom server"
        );
    }
}
