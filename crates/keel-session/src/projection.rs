//! The fold from events to what the loop needs: the model-visible messages, the state
//! of an open turn, and totals. Loading a log and appending to it use this same fold,
//! so the in-memory history can never drift from the file.
//!
//! The fold is also the one check of a log's structure: the header first (and once, of a
//! version this build reads), seqs increasing, every `tool/call` and `tool/result` for a
//! call a reply asked for and not yet answered, and nothing model-visible (a reply, user
//! input, a new turn) while calls wait for results. An event that breaks these is refused
//! and changes nothing, whether it comes from a file being loaded or from a live append.

use keel_llm::{Message, ToolResultMessage, Usage};

use crate::context::CompactionOutcome;
use crate::history::History;

use crate::error::{SessionError, SessionErrorKind};
use crate::event::{
    Event, EventKind, FORMAT_VERSION, InputSource, RequestHeader, SessionHeader, TurnEndReason,
};

/// A tool call that has been requested but has no result yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// Seq of the assistant message that asked for it.
    pub message_seq: u64,
    /// Seq of its `tool/call` event, once the tool started.
    pub started_seq: Option<u64>,
}

/// A turn that has started and not ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTurn {
    /// The turn number.
    pub turn: u32,
    /// The open step within it, if any.
    pub open_step: Option<u32>,
    /// The last step number started in this turn.
    pub last_step: u32,
    /// What its task asks for, once logged (`turn/intent`).
    pub intent: Option<crate::aside::TaskIntent>,
}

/// Everything derived from a log, kept up to date one event at a time.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    header: Option<SessionHeader>,
    request_header: Option<RequestHeader>,
    history: History,
    pending: Vec<PendingCall>,
    /// Seq of a `compaction/start` without its end.
    open_compaction: Option<u64>,
    /// The context size the provider last reported (prompt plus reply tokens) and how
    /// many messages it covered; unset by anything that edits the history.
    reported_context: Option<(u64, usize)>,
    open_turn: Option<OpenTurn>,
    last_seq: Option<u64>,
    turns: u32,
    last_turn_end: Option<TurnEndReason>,
    usage: Usage,
    first_prompt: Option<String>,
    call_ids: std::collections::HashSet<String>,
    /// Index of the first message of the current task: after the last turn that ended
    /// other than by a crash (loop detection counts from here).
    task_start: usize,
}

impl Projection {
    /// An empty projection.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks that `event` may follow what was folded so far (see the module docs).
    pub fn check(&self, event: &Event) -> Result<(), SessionError> {
        let refuse = |message: String| Err(SessionError::new(SessionErrorKind::Corrupt, message));
        match (self.last_seq, &event.kind) {
            (None, EventKind::SessionHeader(header)) if header.version > FORMAT_VERSION => {
                return Err(SessionError::new(
                    SessionErrorKind::Version,
                    format!(
                        "log format version {} is newer than this keel supports ({FORMAT_VERSION}); upgrade keel",
                        header.version
                    ),
                ));
            }
            (None, EventKind::SessionHeader(_)) => return Ok(()),
            (None, _) => return refuse("the first event is not session/header".into()),
            (Some(_), EventKind::SessionHeader(_)) => return refuse("a second session/header".into()),
            (Some(last), _) if event.seq <= last => {
                return refuse(format!("seq {} does not follow {last}", event.seq));
            }
            _ => {}
        }
        let pending = |id: &str| self.pending.iter().find(|p| p.call_id == id);
        match &event.kind {
            EventKind::ToolCall(call) => match pending(&call.call_id) {
                Some(p) if p.started_seq.is_none() => Ok(()),
                Some(_) => refuse(format!("tool/call for `{}` twice", call.call_id)),
                None => {
                    refuse(format!("tool/call for `{}`, which no unanswered reply asked for", call.call_id))
                }
            },
            EventKind::ToolResult(result) if pending(&result.call_id).is_none() => refuse(format!(
                "tool/result for `{}`, which no unanswered reply asked for (an orphan result)",
                result.call_id
            )),
            EventKind::CompactionStart(_) if self.open_compaction.is_some() => {
                refuse("compaction/start while a compaction is open".into())
            }
            EventKind::CompactionEnd(_) if self.open_compaction.is_none() => {
                refuse("compaction/end without compaction/start".into())
            }
            EventKind::CompactionEnd(end) if end.outcome != CompactionOutcome::Aborted => {
                match self.history.index_at(end.first_kept_seq) {
                    Some(index) if !self.history.is_boundary(index) => refuse(format!(
                        "compaction/end keeps from seq {}, which would part a tool result from its call",
                        end.first_kept_seq
                    )),
                    _ => Ok(()),
                }
            }
            EventKind::AssistantMessage(_)
            | EventKind::UserMessage(_)
            | EventKind::TurnStart(_)
            | EventKind::CompactionStart(_)
            | EventKind::ContextPruned(_)
                if !self.pending.is_empty() =>
            {
                let ids: Vec<&str> = self.pending.iter().map(|p| p.call_id.as_str()).collect();
                refuse(format!("{} while calls {} have no result", event.kind.type_name(), ids.join(", ")))
            }
            _ => Ok(()),
        }
    }

    /// Checks `event` (see [`Projection::check`]) and folds it in; a refused event
    /// changes nothing.
    pub fn apply(&mut self, event: Event) -> Result<(), SessionError> {
        self.check(&event)?;
        self.fold(event);
        Ok(())
    }

    /// Folds an event already checked.
    pub(crate) fn fold(&mut self, event: Event) {
        let seq = event.seq;
        self.last_seq = Some(seq);
        match event.kind {
            EventKind::SessionHeader(header) => self.header = Some(header),
            EventKind::RequestHeader(header) => self.request_header = Some(header),
            EventKind::TurnStart(start) => {
                self.turns = self.turns.max(start.turn);
                self.open_turn =
                    Some(OpenTurn { turn: start.turn, open_step: None, last_step: 0, intent: None });
            }
            EventKind::TurnEnd(end) => {
                self.open_turn = None;
                self.last_turn_end = Some(end.reason);
                if end.reason != TurnEndReason::Interrupted {
                    self.task_start = self.history.len();
                }
            }
            EventKind::StepStart(start) => {
                if let Some(turn) = &mut self.open_turn {
                    turn.open_step = Some(start.step);
                    turn.last_step = start.step;
                }
            }
            EventKind::StepEnd(_) => {
                if let Some(turn) = &mut self.open_turn {
                    turn.open_step = None;
                }
            }
            EventKind::UserMessage(input) => {
                if self.first_prompt.is_none() && input.source != InputSource::Context {
                    self.first_prompt = Some(input.text.clone());
                }
                // Consecutive user input (context then prompt, a prompt then steering, a
                // prompt after a crash mid-request) is one message.
                self.history.push_user(seq, &input.text, input.images);
            }
            EventKind::AssistantMessage(message) => {
                self.usage += message.usage;
                for call in message.tool_calls() {
                    self.call_ids.insert(call.id.clone());
                    self.pending.push(PendingCall {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        message_seq: seq,
                        started_seq: None,
                    });
                }
                // An aborted request that produced nothing is logged but not sent back:
                // providers reject empty assistant messages.
                if !message.is_empty() {
                    let usage = message.usage;
                    self.history.push_assistant(seq, message);
                    if usage.input_tokens > 0 {
                        self.reported_context =
                            Some((usage.input_tokens + usage.output_tokens, self.history.len()));
                    }
                }
            }
            EventKind::ToolCall(call) => {
                if let Some(pending) = self.pending.iter_mut().find(|p| p.call_id == call.call_id) {
                    pending.started_seq = Some(seq);
                }
            }
            EventKind::ToolResult(result) => {
                if let Some(index) = self.pending.iter().position(|p| p.call_id == result.call_id) {
                    self.pending.remove(index);
                }
                self.history.push_result(
                    seq,
                    ToolResultMessage {
                        call_id: result.call_id,
                        name: result.name,
                        content: result.content,
                        is_error: result.is_error,
                        images: result.images,
                    },
                );
            }
            EventKind::ContextPruned(pruned) => {
                self.reported_context = None;
                for result in &pruned.results {
                    self.history.prune(&result.call_id, &result.stub);
                }
            }
            EventKind::ImagesWithdrawn(withdrawn) => {
                self.reported_context = None;
                self.history.withdraw_images(&withdrawn.sha256);
            }
            EventKind::CompactionStart(_) => self.open_compaction = Some(seq),
            EventKind::ModelAside(aside) => {
                if let Some(reply) = &aside.reply {
                    self.usage += reply.usage;
                }
            }
            EventKind::TurnIntent(intent) => {
                if let Some(turn) = &mut self.open_turn {
                    turn.intent = Some(intent);
                }
            }
            // A record for people: what a hook gave the model is logged where the model
            // reads it.
            EventKind::HookRun(_) => {}
            EventKind::CompactionEnd(end) => {
                self.open_compaction = None;
                self.usage += end.usage;
                if end.outcome != CompactionOutcome::Aborted {
                    self.reported_context = None;
                    // Nothing at or after the first kept seq: the summary replaces all.
                    let index = self.history.index_at(end.first_kept_seq).unwrap_or(self.history.len());
                    let dropped = self.history.compact(index, seq, &end.summary);
                    // Loop detection's task starts after the summary at the latest.
                    self.task_start = self.task_start.saturating_sub(dropped).max(1).min(self.history.len());
                }
            }
        }
    }

    /// The model-visible conversation, in log order.
    pub fn messages(&self) -> &[Message] {
        self.history.messages()
    }

    /// The context size the provider reported for the last reply (prompt plus reply
    /// tokens) and the number of leading messages it covers; `None` when no reply
    /// reported usage since the history was last pruned or compacted.
    pub fn reported_context(&self) -> Option<(u64, usize)> {
        self.reported_context.filter(|(_, covered)| *covered <= self.history.len())
    }

    /// The seq of the event the message at `index` starts at.
    pub fn message_seq(&self, index: usize) -> Option<u64> {
        self.history.seq(index)
    }

    /// The seq of a `compaction/start` not yet ended (a crash mid-compaction).
    pub fn open_compaction(&self) -> Option<u64> {
        self.open_compaction
    }

    /// The session header, once seen.
    pub fn header(&self) -> Option<&SessionHeader> {
        self.header.as_ref()
    }

    /// The request header in force.
    pub fn request_header(&self) -> Option<&RequestHeader> {
        self.request_header.as_ref()
    }

    /// Calls still waiting for a result, in the model's order.
    pub fn pending_calls(&self) -> &[PendingCall] {
        &self.pending
    }

    /// The turn in progress, if the last turn has not ended.
    pub fn open_turn(&self) -> Option<&OpenTurn> {
        self.open_turn.as_ref()
    }

    /// Seq of the last event applied.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Number of turns started.
    pub fn turns(&self) -> u32 {
        self.turns
    }

    /// How the last finished turn ended.
    pub fn last_turn_end(&self) -> Option<TurnEndReason> {
        self.last_turn_end
    }

    /// Tokens used by every request in the session.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Index in [`Projection::messages`] where the current task begins: after the last
    /// turn that ended other than by a crash, so a resumed task keeps its history.
    pub fn task_start(&self) -> usize {
        self.task_start.min(self.history.len())
    }

    /// Every tool-call id used in the session so far.
    pub fn call_ids(&self) -> &std::collections::HashSet<String> {
        &self.call_ids
    }

    /// The first user message, for listings.
    pub fn first_prompt(&self) -> Option<&str> {
        self.first_prompt.as_deref()
    }

    /// True when the log ends mid-turn or with unanswered calls: repair is needed
    /// before the next request.
    pub fn needs_repair(&self) -> bool {
        self.open_turn.is_some() || !self.pending.is_empty() || self.open_compaction.is_some()
    }
}

/// Folds events, in order, into the provider-neutral message list; an event that breaks
/// the log's structure is an error naming its seq.
///
/// The loop never keeps a history of its own: every request is built from this fold.
pub fn derive_messages<'a, I: IntoIterator<Item = &'a Event>>(
    events: I,
) -> Result<Vec<Message>, SessionError> {
    let mut projection = Projection::new();
    for event in events {
        let seq = event.seq;
        projection
            .apply(event.clone())
            .map_err(|e| SessionError { message: format!("event {seq}: {}", e.message), ..e })?;
    }
    Ok(projection.history.messages().to_vec())
}
