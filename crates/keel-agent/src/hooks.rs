//! Hooks: points where the embedding program decides.

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_llm::{Message, ToolCall};

use keel_session::TaskIntent;

use crate::context::SessionContext;
use crate::hook_points::{
    AfterToolCall, CompactionStarting, Nudge, PromptDecision, PromptSubmitted, ToolCallDone,
};
use crate::registry::ToolRegistry;
use crate::tool_error::ToolErrorKind;

/// What a `before_tool_call` hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Run the tool.
    Allow,
    /// Do not run it; the model gets `reason` as an error result and the turn goes on.
    Deny {
        /// Why, written for the model.
        reason: String,
    },
    /// Do not run it, and end the turn as `blocked` after this step.
    DenyAndStop {
        /// Why, written for the model and the user.
        reason: String,
    },
}

/// A tool call about to run, as a hook sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolCallRequest<'a> {
    /// The call as the model wrote it.
    pub call: &'a ToolCall,
    /// Whether the tool declares itself read-only.
    pub read_only: bool,
    /// What the call does, as its tool declares it ([`crate::Tool::effect`]).
    pub effect: &'a keel_session::Effect,
    /// The step number within the turn.
    pub step: u32,
    /// The session's id.
    pub session_id: &'a str,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
}

/// A turn that has just started (its prompt is logged; no request was made yet).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TurnStarted<'a> {
    /// The turn number.
    pub turn: u32,
    /// The session's id.
    pub session_id: &'a str,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
    /// The user's task: the turn's first message, without the environment block (as
    /// [`TurnStopping::task`]).
    pub task: &'a str,
    /// What the task asks for, as read at the turn's start (unknown when not read).
    pub intent: TaskIntent,
}

/// The state of a turn that is about to end.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TurnStopping<'a> {
    /// The turn number.
    pub turn: u32,
    /// Steps taken so far.
    pub steps: u32,
    /// The text of the last assistant message.
    pub final_text: &'a str,
    /// This turn's messages, from its prompt to the last reply.
    pub messages: &'a [Message],
    /// The tools on offer (to tell reading calls from changing ones).
    pub tools: &'a ToolRegistry,
    /// The session's id ("" in hooks' tests).
    pub session_id: &'a str,
    /// The session's context (workspace, tool state).
    pub ctx: &'a SessionContext,
    /// The turn ends through a tool result that concluded it (such as `answer`): the
    /// last message is that result, holding the final answer.
    pub concluded: bool,
    /// What the task asks for, as read at the turn's start (unknown when not read).
    pub intent: TaskIntent,
    /// The kind of each call of this turn that failed, by call id, in order: what the
    /// messages alone do not say (a refusal on principle or a mistake to fix).
    pub failures: &'a [(String, ToolErrorKind)],
}

impl<'a> TurnStopping<'a> {
    /// The state of a turn about to end, not concluded by a tool (for hooks' tests).
    pub fn new(
        turn: u32,
        final_text: &'a str,
        messages: &'a [Message],
        tools: &'a ToolRegistry,
        ctx: &'a SessionContext,
    ) -> Self {
        TurnStopping {
            turn,
            steps: 0,
            final_text,
            messages,
            tools,
            session_id: "",
            ctx,
            concluded: false,
            intent: TaskIntent::default(),
            failures: &[],
        }
    }
}

impl TurnStopping<'_> {
    /// The user's task: the turn's first message, without the environment block.
    pub fn task(&self) -> &str {
        task_of(self.messages)
    }
}

/// The task of a turn whose messages begin with `messages`: its first message, without
/// the environment block (nor, after a fresh start, the earlier requests and the note;
/// "" when it does not begin with user input).
pub(crate) fn task_of(messages: &[Message]) -> &str {
    let Some(Message::User(first)) = messages.first() else { return "" };
    let text = match first.content.rfind("</environment>") {
        Some(end) => &first.content[end + "</environment>".len()..],
        None => &first.content,
    };
    crate::restart::request_of(text.trim())
}

/// Callbacks into the embedding program. Every method has a permissive default.
///
/// A hook that runs something worth keeping (a user's hook command) reports each run
/// with [`SessionContext::report_hook_run`]; the loop logs it as `hook/run` when the
/// hook returns.
pub trait Hooks: Send + Sync {
    /// Decides whether a validated tool call may run. Called in the model's order,
    /// one call at a time, before the call starts (so a UI can ask the user).
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        let _ = request;
        Box::pin(async { HookDecision::Allow })
    }

    /// Called when a turn starts, before its first request.
    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        let _ = state;
        Box::pin(async {})
    }

    /// Called when the turn would end. Returning a nudge continues the turn with its
    /// text as a new user message, logged with its reason.
    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        let _ = state;
        Box::pin(async { None })
    }

    /// The tools a turn offers, chosen once when it starts (after `turn_started`) from its
    /// task and intent: `None` keeps `tools`. The choice is logged with the next request's
    /// header, so requests stay derived from the log; return the same answer for the same
    /// task and intent.
    fn turn_tools(&self, task: &str, intent: TaskIntent, tools: &ToolRegistry) -> Option<ToolRegistry> {
        let _ = (task, intent, tools);
        None
    }

    /// Called with a turn's prompt before it is logged (only `turn/start` is): accept it,
    /// with context to log after it as user input from a hook, or block it (the turn ends
    /// `blocked` and the prompt never reaches the log or the model).
    fn prompt_submitted<'a>(&'a self, prompt: PromptSubmitted<'a>) -> BoxFuture<'a, PromptDecision> {
        let _ = prompt;
        Box::pin(async { PromptDecision::default() })
    }

    /// Called after a call ran and its result was logged (once the calls running beside
    /// it have theirs): context for the model, logged as user input from a hook once the
    /// step's calls all have results, or a stop.
    fn after_tool_call<'a>(&'a self, done: ToolCallDone<'a>) -> BoxFuture<'a, AfterToolCall> {
        let _ = done;
        Box::pin(async { AfterToolCall::default() })
    }

    /// Called before a compaction asks for its summary (a threshold, an overflow, or
    /// `/compact`), before `compaction/start` is logged.
    fn before_compaction<'a>(&'a self, compaction: CompactionStarting<'a>) -> BoxFuture<'a, ()> {
        let _ = compaction;
        Box::pin(async {})
    }
}

/// Hooks that allow everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl Hooks for NoHooks {}

/// Several hooks asked in order: the first that denies a call decides it; the first that
/// continues a stopping turn does so; the first that blocks a prompt does so, and the
/// context of the ones before it is dropped with the prompt; every hook's context after a
/// call is kept, and the first stop.
#[derive(Clone, Default)]
pub struct HookChain {
    hooks: Vec<Arc<dyn Hooks>>,
}

impl HookChain {
    /// An empty chain (allows everything).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `hooks` at the end of the chain.
    pub fn with(mut self, hooks: impl Hooks + 'static) -> Self {
        self.hooks.push(Arc::new(hooks));
        self
    }

    /// Adds shared hooks at the end of the chain.
    pub fn with_shared(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks.push(hooks);
        self
    }
}

impl std::fmt::Debug for HookChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookChain").field("hooks", &self.hooks.len()).finish()
    }
}

impl Hooks for HookChain {
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(async move {
            for hooks in &self.hooks {
                let decision = hooks.before_tool_call(request).await;
                if decision != HookDecision::Allow {
                    return decision;
                }
            }
            HookDecision::Allow
        })
    }

    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for hooks in &self.hooks {
                hooks.turn_started(state).await;
            }
        })
    }

    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        Box::pin(async move {
            for hooks in &self.hooks {
                if let Some(input) = hooks.turn_stopping(state).await {
                    return Some(input);
                }
            }
            None
        })
    }

    /// Each hook narrows what the ones before it left.
    fn turn_tools(&self, task: &str, intent: TaskIntent, tools: &ToolRegistry) -> Option<ToolRegistry> {
        let mut narrowed: Option<ToolRegistry> = None;
        for hooks in &self.hooks {
            if let Some(next) = hooks.turn_tools(task, intent, narrowed.as_ref().unwrap_or(tools)) {
                narrowed = Some(next);
            }
        }
        narrowed
    }

    fn prompt_submitted<'a>(&'a self, prompt: PromptSubmitted<'a>) -> BoxFuture<'a, PromptDecision> {
        Box::pin(async move {
            let mut context = Vec::new();
            for hooks in &self.hooks {
                match hooks.prompt_submitted(prompt).await {
                    PromptDecision::Accept(more) => context.extend(more),
                    block @ PromptDecision::Block { .. } => return block,
                }
            }
            PromptDecision::Accept(context)
        })
    }

    fn after_tool_call<'a>(&'a self, done: ToolCallDone<'a>) -> BoxFuture<'a, AfterToolCall> {
        Box::pin(async move {
            let mut all = AfterToolCall::default();
            for hooks in &self.hooks {
                let next = hooks.after_tool_call(done).await;
                all.context.extend(next.context);
                all.stop = all.stop.or(next.stop);
            }
            all
        })
    }

    fn before_compaction<'a>(&'a self, compaction: CompactionStarting<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for hooks in &self.hooks {
                hooks.before_compaction(compaction).await;
            }
        })
    }
}
