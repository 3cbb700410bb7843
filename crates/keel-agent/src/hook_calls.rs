//! The loop's side of the hooks that see a prompt before it is logged and a call after
//! it ran: asking them (an abort stops the wait), logging the runs they report as
//! `hook/run`, and logging what they give the model as user input from a hook.

use keel_llm::ToolCall;
use keel_session::{EventKind, InputSource, SessionError, UserInput};

use crate::hook_points::{AfterToolCall, Nudge, PromptDecision, PromptSubmitted, ToolCallDone};
use crate::run::TurnRun;

/// A call of the current batch that ran, and its result as the model gets it.
pub(crate) struct Ran {
    pub call: ToolCall,
    pub content: String,
    pub is_error: bool,
}

impl TurnRun<'_> {
    /// Logs the hook runs reported since the last time, each as `hook/run`.
    pub(crate) fn log_hook_runs(&mut self) -> Result<(), SessionError> {
        for run in self.ctx.take_hook_runs() {
            self.log(EventKind::HookRun(run))?;
        }
        Ok(())
    }

    /// Logs what hooks give the model: user input from a hook, each with its reason.
    pub(crate) fn log_nudges(&mut self, nudges: Vec<Nudge>) -> Result<(), SessionError> {
        for nudge in nudges {
            self.log(EventKind::UserMessage(UserInput {
                text: nudge.text,
                source: InputSource::Hook,
                reason: Some(nudge.reason),
                images: Vec::new(),
            }))?;
        }
        Ok(())
    }

    /// Asks the hooks about the turn's prompt before it is logged. An abort while they
    /// decide accepts it (the turn then ends aborted).
    pub(crate) async fn submit_prompt(&mut self, prompt: &str) -> Result<PromptDecision, SessionError> {
        let session_id = self.session.id().to_owned();
        let submitted = PromptSubmitted {
            turn: self.turn,
            prompt,
            session_id: &session_id,
            new_session: self.turn == 1,
            ctx: self.ctx,
        };
        let hooks = &self.agent.hooks;
        let decision = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => PromptDecision::default(),
            decision = hooks.prompt_submitted(submitted) => decision,
        };
        self.log_hook_runs()?;
        Ok(decision)
    }

    /// Asks the hooks about each call of a batch that ran, in the model's order, and
    /// logs their runs. An abort stops asking.
    pub(crate) async fn after_calls(
        &mut self,
        ran: &[Ran],
        step: u32,
    ) -> Result<AfterToolCall, SessionError> {
        let session_id = self.session.id().to_owned();
        let mut all = AfterToolCall::default();
        for done in ran {
            if self.cancel.is_cancelled() {
                break;
            }
            let state = ToolCallDone {
                call: &done.call,
                content: &done.content,
                is_error: done.is_error,
                step,
                session_id: &session_id,
                ctx: self.ctx,
            };
            let hooks = &self.agent.hooks;
            let after = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => AfterToolCall::default(),
                after = hooks.after_tool_call(state) => after,
            };
            self.log_hook_runs()?;
            all.context.extend(after.context);
            all.stop = all.stop.or(after.stop);
        }
        Ok(all)
    }
}
