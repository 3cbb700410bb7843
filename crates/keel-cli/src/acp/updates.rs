//! keel's loop events and session log as ACP `session/update`s. One translation serves a
//! live turn (deltas as they stream, the logged events after them) and `session/load`
//! (the logged events alone, replayed from the store).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, Diff, ImageContent, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use keel_agent::ToolRegistry;
use keel_llm::ModelEvent;
use keel_session::{Effect, Event, EventKind, FileChange, InputSource, PlanStatus, PlanStep, ToolResultData};
use serde_json::Value;

/// Most characters of a tool's result shown in the client (the model got all of it).
const MAX_RESULT_CHARS: usize = 8_000;

/// Turns keel's events of one session into ACP updates, remembering the calls it has
/// announced (their names and arguments, which a result or a permission question needs).
#[derive(Debug)]
pub struct Translator {
    /// The session's workspace: ACP wants absolute paths.
    workspace: PathBuf,
    /// The model's context window in tokens, for usage updates (none when unknown).
    window: Option<u64>,
    /// The session's tools: what a call does ([`Effect`]) is read from them, never from
    /// its name.
    tools: ToolRegistry,
    /// Every announced call: id → what the client was told of it.
    calls: HashMap<String, Announced>,
    /// Calls announced and not yet started, in order (a permission question is about one).
    waiting: Vec<String>,
    /// The user's own input is shown (a replay); in a live turn the client sent it.
    echo_user: bool,
    /// Text and reasoning of the current step already streamed as deltas.
    streamed_text: bool,
    streamed_thinking: bool,
    /// The last reply's finish reason and the provider's own word for it.
    last_finish: Option<(keel_llm::FinishReason, Option<String>)>,
}

impl Translator {
    /// A translator for a session in `workspace`; `echo_user` replays the user's input.
    pub fn new(workspace: &Path, window: Option<u64>, echo_user: bool) -> Self {
        Translator {
            workspace: workspace.to_path_buf(),
            window,
            tools: ToolRegistry::default(),
            calls: HashMap::new(),
            waiting: Vec::new(),
            echo_user,
            streamed_text: false,
            streamed_thinking: false,
            last_finish: None,
        }
    }

    /// The tools the session's turns offer, whose declared effects give each call's kind
    /// and locations (until set, every call is of kind `other`).
    pub fn set_tools(&mut self, tools: ToolRegistry) {
        self.tools = tools;
    }

    /// A live delta of the model's reply: text or reasoning chunks.
    pub fn delta(&mut self, event: &ModelEvent) -> Option<SessionUpdate> {
        match event {
            ModelEvent::TextDelta(text) if !text.is_empty() => {
                self.streamed_text = true;
                Some(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            ModelEvent::ThinkingDelta(text) if !text.is_empty() => {
                self.streamed_thinking = true;
                Some(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            _ => None,
        }
    }

    /// A call is starting (its permission, if asked, was given).
    pub fn started(&mut self, call_id: &str) -> SessionUpdate {
        self.waiting.retain(|id| id != call_id);
        let fields = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_owned(), fields))
    }

    /// The id of the first announced, not yet started call of `tool` with `arguments`:
    /// the one a permission question is about.
    pub fn waiting_call(&self, tool: &str, arguments: &str) -> Option<String> {
        self.waiting
            .iter()
            .find(|id| {
                self.calls.get(*id).is_some_and(|call| call.name == tool && call.arguments == arguments)
            })
            .cloned()
    }

    /// The last reply's finish reason and the provider's word for it, if a reply came.
    pub fn last_finish(&self) -> Option<(keel_llm::FinishReason, Option<String>)> {
        self.last_finish.clone()
    }

    /// The updates one logged event makes.
    pub fn logged(&mut self, event: &Event) -> Vec<SessionUpdate> {
        match &event.kind {
            EventKind::StepStart(_) => {
                self.streamed_text = false;
                self.streamed_thinking = false;
                Vec::new()
            }
            EventKind::UserMessage(input) if self.echo_user && is_users(input.source) => {
                let images = input.images.iter().filter_map(|image| {
                    let data = image.base64()?;
                    let content = ImageContent::new(data, image.media_type.media_type());
                    Some(SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::Image(content))))
                });
                std::iter::once(SessionUpdate::UserMessageChunk(chunk(&input.text))).chain(images).collect()
            }
            EventKind::AssistantMessage(message) => self.reply(message),
            EventKind::ToolCall(started) => self.started_logged(started).into_iter().collect(),
            EventKind::ToolResult(result) => self.result(result),
            _ => Vec::new(),
        }
    }

    /// A reply: what was not streamed of its text and reasoning, its calls, its usage.
    fn reply(&mut self, message: &keel_llm::AssistantMessage) -> Vec<SessionUpdate> {
        self.last_finish = Some((message.finish_reason, message.raw_finish_reason.clone()));
        let mut updates = Vec::new();
        for block in &message.content {
            match block {
                keel_llm::ContentBlock::Text { text } if !self.streamed_text && !text.is_empty() => {
                    updates.push(SessionUpdate::AgentMessageChunk(chunk(text)));
                }
                keel_llm::ContentBlock::Thinking { text, .. }
                    if !self.streamed_thinking && !text.is_empty() =>
                {
                    updates.push(SessionUpdate::AgentThoughtChunk(chunk(text)));
                }
                keel_llm::ContentBlock::ToolCall(call) => {
                    let announced = Announced {
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        effect: self.tools.effect_of(call),
                    };
                    updates.push(SessionUpdate::ToolCall(tool_call(&call.id, &announced, &self.workspace)));
                    self.calls.insert(call.id.clone(), announced);
                    self.waiting.push(call.id.clone());
                }
                _ => {}
            }
        }
        let usage = &message.usage;
        if let Some(window) = self.window
            && usage.input_tokens + usage.output_tokens > 0
        {
            let used = usage.input_tokens + usage.output_tokens;
            updates.push(SessionUpdate::UsageUpdate(UsageUpdate::new(used, window)));
        }
        updates
    }

    /// A logged call start: its effect as logged is what the call does. When it differs
    /// from the one announced (a replay whose tools are not all here, a tool that came or
    /// went between the reply and the call), the client is told the call's kind and
    /// locations again.
    fn started_logged(&mut self, started: &keel_session::ToolCallStarted) -> Option<SessionUpdate> {
        let effect = started.effect.clone()?;
        let call = self.calls.get_mut(&started.call_id)?;
        if call.effect == effect {
            return None;
        }
        call.effect = effect;
        let fields = ToolCallUpdateFields::new()
            .kind(kind(&call.effect))
            .locations(locations(&call.effect, &self.workspace));
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(started.call_id.clone(), fields)))
    }

    /// A call's result: its status and content, and the plan when the call set one.
    fn result(&mut self, result: &ToolResultData) -> Vec<SessionUpdate> {
        self.waiting.retain(|id| *id != result.call_id);
        let mut updates = vec![SessionUpdate::ToolCallUpdate(tool_result(result, &self.workspace))];
        if !result.is_error
            && let Some(Announced { effect: Effect::Plans { steps }, .. }) = self.calls.get(&result.call_id)
        {
            updates.push(SessionUpdate::Plan(plan(steps)));
        }
        // A result that concludes the turn is its answer (the `answer` tool of the small
        // profile): the client shows it as the agent's message, as the terminal does.
        if result.concludes_turn && !result.is_error && !result.content.trim().is_empty() {
            updates.push(SessionUpdate::AgentMessageChunk(chunk(&result.content)));
        }
        updates
    }
}

/// Whether input of this source is the user's own (not keel's or a hook's).
fn is_users(source: InputSource) -> bool {
    matches!(source, InputSource::Prompt | InputSource::Steer | InputSource::FollowUp)
}

/// A text chunk.
fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text.to_owned())))
}

/// A call as announced to the client.
#[derive(Debug)]
struct Announced {
    /// The tool's name.
    name: String,
    /// The raw arguments.
    arguments: String,
    /// What the call does, as its tool declares it (or as the log says, once it started).
    effect: Effect,
}

/// What kind of work a call does, for the client's icons and grouping: read from the
/// effect its tool declares, so an MCP tool or a new tool gets its kind without a name
/// list here.
fn kind(effect: &Effect) -> ToolKind {
    match effect {
        Effect::Reads { path: Some(_) } => ToolKind::Read,
        Effect::Reads { path: None } => ToolKind::Search,
        Effect::Writes { .. } => ToolKind::Edit,
        Effect::Runs => ToolKind::Execute,
        Effect::Fetches { .. } => ToolKind::Fetch,
        Effect::Plans { .. } => ToolKind::Think,
        Effect::Concludes | Effect::Other => ToolKind::Other,
    }
}

/// The files a call reads or writes, as absolute paths.
fn locations(effect: &Effect, workspace: &Path) -> Vec<ToolCallLocation> {
    match effect {
        Effect::Reads { path: Some(path) } | Effect::Writes { path } => {
            vec![ToolCallLocation::new(workspace.join(path))]
        }
        _ => Vec::new(),
    }
}

/// The argument that says most about a call: its command, path, pattern or address.
fn main_argument(arguments: &Value) -> Option<&str> {
    ["command", "path", "pattern", "url", "query"].iter().find_map(|key| arguments.get(*key)?.as_str())
}

/// An announced call: pending until it starts.
fn tool_call(id: &str, call: &Announced, workspace: &Path) -> ToolCall {
    let parsed: Value =
        serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()));
    let title = match main_argument(&parsed) {
        Some(what) => format!("{}: {}", call.name, clip(what, 120)),
        None => call.name.clone(),
    };
    ToolCall::new(id.to_owned(), title)
        .kind(kind(&call.effect))
        .status(ToolCallStatus::Pending)
        .locations(locations(&call.effect, workspace))
        .raw_input(parsed)
}

/// A call's end: completed or failed, with its text and its file change as a diff.
fn tool_result(result: &ToolResultData, workspace: &Path) -> ToolCallUpdate {
    let status = if result.is_error { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
    let mut content = Vec::new();
    if let Some(change) = &result.change {
        content.push(ToolCallContent::Diff(diff(change, workspace)));
    }
    if !result.content.is_empty() {
        let text = clip(&result.content, MAX_RESULT_CHARS);
        content.push(ToolCallContent::Content(Content::new(ContentBlock::Text(TextContent::new(text)))));
    }
    let fields = ToolCallUpdateFields::new().status(status).content(content);
    ToolCallUpdate::new(result.call_id.clone(), fields)
}

/// keel's change (unified hunks, possibly cut) as ACP's diff: the old and new text of the
/// hunks' lines, since keel keeps the hunks rather than the whole files.
pub fn diff(change: &FileChange, workspace: &Path) -> Diff {
    let (mut old, mut new) = (String::new(), String::new());
    for line in change.diff.lines() {
        if line.starts_with("@@") || line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        let (mark, text) = line.split_at(line.len().min(1));
        match mark {
            "-" => push_line(&mut old, text),
            "+" => push_line(&mut new, text),
            _ => {
                push_line(&mut old, text);
                push_line(&mut new, text);
            }
        }
    }
    let diff = Diff::new(workspace.join(&change.path), new);
    if change.created { diff } else { diff.old_text(old) }
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

/// A plan as a call set it, as ACP's plan.
pub fn plan(steps: &[PlanStep]) -> Plan {
    let entries = steps.iter().map(|step| {
        let status = match step.status {
            PlanStatus::Completed => PlanEntryStatus::Completed,
            PlanStatus::InProgress => PlanEntryStatus::InProgress,
            PlanStatus::Pending => PlanEntryStatus::Pending,
        };
        PlanEntry::new(step.step.clone(), PlanEntryPriority::Medium, status)
    });
    Plan::new(entries.collect())
}

/// `text` cut to at most `max` characters, with a note of what was left out.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… ({} more characters)", &text[..end], text[end..].chars().count()),
    }
}

#[cfg(test)]
#[path = "updates_tests.rs"]
mod tests;
