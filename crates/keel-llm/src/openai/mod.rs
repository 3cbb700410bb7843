//! The OpenAI-compatible Chat Completions provider: DeepSeek, OpenAI, OpenRouter,
//! Ollama, llama.cpp's llama-server, vLLM, LM Studio — anything that serves
//! `POST {base_url}/chat/completions`.

mod config;
mod decode;
mod errors;
mod wire;

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

pub use config::{MaxTokensField, OpenAiConfig, PRESETS, Preset, ReasoningReplay};

use crate::client::{ModelClient, ModelEvent, ModelInfo, ModelRequest, ModelStream};
use crate::error::{ModelError, ModelErrorKind};
use crate::retry::backoff_delay;
use crate::sse::{SseEvent, SseParser};
use decode::Decoder;

/// A Chat Completions client. Cheap to share; keeps a connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    config: OpenAiConfig,
    endpoint: String,
}

impl OpenAiClient {
    /// Builds a client for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        if config.model.trim().is_empty() {
            return Err(ModelError::new(ModelErrorKind::Config, "no model name is set"));
        }
        let endpoint = config.endpoint();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ModelError::new(
                ModelErrorKind::Config,
                format!("the base URL `{}` must start with http:// or https://", config.base_url),
            ));
        }
        // ring, not aws-lc: no cmake, quick to build. Installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.idle_timeout.min(Duration::from_secs(30)))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| {
                ModelError::new(ModelErrorKind::Config, format!("cannot build the HTTP client: {e}"))
            })?;
        Ok(OpenAiClient { http, config, endpoint })
    }

    /// The settings in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn request(&self, body: Bytes) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if self.config.stream {
            request = request.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

enum Phase {
    Send { attempt: u32 },
    Wait { attempt: u32, delay: Duration },
    Body { body: BodyStream, attempt: u32 },
    Done,
}

struct Run<'a> {
    client: &'a OpenAiClient,
    body: Bytes,
    tools: Vec<&'a str>,
    cancel: CancellationToken,
    phase: Phase,
    queue: VecDeque<Result<ModelEvent, ModelError>>,
    sse: SseParser,
    decoder: Decoder,
    events: Vec<SseEvent>,
    deltas: Vec<ModelEvent>,
}

fn network(error: &reqwest::Error) -> ModelError {
    let what = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "the connection broke while reading the reply"
    } else {
        "the request failed"
    };
    let mut detail = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        detail = format!("{detail}: {inner}");
        source = inner.source();
    }
    ModelError::new(ModelErrorKind::Network, format!("{what}: {detail}"))
}

impl Run<'_> {
    fn config(&self) -> &OpenAiConfig {
        &self.client.config
    }

    /// Retries a failure that happened before any output, or gives up.
    fn fail(&mut self, error: ModelError, attempt: u32) {
        let retry = error.kind.is_retryable() && !self.decoder.emitted && attempt < self.config().max_retries;
        if retry {
            // A pooled connection the server closed while idle fails at once on reuse;
            // the first retry of a connection error goes out immediately.
            let delay = match (error.retry_after, error.kind, attempt) {
                (Some(delay), ..) => delay,
                (None, ModelErrorKind::Network, 0) => Duration::ZERO,
                (None, ..) => backoff_delay(attempt),
            }
            .min(self.config().max_retry_delay);
            tracing::warn!(attempt = attempt + 1, ?delay, error = %error.message, "retrying model request");
            self.queue.push_back(Ok(ModelEvent::Retrying {
                attempt: attempt + 1,
                max_retries: self.config().max_retries,
                delay,
                reason: error.message,
            }));
            self.phase = Phase::Wait { attempt: attempt + 1, delay };
        } else {
            let error = if attempt > 0 && error.kind.is_retryable() {
                ModelError {
                    message: format!("{} (gave up after {attempt} retries)", error.message),
                    ..error
                }
            } else {
                error
            };
            self.queue.push_back(Err(error));
            self.phase = Phase::Done;
        }
    }

    async fn send(&mut self, attempt: u32) {
        self.sse = SseParser::new();
        self.decoder = Decoder::default();
        let idle = self.config().idle_timeout;
        let request = self.client.request(self.body.clone());
        let response = match tokio::time::timeout(idle, request.send()).await {
            Err(_) => {
                let error =
                    ModelError::new(ModelErrorKind::Idle, format!("no response within {} s", idle.as_secs()));
                return self.fail(error, attempt);
            }
            Ok(Err(error)) => return self.fail(network(&error), attempt),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = errors::retry_after(response.headers());
            let body = match tokio::time::timeout(idle, response.bytes()).await {
                Ok(Ok(body)) => body,
                _ => Bytes::new(),
            };
            let config = self.config();
            let error =
                errors::from_status(status.as_u16(), &body, config.api_key_env.as_deref(), &config.provider)
                    .with_retry_after(retry_after);
            return self.fail(error, attempt);
        }
        if self.config().stream {
            self.phase = Phase::Body { body: Box::pin(response.bytes_stream()), attempt };
            return;
        }
        // Whole-response mode: the server sends nothing until it is done.
        let body = match tokio::time::timeout(idle * 10, response.bytes()).await {
            Err(_) => {
                let error = ModelError::new(ModelErrorKind::Idle, "the response did not complete in time");
                return self.fail(error, attempt);
            }
            Ok(Err(error)) => return self.fail(network(&error), attempt),
            Ok(Ok(body)) => body,
        };
        match serde_json::from_slice::<wire::Chunk>(&body) {
            Ok(chunk) => {
                if let Err(error) = self.decoder.on_chunk(chunk, &mut self.deltas) {
                    return self.fail(error, attempt);
                }
                self.queue.extend(self.deltas.drain(..).map(Ok));
                self.complete();
            }
            Err(e) => {
                let error =
                    ModelError::new(ModelErrorKind::InvalidResponse, format!("unreadable response: {e}"));
                self.fail(error, attempt);
            }
        }
    }

    fn complete(&mut self) {
        let decoder = std::mem::take(&mut self.decoder);
        let text_tools = self.config().text_tool_calls.then_some(self.tools.as_slice());
        let message = decoder.finish(text_tools);
        self.queue.push_back(Ok(ModelEvent::Completed(message)));
        self.phase = Phase::Done;
    }

    /// Handles dispatched SSE events; returns false once the stream is over.
    fn on_events(&mut self, attempt: u32) -> bool {
        let mut events = std::mem::take(&mut self.events);
        let mut done = false;
        let mut failure = None;
        for event in events.drain(..) {
            let data = event.data.trim();
            if data == "[DONE]" {
                done = true;
                break;
            }
            if data.is_empty() {
                continue;
            }
            match serde_json::from_str::<wire::Chunk>(data) {
                Ok(chunk) => {
                    if let Err(error) = self.decoder.on_chunk(chunk, &mut self.deltas) {
                        failure = Some(error);
                        break;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable stream chunk"),
            }
        }
        events.clear();
        self.events = events;
        self.queue.extend(self.deltas.drain(..).map(Ok));
        if let Some(error) = failure {
            self.fail(error, attempt);
            return false;
        }
        if done {
            self.complete();
        }
        !done
    }

    async fn read(&mut self, mut body: BodyStream, attempt: u32) {
        let idle = self.config().idle_timeout;
        let next = tokio::time::timeout(idle, body.next()).await;
        match next {
            Err(_) => {
                let error = ModelError::new(
                    ModelErrorKind::Idle,
                    format!("the stream stalled: no data for {} s", idle.as_secs()),
                );
                self.fail(error, attempt);
            }
            Ok(Some(Err(error))) => self.fail(network(&error), attempt),
            Ok(Some(Ok(bytes))) => {
                self.sse.feed(&bytes, &mut self.events);
                if self.on_events(attempt) {
                    self.phase = Phase::Body { body, attempt };
                } else {
                    // Read the body's end so the connection goes back to the pool
                    // instead of being closed (a new TLS handshake costs far more).
                    let _ = tokio::time::timeout(Duration::from_millis(200), async {
                        while let Some(Ok(_)) = body.next().await {}
                    })
                    .await;
                }
            }
            Ok(None) => {
                // End of body, with or without `[DONE]`.
                self.sse.finish(&mut self.events);
                if self.on_events(attempt) {
                    if self.decoder.is_blank() {
                        self.fail(decode::empty_reply_error(), attempt);
                    } else {
                        self.complete();
                    }
                }
            }
        }
    }

    async fn next(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some((item, self));
            }
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Send { attempt } => self.send(attempt).await,
                Phase::Wait { attempt, delay } => {
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => self.phase = Phase::Send { attempt },
                        _ = self.cancel.cancelled() => {
                            self.queue.push_back(Err(ModelError::new(ModelErrorKind::Cancelled, "cancelled")));
                        }
                    }
                }
                Phase::Body { body, attempt } => self.read(body, attempt).await,
            }
        }
    }
}

impl ModelClient for OpenAiClient {
    fn info(&self) -> ModelInfo {
        ModelInfo { provider: self.config.provider.clone(), model: self.config.model.clone() }
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let body = match wire::encode(&request, &self.config, self.config.stream) {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                let error =
                    ModelError::new(ModelErrorKind::Config, format!("cannot encode the request: {e}"));
                return Box::pin(futures::stream::once(async move { Err(error) }));
            }
        };
        let run = Run {
            client: self,
            body,
            tools: request.tools.iter().map(|t| t.name.as_str()).collect(),
            cancel,
            phase: Phase::Send { attempt: 0 },
            queue: VecDeque::new(),
            sse: SseParser::new(),
            decoder: Decoder::default(),
            events: Vec::new(),
            deltas: Vec::new(),
        };
        Box::pin(futures::stream::unfold(run, Run::next))
    }
}
