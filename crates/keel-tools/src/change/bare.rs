//! Words that only name the file they are for.
//!
//! The 1.5B model gave `test_invoice.py` as the words for test_invoice.py 29 times over
//! the suite's recorded runs (bug-in-helper, nine times in one run): each time the editor
//! was asked, read nothing to do in the file's own name, and wrote the file back as it
//! was (about 30 s on two cores, twice with the hotter retry), and "was not changed …
//! say exactly what to change" drew the same call again. Such words are answered before
//! the editor is asked, with the way to find out what to change last: what a refusal
//! offers last is what a small model does next.

/// Whether `change` is nothing but `path` (or its file name), quotes and a leading `./`
/// aside.
pub(super) fn only_names(path: &str, change: &str) -> bool {
    let plain = |text: &str| {
        let text = text.trim().trim_matches(|c| matches!(c, '`' | '"' | '\''));
        text.strip_prefix("./").unwrap_or(text).to_owned()
    };
    let (path, words) = (plain(path), plain(change));
    let name = path.rsplit('/').next().unwrap_or(&path);
    !words.is_empty() && (words == path || words == name)
}

/// The refusal of words that only name `path`.
pub(super) fn refusal(path: &str, change: &str) -> String {
    format!(
        "`{path}` was not changed: your words, `{}`, only name the file and do not say what to change in it. Call change_file again with words that say what to change (which lines, and what they should become). If you do not know yet, find out first: run the command that fails and read its error, or read the file.",
        change.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_that_are_the_files_own_name_are_told_from_words_about_it() {
        for (path, change) in [
            ("test_invoice.py", "test_invoice.py"),
            ("src/app.py", "app.py"),
            ("src/app.py", "src/app.py"),
            ("./notes.txt", " `notes.txt` "),
            ("notes.txt", "\"./notes.txt\""),
        ] {
            assert!(only_names(path, change), "{path}: {change}");
        }
        for (path, change) in [
            // Another file's name (a rename, a copy) or a value is for the editor to read.
            ("notes.txt", "NOTES.md"),
            ("backup.sh", "docs/b.txt"),
            ("error_count.txt", "11"),
            ("requirements.txt", "requests==2.32.3"),
            ("app.py", "fix app.py"),
            ("app.py", "``"),
        ] {
            assert!(!only_names(path, change), "{path}: {change}");
        }
    }

    #[test]
    fn the_refusal_ends_with_how_to_find_what_to_change() {
        assert_eq!(
            refusal("test_invoice.py", "test_invoice.py"),
            "`test_invoice.py` was not changed: your words, `test_invoice.py`, only name the file and do not say what to change in it. Call change_file again with words that say what to change (which lines, and what they should become). If you do not know yet, find out first: run the command that fails and read its error, or read the file."
        );
    }
}
