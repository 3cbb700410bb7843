//! A reply that is another file's content: the task names `backup.sh`, the model calls
//! change_file on `docs/a.txt` (a file the task does not name), and the editor, shown
//! `backup.sh` as a file the task names, writes the fixed script over `docs/a.txt`. The
//! model then runs `bash backup.sh`, the old one, and goes on rewriting other files
//! (fix-shell-script, llama-server, seed 1, 2026-12-07: docs/a.txt and docs/b.txt both
//! became the script; the task failed). Such a reply is refused, naming the file whose
//! content it is. The refusal ends with the call to make and offers nothing else: when
//! it went on "To copy `backup.sh` to `docs/a.txt` on purpose, use the shell (cp)", the
//! 1.5B model ran `cp backup.sh docs/a.txt` next (full-p1, seed 1). A copy meant on
//! purpose is still made with the shell, which this does not touch.

use std::collections::HashSet;

/// Fewest non-blank lines a reply has before it is compared: a line or two in common
/// says nothing.
const MIN_LINES: usize = 3;

/// The refusal when `new`, the reply for the existing file `path` (now `old`), is mostly
/// the lines of a file the task names (`named`: name and content), while the task does
/// not name `path` and the reply keeps little of `old`. `None` otherwise.
pub(super) fn check(
    path: &str,
    task: Option<&str>,
    old: &str,
    new: &str,
    named: &[(String, String)],
) -> Option<String> {
    let task = task?;
    let words = task_words(task);
    if names(&words, path) {
        return None;
    }
    let new_lines = non_blank(new);
    if new_lines.len() < MIN_LINES {
        return None;
    }
    let in_new: HashSet<&str> = new_lines.iter().copied().collect();
    let old_lines = non_blank(old);
    let kept = old_lines.iter().filter(|line| in_new.contains(*line)).count();
    if kept * 3 >= old_lines.len().max(1) {
        return None;
    }
    let (source, _) = named.iter().filter(|(name, _)| names(&words, name)).find(|(_, text)| {
        let theirs: HashSet<&str> = non_blank(text).into_iter().collect();
        let shared = new_lines.iter().filter(|line| theirs.contains(*line)).count();
        shared * 3 >= new_lines.len() * 2
    })?;
    Some(format!(
        "`{path}` was not changed: its new content came back as the lines of `{source}`, the file the task names, not as a change to `{path}`. To change `{source}`, call change_file with \"path\": \"{source}\"."
    ))
}

/// The non-blank lines of `text`, trimmed.
fn non_blank(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|line| !line.is_empty()).collect()
}

/// The words of the task that may be file names, without a leading `./`.
fn task_words(task: &str) -> Vec<&str> {
    super::prompt::file_words(task).map(|word| word.trim_start_matches("./")).collect()
}

/// True when a word of `task` is `path` or its file name.
pub(super) fn task_names(task: &str, path: &str) -> bool {
    names(&task_words(task), path)
}

/// True when a word of the task is `path` or its file name.
fn names(words: &[&str], path: &str) -> bool {
    let path = path.trim_start_matches("./");
    let file_name = path.rsplit('/').next().unwrap_or(path);
    words.iter().any(|word| *word == path || *word == file_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "#!/usr/bin/env bash\nset -euo pipefail\nsrc=docs\ndest=backup\nmkdir -p \"$dest\"\nfor f in \"$source\"/*.txt; do\n  cp \"$f\" \"$dest/\"\ndone\n";
    const TASK: &str = "backup.sh should copy every .txt file from docs/ into backup/, but it does not work. Fix the script and run it.";

    fn named() -> Vec<(String, String)> {
        vec![("backup.sh".to_owned(), SCRIPT.to_owned())]
    }

    #[test]
    fn a_named_files_lines_written_over_a_file_the_task_does_not_name_are_refused() {
        let fixed = SCRIPT.replace("$source", "$src");
        assert_eq!(
            check("docs/a.txt", Some(TASK), "alpha\n", &fixed, &named()),
            Some("`docs/a.txt` was not changed: its new content came back as the lines of `backup.sh`, the file the task names, not as a change to `docs/a.txt`. To change `backup.sh`, call change_file with \"path\": \"backup.sh\".".to_owned())
        );
    }

    #[test]
    fn changes_that_keep_the_file_or_that_the_task_asks_for_are_not_refused() {
        let fixed = SCRIPT.replace("$source", "$src");
        // The task names the file changed: a copy may be what it asks for.
        let asked = "Make docs/a.txt hold the same script as backup.sh.";
        assert_eq!(check("docs/a.txt", Some(asked), "alpha\n", &fixed, &named()), None);
        // A file that keeps most of its lines and takes a few from the named file.
        let old = "one\ntwo\nthree\nfour\n";
        let grown = format!("one\ntwo\nthree\nfour\n{fixed}");
        assert_eq!(check("notes.txt", Some(TASK), old, &grown, &named()), None);
        // Lines mostly of the file's own, new to both.
        assert_eq!(check("docs/a.txt", Some(TASK), "alpha\n", "a\nb\nc\nd\n", &named()), None);
        // A file named only in the model's words, not the task, is no source.
        let other = [("notes.sh".to_owned(), SCRIPT.to_owned())];
        assert_eq!(check("docs/a.txt", Some(TASK), "alpha\n", &fixed, &other), None);
        // Too short to say.
        assert_eq!(check("docs/a.txt", Some(TASK), "alpha\n", "set -euo pipefail\ndone\n", &named()), None);
        // No task, no source.
        assert_eq!(check("docs/a.txt", None, "alpha\n", &fixed, &named()), None);
    }

    #[test]
    fn the_task_names_files_in_any_script_and_punctuation() {
        let words = task_words("请修复 backup.sh。然后运行「./docs/a.txt」？");
        assert!(names(&words, "backup.sh"));
        assert!(names(&words, "docs/a.txt"));
        assert!(!names(&words, "docs/b.txt"));
    }
}
