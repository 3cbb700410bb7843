//! The settings a replay runs with: the user's configuration now (flags, environment,
//! config file: the setup a replay tests), with the recorded model in place of the
//! configured one. Nothing is asked of a server: what the session's server told of its
//! model is read from the recording instead (the profile in its request header, and the
//! constrained route when its tools had `answer`). The sandbox and its network are the
//! configuration's: they decide which tools are offered (`web_fetch` with the network),
//! so changing them would change the requests.

use keel_llm::{ModelInfo, Preset};
use keel_session::RequestHeader;
use keel_tools::profile::ToolProfile;

use crate::cli::Cli;
use crate::config::{ConfigError, Settings};

/// The base URL given to a recorded custom server: never contacted (the log answers).
const NOWHERE: &str = "http://replay.invalid/v1";

/// The settings for replaying a session whose first request header is `header`, and the
/// model the replay's requests are made to.
pub fn resolve(cli: &Cli, header: Option<&RequestHeader>) -> Result<(Settings, ModelInfo), ConfigError> {
    let file = crate::config::load_file()?;
    let (mut layer, profile_name) = crate::config::layer::layers(cli, &file)?;
    let recorded = header.map_or_else(
        || ModelInfo { provider: "custom".into(), model: "replay".into() },
        |h| ModelInfo { provider: h.provider.clone(), model: h.model.clone() },
    );
    let preset = Preset::find(&recorded.provider);
    let local = recorded.provider == "local";
    layer.provider = Some(match preset {
        Some(preset) => preset.name.to_owned(),
        None if local => "llamacpp".to_owned(),
        None => "custom".to_owned(),
    });
    if preset.is_none() && !local {
        layer.base_url = Some(layer.base_url.unwrap_or_else(|| NOWHERE.to_owned()));
    }
    layer.model = Some(recorded.model.clone());
    // The key is never used: no request leaves.
    layer.api_key = Some(layer.api_key.unwrap_or_else(|| "replay".to_owned()));
    let constrained = header.is_some_and(|h| h.tools.iter().any(|t| t.name == "answer"));
    let recorded_profile = header
        .and_then(|h| h.profile.as_deref())
        .and_then(|p| p.split(':').next())
        .and_then(|p| ToolProfile::parse(p.trim()));
    let profile_set = layer.tool_profile.is_some();
    let rules = crate::permissions::configured(&file, profile_name.as_deref());
    let mut settings = crate::config::settings_from(layer, file.pricing, profile_name, true)?;
    settings.rules = rules;
    // The recorded profile, unless the configuration sets one.
    let facts = keel_llm::facts::ModelFacts::from_name(&recorded.model);
    let local_preset = local || preset.is_some_and(|p| p.local);
    settings.fit_profile(&facts, local_preset);
    if let Some(profile) = recorded_profile.filter(|_| !profile_set) {
        settings.tool_profile = profile;
        settings.follow_profile();
        settings.profile_why = "as recorded".to_owned();
    }
    plan_tool_as_recorded(&mut settings, header);
    settings.follow_route(constrained || local);
    Ok((settings, recorded))
}

/// The plan tool offered as in the recorded requests, unless the configuration sets it.
fn plan_tool_as_recorded(settings: &mut Settings, header: Option<&RequestHeader>) {
    if let Some(header) = header.filter(|_| settings.layer.plan_tool.is_none()) {
        settings.plan_tool = header.tools.iter().any(|t| t.name == keel_tools::plan::UpdatePlan::NAME);
    }
}

/// The context window the recorded model had, as far as keel knows it without asking
/// its server: the configured one, the table of known models, the embedded model's
/// default context.
pub fn window(settings: &Settings, model: &ModelInfo) -> Option<u64> {
    settings
        .compaction
        .window
        .or_else(|| keel_llm::known_context_window(&model.model))
        .or((model.provider == "local").then_some(8192))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Layer;

    fn settings(plan_tool: Option<bool>, model: &str) -> Settings {
        let layer = Layer {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            model: Some(model.into()),
            plan_tool,
            ..Layer::default()
        };
        crate::config::settings_from(layer, std::collections::BTreeMap::new(), None, false).unwrap()
    }

    fn header(tools: &[&str]) -> RequestHeader {
        let definition = |name: &str| keel_llm::ToolDefinition {
            name: name.to_owned(),
            description: String::new(),
            parameters: serde_json::value::RawValue::from_string("{}".to_owned()).unwrap(),
        };
        RequestHeader {
            provider: "custom".into(),
            model: "m".into(),
            system_prompt: String::new(),
            tools: tools.iter().map(|name| definition(name)).collect(),
            profile: None,
        }
    }

    /// A session recorded with update_plan replays with it, one recorded without it
    /// replays without it, whatever the profile's default; the configuration wins.
    #[test]
    fn the_plan_tool_is_offered_as_recorded_unless_configured() {
        let offered = |mut settings: Settings, tools: &[&str]| {
            plan_tool_as_recorded(&mut settings, Some(&header(tools)));
            settings.plan_tool
        };
        let small = "qwen2.5-coder-1.5b-instruct";
        assert!(offered(settings(None, small), &["shell", "update_plan"]));
        assert!(!offered(settings(None, "gpt-5"), &["shell"]));
        assert!(!offered(settings(Some(false), small), &["shell", "update_plan"]));
        let mut unchanged = settings(None, "gpt-5");
        plan_tool_as_recorded(&mut unchanged, None);
        assert!(unchanged.plan_tool);
    }
}
