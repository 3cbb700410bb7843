//! What a model's server told of it, folded into the settings: the one step from the
//! configured settings to those a session runs with. Pure: the asking is the caller's
//! (`setup::model`).

use keel_llm::Preset;
use keel_llm::facts::ModelFacts;

use super::{ModelSettings, Settings, route_undecided, templated_server};

impl Settings {
    /// These settings for the server model they name, whose server told `facts`:
    ///
    /// - a server of no preset that answers as llama.cpp is driven as the llamacpp
    ///   preset (calls written as text are read, thoughts kept as reasoning, unless set);
    /// - its context window, unless configured;
    /// - the profile for the model's size ([`Settings::fit_profile`]);
    /// - for the llamacpp preset with no `grammar` setting, the route: a template that
    ///   writes `<tool_call>` gets the templated route, others Chat Completions; and
    ///   `tool_first`/`always_call` follow the route ([`Settings::follow_route`]).
    ///
    /// Settings of the embedded model are returned as they are.
    pub fn fitted_to_server(mut self, facts: &ModelFacts) -> Settings {
        let ModelSettings::Remote(config) = &mut self.model else {
            return self;
        };
        let layer = &self.layer;
        if facts.props.as_ref().is_some_and(keel_llm::facts::is_llama_cpp)
            && Preset::find(&config.provider).is_none()
        {
            config.provider = "llamacpp".to_owned();
            config.text_tool_calls = layer.text_tool_calls.unwrap_or(true);
            config.thoughts_as_reasoning = layer.thoughts_as_reasoning.unwrap_or(true);
        }
        if layer.context_window.is_none() {
            config.context_window = facts.context_window.or(config.context_window);
        }
        if layer.images.is_none() {
            config.images = facts.images.or(config.images);
        }
        if route_undecided(config, layer) {
            let tagged = facts.props.as_ref().is_some_and(keel_local::server::writes_tagged_calls);
            self.layer.grammar = Some(tagged);
        }
        let local_preset = Preset::find(&config.provider).is_some_and(|p| p.local);
        let templated = templated_server(config, &self.layer);
        self.fit_profile(facts, local_preset);
        // The templated route constrains its calls, so every step may require one.
        self.follow_route(templated);
        self
    }

    /// Whether these settings run a server's model over llama-server's templated route.
    pub fn templated(&self) -> bool {
        matches!(&self.model, ModelSettings::Remote(config) if templated_server(config, &self.layer))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use keel_llm::facts::ModelFacts;
    use serde_json::json;

    use super::super::{Layer, ModelSettings, Settings, settings_from};

    fn custom_server(layer: Layer) -> Settings {
        let layer = Layer {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some("some-model".into()),
            ..layer
        };
        settings_from(layer, BTreeMap::new(), None, false).unwrap()
    }

    fn llama_cpp(template: &str, n_ctx: u64) -> ModelFacts {
        ModelFacts {
            billions: Some(1.5),
            context_window: Some(n_ctx),
            size_source: Some("llama.cpp /v1/models"),
            props: Some(json!({"default_generation_settings": {"n_ctx": n_ctx}, "chat_template": template})),
            images: None,
        }
    }

    fn provider_and_window(settings: &Settings) -> (String, Option<u64>, bool) {
        let ModelSettings::Remote(config) = &settings.model else { panic!("a server model") };
        (config.provider.clone(), config.context_window, config.text_tool_calls)
    }

    /// A llama-server whose template writes `<tool_call>` at a custom address gets the
    /// templated route, the window it runs with, and the aids of its size; the settings
    /// it was fitted from are unchanged.
    #[test]
    fn a_llama_server_decides_provider_window_route_and_profile() {
        let configured = custom_server(Layer::default());
        let fitted = configured.clone().fitted_to_server(&llama_cpp("{{ '<tool_call>' }}", 4096));
        assert_eq!(provider_and_window(&fitted), ("llamacpp".into(), Some(4096), true));
        assert_eq!(fitted.layer.grammar, Some(true));
        assert!(fitted.templated());
        assert!(fitted.tool_first && fitted.always_call, "the templated route constrains calls");
        assert_eq!(fitted.tool_profile, keel_tools::profile::ToolProfile::Small);
        assert!(!configured.templated() && configured.layer.grammar.is_none());

        let bare = configured.clone().fitted_to_server(&llama_cpp("{{ messages }}", 8192));
        assert_eq!(bare.layer.grammar, Some(false));
        assert!(!bare.templated() && !bare.tool_first && !bare.always_call);
    }

    /// What the config sets wins over what the server tells.
    #[test]
    fn configured_settings_win_over_the_servers_answer() {
        let layer = Layer {
            context_window: Some(2048),
            grammar: Some(false),
            tool_first: Some(true),
            text_tool_calls: Some(false),
            ..Layer::default()
        };
        let fitted = custom_server(layer).fitted_to_server(&llama_cpp("<tool_call>", 4096));
        assert_eq!(provider_and_window(&fitted), ("llamacpp".into(), Some(2048), false));
        assert!(!fitted.templated() && fitted.tool_first && !fitted.always_call);
    }

    /// A server that is not llama.cpp keeps its provider and route.
    #[test]
    fn another_server_keeps_its_route() {
        let facts = ModelFacts { context_window: Some(32_768), ..ModelFacts::default() };
        let fitted = custom_server(Layer::default()).fitted_to_server(&facts);
        assert_eq!(provider_and_window(&fitted), ("custom".into(), Some(32_768), false));
        assert!(!fitted.templated() && fitted.layer.grammar.is_none());
    }
}
