//! Blank lines a model reflowed on its own, put back.
//!
//! Asked for a file's whole new content, the 1.5B model makes the change and also drops
//! or adds blank lines elsewhere (two blank lines between Python functions became one,
//! a test file it was told not to change lost one). Those are not the change: unless
//! the task is about layout, runs of blank lines it removed are kept and runs it added
//! alone are dropped, so the diff shows only what was meant.

use similar::DiffOp;

/// Words that make a task about layout, where blank lines are the change.
const LAYOUT_WORDS: [&str; 9] =
    ["blank", "empty", "whitespace", "spacing", "format", "reformat", "indent", "indentation", "newline"];

/// True when `text` asks about layout (blank lines, whitespace, formatting).
pub(crate) fn about_layout(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|word| LAYOUT_WORDS.iter().any(|w| word.eq_ignore_ascii_case(w)))
}

/// A text as its non-blank lines, each with the blank lines before it, and the blank
/// lines after the last.
struct Layout<'a> {
    lines: Vec<(&'a str, Vec<&'a str>)>,
    trailing: Vec<&'a str>,
}

impl<'a> Layout<'a> {
    fn of(text: &'a str) -> Layout<'a> {
        let mut lines = Vec::new();
        let mut gap = Vec::new();
        for line in text.lines() {
            if line.trim().is_empty() {
                gap.push(line);
            } else {
                lines.push((line, std::mem::take(&mut gap)));
            }
        }
        Layout { lines, trailing: gap }
    }
}

/// `new` with the layout of `old` wherever their non-blank lines are the same (up to
/// trailing spaces): the blank lines before each such line, and after the last, come
/// from `old`; changed lines come with `new`'s blank lines.
pub(crate) fn keep_old_blank_lines(old: &str, new: &str) -> String {
    let (before, after) = (Layout::of(old), Layout::of(new));
    let keys =
        |layout: &Layout<'_>| layout.lines.iter().map(|(l, _)| l.trim_end().to_owned()).collect::<Vec<_>>();
    let (old_keys, new_keys) = (keys(&before), keys(&after));
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old_keys, &new_keys);
    let mut out: Vec<&str> = Vec::new();
    let mut ends_equal = true;
    for op in ops {
        match op {
            DiffOp::Equal { old_index, len, .. } => {
                for (line, gap) in &before.lines[old_index..old_index + len] {
                    out.extend(gap.iter().copied());
                    out.push(line);
                }
                ends_equal = true;
            }
            DiffOp::Delete { .. } => ends_equal = false,
            DiffOp::Insert { new_index, new_len, .. } | DiffOp::Replace { new_index, new_len, .. } => {
                for (line, gap) in &after.lines[new_index..new_index + new_len] {
                    out.extend(gap.iter().copied());
                    out.push(line);
                }
                ends_equal = false;
            }
        }
    }
    out.extend(if ends_equal { &before.trailing } else { &after.trailing }.iter().copied());
    let mut text = out.join("\n");
    if new.ends_with('\n') && !text.is_empty() {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflowed_blank_lines_are_put_back_and_the_change_kept() {
        let old = "def a():\n    pass\n\n\ndef b():\n    pass\n";
        let new = "def a():\n    pass\n\ndef b():\n    return 1\n\ndef c():\n    pass\n";
        assert_eq!(
            keep_old_blank_lines(old, new),
            "def a():\n    pass\n\n\ndef b():\n    return 1\n\ndef c():\n    pass\n"
        );
        // Only blank lines or trailing spaces changed: the old text comes back.
        assert_eq!(keep_old_blank_lines("a\n\n\nb\n", "a\nb\n"), "a\n\n\nb\n");
        assert_eq!(keep_old_blank_lines("a  \n\nb\n", "a\nb\n"), "a  \n\nb\n");
        // A new file end: the new one's.
        assert_eq!(keep_old_blank_lines("a\n", "a\nb\n"), "a\nb\n");
        assert_eq!(keep_old_blank_lines("x\n", "x\n"), "x\n");
    }

    #[test]
    fn layout_tasks_are_told_by_their_words() {
        assert!(about_layout("Remove the empty lines from notes.txt"));
        assert!(about_layout("Fix the indentation"));
        assert!(!about_layout("Add a function reverse_words"));
    }
}
