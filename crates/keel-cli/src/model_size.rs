//! Which harness profile a model gets, from the model itself: its size, as its name
//! states it (`qwen2.5-coder:1.5b`, `Qwen2.5-Coder-7B-Instruct`, `llama3.1:70b`), not
//! from the provider preset's name: a 70B model behind vLLM gets the full profile, a 1.5B model
//! behind any `--base-url` the small one.

use keel_tools::profile::ToolProfile;

/// Models under this many billion parameters get the small profile.
const SMALL_BELOW_BILLIONS: f64 = 10.0;

/// Billions of parameters a model's name states: the number before a `b` that ends a
/// name part, the last such part (`1.5b`, `7B`, `70b`; `8x7b` counts 56). `None` when
/// no part says.
pub fn billions_from_name(name: &str) -> Option<f64> {
    let name = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    name.rsplit(['-', '_', ':', ' ', '@'])
        .filter_map(|part| {
            let number = part.strip_suffix('b')?;
            match number.split_once('x') {
                Some((experts, each)) => Some(experts.parse::<f64>().ok()? * each.parse::<f64>().ok()?),
                None => number.parse::<f64>().ok(),
            }
        })
        .find(|b| b.is_finite() && *b > 0.0)
}

/// The profile for a model of `billions` parameters.
pub fn profile_for(billions: f64) -> ToolProfile {
    if billions < SMALL_BELOW_BILLIONS { ToolProfile::Small } else { ToolProfile::Full }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_from_names_as_servers_spell_them() {
        let cases = [
            ("qwen2.5-coder:1.5b", Some(1.5)),
            ("Qwen/Qwen2.5-Coder-7B-Instruct", Some(7.0)),
            ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", Some(1.5)),
            ("llama3.1:70b", Some(70.0)),
            ("mixtral:8x7b", Some(56.0)),
            ("deepseek-chat", None),
            ("gpt-4o-mini", None),
            ("claude-sonnet-4-6", None),
        ];
        for (name, billions) in cases {
            assert_eq!(billions_from_name(name), billions, "{name}");
        }
        assert_eq!(profile_for(1.5), ToolProfile::Small);
        assert_eq!(profile_for(70.0), ToolProfile::Full);
    }
}
