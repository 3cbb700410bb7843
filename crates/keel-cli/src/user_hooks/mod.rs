//! User hooks: commands the user configures in Claude Code's shape (`[[hooks.EVENT]]`,
//! a `matcher`, `{type = "command", command, timeout}`), run at `SessionStart`,
//! `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop` and `PreCompact` with the
//! event as JSON on stdin, in the shell's sandbox ([`run`]), answered by exit code and
//! JSON as Claude Code reads them ([`protocol`]).
//!
//! [`UserHooks`] takes the permission policy's place in the hook chain, so a hook's
//! decision and keel's rules are weighed in one place:
//! - **deny** refuses the call; the model gets the hook's reason. `continue: false` also
//!   stops the turn.
//! - **allow** skips the question `ask` mode would ask, and nothing else: the deny-list,
//!   deny and ask rules, `read-only` mode and the sandbox still apply (as in Claude Code,
//!   where a hook's allow skips the prompt but not deny or ask rules).
//! - **ask** asks the user about the call in every mode (where nobody can be asked, the
//!   call is refused); deny rules and the deny-list refuse it first.
//!
//! Every run is reported with [`keel_agent::SessionContext::report_hook_run`] and logged
//! as `hook/run`; what a hook gives the model is logged as a refusal or as user input
//! from a hook. A hook that cannot start, fails, times out or answers garbage is
//! reported and ignored: it never stalls the turn past its timeout, nor ends it.

mod config;
mod input;
mod matcher;
mod protocol;
mod run;

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_agent::{
    AfterToolCall, CompactionStarting, HookDecision, Hooks, Nudge, PromptDecision, PromptSubmitted,
    SessionContext, TaskIntent, ToolCallDone, ToolCallRequest, ToolRegistry, TurnStarted, TurnStopping,
};
use keel_session::{CompactionReason, HookRun, HookVerdict};
use keel_tools::rules::RuleVerdict;
use keel_tools::{AskAnswer, AskRequest, PermissionMode, PermissionPolicy};
use serde_json::{Map, Value, json};

pub use config::{Event, HookSet, HooksTable};
pub use run::Launch;

use protocol::Answer;

/// How many times Stop hooks may continue one turn; past that the turn ends.
pub const MAX_STOP_CONTINUES: u32 = 3;

/// The user's hooks, around the permission policy (see the module docs).
pub struct UserHooks {
    set: Arc<HookSet>,
    launch: Launch,
    policy: Arc<PermissionPolicy>,
}

/// Stop hooks' continuations of the current turn (a slot of the session's tool state).
#[derive(Default)]
struct StopCount {
    turn: u32,
    continued: u32,
}

/// Whether `SessionStart` ran for the session (a slot of its tool state, which a new or
/// resumed session starts empty).
#[derive(Default)]
struct SessionStarted(bool);

/// A call a run was for: its tool and id.
type Subject<'a> = Option<(&'a str, &'a str)>;

impl UserHooks {
    /// The hooks of `set`, launched as `launch` says, weighed with `policy`.
    pub fn new(set: Arc<HookSet>, launch: Launch, policy: Arc<PermissionPolicy>) -> Self {
        UserHooks { set, launch, policy }
    }

    /// Runs `event`'s hooks whose matcher takes `name`, all at once, and reports each
    /// run; returns the answers of the runs that worked, with their commands.
    async fn fire(
        &self,
        ctx: &SessionContext,
        session_id: &str,
        event: Event,
        name: Option<&str>,
        fields: Map<String, Value>,
        call: Subject<'_>,
    ) -> Vec<(String, Answer)> {
        let commands = self.set.commands(event, name);
        if commands.is_empty() {
            return Vec::new();
        }
        let common =
            input::Common { session_id, cwd: &ctx.workspace, permission_mode: self.policy.mode().as_str() };
        let input = input::encode(common, event, fields);
        let runs = commands.iter().map(|command| async {
            let output =
                run::run(&self.launch, &command.command, &ctx.workspace, &input, command.timeout).await;
            (command.command.clone(), output)
        });
        let mut answers = Vec::new();
        for (command, output) in futures::future::join_all(runs).await {
            let understood = protocol::understand(event, &output);
            ctx.report_hook_run(record(event, &command, call, &output, &understood));
            if let Ok(answer) = understood {
                answers.push((command, answer));
            }
        }
        answers
    }

    /// Whether keel's own rules refuse the call whatever a hook says: the deny-list, a
    /// deny rule, `read-only` mode for a call that changes something.
    fn policy_refuses(&self, request: &ToolCallRequest<'_>, rules: &RuleVerdict) -> bool {
        let call = request.call;
        let denied_command = call.name == "shell"
            && serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .and_then(|args| args.get("command").and_then(Value::as_str).map(str::to_owned))
                .is_some_and(|command| self.policy.denied_pattern(&command).is_some());
        denied_command
            || matches!(rules, RuleVerdict::Deny(_))
            || (self.policy.mode() == PermissionMode::ReadOnly && !request.read_only)
    }

    /// PreToolUse, weighed with the policy.
    async fn decide(&self, request: ToolCallRequest<'_>) -> HookDecision {
        let call = request.call;
        let fields = input::tool_fields(&call.name, &call.arguments, &call.id, &request.ctx.workspace);
        let subject = Some((call.name.as_str(), call.id.as_str()));
        let answers = self
            .fire(request.ctx, request.session_id, Event::PreToolUse, Some(&call.name), fields, subject)
            .await;
        let rules = || self.policy.rules().verdict(&call.name, &call.arguments);
        if let Some(reason) = reasons(&answers, HookVerdict::Stop) {
            return HookDecision::DenyAndStop { reason: format!("A hook stopped the turn: {reason}") };
        }
        if let Some(reason) = reasons(&answers, HookVerdict::Deny) {
            return HookDecision::Deny { reason: format!("Refused by a hook: {reason}") };
        }
        if let Some(reason) = reasons(&answers, HookVerdict::Ask) {
            let rules = rules();
            if !self.policy_refuses(&request, &rules) {
                return self.ask(call, reason).await;
            }
        } else if reasons(&answers, HookVerdict::Allow).is_some() {
            let rules = rules();
            if !self.policy_refuses(&request, &rules) && !matches!(rules, RuleVerdict::Ask(_)) {
                return HookDecision::Allow;
            }
        }
        self.policy.before_tool_call(request).await
    }

    /// Asks the user about a call a hook wants asked about.
    async fn ask(&self, call: &keel_llm::ToolCall, reason: String) -> HookDecision {
        let name = &call.name;
        let Some(ask) = self.policy.asker() else {
            return HookDecision::Deny {
                reason: format!(
                    "A hook asks for the user's permission for `{name}`, and nobody can be asked here."
                ),
            };
        };
        let mut question = AskRequest::new(name.clone(), call.arguments.clone());
        question.reason = Some(reason);
        match ask(question).await {
            AskAnswer::Allow | AskAnswer::AllowAlways => HookDecision::Allow,
            AskAnswer::Deny => HookDecision::Deny {
                reason: format!("The user declined `{name}`. Do not retry it; ask what they want instead."),
            },
            AskAnswer::DenyAndStop => HookDecision::DenyAndStop {
                reason: format!("The user declined `{name}` and stopped the turn."),
            },
            AskAnswer::DenyWithWords(words) => HookDecision::Deny {
                reason: format!(
                    "The user declined `{name}` and said instead:\n{}\nDo what they said.",
                    words.trim()
                ),
            },
        }
    }

    async fn after(&self, done: ToolCallDone<'_>) -> AfterToolCall {
        let call = done.call;
        let mut fields = input::tool_fields(&call.name, &call.arguments, &call.id, &done.ctx.workspace);
        fields.insert("tool_response".into(), json!({"content": done.content, "is_error": done.is_error}));
        let subject = Some((call.name.as_str(), call.id.as_str()));
        let answers =
            self.fire(done.ctx, done.session_id, Event::PostToolUse, Some(&call.name), fields, subject).await;
        let mut after = AfterToolCall::default();
        for (command, answer) in answers {
            let why = format!("hook/PostToolUse: {command}");
            if answer.decision == Some(HookVerdict::Stop) {
                let reason = answer
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("a PostToolUse hook (`{command}`) stopped"));
                after = after.with_stop(format!("A hook stopped the turn: {reason}"));
            }
            if let (Some(HookVerdict::Block), Some(reason)) = (answer.decision, &answer.reason) {
                let text =
                    format!("PostToolUse hook feedback on `{}` (call {}):\n{reason}", call.name, call.id);
                after = after.with_context(Nudge::new(text, why.clone()));
            }
            if let Some(context) = &answer.context {
                let text =
                    format!("PostToolUse hook context for `{}` (call {}):\n{context}", call.name, call.id);
                after = after.with_context(Nudge::new(text, why));
            }
        }
        after
    }

    async fn stopping(&self, state: TurnStopping<'_>) -> Option<Nudge> {
        let continued = state.ctx.tool_state.with(|count: &mut StopCount| {
            if count.turn != state.turn {
                *count = StopCount { turn: state.turn, continued: 0 };
            }
            count.continued
        });
        let fields = Map::from_iter([("stop_hook_active".to_owned(), json!(continued > 0))]);
        let answers = self.fire(state.ctx, state.session_id, Event::Stop, None, fields, None).await;
        let reason = reasons(&answers, HookVerdict::Continue)?;
        if continued >= MAX_STOP_CONTINUES {
            tracing::info!(turn = state.turn, "Stop hooks continued this turn {continued} times; it ends");
            return None;
        }
        state.ctx.tool_state.with(|count: &mut StopCount| count.continued += 1);
        Some(Nudge::new(
            format!("Stop hook feedback:\n{reason}"),
            why(&answers, HookVerdict::Continue, Event::Stop),
        ))
    }

    async fn prompt(&self, prompt: PromptSubmitted<'_>) -> PromptDecision {
        let mut context = Vec::new();
        let first = prompt
            .ctx
            .tool_state
            .with(|started: &mut SessionStarted| !std::mem::replace(&mut started.0, true));
        let mut events = Vec::new();
        if first {
            let source = if prompt.new_session { "startup" } else { "resume" };
            let fields = Map::from_iter([("source".to_owned(), json!(source))]);
            events.push((Event::SessionStart, Some(source), fields));
        }
        events.push((
            Event::UserPromptSubmit,
            None,
            Map::from_iter([("prompt".to_owned(), json!(prompt.prompt))]),
        ));
        for (event, name, fields) in events {
            let answers = self.fire(prompt.ctx, prompt.session_id, event, name, fields, None).await;
            let blocked =
                reasons(&answers, HookVerdict::Stop).or_else(|| reasons(&answers, HookVerdict::Block));
            if let Some(reason) = blocked {
                return PromptDecision::Block {
                    reason: format!("a {} hook blocked the prompt: {reason}", event.as_str()),
                };
            }
            for (command, answer) in answers {
                if let Some(text) = answer.context {
                    context.push(Nudge::new(text, format!("hook/{}: {command}", event.as_str())));
                }
            }
        }
        PromptDecision::Accept(context)
    }
}

/// The reasons of the answers that decided `verdict`, one a line (a default for those
/// that gave none); `None` when none did.
fn reasons(answers: &[(String, Answer)], verdict: HookVerdict) -> Option<String> {
    let texts: Vec<String> = answers
        .iter()
        .filter(|(_, answer)| answer.decision == Some(verdict))
        .map(|(command, answer)| {
            answer
                .reason
                .clone()
                .unwrap_or_else(|| format!("`{command}` said {} without a reason", verdict.as_str()))
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// `hook/EVENT: command, command`: the hooks that decided `verdict`.
fn why(answers: &[(String, Answer)], verdict: HookVerdict, event: Event) -> String {
    let commands: Vec<&str> =
        answers.iter().filter(|(_, a)| a.decision == Some(verdict)).map(|(c, _)| c.as_str()).collect();
    format!("hook/{}: {}", event.as_str(), commands.join(", "))
}

/// The `hook/run` record of one run.
fn record(
    event: Event,
    command: &str,
    call: Subject<'_>,
    output: &run::Output,
    understood: &Result<Answer, protocol::Broken>,
) -> HookRun {
    let exit_code = match output.ended {
        run::Ended::Exited(code) => Some(code),
        _ => None,
    };
    let (outcome, decision, reason, error) = match understood {
        Ok(answer) => {
            let reason =
                answer.reason.clone().or_else(|| answer.context.clone()).or_else(|| answer.note.clone());
            (keel_session::HookOutcome::Ok, answer.decision, reason, None)
        }
        Err(broken) => (broken.outcome, None, None, Some(broken.error.clone())),
    };
    HookRun {
        event: event.as_str().to_owned(),
        command: command.to_owned(),
        tool: call.map(|(tool, _)| tool.to_owned()),
        call_id: call.map(|(_, id)| id.to_owned()),
        outcome,
        exit_code,
        duration_ms: output.took.as_millis() as u64,
        decision,
        reason,
        error,
    }
}

/// One line for the terminal about a run worth a look (one that failed, decided, or
/// said something for the user); `None` for a quiet one.
pub fn describe(run: &HookRun) -> Option<String> {
    let what = match (&run.error, run.decision, &run.reason) {
        (Some(error), _, _) => format!("{error}; ignored"),
        (None, Some(decision), Some(reason)) => format!("{}: {}", decision.as_str(), first_line(reason)),
        (None, Some(decision), None) => decision.as_str().to_owned(),
        (None, None, Some(note)) => first_line(note),
        (None, None, None) => return None,
    };
    Some(format!("  hook {} `{}`: {what}", run.event, first_line(&run.command)))
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    match line.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None if text.trim().lines().count() > 1 => format!("{line} …"),
        None => line.to_owned(),
    }
}

impl Hooks for UserHooks {
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(self.decide(request))
    }

    fn after_tool_call<'a>(&'a self, done: ToolCallDone<'a>) -> BoxFuture<'a, AfterToolCall> {
        Box::pin(self.after(done))
    }

    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        Box::pin(self.stopping(state))
    }

    fn prompt_submitted<'a>(&'a self, prompt: PromptSubmitted<'a>) -> BoxFuture<'a, PromptDecision> {
        Box::pin(self.prompt(prompt))
    }

    fn before_compaction<'a>(&'a self, compaction: CompactionStarting<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let trigger = if compaction.reason == CompactionReason::Manual { "manual" } else { "auto" };
            let fields = Map::from_iter([
                ("trigger".to_owned(), json!(trigger)),
                ("custom_instructions".to_owned(), json!(compaction.focus.unwrap_or(""))),
            ]);
            let ctx = compaction.ctx;
            self.fire(ctx, compaction.session_id, Event::PreCompact, Some(trigger), fields, None).await;
        })
    }

    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        self.policy.turn_started(state)
    }

    fn turn_tools(&self, task: &str, intent: TaskIntent, tools: &ToolRegistry) -> Option<ToolRegistry> {
        self.policy.turn_tools(task, intent, tools)
    }
}
