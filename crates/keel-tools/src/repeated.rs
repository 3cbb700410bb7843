//! Edits that insert text around an anchor (new_text contains old_text) stay valid after
//! they are made, so repeating one inserts its text again. The 1.5B model, told how to
//! append a function, made the same append six times. An insertion the session has
//! made already, whose text is still in the file, is not made again (`edit_file` asks
//! [`made_before`] with the content it has read, and [`note`]s each insertion it makes).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use keel_agent::ToolState;

/// Insertions made in this session: the file and a hash of old_text and new_text.
#[derive(Debug, Default)]
struct Insertions(HashSet<(PathBuf, u64)>);

/// An edit's two texts: what it replaces and what it puts there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Texts<'a> {
    pub old: &'a str,
    pub new: &'a str,
}

fn key(canonical: &Path, texts: Texts<'_>) -> Option<(PathBuf, u64)> {
    if texts.old.is_empty() || !texts.new.contains(texts.old) || texts.old == texts.new {
        return None;
    }
    let mut hasher = DefaultHasher::new();
    (texts.old, texts.new).hash(&mut hasher);
    Some((canonical.to_path_buf(), hasher.finish()))
}

/// Whether this session has made this insertion in the file at `canonical`.
pub(crate) fn made_before(state: &ToolState, canonical: &Path, texts: Texts<'_>) -> bool {
    key(canonical, texts).is_some_and(|key| state.with(|made: &mut Insertions| made.0.contains(&key)))
}

/// Notes an insertion that was made (other edits are not noted).
pub(crate) fn note(state: &ToolState, canonical: &Path, texts: Texts<'_>) {
    if let Some(key) = key(canonical, texts) {
        state.with(|made: &mut Insertions| made.0.insert(key));
    }
}

/// The report for a repeated insertion whose text is at `line` of the file `shown`.
pub(crate) fn report(shown: &str, line: usize) -> String {
    format!(
        "No change: you made this exact edit before, and the text it added is in `{shown}` (from line {line}). Making it again would add the same text a second time. Go on with the next step of the task."
    )
}
