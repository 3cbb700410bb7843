//! Guards for `write_file` on what small models get wrong when they write a whole file:
//! content wrapped in a Markdown fence, `<pre><code>` or `<code>` (the file would not run), and an
//! "overwrite" that is really a fragment of the file (the rest would be lost).
//!
//! Both are pure functions of the path and the two contents; `write_file` applies them.

use std::collections::HashSet;
use std::path::Path;

/// File kinds in which a fence or `<pre><code>` may be meant literally.
const MARKUP_EXTENSIONS: &[&str] =
    &["md", "markdown", "mdx", "rst", "txt", "html", "htm", "xml", "svg", "adoc"];

/// A file with fewer non-blank lines is rewritten without question.
const MIN_GUARDED_LINES: usize = 3;
/// A longer new content is not shown inside the suggested call.
const MAX_SUGGESTED_BYTES: usize = 2048;
/// Text that marks a tool result in the model's chat template, never a file's content.
const TOOL_RESULT_MARKERS: &[&str] = &["<tool_response>", "</tool_response>"];
/// How many dropped lines are named.
const SHOWN_DROPPED: usize = 3;

/// The content inside a Markdown fence, `<pre><code>` or `<code>` wrapped around the whole of
/// `content`, when `path` is a code file (not Markdown, HTML, text…); `None` when it is
/// not wrapped or may mean the wrapper.
pub fn unwrapped<'a>(path: &str, content: &'a str) -> Option<(&'a str, &'static str)> {
    let extension = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
    if MARKUP_EXTENSIONS.contains(&extension.as_str()) {
        return None;
    }
    let trimmed = content.trim();
    if let Some(rest) = trimmed.strip_prefix("```") {
        // The opening fence line may name a language: ```python
        let (opening, body) = rest.split_once('\n')?;
        if opening.contains('`') || opening.contains(' ') {
            return None;
        }
        let body = body.strip_suffix("```")?;
        if body.contains("\n```") {
            return None;
        }
        return Some((body, "a ``` fence"));
    }
    // `<pre><code>…</code></pre>`, or `<code>…</code>` alone (both written by the 1.5B model).
    let (body, wrapper) = match trimmed.strip_prefix("<pre>") {
        Some(rest) => {
            let body = rest.trim_start().strip_prefix("<code>")?;
            (body.strip_suffix("</pre>")?.trim_end().strip_suffix("</code>")?, "<pre><code> tags")
        }
        None => (trimmed.strip_prefix("<code>")?.strip_suffix("</code>")?, "<code> tags"),
    };
    if body.contains("<code>") || body.contains("</code>") {
        return None;
    }
    Some((body.strip_prefix('\n').unwrap_or(body), wrapper))
}

/// What a whole-file write would drop from the old content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Non-blank lines of the old content.
    pub old_lines: usize,
    /// Of those, how many the new content still has.
    pub kept: usize,
    /// The first dropped lines, trimmed.
    pub examples: Vec<String>,
    /// The shortest end of the old content (its last one to five lines) that occurs once
    /// in it, for an append suggestion that edit_file can carry out; `None` if no such end.
    pub anchor: Option<String>,
    /// New lines that change an old line rather than add one: the same key (the word
    /// before `=` or `:`, as in `port = 8080` for `port = 3000`).
    pub changes: Vec<LineChange>,
}

/// A new line that changes an old one (see [`Dropped::changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineChange {
    /// The old line, as it is in the file.
    pub old: String,
    /// The new line, with the old line's indentation.
    pub new: String,
    /// How many old lines have the same key (one makes the change unambiguous).
    pub candidates: usize,
}

/// `Some` when writing `new` over `old` keeps fewer than half of the old non-blank
/// lines of a file that has at least [`MIN_GUARDED_LINES`] of them.
pub fn drops_most(old: &str, new: &str) -> Option<Dropped> {
    let old_lines: Vec<&str> = old.lines().filter(|l| !l.trim().is_empty()).collect();
    if old_lines.len() < MIN_GUARDED_LINES {
        return None;
    }
    let new_lines: HashSet<&str> = new.lines().map(str::trim).collect();
    let kept = old_lines.iter().filter(|l| new_lines.contains(l.trim())).count();
    if kept * 2 >= old_lines.len() {
        return None;
    }
    let examples = old_lines
        .iter()
        .filter(|l| !new_lines.contains(l.trim()))
        .take(SHOWN_DROPPED)
        .map(|l| l.trim().to_owned())
        .collect();
    let changes = new
        .lines()
        .filter(|l| !l.trim().is_empty() && !old_lines.iter().any(|o| o.trim() == l.trim()))
        .filter_map(|l| {
            let key = line_key(l)?;
            let same: Vec<&&str> = old_lines.iter().filter(|o| line_key(o) == Some(key)).collect();
            let first = same.first()?;
            let indent = &first[..first.len() - first.trim_start().len()];
            Some(LineChange {
                old: (**first).to_owned(),
                new: format!("{indent}{}", l.trim()),
                candidates: same.len(),
            })
        })
        .collect();
    Some(Dropped { old_lines: old_lines.len(), kept, examples, anchor: unique_end(old), changes })
}

/// A setting's or assignment's key: the single word before the first `=` or `:` (`port`
/// for `port = 3000`, `"version"` for `"version": "1.0"`); `None` for other lines
/// (`def shout(text):` has no one-word key).
fn line_key(line: &str) -> Option<&str> {
    let line = line.trim();
    let end = line.find(['=', ':'])?;
    let key = line[..end].trim();
    (!key.is_empty() && !key.contains(char::is_whitespace) && !key.contains('(')).then_some(key)
}

/// Whether `needle` occurs exactly once in `hay`, counting overlapping occurrences.
fn occurs_once(hay: &str, needle: &str) -> bool {
    let Some(first) = hay.find(needle) else { return false };
    let next = first + needle.chars().next().map_or(1, char::len_utf8);
    !hay[next..].contains(needle)
}

/// Whether `path` is JSON, where text appended after the document is never valid.
fn is_json(path: &str) -> bool {
    Path::new(path).extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// Most lines in an append anchor.
const MAX_ANCHOR_LINES: usize = 5;

/// The shortest end of `old` (trailing blank lines left out), of up to
/// [`MAX_ANCHOR_LINES`] lines, that occurs exactly once in it.
fn unique_end(old: &str) -> Option<String> {
    let text = old.trim_end();
    let mut start = text.len();
    for _ in 0..MAX_ANCHOR_LINES {
        start = text[..start].rfind('\n').map_or(0, |i| i);
        let tail = text[start..].trim_start_matches('\n');
        if !tail.trim().is_empty() && occurs_once(old, tail) {
            return Some(tail.to_owned());
        }
        if start == 0 {
            return None;
        }
    }
    None
}

/// The refusal shown to the model: what would be lost, how to add or change part of the
/// file instead, and how to insist.
pub fn refusal(shown: &str, path: &str, new: &str, dropped: &Dropped) -> String {
    let names: Vec<String> = dropped.examples.iter().map(|l| format!("`{l}`")).collect();
    let mut message = format!(
        "`{shown}` was not changed: write_file replaces the whole file, and your content keeps only {} of its {} lines. It would delete {}{}.\n",
        dropped.kept,
        dropped.old_lines,
        names.join(", "),
        if dropped.old_lines - dropped.kept > names.len() { " and more" } else { "" },
    );
    if let Some(marker) = TOOL_RESULT_MARKERS.iter().find(|m| new.contains(**m)) {
        // A copy of a tool result (the 1.5B model copied read_file's output, wrapper and
        // line numbers, as "<tool_response>1.items = {"): nothing to suggest adding.
        message.push_str(&format!(
            "Your content contains `{marker}`, which wraps tool results in your conversation: it is not part of any file. Write the file's own text, without line numbers.\n"
        ));
    } else if let [change] = dropped.changes.as_slice() {
        // One changed line (`port = 8080` written over a whole config): offer the edit
        // when the line it changes is unambiguous.
        if change.candidates == 1 {
            let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
            message.push_str(&format!(
                "To change that one line, call: edit_file {{\"path\": {}, \"old_text\": {}, \"new_text\": {}}}\n",
                quoted(path),
                quoted(&change.old),
                quoted(&change.new),
            ));
        } else {
            message.push_str(&format!(
                "To change one line, use edit_file with old_text = that line as it is now plus the line above it (`{}` occurs {} times).\n",
                change.old.trim(),
                change.candidates
            ));
        }
    } else if dropped.kept > 0 || !dropped.changes.is_empty() {
        // Some old lines are kept: a rewrite of the file that lost the rest, not an
        // addition (appending it would duplicate them).
        message.push_str(
            "To add lines at the end of the file, use edit_file with old_text = its last line and new_text = that line followed by your lines.\n",
        );
    } else if let Some(anchor) =
        dropped.anchor.as_deref().filter(|_| new.len() <= MAX_SUGGESTED_BYTES && !is_json(path))
    {
        let appended = format!("{anchor}\n\n{}", new.trim_matches('\n'));
        let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
        message.push_str(&format!(
            "To add your lines at the end of the file, call: edit_file {{\"path\": {}, \"old_text\": {}, \"new_text\": {}}}\n",
            quoted(path),
            quoted(anchor),
            quoted(&appended),
        ));
    } else {
        message.push_str(
            "To add lines at the end of the file, use edit_file with old_text = its last line and new_text = that line followed by your lines.\n",
        );
    }
    message.push_str(
        "To change part of the file, use edit_file with old_text copied from it. If you do mean to replace the whole file, call write_file again with the same content.",
    );
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_around_code_is_removed() {
        let content = "```python\ndef f():\n    return 1\n```\n";
        assert_eq!(unwrapped("lib.py", content), Some(("def f():\n    return 1\n", "a ``` fence")));
        assert_eq!(unwrapped("run.sh", "```\necho hi\n```"), Some(("echo hi\n", "a ``` fence")));
    }

    #[test]
    fn pre_code_tags_around_code_are_removed() {
        let content = "<pre><code>def f():\n    return 1</code></pre>";
        assert_eq!(unwrapped("textutil.py", content), Some(("def f():\n    return 1", "<pre><code> tags")));
        let content = "<code>def load(names):\n    return names\n</code>";
        assert_eq!(
            unwrapped("app.py", content),
            Some(("def load(names):\n    return names\n", "<code> tags"))
        );
        // Code tags inside the body, or not around all of it: left alone.
        assert_eq!(unwrapped("a.py", "<code>x = 1</code>\n<code>y = 2</code>"), None);
        assert_eq!(unwrapped("a.py", "<code>x = 1\n"), None);
    }

    #[test]
    fn wrappers_are_kept_where_they_may_be_meant() {
        assert_eq!(unwrapped("README.md", "```\ncode\n```"), None);
        assert_eq!(unwrapped("page.html", "<pre><code>x</code></pre>"), None);
        assert_eq!(unwrapped("Makefile", "```\nall:\n```"), None);
        // Two fenced blocks with text between: not one wrapper.
        assert_eq!(unwrapped("a.py", "```\nx = 1\n```\ntext\n```\ny = 2\n```"), None);
        // A fence that only opens.
        assert_eq!(unwrapped("a.py", "```\nx = 1\n"), None);
        assert_eq!(unwrapped("a.py", "x = 1\n"), None);
    }

    #[test]
    fn a_fragment_over_a_file_drops_most_of_it() {
        let old = "\"\"\"Text helpers.\"\"\"\n\n\ndef shout(text):\n    return text.upper()\n\n\ndef word_count(text):\n    return len(text.split())\n";
        let new = "def reverse_words(text):\n    return ' '.join(reversed(text.split()))\n";
        let dropped = drops_most(old, new);
        assert_eq!(
            dropped,
            Some(Dropped {
                old_lines: 5,
                kept: 0,
                examples: vec![
                    "\"\"\"Text helpers.\"\"\"".to_owned(),
                    "def shout(text):".to_owned(),
                    "return text.upper()".to_owned()
                ],
                anchor: Some("    return len(text.split())".to_owned()),
                changes: vec![],
            })
        );
    }

    #[test]
    fn rewrites_that_keep_most_lines_pass() {
        let old = "b\nc\na\n";
        // Sorting keeps every line.
        assert_eq!(drops_most(old, "a\nb\nc\n"), None);
        // Changing one line of four keeps three.
        assert_eq!(drops_most("w\nx\ny\nz\n", "w\nx\ny\nZ\n"), None);
        // Small files are not guarded.
        assert_eq!(drops_most("one\ntwo\n", "three\n"), None);
    }

    #[test]
    fn the_refusal_suggests_an_append_with_the_models_own_lines() {
        let dropped = drops_most("a = 1\nb = 2\nc = 3\n", "d = 4\n");
        let Some(dropped) = dropped else { panic!("a fragment should be caught") };
        let message = refusal("m.py", "m.py", "d = 4\n", &dropped);
        assert!(message.starts_with("`m.py` was not changed: write_file replaces the whole file, and your content keeps only 0 of its 3 lines. It would delete `a = 1`, `b = 2`, `c = 3`.\n"), "{message}");
        assert!(
            message
                .contains(r#"edit_file {"path": "m.py", "old_text": "c = 3", "new_text": "c = 3\n\nd = 4"}"#),
            "{message}"
        );
        assert!(message.ends_with("call write_file again with the same content."), "{message}");
    }

    #[test]
    fn the_append_anchor_is_the_shortest_unique_end() {
        assert_eq!(unique_end("a\nb\n\n"), Some("b".to_owned()));
        // "}" closes several blocks: the end grows until it is unique.
        assert_eq!(unique_end("x {\n}\ny {\n}\n"), Some("y {\n}".to_owned()));
        assert_eq!(unique_end("}\n}\n}\n}\n}\n}\n"), None);
        assert_eq!(unique_end("only\n"), Some("only".to_owned()));
    }

    #[test]
    fn a_changed_line_over_a_whole_file_is_offered_as_an_edit() {
        let old = "[server]\n  host = \"127.0.0.1\"\n  port = 3000\nworkers = 4\n";
        let Some(dropped) = drops_most(old, "port = 8080") else { panic!("should be caught") };
        let message = refusal("c.toml", "c.toml", "port = 8080", &dropped);
        assert!(
            message.contains(r#"To change that one line, call: edit_file {"path": "c.toml", "old_text": "  port = 3000", "new_text": "  port = 8080"}"#),
            "{message}"
        );
        assert!(!message.contains("at the end of the file"), "{message}");
        // Two `port` lines: no guess.
        let old = "[server]\nport = 3000\n[database]\nport = 5432\n";
        let Some(dropped) = drops_most(old, "port = 8080") else { panic!("should be caught") };
        let message = refusal("c.toml", "c.toml", "port = 8080", &dropped);
        assert!(!message.contains("call: edit_file"), "{message}");
        assert!(message.contains("(`port = 3000` occurs 2 times)"), "{message}");
        // A new function shares no key with the old ones: still an addition.
        let Some(dropped) =
            drops_most("def a(x):\n    return x\ndef b(y):\n    return y\n", "def c(z):\n    return z\n")
        else {
            panic!("should be caught")
        };
        assert!(dropped.changes.is_empty(), "{dropped:?}");
        assert_eq!(line_key("  port = 3000"), Some("port"));
        assert_eq!(line_key("\"version\": \"1.2.3\","), Some("\"version\""));
        assert_eq!(line_key("def shout(text):"), None);
        assert_eq!(line_key("    return len(text.split())"), None);
        assert_eq!(line_key("if a == b:"), None);
    }

    #[test]
    fn no_append_is_suggested_for_json() {
        let old = "{\n  \"a\": 1,\n  \"b\": 2\n}\n";
        let Some(dropped) = drops_most(old, "{\"c\": 3}") else { panic!("should be caught") };
        assert!(!refusal("p.json", "p.json", "{\"c\": 3}", &dropped).contains("call: edit_file"));
    }

    #[test]
    fn no_append_is_suggested_for_a_rewrite_or_a_copied_tool_result() {
        let old = "a = 1\nb = 2\nc = 3\nd = 4\n";
        // Keeps one line: a rewrite that lost the rest.
        let Some(dropped) = drops_most(old, "a = 1\nz = 9\n") else { panic!("should be caught") };
        let message = refusal("m.py", "m.py", "a = 1\nz = 9\n", &dropped);
        assert!(!message.contains("call: edit_file"), "{message}");
        assert!(message.contains("use edit_file with old_text = its last line"), "{message}");
        // A copy of the read_file result the model saw.
        let copied = "<tool_response>1.items = {";
        let Some(dropped) = drops_most(old, copied) else { panic!("should be caught") };
        let message = refusal("m.py", "m.py", copied, &dropped);
        assert!(!message.contains("call: edit_file"), "{message}");
        assert!(
            message.contains("Your content contains `<tool_response>`, which wraps tool results"),
            "{message}"
        );
    }
}
