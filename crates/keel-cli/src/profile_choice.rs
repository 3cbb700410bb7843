//! Which harness profile a model gets, from what is known of the model itself (its
//! server's answer, else its name), not from the provider preset's name: a 70B model
//! behind vLLM gets the full profile, a 1.5B model behind any `--base-url` the small one.

use keel_llm::facts::ModelFacts;
use keel_tools::profile::ToolProfile;

/// Models under this many billion parameters get the small profile.
pub const SMALL_BELOW_BILLIONS: f64 = 10.0;

/// A profile and why it was chosen (shown at start and by `/model`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileChoice {
    /// The profile.
    pub profile: ToolProfile,
    /// Why: `set in the config`, `1.5B parameters (the server's model list)`…
    pub why: String,
}

/// The profile for a model: the configured one (`set`), else the one its size calls for,
/// else, when nothing tells its size, the small one on a local server's preset and the
/// full one elsewhere.
pub fn choose(set: Option<ToolProfile>, facts: &ModelFacts, local_preset: bool) -> ProfileChoice {
    if let Some(profile) = set {
        return ProfileChoice { profile, why: "set in the config".into() };
    }
    match facts.billions {
        Some(billions) => ProfileChoice {
            profile: if billions < SMALL_BELOW_BILLIONS { ToolProfile::Small } else { ToolProfile::Full },
            why: format!("{} parameters ({})", size_text(billions), facts.size_source.unwrap_or("known")),
        },
        None if local_preset => ProfileChoice {
            profile: ToolProfile::Small,
            why: "a local server's model of unknown size".into(),
        },
        None => ProfileChoice { profile: ToolProfile::Full, why: "the model's size is unknown".into() },
    }
}

/// `1.5B`, `70B`, `494M`.
fn size_text(billions: f64) -> String {
    if billions < 1.0 {
        format!("{:.0}M", billions * 1000.0)
    } else if billions < 10.0 {
        format!("{:.1}B", billions).replace(".0B", "B")
    } else {
        format!("{billions:.0}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_decides_and_a_setting_overrides() {
        let named = |name: &str| ModelFacts::from_name(name);
        let small = choose(None, &named("qwen2.5-coder:1.5b"), false);
        assert_eq!(
            small,
            ProfileChoice { profile: ToolProfile::Small, why: "1.5B parameters (the model's name)".into() }
        );
        assert_eq!(choose(None, &named("llama3.1:70b"), true).profile, ToolProfile::Full);
        assert_eq!(choose(None, &named("default"), true).profile, ToolProfile::Small);
        assert_eq!(choose(None, &named("deepseek-chat"), false).profile, ToolProfile::Full);
        let set = choose(Some(ToolProfile::Full), &named("qwen2.5-coder:0.5b"), true);
        assert_eq!(set, ProfileChoice { profile: ToolProfile::Full, why: "set in the config".into() });
        let counted = ModelFacts {
            billions: Some(0.494),
            size_source: Some("Ollama's model details"),
            ..ModelFacts::default()
        };
        assert_eq!(choose(None, &counted, false).why, "494M parameters (Ollama's model details)");
    }
}
