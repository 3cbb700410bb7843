//! `hook/run`: one run of a hook command the user configured (Claude Code's hook
//! events: `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, `SessionStart`,
//! `PreCompact`) and what it decided. Not model-visible: what a hook adds for the model
//! is logged where the model reads it (a `tool/result`'s refusal, a `user/message` from
//! a hook with its `reason`), so requests stay derived from the log.

use serde::{Deserialize, Serialize};

/// Data of `hook/run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRun {
    /// The hook event, as Claude Code names it (`PreToolUse`, `Stop`, …).
    pub event: String,
    /// The command as configured.
    pub command: String,
    /// The tool the run was for (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call the run was for (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// How the command ended.
    pub outcome: HookOutcome,
    /// Its exit code, when it exited (0 and 2 mean something; any other is a failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Wall time of the run in milliseconds.
    pub duration_ms: u64,
    /// What it decided, when it decided something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<HookVerdict>,
    /// The reason or context it gave with its decision (what the model or the user got).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What went wrong, for a run that failed (its output's end, the limit it passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl HookRun {
    /// Whether the run went wrong (its decision, if any, was not used).
    pub fn failed(&self) -> bool {
        self.outcome != HookOutcome::Ok
    }
}

/// How a hook command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookOutcome {
    /// It exited 0 or 2 and its output was understood.
    Ok,
    /// It could not start, exited with another code, or was killed by a signal.
    Failed,
    /// It ran past its timeout and was stopped.
    TimedOut,
    /// Its output was not what a hook may answer (broken JSON, a field of the wrong
    /// type or value, more than the size limit).
    BadOutput,
}

impl HookOutcome {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Ok => "ok",
            HookOutcome::Failed => "failed",
            HookOutcome::TimedOut => "timed_out",
            HookOutcome::BadOutput => "bad_output",
        }
    }
}

/// What a hook decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookVerdict {
    /// `PreToolUse`: the call may run without the mode's question (rules still apply).
    Allow,
    /// `PreToolUse`: the call does not run; the model gets the reason.
    Deny,
    /// `PreToolUse`: the user is asked about the call.
    Ask,
    /// `UserPromptSubmit`: the prompt is not sent; `PostToolUse`: the model gets the reason.
    Block,
    /// `Stop`: the turn goes on with the reason as a new user message.
    Continue,
    /// Context added for the model.
    Context,
    /// `continue: false`: the turn stops.
    Stop,
}

impl HookVerdict {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookVerdict::Allow => "allow",
            HookVerdict::Deny => "deny",
            HookVerdict::Ask => "ask",
            HookVerdict::Block => "block",
            HookVerdict::Continue => "continue",
            HookVerdict::Context => "context",
            HookVerdict::Stop => "stop",
        }
    }
}
