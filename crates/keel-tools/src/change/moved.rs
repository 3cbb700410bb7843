//! What an unchanged reply's error says about renaming. A model that wants a file
//! renamed sometimes calls change_file with the new name as its words ("NOTES.md" for
//! notes.txt); the editor gives the file back as it was, and the error should say that
//! renaming is the shell's work. Said to every unchanged reply, the same hint ("to
//! rename, move or delete the file, use the shell (mv, rm)") sent the 1.5B model, which
//! had only given a README line as the words, to `mv README.md README.md.bak`
//! (summarize-last-commit, full-p1). So it is given only when the words name a file that
//! does not exist yet: a name the file could be given.

use crate::workspace::Roots;

/// Most words of the change looked up on disk (each is a `stat`).
const MAX_CANDIDATES: usize = 16;

/// The hint to add when `change`, the words for `path`, names a file that does not
/// exist (a word like `NOTES.md` or `docs/notes.md`), or `None`.
pub(super) fn hint(roots: &Roots, path: &str, change: &str) -> Option<String> {
    let target = roots.lexical(path);
    let name = super::prompt::file_words(change)
        .filter(|word| file_name_like(word))
        .take(MAX_CANDIDATES)
        .find(|word| roots.lexical(word) != target && !roots.lexical(word).exists())?;
    Some(format!(" To rename or move `{path}` to `{name}`, use the shell (mv)."))
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

    #[test]
    fn the_hint_is_given_for_words_that_name_a_new_file_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x\n").unwrap();
        std::fs::write(dir.path().join("README.md"), "x\n").unwrap();
        let roots = Roots::new(dir.path(), &[], &[]).unwrap();
        assert_eq!(
            hint(&roots, "notes.txt", "NOTES.md").as_deref(),
            Some(" To rename or move `notes.txt` to `NOTES.md`, use the shell (mv).")
        );
        assert_eq!(
            hint(&roots, "notes.txt", "Rename it to `docs/notes.md`.").as_deref(),
            Some(" To rename or move `notes.txt` to `docs/notes.md`, use the shell (mv).")
        );
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
