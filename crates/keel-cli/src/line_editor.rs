//! The prompt's line editor: history, bracketed paste (a pasted block is one message,
//! its newlines kept), and `\` + Enter to go on to a next line, as in shells.

use reedline::{
    ColumnarMenu, DefaultPrompt, DefaultPromptSegment, Emacs, FileBackedHistory, KeyCode, KeyModifiers,
    MenuBuilder, Reedline, ReedlineEvent, ReedlineMenu, ValidationResult, Validator,
    default_emacs_keybindings,
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

/// The editor for the `keel` prompt, with the history file when it can be opened, and
/// Tab completing `commands` and the paths under `workspace` ([`crate::completion`]).
pub fn editor(commands: Vec<String>, workspace: Option<&std::path::Path>) -> Reedline {
    let mut keys = default_emacs_keybindings();
    keys.add_binding(
        KeyModifiers::NONE,
        KeyCode::Tab,
        ReedlineEvent::UntilFound(vec![ReedlineEvent::Menu("completion".into()), ReedlineEvent::MenuNext]),
    );
    let completer = crate::completion::PromptCompleter::new(commands, workspace);
    let mut editor = Reedline::create()
        .use_bracketed_paste(true)
        .with_validator(Box::new(Continuation))
        .with_completer(Box::new(completer))
        .with_menu(ReedlineMenu::EngineCompleter(Box::new(ColumnarMenu::default().with_name("completion"))))
        .with_edit_mode(Box::new(Emacs::new(keys)));
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
