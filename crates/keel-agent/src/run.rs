//! The state of one running turn, shared by the loop ([`crate::turn`]) and the tool
//! executor ([`crate::execute`]), neither of which imports the other's internals.

use std::borrow::Cow;

use keel_llm::{ModelClient, Usage};
use keel_session::{EventKind, RequestHeader, Session, SessionError, SyncWork};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::context::SessionContext;
use crate::registry::ToolRegistry;
use crate::sink::{AgentEvent, Sink};

/// State of one running turn.
pub(crate) struct TurnRun<'a> {
    pub agent: &'a Agent,
    pub ctx: &'a SessionContext,
    pub model: &'a dyn ModelClient,
    pub system: &'a str,
    /// The tools of this turn, fixed for its duration: the session's, or what the hooks
    /// narrowed them to when the turn started ([`crate::Hooks::turn_tools`]).
    pub tools: Cow<'a, ToolRegistry>,
    pub header: RequestHeader,
    pub session: &'a mut Session,
    pub sink: &'a dyn Sink,
    pub cancel: &'a CancellationToken,
    pub turn: u32,
    pub step: u32,
    pub usage: Usage,
    pub tool_calls: u32,
    pub final_text: String,
    /// Index in the session's messages where this turn's messages begin.
    pub first_message: usize,
    /// The task's calls so far, for loop detection.
    pub repeats: crate::loops::Repeats,
    /// Why calls in a reply requested with tools off are not run.
    pub tools_off: &'static str,
    /// The history was compacted before the last step.
    pub compacted_last: bool,
    /// The last step's context overflow was answered by a compaction (its retry may not
    /// overflow again).
    pub overflow_compacted: bool,
    /// The step at which the turn is out of steps (`max_steps`, moved by a fresh start).
    pub last_step: u32,
    /// The turn has started again once ([`crate::restart`]).
    pub restarted: bool,
    /// The message holding the turn's prompt, as it was when the turn started.
    pub prompt: String,
    /// The user's request that started the turn, alone (the environment block that may
    /// share its message left out): what tools see as [`crate::ToolContext::task`].
    pub task: std::sync::Arc<str>,
    /// What the task asks for, as read at the turn's start ([`crate::intent`]).
    pub intent: keel_session::TaskIntent,
    /// The kind of each call of this turn that failed, by call id
    /// ([`crate::TurnStopping::failures`]).
    pub failures: Vec<(String, crate::ToolErrorKind)>,
}

impl TurnRun<'_> {
    /// Appends an event and shows it to the sink.
    pub(crate) fn log(&mut self, kind: EventKind) -> Result<u64, SessionError> {
        let sink = self.sink;
        self.session.append_observed(kind, |event| sink.emit(&AgentEvent::Logged(event)))
    }

    /// Makes the log durable the way the session's writer asks: inline (a CLI's file),
    /// on the blocking pool (a server's files, so a slow disk does not stall other
    /// sessions), or by awaiting the writer task's acknowledgement (a database).
    pub(crate) async fn sync(&mut self) -> Result<(), SessionError> {
        match self.session.sync_work() {
            SyncWork::Blocking(job) => match tokio::task::spawn_blocking(job).await {
                Ok(result) => result,
                Err(_) => self.session.sync(),
            },
            SyncWork::Wait(ack) => ack.await,
            _ => self.session.sync(),
        }
    }
}
