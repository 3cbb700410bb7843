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

/// Largest `/props` answer read (llama.cpp's is a few KB).
#[cfg(feature = "http")]
const PROPS_LIMIT: usize = 256 * 1024;

/// Asks a local llama.cpp server (plain `http://`) for its `/props` (`{base without
/// /v1}/props`), within two seconds: context size, chat template, special tokens. `None`
/// when it does not answer with JSON (another kind of server, an error, a body over
/// 256 KiB).
#[cfg(feature = "http")]
pub async fn server_props(base_url: &str) -> Option<serde_json::Value> {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    // Local servers only: plain HTTP, no certificates to load.
    if !root.starts_with("http://") {
        return None;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().tls_certs_only(Vec::new()).build().ok()?;
    let ask = async {
        let mut response = client.get(format!("{root}/props")).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            body.extend_from_slice(&chunk);
            if body.len() > PROPS_LIMIT {
                return None;
            }
        }
        serde_json::from_slice(&body).ok()
    };
    tokio::time::timeout(std::time::Duration::from_secs(2), ask).await.ok().flatten()
}

/// `n_ctx` from a llama.cpp `/props` answer (per slot, where the server says so).
pub fn props_context_window(props: &serde_json::Value) -> Option<u64> {
    props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n > 0)
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

    #[test]
    fn llama_cpp_props_give_the_slot_context() {
        let props = serde_json::json!({"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 1});
        assert_eq!(props_context_window(&props), Some(8192));
        assert_eq!(props_context_window(&serde_json::json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(props_context_window(&serde_json::json!("<html>")), None);
        assert_eq!(props_context_window(&serde_json::json!({"n_ctx": 0})), None);
    }
}
