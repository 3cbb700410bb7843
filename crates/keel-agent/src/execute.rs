//! Running one step's tool calls: validate, ask hooks, log `tool/call`, run (safe calls
//! together, exclusive calls alone), log results in the model's order.

use crate::ToolErrorKind;
use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use keel_llm::{AssistantMessage, ContentBlock, ToolCall};
use keel_session::{EventKind, SessionError, ToolCallStarted, ToolResultData, TurnEndReason};
use tokio::sync::mpsc;

use crate::hook_calls::Ran;
use crate::hooks::{HookDecision, ToolCallRequest};
use crate::run::TurnRun;
use crate::sink::AgentEvent;
use crate::tool::{PreparedCall, Progress, Report, ToolContext, ToolOutput};
use crate::tool_error::ToolError;

/// What the loop does after a step.
#[derive(Debug)]
pub(crate) enum StepControl {
    /// Go on if calls were made (or input arrived).
    Continue {
        /// Whether the step ran (or answered) tool calls.
        made_calls: bool,
    },
    /// A result concluded the turn.
    Concluded,
    /// The model repeated itself past the limit; its calls were not run.
    Looping,
    /// The provider said the conversation no longer fits: compact once and retry.
    Overflow(String),
    /// End the turn now.
    End(TurnEndReason, Option<String>),
}

/// Result text for a started call cut short by an abort.
pub const ABORTED: &str = "Operation aborted";

enum Plan {
    /// `effect`: what the call does, as its tool declares it (read once, from its arguments).
    Run {
        prepared: PreparedCall,
        concurrent: bool,
        read_only: bool,
        reads_history: bool,
        effect: keel_session::Effect,
    },
    Fail(ToolError),
}

struct Item {
    call: ToolCall,
    plan: Plan,
}

/// Renames call ids repeated within the message or already used earlier in the session
/// (`used`): some servers number calls from `call_0` in every reply, and results, spill
/// files and resumed sessions need each id to name one call.
pub(crate) fn dedupe_call_ids(message: &mut AssistantMessage, used: &HashSet<String>) {
    let mut seen: HashSet<String> = HashSet::new();
    let taken = |id: &str, seen: &HashSet<String>| used.contains(id) || seen.contains(id);
    for block in &mut message.content {
        if let ContentBlock::ToolCall(call) = block {
            if taken(&call.id, &seen) {
                let mut n = 2;
                while taken(&format!("{}_{n}", call.id), &seen) {
                    n += 1;
                }
                call.id = format!("{}_{n}", call.id);
            }
            seen.insert(call.id.clone());
        }
    }
}

fn plan(run: &TurnRun<'_>, call: ToolCall, length_cut: bool) -> Item {
    let tools = &*run.tools;
    let plan = match tools.get(&call.name) {
        None => {
            let names: Vec<&str> = tools.names().collect();
            Plan::Fail(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!("Unknown tool `{}`. Available tools: {}.", call.name, names.join(", ")),
            ))
        }
        Some(tool) => match tool.prepare(&call.arguments) {
            Ok(prepared) => Plan::Run {
                prepared,
                concurrent: tool.is_concurrency_safe(),
                read_only: tool.is_read_only(),
                reads_history: tool.reads_history(),
                effect: tool.effect(&call.arguments),
            },
            Err(mut error) => {
                if length_cut {
                    error.message = format!(
                        "This call was cut off because the reply reached the output token limit, so it was not run. \
                         Send it again with shorter arguments (for large content, write it in parts). Details: {}",
                        error.message
                    );
                }
                Plan::Fail(error)
            }
        },
    };
    Item { call, plan }
}

/// Splits the calls into batches that run one after another: a run of concurrency-safe
/// calls (at most `pool` of them), or one exclusive call. Failed calls ride along.
fn batches(items: Vec<Item>, pool: usize) -> Vec<Vec<Item>> {
    let mut out = Vec::new();
    let mut current: Vec<Item> = Vec::new();
    let mut running = 0;
    for item in items {
        match &item.plan {
            Plan::Run { concurrent: false, .. } => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                    running = 0;
                }
                out.push(vec![item]);
            }
            Plan::Run { concurrent: true, .. } => {
                if running == pool {
                    out.push(std::mem::take(&mut current));
                    running = 0;
                }
                running += 1;
                current.push(item);
            }
            Plan::Fail(_) => current.push(item),
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Answers calls that will not run, with `reason`, without starting them.
pub(crate) fn refuse_calls(
    run: &mut TurnRun<'_>,
    calls: &[ToolCall],
    message_seq: u64,
    step: u32,
    reason: &str,
) -> Result<(), SessionError> {
    for call in calls {
        let result =
            result_data(call, message_seq, Err(ToolError::new(ToolErrorKind::NotStarted, reason)), None);
        commit(run, step, call, result, Duration::ZERO)?;
    }
    Ok(())
}

fn result_data(
    call: &ToolCall,
    source_seq: u64,
    outcome: Result<ToolOutput, ToolError>,
    duration: Option<Duration>,
) -> ToolResultData {
    let (content, is_error, error_code, concludes_turn, change, images) = match outcome {
        Ok(output) => {
            let code = output.is_error.then(|| "tool_error".to_owned());
            (output.content, output.is_error, code, output.concludes_turn, output.change, output.images)
        }
        Err(error) => (error.message, true, Some(error.kind.as_str().to_owned()), false, None, Vec::new()),
    };
    ToolResultData {
        call_id: call.id.clone(),
        name: call.name.clone(),
        source_seq,
        content,
        is_error,
        error_code,
        concludes_turn,
        duration_ms: duration.map(|d| d.as_millis() as u64),
        change,
        images,
    }
}

fn commit(
    run: &mut TurnRun<'_>,
    step: u32,
    call: &ToolCall,
    result: ToolResultData,
    duration: Duration,
) -> Result<bool, SessionError> {
    let concludes = result.concludes_turn;
    // A tool that concludes the turn delivers its answer (e.g. an `answer` tool).
    if concludes && !result.is_error && !result.content.trim().is_empty() {
        run.final_text = result.content.clone();
    }
    run.tool_calls += 1;
    if let Some(code) = &result.error_code {
        run.failures.push((result.call_id.clone(), crate::ToolErrorKind::parse(code)));
    }
    run.sink.emit(&AgentEvent::ToolFinished { step, call, result: &result, duration });
    run.log(EventKind::ToolResult(result))?;
    Ok(concludes)
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Runs one prepared call with panic capture, the optional timeout and the abort grace.
fn guarded(
    prepared: PreparedCall,
    ctx: ToolContext,
    timeout: Option<Duration>,
    grace: Duration,
) -> BoxFuture<'static, (Result<ToolOutput, ToolError>, Duration)> {
    Box::pin(async move {
        let start = Instant::now();
        let cancel = ctx.cancel.clone();
        let work = AssertUnwindSafe(prepared(ctx)).catch_unwind();
        let abort_deadline = async {
            cancel.cancelled().await;
            tokio::time::sleep(grace).await;
        };
        let timed_out = async {
            match timeout {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let mut outcome = tokio::select! {
            result = work => match result {
                Ok(result) => result,
                Err(panic) => Err(ToolError::new(
                    ToolErrorKind::Panic,
                    format!("The tool crashed (panic: {}). This is a bug in the tool, not in your call; try another way.", panic_message(panic)),
                )),
            },
            _ = abort_deadline => Err(ToolError::new(ToolErrorKind::Aborted, ABORTED)),
            _ = timed_out => Err(ToolError::new(
                ToolErrorKind::Timeout,
                format!("The tool did not finish within {} s and was stopped.", timeout.map_or(0, |t| t.as_secs())),
            )),
        };
        if cancel.is_cancelled() {
            outcome = Err(aborted(outcome));
        }
        (outcome, start.elapsed())
    })
}

/// The result of a call that was running when the user aborted: "Operation aborted",
/// plus whatever the tool had to say.
fn aborted(outcome: Result<ToolOutput, ToolError>) -> ToolError {
    let detail = match outcome {
        Ok(output) => output.content,
        Err(error) if error.message == ABORTED => String::new(),
        Err(error) => error.message,
    };
    let message = if detail.trim().is_empty() { ABORTED.to_owned() } else { format!("{ABORTED}\n{detail}") };
    ToolError::new(ToolErrorKind::Aborted, message)
}

/// Runs the calls of one assistant message. Every call gets exactly one result, logged
/// in the model's order, before this returns.
pub(crate) async fn execute_calls(
    run: &mut TurnRun<'_>,
    calls: Vec<ToolCall>,
    message_seq: u64,
    step: u32,
    length_cut: bool,
    notes: &HashMap<String, String>,
) -> Result<StepControl, SessionError> {
    let items: Vec<Item> = calls.into_iter().map(|call| plan(run, call, length_cut)).collect();
    let pool = run.agent.config.max_parallel_tools.max(1);
    let mut concluded = false;
    let mut stop: Option<(TurnEndReason, String)> = None;
    let workspace: Arc<Path> = Arc::from(run.ctx.workspace.as_path());
    let artifacts: Option<Arc<Path>> = run.ctx.artifacts.as_deref().map(Arc::from);
    let task = Arc::clone(&run.task);
    // What hooks give the model after calls, logged once every call has its result.
    let mut context = Vec::new();

    for mut batch in batches(items, pool) {
        let mut history: Option<Arc<[keel_llm::Message]>> = None;
        if stop.is_none() && run.cancel.is_cancelled() {
            stop = Some((TurnEndReason::Aborted, run.ctx.inbox.take_abort_reason()));
        }
        if let Some((reason, detail)) = &stop {
            let why = match reason {
                TurnEndReason::Aborted => "not started: the user aborted the turn".to_owned(),
                _ => format!("not started: the turn was stopped ({detail})"),
            };
            let calls: Vec<ToolCall> = batch.into_iter().map(|item| item.call).collect();
            refuse_calls(run, &calls, message_seq, step, &why)?;
            continue;
        }

        // Ask the hooks, in order, before anything in the batch starts.
        for item in &mut batch {
            let Plan::Run { read_only, ref effect, .. } = item.plan else {
                continue;
            };
            if stop.is_some() {
                item.plan = Plan::Fail(ToolError::new(
                    ToolErrorKind::NotStarted,
                    "not started: an earlier call in this step stopped the turn",
                ));
                continue;
            }
            let session_id = run.session.id();
            let request =
                ToolCallRequest { call: &item.call, read_only, effect, step, session_id, ctx: run.ctx };
            let decision = tokio::select! {
                biased;
                _ = run.cancel.cancelled() => None,
                decision = run.agent.hooks.before_tool_call(request) => Some(decision),
            };
            run.log_hook_runs()?;
            match decision {
                Some(HookDecision::Allow) => {}
                Some(HookDecision::Deny { reason }) => {
                    item.plan = Plan::Fail(ToolError::new(ToolErrorKind::Denied, reason));
                }
                Some(HookDecision::DenyAndStop { reason }) => {
                    item.plan = Plan::Fail(ToolError::new(ToolErrorKind::Denied, reason.clone()));
                    stop = Some((TurnEndReason::Blocked, reason));
                }
                None => {
                    stop = Some((TurnEndReason::Aborted, run.ctx.inbox.take_abort_reason()));
                    item.plan = Plan::Fail(ToolError::new(
                        ToolErrorKind::NotStarted,
                        "not started: the user aborted the turn",
                    ));
                }
            }
        }

        // An abort that arrived while the hooks decided: nothing in the batch starts.
        if run.cancel.is_cancelled() {
            if !matches!(stop, Some((TurnEndReason::Aborted, _))) {
                stop = Some((TurnEndReason::Aborted, run.ctx.inbox.take_abort_reason()));
            }
            for item in &mut batch {
                if let Plan::Run { .. } = item.plan {
                    item.plan = Plan::Fail(ToolError::new(
                        ToolErrorKind::NotStarted,
                        "not started: the user aborted the turn",
                    ));
                }
            }
        }

        // Durable before acting: every call about to start is logged, then synced. Calls
        // that will not start cite their assistant message instead.
        let mut sources = Vec::with_capacity(batch.len());
        for item in &batch {
            let seq = match &item.plan {
                Plan::Run { effect, .. } => run.log(EventKind::ToolCall(ToolCallStarted {
                    call_id: item.call.id.clone(),
                    name: item.call.name.clone(),
                    arguments: item.call.arguments.clone(),
                    effect: Some(effect.clone()),
                }))?,
                Plan::Fail(_) => message_seq,
            };
            sources.push(seq);
        }
        if sources.iter().any(|&seq| seq != message_seq) {
            run.sync().await?;
        }

        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<Progress>();
        let mut calls = Vec::with_capacity(batch.len());
        let mut work = Vec::with_capacity(batch.len());
        for (item, &call_seq) in batch.into_iter().zip(&sources) {
            let future: BoxFuture<'static, (Result<ToolOutput, ToolError>, Duration)> = match item.plan {
                Plan::Fail(error) => Box::pin(std::future::ready((Err(error), Duration::ZERO))),
                Plan::Run { prepared, reads_history, .. } => {
                    run.sink.emit(&AgentEvent::ToolStarted { step, call: &item.call });
                    // The conversation so far, copied once per batch and only for a tool
                    // that reads it (the small profile's `answer`).
                    let history = reads_history.then(|| {
                        Arc::clone(history.get_or_insert_with(|| Arc::from(run.session.messages())))
                    });
                    let ctx = ToolContext {
                        cancel: run.cancel.child_token(),
                        workspace: Arc::clone(&workspace),
                        artifacts: artifacts.clone(),
                        call_id: Arc::from(item.call.id.as_str()),
                        state: Arc::clone(&run.ctx.tool_state),
                        task: Some(Arc::clone(&task)),
                        intent: run.intent,
                        history,
                        session_id: Some(Arc::from(run.session.id())),
                        call_seq: Some(call_seq),
                        progress: Some(progress_tx.clone()),
                    };
                    guarded(prepared, ctx, run.agent.config.tool_timeout, run.agent.config.abort_grace)
                }
            };
            calls.push(item.call);
            work.push(future);
        }
        drop(progress_tx);

        let mut results = futures::stream::iter(work).buffered(pool);
        let mut ran = Vec::new();
        let mut index = 0;
        let mut progress_open = true;
        loop {
            tokio::select! {
                progress = progress_rx.recv(), if progress_open => match progress {
                    Some(p) => forward(run.sink, &p),
                    None => progress_open = false,
                },
                next = results.next() => {
                    let Some((mut outcome, duration)) = next else { break };
                    let call = &calls[index];
                    let started = !duration.is_zero();
                    // A tool's own model requests are logged before its result.
                    if let Ok(output) = &mut outcome {
                        for mut aside in std::mem::take(&mut output.asides) {
                            aside.call_id = Some(call.id.clone());
                            run.log(EventKind::ModelAside(aside))?;
                        }
                    }
                    // Tokens a tool spent on model calls of its own count in the turn's usage.
                    if let Ok(ToolOutput { usage: Some(usage), .. }) = &outcome {
                        run.usage += *usage;
                    }
                    let mut result = result_data(call, sources[index], outcome, started.then_some(duration));
                    if let (true, Some(note)) = (started, notes.get(&call.id)) {
                        result.content.push_str(note);
                    }
                    if started {
                        ran.push(Ran { call: call.clone(), content: result.content.clone(), is_error: result.is_error });
                    }
                    concluded |= commit(run, step, call, result, duration)?;
                    index += 1;
                }
            }
        }
        while let Ok(p) = progress_rx.try_recv() {
            forward(run.sink, &p);
        }
        let after = run.after_calls(&ran, step).await?;
        context.extend(after.context);
        if let (Some(reason), None) = (after.stop, &stop) {
            stop = Some((TurnEndReason::Blocked, reason));
        }
    }
    run.log_nudges(context)?;

    Ok(match stop {
        Some((reason, detail)) => StepControl::End(reason, Some(detail)),
        None if concluded => StepControl::Concluded,
        None => StepControl::Continue { made_calls: true },
    })
}

/// Hands what a running tool streamed to the sink.
fn forward(sink: &dyn crate::sink::Sink, progress: &Progress) {
    let call_id = &progress.call_id;
    match &progress.report {
        Report::Text(text) => sink.emit(&AgentEvent::ToolProgress { call_id, text }),
        Report::Subagent(update) => sink.emit(&AgentEvent::Subagent { call_id, update }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn call(id: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall::new(id, "t", "{}"))
    }

    #[test]
    fn repeated_call_ids_are_made_unique() {
        let mut message = AssistantMessage {
            content: vec![call("a"), call("a"), call("a_2"), call("a")],
            ..Default::default()
        };
        dedupe_call_ids(&mut message, &HashSet::new());
        let ids: Vec<String> = message.tool_calls().map(|c| c.id.clone()).collect();
        assert_eq!(ids, vec!["a", "a_2", "a_2_2", "a_3"]);
        // Ids of earlier replies count too.
        let mut next = AssistantMessage { content: vec![call("call_0"), call("a")], ..Default::default() };
        let used: HashSet<String> = ["call_0".to_owned(), "a".to_owned(), "a_2".to_owned()].into();
        dedupe_call_ids(&mut next, &used);
        let ids: Vec<String> = next.tool_calls().map(|c| c.id.clone()).collect();
        assert_eq!(ids, vec!["call_0_2", "a_3"]);
    }
}
