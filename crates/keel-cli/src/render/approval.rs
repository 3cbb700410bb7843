//! The permission question: everything the user approves, shown whole.
//!
//! Nothing is cut: a command is shown in full, one line per line of it, with control
//! and escape characters made visible, so what looks harmless on screen is what runs.

use serde_json::Value;

/// `text` with control characters (other than newline) and terminal escapes visible:
/// tab as `\t`, ESC as `\e`, others as `\xNN`, and bidirectional-override characters as
/// `\u{…}`.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            // Characters that reorder or hide text on a terminal.
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The lines of a permission question for a call of `tool` with raw `arguments`,
/// working in `folder`.
pub fn question(tool: &str, arguments: &str, folder: &str) -> Vec<String> {
    let parsed: Option<serde_json::Map<String, Value>> = serde_json::from_str(arguments).ok();
    let mut lines = vec![format!("  allow {tool}?")];
    let indent = |text: &str, lines: &mut Vec<String>| {
        for line in visible(text).split('\n') {
            lines.push(format!("    {line}"));
        }
    };
    match (tool, &parsed) {
        ("shell", Some(args)) if args.get("command").and_then(Value::as_str).is_some() => {
            indent(args.get("command").and_then(Value::as_str).unwrap_or_default(), &mut lines);
            let workdir = args.get("workdir").and_then(Value::as_str).unwrap_or(".");
            lines.push(format!(
                "    in {folder}{}",
                if workdir == "." { String::new() } else { format!(" / {}", visible(workdir)) }
            ));
        }
        (_, Some(args)) => {
            for (key, value) in args {
                match value {
                    Value::String(text) if text.contains('\n') => {
                        lines.push(format!("    {key}:"));
                        indent(text, &mut lines);
                    }
                    Value::String(text) => lines.push(format!("    {key}: {}", visible(text))),
                    other => lines.push(format!("    {key}: {}", visible(&other.to_string()))),
                }
            }
        }
        (_, None) => indent(arguments, &mut lines),
    }
    lines.push("  [y]es  [a]lways  [n]o  [s]top  (Enter: no)".to_owned());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_long_command_is_shown_whole_with_escapes_visible() {
        let long = format!("echo '{}'; touch PWNED", "running the unit tests ".repeat(14));
        let args = serde_json::json!({"command": long}).to_string();
        let lines = question("shell", &args, "/w");
        assert_eq!(lines[0], "  allow shell?");
        assert_eq!(lines[1], format!("    {long}"));
        assert!(lines[1].len() > 300 && lines[1].ends_with("; touch PWNED"));
        assert_eq!(lines[2], "    in /w");
        let tricky = serde_json::json!({"command": "ls\u{1b}[2K\rrm -rf x\ttab\u{202e}"}).to_string();
        let lines = question("shell", &tricky, "/w");
        assert_eq!(lines[1], "    ls\\e[2K\\rrm -rf x\\ttab\\u{202e}");
    }

    #[test]
    fn other_tools_show_every_argument_and_multiline_text_as_lines() {
        let args = serde_json::json!({"path": "a.py", "content": "x = 1\nprint(x)"}).to_string();
        assert_eq!(
            question("write_file", &args, "/w"),
            vec![
                "  allow write_file?",
                "    path: a.py",
                "    content:",
                "    x = 1",
                "    print(x)",
                "  [y]es  [a]lways  [n]o  [s]top  (Enter: no)"
            ]
        );
        assert_eq!(question("x", "not json", "/w")[1], "    not json");
    }
}
