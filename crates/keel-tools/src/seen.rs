//! Read before changing: a file that exists is changed only after the model has seen it
//! in this session (read it, or created or changed it itself). The first attempt to
//! change an unseen file is refused with the file's content, so the model's next call
//! can be right, without a separate read; small models otherwise edit text they guessed
//! or overwrite a whole file with a fragment. An edit whose old_text the file holds
//! exactly, as whole words, is not a guess and goes through: refusing it cost small
//! models a step and their plan (a rename that never reached the second file).

use keel_agent::ToolErrorKind;
use std::collections::HashSet;
use std::io::Read;
use std::path::PathBuf;

use keel_agent::{ToolError, ToolState};

use crate::workspace::Roots;

/// Most bytes of a file shown in a refusal; a longer file must be read with read_file.
const SHOWN_BYTES: usize = 8 * 1024;

/// The canonical paths of files the model has seen in this session.
#[derive(Debug, Default)]
struct SeenFiles(HashSet<PathBuf>);

/// Notes that the model has seen `path` (after a read, a write or an edit).
pub(crate) fn mark(roots: &Roots, state: &ToolState, path: &str) {
    if let Ok(canonical) = roots.resolve_existing(path, false) {
        state.with(|seen: &mut SeenFiles| seen.0.insert(canonical));
    }
}

/// Text an edit quotes from the file it changes (edit_file's old_text).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quote<'a> {
    /// The quoted text.
    pub text: &'a str,
    /// Every occurrence is replaced (else the text must occur once).
    pub every: bool,
}

impl Quote<'_> {
    /// Whether `content` holds the quote exactly as the edit needs it (once, or at least
    /// once when every occurrence is replaced), each occurrence starting and ending at a
    /// word boundary: `port = 80` is not a quote of `port = 8000`.
    fn is_in(&self, content: &str) -> bool {
        let text = if content.contains("\r\n") && !self.text.contains('\r') {
            std::borrow::Cow::Owned(self.text.replace('\n', "\r\n"))
        } else {
            std::borrow::Cow::Borrowed(self.text)
        };
        if text.trim().is_empty() {
            return false;
        }
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let mut count = 0;
        for (start, _) in content.match_indices(text.as_ref()) {
            let end = start + text.len();
            let joined_before = content[..start].chars().next_back().is_some_and(word)
                && text.chars().next().is_some_and(word);
            let joined_after =
                content[end..].chars().next().is_some_and(word) && text.chars().next_back().is_some_and(word);
            if joined_before || joined_after {
                return false;
            }
            count += 1;
        }
        count == 1 || (self.every && count > 1)
    }
}

/// Refuses a change (`tool`) to an existing file the model has not seen, showing it the
/// content instead (numbered like read_file when `numbered`); the file then counts as
/// seen. New files pass, and so does an edit whose `quote` the file holds exactly (the
/// file does not count as seen after it: the model saw only that text).
pub(crate) fn require(
    roots: &Roots,
    state: &ToolState,
    path: &str,
    tool: &str,
    numbered: bool,
    quote: Option<Quote<'_>>,
) -> Result<(), ToolError> {
    let Ok(canonical) = roots.resolve_existing(path, true) else { return Ok(()) };
    if !canonical.is_file() || state.with(|seen: &mut SeenFiles| seen.0.contains(&canonical)) {
        return Ok(());
    }
    let (file, _) = roots.open_read(path)?;
    let mut bytes = Vec::new();
    file.take(SHOWN_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::msg(format!("cannot read `{path}`: {e}")))?;
    if let Some(quote) = quote
        && bytes.len() <= SHOWN_BYTES
        && quote.is_in(&String::from_utf8_lossy(&bytes))
    {
        return Ok(());
    }
    let shown = roots.display(&canonical);
    let advice = match tool {
        "write_file" => "To change part of it, use edit_file. To replace all of it, call write_file again with the complete new content.".to_owned(),
        _ if numbered => {
            format!("Call {tool} again with old_text copied exactly from these lines (without the line numbers).")
        }
        _ => format!("Call {tool} again with old_text copied exactly from these lines."),
    };
    if bytes.len() > SHOWN_BYTES || bytes.contains(&0) {
        return Err(ToolError::new(
            ToolErrorKind::NotRead,
            format!(
                "`{shown}` was not changed: read a file before changing it. It is long; read the part you need with read_file first. {advice}"
            ),
        ));
    }
    // Shown whole: the model has seen it now.
    state.with(|seen: &mut SeenFiles| seen.0.insert(canonical.clone()));
    let text = String::from_utf8_lossy(&bytes);
    let width = text.lines().count().max(1).to_string().len();
    let shown_text: String = if numbered {
        text.lines().enumerate().map(|(n, line)| format!("{:>width$}\t{line}\n", n + 1)).collect()
    } else {
        text.lines().map(|line| format!("{line}\n")).collect()
    };
    Err(ToolError::new(
        ToolErrorKind::NotRead,
        format!(
            "`{shown}` was not changed: read a file before changing it. Its content is:\n{}{advice}",
            if shown_text.is_empty() { "(empty)\n".to_owned() } else { shown_text }
        ),
    ))
}

/// Most files of one shell command checked for having been shown whole.
const MAX_SHOWN_CANDIDATES: usize = 8;
/// Most words of one shell command looked up as paths (a long script names few files
/// worth a lookup each).
const MAX_COMMAND_WORDS: usize = 64;

/// Notes as seen each file that a shell `command` names and whose every non-blank line is
/// in its `output` (`cat notes.txt`, `sort names.txt`): the model has seen it as surely
/// as through read_file. The 1.5B model sorted names.txt with `sort`, then had the write
/// of the sorted lines refused as unseen and lost its way. A file merely named (`wc -l`,
/// `python3 app.py`) stays unseen.
pub(crate) fn mark_shown(roots: &Roots, state: &ToolState, command: &str, output: &str) {
    let shown: HashSet<&str> = output.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    if shown.is_empty() {
        return;
    }
    let words = command
        .split(|c: char| c.is_whitespace() || "|;&<>()".contains(c))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty() && !w.starts_with('-'))
        .take(MAX_COMMAND_WORDS);
    let mut checked = 0;
    for word in words {
        let Ok(canonical) = roots.resolve_existing(word, true) else { continue };
        if !canonical.is_file() || state.with(|seen: &mut SeenFiles| seen.0.contains(&canonical)) {
            continue;
        }
        checked += 1;
        if checked > MAX_SHOWN_CANDIDATES {
            return;
        }
        let Ok((file, _)) = roots.open_read(word) else { continue };
        let mut bytes = Vec::new();
        if file.take(SHOWN_BYTES as u64 + 1).read_to_end(&mut bytes).is_err() || bytes.len() > SHOWN_BYTES {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).peekable();
        if lines.peek().is_some() && lines.all(|line| shown.contains(line)) {
            state.with(|seen: &mut SeenFiles| seen.0.insert(canonical));
        }
    }
}
