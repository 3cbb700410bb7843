//! Running one child: its session, its agent, its turn within its bounds, and the
//! answer handed back.

use std::future::Future;
use std::sync::Arc;

use keel_llm::CancellationToken;
use keel_session::{SpawnRef, TurnEndReason};

use super::budget::{BUDGET_SPENT, Budget, Budgeted};
use super::{AgentDef, Parent, Spawner, SubagentError, SubagentUpdate, TaskLimits};
use crate::agent::{Agent, TurnOutcome};
use crate::registry::ToolRegistry;
use crate::sink::{AgentEvent, Sink};
use crate::tool::{ToolContext, ToolOutput};
use crate::tool_error::{ToolError, ToolErrorKind};

/// The budget all the children of one parent session share (a slot of its `ToolState`).
#[derive(Default)]
struct Shared(Option<Arc<Budget>>);

/// Passes a child's tool calls to the parent's sink as [`SubagentUpdate::Tool`].
struct ChildSink {
    parent: ToolContext,
    session_id: String,
}

impl Sink for ChildSink {
    fn emit(&self, event: &AgentEvent<'_>) {
        if let AgentEvent::ToolStarted { step, call } = event {
            self.parent.subagent(SubagentUpdate::Tool {
                session_id: self.session_id.clone(),
                step: *step,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
    }
}

fn start_error(error: SubagentError) -> ToolError {
    let kind = match &error {
        SubagentError::Model { .. } => ToolErrorKind::NotFound,
        SubagentError::Session(_) => ToolErrorKind::IoError,
    };
    ToolError::new(kind, format!("the subagent could not start: {error}"))
}

/// What a child is made of: the parent's part, the agent and its tools, the bounds.
pub(crate) struct Job<'a> {
    pub parent: &'a Parent,
    pub spawner: &'a dyn Spawner,
    pub limits: TaskLimits,
    pub def: AgentDef,
    pub tools: ToolRegistry,
}

/// The child's agent: the parent's settings with the definition's prompt, the step limit
/// and, after an abort, half the parent's grace for its tools (the parent waits its whole
/// grace for the `task` call; the other half is the child's to close its log).
fn build(job: &Job<'_>, model: Arc<dyn keel_llm::ModelClient>) -> Agent {
    let mut config = job.parent.config.clone();
    config.system_prompt = job.def.prompt.clone();
    config.max_steps = job.limits.max_steps;
    config.summary_on_step_limit = true;
    config.fresh_start = false;
    config.read_intent = false;
    config.abort_grace = job.parent.config.abort_grace / 2;
    Agent::builder_shared(model)
        .config(config)
        .tools(job.tools.clone())
        .hooks_shared(Arc::clone(&job.parent.hooks))
        .build()
}

/// Runs `job`'s agent on `prompt` in a new child session and hands back its answer.
pub(crate) async fn run(
    job: Job<'_>,
    prompt: String,
    description: Option<String>,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    let limits = job.limits;
    let shared = ctx.state.with(|slot: &mut Shared| {
        Arc::clone(slot.0.get_or_insert_with(|| Arc::new(Budget::new(limits.session_tokens))))
    });
    if shared.spent() {
        return Ok(ToolOutput::error(format!(
            "Not started: the subagents of this session have spent their token budget ({} tokens). Go on \
without them.",
            shared.limit()
        )));
    }
    let own = Arc::new(Budget::new(limits.child_tokens));
    let model = match &job.def.model {
        Some(name) => job.spawner.model(name).map_err(start_error)?,
        None => Arc::clone(&job.parent.model),
    };
    let model = Arc::new(Budgeted { inner: model, budgets: vec![Arc::clone(&own), Arc::clone(&shared)] });
    let link = SpawnRef {
        id: ctx.session_id.as_deref().unwrap_or_default().to_owned(),
        seq: ctx.call_seq.unwrap_or_default(),
        call_id: ctx.call_id.to_string(),
        agent: job.def.name.clone(),
    };
    let cwd = ctx.workspace.display().to_string();
    let session = job.spawner.create(&cwd, link).map_err(|e| start_error(SubagentError::Session(e)))?;
    let session_id = session.id().to_owned();
    let child_ctx = job.spawner.context(&session, &ctx.workspace);
    let child = build(&job, model);
    ctx.subagent(SubagentUpdate::Started {
        session_id: session_id.clone(),
        agent: job.def.name.clone(),
        description,
    });
    let sink = ChildSink { parent: ctx.clone(), session_id: session_id.clone() };
    let cancel = ctx.cancel.child_token();
    // Dropping this call (the parent's grace after an abort ran out, or its tool timeout)
    // cancels the child instead of leaving it running.
    let _cancel_on_drop = cancel.clone().drop_guard();
    // The child runs in a task of its own, so that being dropped never cuts its turn
    // short: cancelled, it ends the turn as an abort does and closes its log.
    let running = tokio::spawn(async move {
        let mut session = session;
        let turn = child.run_turn(&mut session, &child_ctx, &prompt, &sink, &cancel);
        within(turn, limits.timeout, &cancel).await
    });
    let (outcome, timed_out) = running.await.map_err(|e| {
        ToolError::new(
            ToolErrorKind::Panic,
            format!("the subagent crashed ({e}); its session may be left open"),
        )
    })?;
    let outcome = outcome.map_err(|e| {
        ToolError::new(ToolErrorKind::IoError, format!("the subagent's session log failed: {e}"))
    })?;
    ctx.subagent(SubagentUpdate::Finished {
        session_id: session_id.clone(),
        reason: outcome.reason,
        steps: outcome.steps,
        tool_calls: outcome.tool_calls,
        usage: outcome.usage,
    });
    let stop = Stop { timed_out, own: &own, shared: &shared, limits_minutes: limits.timeout.as_secs() / 60 };
    Ok(answer(&job.def.name, &session_id, &outcome, &stop, limits.max_result_chars).with_usage(outcome.usage))
}

/// Runs `turn` for at most `timeout`; past it, `cancel` fires and the turn ends as an
/// abort does (its log closed). Also says whether the time ran out.
async fn within<T>(
    turn: impl Future<Output = T>,
    timeout: std::time::Duration,
    cancel: &CancellationToken,
) -> (T, bool) {
    tokio::pin!(turn);
    tokio::select! {
        outcome = &mut turn => (outcome, false),
        () = tokio::time::sleep(timeout) => {
            cancel.cancel();
            (turn.await, true)
        }
    }
}

/// What bounded the child, for the words of its result.
struct Stop<'a> {
    timed_out: bool,
    own: &'a Budget,
    shared: &'a Budget,
    limits_minutes: u64,
}

/// The call's result: the child's answer (cut to `max_chars`), then a line naming its
/// session; a child that did not finish says why, with what it had written so far.
fn answer(
    agent: &str,
    session_id: &str,
    outcome: &TurnOutcome,
    stop: &Stop<'_>,
    max_chars: usize,
) -> ToolOutput {
    let text = outcome.final_text.trim();
    let count = text.chars().count();
    let mut body = if count > max_chars {
        let cut: String = text.chars().take(max_chars).collect();
        format!(
            "{cut}\n[… cut: the answer has {count} characters; the whole of it is in session {session_id}]"
        )
    } else {
        text.to_owned()
    };
    let trailer = format!(
        "[subagent {agent}, session {session_id}: {} step(s), {} tool call(s), {} tokens]",
        outcome.steps,
        outcome.tool_calls,
        outcome.usage.input_tokens + outcome.usage.output_tokens
    );
    let why = match outcome.reason {
        TurnEndReason::Completed | TurnEndReason::MaxSteps if !text.is_empty() => None,
        _ if stop.timed_out => Some(format!("it ran out of time ({} minutes)", stop.limits_minutes)),
        TurnEndReason::Error if stop.own.spent() || stop.shared.spent() => {
            let spent = if stop.own.spent() { stop.own } else { stop.shared };
            Some(format!("{BUDGET_SPENT} ({} of {} tokens)", spent.used(), spent.limit()))
        }
        TurnEndReason::Aborted => Some("it was aborted".to_owned()),
        reason => Some(match &outcome.message {
            Some(message) => format!("it ended ({}): {message}", reason.as_str()),
            None => format!("it ended ({}) without an answer", reason.as_str()),
        }),
    };
    match why {
        None => ToolOutput::text(format!("{body}\n\n{trailer}")),
        Some(why) => {
            if body.is_empty() {
                body = "(it wrote nothing)".into();
            }
            ToolOutput::error(format!(
                "The subagent stopped before it finished: {why}. What it wrote last:\n{body}\n\n{trailer}"
            ))
        }
    }
}
