//! The event vocabulary: one line of the session log each.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use keel_llm::{AssistantMessage, ToolDefinition, Usage};

use crate::error::SessionError;

/// Version of the log format this build writes, and the newest it reads.
///
/// - 1: the first format.
/// - 2: assistant messages may carry `origin` (the provider and model that wrote them),
///   `redacted_thinking` and `provider_item` blocks, tool calls an `item_id`, usage
///   `cache_write_tokens`. Every addition is optional, so a version 1 log loads as it is
///   and derives the same messages; a keel that reads only version 1 refuses a version 2
///   log by its header instead of failing on a line it does not know.
/// - 3: `model/aside` (a model request made beside the conversation: a tool's own, or the
///   turn's intent) and `turn/intent`; user input may carry a `reason` (why a hook or
///   keel added it). A version 2 log loads as it is.
/// - 4: `hook/run` (one run of a user's hook command and its decision). A version 3 log
///   loads as it is.
/// - 5: `images/withdrawn` (images a provider refused, sent as notes from then on). A
///   version 4 log loads as it is.
pub const FORMAT_VERSION: u32 = 5;

/// One entry of the session log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Position in the log; strictly increasing, the header is 0.
    pub seq: u64,
    /// When it was appended (RFC 3339, UTC).
    pub time: String,
    /// What happened.
    pub kind: EventKind,
}

/// Everything that can happen in a session, tagged `type` with a `data` payload on disk.
/// New kinds come with new features (a format version each), so matches outside this
/// crate need a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum EventKind {
    /// First line of every log.
    #[serde(rename = "session/header")]
    SessionHeader(SessionHeader),
    /// The provider, model, system prompt and tools in force from here on.
    #[serde(rename = "request/header")]
    RequestHeader(RequestHeader),
    /// A turn begins.
    #[serde(rename = "turn/start")]
    TurnStart(TurnStart),
    /// A turn ends, with the reason.
    #[serde(rename = "turn/end")]
    TurnEnd(TurnEnd),
    /// A step (one model request plus its tools) begins.
    #[serde(rename = "step/start")]
    StepStart(StepStart),
    /// A step ends.
    #[serde(rename = "step/end")]
    StepEnd(StepEnd),
    /// Input from the user or injected on their behalf.
    #[serde(rename = "user/message")]
    UserMessage(UserInput),
    /// A model reply (possibly partial, see `interrupted`).
    #[serde(rename = "assistant/message")]
    AssistantMessage(AssistantMessage),
    /// A tool is about to run. Appended (and synced) before it starts.
    #[serde(rename = "tool/call")]
    ToolCall(ToolCallStarted),
    /// The one result of a tool call.
    #[serde(rename = "tool/result")]
    ToolResult(ToolResultData),
    /// Old tool results replaced by stubs to save context.
    #[serde(rename = "context/pruned")]
    ContextPruned(crate::context::Pruned),
    /// A compaction begins (the summary request follows).
    #[serde(rename = "compaction/start")]
    CompactionStart(crate::context::CompactionStart),
    /// A compaction ends: the older part is replaced by the summary (or nothing changed).
    #[serde(rename = "compaction/end")]
    CompactionEnd(crate::context::CompactionEnd),
    /// A model request made beside the conversation (by a tool, or for the turn's
    /// intent), with its reply: not part of the conversation, logged so it can be read
    /// and replayed.
    #[serde(rename = "model/aside")]
    ModelAside(crate::aside::ModelAside),
    /// What the turn's task asks for, as read at its start.
    #[serde(rename = "turn/intent")]
    TurnIntent(crate::aside::TaskIntent),
    /// A user's hook command ran, and what it decided (not model-visible).
    #[serde(rename = "hook/run")]
    HookRun(crate::hook::HookRun),
    /// Images a provider refused, sent as notes from here on (the request without them
    /// went through).
    #[serde(rename = "images/withdrawn")]
    ImagesWithdrawn(crate::withdrawn::ImagesWithdrawn),
}

impl EventKind {
    /// The on-disk `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::SessionHeader(_) => "session/header",
            EventKind::RequestHeader(_) => "request/header",
            EventKind::TurnStart(_) => "turn/start",
            EventKind::TurnEnd(_) => "turn/end",
            EventKind::StepStart(_) => "step/start",
            EventKind::StepEnd(_) => "step/end",
            EventKind::UserMessage(_) => "user/message",
            EventKind::AssistantMessage(_) => "assistant/message",
            EventKind::ToolCall(_) => "tool/call",
            EventKind::ToolResult(_) => "tool/result",
            EventKind::ContextPruned(_) => "context/pruned",
            EventKind::CompactionStart(_) => "compaction/start",
            EventKind::CompactionEnd(_) => "compaction/end",
            EventKind::ModelAside(_) => "model/aside",
            EventKind::TurnIntent(_) => "turn/intent",
            EventKind::HookRun(_) => "hook/run",
            EventKind::ImagesWithdrawn(_) => "images/withdrawn",
        }
    }

    /// The images this event carries (user input and tool results carry any).
    pub fn images(&self) -> &[keel_llm::Image] {
        match self {
            EventKind::UserMessage(input) => &input.images,
            EventKind::ToolResult(result) => &result.images,
            _ => &[],
        }
    }

    /// The images this event carries, to fill in their bytes.
    pub fn images_mut(&mut self) -> &mut [keel_llm::Image] {
        match self {
            EventKind::UserMessage(input) => &mut input.images,
            EventKind::ToolResult(result) => &mut result.images,
            _ => &mut [],
        }
    }
}

/// Identity of a session; the first event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Log format version ([`FORMAT_VERSION`] when written by this build).
    pub version: u32,
    /// The session id (also the file stem).
    pub id: String,
    /// Creation time, RFC 3339.
    pub created: String,
    /// The workspace folder the session ran in.
    pub cwd: String,
    /// Set when this session was forked from another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
    /// Set when this session is a child started by another session's `task` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<SpawnRef>,
}

/// The call that started a child session (a subagent): the parent session, its
/// `tool/call` event and call id, and the agent definition the child runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnRef {
    /// The parent's session id.
    pub id: String,
    /// The seq of the parent's `tool/call` event (0 when it is not known).
    #[serde(default)]
    pub seq: u64,
    /// The parent's call id.
    #[serde(default)]
    pub call_id: String,
    /// The agent definition the child runs (`general`, or a file's name).
    #[serde(default)]
    pub agent: String,
}

/// Where a forked session branched off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    /// The parent's session id.
    pub id: String,
    /// The last parent event included in the fork.
    pub seq: u64,
}

/// What every following request is built with, until the next request header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestHeader {
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The system prompt.
    pub system_prompt: String,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// The harness profile the requests are made with, and why (`small: 1.5B parameters
    /// (the server's model list)`), when the embedder names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// Data of `turn/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    /// Turn number in the session, from 1.
    pub turn: u32,
}

/// Data of `turn/end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// Turn number in the session.
    pub turn: u32,
    /// Why the turn ended.
    pub reason: TurnEndReason,
    /// A human-readable explanation (error text, limit reached, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Tokens used by the turn's requests.
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEndReason {
    /// The model answered without asking for tools.
    Completed,
    /// The user aborted.
    Aborted,
    /// A policy or hook stopped the turn.
    Blocked,
    /// An error the model cannot fix (auth, retries exhausted, …).
    Error,
    /// The step limit was reached.
    MaxSteps,
    /// The model kept repeating the same calls and was stopped.
    Looping,
    /// keel stopped mid-turn (crash, kill); closed by repair.
    Interrupted,
}

impl TurnEndReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEndReason::Completed => "completed",
            TurnEndReason::Aborted => "aborted",
            TurnEndReason::Blocked => "blocked",
            TurnEndReason::Error => "error",
            TurnEndReason::MaxSteps => "max_steps",
            TurnEndReason::Looping => "looping",
            TurnEndReason::Interrupted => "interrupted",
        }
    }
}

/// Data of `step/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepStart {
    /// Step number within the turn, from 1.
    pub step: u32,
}

/// Data of `step/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEnd {
    /// Step number within the turn.
    pub step: u32,
    /// True when the step was cut short (abort, error, crash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// Data of `user/message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInput {
    /// The text.
    pub text: String,
    /// How the input arrived.
    #[serde(default, skip_serializing_if = "InputSource::is_prompt")]
    pub source: InputSource,
    /// Why keel or a hook added it (the evidence a nudge acted on); `None` for the user's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Images the user attached: references (type, hash, size); the store keeps the
    /// bytes beside the log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<keel_llm::Image>,
}

/// How a user message entered the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InputSource {
    /// The input that started the turn.
    #[default]
    Prompt,
    /// Steering input that joined a running turn.
    Steer,
    /// Follow-up input queued for after a turn.
    FollowUp,
    /// Added by a hook (a turn-stopping nudge, a user's hook's context or reason).
    Hook,
    /// Written by keel itself (e.g. the step-limit summary request).
    Harness,
    /// Facts about the environment, logged before a new session's first prompt.
    Context,
}

impl InputSource {
    fn is_prompt(&self) -> bool {
        *self == InputSource::Prompt
    }
}

/// Data of `tool/call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallStarted {
    /// The call id from the assistant message.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// The raw argument string.
    pub arguments: String,
    /// What the call does, as its tool declares it (absent in logs before version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<crate::aside::Effect>,
}

/// Data of `tool/result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResultData {
    /// The call this answers.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// Seq of the call's `tool/call` event, or of its assistant message when it never started.
    pub source_seq: u64,
    /// Text for the model.
    pub content: String,
    /// True when the call failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Machine-readable failure class (`unknown_tool`, `invalid_arguments`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// True when this result ends the turn after the step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub concludes_turn: bool,
    /// Wall time of the call in milliseconds, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What the call changed in a file, for people (never sent to a model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<crate::FileChange>,
    /// Images the tool returned: references, as for user input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<keel_llm::Image>,
}

#[derive(Serialize)]
struct EventOut<'a> {
    seq: u64,
    time: &'a str,
    #[serde(flatten)]
    kind: &'a EventKind,
}

#[derive(Deserialize)]
struct EventIn<'a> {
    seq: u64,
    #[serde(borrow)]
    time: std::borrow::Cow<'a, str>,
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    data: &'a RawValue,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        EventOut { seq: self.seq, time: &self.time, kind: &self.kind }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Owned detour: works for any deserializer; the fast path is `Event::parse`.
        let value = serde_json::Value::deserialize(deserializer)?;
        let text = serde_json::to_string(&value).map_err(D::Error::custom)?;
        Event::parse(&text).map_err(|e| D::Error::custom(e.message))
    }
}

impl Event {
    /// Parses one log line. The payload is decoded straight into its type.
    pub fn parse(line: &str) -> Result<Event, SessionError> {
        let raw: EventIn<'_> = serde_json::from_str(line).map_err(SessionError::corrupt)?;
        let data = raw.data.get();
        fn decode<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, SessionError> {
            serde_json::from_str(data).map_err(SessionError::corrupt)
        }
        let kind = match raw.kind.as_ref() {
            "session/header" => EventKind::SessionHeader(decode(data)?),
            "request/header" => EventKind::RequestHeader(decode(data)?),
            "turn/start" => EventKind::TurnStart(decode(data)?),
            "turn/end" => EventKind::TurnEnd(decode(data)?),
            "step/start" => EventKind::StepStart(decode(data)?),
            "step/end" => EventKind::StepEnd(decode(data)?),
            "user/message" => EventKind::UserMessage(decode(data)?),
            "assistant/message" => EventKind::AssistantMessage(decode(data)?),
            "tool/call" => EventKind::ToolCall(decode(data)?),
            "tool/result" => EventKind::ToolResult(decode(data)?),
            "context/pruned" => EventKind::ContextPruned(decode(data)?),
            "compaction/start" => EventKind::CompactionStart(decode(data)?),
            "compaction/end" => EventKind::CompactionEnd(decode(data)?),
            "model/aside" => EventKind::ModelAside(decode(data)?),
            "turn/intent" => EventKind::TurnIntent(decode(data)?),
            "hook/run" => EventKind::HookRun(decode(data)?),
            "images/withdrawn" => EventKind::ImagesWithdrawn(decode(data)?),
            other => {
                return Err(SessionError::corrupt_msg(format!(
                    "unknown event type `{other}` (written by a newer keel?)"
                )));
            }
        };
        Ok(Event { seq: raw.seq, time: raw.time.into_owned(), kind })
    }

    /// Serializes the event as one JSON line, newline included, into `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) -> Result<(), SessionError> {
        serde_json::to_writer(&mut *out, self).map_err(SessionError::encode)?;
        out.push(b'\n');
        Ok(())
    }
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
