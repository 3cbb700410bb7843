//! The model is the log: a [`ModelClient`] that answers each request keel makes with the
//! reply recorded for that request, and compares the request with the one recorded (what
//! keel derives now against what the log says was sent: the request header's system
//! prompt and tools and the messages folded from the events before the step, or a
//! `model/aside`'s request as logged).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use keel_agent::Inbox;
use keel_llm::{
    AssistantMessage, CancellationToken, ContentBlock, Message, ModelClient, ModelError, ModelErrorKind,
    ModelEvent, ModelInfo, ModelRequest, ModelStream,
};
use keel_session::{Event, Projection, TurnEndReason};

use super::compare::{self, Difference, MessageDifference, Paths};
use super::script::{Answer, CallKind, ModelCall, Place};

/// A difference found in a request, kept raw until the replay ends: a message that
/// differs only because a tool's result differs is told once, as that result.
#[derive(Debug, Clone)]
pub enum Found {
    /// Anything but a message.
    Plain(Difference),
    /// A message of a step's request, with the request's message counts (recorded, now).
    Message { at: Place, found: Box<MessageDifference>, counts: (usize, usize) },
}

/// The turn being replayed.
struct Turn {
    /// How the recorded turn ended.
    reason: Option<TurnEndReason>,
    /// Where it ended.
    end: Place,
    /// keel asked for more than the recording has.
    extra: bool,
    /// Cancels the replayed turn (to replay an abort).
    cancel: CancellationToken,
    /// Where steering goes.
    inbox: Inbox,
}

struct State {
    events: Arc<[Event]>,
    /// The recorded log folded up to `applied`.
    projection: Projection,
    applied: usize,
    queue: VecDeque<ModelCall>,
    turn: Option<Turn>,
    paths: Paths,
    found: Vec<Found>,
    seen: HashSet<String>,
    served: usize,
}

/// The log as a model. Clones share the recording and what was found.
#[derive(Clone)]
pub struct LogModel {
    info: ModelInfo,
    window: Option<u64>,
    state: Arc<Mutex<State>>,
}

/// What to answer one request with.
enum Plan {
    Complete(AssistantMessage),
    /// Stream these deltas, then cancel the turn (an abort, as recorded).
    Abort(Vec<ModelEvent>, Option<CancellationToken>),
    /// Stream these deltas, then fail.
    Fail(Vec<ModelEvent>, ModelError),
}

impl LogModel {
    /// A model answering as `events` record, named `info`, with context window `window`.
    pub fn new(info: ModelInfo, window: Option<u64>, events: Arc<[Event]>, paths: Paths) -> LogModel {
        let state = State {
            events,
            projection: Projection::new(),
            applied: 0,
            queue: VecDeque::new(),
            turn: None,
            paths,
            found: Vec::new(),
            seen: HashSet::new(),
            served: 0,
        };
        LogModel { info, window, state: Arc::new(Mutex::new(state)) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Answers the next requests with `calls` (one turn's, or a compaction's), recorded
    /// as ending with `reason` at `end`.
    pub fn begin(
        &self,
        calls: Vec<ModelCall>,
        recorded: (Option<TurnEndReason>, Place),
        cancel: CancellationToken,
        inbox: Inbox,
    ) {
        let mut state = self.lock();
        state.queue = calls.into();
        let (reason, end) = recorded;
        state.turn = Some(Turn { reason, end, extra: false, cancel, inbox });
    }

    /// How the requests since [`LogModel::begin`] differ in number from the recorded
    /// ones: keel asked for more, or made fewer.
    pub fn finish(&self) -> Option<Difference> {
        let mut state = self.lock();
        let turn = state.turn.take();
        let left: Vec<ModelCall> = state.queue.drain(..).collect();
        if let Some(turn) = turn.filter(|t| t.extra) {
            return Some(Difference::note(
                turn.end,
                "keel asked the model for more where the recorded turn had ended (the recording has no reply for it)",
            ));
        }
        let first = left.first()?;
        let what = match &first.kind {
            CallKind::Step => "a step".to_owned(),
            CallKind::Aside(aside) => format!("a {} request", aside.purpose),
            CallKind::Summary { .. } => "a compaction's summary request".to_owned(),
        };
        Some(Difference::note(
            first.at,
            format!("keel made no more requests; the recording has {} more, from {what}", left.len()),
        ))
    }

    /// What was found so far.
    pub fn take_found(&self) -> Vec<Found> {
        std::mem::take(&mut self.lock().found)
    }

    /// Requests answered so far.
    pub fn served(&self) -> usize {
        self.lock().served
    }

    fn plan(&self, request: &ModelRequest<'_>) -> Plan {
        let mut state = self.lock();
        let Some(call) = state.queue.pop_front() else {
            let aborted = state
                .turn
                .as_ref()
                .filter(|t| matches!(t.reason, Some(TurnEndReason::Aborted | TurnEndReason::Interrupted)))
                .map(|t| t.cancel.clone());
            if let Some(cancel) = aborted {
                // The recorded turn was stopped here: stop this one too.
                return Plan::Abort(Vec::new(), Some(cancel));
            }
            if let Some(turn) = &mut state.turn {
                turn.extra = true;
            }
            let error = ModelError::new(
                ModelErrorKind::InvalidRequest,
                "keel replay: the recording has no reply for this request",
            );
            return Plan::Fail(Vec::new(), error);
        };
        state.served += 1;
        state.compare(&call, request);
        if let Some(turn) = &state.turn {
            for text in &call.steers_after {
                turn.inbox.steer(text.clone());
            }
        }
        match call.answer {
            Answer::Reply(message) => Plan::Complete(message),
            Answer::Aborted(partial) => {
                Plan::Abort(deltas(&partial), state.turn.as_ref().map(|t| t.cancel.clone()))
            }
            Answer::Failed(partial, kind, message) => {
                Plan::Fail(deltas(&partial), ModelError::new(kind, message))
            }
        }
    }
}

impl State {
    fn found(&mut self, found: Found) {
        let key = match &found {
            Found::Plain(d) => format!("{}\u{0}{}\u{0}{}", d.what, d.recorded, d.now),
            Found::Message { found, .. } => format!(
                "{}\u{0}{}",
                found.recorded.as_ref().map(|r| r.0.as_str()).unwrap_or_default(),
                found.now.as_ref().map(|n| n.0.as_str()).unwrap_or_default()
            ),
        };
        if self.seen.insert(key) {
            self.found.push(found);
        }
    }

    /// The recorded log folded up to (not including) event `index`.
    fn fold_to(&mut self, index: usize) {
        while self.applied < index.min(self.events.len()) {
            let event = self.events[self.applied].clone();
            // The recording loaded, so it folds; an event that would not is skipped.
            let _ = self.projection.apply(event);
            self.applied += 1;
        }
    }

    fn compare(&mut self, call: &ModelCall, request: &ModelRequest<'_>) {
        let at = call.at;
        let system = self.paths.text(request.system);
        match &call.kind {
            CallKind::Step => {
                self.fold_to(at.index);
                let recorded = self.projection.request_header().cloned();
                if let Some(header) = &recorded {
                    if let Some(d) =
                        compare::text(at, "request: system prompt", &header.system_prompt, &system)
                    {
                        self.found(Found::Plain(d));
                    }
                    if let Some(d) = compare::tools(at, "request: tools", &header.tools, request.tools) {
                        self.found(Found::Plain(d));
                    }
                }
                let recorded = self.projection.messages().to_vec();
                let counts = (recorded.len(), request.messages.len());
                for found in compare::messages(&recorded, request.messages, &self.paths) {
                    self.found(Found::Message { at, found: Box::new(found), counts });
                }
            }
            CallKind::Aside(aside) => {
                let what = format!("{} request", aside.purpose);
                if let Some(d) = compare::text(at, &format!("{what}: system prompt"), &aside.system, &system)
                {
                    self.found(Found::Plain(d));
                }
                let prompt = match request.messages {
                    [Message::User(user)] => self.paths.text(&user.content),
                    other => format!("({} messages)", other.len()),
                };
                if let Some(d) = compare::text(at, &format!("{what}: prompt"), &aside.prompt, &prompt) {
                    self.found(Found::Plain(d));
                }
                if let Some(d) = compare::tools(at, &format!("{what}: tools"), &aside.tools, request.tools) {
                    self.found(Found::Plain(d));
                }
                if aside.tool_choice != request.tool_choice {
                    let d = Difference {
                        at,
                        what: format!("{what}: tool choice"),
                        recorded: format!("{:?}", aside.tool_choice),
                        now: format!("{:?}", request.tool_choice),
                    };
                    self.found(Found::Plain(d));
                }
            }
            CallKind::Summary { instruction } => {
                self.fold_to(at.index);
                if let Some(header) = self.projection.request_header().cloned()
                    && let Some(d) =
                        compare::text(at, "summary request: system prompt", &header.system_prompt, &system)
                {
                    self.found(Found::Plain(d));
                }
                // The instruction is the last user message, or ends it when the older part
                // ends with the user's own message.
                let last = match request.messages.last() {
                    Some(Message::User(user)) => self.paths.text(&user.content),
                    _ => String::new(),
                };
                let asked = match last.strip_suffix(instruction.as_str()) {
                    Some(before) if before.is_empty() || before.ends_with("\n\n") => instruction.as_str(),
                    _ => last.as_str(),
                };
                if let Some(d) = compare::text(at, "summary request: instruction", instruction, asked) {
                    self.found(Found::Plain(d));
                }
            }
        }
    }
}

/// The deltas that stream `message` (for a partial reply, so the loop logs the same part).
fn deltas(message: &AssistantMessage) -> Vec<ModelEvent> {
    let mut out = Vec::new();
    let mut index = 0;
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => out.push(ModelEvent::TextDelta(text.clone())),
            ContentBlock::Thinking { text, .. } => out.push(ModelEvent::ThinkingDelta(text.clone())),
            ContentBlock::ToolCall(call) => {
                out.push(ModelEvent::ToolCallDelta {
                    index,
                    id: Some(call.id.clone()),
                    name: Some(call.name.clone()),
                    arguments: call.arguments.clone(),
                });
                index += 1;
            }
            _ => {}
        }
    }
    out
}

impl ModelClient for LogModel {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn context_window(&self) -> Option<u64> {
        self.window
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        let plan = self.plan(&request);
        match plan {
            Plan::Complete(message) => {
                futures::stream::once(async move { Ok(ModelEvent::Completed(message)) }).boxed()
            }
            Plan::Abort(deltas, turn) => futures::stream::iter(deltas.into_iter().map(Ok))
                .chain(futures::stream::once(async move {
                    if let Some(turn) = turn {
                        turn.cancel();
                    }
                    // The loop sees the abort before this stream ends (as it saw the user's).
                    tokio::task::yield_now().await;
                    cancel.cancelled().await;
                    Err(ModelError::new(ModelErrorKind::Cancelled, "cancelled"))
                }))
                .boxed(),
            Plan::Fail(deltas, error) => futures::stream::iter(deltas.into_iter().map(Ok))
                .chain(futures::stream::once(async move { Err(error) }))
                .boxed(),
        }
    }
}
