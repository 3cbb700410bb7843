//! The loop: a turn is steps until the model stops asking for tools.

use std::borrow::Cow;
use std::collections::HashMap;

use futures::StreamExt;
use keel_llm::{AssistantMessage, FinishReason, ModelError, ModelEvent, ModelRequest, ToolChoice, Usage};
use keel_session::{
    CompactionEnd, CompactionOutcome, CompactionReason, CompactionStart, EventKind, InputSource, Session,
    SessionError, StepEnd, StepStart, TurnEnd, TurnEndReason, TurnStart, UserInput,
};
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, TurnOutcome};
use crate::compact::Compactor;
use crate::context::SessionContext;
use crate::execute::{StepControl, execute_calls};
use crate::hook_points::PromptDecision;
use crate::hooks::{TurnStarted, TurnStopping};
use crate::prompt::Prompt;
use crate::restart::Stuck;
use crate::run::TurnRun;
use crate::sink::{AgentEvent, Sink};

/// Why the loop cannot go on at all: the session could not be written. Everything
/// else (model errors, aborts, limits) ends the turn with a reason instead.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Appending to or syncing the session log failed; nothing more is done without a log.
    #[error("session log: {0}")]
    Session(#[from] SessionError),
    /// The prompt was refused before anything was logged (images the model cannot take).
    #[error(transparent)]
    Prompt(#[from] crate::prompt::PromptError),
}

/// Text of the user message that asks for a final answer at the step limit.
pub const STEP_LIMIT_SUMMARY_REQUEST: &str = "You have reached the step limit for this task, so no more tools can \
be run. Reply now without calling tools: summarize what you found and did, what remains undone, and the \
best answer you can give from what you learned.";

pub(crate) enum Reply {
    Completed(AssistantMessage),
    Aborted(AssistantMessage),
    Failed(AssistantMessage, ModelError),
}

impl TurnRun<'_> {
    pub(crate) fn user(&mut self, text: String, source: InputSource) -> Result<u64, SessionError> {
        self.log(EventKind::UserMessage(UserInput { text, source, reason: None, images: Vec::new() }))
    }

    /// The user's prompt, with its images (their bytes go to the store first).
    fn prompt(&mut self, prompt: Prompt) -> Result<u64, SessionError> {
        let Prompt { text, images } = prompt;
        self.log(EventKind::UserMessage(UserInput {
            text,
            source: InputSource::Prompt,
            reason: None,
            images,
        }))
    }

    /// Asks the model what the task wants and logs the exchange and the result.
    async fn read_intent(&mut self, task: &str) -> Result<(), SessionError> {
        let (intent, asides, usage) = crate::intent::read(self.model, task, self.cancel.child_token()).await;
        self.usage += usage;
        for aside in asides {
            self.log(EventKind::ModelAside(aside))?;
        }
        self.log(EventKind::TurnIntent(intent))?;
        self.intent = intent;
        Ok(())
    }

    /// Streams the step's reply to the history derived from the log, or to `messages`
    /// in its place (the same request with refused images as notes: [`crate::refused`]).
    pub(crate) async fn stream_reply(
        &mut self,
        tool_choice: ToolChoice,
        messages: Option<&[keel_llm::Message]>,
    ) -> Reply {
        // Debug builds check the invariant every request relies on.
        #[cfg(debug_assertions)]
        if let Err(e) = keel_session::validate(self.session.messages()) {
            let error = ModelError::new(
                keel_llm::ModelErrorKind::InvalidResponse,
                format!("keel bug: the history derived from the log is not provider-valid ({e})"),
            );
            return Reply::Failed(AssistantMessage::default(), error);
        }
        let messages = messages.unwrap_or(self.session.messages());
        let request = ModelRequest::new(self.system, messages, self.tools.definitions())
            .tool_choice(tool_choice)
            .cache_key(self.session.id());
        let mut stream = self.model.stream(request, self.cancel.child_token());
        let mut partial = keel_llm::MessageBuilder::new();
        loop {
            let item = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Reply::Aborted(partial.into_partial(FinishReason::Aborted)),
                item = stream.next() => item,
            };
            match item {
                Some(Ok(ModelEvent::Completed(message))) => return Reply::Completed(message),
                Some(Ok(event)) => {
                    if let ModelEvent::Retrying { .. } = event {
                        partial.clear();
                    } else {
                        partial.apply(&event);
                    }
                    self.sink.emit(&AgentEvent::Model(&event));
                }
                Some(Err(error)) => {
                    return Reply::Failed(partial.into_partial(FinishReason::Error), error);
                }
                None => {
                    let error = ModelError::new(
                        keel_llm::ModelErrorKind::InvalidResponse,
                        "the model stream ended without a complete message",
                    );
                    return Reply::Failed(partial.into_partial(FinishReason::Error), error);
                }
            }
        }
    }

    /// One step: request, reply, tools. Returns how the loop should go on.
    pub(crate) async fn step(&mut self, tool_choice: ToolChoice) -> Result<StepControl, SessionError> {
        self.step += 1;
        let step = self.step;
        if self.session.projection().request_header() != Some(&self.header) {
            self.log(EventKind::RequestHeader(self.header.clone()))?;
        }
        self.log(EventKind::StepStart(StepStart { step }))?;
        let reply = match self.stream_reply(tool_choice, None).await {
            Reply::Failed(partial, error) => self.without_refused_images(tool_choice, partial, error).await?,
            reply => reply,
        };
        let message = match reply {
            Reply::Completed(message) => message,
            Reply::Aborted(partial) => {
                self.log(EventKind::AssistantMessage(partial))?;
                self.log(EventKind::StepEnd(StepEnd { step, interrupted: true }))?;
                return Ok(StepControl::End(
                    TurnEndReason::Aborted,
                    Some(self.ctx.inbox.take_abort_reason()),
                ));
            }
            Reply::Failed(partial, error) => {
                let overflow = error.kind == keel_llm::ModelErrorKind::ContextOverflow && partial.is_empty();
                if !partial.is_empty() {
                    self.log(EventKind::AssistantMessage(partial))?;
                }
                self.log(EventKind::StepEnd(StepEnd { step, interrupted: true }))?;
                let message = format!("model request failed ({}): {}", error.kind.as_str(), error.message);
                if overflow && !self.overflow_compacted {
                    return Ok(StepControl::Overflow(message));
                }
                return Ok(StepControl::End(TurnEndReason::Error, Some(message)));
            }
        };
        let mut message = message;
        crate::execute::dedupe_call_ids(&mut message, self.session.projection().call_ids());
        self.usage += message.usage;
        self.final_text = message.text();
        let calls: Vec<_> = message.tool_calls().cloned().collect();
        let length_cut = message.finish_reason == FinishReason::Length;
        let message_seq = self.log(EventKind::AssistantMessage(message))?;
        let (repeated, notes) = self.count_repeats(&calls);
        let stop_at = self.agent.config.loop_stop_at;
        let control = if calls.is_empty() {
            StepControl::Continue { made_calls: false }
        } else if stop_at > 0 && repeated >= stop_at && tool_choice != ToolChoice::None {
            crate::execute::refuse_calls(self, &calls, message_seq, step, crate::loops::NOT_RUN_LOOPING)?;
            StepControl::Looping
        } else if tool_choice == ToolChoice::None {
            // The model ignored "no tools": answer every call so the history stays valid.
            crate::execute::refuse_calls(self, &calls, message_seq, step, self.tools_off)?;
            StepControl::Continue { made_calls: false }
        } else {
            execute_calls(self, calls, message_seq, step, length_cut, &notes).await?
        };
        let interrupted = matches!(control, StepControl::End(TurnEndReason::Aborted, _));
        self.log(EventKind::StepEnd(StepEnd { step, interrupted }))?;
        Ok(control)
    }

    /// Records this step's calls for loop detection: the most times in a row any of them
    /// was repeated, and the notes for calls repeated past the warning threshold.
    fn count_repeats(&mut self, calls: &[keel_llm::ToolCall]) -> (u32, HashMap<String, String>) {
        let warn_at = self.agent.config.loop_warn_at;
        let mut most = 0;
        let mut notes = HashMap::new();
        for call in calls {
            let times = self.repeats.record(call, &self.tools);
            most = most.max(times);
            if warn_at > 0 && times >= warn_at {
                notes.insert(call.id.clone(), crate::loops::repeat_note(times));
            }
        }
        (most, notes)
    }

    pub(crate) async fn end(
        &mut self,
        reason: TurnEndReason,
        message: Option<String>,
    ) -> Result<TurnOutcome, SessionError> {
        self.log(EventKind::TurnEnd(TurnEnd {
            turn: self.turn,
            reason,
            message: message.clone(),
            usage: self.usage,
        }))?;
        self.sync().await?;
        Ok(TurnOutcome {
            turn: self.turn,
            reason,
            message,
            final_text: std::mem::take(&mut self.final_text),
            steps: self.step,
            tool_calls: self.tool_calls,
            usage: self.usage,
        })
    }

    async fn run(&mut self, input: Prompt) -> Result<TurnOutcome, SessionError> {
        self.log(EventKind::TurnStart(TurnStart { turn: self.turn }))?;
        let context = match self.submit_prompt(&input.text).await? {
            PromptDecision::Block { reason } => return self.end(TurnEndReason::Blocked, Some(reason)).await,
            PromptDecision::Accept(context) => context,
        };
        if self.session.messages().is_empty()
            && let Some(environment) = &self.ctx.environment
        {
            self.user(environment.clone(), InputSource::Context)?;
        }
        self.task = std::sync::Arc::from(input.text.as_str());
        self.prompt(input)?;
        self.log_nudges(context)?;
        // The message holding the prompt (input may have joined the one before it).
        self.first_message = self.session.messages().len().saturating_sub(1);
        if let Some(keel_llm::Message::User(user)) = self.session.messages().get(self.first_message) {
            self.prompt = user.content.clone();
        }
        for text in self.ctx.inbox.take_steering() {
            self.user(text, InputSource::Steer)?;
        }
        self.sync().await?;
        let task = crate::hooks::task_of(&self.session.messages()[self.first_message..]).to_owned();
        if self.agent.config.read_intent && !task.is_empty() {
            self.read_intent(&task).await?;
            self.sync().await?;
        }
        let (task, intent) = (task.as_str(), self.intent);
        let session_id = self.session.id().to_owned();
        let started = TurnStarted { turn: self.turn, session_id: &session_id, ctx: self.ctx, task, intent };
        self.agent.hooks.turn_started(started).await;
        self.log_hook_runs()?;
        if let Some(tools) = self.agent.hooks.turn_tools(task, intent, &self.tools) {
            tracing::debug!(turn = self.turn, tools = ?tools, "this turn offers fewer tools");
            self.header.tools = tools.definitions().to_vec();
            self.tools = Cow::Owned(tools);
        }
        loop {
            if self.cancel.is_cancelled() {
                return self.end(TurnEndReason::Aborted, Some(self.ctx.inbox.take_abort_reason())).await;
            }
            // With always_call, every step; with tool_first, a step that answers user input
            // (the prompt, steering, a hook's request) must act before it may talk.
            let answers_input = matches!(self.session.messages().last(), Some(keel_llm::Message::User(_)));
            let config = &self.agent.config;
            let required = config.always_call || (answers_input && config.tool_first);
            let choice =
                if required && !self.tools.is_empty() { ToolChoice::Required } else { ToolChoice::Auto };
            // A result that concludes the turn ends it like an answer without calls: the
            // turn-stopping hooks still have their say.
            let just_compacted = std::mem::take(&mut self.compacted_last);
            self.compacted_last = self.maybe_compact(just_compacted).await?;
            let (made_calls, concluded) = match self.step(choice).await? {
                StepControl::End(reason, message) => return self.end(reason, message).await,
                StepControl::Overflow(message) => {
                    self.overflow_compacted = true;
                    if self.compact_after_overflow().await? && !self.cancel.is_cancelled() {
                        self.compacted_last = true;
                        continue;
                    }
                    return self.end(TurnEndReason::Error, Some(message)).await;
                }
                StepControl::Concluded => (false, true),
                StepControl::Looping if self.may_start_again() => {
                    self.start_again(Stuck::Looping).await?;
                    continue;
                }
                StepControl::Looping => return self.stop_looping().await,
                StepControl::Continue { made_calls } => (made_calls, false),
            };
            // The retry got through: a later overflow gets its own compaction.
            self.overflow_compacted = false;
            let steering = self.ctx.inbox.take_steering();
            let steered = !steering.is_empty();
            for text in steering {
                self.user(text, InputSource::Steer)?;
            }
            if !made_calls && !steered {
                let messages = self.session.messages();
                let state = TurnStopping {
                    turn: self.turn,
                    steps: self.step,
                    final_text: &self.final_text,
                    messages: &messages[self.first_message.min(messages.len())..],
                    tools: &self.tools,
                    session_id: self.session.id(),
                    ctx: self.ctx,
                    concluded,
                    intent: self.intent,
                    failures: &self.failures,
                };
                let nudge = self.agent.hooks.turn_stopping(state).await;
                self.log_hook_runs()?;
                match nudge {
                    Some(nudge) => self.log_nudges(vec![nudge])?,
                    None => return self.end(TurnEndReason::Completed, None).await,
                };
            }
            if self.step >= self.last_step {
                if self.may_start_again() {
                    self.start_again(Stuck::OutOfSteps(self.step)).await?;
                    continue;
                }
                return self.step_limit().await;
            }
        }
    }

    fn compactor(&mut self, limits: crate::compact::Limits) -> Compactor<'_> {
        Compactor {
            hooks: &*self.agent.hooks,
            ctx: self.ctx,
            model: self.model,
            system: self.system,
            tools: &self.tools,
            session: self.session,
            sink: self.sink,
            cancel: self.cancel,
            limits,
        }
    }

    /// Prunes or compacts when the context is past its thresholds (a known window and a
    /// non-zero `compact_at`). Returns whether a compaction ran.
    async fn maybe_compact(&mut self, just_compacted: bool) -> Result<bool, SessionError> {
        match self.agent.limits(self.ctx) {
            Some(limits) if limits.compact_at > 0.0 => self.compactor(limits).maybe(just_compacted).await,
            _ => Ok(false),
        }
    }

    /// One compaction after the provider said the context overflowed. Returns whether
    /// the history changed, so the step may be retried.
    async fn compact_after_overflow(&mut self) -> Result<bool, SessionError> {
        let limits = match self.agent.limits(self.ctx) {
            Some(limits) => limits,
            None => crate::compact::guessed_limits(crate::compact::context_tokens(
                self.session,
                self.system,
                self.tools.definitions(),
            )),
        };
        let end = self.compactor(limits).compact(CompactionReason::Overflow, None).await?;
        Ok(end.is_some_and(|end| end.outcome != CompactionOutcome::Aborted))
    }

    fn may_start_again(&self) -> bool {
        self.agent.config.fresh_start && !self.restarted && !self.cancel.is_cancelled()
    }

    /// Starts a stuck turn again from its task with a fresh context ([`crate::restart`]):
    /// the conversation is replaced (a logged compaction with reason `restart`), the
    /// loop counts are cleared (the session's `ToolState` is not), and the turn gets half
    /// of `max_steps` more.
    async fn start_again(&mut self, stuck: Stuck) -> Result<(), SessionError> {
        self.restarted = true;
        let messages = self.session.messages();
        // A compaction inside the turn moves its prompt: then the turn is all there is.
        let first = match messages.get(self.first_message) {
            Some(keel_llm::Message::User(user)) if user.content == self.prompt => self.first_message,
            _ => 0,
        };
        let (earlier, turn) = messages.split_at(first);
        let summary = crate::restart::fresh_start_message(&self.prompt, earlier, turn, stuck, &self.tools);
        let (files_read, files_changed) = crate::compact::plan::files_touched(turn, &self.tools);
        let definitions = self.tools.definitions();
        let tokens_before = crate::compact::context_tokens(self.session, self.system, definitions);
        let tokens_after =
            crate::compact::overhead(self.system, definitions) + crate::compact::plan::text_tokens(&summary);
        tracing::info!(turn = self.turn, step = self.step, why = %stuck.describe(), "the turn starts again");
        self.log(EventKind::CompactionStart(CompactionStart {
            reason: CompactionReason::Restart,
            tokens_before,
            instruction: String::new(),
        }))?;
        // Keeping nothing: the fresh message replaces the whole conversation.
        let first_kept_seq = self.session.next_seq() + 1;
        self.log(EventKind::CompactionEnd(CompactionEnd {
            outcome: CompactionOutcome::Restarted,
            summary,
            first_kept_seq,
            tokens_before,
            tokens_after,
            files_read,
            files_changed,
            usage: Usage::default(),
            failure: None,
        }))?;
        self.sync().await?;
        self.first_message = 0;
        // The tools' session memory stays: hooks keep theirs (the turn's question, the
        // files' state at its start) in the same store.
        self.repeats = crate::loops::Repeats::default();
        self.last_step = self.step + self.agent.config.max_steps.div_ceil(2);
        Ok(())
    }
}

impl Agent {
    /// Runs one turn: `input` becomes a user message, then steps run until the model
    /// answers without tools, the step limit, an abort (`cancel`), a blocking hook or an
    /// error. Every event goes to `session` and to `sink`.
    ///
    /// An interrupted earlier turn is repaired first. `Err` means only that the session
    /// log could not be written.
    pub async fn run_turn(
        &self,
        session: &mut Session,
        ctx: &SessionContext,
        input: impl Into<Prompt>,
        sink: &dyn Sink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let input = input.into();
        input.check(&**self.resolve(ctx).0)?;
        session.repair_observed(|event| sink.emit(&AgentEvent::Logged(event)))?;
        let turn = session.projection().turns() + 1;
        let task = &session.messages()[session.projection().task_start()..];
        let repeats = crate::loops::Repeats::from_messages(task, self.tools_for(ctx));
        let (model, system) = self.resolve(ctx);
        let mut run = TurnRun {
            agent: self,
            ctx,
            model: &**model,
            system,
            tools: Cow::Borrowed(self.tools_for(ctx)),
            header: self.request_header(ctx),
            session,
            sink,
            cancel,
            turn,
            step: 0,
            usage: Usage::default(),
            tool_calls: 0,
            final_text: String::new(),
            first_message: 0,
            repeats,
            tools_off: "not run: tools are off for this reply",
            compacted_last: false,
            overflow_compacted: false,
            last_step: self.config.max_steps,
            restarted: false,
            prompt: String::new(),
            task: std::sync::Arc::from(""),
            intent: keel_session::TaskIntent::default(),
            failures: Vec::new(),
        };
        Ok(run.run(input).await?)
    }

    /// Runs a turn for `input`, then one turn per queued follow-up input, until the inbox
    /// has none or a turn does not complete. Returns every turn's outcome.
    pub async fn run(
        &self,
        session: &mut Session,
        ctx: &SessionContext,
        input: impl Into<Prompt>,
        sink: &dyn Sink,
        cancel: &CancellationToken,
    ) -> Result<Vec<TurnOutcome>, AgentError> {
        let mut outcomes = vec![self.run_turn(session, ctx, input, sink, cancel).await?];
        while outcomes.last().is_some_and(|o| o.reason == TurnEndReason::Completed) {
            let Some(next) = ctx.inbox.take_follow_up() else {
                break;
            };
            outcomes.push(self.run_turn(session, ctx, next, sink, cancel).await?);
        }
        Ok(outcomes)
    }
}
