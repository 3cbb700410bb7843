//! `step/resampled`: a step's reply set aside, and the step's request made again.
//!
//! A small model that makes a call, sees it fail, and makes the very same call again
//! rarely does anything else next: its most likely reply stays the same. The loop then
//! sets that reply aside and asks once more at a higher temperature. The reply set aside
//! was streamed to whoever watched the step, so it is logged, with its usage; it is not
//! part of the conversation (no later request carries it, its calls never ran), and a
//! replay gives it back to the step's first request as the model did.

use serde::{Deserialize, Serialize};

use keel_llm::AssistantMessage;

/// Data of `step/resampled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepResampled {
    /// The reply set aside, as it came (its calls never ran), with its usage.
    pub reply: AssistantMessage,
    /// Why it was set aside.
    pub reason: String,
    /// The sampling temperature the request was made again at.
    pub temperature: serde_json::Number,
}

impl StepResampled {
    /// A line for people: `reply set aside (…); asked again at temperature 0.8`.
    pub fn describe(&self) -> String {
        format!("reply set aside ({}); asked again at temperature {}", self.reason, self.temperature)
    }
}
