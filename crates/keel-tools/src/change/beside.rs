//! A new file beside the one the task names: the task says `backup.sh`, the project has
//! `backup.sh`, and the model calls change_file on `docs/backup.sh`, a path that does not
//! exist. The editor, shown `backup.sh` as a file the task names, writes the fixed script
//! into the new `docs/backup.sh`; the model then runs `bash backup.sh`, the old one, and
//! goes on changing the copy (fix-shell-script, llama-server, 2026-12-07: 13 calls, the
//! real script never changed). Such a call is refused with a ready call for the named
//! file. A new file there is made by creating it first (`touch`), then changing it: when
//! the refusal let the same call through a second time, the 1.5B model made it again at
//! once and changed the copy as before.

use std::path::Path;

use keel_agent::{ToolError, ToolErrorKind};

/// The refusal when `path` does not exist and one of `named` (files the task or the
/// change names, as the project shows them) has the same file name at another path.
pub(super) fn check<'a>(
    path: &str,
    exists: bool,
    named: impl IntoIterator<Item = &'a str>,
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
    Some(ToolError::new(
        ToolErrorKind::NotFound,
        format!(
            "`{path}` does not exist, and the file the task names is `{existing}`. To change it, call change_file with \"path\": \"{existing}\". To make a new file `{path}` beside it, create it first with the shell (`touch {path}`), then change it."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_named_like_a_named_file_elsewhere_is_refused() {
        let refused = check("docs/backup.sh", false, ["backup.sh"]).map(|e| (e.kind, e.message));
        assert_eq!(
            refused,
            Some((
                ToolErrorKind::NotFound,
                "`docs/backup.sh` does not exist, and the file the task names is `backup.sh`. To change it, call change_file with \"path\": \"backup.sh\". To make a new file `docs/backup.sh` beside it, create it first with the shell (`touch docs/backup.sh`), then change it.".to_owned()
            ))
        );
    }

    #[test]
    fn other_new_files_and_existing_files_are_not_refused() {
        assert!(check("docs/backup.sh", true, ["backup.sh"]).is_none(), "an existing file");
        assert!(check("./backup.sh", false, ["backup.sh"]).is_none(), "the same path, spelled with ./");
        assert!(check("docs/notes.txt", false, ["backup.sh"]).is_none(), "another name");
        assert!(check("hello.py", false, []).is_none(), "nothing named");
    }
}
