//! `/undo` and `/rewind N`: put back the files the last turns' file tools (write_file,
//! edit_file, change_file) changed; `/rewind` also forks the conversation from before those turns.

use std::path::Path;

use keel_session::{Event, EventKind};
use keel_tools::undo::Undone;
use keel_tools::workspace::Roots;

/// What `/undo` or `/rewind` did: lines for the user and, when files changed, a note for
/// the model.
#[derive(Debug, Default)]
pub struct UndoReport {
    /// Lines to show.
    pub lines: Vec<String>,
    /// What the model is told before its next turn.
    pub note: Option<String>,
    /// Files were put back.
    pub changed: bool,
}

/// The last `n` turns of a log: where they start, their successful write/edit calls in
/// the order they ran, and how many shell calls they made.
#[derive(Debug, PartialEq)]
pub struct LastTurns {
    /// The seq just before the first of them (to fork the conversation there).
    pub before: u64,
    /// The write/edit calls that succeeded.
    pub changes: Vec<String>,
    /// Shell calls made.
    pub shells: usize,
}

/// The last `n` turns of `events`, or `None` when the log has fewer.
pub fn last_turns(events: &[Event], n: usize) -> Option<LastTurns> {
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.kind, EventKind::TurnStart(_)))
        .map(|(i, _)| i)
        .collect();
    if n == 0 || starts.len() < n {
        return None;
    }
    let first = starts[starts.len() - n];
    let mut turns = LastTurns { before: events[first].seq.saturating_sub(1), changes: Vec::new(), shells: 0 };
    // What each call did is what its tool declared, logged with the call.
    let mut effects = std::collections::HashMap::new();
    for event in &events[first..] {
        match &event.kind {
            EventKind::ToolCall(call) => {
                effects.insert(call.call_id.as_str(), call.effect.clone());
            }
            EventKind::ToolResult(result) => match effects.get(result.call_id.as_str()) {
                Some(Some(keel_session::Effect::Writes { .. })) if !result.is_error => {
                    turns.changes.push(result.call_id.clone())
                }
                Some(Some(keel_session::Effect::Runs)) => turns.shells += 1,
                _ => {}
            },
            _ => {}
        }
    }
    Some(turns)
}

/// Puts back the files of `turns`; `what` names them in messages ("the last turn").
pub fn restore(turns: &LastTurns, artifacts: &Path, roots: &Roots, what: &str) -> UndoReport {
    let done = keel_tools::undo::undo(artifacts, roots, &turns.changes);
    let mut report = UndoReport::default();
    if done.is_empty() {
        report.lines.push(if turns.changes.is_empty() {
            format!("no files to put back: {what} changed none with the file tools")
        } else {
            format!("no files to put back: {what}'s changes were undone already, or needed none")
        });
    }
    let mut changed = Vec::new();
    for undone in &done {
        match undone {
            Undone::Restored(path) => {
                report.lines.push(format!("  restored {path}"));
                changed.push(format!("{path} (restored)"));
            }
            Undone::Removed(path) => {
                report.lines.push(format!("  removed {path} (created by {what})"));
                changed.push(format!("{path} (removed)"));
            }
            Undone::Failed(path, why) => report.lines.push(format!("  could not restore {path}: {why}")),
            _ => {}
        }
    }
    if turns.shells > 0 && !done.is_empty() {
        report.lines.push(format!(
            "  not undone: what {what}'s {} shell command{} did (keel cannot know what a command changed)",
            turns.shells,
            if turns.shells == 1 { "" } else { "s" }
        ));
    }
    report.changed = !changed.is_empty();
    if report.changed {
        report.note = Some(format!(
            "[keel: the user undid your last turn's file changes: {}. Those files are back as they were before that turn; read them again before changing them.]",
            changed.join(", ")
        ));
    }
    report
}

/// Undoes the file changes of the last turn recorded in `events`.
pub fn last_turn(events: &[Event], artifacts: &Path, roots: &Roots) -> UndoReport {
    match last_turns(events, 1) {
        Some(turns) => restore(&turns, artifacts, roots, "the last turn"),
        None => {
            UndoReport { lines: vec!["nothing to undo: no turn yet".to_owned()], ..UndoReport::default() }
        }
    }
}
