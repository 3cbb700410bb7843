//! A recorded session read as a script to play again: each turn's input, and every model
//! request of the session in the order keel made it (a step's, a request beside the
//! conversation, a compaction's summary) with the reply the log recorded for it.

use std::collections::HashMap;

use keel_llm::{AssistantMessage, ContentBlock, ModelErrorKind};
use keel_session::{
    CompactionOutcome, CompactionReason, Effect, Event, EventKind, InputSource, ModelAside, RequestHeader,
    SessionHeader, ToolResultData, TurnEndReason,
};

/// Where in the recording something happened, as people number it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Place {
    /// The recorded event's seq (the order differences are reported in).
    pub seq: u64,
    /// The turn (0 outside turns).
    pub turn: u32,
    /// The step within the turn (0 before its first step).
    pub step: u32,
    /// Index of the event in the log: for a step, its `step/start`.
    pub index: usize,
}

/// What a request was for.
#[derive(Debug, Clone)]
pub enum CallKind {
    /// A step of the conversation.
    Step,
    /// A request beside the conversation (the task's intent, a tool's own), as logged.
    Aside(Box<ModelAside>),
    /// A compaction's summary request, with the instruction that ends it.
    Summary { instruction: String },
}

/// How a recorded request ended.
#[derive(Debug, Clone)]
pub enum Answer {
    /// With this reply.
    Reply(AssistantMessage),
    /// With this much of a reply, then the user aborted (or keel stopped).
    Aborted(AssistantMessage),
    /// With this much of a reply, then this error.
    Failed(AssistantMessage, ModelErrorKind, String),
}

/// One recorded model request and how it was answered.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// Where.
    pub at: Place,
    /// What for.
    pub kind: CallKind,
    /// The recorded reply.
    pub answer: Answer,
    /// Steering the user typed while this step ran (logged after it).
    pub steers_after: Vec<String>,
}

/// One recorded turn.
#[derive(Debug, Clone, Default)]
pub struct TurnScript {
    /// Its number.
    pub turn: u32,
    /// The input that started it.
    pub prompt: String,
    /// The images the prompt carried.
    pub images: Vec<keel_llm::Image>,
    /// Steering queued before its first step.
    pub steers_before: Vec<String>,
    /// Its model requests, in order.
    pub calls: Vec<ModelCall>,
    /// How it ended.
    pub reason: Option<TurnEndReason>,
    /// Where it ended.
    pub end: Place,
}

/// What the session did, in order.
#[derive(Debug, Clone)]
pub enum Action {
    /// A turn.
    Turn(TurnScript),
    /// A compaction asked for between turns (`/compact`), with its summary request.
    Compact(Vec<ModelCall>),
}

/// A call the model asked for, as recorded.
#[derive(Debug, Clone)]
pub struct RecordedCall {
    /// The tool.
    pub name: String,
    /// The raw arguments.
    pub arguments: String,
    /// Where its result is.
    pub at: Place,
    /// Its result, when logged.
    pub result: Option<ToolResultData>,
}

/// The whole recording.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The session's header.
    pub header: Option<SessionHeader>,
    /// The first request header (the model and the profile the session started with).
    pub request: Option<RequestHeader>,
    /// Models the session switched to later (`/model`), by name.
    pub switched: Vec<String>,
    /// The environment block the session began with.
    pub environment: Option<String>,
    /// Turns and compactions, in order.
    pub actions: Vec<Action>,
    /// Every call the model asked for, by call id.
    pub calls: HashMap<String, RecordedCall>,
    /// The calls in the order the model asked for them.
    pub order: Vec<String>,
    /// Successful calls that wrote a file (its content kept for undo), in order.
    pub writes: Vec<String>,
    /// Shell commands that ran.
    pub shells: usize,
}

/// The text of a compacted summary the model wrote, from the summary message keel built
/// around it (`Summary of the work so far:` … the end marker).
fn summary_reply(summary: &str) -> String {
    let start = "Summary of the work so far:\n";
    let body = summary.split_once(start).map_or(summary, |(_, body)| body);
    let end = format!("\n{}", keel_agent::compact::plan::SUMMARY_END);
    body.split_once(end.as_str()).map_or(body, |(body, _)| body).to_owned()
}

/// `model request failed (server): boom` as the error's kind and message.
fn failure(message: Option<&str>) -> (ModelErrorKind, String) {
    let text = message.unwrap_or_default();
    let parsed = text.strip_prefix("model request failed (").and_then(|rest| rest.split_once("): "));
    match parsed {
        Some((kind, rest)) => {
            let kind = ModelErrorKind::from_name(kind).unwrap_or(ModelErrorKind::Server);
            (kind, rest.to_owned())
        }
        None => (ModelErrorKind::Server, text.to_owned()),
    }
}

#[derive(Default)]
struct Reader {
    script: Script,
    turn: Option<TurnScript>,
    /// The step open now, and whether its reply was logged.
    step: Option<(Place, bool)>,
    step_number: u32,
    /// A compaction whose summary request is waiting for its end.
    summary: Option<(Place, String)>,
    /// That compaction's summary requests refused for their images, before the one that
    /// went through.
    summary_refusals: Vec<ModelCall>,
    /// Calls' effects, from their `tool/call`.
    effects: HashMap<String, Effect>,
}

impl Reader {
    fn place(&self, seq: u64, index: usize) -> Place {
        let turn = self.turn.as_ref().map_or(0, |t| t.turn);
        Place { seq, turn, step: self.step_number, index }
    }

    fn push(&mut self, call: ModelCall) {
        match &mut self.turn {
            Some(turn) => turn.calls.push(call),
            None => self.script.actions.push(Action::Compact(vec![call])),
        }
    }

    /// The calls of one compaction: in the turn it happened in, or one compaction between
    /// turns.
    fn push_compaction(&mut self, calls: Vec<ModelCall>) {
        match &mut self.turn {
            Some(turn) => turn.calls.extend(calls),
            None if calls.is_empty() => {}
            None => self.script.actions.push(Action::Compact(calls)),
        }
    }

    /// A step that ended with no reply logged: failed before any output, or stopped.
    fn close_step(&mut self, next: Option<&EventKind>) {
        let Some((at, false)) = self.step.take() else { return };
        let answer = match next {
            Some(EventKind::CompactionStart(start)) if start.reason == CompactionReason::Overflow => {
                Answer::Failed(AssistantMessage::default(), ModelErrorKind::ContextOverflow, String::new())
            }
            Some(EventKind::TurnEnd(end)) if end.reason == TurnEndReason::Error => {
                let (kind, message) = failure(end.message.as_deref());
                Answer::Failed(AssistantMessage::default(), kind, message)
            }
            _ => Answer::Aborted(AssistantMessage::default()),
        };
        self.push(ModelCall { at, kind: CallKind::Step, answer, steers_after: Vec::new() });
    }

    fn event(&mut self, index: usize, event: &Event) {
        let at = self.place(event.seq, index);
        match &event.kind {
            EventKind::CompactionStart(_) | EventKind::TurnEnd(_) | EventKind::StepStart(_) => {
                self.close_step(Some(&event.kind))
            }
            _ => {}
        }
        match &event.kind {
            EventKind::SessionHeader(header) => self.script.header = Some(header.clone()),
            EventKind::RequestHeader(header) => match &self.script.request {
                None => self.script.request = Some(header.clone()),
                Some(first) if first.model != header.model => self.script.switched.push(header.model.clone()),
                Some(_) => {}
            },
            EventKind::TurnStart(start) => {
                self.step_number = 0;
                self.turn = Some(TurnScript { turn: start.turn, ..TurnScript::default() });
            }
            EventKind::UserMessage(user) => self.user(user.source, &user.text, &user.images),
            EventKind::StepStart(start) => {
                self.step_number = start.step;
                self.step = Some((Place { step: start.step, ..at }, false));
            }
            EventKind::AssistantMessage(message) => {
                if let Some((step_at, replied)) = &mut self.step {
                    *replied = true;
                    let answer = if message.interrupted {
                        Answer::Aborted(message.clone())
                    } else {
                        Answer::Reply(message.clone())
                    };
                    let step_at = *step_at;
                    self.push(ModelCall {
                        at: step_at,
                        kind: CallKind::Step,
                        answer,
                        steers_after: Vec::new(),
                    });
                }
                for block in &message.content {
                    if let ContentBlock::ToolCall(call) = block {
                        self.script.order.push(call.id.clone());
                        self.script.calls.insert(
                            call.id.clone(),
                            RecordedCall {
                                name: call.name.clone(),
                                arguments: call.arguments.clone(),
                                at,
                                result: None,
                            },
                        );
                    }
                }
            }
            // The step's (or a compaction's summary) first request was refused for its images
            // and the loop sent it again with notes in their place: replay the refusal, then
            // compare the retry with the log as it reads after the withdrawal.
            EventKind::ImagesWithdrawn(withdrawn) => {
                let refusal = Answer::Failed(
                    AssistantMessage::default(),
                    ModelErrorKind::InvalidRequest,
                    withdrawn.reason.clone(),
                );
                if let Some((step_at, false)) = &mut self.step {
                    let refused = ModelCall {
                        at: *step_at,
                        kind: CallKind::Step,
                        answer: refusal,
                        steers_after: Vec::new(),
                    };
                    step_at.index = index + 1;
                    self.push(refused);
                } else if let Some((summary_at, instruction)) = &mut self.summary {
                    let kind = CallKind::Summary { instruction: instruction.clone() };
                    let refused =
                        ModelCall { at: *summary_at, kind, answer: refusal, steers_after: Vec::new() };
                    summary_at.index = index + 1;
                    self.summary_refusals.push(refused);
                }
            }
            // A step with no reply stays open until what follows tells how it failed.
            EventKind::StepEnd(_) if matches!(self.step, Some((_, true))) => self.step = None,
            EventKind::ModelAside(aside) => {
                let answer = match (&aside.reply, &aside.error) {
                    (Some(reply), _) => Answer::Reply(reply.clone()),
                    (None, error) => Answer::Failed(
                        AssistantMessage::default(),
                        ModelErrorKind::Server,
                        error.clone().unwrap_or_default(),
                    ),
                };
                self.push(ModelCall {
                    at,
                    kind: CallKind::Aside(Box::new(aside.clone())),
                    answer,
                    steers_after: Vec::new(),
                });
            }
            EventKind::CompactionStart(start) if start.reason != CompactionReason::Restart => {
                self.summary = Some((at, start.instruction.clone()));
            }
            EventKind::CompactionEnd(end) => {
                if let Some((at, instruction)) = self.summary.take() {
                    let failed =
                        |why: &str| why.strip_prefix("the summary request failed: ").map(str::to_owned);
                    let reply = |text: String| {
                        Answer::Reply(AssistantMessage {
                            content: vec![ContentBlock::Text { text }],
                            usage: end.usage,
                            ..AssistantMessage::default()
                        })
                    };
                    let answer = match (end.outcome, end.failure.as_deref()) {
                        (CompactionOutcome::Compacted, _) => Some(reply(summary_reply(&end.summary))),
                        (_, Some(why)) if failed(why).is_some() => Some(Answer::Failed(
                            AssistantMessage::default(),
                            ModelErrorKind::Server,
                            failed(why).unwrap_or_default(),
                        )),
                        // Too long to ask: no request was made.
                        (_, Some(why)) if why.contains("too long to summarize") => None,
                        (_, Some(_)) => Some(reply(String::new())),
                        (_, None) => Some(Answer::Aborted(AssistantMessage::default())),
                    };
                    let mut calls = std::mem::take(&mut self.summary_refusals);
                    if let Some(answer) = answer {
                        let kind = CallKind::Summary { instruction };
                        calls.push(ModelCall { at, kind, answer, steers_after: Vec::new() });
                    }
                    self.push_compaction(calls);
                }
            }
            EventKind::ToolCall(call) => {
                if let Some(effect) = &call.effect {
                    self.effects.insert(call.call_id.clone(), effect.clone());
                }
            }
            EventKind::ToolResult(result) => {
                match self.effects.get(&result.call_id) {
                    Some(Effect::Writes { .. }) if !result.is_error => {
                        self.script.writes.push(result.call_id.clone())
                    }
                    Some(Effect::Runs) => self.script.shells += 1,
                    _ => {}
                }
                if let Some(call) = self.script.calls.get_mut(&result.call_id) {
                    call.at = at;
                    call.result = Some(result.clone());
                }
            }
            EventKind::TurnEnd(end) => {
                if let Some(mut turn) = self.turn.take() {
                    turn.reason = Some(end.reason);
                    turn.end = at;
                    self.script.actions.push(Action::Turn(turn));
                }
                self.step_number = 0;
            }
            _ => {}
        }
    }

    fn user(&mut self, source: InputSource, text: &str, images: &[keel_llm::Image]) {
        let Some(turn) = &mut self.turn else { return };
        match source {
            InputSource::Context if self.script.environment.is_none() => {
                self.script.environment = Some(text.to_owned())
            }
            InputSource::Prompt | InputSource::FollowUp
                if turn.prompt.is_empty() && turn.calls.is_empty() =>
            {
                turn.prompt = text.to_owned();
                turn.images = images.to_vec();
            }
            InputSource::Prompt | InputSource::FollowUp | InputSource::Steer => {
                if self.step_number == 0 && turn.calls.iter().all(|c| !matches!(c.kind, CallKind::Step)) {
                    turn.steers_before.push(text.to_owned());
                } else if let Some(call) =
                    turn.calls.iter_mut().rev().find(|c| matches!(c.kind, CallKind::Step))
                {
                    call.steers_after.push(text.to_owned());
                }
            }
            // Written by keel or its hooks: the replay writes its own.
            _ => {}
        }
    }
}

/// Reads `events` as a script.
pub fn read(events: &[Event]) -> Script {
    let mut reader = Reader::default();
    for (index, event) in events.iter().enumerate() {
        reader.event(index, event);
    }
    reader.close_step(None);
    if let Some(mut turn) = reader.turn.take() {
        // The log ends inside a turn (it runs elsewhere, or keel was killed).
        turn.reason = Some(TurnEndReason::Interrupted);
        reader.script.actions.push(Action::Turn(turn));
    }
    reader.script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_summaries_are_read_back() {
        assert_eq!(
            failure(Some("model request failed (rate_limited): slow down")),
            (ModelErrorKind::RateLimited, "slow down".to_owned())
        );
        assert_eq!(failure(Some("odd")), (ModelErrorKind::Server, "odd".to_owned()));
        let end = keel_agent::compact::plan::SUMMARY_END;
        let text = format!("[marker]\n\nSummary of the work so far:\n## Goal\nfix it\n{end}");
        assert_eq!(summary_reply(&text), "## Goal\nfix it");
    }
}
