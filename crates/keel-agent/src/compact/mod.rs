//! Long sessions within the model's context window: old tool results pruned to stubs,
//! then the older part of the conversation replaced by a summary the model writes.
//!
//! Everything is an ordinary logged event (`context/pruned`, `compaction/start`,
//! `compaction/end`) that the session's projection applies, so what the model sees after
//! a compaction is exactly what the log says, live and on resume. The decisions are
//! pure functions in [`plan`]; this module makes the one model request and the appends.

pub mod plan;

use futures::StreamExt;
use keel_llm::{ModelClient, ModelError, ModelEvent, ModelRequest, ToolChoice, ToolDefinition, Usage};
use keel_session::{
    CompactionEnd, CompactionOutcome, CompactionReason, CompactionStart, EventKind, Pruned, Session,
    SessionError,
};
use tokio_util::sync::CancellationToken;

use crate::sink::{AgentEvent, Sink};

/// How full the context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextUsage {
    /// Tokens the next request will use (reported by the provider where it can be,
    /// estimated for what came after).
    pub tokens: u64,
    /// The model's context window, when known.
    pub window: Option<u64>,
}

impl ContextUsage {
    /// The share of the window in use, in percent, when the window is known.
    pub fn percent(&self) -> Option<u64> {
        self.window.filter(|w| *w > 0).map(|w| self.tokens * 100 / w)
    }
}

/// Why no summary took the older part's place. Its text is the `failure` that
/// `compaction/end` logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SummaryFailure {
    /// The summary request would not fit the window.
    #[error("the older part is too long to summarize within the window")]
    TooLong,
    /// The turn or the compaction was aborted during the request.
    #[error("aborted")]
    Aborted,
    /// The request failed; the model's error is kept whole (its message is in the text,
    /// so it is not the source), and whether the model had written anything first.
    #[error("the summary request failed: {}", .error.message)]
    Request { error: ModelError, after_output: bool },
    /// The stream ended without a reply.
    #[error("the summary request ended without a reply")]
    NoReply,
    /// The model wrote nothing.
    #[error("the summary was empty")]
    Empty,
    /// The summary (with the carried user input) would not leave the room a compaction is for.
    #[error("the summary left too little room")]
    TooLittleRoom,
}

/// The window and the shares that decide when and how much to compact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limits {
    pub window: u64,
    /// Compact above this share of the window.
    pub compact_at: f64,
    /// Keep about this share of the window verbatim.
    pub keep: f64,
}

impl Limits {
    fn threshold(&self) -> u64 {
        (self.window as f64 * self.compact_at) as u64
    }

    fn keep_tokens(&self) -> u64 {
        (self.window as f64 * self.keep) as u64
    }

    /// Room left for the summary itself in the summary request.
    fn reply_room(&self) -> u64 {
        (self.window / 8).clamp(256, 2048)
    }
}

/// Everything one compaction needs, borrowed from a turn or from [`crate::Agent::compact`].
pub(crate) struct Compactor<'a> {
    /// Told before a compaction starts ([`crate::Hooks::before_compaction`]).
    pub hooks: &'a dyn crate::Hooks,
    pub ctx: &'a crate::SessionContext,
    pub model: &'a dyn ModelClient,
    pub system: &'a str,
    pub tools: &'a crate::ToolRegistry,
    pub session: &'a mut Session,
    pub sink: &'a dyn Sink,
    pub cancel: &'a CancellationToken,
    pub limits: Limits,
}

/// Estimated tokens of the system prompt and the tool definitions.
pub(crate) fn overhead(system: &str, tools: &[ToolDefinition]) -> u64 {
    let tools: u64 = tools
        .iter()
        .map(|t| {
            plan::text_tokens(&t.name)
                + plan::text_tokens(&t.description)
                + plan::text_tokens(t.parameters.get())
        })
        .sum();
    plan::text_tokens(system) + tools
}

/// The context the next request of `session` will use.
pub(crate) fn context_tokens(session: &Session, system: &str, tools: &[ToolDefinition]) -> u64 {
    plan::context_tokens(session.messages(), session.projection().reported_context(), overhead(system, tools))
}

impl Compactor<'_> {
    fn log(&mut self, kind: EventKind) -> Result<u64, SessionError> {
        let sink = self.sink;
        self.session.append_observed(kind, |event| sink.emit(&AgentEvent::Logged(event)))
    }

    /// How the provider's token counts compare with keel's estimate of the same
    /// messages (from the last report; 1 without one), within 0.5–1.5.
    fn calibration(&self) -> f64 {
        let Some((reported, covered)) = self.session.projection().reported_context() else { return 1.0 };
        let estimated = overhead(self.system, self.tools.definitions())
            + plan::messages_tokens(&self.session.messages()[..covered]);
        if estimated == 0 || reported == 0 {
            return 1.0;
        }
        (reported as f64 / estimated as f64).clamp(0.5, 1.5)
    }

    /// Tells the hooks a compaction starts, and logs the runs they report. An abort
    /// stops the wait (the compaction then ends aborted).
    async fn before(&mut self, reason: CompactionReason, focus: Option<&str>) -> Result<(), SessionError> {
        let session_id = self.session.id().to_owned();
        let starting = crate::CompactionStarting { reason, focus, session_id: &session_id, ctx: self.ctx };
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => {}
            _ = self.hooks.before_compaction(starting) => {}
        }
        for run in self.ctx.take_hook_runs() {
            self.log(EventKind::HookRun(run))?;
        }
        Ok(())
    }

    fn used(&self) -> u64 {
        context_tokens(self.session, self.system, self.tools.definitions())
    }

    /// Prunes, then compacts, when the context is past the thresholds. Right after a
    /// compaction (`just_compacted`) another one runs only if the next request would
    /// not fit the window at all, so compaction cannot loop. Returns whether a
    /// compaction ran.
    pub(crate) async fn maybe(&mut self, just_compacted: bool) -> Result<bool, SessionError> {
        let threshold = self.limits.threshold();
        if self.used() <= threshold * 3 / 4 {
            return Ok(false);
        }
        self.prune()?;
        let used = self.used();
        if used <= threshold || (just_compacted && used + self.limits.reply_room() <= self.limits.window) {
            return Ok(false);
        }
        Ok(self.compact(CompactionReason::Threshold, None).await?.is_some())
    }

    /// Replaces large old results by stubs when that frees a meaningful amount.
    fn prune(&mut self) -> Result<bool, SessionError> {
        let (results, freed) = plan::prune_plan(self.session.messages(), self.limits.keep_tokens());
        if results.is_empty() || freed < (self.limits.window / 50).max(200) {
            return Ok(false);
        }
        self.log(EventKind::ContextPruned(Pruned { results, tokens_freed: freed }))?;
        Ok(true)
    }

    /// Replaces the older part of the conversation by a summary (or, when no good
    /// summary comes, by a note of what was dropped). `None` when there is nothing to
    /// compact.
    pub(crate) async fn compact(
        &mut self,
        reason: CompactionReason,
        focus: Option<&str>,
    ) -> Result<Option<CompactionEnd>, SessionError> {
        let messages = self.session.messages();
        // Asked for, with room to spare: keep at most a quarter of the conversation.
        let keep = match reason {
            CompactionReason::Manual => self.limits.keep_tokens().min(plan::messages_tokens(messages) / 4),
            _ => self.limits.keep_tokens(),
        };
        let Some(cut) = plan::cut_index(messages, keep) else {
            return Ok(None);
        };
        let first_kept_seq = self.session.projection().message_seq(cut).unwrap_or(self.session.next_seq());
        let older = messages[..cut].to_vec();
        let kept_tokens = plan::messages_tokens(&messages[cut..]);
        let tokens_before = self.used();
        let instruction = plan::summary_instruction(focus);
        self.before(reason, focus).await?;
        self.log(EventKind::CompactionStart(CompactionStart {
            reason,
            tokens_before,
            instruction: instruction.clone(),
        }))?;
        let overhead = overhead(self.system, self.tools.definitions());
        let estimated = overhead + plan::messages_tokens(&older) + plan::text_tokens(&instruction);
        let request_tokens = (estimated as f64 * self.calibration()) as u64;
        let summary = if request_tokens + self.limits.reply_room() > self.limits.window {
            Err(SummaryFailure::TooLong)
        } else {
            let id = self.session.id().to_owned();
            request_summary(
                self.model,
                self.system,
                self.tools.definitions(),
                &id,
                self.cancel,
                &older,
                &instruction,
            )
            .await
        };
        let summary = match summary {
            Err(SummaryFailure::Request { error, after_output: false })
                if crate::refusal::may_be_refused_content(&error) && !self.cancel.is_cancelled() =>
            {
                self.summary_without_images(&older, &instruction, error).await?
            }
            summary => summary,
        };
        if self.cancel.is_cancelled() {
            let end = aborted(tokens_before, summary.as_ref().map(|s| s.1).unwrap_or_default());
            self.log(EventKind::CompactionEnd(end.clone()))?;
            return Ok(Some(end));
        }
        let user_budget = self.limits.keep_tokens() / 2;
        let (summary, usage) = match summary {
            Ok((summary, _)) if summary.trim().is_empty() => (Err(SummaryFailure::Empty), Usage::default()),
            Ok((summary, usage)) => {
                let text = plan::summary_message(&older, user_budget, Ok(&summary), self.tools);
                let after = overhead + plan::text_tokens(&text) + kept_tokens;
                if plan::text_tokens(&text) < plan::messages_tokens(&older)
                    && after <= self.limits.threshold() * 9 / 10
                {
                    (Ok(text), usage)
                } else {
                    (Err(SummaryFailure::TooLittleRoom), usage)
                }
            }
            Err(why) => (Err(why), Usage::default()),
        };
        let end = match summary {
            // A compaction the user asked for never drops history: it says why and
            // leaves the conversation as it was.
            Err(why) if reason == CompactionReason::Manual => {
                CompactionEnd { failure: Some(why.to_string()), ..aborted(tokens_before, usage) }
            }
            summary => {
                let (outcome, text, failure) = match summary {
                    Ok(text) => (CompactionOutcome::Compacted, text, None),
                    Err(why) => {
                        let why = why.to_string();
                        let text = plan::summary_message(&older, user_budget, Err(&why), self.tools);
                        (CompactionOutcome::Dropped, text, Some(why))
                    }
                };
                let (files_read, files_changed) = plan::files_touched(&older, self.tools);
                CompactionEnd {
                    outcome,
                    tokens_after: overhead + plan::text_tokens(&text) + kept_tokens,
                    summary: text,
                    first_kept_seq,
                    tokens_before,
                    files_read,
                    files_changed,
                    usage,
                    failure,
                }
            }
        };
        self.log(EventKind::CompactionEnd(end.clone()))?;
        Ok(Some(end))
    }
}

impl Compactor<'_> {
    /// After the summary request of `older` was refused as invalid with `error`: the
    /// same request with each image replaced by a note, when `older` carried images. If
    /// the provider takes that one, the images are withdrawn in the log (as a step's
    /// would be, [`crate::refusal`]) before the compaction ends, so the kept part and
    /// later requests send the notes too. Otherwise the first refusal stands, with how
    /// the second request fared.
    async fn summary_without_images(
        &mut self,
        older: &[keel_llm::Message],
        instruction: &str,
        error: ModelError,
    ) -> Result<Result<(String, Usage), SummaryFailure>, SessionError> {
        let Some((sha256, bare)) = crate::refusal::without_images(older) else {
            return Ok(Err(SummaryFailure::Request { error, after_output: false }));
        };
        tracing::info!(images = sha256.len(), error = %error, "the summary request was refused; trying it without its images");
        let id = self.session.id().to_owned();
        let tools = self.tools.definitions();
        let retried =
            request_summary(self.model, self.system, tools, &id, self.cancel, &bare, instruction).await;
        Ok(match retried {
            Ok(summary) => {
                let reason = error.message;
                self.log(EventKind::ImagesWithdrawn(keel_session::ImagesWithdrawn { sha256, reason }))?;
                Ok(summary)
            }
            Err(SummaryFailure::Request { error: second, after_output }) => Err(SummaryFailure::Request {
                error: crate::refusal::refused_both_times(error, sha256.len(), &second),
                after_output,
            }),
            Err(SummaryFailure::Aborted) => Err(SummaryFailure::Aborted),
            Err(_) => Err(SummaryFailure::Request { error, after_output: false }),
        })
    }
}

/// Asks the model for the summary, offering no tools. The request's messages are the
/// logged older part plus the logged instruction. (A free function: the future must not
/// hold a borrow of the session, which is not `Sync`.)
async fn request_summary(
    model: &dyn ModelClient,
    system: &str,
    tools: &[ToolDefinition],
    session_id: &str,
    cancel: &CancellationToken,
    older: &[keel_llm::Message],
    instruction: &str,
) -> Result<(String, Usage), SummaryFailure> {
    let messages = plan::summary_request(older, instruction);
    let request =
        ModelRequest::new(system, &messages, tools).tool_choice(ToolChoice::None).cache_key(session_id);
    let mut stream = model.stream(request, cancel.child_token());
    let mut after_output = false;
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SummaryFailure::Aborted),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(ModelEvent::Completed(message))) => return Ok((message.text(), message.usage)),
            Some(Ok(ModelEvent::Retrying { .. })) => {}
            Some(Ok(_)) => after_output = true,
            Some(Err(error)) => return Err(SummaryFailure::Request { error, after_output }),
            None => return Err(SummaryFailure::NoReply),
        }
    }
}

fn aborted(tokens_before: u64, usage: Usage) -> CompactionEnd {
    CompactionEnd {
        outcome: CompactionOutcome::Aborted,
        summary: String::new(),
        first_kept_seq: 0,
        tokens_before,
        tokens_after: tokens_before,
        files_read: Vec::new(),
        files_changed: Vec::new(),
        usage,
        failure: None,
    }
}

impl crate::Agent {
    /// The window and shares for `ctx`'s model, when its window is known.
    pub(crate) fn limits(&self, ctx: &crate::SessionContext) -> Option<Limits> {
        let (model, _) = self.resolve(ctx);
        let window = self.config.context_window.or_else(|| model.context_window())?;
        Some(Limits { window, compact_at: self.config.compact_at, keep: self.config.compact_keep })
    }

    /// How full `session`'s context is for its next request.
    pub fn context_usage(&self, session: &Session, ctx: &crate::SessionContext) -> ContextUsage {
        let (_, system) = self.resolve(ctx);
        let tokens = context_tokens(session, system, self.tools_for(ctx).definitions());
        ContextUsage { tokens, window: self.limits(ctx).map(|l| l.window) }
    }

    /// Compacts `session` now (the CLI's `/compact`), whatever its size: the older part
    /// becomes a summary, with `focus` as a hint of what matters. Returns the
    /// `compaction/end` logged, or `None` when there was nothing to compact. `Err` only
    /// when the log could not be written.
    pub async fn compact(
        &self,
        session: &mut Session,
        ctx: &crate::SessionContext,
        focus: Option<&str>,
        sink: &dyn Sink,
        cancel: &CancellationToken,
    ) -> Result<Option<CompactionEnd>, crate::AgentError> {
        session.repair_observed(|event| sink.emit(&AgentEvent::Logged(event)))?;
        let (model, system) = self.resolve(ctx);
        let tools = self.tools_for(ctx);
        let limits = self
            .limits(ctx)
            .unwrap_or_else(|| assumed_limits(context_tokens(session, system, tools.definitions())));
        let hooks = &*self.hooks;
        let mut compactor =
            Compactor { hooks, ctx, model: &**model, system, tools, session, sink, cancel, limits };
        Ok(compactor.compact(CompactionReason::Manual, focus).await?)
    }
}

/// The window assumed for a compaction asked for while the model's window is unknown:
/// [`ASSUMED_WINDOW`] tokens, or twice the context in use if that is more (the model has
/// just taken all of it, so the older part fits; the summary gets room beside it).
pub(crate) fn assumed_limits(used: u64) -> Limits {
    Limits { window: used.saturating_mul(2).max(ASSUMED_WINDOW), compact_at: 0.8, keep: 0.2 }
}

/// The smallest window assumed for a model whose window is unknown (documented in
/// the README under `context_window`).
pub const ASSUMED_WINDOW: u64 = 8192;

/// Limits for a model whose window is unknown, from the context in use (which is at
/// or past the window when the provider says it overflowed).
pub(crate) fn guessed_limits(used: u64) -> Limits {
    Limits { window: used.max(2048), compact_at: 0.8, keep: 0.2 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::ModelErrorKind;
    use keel_testkit::{ScriptedModel, reply};

    /// Issue 31, item 5: a failed summary request keeps the model's error and its kind,
    /// and says what the log has always said.
    #[tokio::test]
    async fn a_failed_summary_request_keeps_the_models_error() {
        let refused = ModelError::new(ModelErrorKind::RateLimited, "slow down");
        let model = ScriptedModel::new([reply().fail(refused), reply().text("never asked")]);
        let cancel = CancellationToken::new();
        let ask = || request_summary(&model, "system", &[], "s", &cancel, &[], "summarize");
        let failure = ask().await.unwrap_err();
        let SummaryFailure::Request { error, after_output: false } = &failure else { panic!("{failure:?}") };
        assert_eq!(error.kind, ModelErrorKind::RateLimited);
        assert_eq!(failure.to_string(), "the summary request failed: slow down");
        cancel.cancel();
        assert_eq!(ask().await, Err(SummaryFailure::Aborted));
        assert_eq!(SummaryFailure::Aborted.to_string(), "aborted");
    }
}
