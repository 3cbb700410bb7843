//! llama.cpp's own server (`llama-server`) driven the way the embedded engine is: keel
//! renders the model's chat template itself (read once from `/props`, mended like the
//! embedded one), constrains a required tool call with its grammar, and posts the prompt
//! to the native `/completion` endpoint. Over Chat Completions the server neither honours
//! `tool_choice: "required"` for Qwen2.5 nor accepts a grammar together with tools, so a
//! small model there wrote prose and fenced calls; here its calls are valid by
//! construction, as with `--local`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use keel_llm::{
    FinishReason, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo, ModelRequest, ModelStream,
    ProviderConfig, ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::grammar::{self, CallStyle};
use crate::reply::{Finished, finish_message};
use crate::template::ChatTemplate;

/// Most bytes of `/props` read (the chat template is in it).
const MAX_PROPS_BYTES: usize = 1024 * 1024;
/// Most bytes of one `/completion` response read.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// How long `/props` may take.
const PROPS_TIMEOUT: Duration = Duration::from_secs(10);

/// What `/props` tells once: the template and how calls are written.
struct Prepared {
    template: ChatTemplate,
    style: CallStyle,
}

/// A `ModelClient` for llama-server's `/completion` with keel's template and grammar.
pub struct TemplatedServer {
    http: reqwest::Client,
    /// The server's root (the base URL without `/v1`).
    root: String,
    config: ProviderConfig,
    prepared: tokio::sync::OnceCell<Prepared>,
    grammars: Mutex<Option<(Vec<ToolDefinition>, Arc<str>)>>,
    seed: Option<u64>,
}

/// Temperature inside a required call, as the embedded engine's `call_temperature`:
/// names, paths and commands want the likeliest tokens.
pub const CALL_TEMPERATURE: f32 = 0.2;

impl TemplatedServer {
    /// A client for the server at `config.base_url` (with or without `/v1`); nothing is
    /// asked of the server until the first request.
    pub fn new(config: ProviderConfig) -> Result<TemplatedServer, ModelError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().connect_timeout(config.idle_timeout).build().map_err(|e| {
            ModelError::new(ModelErrorKind::Config, format!("cannot build the HTTP client: {e}"))
        })?;
        let base = config.base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base).to_owned();
        Ok(TemplatedServer {
            http,
            root,
            config,
            prepared: tokio::sync::OnceCell::new(),
            grammars: Mutex::new(None),
            seed: None,
        })
    }

    /// Sends `seed` with every request (runs can be repeated).
    pub fn seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// Reads the chat template and special tokens from `/props`.
    async fn prepare(&self) -> Result<&Prepared, ModelError> {
        self.prepared
            .get_or_try_init(|| async {
                let url = format!("{}/props", self.root);
                let request = self.http.get(&url).timeout(PROPS_TIMEOUT);
                let body = read_capped(request, MAX_PROPS_BYTES, &url).await?;
                let props: Value = serde_json::from_slice(&body).map_err(|e| {
                    ModelError::new(ModelErrorKind::InvalidResponse, format!("{url} is not JSON: {e}"))
                })?;
                let text = |key: &str| props.get(key).and_then(Value::as_str).unwrap_or("");
                let source = text("chat_template");
                if source.trim().is_empty() {
                    return Err(ModelError::new(
                        ModelErrorKind::Config,
                        format!(
                            "{url} names no chat_template; start llama-server with --jinja, or set grammar = false"
                        ),
                    ));
                }
                let template =
                    ChatTemplate::new(&crate::template::mend(source), text("bos_token"), text("eos_token"))
                        .map_err(|e| ModelError::new(ModelErrorKind::Config, e.to_string()))?;
                Ok(Prepared { template, style: CallStyle::of_template(source) })
            })
            .await
    }

    /// The one-call grammar for `tools`, built once per tool set.
    fn grammar_for(&self, tools: &[ToolDefinition], style: CallStyle) -> Option<Arc<str>> {
        let mut cache = self.grammars.lock().ok()?;
        if let Some((cached, text)) = cache.as_ref()
            && cached.as_slice() == tools
        {
            return Some(Arc::clone(text));
        }
        let text: Arc<str> = Arc::from(grammar::tool_calls(tools, style, 1, 0)?);
        *cache = Some((tools.to_vec(), Arc::clone(&text)));
        Some(text)
    }

    /// One request, whole: render, post, parse.
    async fn complete(&self, request: &ModelRequest<'_>) -> Result<keel_llm::AssistantMessage, ModelError> {
        let prepared = self.prepare().await?;
        let prompt = prepared
            .template
            .render(request.system, request.messages, request.tools)
            .map_err(|e| ModelError::new(ModelErrorKind::Config, e.to_string()))?;
        let tools: Vec<String> = match request.tool_choice {
            ToolChoice::None => Vec::new(),
            _ => request.tools.iter().map(|t| t.name.clone()).collect(),
        };
        let mut body = json!({
            "prompt": prompt,
            "n_predict": request.token_cap(self.config.max_tokens),
            "cache_prompt": true,
            "stream": false,
        });
        if let Some(seed) = self.seed {
            body["seed"] = json!(seed);
        }
        // A required call is sampled under the grammar from the first token, at the call
        // temperature unless one is configured; otherwise the reply is free (the server's
        // sampling) and calls written as text are still recovered.
        let grammar = match request.tool_choice {
            ToolChoice::Required => self.grammar_for(request.tools, prepared.style),
            _ => None,
        };
        let temperature =
            request.temperature.or(self.config.temperature).or(grammar.as_ref().map(|_| CALL_TEMPERATURE));
        if let Some(temperature) = temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(grammar) = grammar {
            body["grammar"] = json!(&*grammar);
        }
        let url = format!("{}/completion", self.root);
        let post = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .timeout(self.config.response_deadline);
        let bytes = read_capped(post, MAX_RESPONSE_BYTES, &url).await?;
        let reply: Value = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!("{url} answered with something not JSON: {e}"),
            )
        })?;
        let Some(content) = reply.get("content").and_then(Value::as_str) else {
            return Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!("{url} answered without content"),
            ));
        };
        let count = |key: &str| reply.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cut = reply.get("stop_type").and_then(Value::as_str) == Some("limit");
        let finished = Finished {
            text: content.to_owned(),
            finish: if cut { FinishReason::Length } else { FinishReason::Stop },
            prompt_tokens: count("tokens_evaluated"),
            generated_tokens: count("tokens_predicted"),
            reused_tokens: reply.pointer("/timings/cache_n").and_then(Value::as_u64).unwrap_or(0),
        };
        Ok(finish_message(finished, &tools))
    }
}

/// Whether a llama-server's `/props` shows a chat template that writes calls as
/// `<tool_call>` (Qwen, Hermes): the family this route was measured on.
pub fn writes_tagged_calls(props: &Value) -> bool {
    let template = props.get("chat_template").and_then(Value::as_str).unwrap_or("");
    CallStyle::of_template(template) == CallStyle::Tagged
}

/// Sends `request` and reads the body, at most `limit` bytes; HTTP errors become
/// errors of the matching kind with the server's words.
async fn read_capped(
    request: reqwest::RequestBuilder,
    limit: usize,
    url: &str,
) -> Result<Vec<u8>, ModelError> {
    let network = |e: reqwest::Error| {
        let kind = if e.is_timeout() { ModelErrorKind::Idle } else { ModelErrorKind::Network };
        ModelError::new(kind, format!("{url}: {e}"))
    };
    let mut response = request.send().await.map_err(network)?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(network)? {
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(ModelError::new(
                ModelErrorKind::LimitExceeded,
                format!("{url} sent more than {limit} bytes"),
            ));
        }
    }
    if !status.is_success() {
        let words: String = String::from_utf8_lossy(&body).chars().take(500).collect();
        let kind = match status.as_u16() {
            400 if words.contains("context") => ModelErrorKind::ContextOverflow,
            400..=499 => ModelErrorKind::InvalidRequest,
            _ => ModelErrorKind::Server,
        };
        return Err(ModelError::new(kind, format!("{url} answered {status}: {words}")));
    }
    Ok(body)
}

impl ModelClient for TemplatedServer {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn context_window(&self) -> Option<u64> {
        self.config.context_window
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let reply = async move {
            tokio::select! {
                // Dropping the request closes the connection, and llama-server stops.
                () = cancel.cancelled() => Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")),
                message = self.complete(&request) => message.map(ModelEvent::Completed),
            }
        };
        Box::pin(futures::stream::once(reply).fuse())
    }
}
