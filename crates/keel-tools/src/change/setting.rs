//! Words that set keys to plain values, and an editor reply that set them to others.
//!
//! Asked `version = '0.4.2'` for a pyproject.toml at 0.4.1 with the task "bump version",
//! the 1.5B editor wrote 0.4.3: it applied the words and then the task's "bump" again
//! (1.0.0 became 1.0.1, 0.4.4 became 0.4.5; every recorded bump-version run, both routes,
//! the same at three seeds). Told what it set and what the words give, it wrote the given
//! value in 12 of 12 replays. The check is structural: words made only of `key = value`
//! or `key: value` parts, a key the file already sets, a value plain enough to compare
//! (one token, or a quoted one without shell or pattern characters). Words that are a
//! command or an expression (`"build": "$(date +%s)"`) are not read as settings.

use std::io::Read;
use std::path::Path;

use crate::keyed;
use crate::workspace::Roots;

/// One `key = value` (or `key: value`) part of the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Setting {
    pub key: String,
    pub value: String,
}

/// A setting the editor's reply did not make: the key, the words' value and what the
/// reply set it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Missed {
    pub key: String,
    pub wanted: String,
    pub written: String,
}

/// Most parts the words may have to be read as settings.
const MAX_PARTS: usize = 16;
/// Characters that make a value a command, pattern or expression rather than a value.
const NOT_PLAIN: &str = "$`\\*?[]{}()<>|;%^=";

/// The settings the words make, when every non-blank part of them (split at `;` and
/// line ends) is one; otherwise none.
pub(super) fn settings(words: &str) -> Vec<Setting> {
    let parts: Vec<&str> = words.split([';', '\n']).map(str::trim).filter(|p| !p.is_empty()).collect();
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Vec::new();
    }
    let mut found = Vec::new();
    for part in parts {
        let Some((key, value)) = keyed::split(part.trim_end_matches(',')) else { return Vec::new() };
        let Some(value) = plain_value(value) else { return Vec::new() };
        found.push(Setting { key: key.to_owned(), value: value.to_owned() });
    }
    found
}

/// The value when it is plain: quoted text without [`NOT_PLAIN`] characters, or one
/// such token unquoted.
fn plain_value(value: &str) -> Option<&str> {
    let quoted = value.starts_with(['"', '\'']);
    let inner = keyed::unquote(value)?;
    let plain = !inner.is_empty()
        && !inner.chars().any(|c| NOT_PLAIN.contains(c) || c == '"' || c == '\'')
        && (quoted || !inner.chars().any(char::is_whitespace));
    plain.then_some(inner)
}

/// The first of the words' settings on a key `old` sets that `new` sets to another value
/// (and never to the words' one).
pub(super) fn missed(words: &str, old: &str, new: &str) -> Option<Missed> {
    settings(words).into_iter().find_map(|setting| {
        if keyed::values_of(old, &setting.key).is_empty() {
            return None;
        }
        let written = keyed::values_of(new, &setting.key);
        if written.is_empty() || written.contains(&setting.value.as_str()) {
            return None;
        }
        Some(Missed { key: setting.key, wanted: setting.value, written: written[0].to_owned() })
    })
}

/// True when the words are settings and `old` already sets each of their keys to their
/// value (quotes aside). Asked `description = '…'` for the line pyproject.toml already
/// had, the editor, given the task "bump version", bumped the version again.
pub(super) fn in_place(words: &str, old: &str) -> bool {
    let wanted = settings(words);
    !wanted.is_empty() && wanted.iter().all(|s| keyed::values_of(old, &s.key).contains(&s.value.as_str()))
}

/// Most changed keys looked at for one the words do not set.
const MAX_CHANGED: usize = 64;

/// A key the words do not set whose value the reply changed (a key set once in both old
/// and new), when the file sets every key of the words.
pub(super) fn stray(words: &str, old: &str, new: &str) -> Option<keyed::Changed> {
    let wanted = settings(words);
    // Words whose keys the file does not set as written (`server_port` for a `port` under
    // `[server]`, `retry_count` for `max_retries`) leave the editor to find the key: it
    // did, and the reply changes another one rightly.
    if wanted.is_empty() || wanted.iter().any(|s| keyed::values_of(old, &s.key).is_empty()) {
        return None;
    }
    let named = |key: &str| wanted.iter().any(|s| keyed::same_key(&s.key, key));
    keyed::changed(old, new, MAX_CHANGED).into_iter().find(|c| !named(&c.key))
}

/// The refusal and the editor's retry note for a reply that changed a key the words do
/// not set.
pub(super) fn stray_refusal(path: &str, words: &str, changed: &keyed::Changed) -> (String, String) {
    let keyed::Changed { key, before, after } = changed;
    let keys: Vec<String> = settings(words).into_iter().map(|s| format!("`{}`", s.key)).collect();
    let keys = keys.join(", ");
    (
        format!(
            "`{path}` was not changed: the editor's new content also changed `{key}` (`{before}` to `{after}`), which your words do not set. Call change_file again saying everything to change, or look at the file first."
        ),
        format!(
            "Your earlier reply also changed `{key}` from `{before}` to `{after}`, which the change does not mention. Reply with the complete new content of `{path}` in one code block, changing only {keys}."
        ),
    )
}

/// Most files looked at for a key set elsewhere, and most bytes of the file the words
/// are for.
const MAX_FILES: usize = 200;
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most characters of the line shown.
const SHOWN_LINE_CHARS: usize = 120;

/// Where a key the words set is set to another value, in a file under `within` other
/// than `target`, when the words are settings and `target` sets none of their keys: "`__init__.py` sets
/// `version` (line 1: `__version__ = "0.4.1"`)". The 1.5B model, having set a version in
/// pyproject.toml, called change_file with the same words on the package's folder and
/// then on its `cli.py`, which only imports the version, four times (bump-version).
pub(super) fn set_elsewhere(roots: &Roots, words: &str, within: &Path, target: &Path) -> Option<SetAt> {
    let wanted = settings(words);
    // A folder outside the project (`/etc/`) is not walked: its files are not read anyway.
    if wanted.is_empty() || !within.starts_with(roots.root()) {
        return None;
    }
    let sets_a_key = |text: &str| wanted.iter().any(|s| !keyed::values_of(text, &s.key).is_empty());
    if let Some(file) = roots.open_found(target) {
        let mut text = String::new();
        if file.take(MAX_FILE_BYTES).read_to_string(&mut text).is_ok() && sets_a_key(&text) {
            return None;
        }
    }
    let mut found = None;
    crate::leftovers::each_file(roots, within, Some(target), MAX_FILES, |shown, text| {
        for (index, line) in text.lines().enumerate() {
            let Some((key, value)) = keyed::setting(line) else { continue };
            // A file that already has the words' value is done, not where to go.
            if let Some(setting) = wanted.iter().find(|s| keyed::same_key(key, &s.key) && s.value != value) {
                found = Some(SetAt {
                    file: shown.to_owned(),
                    key: setting.key.clone(),
                    line: index + 1,
                    text: crate::output::clip_line(line.trim(), SHOWN_LINE_CHARS),
                });
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

/// A line of another file that sets a key of the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SetAt {
    pub file: String,
    pub key: String,
    pub line: usize,
    pub text: String,
}

impl SetAt {
    /// "`F` sets `key` (line N: `text`): to change it there, call change_file with …".
    pub(super) fn hint(&self) -> String {
        format!(
            "`{}` sets `{}` (line {}: `{}`): to change it there, call change_file with \"path\": \"{}\".",
            self.file, self.key, self.line, self.text, self.file
        )
    }
}

impl Missed {
    /// What the model is told when no reply made the setting.
    pub(super) fn refusal(&self, path: &str) -> String {
        format!(
            "`{path}` was not changed: your words set `{}` to `{}`, and the editor's new content set it to `{}` instead. Call change_file again with the value you want, or look at the file first.",
            self.key, self.wanted, self.written
        )
    }

    /// What the editor is told on its next attempt.
    pub(super) fn retry(&self, path: &str) -> String {
        format!(
            "Your earlier reply set `{}` to `{}`, but the change gives `{}`. Reply with the complete new content of `{path}` in one code block, with `{}` set to `{}` exactly.",
            self.key, self.written, self.wanted, self.key, self.wanted
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(key: &str, value: &str) -> Setting {
        Setting { key: key.to_owned(), value: value.to_owned() }
    }

    #[test]
    fn words_made_of_settings_are_read_as_settings() {
        assert_eq!(settings("version = '0.4.2'"), vec![setting("version", "0.4.2")]);
        assert_eq!(settings(r#""timeout": 30,"#), vec![setting("timeout", "30")]);
        assert_eq!(
            settings("theme: light; default_color: blue\nshow_grid: false"),
            vec![setting("theme", "light"), setting("default_color", "blue"), setting("show_grid", "false")]
        );
        assert_eq!(settings("颜色: 蓝色"), vec![setting("颜色", "蓝色")]);
        assert_eq!(settings(r#"title = "My app""#), vec![setting("title", "My app")]);
    }

    #[test]
    fn words_that_say_more_or_compute_are_not_settings() {
        for words in [
            "set the version to 0.4.2",
            "version = 0.4.2 and update the changelog",
            r#""build": "$(date +%Y%m%d)""#,
            "requests==2.32.3",
            "sed -i 's/retry_count = 3/retry_count = 5/' config.ini",
            "timeout: 30 seconds",
            "x = [1, 2]",
            "note: it's fine",
            "",
        ] {
            assert_eq!(settings(words), Vec::<Setting>::new(), "{words:?}");
        }
    }

    #[test]
    fn a_reply_that_set_another_value_is_caught() {
        let old = "[project]\nname = \"tidyup\"\nversion = \"0.4.1\"\n";
        let bumped_twice = old.replace("0.4.1", "0.4.3");
        assert_eq!(
            missed("version = '0.4.2'", old, &bumped_twice),
            Some(Missed { key: "version".into(), wanted: "0.4.2".into(), written: "0.4.3".into() })
        );
        assert_eq!(missed("version = '0.4.2'", old, &old.replace("0.4.1", "0.4.2")), None);
        let init = "__version__ = \"0.4.1\"\n";
        assert_eq!(
            missed("version = \"0.5.0\"", init, "__version__ = \"0.5.1\"\n").map(|m| m.written),
            Some("0.5.1".to_owned()),
            "`__version__` is the words' `version`"
        );
        let json = "{\n  \"default_color\": \"red\",\n  \"border_color\": \"red\"\n}\n";
        let new = json.replace("\"default_color\": \"red\"", "\"default_color\": \"blue\"");
        assert_eq!(missed("default_color: blue", json, &new), None);
        assert_eq!(missed("default_color: blue", json, json).map(|m| m.written), Some("red".to_owned()));
    }

    #[test]
    fn keys_the_file_does_not_set_or_the_reply_drops_are_not_judged() {
        let old = "def main():\n    pass\n";
        assert_eq!(missed("version = '1.0.0'", old, "def main():\n    return 1\n"), None);
        let toml = "version = \"0.4.1\"\nname = \"x\"\n";
        assert_eq!(missed("version = '1.0.0'", toml, "name = \"x\"\n"), None);
    }

    #[test]
    fn settings_already_in_place_and_keys_changed_unasked_are_told() {
        let old = "[project]\nversion = \"1.0.0\"\ndescription = \"Tidies text\"\n";
        assert!(in_place("description = 'Tidies text'", old));
        assert!(!in_place("description = 'Tidies files'", old));
        assert!(!in_place("make the description shorter", old));
        let bumped = old.replace("1.0.0", "1.0.1");
        assert_eq!(
            stray("description = 'Tidies text'", old, &bumped).map(|c| (c.key, c.before, c.after)),
            Some(("version".to_owned(), "1.0.0".to_owned(), "1.0.1".to_owned()))
        );
        assert_eq!(stray("version = '1.0.1'", old, &bumped), None, "the key the words set");
        assert_eq!(stray("set the version", old, &bumped), None, "words that are not settings");
        let renamed = "[project]\nrelease = \"1.0.0\"\ndescription = \"Tidies text\"\n";
        assert_eq!(stray("release = '1.0.0'", old, renamed), None, "a key gone is not a value changed");
        let config = "[server]\nport = 3000\n";
        assert_eq!(
            stray("server_port = 8080", config, "[server]\nport = 8080\n"),
            None,
            "the words' key is not the file's: the editor found it"
        );
    }
}
