//! Short, readable renderings of calls, results, durations and numbers.

use std::time::Duration;

use serde_json::Value;

/// Cuts `text` to `max` characters with an ellipsis, on one line.
pub fn clip(text: &str, max: usize) -> String {
    cut(text, max, |_| 1)
}

/// `text` on one line (whitespace runs made one space), cut with `…` to at most `max`
/// terminal columns: a wide character (CJK) takes two, so the line never wraps.
pub fn clip_columns(text: &str, max: usize) -> String {
    cut(text, max, |c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
}

/// `text` on one line, cut with `…` so that its characters, each as wide as `width`
/// says, and the ellipsis take at most `max`.
fn cut(text: &str, max: usize, width: impl Fn(char) -> usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().map(&width).sum::<usize>() <= max {
        return one_line;
    }
    let mut cut = String::new();
    let mut used = 0;
    for c in one_line.chars() {
        if used + width(c) + 1 > max {
            break;
        }
        cut.push(c);
        used += width(c);
    }
    format!("{cut}…")
}

/// The argument that says what a call does (path, command, pattern), else compact JSON.
pub fn short_args(tool: &str, arguments: &str) -> String {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) else {
        return clip(arguments, 60);
    };
    let pick = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    let main = match tool {
        "shell" => pick("command"),
        "grep" => pick("pattern").map(|p| match pick("path") {
            Some(path) => format!("{p:?} in {path}"),
            None => format!("{p:?}"),
        }),
        "glob" => pick("pattern"),
        "list_files" => Some(pick("path").unwrap_or_else(|| ".".into())),
        "task" => {
            let agent = pick("agent").unwrap_or_else(|| "general".into());
            pick("description").or_else(|| pick("prompt")).map(|about| format!("{agent}: {about}"))
        }
        _ => pick("path"),
    };
    match main {
        Some(text) => clip(&text, 60),
        None if map.is_empty() => String::new(),
        None => clip(&Value::Object(map).to_string(), 60),
    }
}

/// A one-line summary of a tool result.
pub fn short_result(tool: &str, content: &str, is_error: bool) -> String {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    if tool == "shell" {
        if let Some(code) = content.strip_prefix("(no output; exit code ").and_then(|c| c.strip_suffix(')')) {
            return format!("exit {code}");
        }
        // keel's own notes may follow the exit code (`[keel: you have now made this same
        // call …]`): the line showed `→ demo` instead of `→ exit 0: demo`.
        let code =
            lines.iter().rev().find_map(|l| l.strip_prefix("[exit code: ")).map(|c| c.trim_end_matches(']'));
        let output: Vec<&&str> = lines.iter().filter(|l| !l.starts_with('[')).collect();
        let first = output.first().map(|l| clip(l, 50)).unwrap_or_default();
        let more = if output.len() > 1 { format!(" … ({} lines)", output.len()) } else { String::new() };
        return match code {
            Some(code) if first.is_empty() => format!("exit {code}"),
            Some(code) => format!("exit {code}: {first}{more}"),
            None => format!("{first}{more}"),
        };
    }
    if !is_error && tool == "read_file" {
        let numbered = lines
            .iter()
            .filter(|l| l.trim_start().split('\t').next().is_some_and(|n| n.trim().parse::<u64>().is_ok()))
            .count();
        if numbered > 0 {
            return format!("{numbered} {}", if numbered == 1 { "line" } else { "lines" });
        }
    }
    if !is_error && tool == "list_files" {
        if lines.first().is_some_and(|l| l.contains(" is empty (")) {
            return "empty".to_owned();
        }
        let shown = lines.iter().filter(|l| !l.starts_with('[') && !l.starts_with('(')).count();
        let hidden: usize = lines
            .iter()
            .filter_map(|l| l.strip_prefix("[... ")?.split_whitespace().next()?.parse::<usize>().ok())
            .sum();
        let entries = shown + hidden;
        return format!("{entries} {}", if entries == 1 { "entry" } else { "entries" });
    }
    // "(+2 lines)" read like a diff's count: say how many lines there are in all.
    let first = lines.first().map(|l| clip(l, 70)).unwrap_or_else(|| "(empty)".into());
    if lines.len() > 1 && !is_error { format!("{first} … ({} lines)", lines.len()) } else { first }
}

/// Visible columns of `text` (plain, no escapes).
pub fn columns(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `summary` cut so that a line of `used` columns before it and `after` columns after it
/// fits `width` (a tool's line: the call, the summary, the time); left whole when there
/// would be no room worth the name.
pub fn fit_summary(summary: &str, used: usize, after: usize, width: usize) -> String {
    let room = width.saturating_sub(used + after);
    if columns(summary) <= room || room < 12 { summary.to_owned() } else { clip(summary, room) }
}

/// `parts` joined by ` · ` in lines that fit `width` columns: the first after `lead`
/// columns already used on its line, the next ones after an indent of two (which the
/// caller adds). A part wider than a line gets a line of its own.
pub fn fit_parts(lead: usize, parts: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut used = lead;
    for part in parts {
        let needed = columns(part) + if line.is_empty() { 0 } else { 3 };
        if !line.is_empty() && used + needed > width {
            lines.push(std::mem::take(&mut line));
            used = 2;
        }
        if !line.is_empty() {
            line.push_str(" · ");
            used += 3;
        }
        line.push_str(part);
        used += columns(part);
    }
    lines.push(line);
    lines
}

/// The first line of `text` on one line, with the next when it ends in a colon (what it
/// introduces): `The user declined `shell` and said instead: also summarize the log`.
pub fn first_statement(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else { return "denied".to_owned() };
    match lines.next() {
        Some(next) if first.ends_with(':') => clip(&format!("{first} {next}"), 200),
        _ => clip(first, 200),
    }
}

/// `12ms`, `1.4s`, `2m05s`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    }
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders() {
        assert_eq!(short_args("shell", r#"{"command":"python3 hello.py"}"#), "python3 hello.py");
        assert_eq!(short_args("read_file", r#"{"path":"README.md","limit":5}"#), "README.md");
        assert_eq!(short_args("grep", r#"{"pattern":"TODO","path":"src"}"#), "\"TODO\" in src");
        assert_eq!(short_args("get_weather", r#"{"city":"Oslo"}"#), r#"{"city":"Oslo"}"#);
        assert_eq!(short_args("x", "{not json"), "{not json");
        assert_eq!(short_result("shell", "hello\nworld\n[exit code: 0]", false), "exit 0: hello … (2 lines)");
        // Issue 32: "README.md (+2 lines)" read like a diff.
        assert_eq!(short_result("list_files", "README.md\nhello.py\nsrc/\n", false), "3 entries");
        let cut = "a\nb\n[... 7 more entries not shown; list a sub-folder or lower the depth]";
        assert_eq!(short_result("list_files", cut, false), "9 entries");
        assert_eq!(short_result("list_files", "src is empty (or holds only ignored files).", false), "empty");
        assert_eq!(short_result("grep", "a.py:1: x\nb.py:2: x\n", false), "a.py:1: x … (2 lines)");
        assert_eq!(short_result("shell", "(no output; exit code 1)", true), "exit 1");
        let nudged = "demo\n[exit code: 0]\n[keel: you have now made this same call 3 times in a row]";
        assert_eq!(short_result("shell", nudged, false), "exit 0: demo");
        assert_eq!(short_result("read_file", "1\ta\n2\tb\n", false), "2 lines");
        assert_eq!(short_result("read_file", "1\t# demo\n", false), "1 line", "not '1 lines'");
        assert_eq!(short_result("edit_file", "`x` does not exist.\nmore", true), "`x` does not exist.");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(clip("a  b\nc", 10), "a b c");
        assert_eq!(clip("abcdefghijkl", 5), "abcd…");
    }

    #[test]
    fn a_refusal_is_said_in_its_first_statement() {
        let declined =
            "The user declined `shell` and said instead:\nalso summarize the log\nDo what they said.";
        assert_eq!(
            first_statement(declined),
            "The user declined `shell` and said instead: also summarize the log"
        );
        let rule = "`rm -rf build` is denied by the rule shell(rm *) (config.toml).\nDo not retry it.";
        assert_eq!(first_statement(rule), "`rm -rf build` is denied by the rule shell(rm *) (config.toml).");
        assert_eq!(first_statement(""), "denied");
    }

    /// The walkthrough of issue 32: a tool's line longer than the terminal wrapped its
    /// time onto a line of its own (`…  15.4s`), and so did the summary's last parts.
    #[test]
    fn lines_fit_the_terminal() {
        let summary = "`README.md` was not changed: its new content came back the same as the old";
        let fitted = fit_summary(summary, 40, 7, 100);
        assert_eq!(columns(&fitted), 53, "{fitted}");
        assert!(fitted.ends_with('…'), "{fitted}");
        assert_eq!(fit_summary("exit 0: hello", 40, 7, 100), "exit 0: hello");
        assert_eq!(fit_summary(summary, 95, 7, 100), summary, "no room worth cutting to");
        let parts: Vec<String> =
            ["21 steps", "20 tool calls", "42,319 in (34,615 cached) · 651 out", "7m25s"]
                .map(String::from)
                .into();
        assert_eq!(
            fit_parts(0, &parts, 200),
            vec!["21 steps · 20 tool calls · 42,319 in (34,615 cached) · 651 out · 7m25s"]
        );
        let lines = fit_parts(36, &parts, 80);
        assert_eq!(lines, vec!["21 steps · 20 tool calls", "42,319 in (34,615 cached) · 651 out · 7m25s"]);
        assert!(lines.iter().all(|l| columns(l) + 36 <= 80));
    }
}
