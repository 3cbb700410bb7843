//! Tab completion at the prompt: slash commands at the start of the line, the server's
//! model names after `/model ` ([`ModelNames`]), and the workspace's entries for any
//! other word (folders end in `/`; hidden ones only when the word starts with `.`; never
//! outside the workspace).

use std::path::{Path, PathBuf};

use reedline::{Completer, CompletionResult, Span, Suggestion};

use crate::model_names::ModelNames;

/// Most entries of one folder offered.
const MOST_ENTRIES: usize = 200;

/// Completes commands and paths for the prompt.
pub struct PromptCompleter {
    commands: Vec<String>,
    /// `None`: no paths (the files are elsewhere, as with `keel --remote`).
    workspace: Option<PathBuf>,
    /// `None`: no model names (`keel --remote`, which cannot switch models).
    models: Option<ModelNames>,
}

impl PromptCompleter {
    /// Offers `commands` (`/help`, …), the paths under `workspace` and the names of
    /// `models`, those given.
    pub fn new(commands: Vec<String>, workspace: Option<&Path>, models: Option<ModelNames>) -> Self {
        PromptCompleter { commands, workspace: workspace.map(Path::to_path_buf), models }
    }

    /// The suggestions for the word before `pos` in `line`.
    pub fn suggestions(&self, line: &str, pos: usize) -> Vec<Suggestion> {
        let before = line.get(..pos).unwrap_or(line);
        let start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = &before[start..];
        let span = Span::new(start, pos);
        if start == 0 && word.starts_with('/') {
            return self
                .commands
                .iter()
                .filter(|name| name.starts_with(word))
                .map(|name| suggestion(name.clone(), span, true))
                .collect();
        }
        if before[..start].trim_end() == "/model" {
            let names = self.models.as_ref().map(|m| m.complete(word)).unwrap_or_default();
            return names.into_iter().map(|name| suggestion(name, span, false)).collect();
        }
        if word.is_empty() {
            return Vec::new();
        }
        self.paths(word, span)
    }

    /// Entries of the workspace that complete `word`, a relative path; folders end in `/`.
    fn paths(&self, word: &str, span: Span) -> Vec<Suggestion> {
        let (folder, prefix) = match word.rfind('/') {
            Some(i) => (&word[..=i], &word[i + 1..]),
            None => ("", word),
        };
        // Only inside the workspace: no absolute paths, no way up.
        if folder.starts_with('/') || folder.split('/').any(|part| part == "..") {
            return Vec::new();
        }
        let Some(workspace) = &self.workspace else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir(workspace.join(folder)) else { return Vec::new() };
        let mut found: Vec<Suggestion> = entries
            .flatten()
            .take(MOST_ENTRIES * 10)
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let shown = name.starts_with(prefix) && (prefix.starts_with('.') || !name.starts_with('.'));
                if !shown {
                    return None;
                }
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let value = format!("{folder}{name}{}", if is_dir { "/" } else { "" });
                Some(suggestion(value, span, !is_dir))
            })
            .collect();
        found.sort_by(|a, b| a.value.cmp(&b.value));
        found.truncate(MOST_ENTRIES);
        found
    }
}

fn suggestion(value: String, span: Span, append_whitespace: bool) -> Suggestion {
    Suggestion { value, span, append_whitespace, ..Suggestion::default() }
}

impl Completer for PromptCompleter {
    fn complete(&mut self, line: &str, pos: usize) -> CompletionResult {
        CompletionResult::fresh(self.suggestions(line, pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(completer: &PromptCompleter, line: &str) -> Vec<String> {
        completer.suggestions(line, line.len()).into_iter().map(|s| s.value).collect()
    }

    #[test]
    fn commands_at_the_start_and_workspace_paths_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/bin")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("src/model.rs"), "").unwrap();
        std::fs::write(dir.path().join(".env"), "").unwrap();
        let commands = ["/model", "/mcp", "/undo"].map(String::from).to_vec();
        let completer = PromptCompleter::new(commands.clone(), Some(dir.path()), None);
        assert_eq!(values(&completer, "/m"), ["/model", "/mcp"]);
        assert_eq!(values(&completer, "fix s"), ["src/"]);
        assert_eq!(values(&completer, "fix src/m"), ["src/main.rs", "src/model.rs"]);
        assert_eq!(values(&completer, "look at src/"), ["src/bin/", "src/main.rs", "src/model.rs"]);
        assert!(values(&completer, "read e").is_empty(), "hidden entries only when asked for");
        assert_eq!(values(&completer, "read .e"), [".env"]);
        assert!(values(&completer, "../").is_empty() && values(&completer, "/etc/pa").is_empty());
        let span = completer.suggestions("fix src/m", 9)[0].span;
        assert_eq!((span.start, span.end), (4, 9), "the word is replaced, not the line");
        assert!(values(&completer, "/model s").is_empty(), "no paths for a model's name");
        let server = keel_llm::ProviderConfig::new("http://127.0.0.1:9/v1".to_owned(), "m".to_owned());
        let names = ModelNames::new();
        names.serve(Some(&server));
        names.learned(&server, &["llama3.2:3b".to_owned(), "qwen2.5-coder:7b".to_owned()]);
        let local = PromptCompleter::new(commands.clone(), Some(dir.path()), Some(names));
        assert_eq!(values(&local, "/model q"), ["qwen2.5-coder:7b"]);
        assert_eq!(values(&local, "/model "), ["llama3.2:3b", "qwen2.5-coder:7b"]);
        assert!(values(&local, "/model qwen x").is_empty(), "one name only");
        assert_eq!(values(&local, "see s"), ["src/"], "paths as before");
        let span = local.suggestions("/model q", 8)[0].span;
        assert_eq!((span.start, span.end), (7, 8));
        let remote = PromptCompleter::new(commands, None, None);
        assert!(values(&remote, "fix s").is_empty(), "no local paths for a remote session");
        assert_eq!(values(&remote, "/u"), ["/undo"]);
    }
}
