//! Read before changing: a file that exists is changed only after the model has seen it
//! in this session (read it, or created or changed it itself). The first attempt to
//! change an unseen file is refused with the file's content, so the model's next call
//! can be right, without a separate read; small models otherwise edit text they guessed
//! or overwrite a whole file with a fragment.

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

/// Refuses a change (`tool`) to an existing file the model has not seen, showing it the
/// content instead (numbered like read_file when `numbered`); the file then counts as
/// seen. New files pass.
pub(crate) fn require(
    roots: &Roots,
    state: &ToolState,
    path: &str,
    tool: &str,
    numbered: bool,
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
            "not_read",
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
        "not_read",
        format!(
            "`{shown}` was not changed: read a file before changing it. Its content is:\n{}{advice}",
            if shown_text.is_empty() { "(empty)\n".to_owned() } else { shown_text }
        ),
    ))
}
