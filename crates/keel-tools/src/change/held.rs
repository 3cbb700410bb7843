//! Words the file already holds. A model that quotes a line of the file as its words
//! (`Upload PNG, JPEG or WebP pictures of up to 50 MB.` for README.md, when asked to
//! summarize a commit) gets the file back unchanged from the editor, rightly. Asked
//! again, hotter, the editor then invented a change to have one (it set `50 MB` in bold:
//! summarize-last-commit, 3 of 5 recorded runs), and in the other recorded cases of such
//! words (git-commit, add-function repeated) the second reply changed nothing useful. So
//! an unchanged reply to words the file holds is the answer: nothing to change.

/// True when `file` already holds `words`: each of their non-blank lines is a whole line
/// of it (both trimmed; a part of a line, `return x` in `return x + 1`, is not held).
/// Words with no letter or digit say nothing, and are not held.
pub(super) fn holds(file: &str, words: &str) -> bool {
    if !words.chars().any(char::is_alphanumeric) {
        return false;
    }
    let lines: std::collections::HashSet<&str> = file.lines().map(str::trim).collect();
    words.lines().map(str::trim).filter(|line| !line.is_empty()).all(|line| lines.contains(line))
}

/// The result for `path` when the editor gave it back unchanged and it holds the words.
pub(super) fn report(path: &str) -> String {
    format!(
        "No change needed: `{path}` already holds the text your words give, so it was left as it is. Go on with the next step of the task."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_the_file_holds_are_told_from_a_change() {
        let readme = "# picshare\n\nUpload PNG, JPEG or WebP pictures of up to 50 MB.\n";
        assert!(holds(readme, "Upload PNG, JPEG or WebP pictures of up to 50 MB."));
        assert!(holds(readme, "  # picshare\n\n   Upload PNG, JPEG or WebP pictures of up to 50 MB.  "));
        let code = "def f(x):\n    return x\n";
        assert!(holds(code, "def f(x):\nreturn x"), "lines held, indentation aside");
        for words in
            ["Make the limit 60 MB", "Upload PNG pictures", "...", "", "# picshare\nnew line", "picshare"]
        {
            assert!(!holds(readme, words), "{words:?}");
        }
    }
}
