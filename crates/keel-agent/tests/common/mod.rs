#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Tools and checks shared by the loop tests.

use keel_agent::ToolErrorKind;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_agent::{Inbox, Tool, ToolContext, ToolError, ToolOutput};
use keel_llm::Message;
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of the read tool.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// File path.
    pub path: String,
}

/// A read-only tool returning canned file contents.
pub struct FakeRead;

impl Tool for FakeRead {
    type Args = PathArgs;
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Reads a file."
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Reads { path: keel_agent::path_argument(arguments) }
    }
    async fn call(&self, args: PathArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        if args.path == "missing.txt" {
            return Err(ToolError::new(
                ToolErrorKind::NotFound,
                "missing.txt does not exist. Did you mean notes.txt?",
            ));
        }
        Ok(ToolOutput::text(format!("contents of {}", args.path)))
    }
}

/// Arguments of the sleep tools.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SleepArgs {
    /// Milliseconds to sleep.
    pub ms: u64,
    /// A label for the timeline.
    pub label: String,
}

/// (label, start, end) of each sleep.
pub type Timeline = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// A concurrency-safe sleeper that records when it ran.
pub struct SafeSleep(pub Timeline);

impl Tool for SafeSleep {
    type Args = SleepArgs;
    fn name(&self) -> &str {
        "safe_sleep"
    }
    fn description(&self) -> &str {
        "Sleeps (read-only)."
    }
    fn is_read_only(&self) -> bool {
        true
    }
    async fn call(&self, args: SleepArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        sleep_recorded(&self.0, args, ctx).await
    }
}

/// An exclusive sleeper that records when it ran.
pub struct ExclusiveSleep(pub Timeline);

impl Tool for ExclusiveSleep {
    type Args = SleepArgs;
    fn name(&self) -> &str {
        "exclusive_sleep"
    }
    fn description(&self) -> &str {
        "Sleeps (exclusive)."
    }
    async fn call(&self, args: SleepArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        sleep_recorded(&self.0, args, ctx).await
    }
}

async fn sleep_recorded(
    timeline: &Timeline,
    args: SleepArgs,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    let start = Instant::now();
    ctx.progress(format!("{} sleeping", args.label));
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(args.ms)) => {}
        _ = ctx.cancel.cancelled() => {
            timeline.lock().unwrap().push((args.label.clone(), start, Instant::now()));
            return Ok(ToolOutput::text(format!("{} interrupted", args.label)));
        }
    }
    timeline.lock().unwrap().push((args.label.clone(), start, Instant::now()));
    Ok(ToolOutput::text(format!("{} slept", args.label)))
}

/// Arguments of tools that take nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A tool that always fails.
pub struct Failing;

impl Tool for Failing {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "failing"
    }
    fn description(&self) -> &str {
        "Always fails."
    }
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::msg("disk quota exceeded; free some space and retry"))
    }
}

/// A tool that panics.
pub struct Panicking;

impl Tool for Panicking {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "panicking"
    }
    fn description(&self) -> &str {
        "Panics."
    }
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("index out of bounds in the tool")
    }
}

/// A tool that queues steering input while it runs.
pub struct Steerer(pub Inbox);

impl Tool for Steerer {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "steerer"
    }
    fn description(&self) -> &str {
        "Queues steering input."
    }
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.steer("also check the tests");
        Ok(ToolOutput::text("done"))
    }
}

/// A tool whose result ends the turn.
pub struct Finish;

impl Tool for Finish {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "finish"
    }
    fn description(&self) -> &str {
        "Delivers the final answer."
    }
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("final answer delivered").concluding())
    }
}

/// Asserts a provider-valid history: every call answered exactly once, in call order,
/// before the next user or assistant message.
pub fn assert_provider_valid(messages: &[Message]) {
    if let Err(e) = keel_session::validate(messages) {
        panic!("not provider-valid: {e}\n{messages:#?}");
    }
}

/// The history each model request of a recorded session carried, rebuilt from its log
/// alone: a step's request is the messages derived from the events before its
/// `step/start`; a step whose request was refused for its images made one more, derived
/// from the events through its `images/withdrawn`.
pub fn requests_from_log(events: &[keel_session::Event]) -> Vec<Vec<Message>> {
    use keel_session::{EventKind, derive_messages};
    let mut out = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match event.kind {
            EventKind::StepStart(_) => out.push(derive_messages(&events[..i]).unwrap()),
            EventKind::ImagesWithdrawn(_) => out.push(derive_messages(&events[..=i]).unwrap()),
            _ => {}
        }
    }
    out
}

/// The tool results of a history, as (call id, content, is_error).
pub fn results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.call_id.clone(), r.content.clone(), r.is_error)),
            _ => None,
        })
        .collect()
}

/// A hook that continues the first stopping turn once with `text`.
pub struct OnceMore(std::sync::atomic::AtomicBool, &'static str);

impl OnceMore {
    /// Continues once with `text`.
    pub fn new(text: &'static str) -> Self {
        OnceMore(std::sync::atomic::AtomicBool::new(false), text)
    }
}

impl keel_agent::Hooks for OnceMore {
    fn turn_stopping<'a>(
        &'a self,
        _state: keel_agent::TurnStopping<'a>,
    ) -> futures::future::BoxFuture<'a, Option<keel_agent::Nudge>> {
        let first = !self.0.swap(true, std::sync::atomic::Ordering::SeqCst);
        let text = self.1;
        Box::pin(async move { first.then(|| keel_agent::Nudge::new(text, "test: once more")) })
    }
}

/// A `hook/run` record of `event`, decided `decision`.
pub fn hook_run(event: &str, decision: Option<keel_agent::HookVerdict>) -> keel_agent::HookRun {
    keel_agent::HookRun {
        event: event.into(),
        command: format!("{event}.sh"),
        tool: None,
        call_id: None,
        outcome: keel_agent::HookOutcome::Ok,
        exit_code: Some(0),
        duration_ms: 1,
        decision,
        reason: None,
        error: None,
    }
}

/// Hooks as a user's hook commands act, each run reported: a prompt naming "secret" is
/// blocked, any other gets context; reading `b.txt` gets context after it, reading
/// `secret.txt` is denied, reading `stop.txt` stops the turn; the first stop continues
/// once; a compaction is seen.
#[derive(Default)]
pub struct UserLikeHooks {
    stopped: std::sync::atomic::AtomicBool,
    /// Compactions seen: reason and focus.
    pub compactions: Mutex<Vec<(keel_session::CompactionReason, Option<String>)>>,
}

impl keel_agent::Hooks for UserLikeHooks {
    fn prompt_submitted<'a>(
        &'a self,
        prompt: keel_agent::PromptSubmitted<'a>,
    ) -> futures::future::BoxFuture<'a, keel_agent::PromptDecision> {
        use keel_agent::{HookVerdict, Nudge, PromptDecision};
        Box::pin(async move {
            if prompt.prompt.contains("secret") {
                prompt.ctx.report_hook_run(hook_run("UserPromptSubmit", Some(HookVerdict::Block)));
                return PromptDecision::Block { reason: "prompts with secrets are refused".into() };
            }
            prompt.ctx.report_hook_run(hook_run("UserPromptSubmit", Some(HookVerdict::Context)));
            PromptDecision::Accept(vec![Nudge::new(
                "The build is at v2.",
                "hook/UserPromptSubmit: version.sh",
            )])
        })
    }

    fn before_tool_call<'a>(
        &'a self,
        request: keel_agent::ToolCallRequest<'a>,
    ) -> futures::future::BoxFuture<'a, keel_agent::HookDecision> {
        use keel_agent::{HookDecision, HookVerdict};
        Box::pin(async move {
            if request.call.arguments.contains("secret.txt") {
                request.ctx.report_hook_run(hook_run("PreToolUse", Some(HookVerdict::Deny)));
                return HookDecision::Deny { reason: "secret.txt is off limits".into() };
            }
            request.ctx.report_hook_run(hook_run("PreToolUse", None));
            HookDecision::Allow
        })
    }

    fn after_tool_call<'a>(
        &'a self,
        done: keel_agent::ToolCallDone<'a>,
    ) -> futures::future::BoxFuture<'a, keel_agent::AfterToolCall> {
        use keel_agent::{AfterToolCall, HookVerdict, Nudge};
        Box::pin(async move {
            let mut after = AfterToolCall::default();
            if done.call.arguments.contains("b.txt") {
                done.ctx.report_hook_run(hook_run("PostToolUse", Some(HookVerdict::Context)));
                after = after.with_context(Nudge::new("b.txt is generated.", "hook/PostToolUse: gen.sh"));
            } else if done.call.arguments.contains("stop.txt") {
                done.ctx.report_hook_run(hook_run("PostToolUse", Some(HookVerdict::Stop)));
                after = after.with_stop("the hook stopped the turn");
            }
            after
        })
    }

    fn turn_stopping<'a>(
        &'a self,
        state: keel_agent::TurnStopping<'a>,
    ) -> futures::future::BoxFuture<'a, Option<keel_agent::Nudge>> {
        let first = !self.stopped.swap(true, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            let verdict = first.then_some(keel_agent::HookVerdict::Continue);
            state.ctx.report_hook_run(hook_run("Stop", verdict));
            first.then(|| {
                keel_agent::Nudge::new("Stop hook feedback: check b.txt again", "hook/Stop: again.sh")
            })
        })
    }

    fn before_compaction<'a>(
        &'a self,
        compaction: keel_agent::CompactionStarting<'a>,
    ) -> futures::future::BoxFuture<'a, ()> {
        let mut seen = self.compactions.lock().unwrap();
        seen.push((compaction.reason, compaction.focus.map(str::to_owned)));
        compaction.ctx.report_hook_run(hook_run("PreCompact", None));
        Box::pin(async {})
    }
}
