//! A note under a failed git command run where there is no git repository. Told
//! "fatal: not a git repository", small models were seen to make one (`git init`) in the
//! user's folder and then commit, for tasks that never mentioned git; the note says
//! what the failure means and ends with what to do instead: work on the files. It does
//! not mention making a repository: a note that ended "do not make a repository unless
//! the user asked for one" was followed by `git init` 10 times in the 48 it was given
//! (recorded suite runs, 2026-12-07). Asked again at that step (10 distinct points, 3
//! samples each, llama-server, 1.5B, the call grammar's `<tool_call>` opening), the old
//! text drew an answer 25 times, `git init` 4 and a file read none; the new one an
//! answer 13 times, `git init` 3, a file read 14. It rests on facts only: the command
//! ran git, it failed, and no `.git` is in its folder or above.

use std::path::Path;

/// The note added to the output.
pub(crate) const NOTE: &str = "[keel: this folder is not in a git repository, so git commands fail here. Its files are here as they are: read and change them with your tools.]";

/// The note for `command`, run in `workdir`, when it ran git, failed, and `workdir` is
/// not in a git repository.
pub(crate) fn note(command: &str, failed: bool, workdir: &Path) -> Option<&'static str> {
    if !failed || !runs_git(command) {
        return None;
    }
    let in_repository = workdir.ancestors().any(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok());
    (!in_repository).then_some(NOTE)
}

/// Whether one of the simple commands of `command` (split at `&&`, `||`, `;`, `|` and
/// line breaks) runs `git`, after any `NAME=value` assignments.
fn runs_git(command: &str) -> bool {
    command.split(['&', '|', ';', '\n', '(', ')']).any(|part| {
        let mut words = part.split_whitespace().skip_while(|word| is_assignment(word));
        words.next().is_some_and(|program| program == "git" || program.ends_with("/git"))
    })
}

/// `NAME=value`, as the shell takes it before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_is_found_as_a_program_not_as_a_word() {
        for command in [
            "git status",
            "git add . && git commit -m 'x'",
            "cd sub && git log",
            "GIT_PAGER=cat git log",
            "ls | git hash-object --stdin",
            "/usr/bin/git init",
            "(git status)",
            "true; git diff",
        ] {
            assert!(runs_git(command), "{command}");
        }
        for command in ["echo git", "cat .gitignore", "grep -r git .", "gitk", "python3 git.py", "FOO=git ls"]
        {
            assert!(!runs_git(command), "{command}");
        }
    }

    #[test]
    fn the_note_needs_git_a_failure_and_no_repository() {
        let outside = tempfile::tempdir().unwrap();
        let sub = outside.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        // /tmp is in no repository on the machines this runs on; say so if it is.
        assert!(
            !outside.path().ancestors().any(|d| d.join(".git").exists()),
            "the temporary folder is inside a git repository"
        );
        assert_eq!(note("git status", true, &sub), Some(NOTE));
        assert_eq!(note("git status", false, &sub), None);
        assert_eq!(note("ls nothing", true, &sub), None);
        std::fs::create_dir(outside.path().join(".git")).unwrap();
        assert_eq!(note("git status", true, &sub), None, "a repository above the folder counts");
    }
}
