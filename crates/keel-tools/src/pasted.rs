//! Text from the conversation given as a file's content: a diff, or a tool call. Small
//! models copied the diff that edit_file shows after an edit into a write_file call,
//! which replaced the file they had just fixed with the diff text (config.toml holding
//! `--- config.toml`, `@@ -4,5 +4,5 @@`, …), and wrote a call such as
//! `{{"name": "reverse_words", "arguments": {}}}` as a Python file's content, again and
//! again.

/// File kinds where a diff is the content.
const DIFF_EXTENSIONS: &[&str] = &["diff", "patch"];

/// What a write_file content that is a unified diff means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffContent {
    /// The file already has every line the diff adds and none it removes: the change
    /// was made (usually by the edit whose diff was copied).
    AlreadyMade,
    /// The file does not have the change; the diff is still not its text.
    NotMade,
}

/// `Some` when `content` is a unified diff (a header or hunk first, and a hunk header
/// `@@ -a,b +c,d @@`) and `path` is not a `.diff`/`.patch` file; `current` reads the
/// file's text now, when it exists (called only for a diff).
pub fn diff(path: &str, content: &str, current: impl FnOnce() -> Option<String>) -> Option<DiffContent> {
    let extension = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
    if DIFF_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(extension)) {
        return None;
    }
    let first = content.lines().find(|line| !line.trim().is_empty())?;
    let opens_like_a_diff = ["--- ", "+++ ", "diff --git ", "@@ -"].iter().any(|p| first.starts_with(p));
    if !opens_like_a_diff || !content.lines().any(is_hunk_header) {
        return None;
    }
    let Some(current) = current() else { return Some(DiffContent::NotMade) };
    let has = |line: &str| current.lines().any(|l| l.trim_end() == line.trim_end());
    let body = content.lines().filter(|l| !l.starts_with("+++ ") && !l.starts_with("--- "));
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for line in body {
        if let Some(new) = line.strip_prefix('+') {
            added.push(new);
        } else if let Some(old) = line.strip_prefix('-') {
            removed.push(old);
        }
    }
    // A line both removed and added (moved, or only whitespace changed) says nothing.
    removed.retain(|old| !added.iter().any(|new| new.trim_end() == old.trim_end()));
    let made = !(added.is_empty() && removed.is_empty())
        && added.iter().all(|line| has(line))
        && removed.iter().all(|line| line.trim().is_empty() || !has(line));
    Some(if made { DiffContent::AlreadyMade } else { DiffContent::NotMade })
}

/// `@@ -4,5 +4,5 @@` (counts optional), anything after.
fn is_hunk_header(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("@@ -") else { return false };
    let Some((old, rest)) = rest.split_once(" +") else { return false };
    let Some((new, _)) = rest.split_once(" @@") else { return false };
    let range = |r: &str| {
        let mut parts = r.splitn(2, ',');
        parts.next().is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            && parts.next().is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    range(old) && range(new)
}

/// The report for write_file: not an error when the change is already there (the model
/// repeats a change it made), else an error saying what write_file takes.
pub fn diff_report(shown: &str, verdict: &DiffContent) -> String {
    match verdict {
        DiffContent::AlreadyMade => format!(
            "No change needed: `{shown}` already has the change your diff shows, so it was left as it is. (write_file takes the whole text of a file, not a diff.)"
        ),
        DiffContent::NotMade => format!(
            "`{shown}` was not changed: your content is a diff, not the file's text. To change part of the file, call edit_file with old_text copied from the file and new_text; write_file takes the complete new text."
        ),
    }
}

/// File kinds where a `{"name": …, "arguments": …}` object may be data.
const DATA_EXTENSIONS: &[&str] = &["json", "jsonl", "ndjson"];

/// Most characters of a pasted call quoted back.
const MAX_QUOTED_CALL: usize = 60;

/// The tool call in the model's format that `content` (write_file's content or
/// edit_file's new_text) for `path` is, or has as a line: a whole JSON object with just
/// `name` and `arguments`, or a line opening with `{{"name":` (the doubled braces of
/// Qwen2.5's format example). Data files are exempt.
pub fn call_in<'a>(path: &str, content: &'a str) -> Option<&'a str> {
    let extension = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
    if DATA_EXTENSIONS.iter().any(|e| e.eq_ignore_ascii_case(extension)) {
        return None;
    }
    let whole = content.trim();
    if is_call_object(whole) {
        return Some(whole);
    }
    content.lines().map(str::trim).find(|line| {
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        compact.starts_with("{{\"name\":")
    })
}

/// The refusal for a change to `shown` whose text holds `call` (see [`call_in`]).
pub fn call_refusal(shown: &str, call: &str) -> String {
    let quoted: String = call.chars().take(MAX_QUOTED_CALL).collect();
    let cut = if quoted.len() < call.len() { "…" } else { "" };
    format!(
        "`{shown}` was not changed: your text holds a tool call (`{quoted}{cut}`), which is not text for a file. Put the file's own text there (for a code file, the code itself); to use a tool, call it."
    )
}

/// A JSON object whose keys are exactly `name` (a string) and `arguments`.
fn is_call_object(text: &str) -> bool {
    if !text.starts_with('{') || !text.ends_with('}') {
        return false;
    }
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
        Ok(object) => {
            object.len() == 2
                && object.get("name").is_some_and(|n| n.is_string())
                && object.contains_key("arguments")
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "--- config.toml\n@@ -4,5 +4,5 @@\n [server]\n host = \"127.0.0.1\"\n-port = 3000\n+port = 8080\n workers = 4\n";

    #[test]
    fn a_copied_diff_is_recognised_and_whether_its_change_is_made() {
        let fixed = "[server]\nhost = \"127.0.0.1\"\nport = 8080\nworkers = 4\n";
        let unfixed = "[server]\nhost = \"127.0.0.1\"\nport = 3000\nworkers = 4\n";
        assert_eq!(diff("config.toml", DIFF, || Some(fixed.to_owned())), Some(DiffContent::AlreadyMade));
        assert_eq!(diff("config.toml", DIFF, || Some(unfixed.to_owned())), Some(DiffContent::NotMade));
        assert_eq!(diff("config.toml", DIFF, || None), Some(DiffContent::NotMade));
        assert_eq!(diff("fix.patch", DIFF, || None), None);
        assert_eq!(diff("FIX.DIFF", DIFF, || None), None);
    }

    #[test]
    fn text_that_only_looks_a_little_like_a_diff_is_content() {
        // Markdown with a rule, a list and an @@ that is not a hunk header.
        assert_eq!(diff("notes.md", "--- \n- item\n+ plus\n@@ -x +y @@\n", || None), None);
        // A hunk header, but the content opens with text.
        assert_eq!(diff("notes.txt", "Changes:\n@@ -1,2 +1,2 @@\n-a\n+b\n", || None), None);
        assert!(is_hunk_header("@@ -1 +1 @@"));
        assert!(is_hunk_header("@@ -10,7 +10,8 @@ fn main() {"));
        assert!(!is_hunk_header("@@ -1, +1 @@"));
        assert!(!is_hunk_header("@@ -a,1 +1,1 @@"));
    }

    #[test]
    fn a_tool_call_as_content_is_refused_outside_data_files() {
        let doubled = "{{\"name\": \"reverse_words\", \"arguments\": {}}}";
        assert_eq!(call_in("textutil.py", doubled), Some(doubled));
        assert_eq!(
            call_refusal("textutil.py", doubled),
            "`textutil.py` was not changed: your text holds a tool call (`{{\"name\": \"reverse_words\", \"arguments\": {}}}`), which is not text for a file. Put the file's own text there (for a code file, the code itself); to use a tool, call it."
        );
        // After real lines, as edit_file's new_text.
        let appended = format!("    return len(text.split())\n\n{doubled}");
        assert_eq!(call_in("textutil.py", &appended), Some(doubled));
        // A single-brace call object as the whole content; long ones are cut.
        let single =
            format!("{{\"name\": \"read_file\", \"arguments\": {{\"path\": \"{}\"}}}}", "a".repeat(80));
        let refusal = call_refusal("report.py", call_in("report.py", &single).unwrap());
        assert!(refusal.contains("aaaa…`)"), "{refusal}");
        // Data, and code that merely mentions the keys, are content.
        assert_eq!(call_in("calls.json", &single), None);
        assert_eq!(call_in("t.py", "calls = [{\"name\": \"f\", \"arguments\": {}}]\n"), None);
        assert_eq!(call_in("t.py", "{\"name\": \"x\", \"arguments\": {}, \"id\": 1}"), None);
    }
}
