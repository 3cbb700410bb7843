//! The prompt's line editor: history, bracketed paste (a pasted block is one message,
//! its newlines kept), and `\` + Enter to go on to a next line, as in shells.

use reedline::{
    DefaultPrompt, DefaultPromptSegment, FileBackedHistory, Reedline, ValidationResult, Validator,
};

/// A line that ends in a backslash goes on: Enter adds a line instead of sending.
struct Continuation;

impl Validator for Continuation {
    fn validate(&self, line: &str) -> ValidationResult {
        if line.ends_with('\\') && !line.ends_with("\\\\") {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Complete
        }
    }
}

/// The editor for the `keel` prompt, with the history file when it can be opened.
pub fn editor() -> Reedline {
    let mut editor = Reedline::create().use_bracketed_paste(true).with_validator(Box::new(Continuation));
    if let Ok(history) = FileBackedHistory::with_file(10_000, crate::paths::history_file()) {
        editor = editor.with_history(Box::new(history));
    }
    editor
}

/// The `keel` prompt.
pub fn prompt() -> DefaultPrompt {
    DefaultPrompt::new(DefaultPromptSegment::Basic("keel".into()), DefaultPromptSegment::Empty)
}

/// The message a submitted buffer sends: continuation backslashes dropped, the ends
/// trimmed.
pub fn message(buffer: &str) -> String {
    buffer.replace("\\\r\n", "\n").replace("\\\n", "\n").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_continues_and_is_dropped() {
        assert!(matches!(Continuation.validate("fix the tests \\"), ValidationResult::Incomplete));
        assert!(matches!(Continuation.validate("a path C:\\\\"), ValidationResult::Complete));
        assert!(matches!(Continuation.validate("plain"), ValidationResult::Complete));
        assert_eq!(message("  fix the tests \\\nin src/  \n"), "fix the tests \nin src/");
        assert_eq!(
            message("Traceback:\n  File \"a.py\"\nValueError"),
            "Traceback:\n  File \"a.py\"\nValueError"
        );
    }
}
