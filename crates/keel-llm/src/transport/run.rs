//! One request's life: send, retry, read the body.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::backoff_delay;
use super::body::{Route, Shape};
use super::clock::{Alarm, Clock, deadline_error};
use super::{Decode, Settings, Transport, errors, human_bytes};
use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::text_calls::{CallTextGuard, apply_text_tool_calls, thoughts_as_reasoning};

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// A response being read.
struct Body {
    stream: BodyStream,
    attempt: u32,
    clock: Clock,
    shape: Shape,
}

enum Phase {
    Send { attempt: u32 },
    Wait { attempt: u32, delay: Duration },
    Body(Body),
    Done,
}

/// Makes the decoder of one attempt.
type DecoderFactory<'a> = Box<dyn Fn() -> Box<dyn Decode> + Send + 'a>;

pub(super) struct Run<'a> {
    transport: &'a Transport,
    body: Bytes,
    tools: Vec<&'a str>,
    cancel: CancellationToken,
    phase: Phase,
    queue: VecDeque<Result<ModelEvent, ModelError>>,
    new_decoder: DecoderFactory<'a>,
    stream: Box<dyn Decode>,
    deltas: Vec<ModelEvent>,
    /// Holds back calls written as text from the streamed text, when calls may be
    /// written so (see [`Settings::hide_call_text`]).
    guard: Option<CallTextGuard>,
}

/// The most of an error body that is read (its start is all a message shows).
const ERROR_BODY_BYTES: usize = 64 << 10;

/// How reading a whole body ended.
enum Ending {
    /// All of it was read.
    Complete,
    /// It went on past the cap; the bytes up to the cap were kept.
    Cut,
    /// It was not over in time.
    Late,
    /// The connection broke.
    Broken(reqwest::Error),
}

/// Reads a body whole, keeping at most `cap` bytes, until `until`. The bytes read are
/// returned however it ended.
async fn read_body(response: &mut reqwest::Response, cap: usize, until: Instant) -> (Vec<u8>, Ending) {
    let mut body = Vec::new();
    loop {
        let chunk = match tokio::time::timeout_at(until, response.chunk()).await {
            Err(_) => return (body, Ending::Late),
            Ok(Err(error)) => return (body, Ending::Broken(error)),
            Ok(Ok(None)) => return (body, Ending::Complete),
            Ok(Ok(Some(chunk))) => chunk,
        };
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return (body, Ending::Cut);
        }
        body.extend_from_slice(&chunk);
    }
}

/// A whole body larger than `cap`.
fn body_too_large(cap: usize) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!(
            "the response body is larger than {}, far more than max_tokens allows; it was not read",
            human_bytes(cap as u64)
        ),
    )
}

/// Reads the body's end so the connection goes back to the pool instead of being
/// closed (a new TLS handshake costs far more); gives up after 200 ms.
async fn drain(mut stream: BodyStream) {
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
}

fn network(error: &reqwest::Error, provider: &str) -> ModelError {
    if let Some(refused) = refused_here(error, provider) {
        return refused;
    }
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

/// A connection refused by this machine: nothing listens there, and retrying will not
/// change that in seconds. Said at once, naming the server the preset (`provider`) is for,
/// else the one that usually listens on that port; a configuration error (not retried).
fn refused_here(error: &reqwest::Error, provider: &str) -> Option<ModelError> {
    if !error.is_connect() {
        return None;
    }
    let mut source = std::error::Error::source(error);
    let mut refused = false;
    while let Some(inner) = source {
        if inner
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            refused = true;
        }
        source = inner.source();
    }
    let url = error.url()?;
    let host = url.host_str()?;
    let local = matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1");
    if !refused || !local {
        return None;
    }
    let port = url.port_or_known_default().unwrap_or(80);
    Some(ModelError::new(
        ModelErrorKind::Config,
        format!("nothing listens on {host}:{port} (connection refused) — {}", server_hint(provider, port)),
    ))
}

/// Which server to start: the preset's, else the one that usually listens on `port`.
fn server_hint(provider: &str, port: u16) -> String {
    match (provider, port) {
        ("ollama", _) | (_, 11434) => "is Ollama running (`ollama serve`)?".to_owned(),
        ("llamacpp", _) | (_, 8080) => {
            format!("is llama-server running (`llama-server -m MODEL.gguf --port {port}`)?")
        }
        ("vllm", _) | (_, 8000) => format!("is vLLM running (`vllm serve MODEL --port {port}`)?"),
        _ => "is the model server running, and on this port?".to_owned(),
    }
}

impl<'a> Run<'a> {
    pub(super) fn new(
        transport: &'a Transport,
        body: Bytes,
        tools: Vec<&'a str>,
        new_decoder: DecoderFactory<'a>,
        cancel: CancellationToken,
    ) -> Self {
        let stream = new_decoder();
        let guard = transport.settings().hide_call_text.then(CallTextGuard::default);
        Run {
            transport,
            body,
            tools,
            cancel,
            phase: Phase::Send { attempt: 0 },
            queue: VecDeque::new(),
            new_decoder,
            stream,
            deltas: Vec::new(),
            guard,
        }
    }

    /// Queues the decoder's deltas, with calls written as text held back.
    fn queue_deltas(&mut self) {
        for delta in self.deltas.drain(..) {
            match (delta, &mut self.guard) {
                (ModelEvent::TextDelta(text), Some(guard)) => {
                    let shown = guard.push(&text);
                    if !shown.is_empty() {
                        self.queue.push_back(Ok(ModelEvent::TextDelta(shown)));
                    }
                }
                (delta, _) => self.queue.push_back(Ok(delta)),
            }
        }
    }

    fn config(&self) -> &Settings {
        self.transport.settings()
    }

    /// Retries a failure that happened before any output, or gives up.
    fn fail(&mut self, error: ModelError, attempt: u32) {
        let emitted = self.stream.has_output();
        self.fail_after(error, attempt, emitted);
    }

    /// [`Run::fail`] once the decoder is gone: `emitted` says whether output streamed.
    fn fail_after(&mut self, error: ModelError, attempt: u32, emitted: bool) {
        let retry = error.kind.is_retryable() && !emitted && attempt < self.config().life.max_retries;
        if retry {
            // A pooled connection the server closed while idle fails at once on reuse;
            // the first retry of a connection error goes out immediately.
            let delay = match (error.retry_after, error.kind, attempt) {
                (Some(delay), ..) => delay,
                (None, ModelErrorKind::Network, 0) => Duration::ZERO,
                (None, ..) => backoff_delay(attempt),
            }
            .min(self.config().life.max_retry_delay);
            tracing::warn!(attempt = attempt + 1, ?delay, error = %error.message, "retrying model request");
            self.queue.push_back(Ok(ModelEvent::Retrying {
                attempt: attempt + 1,
                max_retries: self.config().life.max_retries,
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

    fn url(&self) -> &str {
        self.transport.url()
    }

    async fn send(&mut self, attempt: u32) {
        self.stream = (self.new_decoder)();
        let (idle, limit) = (self.config().life.idle_timeout, self.config().life.response_deadline);
        let deadline = Instant::now() + limit;
        let request = self.transport.request(self.body.clone());
        let headers_by = (Instant::now() + idle).min(deadline);
        let mut response = match tokio::time::timeout_at(headers_by, request.send()).await {
            Err(_) if headers_by == deadline => return self.fail(deadline_error(limit), attempt),
            Err(_) => {
                let error =
                    ModelError::new(ModelErrorKind::Idle, format!("no response within {} s", idle.as_secs()));
                return self.fail(error, attempt);
            }
            Ok(Err(error)) => return self.fail(network(&error, &self.config().origin.provider), attempt),
            Ok(Ok(response)) => response,
        };
        let content_type = super::content_type(response.headers());
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = errors::retry_after(response.headers());
            // Only the start of an error body is shown: read no more than that.
            let read_by = (Instant::now() + idle).min(deadline);
            let (body, _) = read_body(&mut response, ERROR_BODY_BYTES, read_by).await;
            let config = self.config();
            let failure = errors::Failure {
                status,
                body: &body,
                content_type: &content_type,
                url: self.url(),
                api: config.names.api,
            };
            let error = errors::from_status(&failure, config.api_key_env.as_deref(), &config.origin.provider)
                .with_retry_after(retry_after);
            return self.fail(error, attempt);
        }
        let shape = Shape::new(&content_type, self.config().names);
        if self.config().stream {
            let clock = Clock::new(idle, deadline);
            let stream = Box::pin(response.bytes_stream());
            self.phase = Phase::Body(Body { stream, attempt, clock, shape });
        } else {
            self.whole(response, shape, attempt, deadline).await;
        }
    }

    /// Whole-response mode: the server sends nothing until it is done.
    async fn whole(
        &mut self,
        mut response: reqwest::Response,
        mut shape: Shape,
        attempt: u32,
        deadline: Instant,
    ) {
        let cap = self.stream.limits().max_event_bytes;
        if response.content_length().is_some_and(|length| length > cap as u64) {
            return self.fail(body_too_large(cap), attempt);
        }
        let body = match read_body(&mut response, cap, deadline).await {
            (body, Ending::Complete) => body,
            (_, Ending::Cut) => return self.fail(body_too_large(cap), attempt),
            (_, Ending::Late) => {
                return self.fail(deadline_error(self.config().life.response_deadline), attempt);
            }
            (_, Ending::Broken(error)) => {
                return self.fail(network(&error, &self.config().origin.provider), attempt);
            }
        };
        // Decoded like a stream that arrived in one piece: a server may stream anyway.
        if self.absorb(&mut shape, &body, attempt).is_some() {
            self.conclude(&shape, attempt);
        }
    }

    /// The decoder's message, with tool calls written as text made real (when on) and
    /// its origin stamped; or the decoder's reason it is not a message.
    fn complete(&mut self, attempt: u32) {
        let emitted = self.stream.has_output();
        let stream = std::mem::replace(&mut self.stream, (self.new_decoder)());
        match stream.finish() {
            Ok(mut message) => {
                if self.config().text_tool_calls {
                    apply_text_tool_calls(&mut message, &self.tools);
                }
                // What the guard held back was no call after all (a code block, a JSON
                // answer): shown now, before the message completes.
                let rest = self.guard.take().map(|mut guard| guard.flush()).unwrap_or_default();
                if !rest.is_empty() && !message.has_tool_calls() {
                    self.queue.push_back(Ok(ModelEvent::TextDelta(rest)));
                }
                if self.config().thoughts_as_reasoning {
                    thoughts_as_reasoning(&mut message.content);
                }
                message.origin = Some(self.config().origin.clone());
                self.queue.push_back(Ok(ModelEvent::Completed(message)));
                self.phase = Phase::Done;
            }
            Err(error) => self.fail_after(error, attempt, emitted),
        }
    }

    /// Completes the message, or fails naming the body when no message came of it.
    fn complete_or_blank(&mut self, shape: &Shape, attempt: u32) {
        if self.stream.is_blank() {
            let error = shape.blank_error(self.url(), self.stream.event_count());
            self.fail(error, attempt);
        } else {
            self.complete(attempt);
        }
    }

    /// Takes one piece of the body. `Some(progress)` while the body goes on (progress:
    /// output arrived, or part of a JSON document); `None` once the message completed
    /// or the request failed.
    fn absorb(&mut self, shape: &mut Shape, bytes: &[u8], attempt: u32) -> Option<bool> {
        let cap = self.stream.limits().max_event_bytes;
        match shape.route(bytes, cap) {
            Route::Wait => return Some(false),
            Route::Buffered => return Some(true),
            Route::TooLarge => self.fail(body_too_large(cap), attempt),
            Route::Html => return Some(false),
            Route::Sse => {
                let finished = self.stream.has_finish_reason();
                let result = self.stream.feed(bytes, &mut self.deltas);
                // Progress is output (or the finish reason), not events: empty chunks and
                // status events (`response.in_progress`) would keep a dead stream alive.
                let output = self.deltas.iter().any(is_output) || self.stream.has_finish_reason() != finished;
                self.queue_deltas();
                match result {
                    Err(error) => self.fail(error, attempt),
                    Ok(done) if done || self.stream.is_settled() => self.complete_or_blank(shape, attempt),
                    Ok(_) => return Some(output),
                }
            }
        }
        None
    }

    /// The body ended (with or without `[DONE]`).
    fn conclude(&mut self, shape: &Shape, attempt: u32) {
        let result = match shape.json() {
            Some(document) => self.stream.whole(document, &mut self.deltas),
            None if shape.is_empty() => Ok(()),
            None => self.stream.end(&mut self.deltas),
        };
        self.queue_deltas();
        match result {
            Ok(()) => self.complete_or_blank(shape, attempt),
            Err(error) => self.fail(error, attempt),
        }
    }

    async fn read(&mut self, mut body: Body) {
        let next = tokio::select! {
            next = body.stream.next() => Ok(next),
            alarm = body.clock.alarm() => Err(alarm),
        };
        match next {
            Err(Alarm::Grace) => {
                tracing::debug!("a finish reason arrived and the stream did not end: completing");
                self.complete_or_blank(&body.shape, body.attempt);
            }
            Err(Alarm::Deadline) => {
                self.fail(deadline_error(self.config().life.response_deadline), body.attempt)
            }
            Err(Alarm::Idle) => self.fail(body.clock.idle_error(), body.attempt),
            Ok(Some(Err(error))) => self.fail(network(&error, &self.config().origin.provider), body.attempt),
            Ok(Some(Ok(bytes))) => self.on_bytes(body, &bytes).await,
            Ok(None) => self.conclude(&body.shape, body.attempt),
        }
    }

    /// Decodes streamed bytes. Only output is progress; a finish reason starts the
    /// grace; `[DONE]`, or usage after the finish reason, completes the message.
    async fn on_bytes(&mut self, mut body: Body, bytes: &[u8]) {
        let Some(progress) = self.absorb(&mut body.shape, bytes, body.attempt) else {
            return drain(body.stream).await;
        };
        if body.shape.is_html() {
            // A web page: a little more of it shows its title, then it is named.
            let _ = tokio::time::timeout(Duration::from_millis(500), async {
                while !body.shape.head_is_full() {
                    let Some(Ok(bytes)) = body.stream.next().await else { break };
                    body.shape.route(&bytes, 0);
                }
            })
            .await;
            return self.conclude(&body.shape, body.attempt);
        }
        if progress {
            body.clock.progress();
        } else {
            body.clock.quiet();
        }
        if self.stream.has_finish_reason() {
            body.clock.start_grace(self.config().life.finish_grace);
        }
        self.phase = Phase::Body(body);
    }

    pub(super) async fn next(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
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
                Phase::Body(body) => self.read(body).await,
            }
        }
    }
}

/// Whether `event` carries something of the reply (text, reasoning, a piece of a call).
fn is_output(event: &ModelEvent) -> bool {
    match event {
        ModelEvent::TextDelta(text) | ModelEvent::ThinkingDelta(text) => !text.is_empty(),
        ModelEvent::ToolCallDelta { id, name, arguments, .. } => {
            id.is_some() || name.is_some() || !arguments.is_empty()
        }
        ModelEvent::Retrying { .. } | ModelEvent::Completed(_) => false,
    }
}
