//! `/undo`: puts back the files the last turn's write_file and edit_file calls changed.

use std::path::Path;

use keel_session::{Event, EventKind};
use keel_tools::undo::Undone;
use keel_tools::workspace::Roots;

/// What `/undo` did: lines for the user and, when files changed, a note for the model.
#[derive(Debug, Default)]
pub struct UndoReport {
    /// Lines to show.
    pub lines: Vec<String>,
    /// What the model is told before its next turn.
    pub note: Option<String>,
}

/// Undoes the file changes of the last turn recorded in `events`.
pub fn last_turn(events: &[Event], artifacts: &Path, roots: &Roots) -> UndoReport {
    let start = events.iter().rposition(|e| matches!(e.kind, EventKind::TurnStart(_))).unwrap_or(0);
    let mut changes = Vec::new();
    let mut shells = 0;
    for event in &events[start..] {
        if let EventKind::ToolResult(result) = &event.kind {
            match result.name.as_str() {
                "write_file" | "edit_file" if !result.is_error => changes.push(result.call_id.clone()),
                "shell" => shells += 1,
                _ => {}
            }
        }
    }
    let done = keel_tools::undo::undo(artifacts, roots, &changes);
    let mut report = UndoReport::default();
    if done.is_empty() {
        report.lines.push(if changes.is_empty() {
            "nothing to undo: the last turn changed no file with write_file or edit_file".to_owned()
        } else {
            "nothing to undo: the last turn's changes were undone already".to_owned()
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
                report.lines.push(format!("  removed {path} (the turn created it)"));
                changed.push(format!("{path} (removed)"));
            }
            Undone::Failed(path, why) => report.lines.push(format!("  could not restore {path}: {why}")),
            _ => {}
        }
    }
    if shells > 0 && !done.is_empty() {
        report.lines.push(format!(
            "  not undone: what the turn's {shells} shell command{} did (keel cannot know what a command changed)",
            if shells == 1 { "" } else { "s" }
        ));
    }
    if !changed.is_empty() {
        report.note = Some(format!(
            "[keel: the user undid your last turn's file changes: {}. Those files are back as they were before that turn; read them again before changing them.]",
            changed.join(", ")
        ));
    }
    report
}
