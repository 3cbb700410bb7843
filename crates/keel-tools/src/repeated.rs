//! Edits that insert text around an anchor (new_text contains old_text) stay valid after
//! they are made, so repeating one inserts its text again. The 1.5B model, told how to
//! append a function, made the same append six times. An insertion the session has
//! made already, whose text is still in the file, is not made again.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read;
use std::path::PathBuf;

use keel_agent::ToolState;

use crate::edit::EditArgs;
use crate::workspace::Roots;

/// Most bytes read to look for the inserted text.
const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;

/// Insertions made in this session: the file and a hash of old_text and new_text.
#[derive(Debug, Default)]
struct Insertions(HashSet<(PathBuf, u64)>);

fn key(roots: &Roots, args: &EditArgs) -> Option<(PathBuf, u64)> {
    if args.old_text.is_empty() || !args.new_text.contains(&args.old_text) || args.old_text == args.new_text {
        return None;
    }
    let canonical = roots.resolve_existing(&args.path, false).ok()?;
    let mut hasher = DefaultHasher::new();
    (&args.old_text, &args.new_text).hash(&mut hasher);
    Some((canonical, hasher.finish()))
}

/// The report for an insertion this session has made already and whose text is still in
/// the file; `None` when the edit should run.
pub(crate) fn already_made(roots: &Roots, state: &ToolState, args: &EditArgs) -> Option<String> {
    let key = key(roots, args)?;
    if !state.with(|made: &mut Insertions| made.0.contains(&key)) {
        return None;
    }
    let (file, canonical) = roots.open_read(&args.path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES).read_to_end(&mut bytes).ok()?;
    let content = String::from_utf8_lossy(&bytes);
    let start = content.find(args.new_text.as_str())?;
    let line = content[..start].matches('\n').count() + 1;
    Some(format!(
        "No change: you made this exact edit before, and the text it added is in `{}` (from line {line}). Making it again would add the same text a second time. Go on with the next step of the task.",
        roots.display(&canonical)
    ))
}

/// Notes an insertion that was made.
pub(crate) fn made(roots: &Roots, state: &ToolState, args: &EditArgs) {
    if let Some(key) = key(roots, args) {
        state.with(|made: &mut Insertions| made.0.insert(key));
    }
}
