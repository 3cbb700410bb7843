//! A new file beside the one the task names: the task says `backup.sh`, the project has
//! `backup.sh`, and the model calls change_file on `docs/backup.sh`, a path that does not
//! exist. The editor, shown `backup.sh` as a file the task names, writes the fixed script
//! into the new `docs/backup.sh`; the model then runs `bash backup.sh`, the old one, and
//! goes on changing the copy (fix-shell-script, llama-server, 2026-12-07: 13 calls, the
//! real script never changed). Such a call is refused once, with the file the task names
//! and a ready call; the same call made again creates the file.

use std::path::Path;

use keel_agent::{ToolError, ToolErrorKind, ToolState};

/// The refusal when `path` does not exist and one of `named` (files the task or the
/// change names, as the project shows them) has the same file name at another path;
/// `None` when the call may create the file (or was refused once already).
pub(super) fn check<'a>(
    path: &str,
    exists: bool,
    named: impl IntoIterator<Item = &'a str>,
    state: &ToolState,
) -> Option<ToolError> {
    if exists {
        return None;
    }
    let name = Path::new(path).file_name()?;
    let wanted = Path::new(path.trim_start_matches("./"));
    let existing = named.into_iter().find(|other| {
        let other = Path::new(other.trim_start_matches("./"));
        other.file_name() == Some(name) && other != wanted
    })?;
    super::once::first_time(state, format!("beside:{path}")).then(|| {
        ToolError::new(
            ToolErrorKind::NotFound,
            format!(
                "`{path}` does not exist, so this call would create a new file; the file the task names is `{existing}`. To change it, call change_file with \"path\": \"{existing}\". To create `{path}` as a new file beside it, make this same call again."
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_named_like_a_named_file_elsewhere_is_refused_once() {
        let state = ToolState::default();
        let refused = check("docs/backup.sh", false, ["backup.sh"], &state).map(|e| (e.kind, e.message));
        assert_eq!(
            refused,
            Some((
                ToolErrorKind::NotFound,
                "`docs/backup.sh` does not exist, so this call would create a new file; the file the task names is `backup.sh`. To change it, call change_file with \"path\": \"backup.sh\". To create `docs/backup.sh` as a new file beside it, make this same call again.".to_owned()
            ))
        );
        assert!(check("docs/backup.sh", false, ["backup.sh"], &state).is_none(), "asked again: created");
    }

    #[test]
    fn other_new_files_and_existing_files_are_not_refused() {
        let state = ToolState::default();
        assert!(check("backup.sh", true, ["backup.sh"], &state).is_none(), "the file itself, existing");
        assert!(
            check("./backup.sh", false, ["backup.sh"], &state).is_none(),
            "the same path, spelled with ./"
        );
        assert!(check("docs/notes.txt", false, ["backup.sh"], &state).is_none(), "another name");
        assert!(check("hello.py", false, [], &state).is_none(), "nothing named");
    }
}
