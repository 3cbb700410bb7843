//! What a server says about the model it serves: its size and the context window it
//! runs it with. keel sizes the harness (the small or full profile) and compaction by
//! these, so a model gets the same treatment whichever preset or `--base-url` reaches it.
//!
//! Asked where servers tell: llama.cpp (`/props`: context per slot, the model file's
//! name; `/v1/models`: `meta.n_params`), Ollama (`/api/show`: parameter count, the
//! `num_ctx` it runs with), vLLM (`/v1/models`: `max_model_len`). Every answer is bounded
//! in size and time; a server that says nothing leaves the facts empty.

use std::time::Duration;

use serde_json::Value;

#[cfg(feature = "http")]
use crate::config::ProviderConfig;

/// Largest answer read from any one of the questions.
const ANSWER_LIMIT: usize = 4 * 1024 * 1024;
/// How long all the questions together may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// The context Ollama runs a model with when its Modelfile sets no `num_ctx`.
pub const OLLAMA_DEFAULT_CONTEXT: u64 = 4096;

/// What is known of a model: from its server, else from its name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelFacts {
    /// Parameters, in billions.
    pub billions: Option<f64>,
    /// The context window the server runs the model with, in tokens.
    pub context_window: Option<u64>,
    /// Where the size came from (`"llama.cpp /v1/models"`, `"the model's name"`…).
    pub size_source: Option<&'static str>,
    /// llama.cpp's `/props` answer (its chat template decides keel's route).
    pub props: Option<Value>,
    /// Whether the model takes images, when the server says (llama.cpp's
    /// `modalities.vision`, Ollama's `capabilities`).
    pub images: Option<bool>,
}

impl ModelFacts {
    /// The facts a model's name states: its size (`qwen2.5-coder:1.5b`, `Llama-3.1-70B`,
    /// `mixtral:8x7b`).
    pub fn from_name(name: &str) -> ModelFacts {
        let billions = billions_from_name(name);
        ModelFacts { billions, size_source: billions.map(|_| "the model's name"), ..ModelFacts::default() }
    }

    /// These facts, with what `other` knows filling what these lack.
    pub fn or(self, other: ModelFacts) -> ModelFacts {
        let (billions, size_source) = match self.billions {
            Some(b) => (Some(b), self.size_source),
            None => (other.billions, other.size_source),
        };
        ModelFacts {
            billions,
            size_source,
            context_window: self.context_window.or(other.context_window),
            props: self.props.or(other.props),
            images: self.images.or(other.images),
        }
    }
}

/// Billions of parameters a model's name states: the number before a `b` that ends a
/// name part, the last such part (`1.5b`, `7B`, `70b`; `8x7b` counts 56). `None` when
/// no part says.
pub fn billions_from_name(name: &str) -> Option<f64> {
    let name = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let name = name.strip_suffix(".gguf").unwrap_or(&name);
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

/// Whether a `/props` answer is llama.cpp's (its generation settings and slots).
pub fn is_llama_cpp(props: &Value) -> bool {
    props.get("default_generation_settings").is_some_and(Value::is_object)
}

/// `n_ctx` from a llama.cpp `/props` answer (per slot, where the server says so).
pub fn props_context_window(props: &Value) -> Option<u64> {
    props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
}

/// The facts in a llama.cpp `/props` answer: the context per slot, and the size the
/// model file's name states.
pub fn from_props(props: &Value) -> ModelFacts {
    let named =
        props.get("model_path").and_then(Value::as_str).map(ModelFacts::from_name).unwrap_or_default();
    let images = props.pointer("/modalities/vision").and_then(Value::as_bool);
    ModelFacts { context_window: props_context_window(props), images, ..named }
}

/// The facts in a `/v1/models` answer about `model`: llama.cpp's `meta.n_params`,
/// vLLM's `max_model_len`. A server that lists one model serves it under any name
/// (llama.cpp), so a lone entry counts whatever its id.
pub fn from_models_list(list: &Value, model: &str) -> ModelFacts {
    let Some(entries) = list.get("data").and_then(Value::as_array) else { return ModelFacts::default() };
    let entry = entries
        .iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .or(if entries.len() == 1 { entries.first() } else { None });
    let Some(entry) = entry else { return ModelFacts::default() };
    let n_params = entry.pointer("/meta/n_params").and_then(Value::as_f64).filter(|n| *n > 0.0);
    let billions = n_params.map(|n| n / 1e9);
    let context_window = entry.get("max_model_len").and_then(Value::as_u64).filter(|n| *n > 0);
    let size_source = if billions.is_some() { Some("the server's model list") } else { None };
    ModelFacts { billions, context_window, size_source, props: None, images: None }
}

/// The facts in an Ollama `/api/show` answer: the parameter count, and the context it
/// runs the model with (`num_ctx` from the Modelfile's parameters, else Ollama's default
/// [`OLLAMA_DEFAULT_CONTEXT`], never more than the model was trained for).
pub fn from_ollama_show(show: &Value) -> ModelFacts {
    let info = show.get("model_info");
    let count =
        info.and_then(|i| i.get("general.parameter_count")).and_then(Value::as_f64).filter(|n| *n > 0.0);
    let stated = show.pointer("/details/parameter_size").and_then(Value::as_str).and_then(parse_size);
    let billions = count.map(|n| n / 1e9).or(stated);
    let trained = info.and_then(Value::as_object).and_then(|map| {
        map.iter().find(|(key, _)| key.ends_with(".context_length")).and_then(|(_, v)| v.as_u64())
    });
    let configured = show.get("parameters").and_then(Value::as_str).and_then(|text| {
        text.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u64>().ok()).flatten()
        })
    });
    // Only an answer that is Ollama's says anything about Ollama's default.
    let is_ollama = info.is_some() || show.get("details").is_some();
    let window = configured.or(is_ollama.then_some(OLLAMA_DEFAULT_CONTEXT));
    let context_window = match (window, trained) {
        (Some(w), Some(t)) => Some(w.min(t)),
        (w, _) => w,
    }
    .filter(|n| *n > 0);
    let size_source = if billions.is_some() { Some("Ollama's model details") } else { None };
    // Ollama lists what a model can do as capability ids (`completion`, `tools`, `vision`).
    let images = show
        .get("capabilities")
        .and_then(Value::as_array)
        .map(|caps| caps.iter().any(|c| c.as_str() == Some("vision")));
    ModelFacts { billions, context_window, size_source, props: None, images }
}

/// `1.5B`, `494.03M`, `70B` → billions.
fn parse_size(text: &str) -> Option<f64> {
    let text = text.trim().to_ascii_lowercase();
    let (number, scale) = if let Some(n) = text.strip_suffix('b') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 1e-3)
    } else {
        return None;
    };
    number.trim().parse::<f64>().ok().map(|n| n * scale).filter(|b| b.is_finite() && *b > 0.0)
}

/// Asks the server behind `config` what it knows of its model, within two seconds in
/// all: llama.cpp's `/props` and Ollama's `/api/show` on plain-HTTP servers (local ones),
/// `{base}/models` on any. What the server does not say is left empty; the name's
/// facts are not added here (see [`ModelFacts::or`]).
#[cfg(feature = "http")]
pub async fn ask_server(config: &ProviderConfig) -> ModelFacts {
    let base = config.base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base).to_owned();
    let local = root.starts_with("http://");
    let Ok(client) = crate::transport::http_client(base, ASK_TIMEOUT).build() else {
        return ModelFacts::default();
    };
    let headers = crate::transport::headers(config, crate::transport::Auth::Bearer, &[]).unwrap_or_default();
    let props = async {
        if !local {
            return None;
        }
        get_json(client.get(format!("{root}/props"))).await
    };
    let models = get_json(client.get(format!("{base}/models")).headers(headers));
    let show = async {
        if !local {
            return None;
        }
        let body = serde_json::json!({ "model": config.model, "name": config.model });
        let request = client
            .post(format!("{root}/api/show"))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        get_json(request).await
    };
    let all = async { tokio::join!(props, models, show) };
    let Ok((props, models, show)) = tokio::time::timeout(ASK_TIMEOUT, all).await else {
        return ModelFacts::default();
    };
    let from_props = props.as_ref().map(from_props).unwrap_or_default();
    let from_list = models.as_ref().map(|m| from_models_list(m, &config.model)).unwrap_or_default();
    let from_show = show.as_ref().map(from_ollama_show).unwrap_or_default();
    // The size a server counts beats the one a file name states; the context a server
    // runs with beats what the model was trained for.
    let facts = ModelFacts {
        billions: from_list.billions.or(from_show.billions).or(from_props.billions),
        size_source: from_list.size_source.or(from_show.size_source).or(from_props.size_source),
        context_window: from_props.context_window.or(from_show.context_window).or(from_list.context_window),
        props: None,
        images: from_props.images.or(from_show.images),
    };
    ModelFacts { props, ..facts }
}

/// The JSON a request answers with, if it succeeds with at most [`ANSWER_LIMIT`] bytes.
#[cfg(feature = "http")]
async fn get_json(request: reqwest::RequestBuilder) -> Option<Value> {
    let mut response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        body.extend_from_slice(&chunk);
        if body.len() > ANSWER_LIMIT {
            return None;
        }
    }
    serde_json::from_slice(&body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_are_read_from_names_as_servers_spell_them() {
        let cases = [
            ("qwen2.5-coder:1.5b", Some(1.5)),
            ("Qwen/Qwen2.5-Coder-7B-Instruct", Some(7.0)),
            ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", Some(1.5)),
            ("/models/Qwen2.5-Coder-0.5B-Instruct.Q8_0.gguf", Some(0.5)),
            ("llama3.1:70b", Some(70.0)),
            ("mixtral:8x7b", Some(56.0)),
            ("deepseek-chat", None),
            ("gpt-4o-mini", None),
            ("default", None),
        ];
        for (name, billions) in cases {
            assert_eq!(billions_from_name(name), billions, "{name}");
        }
    }

    #[test]
    fn llama_cpp_answers_give_the_slot_context_and_the_counted_size() {
        let props = json!({
            "default_generation_settings": {"n_ctx": 8192, "params": {}},
            "total_slots": 1,
            "model_path": "/root/.cache/keel/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        });
        assert_eq!(
            from_props(&props),
            ModelFacts {
                billions: Some(1.5),
                context_window: Some(8192),
                size_source: Some("the model's name"),
                props: None,
                images: None,
            }
        );
        assert!(is_llama_cpp(&props));
        assert!(!is_llama_cpp(&json!({"n_ctx": 4096})));
        assert_eq!(props_context_window(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(props_context_window(&json!("<html>")), None);
        assert_eq!(props_context_window(&json!({"n_ctx": 0})), None);
        let list = json!({"object": "list", "data": [{
            "id": "default", "object": "model",
            "meta": {"n_params": 1_543_714_304u64, "n_ctx_train": 32768}
        }]});
        let facts = from_models_list(&list, "anything");
        assert_eq!(facts.size_source, Some("the server's model list"));
        assert!(facts.billions.is_some_and(|b| (b - 1.54).abs() < 0.01), "{facts:?}");
        assert_eq!(facts.context_window, None);
    }

    #[test]
    fn vllm_lists_the_context_it_serves_with() {
        let list = json!({"data": [
            {"id": "meta-llama/Llama-3.1-70B-Instruct", "max_model_len": 65536},
            {"id": "other", "max_model_len": 4096}
        ]});
        let facts = from_models_list(&list, "meta-llama/Llama-3.1-70B-Instruct");
        assert_eq!(facts.context_window, Some(65536));
        assert_eq!(facts.billions, None);
        // Several models and none by this name: nothing is claimed.
        assert_eq!(from_models_list(&list, "missing"), ModelFacts::default());
        assert_eq!(from_models_list(&json!({"error": "no"}), "x"), ModelFacts::default());
    }

    #[test]
    fn ollama_details_give_the_count_and_the_context_it_runs_with() {
        let show = json!({
            "details": {"parameter_size": "1.5B", "family": "qwen2"},
            "model_info": {"general.parameter_count": 1_543_714_304u64, "qwen2.context_length": 32768},
            "parameters": "stop \"<|im_end|>\"\nnum_ctx 8192",
        });
        let facts = from_ollama_show(&show);
        assert!(facts.billions.is_some_and(|b| (b - 1.54).abs() < 0.01), "{facts:?}");
        assert_eq!(facts.context_window, Some(8192));
        // No num_ctx: Ollama's default, within what the model was trained for.
        let plain =
            json!({"details": {"parameter_size": "494.03M"}, "model_info": {"qwen2.context_length": 32768}});
        let facts = from_ollama_show(&plain);
        assert_eq!(facts.context_window, Some(OLLAMA_DEFAULT_CONTEXT));
        assert!(facts.billions.is_some_and(|b| (b - 0.494).abs() < 0.001), "{facts:?}");
        // Not Ollama's answer: nothing.
        assert_eq!(from_ollama_show(&json!({"error": "not found"})), ModelFacts::default());
    }

    #[test]
    fn the_first_facts_win_and_the_others_fill_gaps() {
        let server = ModelFacts { context_window: Some(8192), ..ModelFacts::default() };
        let named = ModelFacts::from_name("qwen2.5-coder:7b");
        let both = server.or(named);
        assert_eq!(both.billions, Some(7.0));
        assert_eq!(both.size_source, Some("the model's name"));
        assert_eq!(both.context_window, Some(8192));
    }
}
