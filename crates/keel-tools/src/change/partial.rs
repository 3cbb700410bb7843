//! A reply that made the change on some lines and not others. Asked to "remove all lines
//! that contain 'DEBUG'", the editor rewrote app.py without two of its three DEBUG prints
//! and kept the last one, `print("DEBUG: done")`, in every run of remove-debug-prints on
//! record; the report named the line left, and the model grepped, saw it, and said the
//! prints were removed. So when the change's words quote a text and the editor's reply
//! took it out of some lines of the file but not all, the editor is asked once more,
//! told which lines still hold it. Its second reply is written only when it is the
//! better one: fewer lines hold the text, and every other line of the first reply is
//! still there, in order (nothing else lost). Otherwise the first reply is written, as
//! before, with the note for the model.

use crate::leftovers::{Left, holds, lines_holding, partly_removed_parts};

/// The note for the editor's next attempt, when its reply `new` took a text the `words`
/// quote out of some lines of `old` but not all; `None` otherwise.
pub(super) fn retry_note(path: &str, words: &str, old: &str, new: &str) -> Option<String> {
    let parts = partly_removed_parts(words, old, new);
    if parts.is_empty() {
        return None;
    }
    let mut note = String::new();
    for Left { part, had, has } in &parts {
        note.push_str(&format!(
            "Your earlier reply took `{part}` out of {} of the {had} lines that had it; these lines still have it:\n",
            had - has
        ));
        for (_, line) in lines_holding(new, part) {
            note.push_str(&format!("{line}\n"));
        }
    }
    note.push_str(&format!(
        "If the change is meant for those lines too, reply with the complete new content of `{path}` in one code block, with them changed as well."
    ));
    Some(note)
}

/// Whether `second` is a better reply than `first` for the change `words` of `old`:
/// fewer lines hold a quoted text `first` left on some lines, none holds one more often,
/// it is no longer than `first`, and the lines of `first` that hold none of them are all
/// in `second`, in order.
pub(super) fn better(words: &str, old: &str, first: &str, second: &str) -> bool {
    let parts: Vec<&str> =
        partly_removed_parts(words, old, first).into_iter().map(|left| left.part).collect();
    let count = |text: &str, part: &str| text.lines().filter(|line| holds(line, part)).count();
    let fewer = parts.iter().any(|part| count(second, part) < count(first, part));
    let none_more = parts.iter().all(|part| count(second, part) <= count(first, part));
    if parts.is_empty() || !fewer || !none_more || second.lines().count() > first.lines().count() {
        return false;
    }
    let mut rest = second.lines();
    first
        .lines()
        .filter(|line| !parts.iter().any(|part| holds(line, part)))
        .all(|line| rest.any(|other| other == line))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: &str = "remove all lines that contain 'DEBUG'";
    const OLD: &str = "def load():\n    print(\"DEBUG: a\")\n    x = 1\n    print(\"DEBUG: b\")\n    print(\"DEBUG: done\")\n    return x\n";
    const FIRST: &str = "def load():\n    x = 1\n    print(\"DEBUG: done\")\n    return x\n";

    #[test]
    fn the_editor_is_told_which_lines_still_hold_the_quoted_text() {
        assert_eq!(
            retry_note("app.py", WORDS, OLD, FIRST).as_deref(),
            Some(
                "Your earlier reply took `DEBUG` out of 2 of the 3 lines that had it; these lines still have it:\n\
                 print(\"DEBUG: done\")\n\
                 If the change is meant for those lines too, reply with the complete new content of `app.py` in one code block, with them changed as well."
            )
        );
        assert_eq!(
            retry_note("app.py", WORDS, OLD, "def load():\n    x = 1\n    return x\n"),
            None,
            "all gone"
        );
        assert_eq!(retry_note("app.py", "remove the debug prints", OLD, FIRST), None, "nothing quoted");
    }

    #[test]
    fn the_second_reply_is_taken_only_when_it_left_fewer_and_lost_nothing_else() {
        assert!(better(WORDS, OLD, FIRST, "def load():\n    x = 1\n    return x\n"));
        // The same as the first: not better.
        assert!(!better(WORDS, OLD, FIRST, FIRST));
        // The DEBUG line gone, but so is `return x`.
        assert!(!better(WORDS, OLD, FIRST, "def load():\n    x = 1\n"));
        // A line changed that held no DEBUG.
        assert!(!better(WORDS, OLD, FIRST, "def load():\n    x = 2\n    return x\n"));
        // The line with DEBUG changed instead of removed (a rename of the quoted text).
        assert!(better(WORDS, OLD, FIRST, "def load():\n    x = 1\n    print(\"done\")\n    return x\n"));
        // More lines than the first reply: not taken.
        assert!(!better(WORDS, OLD, FIRST, "def load():\n    x = 1\n    y = 2\n    z = 3\n    return x\n"));
    }
}
