//! The sink: where the loop reports what happens, for a terminal, a JSON stream or a test.

use std::sync::Mutex;
use std::time::Duration;

use keel_llm::{ModelEvent, ToolCall, Usage};
use keel_session::{Event, ToolResultData, TurnEndReason};
use serde::Serialize;

/// Something the loop reports. Borrowed: a sink copies only what it keeps.
#[derive(Debug, Clone, Copy)]
pub enum AgentEvent<'a> {
    /// An event was appended to the session log (every one is reported).
    Logged(&'a Event),
    /// Live model output: text, reasoning and tool-call fragments, and retries.
    Model(&'a ModelEvent),
    /// A tool call is starting.
    ToolStarted {
        /// Step number within the turn.
        step: u32,
        /// The call.
        call: &'a ToolCall,
    },
    /// A running tool reported progress.
    ToolProgress {
        /// The call id.
        call_id: &'a str,
        /// The progress text.
        text: &'a str,
    },
    /// A tool call has its result (also logged as `tool/result`).
    ToolFinished {
        /// Step number within the turn.
        step: u32,
        /// The call.
        call: &'a ToolCall,
        /// The result as logged.
        result: &'a ToolResultData,
        /// How long the call took (zero when it never ran).
        duration: Duration,
    },
    /// A child session a tool call runs (the `task` tool's subagent) started, called a
    /// tool, or ended. Its own events go to its own log.
    Subagent {
        /// The parent's call that runs the child.
        call_id: &'a str,
        /// What happened.
        update: &'a SubagentUpdate,
    },
}

/// Receives [`AgentEvent`]s. Must be cheap: it is called on the loop's path.
pub trait Sink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: &AgentEvent<'_>);
}

/// A sink that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl Sink for NullSink {
    fn emit(&self, _event: &AgentEvent<'_>) {}
}

impl<F: Fn(&AgentEvent<'_>) + Send + Sync> Sink for F {
    fn emit(&self, event: &AgentEvent<'_>) {
        self(event)
    }
}

/// An owned copy of an [`AgentEvent`], for sinks that record.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedEvent {
    /// See [`AgentEvent::Logged`].
    Logged(Event),
    /// See [`AgentEvent::Model`].
    Model(ModelEvent),
    /// See [`AgentEvent::ToolStarted`].
    ToolStarted {
        /// Step number.
        step: u32,
        /// The call.
        call: ToolCall,
    },
    /// See [`AgentEvent::ToolProgress`].
    ToolProgress {
        /// The call id.
        call_id: String,
        /// The text.
        text: String,
    },
    /// See [`AgentEvent::ToolFinished`].
    ToolFinished {
        /// Step number.
        step: u32,
        /// The call.
        call: ToolCall,
        /// The result.
        result: ToolResultData,
        /// Duration.
        duration: Duration,
    },
    /// See [`AgentEvent::Subagent`].
    Subagent {
        /// The parent's call id.
        call_id: String,
        /// What happened.
        update: SubagentUpdate,
    },
}

/// A sink that keeps a copy of everything (for tests and replays).
#[derive(Debug, Default)]
pub struct RecordingSink {
    events: Mutex<Vec<RecordedEvent>>,
}

impl RecordingSink {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything recorded so far.
    pub fn events(&self) -> Vec<RecordedEvent> {
        match self.events.lock() {
            Ok(events) => events.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
    /// The log events recorded so far (what was appended, in order).
    pub fn logged(&self) -> Vec<keel_session::Event> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                RecordedEvent::Logged(event) => Some(event),
                _ => None,
            })
            .collect()
    }
}

impl Sink for RecordingSink {
    fn emit(&self, event: &AgentEvent<'_>) {
        let owned = match *event {
            AgentEvent::Logged(e) => RecordedEvent::Logged(e.clone()),
            AgentEvent::Model(m) => RecordedEvent::Model(m.clone()),
            AgentEvent::ToolStarted { step, call } => RecordedEvent::ToolStarted { step, call: call.clone() },
            AgentEvent::ToolProgress { call_id, text } => {
                RecordedEvent::ToolProgress { call_id: call_id.to_owned(), text: text.to_owned() }
            }
            AgentEvent::ToolFinished { step, call, result, duration } => {
                RecordedEvent::ToolFinished { step, call: call.clone(), result: result.clone(), duration }
            }
            AgentEvent::Subagent { call_id, update } => {
                RecordedEvent::Subagent { call_id: call_id.to_owned(), update: update.clone() }
            }
        };
        match self.events.lock() {
            Ok(mut events) => events.push(owned),
            Err(poisoned) => poisoned.into_inner().push(owned),
        }
    }
}

/// News of a running child, for the parent's sink ([`AgentEvent::Subagent`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SubagentUpdate {
    /// The child's session exists and its turn starts.
    Started {
        /// The child's session id.
        session_id: String,
        /// The agent it runs.
        agent: String,
        /// The few words the call gave for people, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// The child started a tool call.
    Tool {
        /// The child's session id.
        session_id: String,
        /// The child's step.
        step: u32,
        /// The tool.
        name: String,
        /// The call's raw arguments.
        #[serde(skip)]
        arguments: String,
    },
    /// The child's turn ended.
    Finished {
        /// The child's session id.
        session_id: String,
        /// Why it ended.
        reason: TurnEndReason,
        /// Steps taken.
        steps: u32,
        /// Tool calls answered.
        tool_calls: u32,
        /// Tokens it used.
        usage: Usage,
    },
}
