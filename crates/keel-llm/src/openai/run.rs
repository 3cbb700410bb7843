//! One request's life: send, retry, read the body.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use super::body::{Route, Shape};
use super::{OpenAiClient, OpenAiConfig, StreamDecoder, decode, errors};
use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::retry::backoff_delay;

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// The time bounds of one response, kept by one timer: no progress for `idle`, the
/// total deadline, and the grace after a finish reason. The timer moves only when it
/// fires: arming a fresh one for every chunk costs more than the chunk.
struct Clock {
    idle: Duration,
    last_progress: Instant,
    /// Bytes arrived since the last progress (keep-alive comments, part of an event).
    quiet_bytes: bool,
    deadline: Instant,
    grace: Option<Instant>,
    sleep: Pin<Box<Sleep>>,
}

/// Which bound a response reached.
enum Alarm {
    Idle,
    Deadline,
    Grace,
}

impl Clock {
    fn new(idle: Duration, deadline: Instant) -> Self {
        let now = Instant::now();
        let first = (now + idle).min(deadline);
        Clock {
            idle,
            last_progress: now,
            quiet_bytes: false,
            deadline,
            grace: None,
            sleep: Box::pin(tokio::time::sleep_until(first)),
        }
    }

    /// An event arrived.
    fn progress(&mut self) {
        self.last_progress = Instant::now();
        self.quiet_bytes = false;
    }

    /// Bytes arrived that made no event.
    fn quiet(&mut self) {
        self.quiet_bytes = true;
    }

    /// A finish reason arrived: the message completes at most `grace` from now.
    fn start_grace(&mut self, grace: Duration) {
        if self.grace.is_some() {
            return;
        }
        let at = Instant::now() + grace;
        self.grace = Some(at);
        if at < self.sleep.deadline() {
            self.sleep.as_mut().reset(at);
        }
    }

    /// Resolves when a bound is reached. A reached grace wins: the reply is whole.
    async fn alarm(&mut self) -> Alarm {
        loop {
            (&mut self.sleep).await;
            let now = Instant::now();
            let idle_at = self.last_progress + self.idle;
            if self.grace.is_some_and(|at| now >= at) {
                return Alarm::Grace;
            }
            if now >= self.deadline {
                return Alarm::Deadline;
            }
            if now >= idle_at {
                return Alarm::Idle;
            }
            let next = self.grace.map_or(idle_at, |at| at.min(idle_at)).min(self.deadline);
            self.sleep.as_mut().reset(next);
        }
    }

    fn idle_error(&self) -> ModelError {
        let secs = self.idle.as_secs();
        let message = if self.quiet_bytes {
            format!("the stream stalled: no event for {secs} s, only keep-alive comments or part of a line")
        } else {
            format!("the stream stalled: no data for {secs} s")
        };
        ModelError::new(ModelErrorKind::Idle, message)
    }
}

/// `90 s`, `30 min`, `2 h`.
fn human(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        _ => format!("{} h", secs / 3600),
    }
}

/// The error once a response has taken longer than `limit`.
fn deadline_error(limit: Duration) -> ModelError {
    ModelError::new(
        ModelErrorKind::LimitExceeded,
        format!(
            "the response took longer than the {} allowed for one response (response_deadline); it was stopped",
            human(limit)
        ),
    )
}

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

pub(super) struct Run<'a> {
    client: &'a OpenAiClient,
    body: Bytes,
    tools: Vec<&'a str>,
    cancel: CancellationToken,
    phase: Phase,
    queue: VecDeque<Result<ModelEvent, ModelError>>,
    stream: StreamDecoder,
    deltas: Vec<ModelEvent>,
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
            decode::human_bytes(cap as u64)
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

impl<'a> Run<'a> {
    pub(super) fn new(
        client: &'a OpenAiClient,
        body: Bytes,
        tools: Vec<&'a str>,
        cancel: CancellationToken,
    ) -> Self {
        Run {
            client,
            body,
            tools,
            cancel,
            phase: Phase::Send { attempt: 0 },
            queue: VecDeque::new(),
            stream: StreamDecoder::new(),
            deltas: Vec::new(),
        }
    }

    fn config(&self) -> &OpenAiConfig {
        &self.client.config
    }

    /// Retries a failure that happened before any output, or gives up.
    fn fail(&mut self, error: ModelError, attempt: u32) {
        let retry =
            error.kind.is_retryable() && !self.stream.has_output() && attempt < self.config().max_retries;
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

    fn url(&self) -> &str {
        self.client.endpoint.as_str()
    }

    async fn send(&mut self, attempt: u32) {
        self.stream = StreamDecoder::with_limits(self.config().decode_limits());
        let (idle, limit) = (self.config().idle_timeout, self.config().response_deadline);
        let deadline = Instant::now() + limit;
        let request = self.client.request(self.body.clone());
        let headers_by = (Instant::now() + idle).min(deadline);
        let mut response = match tokio::time::timeout_at(headers_by, request.send()).await {
            Err(_) if headers_by == deadline => return self.fail(deadline_error(limit), attempt),
            Err(_) => {
                let error =
                    ModelError::new(ModelErrorKind::Idle, format!("no response within {} s", idle.as_secs()));
                return self.fail(error, attempt);
            }
            Ok(Err(error)) => return self.fail(network(&error), attempt),
            Ok(Ok(response)) => response,
        };
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = errors::retry_after(response.headers());
            // Only the start of an error body is shown: read no more than that.
            let read_by = (Instant::now() + idle).min(deadline);
            let (body, _) = read_body(&mut response, ERROR_BODY_BYTES, read_by).await;
            let failure =
                errors::Failure { status, body: &body, content_type: &content_type, url: self.url() };
            let config = self.config();
            let error = errors::from_status(&failure, config.api_key_env.as_deref(), &config.provider)
                .with_retry_after(retry_after);
            return self.fail(error, attempt);
        }
        let shape = Shape::new(&content_type);
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
            (_, Ending::Late) => return self.fail(deadline_error(self.config().response_deadline), attempt),
            (_, Ending::Broken(error)) => return self.fail(network(&error), attempt),
        };
        // Decoded like a stream that arrived in one piece: a server may stream anyway.
        if self.absorb(&mut shape, &body, attempt).is_some() {
            self.conclude(&shape, attempt);
        }
    }

    fn complete(&mut self) {
        let stream = std::mem::take(&mut self.stream);
        let text_tools = self.config().text_tool_calls.then_some(self.tools.as_slice());
        let message = stream.finish(text_tools);
        self.queue.push_back(Ok(ModelEvent::Completed(message)));
        self.phase = Phase::Done;
    }

    /// Completes the message, or fails naming the body when no message came of it.
    fn complete_or_blank(&mut self, shape: &Shape, attempt: u32) {
        if self.stream.is_blank() {
            let error = shape.blank_error(self.url(), self.stream.event_count());
            self.fail(error, attempt);
        } else {
            self.complete();
        }
    }

    /// Takes one piece of the body. `Some(progress)` while the body goes on (progress:
    /// an event arrived, or part of a JSON document); `None` once the message completed
    /// or the request failed.
    fn absorb(&mut self, shape: &mut Shape, bytes: &[u8], attempt: u32) -> Option<bool> {
        let cap = self.stream.limits().max_event_bytes;
        match shape.route(bytes, cap) {
            Route::Wait => return Some(false),
            Route::Buffered => return Some(true),
            Route::TooLarge => self.fail(body_too_large(cap), attempt),
            Route::Html => return Some(false),
            Route::Sse => {
                let events = self.stream.event_count();
                let result = self.stream.feed(bytes, &mut self.deltas);
                self.queue.extend(self.deltas.drain(..).map(Ok));
                match result {
                    Err(error) => self.fail(error, attempt),
                    Ok(done) if done || self.stream.is_settled() => self.complete_or_blank(shape, attempt),
                    Ok(_) => return Some(self.stream.event_count() > events),
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
            None => self.stream.end(&mut self.deltas).map(drop),
        };
        self.queue.extend(self.deltas.drain(..).map(Ok));
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
            Err(Alarm::Deadline) => self.fail(deadline_error(self.config().response_deadline), body.attempt),
            Err(Alarm::Idle) => self.fail(body.clock.idle_error(), body.attempt),
            Ok(Some(Err(error))) => self.fail(network(&error), body.attempt),
            Ok(Some(Ok(bytes))) => self.on_bytes(body, &bytes).await,
            Ok(None) => self.conclude(&body.shape, body.attempt),
        }
    }

    /// Decodes streamed bytes. Only an event is progress; a finish reason starts the
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
            body.clock.start_grace(self.config().finish_grace);
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
