//! What change_file answers when the editor's reply is not written: refused (with why),
//! or the file given back as it was — an error, or no change needed when the file
//! already has what the words ask (change_file changed it before, another tool changed
//! it this turn, or it holds the words: [`super::held`]).

use keel_agent::{ToolContext, ToolOutput};

use super::{Job, held, moved, setting};
use crate::workspace::Roots;

/// Why the editor's reply was not written.
pub(super) enum Unchanged {
    /// It came back the same as the file.
    Same,
    /// It came back the same as the file, which already holds the words.
    Held,
    /// It was refused: `why` tells the model; `retry`, when there is one, tells the
    /// editor what to mend in its next attempt (added to the end of its prompt).
    Refused { why: String, retry: Option<String> },
}

/// The files change_file has changed in this session.
#[derive(Debug, Default)]
pub(super) struct Changed(pub(super) std::collections::HashSet<std::path::PathBuf>);

/// True when change_file changed the file at `path` earlier in the session.
fn changed_before(roots: &Roots, state: &keel_agent::ToolState, path: &str) -> bool {
    let Ok(canonical) = roots.resolve_existing(path, false) else { return false };
    state.with(|changed: &mut Changed| changed.0.contains(&canonical))
}

impl Job {
    /// True when the file differs from what it was at the turn's start
    /// ([`crate::changes::file_changed_this_turn`]).
    fn changed_this_turn(&self, ctx: &ToolContext) -> bool {
        let Ok(relative) = self
            .roots
            .lexical(&self.args.path)
            .strip_prefix(self.roots.root())
            .map(std::path::Path::to_path_buf)
        else {
            return false;
        };
        crate::changes::file_changed_this_turn(&ctx.workspace, &relative, &ctx.state)
    }

    /// What an unchanged reply adds: a file the words name that does not exist yet
    /// ([`moved::hint`]), or another file that sets what the words set
    /// ([`setting::set_elsewhere`]).
    fn elsewhere_hint(&self) -> Option<String> {
        let (roots, path, words) = (&self.roots, &self.args.path, &self.args.change);
        moved::hint(roots, path, words).or_else(|| {
            let target = roots.lexical(path);
            setting::set_elsewhere(roots, words, roots.root(), &target)
                .map(|at| format!(" `{path}` sets no `{}`; {}", at.key, at.hint()))
        })
    }

    /// True when the file exists and already holds the model's words ([`held::holds`]).
    pub(super) fn holds_words(&self) -> bool {
        self.inputs.current.as_deref().is_some_and(|file| held::holds(file, &self.args.change))
    }

    /// The result when no attempt was written.
    pub(super) fn unchanged(&self, why: Unchanged, ctx: &ToolContext) -> ToolOutput {
        let path = &self.args.path;
        match why {
            Unchanged::Refused { why, .. } => ToolOutput::error(why),
            Unchanged::Held => ToolOutput::text(held::report(path)),
            Unchanged::Same if changed_before(&self.roots, &ctx.state, path) => ToolOutput::text(format!(
                "No change needed: `{path}` already has the change you made with change_file earlier (its diff is above). Do not repeat it; go on with the next step of the task."
            )),
            // Changed this turn by another tool (a command): the editor, given the words,
            // found nothing more to do. "Was not changed … call again" had the model
            // repeat the call, then answer that the file was not changed (en-blank-lines).
            Unchanged::Same if self.changed_this_turn(ctx) => ToolOutput::text(format!(
                "No change needed: `{path}` was already changed earlier in this task (by another tool or a command), and it already has what your words ask for. Do not repeat it; go on with the next step of the task."
            )),
            // Ends with how to find what to change: "call change_file again saying exactly
            // what to add, remove or replace" was followed by the same call or an answer
            // (asked again at that step, 13 distinct points of the recorded runs, 3 samples
            // each: the same call 10 times and an answer 13, against 3 and 1 with this text).
            Unchanged::Same => ToolOutput::error(format!(
                "`{path}` was not changed: its new content came back the same as the old: the editor found nothing to change in it from your words. Say exactly what to add, remove or replace; if you do not know yet, find out first: run the command that fails and read its error, or read the file.{}",
                self.elsewhere_hint().unwrap_or_default()
            )),
        }
    }
}
