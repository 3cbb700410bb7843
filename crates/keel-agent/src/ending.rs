//! How a turn ends early: stuck repeating the same calls, or out of steps. Either way
//! the model is asked once, with tools off, for what it found.

use keel_llm::ToolChoice;
use keel_session::{InputSource, SessionError, TurnEndReason};

use crate::agent::TurnOutcome;
use crate::execute::StepControl;
use crate::run::TurnRun;
use crate::turn::STEP_LIMIT_SUMMARY_REQUEST;

impl TurnRun<'_> {
    /// Ends a turn stuck repeating itself, after asking for an answer with tools off.
    pub(crate) async fn stop_looping(&mut self) -> Result<TurnOutcome, SessionError> {
        let message = format!(
            "stopped: the model made the same calls {} times in a row without progress",
            self.agent.config.loop_stop_at
        );
        if !self.cancel.is_cancelled() {
            self.tools_off = "not run: the turn was stopped for repeating the same calls";
            self.user(crate::loops::LOOP_SUMMARY_REQUEST.to_owned(), InputSource::Harness)?;
            if let StepControl::End(reason, detail) = self.step(ToolChoice::None).await? {
                return self.end(reason, detail).await;
            }
        }
        self.end(TurnEndReason::Looping, Some(message)).await
    }

    pub(crate) async fn step_limit(&mut self) -> Result<TurnOutcome, SessionError> {
        let limit = self.step;
        let summary = self.agent.config.summary_on_step_limit && !self.cancel.is_cancelled();
        // The summary is one more model request, counted as a step: say so, so the
        // figures agree.
        let message = if summary {
            format!(
                "stopped at the step limit ({limit} steps), then one step more for a summary with tools off; raise the limit with --max-steps or continue in a new turn"
            )
        } else {
            format!(
                "stopped after {limit} steps (the step limit); raise it with --max-steps or continue in a new turn"
            )
        };
        if summary {
            self.tools_off = "not run: the step limit was reached";
            self.user(STEP_LIMIT_SUMMARY_REQUEST.to_owned(), InputSource::Harness)?;
            if let StepControl::End(reason, detail) = self.step(ToolChoice::None).await? {
                return self.end(reason, detail).await;
            }
        }
        self.end(TurnEndReason::MaxSteps, Some(message)).await
    }
}
