//! llama.cpp's native `POST /completion` (llama-server): a prompt the caller rendered
//! (its own chat template), an optional GBNF grammar, and the reply streamed back as
//! text. The caller owns what the prompt and the text mean — rendering the history,
//! choosing the grammar, reading tool calls out of the text ([`FinishReply`]); this
//! module owns the wire: the request body, the decoder (`decode`), and the shared
//! `transport` (retries with backoff and `Retry-After` before any output, the idle
//! timer, the response deadline, size bounds, errors classified like every API's).
//! `keel_local::server::TemplatedServer` is built on it.

mod decode;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client::{ModelEvent, ModelStream};
use crate::config::ProviderConfig;
use crate::error::{ModelError, ModelErrorKind};
use crate::message::{AssistantMessage, FinishReason};
use crate::transport::{ApiNames, Auth, Transport, errors, failed};

/// How llama-server's native API is named in errors.
const NAMES: ApiNames =
    ApiNames { api: "llama.cpp's /completion API", document: "a llama.cpp completion (no content)" };

/// Most bytes of `/props` read (the chat template is in it).
const MAX_PROPS_BYTES: usize = 1024 * 1024;
/// How long `/props` may take.
const PROPS_TIMEOUT: Duration = Duration::from_secs(10);

/// One request to `/completion`: what the caller rendered and chose.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompletionRequest {
    /// The whole prompt, chat template applied (the server adds nothing).
    pub prompt: String,
    /// The most tokens to generate (`n_predict`).
    pub max_tokens: u32,
    /// Sampling temperature; none leaves the server's.
    pub temperature: Option<f32>,
    /// A GBNF grammar every generated token must fit.
    pub grammar: Option<Arc<str>>,
    /// A sampling seed, so a run can be repeated.
    pub seed: Option<u64>,
}

/// A finished reply: all its text and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionReply {
    /// The generated text, as the model wrote it (call tags included).
    pub text: String,
    /// [`FinishReason::Length`] when cut at the token cap, else [`FinishReason::Stop`].
    pub finish: FinishReason,
    /// The server's `stop_type` (`eos`, `word`, `limit`), when it said.
    pub stop_type: Option<String>,
    /// Prompt tokens of the request (`tokens_evaluated`).
    pub prompt_tokens: u64,
    /// Tokens generated (`tokens_predicted`).
    pub generated_tokens: u64,
    /// Prompt tokens reused from the server's cache (`timings.cache_n`).
    pub cached_tokens: u64,
}

/// Makes the assistant message of a finished reply: the caller reads its tool calls
/// out of the text (and anything else its template writes). Called once per reply,
/// from the stream's task.
pub trait FinishReply: Send + Sync {
    /// The message `reply` is.
    fn finish(&self, reply: CompletionReply) -> AssistantMessage;
}

impl<F> FinishReply for F
where
    F: Fn(CompletionReply) -> AssistantMessage + Send + Sync,
{
    fn finish(&self, reply: CompletionReply) -> AssistantMessage {
        self(reply)
    }
}

/// The body llama-server's `/completion` takes.
#[derive(Serialize)]
struct Body<'a> {
    prompt: &'a str,
    n_predict: u32,
    cache_prompt: bool,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grammar: Option<&'a str>,
}

/// A client of llama-server's `/completion` on the shared transport. Cheap to share;
/// keeps a connection pool.
#[derive(Debug, Clone)]
pub struct CompletionClient {
    transport: Transport,
    /// The server's root: the base URL without `/v1`.
    root: String,
}

impl CompletionClient {
    /// A client for the server at `config.base_url` (with or without `/v1`): requests
    /// go to `{root}/completion`, streamed unless `config.stream` is off, with
    /// `config`'s retries, timeouts and key. Nothing is asked of the server yet.
    pub fn new(config: &ProviderConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base).to_owned();
        // Calls written as text and thoughts are the caller's to read (FinishReply).
        let config =
            ProviderConfig { text_tool_calls: false, thoughts_as_reasoning: false, ..config.clone() };
        let endpoint = format!("{root}/completion");
        let transport = Transport::at(&config, &endpoint, Auth::Bearer, &[], NAMES)?.hiding_call_text();
        Ok(CompletionClient { transport, root })
    }

    /// The server's root URL (the base URL without `/v1`).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// llama-server's `GET /props` (its chat template, special tokens, context size),
    /// on this client's connections: at most 1 MiB, within 10 s. HTTP errors are
    /// classified as a reply's are.
    pub async fn props(&self) -> Result<Value, ModelError> {
        let url = format!("{}/props", self.root);
        let network = |e: reqwest::Error| {
            let kind = if e.is_timeout() { ModelErrorKind::Idle } else { ModelErrorKind::Network };
            ModelError::new(kind, format!("{url}: {e}"))
        };
        let mut response = self.transport.get(&url).timeout(PROPS_TIMEOUT).send().await.map_err(network)?;
        let status = response.status().as_u16();
        let content_type = crate::transport::content_type(response.headers());
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(network)? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_PROPS_BYTES {
                return Err(ModelError::new(
                    ModelErrorKind::LimitExceeded,
                    format!("{url} sent more than {MAX_PROPS_BYTES} bytes"),
                ));
            }
        }
        if !(200..300).contains(&status) {
            let settings = self.transport.settings();
            let failure = errors::Failure {
                status,
                body: &body,
                content_type: &content_type,
                url: &url,
                api: NAMES.api,
            };
            return Err(errors::from_status(
                &failure,
                settings.api_key_env.as_deref(),
                &settings.origin.provider,
            ));
        }
        serde_json::from_slice(&body)
            .map_err(|e| ModelError::new(ModelErrorKind::InvalidResponse, format!("{url} is not JSON: {e}")))
    }

    /// Posts `request` and streams the reply: text deltas as they arrive, then the
    /// message `finish` makes of the whole text. Failures before any output are retried
    /// as on every API; `cancel` ends the stream with a `Cancelled` error (and dropping
    /// the stream closes the connection, which stops llama-server's generation).
    pub fn stream<'a>(
        &'a self,
        request: &CompletionRequest,
        finish: Arc<dyn FinishReply>,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        let body = Body {
            prompt: &request.prompt,
            n_predict: request.max_tokens,
            cache_prompt: true,
            stream: self.transport.settings().stream,
            seed: request.seed,
            temperature: request.temperature,
            grammar: request.grammar.as_deref(),
        };
        let body = match serde_json::to_vec(&body) {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                return failed(ModelError::new(
                    ModelErrorKind::Config,
                    format!("cannot encode the request: {e}"),
                ));
            }
        };
        let limits = self.transport.settings().limits;
        let decoder = Box::new(move || decode::decoder(limits, Arc::clone(&finish)));
        until_cancelled(self.transport.stream(body, Vec::new(), decoder, cancel.clone()), cancel)
    }
}

/// `stream` until `cancel` fires (then one `Cancelled` error) or it ends; nothing after
/// its message or its error.
pub fn until_cancelled(stream: ModelStream<'_>, cancel: CancellationToken) -> ModelStream<'_> {
    Box::pin(futures::stream::unfold(Some((stream, cancel)), |state| async move {
        let (mut stream, cancel) = state?;
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ModelError::new(ModelErrorKind::Cancelled, "generation stopped")),
            item = stream.next() => item?,
        };
        let last = matches!(item, Err(_) | Ok(ModelEvent::Completed(_)));
        Some((item, (!last).then_some((stream, cancel))))
    }))
}
