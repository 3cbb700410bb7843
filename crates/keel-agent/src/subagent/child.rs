//! Running one child: its session, its agent, its turn within its bounds, and the
//! answer handed back.

use std::future::Future;
use std::sync::Arc;

use keel_llm::CancellationToken;
use keel_session::{SpawnRef, TurnEndReason};

use super::budget::{Allowance, BUDGET_SPENT, Budget, Budgeted, SharedBudget, spent_in, trailer};
use super::{AgentDef, Parent, Spawner, SubagentError, SubagentUpdate, TaskLimits};
use crate::agent::{Agent, TurnOutcome};
use crate::registry::ToolRegistry;
use crate::sink::{AgentEvent, Sink};
use crate::tool::{ToolContext, ToolOutput};
use crate::tool_error::{ToolError, ToolErrorKind};

/// The budget all the children of one parent session share (a slot of its `ToolState`).
#[derive(Default)]
struct Shared(Option<Arc<SharedBudget>>);

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

/// The budget the children of this session share, made at the first call here with what
/// its children already spent as the session's log says (a resumed session's `task`
/// results).
fn shared_budget(job: &Job<'_>, ctx: &ToolContext) -> Result<Arc<SharedBudget>, ToolError> {
    if let Some(shared) = ctx.state.with(|slot: &mut Shared| slot.0.clone()) {
        return Ok(shared);
    }
    let spent = match ctx.session_id.as_deref() {
        Some(id) if !id.is_empty() => {
            let log = job.spawner.log(id).map_err(|e| start_error(SubagentError::Session(e)))?;
            spent_in(&log)
        }
        _ => 0,
    };
    let fresh = Arc::new(SharedBudget::new(job.limits.session_tokens, spent));
    Ok(ctx.state.with(|slot: &mut Shared| Arc::clone(slot.0.get_or_insert(fresh))))
}

/// The child's allowance of at most `most` tokens from `shared` (`None`: it is spent),
/// waiting while running siblings hold what is left, unless the call is cancelled.
async fn take_allowance(
    shared: &Arc<SharedBudget>,
    ctx: &ToolContext,
    most: u64,
) -> Result<Option<Allowance>, ToolError> {
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => {
            Err(ToolError::new(ToolErrorKind::NotStarted, "not started: the turn was aborted"))
        }
        allowance = shared.take(most) => Ok(allowance),
    }
}

/// Runs `job`'s agent on `prompt` in a new child session and hands back its answer.
pub(crate) async fn run(
    job: Job<'_>,
    prompt: String,
    description: Option<String>,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    let limits = job.limits;
    let shared = shared_budget(&job, &ctx)?;
    let Some(allowance) = take_allowance(&shared, &ctx, limits.child_tokens).await? else {
        return Ok(ToolOutput::error(format!(
            "Not started: the subagents of this session have spent their token budget ({} tokens). Go on \
without them.",
            shared.limit()
        )));
    };
    let own = Arc::clone(allowance.budget());
    let model = match &job.def.model {
        Some(name) => job.spawner.model(name).map_err(start_error)?,
        None => Arc::clone(&job.parent.model),
    };
    let model = Arc::new(Budgeted { inner: model, budget: Arc::clone(&own) });
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
        let ended = within(turn, limits.timeout, &cancel).await;
        // What the child did not spend goes back to its siblings.
        drop(allowance);
        ended
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
    let stop = Stop { timed_out, own: &own, limits };
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
    /// The child's budget: its own limit, or what was left of the shared one.
    own: &'a Budget,
    limits: TaskLimits,
}

/// A time limit in words: whole minutes as minutes, else seconds (`10 minutes`, `90 s`,
/// `0.2 s`).
fn span(limit: std::time::Duration) -> String {
    let secs = limit.as_secs();
    match secs {
        60 => "1 minute".to_owned(),
        s if s >= 60 && s % 60 == 0 => format!("{} minutes", s / 60),
        _ => {
            let text = format!("{:.1}", limit.as_secs_f64());
            format!("{} s", text.strip_suffix(".0").unwrap_or(&text))
        }
    }
}

/// Why a child whose budget is spent stopped.
fn budget_spent(stop: &Stop<'_>) -> String {
    let (used, limit) = (stop.own.used(), stop.own.limit());
    if limit < stop.limits.child_tokens {
        format!(
            "{BUDGET_SPENT} ({used} of {limit} tokens, what was left of the {} the subagents of this session share)",
            stop.limits.session_tokens
        )
    } else {
        format!("{BUDGET_SPENT} ({used} of {limit} tokens)")
    }
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
    let tokens = outcome.usage.input_tokens + outcome.usage.output_tokens;
    let trailer = trailer(agent, session_id, outcome.steps, outcome.tool_calls, tokens);
    let why = match outcome.reason {
        TurnEndReason::Completed | TurnEndReason::MaxSteps if !text.is_empty() => None,
        _ if stop.timed_out => Some(format!("it ran out of time ({})", span(stop.limits.timeout))),
        TurnEndReason::Error if stop.own.spent() => Some(budget_spent(stop)),
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_time_limit_is_said_in_minutes_when_whole_else_in_seconds() {
        let said = |d: Duration| super::span(d);
        assert_eq!(said(Duration::from_secs(600)), "10 minutes");
        assert_eq!(said(Duration::from_secs(60)), "1 minute");
        assert_eq!(said(Duration::from_secs(90)), "90 s");
        assert_eq!(said(Duration::from_millis(200)), "0.2 s");
    }
}
