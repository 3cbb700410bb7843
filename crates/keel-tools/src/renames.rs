//! A rename left half done, at the turn's end. The file tools' reports already name where
//! other files still use a name a change removed ([`crate::leftovers`]); a small model
//! reads that and answers anyway (rename-across-modules, llama-server, 2026-12-07:
//! `fmt_date` renamed in reports.py and emails.py, its definition in dates.py left, "the
//! change has been made"). [`RenameCheck`] remembers the renames the turn's changes made
//! — a line that had the old name is in the new file with the new one in its place, so
//! a deleted line or a rewrite is no rename — and, when a turn that asks for a change
//! would end while the project still uses an old name, shows the places once.
//!
//! Names are whole words of letters, digits and `_` in any script (as in
//! [`crate::leftovers`]); no language's grammar is assumed.

use futures::future::BoxFuture;
use keel_agent::{Hooks, Nudge, ToolState, TurnStarted, TurnStopping};
use keel_llm::Message;

use crate::leftovers::{has_word, names, vanished};
use crate::workspace::Roots;

/// How the nudge begins; it is given once a turn.
pub const RENAME_LEFT: &str = "The project still uses names your changes renamed:";

/// Most renames remembered in a turn.
const MAX_RENAMES: usize = 8;

/// The renames made this turn: (old name, new name).
#[derive(Debug, Default)]
struct Renamed(Vec<(String, String)>);

/// The renames from `before` to `after`: a name gone from the file whose line, with it
/// replaced by a name new to the file, is a line of `after`. The line must hold more
/// than the name and punctuation (a letter or digit besides it): a word alone on its
/// line, or in a list item, is a value, not a use of a name (a one-line `alpha` file
/// changed to `beta` was taken for a rename, and the model was sent to change another
/// file holding `alpha`: fix-shell-script, spot-p1).
pub(crate) fn renames(before: &str, after: &str) -> Vec<(String, String)> {
    let gone = vanished(before, after);
    if gone.is_empty() {
        return Vec::new();
    }
    let old_names: std::collections::HashSet<&str> = names(before).into_iter().collect();
    let new_names: Vec<&str> = names(after).into_iter().filter(|n| !old_names.contains(n)).collect();
    let after_lines: std::collections::HashSet<&str> = after.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for old in &gone {
        let lines: Vec<&str> =
            before.lines().map(str::trim).filter(|l| has_word(l, old) && in_context(l, old)).collect();
        if let Some(new) = new_names
            .iter()
            .find(|new| lines.iter().any(|line| after_lines.contains(replace_word(line, old, new).as_str())))
        {
            found.push((old.clone(), (*new).to_owned()));
        }
    }
    found
}

/// Whether `line` holds a letter or digit besides the word `name`.
fn in_context(line: &str, name: &str) -> bool {
    replace_word(line, name, "").chars().any(char::is_alphanumeric)
}

/// `line` with every whole-word `old` replaced by `new`.
fn replace_word(line: &str, old: &str, new: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(old) {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let word_char = |c: char| c.is_alphanumeric() || c == '_';
        let whole = !out.chars().next_back().is_some_and(word_char)
            && !tail[old.len()..].chars().next().is_some_and(word_char);
        out.push_str(if whole { new } else { old });
        rest = &tail[old.len()..];
    }
    out.push_str(rest);
    out
}

/// Remembers the renames a change of a file made, for [`RenameCheck`].
pub(crate) fn record(state: &ToolState, before: &str, after: &str) {
    let made = renames(before, after);
    if made.is_empty() {
        return;
    }
    state.with(|renamed: &mut Renamed| {
        for rename in made {
            if renamed.0.len() < MAX_RENAMES && !renamed.0.contains(&rename) {
                renamed.0.push(rename);
            }
        }
    });
}

/// The rule, as [`Hooks`]: a change task's turn that would end with a renamed name still
/// in the project is shown where, once.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenameCheck;

impl RenameCheck {
    async fn nudge(state: &TurnStopping<'_>) -> Option<Nudge> {
        if !state.intent.asks_for_change() || asked(state.messages) {
            return None;
        }
        let renamed = state.ctx.tool_state.with(|renamed: &mut Renamed| renamed.0.clone());
        if renamed.is_empty() {
            return None;
        }
        let workspace = state.ctx.workspace.clone();
        let olds: Vec<String> = renamed.iter().map(|(old, _)| old.clone()).collect();
        let places = tokio::task::spawn_blocking(move || {
            Roots::new(&workspace, &[], &[]).ok().map(|roots| crate::leftovers::everywhere(&roots, &olds))
        })
        .await
        .ok()
        .flatten()?;
        if places.is_empty() {
            return None;
        }
        let mut text = String::from(RENAME_LEFT);
        let mut reason = String::from("rename_check/left:");
        for (old, at) in &places {
            let new = renamed.iter().find(|(o, _)| o == old).map_or("", |(_, n)| n.as_str());
            text.push_str(&format!("\n`{old}` (renamed to `{new}`) is still here:"));
            for (file, line, shown) in at {
                text.push_str(&format!("\n{file}:{line}: {shown}"));
            }
            reason.push_str(&format!(" `{old}` -> `{new}` still in {} place(s);", at.len()));
        }
        text.push_str("\nIf these mean the name you renamed, change them too; if not, answer.");
        reason.push_str(" the task asks for a change (turn/intent)");
        Some(Nudge::new(text, reason))
    }
}

/// Whether this turn was shown the places already.
fn asked(messages: &[Message]) -> bool {
    messages.iter().skip(1).any(|m| matches!(m, Message::User(u) if u.content.starts_with(RENAME_LEFT)))
}

impl Hooks for RenameCheck {
    fn turn_started<'a>(&'a self, state: TurnStarted<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move { state.ctx.tool_state.with(|renamed: &mut Renamed| renamed.0.clear()) })
    }

    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        Box::pin(async move { Self::nudge(&state).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_is_a_line_with_the_old_name_found_again_with_a_new_one() {
        let before = "from dates import days_between, fmt_date\n\nx = fmt_date(start)\n";
        let after = "from dates import days_between, format_date\n\nx = format_date(start)\n";
        assert_eq!(renames(before, after), [("fmt_date".to_owned(), "format_date".to_owned())]);
        // In any script.
        assert_eq!(renames("größe = 1\n", "umfang = 1\n"), [("größe".to_owned(), "umfang".to_owned())]);
        // A deleted line is no rename, nor a line rewritten beyond the name.
        assert_eq!(renames("a = 1\nprint(\"DEBUG: loading\")\n", "a = 1\n"), Vec::<(String, String)>::new());
        assert_eq!(renames("total = calc(a)\n", "result = compute(b)\n"), Vec::<(String, String)>::new());
        // A line that is the word alone is a value changed, not a name.
        assert_eq!(renames("alpha\n", "beta\n"), Vec::<(String, String)>::new());
        assert_eq!(renames("- alpha\n", "- beta\n"), Vec::<(String, String)>::new());
        assert_eq!(renames("[\"alpha\"]\n", "[\"beta\"]\n"), Vec::<(String, String)>::new());
        assert_eq!(renames("alpha: 1\n", "beta: 1\n"), [("alpha".to_owned(), "beta".to_owned())]);
        // A name that is still in the file was not renamed.
        assert_eq!(renames("calc(a)\ncalc(b)\n", "compute(a)\ncalc(b)\n"), Vec::<(String, String)>::new());
    }

    #[test]
    fn only_whole_words_are_replaced() {
        assert_eq!(replace_word("recalc(calc) + calc_x", "calc", "run"), "recalc(run) + calc_x");
    }
}
