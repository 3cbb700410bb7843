//! "A question gets an answer": a permission rule for small models. When the user asks a
//! question ("Which file defines parse_header?", "哪个文件定义了 parse_header？") and wants no
//! change (the task's intent, read by the model at the turn's start,
//! [`keel_agent::intent`]), no file should change; small models asked a question sometimes create or
//! edit files instead (a stub `parse_header.py`, a "TODO" written into notes.md). While
//! the turn's task is a question, [`QuestionGuard`] refuses calls of tools that are not
//! read-only (by the tool or by its calls' declared effect: fetching a web page changes
//! nothing here), except those that run a command (their declared effect; the shell may run
//! the program the question is about), with a reason that says what to do instead. It also
//! offers only those tools for the turn ([`Hooks::turn_tools`]): a model constrained to
//! the tools on offer (the embedded engine's grammar) then cannot even try a change, and
//! one that is not spends no steps on refused calls (the 1.5B model wrote a stub
//! `parse_header` three times before answering).

use futures::future::BoxFuture;
use keel_agent::{HookDecision, Hooks, TaskIntent, ToolCallRequest, ToolRegistry, TurnStarted};

/// How the refusal begins; the task follows.
pub const QUESTION_NOT_CHANGE: &str = "Not done: the task is a question, so no file should change.";

/// Per session: the current turn's task, when it is a question.
#[derive(Debug, Default)]
struct Question(Option<String>);

/// The rule, as [`Hooks`]; chain it after the permission policy.
#[derive(Debug, Clone, Default)]
pub struct QuestionGuard;

impl QuestionGuard {
    /// The rule: reading and running commands allowed during questions.
    pub fn new() -> Self {
        Self
    }

    /// The decision for one call.
    fn decide(&self, request: &ToolCallRequest<'_>) -> HookDecision {
        if request.read_only || request.effect.read_only() || *request.effect == keel_agent::Effect::Runs {
            return HookDecision::Allow;
        }
        let question = request.ctx.tool_state.with(|q: &mut Question| q.0.clone());
        match question {
            Some(task) => HookDecision::Deny {
                reason: format!(
                    "{QUESTION_NOT_CHANGE} The task: \"{task}\". Find the answer by reading (read_file, grep, \
                     list_files or shell), then answer it."
                ),
            },
            None => HookDecision::Allow,
        }
    }
}

impl Hooks for QuestionGuard {
    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        let task = state.task.trim();
        let question = state.intent.is_question().then(|| task.chars().take(300).collect::<String>());
        state.ctx.tool_state.with(|q: &mut Question| q.0 = question);
        Box::pin(async {})
    }

    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        let decision = self.decide(&request);
        Box::pin(async move { decision })
    }

    fn turn_tools(&self, _task: &str, intent: TaskIntent, tools: &ToolRegistry) -> Option<ToolRegistry> {
        if !intent.is_question() {
            return None;
        }
        let offered = tools.filtered(|tool| {
            tool.is_read_only()
                || tool.effect("{}").read_only()
                || tool.effect("{}") == keel_agent::Effect::Runs
        });
        (offered.len() < tools.len()).then_some(offered)
    }
}
