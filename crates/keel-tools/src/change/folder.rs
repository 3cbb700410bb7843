//! A change_file call on a folder. The 1.5B model called change_file on `.` with `sed -i
//! 's/1.2.3/1.3.0/' pyproject.toml src/app/__init__.py` as its words, was told "`.` is a
//! folder: … name a file", and made the same call six more times (version-bump,
//! full-p2). The refusal ends with the call that does what the words say: a command run
//! by the shell, or change_file on the file the words name.

use super::command;
use super::prompt::related_files;
use crate::workspace::Roots;

/// The refusal of change_file on the folder `path` with the words `change`.
pub(super) fn refusal(roots: &Roots, path: &str, change: &str) -> String {
    let head = format!("`{path}` is a folder, and change_file changes one file.");
    if let Some(command) = command::command_line(change) {
        return format!("{head} `{command}` is a shell command: to run it, call shell with it.");
    }
    if let Some((file, _)) = related_files(roots, change, path).into_iter().next() {
        return format!(
            "{head} Your words name `{file}`: to change it, call change_file with \"path\": \"{file}\"."
        );
    }
    let folder = roots.lexical(path);
    match super::setting::set_elsewhere(roots, change, &folder, &folder) {
        Some(at) => format!("{head} {}", at.hint()),
        None => format!("{head} Name a file (list_files shows them)."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_ends_with_the_call_the_words_ask_for() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "version = \"1.2.3\"\n").unwrap();
        let roots = Roots::new(dir.path(), &[], &[]).unwrap();
        let sed = "sed -i 's/1.2.3/1.3.0/' pyproject.toml src/app/__init__.py";
        assert_eq!(
            refusal(&roots, ".", sed),
            format!(
                "`.` is a folder, and change_file changes one file. `{sed}` is a shell command: to run it, call shell with it."
            )
        );
        assert_eq!(
            refusal(&roots, ".", "set the version in pyproject.toml to 1.3.0"),
            "`.` is a folder, and change_file changes one file. Your words name `pyproject.toml`: to change it, call change_file with \"path\": \"pyproject.toml\"."
        );
        assert_eq!(
            refusal(&roots, "src/", "set the version to 1.3.0"),
            "`src/` is a folder, and change_file changes one file. Name a file (list_files shows them)."
        );
        std::fs::create_dir(dir.path().join("tidyup")).unwrap();
        std::fs::write(dir.path().join("tidyup/cli.py"), "from tidyup import __version__\n").unwrap();
        std::fs::write(dir.path().join("tidyup/__init__.py"), "__version__ = \"0.4.1\"\n").unwrap();
        assert_eq!(
            refusal(&roots, "tidyup/", "version = '0.4.2'"),
            "`tidyup/` is a folder, and change_file changes one file. `tidyup/__init__.py` sets `version` (line 1: `__version__ = \"0.4.1\"`): to change it there, call change_file with \"path\": \"tidyup/__init__.py\"."
        );
        assert_eq!(
            refusal(&roots, "/etc/", "version = '0.4.2'"),
            "`/etc/` is a folder, and change_file changes one file. Name a file (list_files shows them).",
            "a folder outside the project: nothing in it is named"
        );
    }
}
