//! Deterministic crash repair (invariant 5).
//!
//! A log that ends mid-turn is closed by appending synthetic events, never by editing
//! what is there: each call that started gets "outcome unknown", each call that never
//! started gets "not started", then the open step and turn are closed as interrupted.

use crate::event::{EventKind, StepEnd, ToolResultData, TurnEnd, TurnEndReason};
use crate::projection::Projection;

/// Result text for a call whose tool was running when keel stopped.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown: keel stopped while this tool was running (crash or kill). \
Verify the current state before retrying anything with side effects.";

/// Result text for a call whose tool never ran.
pub const NOT_STARTED: &str =
    "not started: keel stopped before this tool ran. Retry it if it is still needed.";

/// Error code on results written by repair.
pub const INTERRUPTED_CODE: &str = "interrupted";

/// What repair appended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Calls closed as "outcome unknown".
    pub outcome_unknown: usize,
    /// Calls closed as "not started".
    pub not_started: usize,
    /// Whether an open step was closed.
    pub closed_step: bool,
    /// Whether an open turn was closed.
    pub closed_turn: bool,
    /// Whether a compaction cut short was closed (as aborted: nothing changed).
    pub closed_compaction: bool,
}

impl RepairReport {
    /// True when nothing needed closing.
    pub fn is_clean(&self) -> bool {
        *self == RepairReport::default()
    }
}

/// The events that close whatever `projection` left open, in the order to append them.
pub fn closers(projection: &Projection) -> (Vec<EventKind>, RepairReport) {
    let mut events = Vec::new();
    let mut report = RepairReport::default();
    // A compaction cut short changed nothing: the log reads as if it never ran.
    if projection.open_compaction().is_some() {
        report.closed_compaction = true;
        events.push(EventKind::CompactionEnd(crate::context::CompactionEnd {
            outcome: crate::context::CompactionOutcome::Aborted,
            summary: String::new(),
            first_kept_seq: 0,
            tokens_before: 0,
            tokens_after: 0,
            files_read: Vec::new(),
            files_changed: Vec::new(),
            usage: keel_llm::Usage::default(),
            failure: None,
        }));
    }
    for call in projection.pending_calls() {
        let (content, source_seq) = match call.started_seq {
            Some(seq) => {
                report.outcome_unknown += 1;
                (OUTCOME_UNKNOWN, seq)
            }
            None => {
                report.not_started += 1;
                (NOT_STARTED, call.message_seq)
            }
        };
        events.push(EventKind::ToolResult(ToolResultData {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            source_seq,
            content: content.to_owned(),
            is_error: true,
            error_code: Some(INTERRUPTED_CODE.to_owned()),
            concludes_turn: false,
            duration_ms: None,
            change: None,
            images: Vec::new(),
        }));
    }
    if let Some(turn) = projection.open_turn() {
        if let Some(step) = turn.open_step {
            report.closed_step = true;
            events.push(EventKind::StepEnd(StepEnd { step, interrupted: true }));
        }
        report.closed_turn = true;
        events.push(EventKind::TurnEnd(TurnEnd {
            turn: turn.turn,
            reason: TurnEndReason::Interrupted,
            message: Some("keel stopped before the turn ended; closed on reopen".to_owned()),
            usage: keel_llm::Usage::default(),
        }));
    }
    (events, report)
}
