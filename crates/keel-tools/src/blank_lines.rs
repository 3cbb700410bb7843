//! Blank lines a model reflowed on its own, put back.
//!
//! Asked for a file's whole new content, the 1.5B model makes the change and also drops
//! or adds blank lines elsewhere (two blank lines between Python functions became one,
//! a test file it was told not to change lost one). Those are not the change: unless
//! the task is about layout (its intent, [`keel_agent::intent`]), runs of blank lines it
//! removed are kept and runs it added alone are dropped, so the diff shows only what was
//! meant. The same goes for line endings: the model writes `\n`, so a file that used
//! `\r\n` gets them back.
//!
//! When the intent does not say whether the task is about layout (its readings
//! disagreed) and blank lines are all the editor changed, they are the change: putting
//! them back would leave nothing of it.

use similar::DiffOp;

/// Which parts of a file's layout a change asks for (and so may change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct LayoutAsked {
    /// Blank lines, whitespace, formatting.
    pub blank_lines: bool,
    /// `\n` against `\r\n`.
    pub line_endings: bool,
    /// A change of blank lines alone is the change (the task is not known to be about
    /// something else).
    pub blank_lines_alone: bool,
}

impl LayoutAsked {
    /// What the task's intent says (read by the model, in any language): a task about
    /// layout may change blank lines and line endings; any other, or one not known to
    /// be, keeps them, except that one not known either way may change blank lines when
    /// they are all that changes.
    pub(crate) fn of(intent: keel_agent::TaskIntent) -> Self {
        let layout = intent.about_layout();
        LayoutAsked {
            blank_lines: layout,
            line_endings: layout,
            blank_lines_alone: intent.layout != Some(false),
        }
    }

    /// The editor's `new` text for a file that held `old`, with the layout this task
    /// does not ask for put back.
    pub(crate) fn keep(self, old: &str, new: String) -> String {
        let endings = |text: String| if self.line_endings { text } else { keep_old_line_endings(old, &text) };
        if self.blank_lines {
            return endings(new);
        }
        let kept = endings(keep_old_blank_lines(old, &new));
        if kept == old && self.blank_lines_alone {
            return endings(new);
        }
        kept
    }
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

/// True when most of `text`'s lines end with `\r\n`.
fn uses_crlf(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    crlf > 0 && crlf * 2 >= text.matches('\n').count()
}

/// `new` with `old`'s line endings: `\r\n` throughout when `old` used them, else `new`
/// as it is.
pub(crate) fn keep_old_line_endings(old: &str, new: &str) -> String {
    if !uses_crlf(old) {
        return new.to_owned();
    }
    new.replace("\r\n", "\n").replace('\n', "\r\n")
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

    /// Regression: a `\r\n` file came back with `\n` from the editor, so a one-line
    /// change rewrote every line (and its diff showed them all).
    #[test]
    fn a_crlf_file_keeps_its_line_endings() {
        let old = "a = 1\r\n\r\nb = 2\r\n";
        let new = keep_old_blank_lines(old, "a = 1\n\nb = 3\n");
        assert_eq!(keep_old_line_endings(old, &new), "a = 1\r\n\r\nb = 3\r\n");
        // Mixed endings in the reply become one kind.
        assert_eq!(keep_old_line_endings(old, "x\r\ny\nz\n"), "x\r\ny\r\nz\r\n");
        // A `\n` file is left as the editor wrote it.
        assert_eq!(keep_old_line_endings("a\nb\n", "a\nc\n"), "a\nc\n");
        assert_eq!(keep_old_line_endings("a\nb\n", "a\r\nc\r\n"), "a\r\nc\r\n");
    }

    /// Issue 29: "删除多余的空行" (remove the extra blank lines) through change_file had its
    /// blank lines put back, twice: the task is about layout in any language, as its
    /// intent says, not as English words do.
    #[test]
    fn layout_is_what_the_intent_says() {
        let intent = |layout| keel_agent::TaskIntent { layout, ..keel_agent::TaskIntent::default() };
        assert_eq!(
            LayoutAsked::of(intent(Some(true))),
            LayoutAsked { blank_lines: true, line_endings: true, blank_lines_alone: true }
        );
        assert_eq!(LayoutAsked::of(intent(Some(false))), LayoutAsked::default());
        assert_eq!(
            LayoutAsked::of(intent(None)),
            LayoutAsked { blank_lines: false, line_endings: false, blank_lines_alone: true },
            "unknown keeps the layout beside another change"
        );
    }

    /// Issue 29: "Delete the extra blank lines in todo.txt", its intent's readings
    /// disagreeing on layout: the editor's first reply collapsed the runs of blank lines
    /// rightly, they were put back, and the model was told the file came back unchanged.
    #[test]
    fn blank_lines_alone_are_the_change_unless_the_task_is_known_to_be_about_else() {
        let old = "a\n\n\n\nb\nc\n\n\n";
        let collapsed = "a\n\nb\nc\n".to_owned();
        let intent = |layout| keel_agent::TaskIntent { layout, ..keel_agent::TaskIntent::default() };
        let unknown = LayoutAsked::of(intent(None));
        assert_eq!(unknown.keep(old, collapsed.clone()), collapsed);
        // Beside another change, reflowed blank lines are still put back.
        assert_eq!(unknown.keep(old, "a\n\nb\nd\n".to_owned()), "a\n\n\n\nb\nd\n");
        // Known not to be about layout: the file comes back as it was (so "not changed").
        assert_eq!(LayoutAsked::of(intent(Some(false))).keep(old, collapsed.clone()), old);
        assert_eq!(LayoutAsked::of(intent(Some(true))).keep(old, collapsed.clone()), collapsed);
        // A `\r\n` file keeps its line endings either way.
        assert_eq!(unknown.keep("a\r\n\r\n\r\nb\r\n", "a\n\nb\n".to_owned()), "a\r\n\r\nb\r\n");
    }
}
