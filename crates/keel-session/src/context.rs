//! Events that keep a long session within the model's context window: old tool results
//! replaced by stubs (`context/pruned`), and the older part of the conversation replaced
//! by a summary (`compaction/start`, `compaction/end`). The projection applies them, so
//! the model sees exactly what the log says.

use keel_llm::Usage;
use serde::{Deserialize, Serialize};

/// Data of `context/pruned`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pruned {
    /// The results replaced, each by its stub.
    pub results: Vec<PrunedResult>,
    /// Tokens the replacement freed (an estimate).
    #[serde(default)]
    pub tokens_freed: u64,
}

/// One tool result replaced by a stub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunedResult {
    /// The call whose result was replaced.
    pub call_id: String,
    /// What the model sees instead, e.g. `[output of shell \`cargo test\` pruned: 48 KB; rerun to see it]`.
    pub stub: String,
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactionReason {
    /// The context passed the configured share of the window.
    Threshold,
    /// The provider said the conversation no longer fits.
    Overflow,
    /// The user asked (`/compact`).
    Manual,
    /// The turn was stuck (repeating calls, or out of steps) and starts again from its
    /// task with a fresh context (`AgentConfig::fresh_start`); no model request.
    Restart,
}

/// Data of `compaction/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionStart {
    /// Why.
    pub reason: CompactionReason,
    /// The context before, in tokens.
    #[serde(default)]
    pub tokens_before: u64,
    /// The request sent after the older messages to get the summary (model-visible, so
    /// logged).
    pub instruction: String,
}

/// How a compaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactionOutcome {
    /// The older part was replaced by the model's summary.
    Compacted,
    /// The summary was rejected (too long, or the request failed): the oldest steps
    /// were dropped instead, with a note (see `failure`).
    Dropped,
    /// Nothing changed (crash, abort, nothing to compact, or a compaction the user asked
    /// for whose summary failed: see `failure`); closed by repair or the loop.
    Aborted,
    /// The whole conversation was replaced by the stuck turn's task and a note of what
    /// its first attempt changed (reason [`CompactionReason::Restart`]).
    Restarted,
}

/// Data of `compaction/end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionEnd {
    /// What happened.
    pub outcome: CompactionOutcome,
    /// The text that replaces the messages before `first_kept_seq`, exactly as the model
    /// sees it (empty when aborted).
    #[serde(default)]
    pub summary: String,
    /// Seq of the first event whose message is kept verbatim.
    #[serde(default)]
    pub first_kept_seq: u64,
    /// The context before and after, in tokens (estimates where not reported).
    #[serde(default)]
    pub tokens_before: u64,
    /// After.
    #[serde(default)]
    pub tokens_after: u64,
    /// Files the summarized part read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_read: Vec<String>,
    /// Files the summarized part changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
    /// Tokens the summary request used.
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    /// Why no summary was used, when none was (`the summary request failed: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}
