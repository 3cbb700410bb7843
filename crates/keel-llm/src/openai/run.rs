//! One request's life: send, retry, read the body.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{OpenAiClient, OpenAiConfig, StreamDecoder, decode, errors};
use crate::client::ModelEvent;
use crate::error::{ModelError, ModelErrorKind};
use crate::retry::backoff_delay;

type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Detects a stream with no data for `limit`. One timer per response, moved forward
/// only when it fires: arming a fresh timer for every chunk costs more than the chunk.
struct IdleTimer {
    limit: Duration,
    last_data: tokio::time::Instant,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl IdleTimer {
    fn new(limit: Duration) -> Self {
        let now = tokio::time::Instant::now();
        IdleTimer { limit, last_data: now, sleep: Box::pin(tokio::time::sleep_until(now + limit)) }
    }

    /// Data arrived.
    fn touch(&mut self) {
        self.last_data = tokio::time::Instant::now();
    }

    /// Resolves once `limit` has passed without data.
    async fn expired(&mut self) {
        loop {
            (&mut self.sleep).await;
            let deadline = self.last_data + self.limit;
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            self.sleep.as_mut().reset(deadline);
        }
    }
}

enum Phase {
    Send { attempt: u32 },
    Wait { attempt: u32, delay: Duration },
    Body { body: BodyStream, attempt: u32, idle: IdleTimer },
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

    async fn send(&mut self, attempt: u32) {
        self.stream = StreamDecoder::new();
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
            let idle = IdleTimer::new(self.config().idle_timeout);
            self.phase = Phase::Body { body: Box::pin(response.bytes_stream()), attempt, idle };
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
        match self.stream.whole(&body, &mut self.deltas) {
            Ok(()) => {
                self.queue.extend(self.deltas.drain(..).map(Ok));
                self.complete();
            }
            Err(error) => self.fail(error, attempt),
        }
    }

    fn complete(&mut self) {
        let stream = std::mem::take(&mut self.stream);
        let text_tools = self.config().text_tool_calls.then_some(self.tools.as_slice());
        let message = stream.finish(text_tools);
        self.queue.push_back(Ok(ModelEvent::Completed(message)));
        self.phase = Phase::Done;
    }

    /// Queues the deltas of `result`; returns true while the stream goes on.
    fn after_feed(&mut self, result: Result<bool, ModelError>, attempt: u32) -> bool {
        self.queue.extend(self.deltas.drain(..).map(Ok));
        match result {
            Ok(false) => true,
            Ok(true) => {
                self.complete();
                false
            }
            Err(error) => {
                self.fail(error, attempt);
                false
            }
        }
    }

    async fn read(&mut self, mut body: BodyStream, attempt: u32, mut idle: IdleTimer) {
        let next = tokio::select! {
            next = body.next() => Ok(next),
            () = idle.expired() => Err(()),
        };
        match next {
            Err(()) => {
                let error = ModelError::new(
                    ModelErrorKind::Idle,
                    format!("the stream stalled: no data for {} s", idle.limit.as_secs()),
                );
                self.fail(error, attempt);
            }
            Ok(Some(Err(error))) => self.fail(network(&error), attempt),
            Ok(Some(Ok(bytes))) => {
                idle.touch();
                let result = self.stream.feed(&bytes, &mut self.deltas);
                if self.after_feed(result, attempt) {
                    self.phase = Phase::Body { body, attempt, idle };
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
                let result = self.stream.end(&mut self.deltas);
                if self.after_feed(result, attempt) {
                    if self.stream.is_blank() {
                        self.fail(decode::empty_reply_error(), attempt);
                    } else {
                        self.complete();
                    }
                }
            }
        }
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
                Phase::Body { body, attempt, idle } => self.read(body, attempt, idle).await,
            }
        }
    }
}
