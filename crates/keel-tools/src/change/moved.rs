//! What change_file says about a file its words name that does not exist yet. Two kinds
//! of call look alike here:
//!
//! - A rename: the model calls change_file with only the new name as its words
//!   (`{"path": "notes.txt", "change": "NOTES.md"}`, rename-file); the answer should say
//!   that renaming is the shell's work ([`renaming`], before the editor is asked).
//! - Words for another file: `{"path": "server.log", "change": "11 ERROR lines … saved in
//!   error_count.txt."}` (count-errors-to-file, embedded). Told "to rename or move
//!   `server.log` to `error_count.txt`, use the shell (mv)", the 1.5B model moved the
//!   user's log away. So `mv` is named only when the words are the new name and nothing
//!   else; words that say more are offered the new file as change_file's path, which
//!   loses nothing if the model meant a rename.
//!
//! Said to every unchanged reply, a rename hint sent the model, which had only given a
//! README line as the words, to `mv README.md README.md.bak` (summarize-last-commit,
//! full-p1): no hint is given unless the words name a file that does not exist yet.
//!
//! Words that are the new name alone are answered before the editor is asked: in the
//! recorded rename-file runs where the editor gave the file back unchanged, the
//! unchanged-reply hint (then also naming mv) drew `mv notes.txt NOTES.md` 9 times of 9, but in the other 5 it
//! wrote `# NOTES.md` into the file as a heading, so no hint came and all 5 failed.

use crate::workspace::Roots;

/// Most words of the change looked up on disk (each is a `stat`).
const MAX_CANDIDATES: usize = 16;

/// The hint to add to an unchanged reply when `change`, the words for `path`, names a
/// file that does not exist (a word like `docs/notes.md`), or `None`. Words that are only
/// that name never get here: [`renaming`] answers them before the editor is asked.
pub(super) fn hint(roots: &Roots, path: &str, change: &str) -> Option<String> {
    let target = roots.lexical(path);
    let name = super::prompt::file_words(change)
        .filter(|word| file_name_like(word))
        .take(MAX_CANDIDATES)
        .find(|word| roots.lexical(word) != target && !roots.lexical(word).exists())?;
    Some(format!(
        " `{name}` does not exist yet: if your words are for it, call change_file with \"path\": \"{name}\"."
    ))
}

/// The refusal of words for `path` that are only the name of a file that does not exist
/// yet (`NOTES.md` for notes.txt), given before the editor is asked; `None` for any
/// other words (looked up on disk only when they are one name).
pub(super) fn renaming(roots: &Roots, path: &str, change: &str) -> Option<String> {
    let name = super::prompt::file_words(change).find(|word| file_name_like(word))?;
    let new = roots.lexical(name);
    if !only_names(change, name) || new == roots.lexical(path) || new.exists() {
        return None;
    }
    Some(format!(
        "`{path}` was not changed: your words, `{name}`, are only the name of a file that does not exist yet, and change_file changes what is in a file. To rename or move `{path}` to `{name}`, use the shell (mv)."
    ))
}

/// True when `change` is `name` and nothing else but quotes and punctuation (no letter
/// or digit outside the name), in any script.
fn only_names(change: &str, name: &str) -> bool {
    change.replacen(name, "", 1).chars().all(|c| !c.is_alphanumeric())
}

/// A word shaped like a file name: a stem, a dot and an extension that begins with a
/// letter, in letters, digits, `_`, `-`, `.` and `/` (a version like `2.0.1` is not).
fn file_name_like(word: &str) -> bool {
    let last = word.rsplit('/').next().unwrap_or(word);
    let Some((stem, extension)) = last.rsplit_once('.') else { return false };
    !stem.is_empty()
        && extension.chars().next().is_some_and(char::is_alphabetic)
        && word.chars().all(|c| c.is_alphanumeric() || "_-./".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, Roots) {
        let dir = tempfile::tempdir().unwrap();
        for name in ["notes.txt", "README.md", "server.log"] {
            std::fs::write(dir.path().join(name), "x\n").unwrap();
        }
        let roots = Roots::new(dir.path(), &[], &[]).unwrap();
        (dir, roots)
    }

    #[test]
    fn words_that_are_only_a_new_name_are_refused_before_the_editor() {
        let (_dir, roots) = project();
        for words in ["NOTES.md", "`NOTES.md`.", " \"NOTES.md\"\n", "「NOTES.md」。"] {
            assert_eq!(
                renaming(&roots, "notes.txt", words).as_deref(),
                Some(
                    "`notes.txt` was not changed: your words, `NOTES.md`, are only the name of a file that does not exist yet, and change_file changes what is in a file. To rename or move `notes.txt` to `NOTES.md`, use the shell (mv)."
                ),
                "{words}"
            );
        }
        for words in ["Rename it to `docs/notes.md`.", "README.md", "notes.txt", "set the version to 2.0.1"] {
            assert_eq!(renaming(&roots, "notes.txt", words), None, "{words}");
        }
    }

    #[test]
    fn words_that_say_more_are_offered_the_new_file_as_the_path() {
        let (_dir, roots) = project();
        let offered = |name: &str| {
            format!(
                " `{name}` does not exist yet: if your words are for it, call change_file with \"path\": \"{name}\"."
            )
        };
        // The recorded call that had the model move the user's log (local-spot-z2).
        let words = "11 ERROR lines in server.log. The number has been saved in error_count.txt.";
        assert_eq!(hint(&roots, "server.log", words), Some(offered("error_count.txt")));
        assert_eq!(
            hint(&roots, "notes.txt", "Rename it to `docs/notes.md`."),
            Some(offered("docs/notes.md"))
        );
        assert_eq!(hint(&roots, "notes.txt", "把它改名为 NOTES.md"), Some(offered("NOTES.md")));
    }

    #[test]
    fn no_hint_without_a_new_file_name_in_the_words() {
        let (_dir, roots) = project();
        for words in [
            "Upload PNG, JPEG or WebP pictures of up to 50 MB.",
            "README.md",
            "notes.txt",
            "set the version to 2.0.1",
            "x.5 and .env",
        ] {
            assert_eq!(hint(&roots, "notes.txt", words), None, "{words}");
        }
    }
}
