//! A model that replays a script.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_llm::{
    AssistantMessage, CancellationToken, ContentBlock, FinishReason, Message, ModelClient, ModelError,
    ModelErrorKind, ModelEvent, ModelInfo, ModelRequest, ModelStream, ToolCall, ToolChoice, ToolDefinition,
    Usage,
};

/// One request as the scripted model received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The system prompt.
    pub system: String,
    /// The messages.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// The tool choice.
    pub tool_choice: ToolChoice,
    /// The conversation's cache key.
    pub cache_key: Option<String>,
    /// The request's own sampling temperature.
    pub temperature: Option<f32>,
}

/// How to stop after streaming the deltas.
#[derive(Debug, Clone)]
enum Ending {
    Complete,
    Hang,
    Fail(ModelError),
}

/// One scripted reply, built with [`reply`].
#[derive(Debug, Clone)]
pub struct ReplyBuilder {
    content: Vec<ContentBlock>,
    finish: Option<FinishReason>,
    usage: Usage,
    delay: Duration,
    chunk: usize,
    ending: Ending,
    origin: Option<ModelInfo>,
}

/// The model's reply to keel's reading of a task's intent (`keel_agent::intent`): a call
/// of `classify` saying the task wants `wants` (`change`, `answer` or `both`), with
/// `check` and `layout`.
pub fn intent(wants: &str, check: bool, layout: bool) -> ReplyBuilder {
    reply().call("classify", &intent_arguments(wants, check, layout))
}

/// The arguments of a `classify` call saying the task wants `wants` (`change`, `answer`
/// or `both`).
pub fn intent_arguments(wants: &str, check: bool, layout: bool) -> String {
    let (change, question) = (wants != "answer", wants != "change");
    serde_json::json!({"change": change, "question": question, "check": check, "layout": layout}).to_string()
}

/// Starts a scripted reply.
pub fn reply() -> ReplyBuilder {
    ReplyBuilder {
        content: Vec::new(),
        finish: None,
        usage: Usage { input_tokens: 100, output_tokens: 10, ..Usage::default() },
        delay: Duration::ZERO,
        chunk: 16,
        origin: None,
        ending: Ending::Complete,
    }
}

impl ReplyBuilder {
    /// Adds answer text.
    pub fn text(mut self, text: &str) -> Self {
        self.content.push(ContentBlock::Text { text: text.into() });
        self
    }

    /// Adds reasoning text.
    pub fn thinking(mut self, text: &str) -> Self {
        self.content.push(ContentBlock::Thinking { text: text.into(), signature: None });
        self
    }

    /// Adds a tool call with a generated id.
    pub fn call(self, name: &str, arguments: &str) -> Self {
        let id = format!("call_{}_{}", name, self.content.len());
        self.call_id(&id, name, arguments)
    }

    /// Adds a tool call with a given id.
    pub fn call_id(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.content.push(ContentBlock::ToolCall(ToolCall::new(id, name, arguments)));
        self
    }

    /// Adds any content block as it is (signed thinking, provider items, …).
    pub fn block(mut self, block: ContentBlock) -> Self {
        self.content.push(block);
        self
    }

    /// Marks the message as written by `origin` (providers stamp their messages).
    pub fn origin(mut self, provider: &str, model: &str) -> Self {
        self.origin = Some(ModelInfo { provider: provider.into(), model: model.into() });
        self
    }

    /// Sets the finish reason (default: `tool_use` with calls, else `stop`).
    pub fn finish(mut self, reason: FinishReason) -> Self {
        self.finish = Some(reason);
        self
    }

    /// Sets the reported usage.
    pub fn usage(mut self, input: u64, output: u64) -> Self {
        self.usage = Usage { input_tokens: input, output_tokens: output, ..Usage::default() };
        self
    }

    /// Waits this long before the first delta.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Streams text in pieces of this many bytes (default 16).
    pub fn chunked(mut self, bytes: usize) -> Self {
        self.chunk = bytes.max(1);
        self
    }

    /// After streaming the deltas, never completes (until cancelled).
    pub fn hang(mut self) -> Self {
        self.ending = Ending::Hang;
        self
    }

    /// After streaming the deltas, fails with `error`.
    pub fn fail(mut self, error: ModelError) -> Self {
        self.ending = Ending::Fail(error);
        self
    }

    /// The message this reply completes with.
    pub fn message(&self) -> AssistantMessage {
        let has_calls = self.content.iter().any(|b| matches!(b, ContentBlock::ToolCall(_)));
        let finish =
            self.finish.unwrap_or(if has_calls { FinishReason::ToolUse } else { FinishReason::Stop });
        AssistantMessage {
            content: self.content.clone(),
            finish_reason: finish,
            raw_finish_reason: None,
            usage: self.usage,
            interrupted: false,
            origin: self.origin.clone(),
        }
    }

    fn deltas(&self) -> Vec<ModelEvent> {
        let mut out = Vec::new();
        let mut index = 0;
        for block in &self.content {
            match block {
                ContentBlock::Text { text } => {
                    out.extend(pieces(text, self.chunk).map(|p| ModelEvent::TextDelta(p.to_owned())))
                }
                ContentBlock::Thinking { text, .. } => {
                    out.extend(pieces(text, self.chunk).map(|p| ModelEvent::ThinkingDelta(p.to_owned())))
                }
                ContentBlock::ToolCall(call) => {
                    let mut first = true;
                    for piece in pieces(&call.arguments, self.chunk) {
                        out.push(ModelEvent::ToolCallDelta {
                            index,
                            id: first.then(|| call.id.clone()),
                            name: first.then(|| call.name.clone()),
                            arguments: piece.to_owned(),
                        });
                        first = false;
                    }
                    if first {
                        out.push(ModelEvent::ToolCallDelta {
                            index,
                            id: Some(call.id.clone()),
                            name: Some(call.name.clone()),
                            arguments: String::new(),
                        });
                    }
                    index += 1;
                }
                _ => {}
            }
        }
        out
    }
}

fn pieces(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head)
    })
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<ReplyBuilder>,
    requests: Vec<RecordedRequest>,
    model: Option<String>,
    context_window: Option<u64>,
    accepts_images: Option<bool>,
    not_recording: bool,
}

/// A [`ModelClient`] that replays scripted replies in order and records each request.
/// Clones share the script and the record.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// A model that will give these replies, one per request.
    pub fn new(replies: impl IntoIterator<Item = ReplyBuilder>) -> Self {
        let state = State { script: replies.into_iter().collect(), ..State::default() };
        ScriptedModel { state: Arc::new(Mutex::new(state)) }
    }

    /// Reports `model` as the model name (default `script`). Clones share the name.
    pub fn set_model_name(&self, model: &str) {
        self.state.lock().unwrap().model = Some(model.to_owned());
    }

    /// Reports whether the model takes images (default: unknown). Clones share it.
    pub fn set_accepts_images(&self, accepts: bool) {
        self.state.lock().unwrap().accepts_images = Some(accepts);
    }

    /// Reports a context window of `tokens` (default none). Clones share it.
    pub fn set_context_window(&self, tokens: u64) {
        self.state.lock().unwrap().context_window = Some(tokens);
    }

    /// Stops recording requests (benchmarks: recording copies the whole history).
    pub fn stop_recording(&self) {
        self.state.lock().unwrap().not_recording = true;
    }

    /// Adds a reply at the end of the script.
    pub fn push(&self, reply: ReplyBuilder) {
        self.state.lock().unwrap().script.push_back(reply);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Replies not yet given.
    pub fn remaining(&self) -> usize {
        self.state.lock().unwrap().script.len()
    }
}

impl ModelClient for ScriptedModel {
    fn info(&self) -> ModelInfo {
        let model = self.state.lock().unwrap().model.clone().unwrap_or_else(|| "script".into());
        ModelInfo { provider: "scripted".into(), model }
    }

    fn context_window(&self) -> Option<u64> {
        self.state.lock().unwrap().context_window
    }

    fn accepts_images(&self) -> Option<bool> {
        self.state.lock().unwrap().accepts_images
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let next = {
            let mut state = self.state.lock().unwrap();
            if !state.not_recording {
                state.requests.push(RecordedRequest {
                    system: request.system.to_owned(),
                    messages: request.messages.to_vec(),
                    tools: request.tools.to_vec(),
                    tool_choice: request.tool_choice,
                    cache_key: request.cache_key.map(str::to_owned),
                    temperature: request.temperature,
                });
            }
            state.script.pop_front()
        };
        Box::pin(async_stream(next, cancel))
    }
}

fn async_stream(
    next: Option<ReplyBuilder>,
    cancel: CancellationToken,
) -> impl futures::Stream<Item = Result<ModelEvent, ModelError>> + Send {
    use futures::StreamExt;
    let Some(reply) = next else {
        let error =
            ModelError::new(ModelErrorKind::InvalidResponse, "scripted model: the script is exhausted");
        return futures::stream::once(async move { Err(error) }).left_stream();
    };
    let delay = reply.delay;
    let deltas = reply.deltas();
    let message = reply.message();
    let ending = reply.ending.clone();
    let head = futures::stream::once(async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    })
    .filter_map(|_| async { None });
    let body = futures::stream::iter(deltas.into_iter().map(Ok));
    let tail = futures::stream::once(async move {
        match ending {
            Ending::Complete => Some(Ok(ModelEvent::Completed(message))),
            Ending::Fail(error) => Some(Err(error)),
            Ending::Hang => {
                cancel.cancelled().await;
                Some(Err(ModelError::new(ModelErrorKind::Cancelled, "cancelled")))
            }
        }
    })
    .filter_map(|item| async { item });
    head.chain(body).chain(tail).right_stream()
}
