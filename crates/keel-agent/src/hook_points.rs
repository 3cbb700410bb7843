//! What hooks see and answer beside a call about to run: a request to go on with a turn
//! ([`Nudge`]), a prompt before it is logged, a call after it ran, a compaction before it
//! starts.

use keel_llm::ToolCall;
use keel_session::CompactionReason;

use crate::context::SessionContext;

/// A request to go on with a turn that would end, and the evidence it acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nudge {
    /// The user message the turn goes on with.
    pub text: String,
    /// Why it was sent, logged with it (`user/message` `reason`).
    pub reason: String,
}

impl Nudge {
    /// A request with the reason for it.
    pub fn new(text: impl Into<String>, reason: impl Into<String>) -> Self {
        Nudge { text: text.into(), reason: reason.into() }
    }
}

/// A turn's prompt before it is logged, as a hook sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct PromptSubmitted<'a> {
    /// The turn number.
    pub turn: u32,
    /// The prompt as the user wrote it.
    pub prompt: &'a str,
    /// The session's id.
    pub session_id: &'a str,
    /// This is the session's first turn (a session resumed has had turns).
    pub new_session: bool,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
}

/// What the prompt hooks decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptDecision {
    /// Send the prompt; each nudge follows it as user input from a hook, logged with its
    /// reason.
    Accept(Vec<Nudge>),
    /// Do not send it: the turn ends `blocked` with this reason (for the user), and the
    /// prompt is neither logged nor sent.
    Block {
        /// Why, written for the user.
        reason: String,
    },
}

impl Default for PromptDecision {
    /// Accept, adding nothing.
    fn default() -> Self {
        PromptDecision::Accept(Vec::new())
    }
}

/// A call that ran, as a hook sees it after its result was logged.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolCallDone<'a> {
    /// The call as the model wrote it.
    pub call: &'a ToolCall,
    /// The result the model gets.
    pub content: &'a str,
    /// Whether the call failed.
    pub is_error: bool,
    /// The step number within the turn.
    pub step: u32,
    /// The session's id.
    pub session_id: &'a str,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
}

/// What hooks want after a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AfterToolCall {
    /// Input for the model, logged as user input from a hook (with each reason) once the
    /// step's calls all have results.
    pub context: Vec<Nudge>,
    /// End the turn (`blocked`) once this call's batch is done, for this reason; calls
    /// after it in the step do not start.
    pub stop: Option<String>,
}

impl AfterToolCall {
    /// Adds `nudge` for the model.
    pub fn with_context(mut self, nudge: Nudge) -> Self {
        self.context.push(nudge);
        self
    }

    /// Ends the turn after the call's batch, for `reason`.
    pub fn with_stop(mut self, reason: impl Into<String>) -> Self {
        self.stop = Some(reason.into());
        self
    }
}

/// A compaction about to ask for its summary, as a hook sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct CompactionStarting<'a> {
    /// Why it runs (`manual` when the user asked).
    pub reason: CompactionReason,
    /// What the user asked it to keep in focus (`/compact FOCUS`).
    pub focus: Option<&'a str>,
    /// The session's id.
    pub session_id: &'a str,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
}
