//! Context windows of well-known models, for sessions that must fit them.

/// Model-name prefixes and their context windows in tokens. The first match wins, so
/// longer prefixes come first. A configured `context_window` always takes precedence.
const KNOWN: &[(&str, u64)] = &[
    ("deepseek-", 128_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-", 200_000),
    ("anthropic/claude-", 200_000),
    ("openai/gpt-5", 400_000),
    ("deepseek/deepseek-", 128_000),
    ("qwen2.5-coder", 32_768),
    ("qwen/qwen-2.5-coder", 32_768),
];

/// The context window of `model` if it is a well-known one (matched by name prefix,
/// case-insensitively); `None` otherwise.
pub fn known_context_window(model: &str) -> Option<u64> {
    let model = model.to_ascii_lowercase();
    KNOWN.iter().find(|(prefix, _)| model.starts_with(prefix)).map(|(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_have_windows_and_others_none() {
        assert_eq!(known_context_window("deepseek-chat"), Some(128_000));
        assert_eq!(known_context_window("claude-sonnet-4-6"), Some(200_000));
        assert_eq!(known_context_window("GPT-5-mini"), Some(400_000));
        assert_eq!(known_context_window("qwen2.5-coder:7b"), Some(32_768));
        assert_eq!(known_context_window("my-finetune"), None);
    }
}
