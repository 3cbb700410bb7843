//! The plan an agent keeps (`update_plan`): steps and their status, carried in the
//! effect of the call that set it ([`crate::Effect::Plans`]), so the terminal, the JSON
//! stream, the server and compaction read it from the log without knowing the tool.

use serde::{Deserialize, Serialize};

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step does, in a few words.
    pub step: String,
    /// Where it stands.
    pub status: PlanStatus,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one step at a time).
    InProgress,
    /// Finished.
    Completed,
}

impl PlanStatus {
    /// The mark shown before a step: `[x]`, `[>]` or `[ ]`.
    pub fn mark(self) -> &'static str {
        match self {
            PlanStatus::Completed => "[x]",
            PlanStatus::InProgress => "[>]",
            PlanStatus::Pending => "[ ]",
        }
    }
}

/// The plan as text, one step a line with its mark (for the model and plain output).
pub fn plan_text(steps: &[PlanStep]) -> String {
    steps.iter().map(|s| format!("{} {}", s.status.mark(), s.step)).collect::<Vec<_>>().join("\n")
}
