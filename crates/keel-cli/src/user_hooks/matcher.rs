//! Which calls a hook runs for: Claude Code's `matcher`, on keel's tool names and on the
//! names Claude Code gives the same tools, so a script's `"Bash"` or `"Edit|Write"`
//! carries over.

use regex::Regex;

use crate::config::ConfigError;

/// A matcher of names (a tool's, or for `SessionStart` and `PreCompact` a source or
/// trigger).
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Empty, `*` or left out: every name.
    All,
    /// Names, `|` between them (`shell|Bash`), each matched whole.
    Names(Vec<String>),
    /// Any other text: a regular expression matched against the whole name
    /// (`mcp__github__.*`).
    Pattern(Regex),
}

impl Matcher {
    /// Reads a matcher as Claude Code does: a name, names with `|`, or a regex.
    pub fn parse(text: Option<&str>) -> Result<Matcher, ConfigError> {
        let text = text.unwrap_or("").trim();
        if text.is_empty() || text == "*" {
            return Ok(Matcher::All);
        }
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|');
        if text.chars().all(plain) {
            let names = text.split('|').filter(|n| !n.is_empty()).map(str::to_owned).collect();
            return Ok(Matcher::Names(names));
        }
        Regex::new(&format!("^(?:{text})$"))
            .map(Matcher::Pattern)
            .map_err(|e| ConfigError::new(format!("hook matcher `{text}` is not a valid regex: {e}")))
    }

    /// Whether `name` (or the name Claude Code gives the same tool) matches.
    pub fn matches(&self, name: &str) -> bool {
        let names = [Some(name), claude_name(name)];
        let one = |n: &str| match self {
            Matcher::All => true,
            Matcher::Names(names) => names.iter().any(|m| m == n),
            Matcher::Pattern(re) => re.is_match(n),
        };
        names.into_iter().flatten().any(one)
    }
}

/// The name Claude Code gives a keel tool that does the same, if it has one.
pub fn claude_name(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "shell" => "Bash",
        "read_file" => "Read",
        "write_file" => "Write",
        "edit_file" | "change_file" => "Edit",
        "grep" => "Grep",
        "glob" => "Glob",
        "list_files" => "LS",
        "web_fetch" => "WebFetch",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Matcher {
        Matcher::parse(Some(text)).unwrap()
    }

    #[test]
    fn names_alternatives_and_regexes_match_as_claude_codes_do() {
        assert!(m("").matches("shell") && m("*").matches("mcp__x__y"));
        assert!(matches!(Matcher::parse(None).unwrap(), Matcher::All));
        assert!(m("shell").matches("shell") && !m("shell").matches("shell2"));
        // Claude Code's names for keel's tools.
        assert!(m("Bash").matches("shell"));
        assert!(m("Edit|Write").matches("edit_file") && m("Edit|Write").matches("write_file"));
        assert!(m("Edit|Write").matches("change_file") && !m("Edit|Write").matches("read_file"));
        // A regex matches the whole name.
        assert!(m("mcp__github__.*").matches("mcp__github__create_issue"));
        assert!(!m("mcp__github__.*").matches("mcp__gitlab__x"));
        assert!(!m("ead_fil.").matches("read_file"));
        assert!(m("(read|write)_file").matches("write_file"));
        // MCP names keep their dashes.
        assert!(m("mcp__my-server__tool").matches("mcp__my-server__tool"));
        let bad = Matcher::parse(Some("(")).unwrap_err();
        assert!(bad.message.contains("not a valid regex"), "{}", bad.message);
    }
}
