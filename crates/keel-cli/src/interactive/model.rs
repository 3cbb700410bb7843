//! `/model`: the model in use and the ones its server lists, and switching to another.

use std::sync::Arc;

use crate::config::{ModelSettings, Settings};
use crate::setup;

use super::Repl;

/// What to say when the server's list (`names`, empty when it lists none) lacks `model`.
fn unlisted(model: &str, names: &[String]) -> Option<String> {
    if names.is_empty() || names.iter().any(|n| n == model) {
        return None;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let near = match crate::near::nearest(model, &names) {
        Some(near) => format!(" (did you mean {near}?)"),
        None => String::new(),
    };
    Some(format!(
        "note: the server does not list `{model}`{near}; switching anyway (/model lists its models)"
    ))
}

/// The server a model runs on (`None`: the embedded model).
pub(super) fn server(settings: &Settings) -> Option<&keel_llm::ProviderConfig> {
    match &settings.model {
        ModelSettings::Remote(config) => Some(config.as_ref()),
        ModelSettings::Local(_) => None,
    }
}

impl Repl {
    /// `/model`: the current model, and the ones its server offers (`GET /models`) to
    /// switch to with `/model NAME`.
    pub(super) async fn show_models(&self) {
        let config = match &self.settings.model {
            ModelSettings::Remote(config) => config.clone(),
            ModelSettings::Local(_) => {
                self.say(&format!(
                    "model: {} (local; --local-model PATH at start)",
                    self.settings.model_name()
                ));
                return;
            }
        };
        self.say(&format!("model: {} ({})", config.model, config.provider));
        match keel_llm::list_models(&config).await {
            Ok(names) if names.is_empty() => self.say("the server lists no models"),
            Ok(names) => {
                self.models.learned(&config, &names);
                let shown: Vec<&str> = names.iter().take(60).map(String::as_str).collect();
                let more = names.len().saturating_sub(shown.len());
                let more = if more > 0 { format!(" … and {more} more") } else { String::new() };
                self.say(&format!(
                    "available: {}{more}
/model NAME switches",
                    shown.join(", ")
                ));
            }
            Err(e) => self.say(&format!("cannot list the server's models: {}", e.message)),
        }
    }

    /// `/model ARG` (see [`Settings::switch_model`]): the next request goes to that
    /// model, with the profile its size calls for: the agent (prompt, tools, the aids and
    /// the model the tools ask) is built again for it, keeping the permission rules
    /// "always" added. What only the old model can read (signed thinking, encrypted
    /// reasoning) stays in the log and is not sent to the new one.
    pub(super) async fn switch_model(&mut self, arg: &str) {
        if let ModelSettings::Local(_) = &self.settings.model {
            return self.say("the local model is chosen at start (--local-model PATH)");
        }
        let config = match self.settings.switch_model(arg) {
            Ok(config) => config,
            Err(e) => return self.say(&format!("cannot switch: {e}")),
        };
        // A server that lists its models is asked; a name it does not list is likely a
        // typo (or an alias it still takes): said, not refused.
        if let Ok(names) = keel_llm::list_models(&config).await {
            self.models.learned(&config, &names);
            if let Some(note) = unlisted(&config.model, &names) {
                self.say(&note);
            }
        }
        let mut next = self.settings.clone();
        next.model = ModelSettings::Remote(Box::new(config));
        let client = match setup::model(&mut next, false).await {
            Ok(client) => client,
            Err(e) => return self.say(&format!("cannot switch: {e}")),
        };
        let (agent, _notes) =
            setup::agent_in(self.store.as_ref(), &next, &self.workspace, Arc::clone(&self.policy), client);
        self.agent = agent;
        self.settings = next;
        self.ctx.model = None;
        self.models.serve(server(&self.settings));
        if let ModelSettings::Remote(config) = &self.settings.model {
            self.say(&format!(
                "model: {} ({}, {} API) · profile {} ({})",
                config.model,
                config.provider,
                config.api.as_str(),
                self.settings.tool_profile.as_str(),
                self.settings.profile_why
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    /// Issue 32, item 8: `/model NAME` checks the server's list when it has one.
    #[test]
    fn a_model_the_server_does_not_list_is_said_with_the_nearest() {
        let names = vec!["qwen2.5-coder:1.5b".to_owned(), "llama3.2:3b".to_owned()];
        assert_eq!(
            super::unlisted("qwen2.5-coder:1.5", &names).as_deref(),
            Some(
                "note: the server does not list `qwen2.5-coder:1.5` (did you mean qwen2.5-coder:1.5b?); switching anyway (/model lists its models)"
            )
        );
        assert_eq!(super::unlisted("llama3.2:3b", &names), None);
        assert_eq!(super::unlisted("anything", &[]), None, "a server that lists nothing is not asked");
    }
}
