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
    // The plan tool as recorded, unless the configuration sets it.
    if let Some(header) = header.filter(|_| settings.layer.plan_tool.is_none()) {
        settings.plan_tool = header.tools.iter().any(|t| t.name == keel_tools::plan::UpdatePlan::NAME);
    }
    settings.follow_route(constrained || local);
    Ok((settings, recorded))
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
