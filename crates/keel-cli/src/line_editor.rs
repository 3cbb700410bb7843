//! The prompt's line editor: history, bracketed paste (a pasted block is one message,
//! its newlines kept; a long one folded, [`crate::fold`]), and `\` + Enter to go on to a
//! next line, as in shells.

use crossterm::event::Event;
use reedline::{
    Color, ColumnarMenu, DefaultPrompt, DefaultPromptSegment, EditCommand, EditMode, Emacs,
    FileBackedHistory, Highlighter, History, HistoryItem, HistoryItemId, HistorySessionId, KeyCode,
    KeyModifiers, MenuBuilder, PromptEditMode, Reedline, ReedlineEvent, ReedlineMenu, ReedlineRawEvent,
    SearchQuery, StyledText, ValidationResult, Validator, default_emacs_keybindings,
};

use crate::fold::Pastes;

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

/// Emacs keys, and a bracketed paste put in the line through [`Pastes::insert`] (a long
/// one as its fold).
struct Folding {
    keys: Emacs,
    pastes: Pastes,
}

impl EditMode for Folding {
    fn parse_event(&mut self, event: ReedlineRawEvent) -> ReedlineEvent {
        match Event::from(event) {
            Event::Paste(body) => {
                ReedlineEvent::Edit(vec![EditCommand::InsertString(self.pastes.insert(&body))])
            }
            other => match ReedlineRawEvent::try_from(other) {
                Ok(event) => self.keys.parse_event(event),
                Err(()) => ReedlineEvent::None,
            },
        }
    }

    fn edit_mode(&self) -> PromptEditMode {
        self.keys.edit_mode()
    }
}

/// Folds shown in another color than the text around them.
struct FoldColors(Pastes);

impl Highlighter for FoldColors {
    fn highlight(&self, line: &str, _cursor: usize) -> StyledText {
        let mut text = StyledText::new();
        text.push((Color::White.normal(), line.to_owned()));
        for fold in self.0.folds_in(line) {
            text.style_range(fold.start, fold.end, Color::Cyan.normal());
        }
        text
    }
}

/// The history file, which keeps what was sent: folds are kept expanded (a fold means
/// nothing to a later run).
struct ExpandedHistory {
    file: FileBackedHistory,
    pastes: Pastes,
}

impl History for ExpandedHistory {
    fn save(&mut self, mut item: HistoryItem) -> reedline::Result<HistoryItem> {
        if let Ok(text) = self.pastes.expand(&item.command_line) {
            item.command_line = text;
        }
        self.file.save(item)
    }
    fn load(&self, id: HistoryItemId) -> reedline::Result<HistoryItem> {
        self.file.load(id)
    }
    fn count(&self, query: SearchQuery) -> reedline::Result<i64> {
        self.file.count(query)
    }
    fn search(&self, query: SearchQuery) -> reedline::Result<Vec<HistoryItem>> {
        self.file.search(query)
    }
    fn update(
        &mut self,
        id: HistoryItemId,
        updater: &dyn Fn(HistoryItem) -> HistoryItem,
    ) -> reedline::Result<()> {
        self.file.update(id, updater)
    }
    fn clear(&mut self) -> reedline::Result<()> {
        self.file.clear()
    }
    fn delete(&mut self, id: HistoryItemId) -> reedline::Result<()> {
        self.file.delete(id)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync()
    }
    fn session(&self) -> Option<HistorySessionId> {
        self.file.session()
    }
}

/// What Tab completes at the prompt ([`crate::completion`]).
pub struct Completions {
    /// Slash commands.
    pub commands: Vec<String>,
    /// The folder whose paths are offered, if any.
    pub workspace: Option<std::path::PathBuf>,
    /// The model names offered after `/model `, if any.
    pub models: Option<crate::model_names::ModelNames>,
}

/// The editor for the `keel` prompt, with the history file when it can be opened, Tab
/// completing what `completions` names, and long pastes folded into `pastes`.
pub fn editor(completions: Completions, pastes: &Pastes) -> Reedline {
    let mut keys = default_emacs_keybindings();
    keys.add_binding(
        KeyModifiers::NONE,
        KeyCode::Tab,
        ReedlineEvent::UntilFound(vec![ReedlineEvent::Menu("completion".into()), ReedlineEvent::MenuNext]),
    );
    let Completions { commands, workspace, models } = completions;
    let hint = models.clone().map(crate::model_names::ModelHint::new);
    let completer = crate::completion::PromptCompleter::new(commands, workspace.as_deref(), models);
    let mut editor = Reedline::create()
        .use_bracketed_paste(true)
        .with_validator(Box::new(Continuation))
        .with_completer(Box::new(completer))
        .with_menu(ReedlineMenu::EngineCompleter(Box::new(ColumnarMenu::default().with_name("completion"))))
        .with_highlighter(Box::new(FoldColors(pastes.clone())))
        .with_edit_mode(Box::new(Folding { keys: Emacs::new(keys), pastes: pastes.clone() }));
    if let Some(hint) = hint {
        editor = editor.with_hinter(Box::new(hint));
    }
    if let Ok(file) = FileBackedHistory::with_file(10_000, crate::paths::history_file()) {
        editor = editor.with_history(Box::new(ExpandedHistory { file, pastes: pastes.clone() }));
    }
    editor
}

/// The `keel` prompt.
pub fn prompt() -> DefaultPrompt {
    DefaultPrompt::new(DefaultPromptSegment::Basic("keel".into()), DefaultPromptSegment::Empty)
}

/// The message a submitted buffer sends: continuation backslashes dropped, the ends
/// trimmed, then the folds replaced by their pastes (which are sent as they were pasted).
/// An error says why the line cannot be sent as it stands (a fold was changed).
pub fn message(buffer: &str, pastes: &Pastes) -> Result<String, String> {
    let typed = buffer.replace("\\\r\n", "\n").replace("\\\n", "\n");
    pastes.expand(typed.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_continues_and_is_dropped() {
        assert!(matches!(Continuation.validate("fix the tests \\"), ValidationResult::Incomplete));
        assert!(matches!(Continuation.validate("a path C:\\\\"), ValidationResult::Complete));
        assert!(matches!(Continuation.validate("plain"), ValidationResult::Complete));
        let pastes = Pastes::default();
        let message = |buffer: &str| super::message(buffer, &pastes).unwrap();
        assert_eq!(message("  fix the tests \\\nin src/  \n"), "fix the tests \nin src/");
        assert_eq!(
            message("Traceback:\n  File \"a.py\"\nValueError"),
            "Traceback:\n  File \"a.py\"\nValueError"
        );
        // A pasted shell command's own continuations are sent as they were pasted.
        let script = "  ./configure \\\n  --prefix=/usr\n";
        let fold = pastes.insert(script);
        assert_eq!(fold, "[pasted #1: 2 lines, 32 B]");
        assert_eq!(message(&format!("run \\\n{fold}\n")), format!("run \n{script}"));
    }

    /// Issue 32, item 1: a long bracketed paste goes in the line as its fold, the history
    /// keeps the text, and the fold is colored apart from what is typed around it.
    #[test]
    fn a_long_paste_goes_in_as_its_fold_and_the_history_keeps_the_text() {
        let pastes = Pastes::default();
        let mut mode = Folding { keys: Emacs::new(default_emacs_keybindings()), pastes: pastes.clone() };
        let body = (1..=30).map(|i| format!("row {i}\r\n")).collect::<String>();
        let Ok(raw) = ReedlineRawEvent::try_from(Event::Paste(body.clone())) else { panic!("a paste event") };
        let ReedlineEvent::Edit(edits) = mode.parse_event(raw) else { panic!("an edit") };
        let [EditCommand::InsertString(fold)] = edits.as_slice() else { panic!("{edits:?}") };
        assert_eq!(fold, "[pasted #1: 30 lines, 201 B]");
        let text = body.replace("\r\n", "\n");
        assert_eq!(
            message(&format!("why {fold}"), &pastes).unwrap(),
            format!("why {text}"),
            "the paste whole, its last break too"
        );

        let styled = FoldColors(pastes.clone()).highlight(&format!("why {fold}!"), 0);
        let pieces: Vec<(Color, &str)> = styled
            .buffer
            .iter()
            .map(|(style, text)| (style.foreground.unwrap_or(Color::Default), text.as_str()))
            .collect();
        assert_eq!(pieces, [(Color::White, "why "), (Color::Cyan, fold.as_str()), (Color::White, "!")]);

        let mut history = ExpandedHistory { file: FileBackedHistory::new(10).unwrap(), pastes };
        let saved = history.save(HistoryItem::from_command_line(format!("why {fold}"))).unwrap();
        assert_eq!(history.load(saved.id.unwrap()).unwrap().command_line, format!("why {text}"));
    }
}
