//! What one run of one task did, as kept in `summary.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::nudge::NudgeVerdict;

/// What one run of one task did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Task name.
    pub task: String,
    /// Task category.
    pub category: String,
    /// The task's set ("original" in records made before sets existed).
    #[serde(default = "crate::task::original_set")]
    pub set: String,
    /// The task that asks the same in another language (see [`crate::task::Task::twin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<String>,
    /// Run number, from 1; also the sampling seed given to keel.
    pub run: u32,
    /// The verification passed.
    pub passed: bool,
    /// What verify.sh printed.
    pub verify_output: String,
    /// keel's turn end reason (`completed`, `max_steps`, …), or `timeout` / `crashed`.
    pub reason: String,
    /// keel's exit code (-1 when killed).
    pub exit_code: i32,
    /// Steps taken.
    pub steps: u32,
    /// Tool calls answered.
    pub tool_calls: u32,
    /// Of those, results that were errors.
    pub tool_errors: u32,
    /// Error codes of failed results, counted.
    pub error_codes: BTreeMap<String, u32>,
    /// Calls per tool name.
    pub tools: BTreeMap<String, u32>,
    /// Calls the model wrote as text that keel recovered.
    pub text_calls: u32,
    /// Inputs keel added on its own (turn-stopping rules).
    pub nudges: u32,
    /// Times a stuck turn started again with a fresh context (`fresh_start`).
    #[serde(default)]
    pub restarts: u32,
    /// Prompt tokens over all requests.
    pub input_tokens: u64,
    /// Of those, served from a cache.
    pub cached_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Wall time of the keel run, in seconds, without the time it was stopped while its
    /// workspace was copied at a nudge.
    pub seconds: f64,
    /// keel's final answer.
    pub answer: String,
    /// Of the nudges, those that turned a failing state into a passing run.
    #[serde(default)]
    pub nudges_helped: u32,
    /// Of the nudges, those that turned a passing state into a failing run.
    #[serde(default)]
    pub nudges_hurt: u32,
    /// Every nudge with its reason and verdict, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nudge_verdicts: Vec<NudgeVerdict>,
    /// A failure of the run itself (keel could not start, a configuration error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
