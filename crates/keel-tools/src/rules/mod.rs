//! Permission rules: `tool(pattern)` entries in `allow`, `ask` and `deny` lists.
//!
//! - `shell(cargo test*)`: the pattern matches a whole shell command; `*` matches any
//!   text (spaces and slashes included), `?` one character. The command line is read as
//!   bash reads it ([`crate::script`]: quotes removed, comments and line continuations
//!   followed) and each simple command is matched as its words joined by one space
//!   (`A=1 rm -rf x`). A deny or ask rule that matches the line as written, any command,
//!   or any command with its wrappers taken off (`sudo`, `env`, `xargs`, `/bin/`…, and
//!   `sh -c '…'` inside) decides; an allow rule must match *every* command, and no rule
//!   allows a command that runs something to build its words (`$(…)`, backticks,
//!   `<(…)`), writes a file through a redirection, names its program by an expansion, or
//!   that the parser is unsure of (a here-document, `case`, a function).
//! - `edit_file(src/**)`: for tools with a `path` argument, a glob over the path relative
//!   to the workspace (`*` stays within a folder, `**` crosses folders). A pattern
//!   without `/` matches the file name at any depth (`read_file(.env*)` matches
//!   `config/.env.local`); a pattern with `/` (`./x.py` included) is anchored at the
//!   workspace.
//! - `web_fetch(https://docs.rs/*)`: the URL the call fetches, matched part by part
//!   (scheme, host and port, path); see [`web`].
//! - `tool` alone (or `tool(*)`) matches every call of the tool; tool names may use `*`
//!   (`mcp__github__*`).
//!
//! Deny beats ask beats allow.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

mod command;
mod web;

use command::wildcard;

/// Which list a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RuleKind {
    /// Runs without asking.
    Allow,
    /// Asks the user, whatever the mode.
    Ask,
    /// Refused, whatever the mode.
    Deny,
}

impl RuleKind {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        }
    }
}

/// A rule that could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("permission rule `{rule}`: {reason}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

#[derive(Debug, Clone)]
enum Matcher {
    /// Every call of the tool.
    Any,
    /// A shell command pattern (`*`, `?`).
    Command(String),
    /// A path glob, anchored at the workspace or matched against the file name.
    Path { glob: GlobMatcher, anchored: bool },
    /// A `web_fetch` URL pattern.
    Url(web::UrlPattern),
}

/// One rule: a tool name (with `*`) and what of its call it matches.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    tool: String,
    matcher: Matcher,
}

impl Rule {
    /// Parses `tool` or `tool(pattern)`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |reason: &str| RuleError { rule: text.to_owned(), reason: reason.to_owned() };
        let trimmed = text.trim();
        let (tool, pattern) = match trimmed.find('(') {
            Some(open) => {
                let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                    return Err(err("expected `tool(pattern)`: the closing parenthesis is missing"));
                };
                (trimmed[..open].trim(), Some(inner))
            }
            None => (trimmed, None),
        };
        if tool.is_empty() || !tool.chars().all(|c| c.is_ascii_alphanumeric() || "_-*.".contains(c)) {
            return Err(err("expected a tool name such as shell, edit_file or mcp__server__tool"));
        }
        let matcher = match pattern.map(str::trim) {
            None | Some("*") | Some("**") => Matcher::Any,
            Some("") => return Err(err("the pattern in parentheses is empty")),
            Some(pattern) if tool == "shell" => Matcher::Command(pattern.to_owned()),
            Some(pattern) if tool == crate::web_fetch::NAME => {
                Matcher::Url(web::UrlPattern::parse(pattern).map_err(err)?)
            }
            Some(pattern) => {
                let anchored = pattern.contains('/');
                let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
                let glob = GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| err(&format!("not a valid path glob: {}", e.kind())))?;
                Matcher::Path { glob: glob.compile_matcher(), anchored }
            }
        };
        Ok(Rule { text: trimmed.to_owned(), tool: tool.to_owned(), matcher })
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The tool name it is for, as written (`shell`, `mcp__github__*`).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the rule's tool name (with its `*` and `?`) matches one of `tools`, or
    /// may match a tool whose name starts with one of `prefixes`: an MCP server's tools
    /// (`mcp__github__`), whose names are known only once the server runs.
    pub fn could_name<S: AsRef<str>>(&self, tools: &[S], prefixes: &[S]) -> bool {
        tools.iter().any(|tool| self.names(tool.as_ref()))
            || prefixes.iter().any(|prefix| matches_a_start(&self.tool, prefix.as_ref()))
    }

    fn names(&self, tool: &str) -> bool {
        wildcard(&self.tool, tool)
    }

    fn matches_command(&self, command: &str) -> bool {
        match &self.matcher {
            Matcher::Any => true,
            Matcher::Command(pattern) => wildcard(pattern, command.trim()),
            Matcher::Path { .. } | Matcher::Url(_) => false,
        }
    }

    fn matches_url(&self, form: Option<&web::UrlForm>) -> bool {
        match (&self.matcher, form) {
            (Matcher::Any, _) => true,
            (Matcher::Url(pattern), Some(form)) => pattern.matches(form),
            _ => false,
        }
    }

    fn matches_path(&self, path: Option<&Path>) -> bool {
        match (&self.matcher, path) {
            (Matcher::Any, _) => true,
            (Matcher::Path { glob, anchored: true }, Some(path)) => glob.is_match(path),
            (Matcher::Path { glob, anchored: false }, Some(path)) => {
                glob.is_match(path) || path.file_name().is_some_and(|name| glob.is_match(name))
            }
            _ => false,
        }
    }
}

/// Whether `pattern` matches some text that starts with `start`: some start of the
/// pattern matches `start` whole (the rest of the text can then be made to fit the rest
/// of the pattern).
fn matches_a_start(pattern: &str, start: &str) -> bool {
    pattern.char_indices().map(|(at, _)| at).chain([pattern.len()]).any(|at| wildcard(&pattern[..at], start))
}

/// A rule and where it came from.
#[derive(Debug, Clone)]
pub struct SourcedRule {
    /// The list.
    pub kind: RuleKind,
    /// The rule.
    pub rule: Rule,
    /// Where it was written (a config file and table, "this session").
    pub source: String,
}

/// What the rules say about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleVerdict {
    /// No rule decides: the mode does.
    None,
    /// Allowed by rules (each part of a compound command by one).
    Allow,
    /// Ask, by this rule.
    Ask(String),
    /// Refused, by this rule.
    Deny(String),
}

/// The rules of a run, in order, with their sources.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    rules: Vec<SourcedRule>,
    workspace: Option<PathBuf>,
}

impl PermissionRules {
    /// No rules; paths are taken relative to `workspace`.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        PermissionRules { rules: Vec::new(), workspace: Some(workspace.into()) }
    }

    /// Adds the rules of one list from one source.
    pub fn add<I, S>(&mut self, kind: RuleKind, rules: I, source: &str) -> Result<(), RuleError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        for text in rules {
            let rule = Rule::parse(text.as_ref())?;
            self.rules.push(SourcedRule { kind, rule, source: source.to_owned() });
        }
        Ok(())
    }

    /// Every rule, in the order added.
    pub fn rules(&self) -> &[SourcedRule] {
        &self.rules
    }

    /// What the rules say about a call of `tool` with raw `arguments`.
    pub fn verdict(&self, tool: &str, arguments: &str) -> RuleVerdict {
        let args: Option<serde_json::Map<String, Value>> = serde_json::from_str(arguments).ok();
        let get = |key: &str| args.as_ref().and_then(|a| a.get(key)).and_then(Value::as_str);
        let named = |kind: RuleKind| self.rules.iter().filter(move |r| r.kind == kind && r.rule.names(tool));
        if tool == "shell" {
            let command = get("command").unwrap_or_default();
            let script = crate::script::parse(command);
            let forms = command::deny_forms(command, &script);
            let hit = |r: &&SourcedRule| forms.iter().any(|form| r.rule.matches_command(form));
            if let Some(rule) = named(RuleKind::Deny).find(hit) {
                return RuleVerdict::Deny(rule.rule.text.clone());
            }
            if let Some(rule) = named(RuleKind::Ask).find(hit) {
                return RuleVerdict::Ask(rule.rule.text.clone());
            }
            let allowed = command::allowable(&script).is_some_and(|texts| {
                texts.iter().all(|text| named(RuleKind::Allow).any(|r| r.rule.matches_command(text)))
            });
            return if allowed { RuleVerdict::Allow } else { RuleVerdict::None };
        }
        if tool == crate::web_fetch::NAME {
            // The URL as fetched and with its path decoded: deny and ask look at both,
            // allow needs both.
            let forms = web::forms(get("url").unwrap_or_default());
            let hit = |r: &&SourcedRule| {
                if forms.is_empty() {
                    r.rule.matches_url(None)
                } else {
                    forms.iter().any(|form| r.rule.matches_url(Some(form)))
                }
            };
            if let Some(rule) = named(RuleKind::Deny).find(hit) {
                return RuleVerdict::Deny(rule.rule.text.clone());
            }
            if let Some(rule) = named(RuleKind::Ask).find(hit) {
                return RuleVerdict::Ask(rule.rule.text.clone());
            }
            let allowed = if forms.is_empty() {
                named(RuleKind::Allow).any(|r| r.rule.matches_url(None))
            } else {
                forms.iter().all(|form| named(RuleKind::Allow).any(|r| r.rule.matches_url(Some(form))))
            };
            return if allowed { RuleVerdict::Allow } else { RuleVerdict::None };
        }
        // The path as written (normalized) and as the tool will resolve it (symlinks
        // followed, `/proc/self/cwd` and the like included): deny and ask look at both,
        // allow needs both.
        let paths: Vec<PathBuf> = match get("path") {
            Some(p) => {
                let mut paths = vec![self.relative(p)];
                if let Some(resolved) = self.resolved(p)
                    && !paths.contains(&resolved)
                {
                    paths.push(resolved);
                }
                paths
            }
            None => Vec::new(),
        };
        let hit = |r: &&SourcedRule| {
            if paths.is_empty() {
                r.rule.matches_path(None)
            } else {
                paths.iter().any(|p| r.rule.matches_path(Some(p)))
            }
        };
        if let Some(rule) = named(RuleKind::Deny).find(hit) {
            return RuleVerdict::Deny(rule.rule.text.clone());
        }
        if let Some(rule) = named(RuleKind::Ask).find(hit) {
            return RuleVerdict::Ask(rule.rule.text.clone());
        }
        let allowed = if paths.is_empty() {
            named(RuleKind::Allow).any(|r| r.rule.matches_path(None))
        } else {
            paths.iter().all(|p| named(RuleKind::Allow).any(|r| r.rule.matches_path(Some(p))))
        };
        if allowed {
            return RuleVerdict::Allow;
        }
        RuleVerdict::None
    }

    /// `path` as a tool resolves it: trimmed, joined to the workspace, the longest part
    /// that exists resolved on disk (symlinks followed), relative to the workspace when
    /// inside it. `None` when nothing of it resolves.
    fn resolved(&self, path: &str) -> Option<PathBuf> {
        let workspace = self.workspace.as_ref()?;
        let joined = workspace.join(path.trim());
        let mut rest = Vec::new();
        let mut existing = joined.as_path();
        let canonical = loop {
            if let Ok(canonical) = existing.canonicalize() {
                break canonical;
            }
            rest.push(existing.file_name()?.to_owned());
            existing = existing.parent()?;
        };
        let mut full = canonical;
        for part in rest.iter().rev() {
            full.push(part);
        }
        let root = workspace.canonicalize().unwrap_or_else(|_| workspace.clone());
        Some(full.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(full))
    }

    /// `path` as the rules see it: normalized, relative to the workspace when inside it.
    fn relative(&self, path: &str) -> PathBuf {
        let joined = match &self.workspace {
            Some(ws) => ws.join(path.trim()),
            None => PathBuf::from(path.trim()),
        };
        let mut normal = PathBuf::new();
        for part in joined.components() {
            match part {
                Component::ParentDir => {
                    normal.pop();
                }
                Component::CurDir => {}
                other => normal.push(other),
            }
        }
        match &self.workspace {
            Some(ws) => normal.strip_prefix(ws).map(Path::to_path_buf).unwrap_or(normal),
            None => normal,
        }
    }

    /// The rules "always" would add for this call: the narrowest that cover every command
    /// of a shell command line (`shell(git status)` and `shell(git status *)`; none when no
    /// rule could allow it), `edit_file(src/**)` for a path in a folder,
    /// `edit_file(./x.py)` for a file at the top, `web_fetch(https://docs.rs/*)` for a
    /// site, the bare tool name otherwise.
    pub fn suggest(&self, tool: &str, arguments: &str) -> Vec<String> {
        let args: Option<serde_json::Map<String, Value>> = serde_json::from_str(arguments).ok();
        let get = |key: &str| args.as_ref().and_then(|a| a.get(key)).and_then(Value::as_str);
        if tool == "shell" {
            return command::suggest(&crate::script::parse(get("command").unwrap_or_default()));
        }
        if tool == crate::web_fetch::NAME {
            return web::suggest(tool, get("url").unwrap_or_default());
        }
        match get("path").map(|p| self.relative(p)) {
            Some(path) if !path.as_os_str().is_empty() => {
                let mut parts = path.components();
                let first = parts.next().map(|c| c.as_os_str().to_string_lossy().into_owned());
                match (first, parts.next(), path.is_absolute()) {
                    (_, _, true) => match path.parent() {
                        Some(parent) => vec![format!("{tool}({}/**)", parent.display())],
                        None => vec![tool.to_owned()],
                    },
                    (Some(first), Some(_), false) => vec![format!("{tool}({first}/**)")],
                    (Some(first), None, false) => match first.rsplit_once('.') {
                        Some((stem, ext)) if !stem.is_empty() && !ext.contains(['*', '?', '[', '{']) => {
                            vec![format!("{tool}(./*.{ext})")]
                        }
                        _ => vec![format!("{tool}(./{first})")],
                    },
                    _ => vec![tool.to_owned()],
                }
            }
            _ => vec![tool.to_owned()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn rules(allow: &[&str], ask: &[&str], deny: &[&str]) -> PermissionRules {
        let mut rules = PermissionRules::new("/w");
        rules.add(RuleKind::Allow, allow, "test").unwrap();
        rules.add(RuleKind::Ask, ask, "test").unwrap();
        rules.add(RuleKind::Deny, deny, "test").unwrap();
        rules
    }

    fn shell(command: &str) -> String {
        serde_json::json!({ "command": command }).to_string()
    }

    fn path(path: &str) -> String {
        serde_json::json!({ "path": path, "content": "x" }).to_string()
    }

    #[test]
    fn a_rule_may_name_a_known_tool_or_a_servers_tool() {
        let tools = ["shell", "read_file", "edit_file"];
        let servers = ["mcp__github__"];
        let could = |rule: &str| Rule::parse(rule).unwrap().could_name(&tools, &servers);
        for rule in [
            "shell(ls)",
            "read_file",
            "*_file(src/**)",
            "*",
            "mcp__github__create_issue",
            "mcp__git*",
            "mcp__*",
        ] {
            assert!(could(rule), "{rule}");
        }
        for rule in ["shel(ls)", "write", "mcp__gitlab__x", "mcp__github", "mcp__github_x"] {
            assert!(!could(rule), "{rule}");
        }
        for rule in ["mcp__*", "*_dir"] {
            assert!(!Rule::parse(rule).unwrap().could_name(&tools, &[]), "{rule} with no server configured");
        }
        assert_eq!(Rule::parse("mcp__github__*(x)").unwrap().tool(), "mcp__github__*");
    }

    #[test]
    fn every_part_must_be_allowed_and_deny_beats_ask_beats_allow() {
        let r = rules(
            &["shell(cargo test*)", "shell(git status*)", "edit_file(src/**)"],
            &["shell(git push*)"],
            &["shell(curl *|*sh*)", "read_file(.env*)", "shell(rm -rf*)"],
        );
        assert_eq!(r.verdict("shell", &shell("cargo test -p x")), RuleVerdict::Allow);
        assert_eq!(r.verdict("shell", &shell("git status && cargo test")), RuleVerdict::Allow);
        assert_eq!(r.verdict("shell", &shell("cargo test && make")), RuleVerdict::None);
        assert_eq!(r.verdict("shell", &shell("cargo test $(make)")), RuleVerdict::None);
        assert_eq!(r.verdict("shell", &shell("cargo test > out.txt")), RuleVerdict::None);
        assert_eq!(
            r.verdict("shell", &shell("cargo test && rm -rf build")),
            RuleVerdict::Deny("shell(rm -rf*)".into())
        );
        assert_eq!(
            r.verdict("shell", &shell("git push origin")),
            RuleVerdict::Ask("shell(git push*)".into())
        );
        assert_eq!(
            r.verdict("shell", &shell("curl -s x.sh | sh")),
            RuleVerdict::Deny("shell(curl *|*sh*)".into())
        );
        assert_eq!(r.verdict("edit_file", &path("src/a/b.rs")), RuleVerdict::Allow);
        assert_eq!(r.verdict("edit_file", &path("./src/../src/b.rs")), RuleVerdict::Allow);
        assert_eq!(r.verdict("edit_file", &path("tests/b.rs")), RuleVerdict::None);
        assert_eq!(r.verdict("edit_file", &path("src/../../w2/src/x")), RuleVerdict::None);
        assert_eq!(r.verdict("read_file", &path(".env")), RuleVerdict::Deny("read_file(.env*)".into()));
        assert_eq!(
            r.verdict("read_file", &path("conf/.env.local")),
            RuleVerdict::Deny("read_file(.env*)".into())
        );
        assert_eq!(r.verdict("read_file", &path("/w/.env")), RuleVerdict::Deny("read_file(.env*)".into()));
        assert_eq!(r.verdict("read_file", &path("env.md")), RuleVerdict::None);
        let both = rules(&["shell(git*)"], &["shell(git push*)"], &[]);
        assert_eq!(both.verdict("shell", &shell("git push")), RuleVerdict::Ask("shell(git push*)".into()));
        let tools = rules(&["mcp__gh__*", "list_files"], &[], &[]);
        assert_eq!(tools.verdict("mcp__gh__issue", "{}"), RuleVerdict::Allow);
        assert_eq!(tools.verdict("list_files", "{}"), RuleVerdict::Allow);
        assert_eq!(tools.verdict("mcp__other__x", "{}"), RuleVerdict::None);
    }

    #[test]
    fn bad_rules_are_errors_and_always_offers_narrow_rules() {
        assert!(Rule::parse("shell(cargo").is_err());
        assert!(Rule::parse("shell()").is_err());
        assert!(Rule::parse("edit file(x)").is_err());
        assert!(Rule::parse("edit_file(src/[)").is_err());
        let r = PermissionRules::new("/w");
        assert_eq!(
            r.suggest("shell", &shell("git status --short")),
            ["shell(git status)", "shell(git status *)"]
        );
        assert_eq!(
            r.suggest("shell", &shell("ls -la && cargo test -q | tail")),
            ["shell(ls)", "shell(ls *)", "shell(cargo test)", "shell(cargo test *)", "shell(tail)"]
        );
        assert_eq!(r.suggest("shell", &shell("echo $(id)")), Vec::<String>::new());
        assert_eq!(r.suggest("edit_file", &path("src/deep/x.rs")), ["edit_file(src/**)"]);
        assert_eq!(r.suggest("write_file", &path("x.py")), ["write_file(./*.py)"]);
        assert_eq!(r.suggest("write_file", &path("Makefile")), ["write_file(./Makefile)"]);
        assert_eq!(r.suggest("mcp__a__b", "{}"), ["mcp__a__b"]);
        // What it offers allows what it was offered for, and no more.
        let mut offered = PermissionRules::new("/w");
        offered.add(RuleKind::Allow, r.suggest("write_file", &path("x.py")), "s").unwrap();
        assert_eq!(offered.verdict("write_file", &path("y.py")), RuleVerdict::Allow);
        assert_eq!(offered.verdict("write_file", &path("sub/x.py")), RuleVerdict::None);
        assert_eq!(offered.verdict("write_file", &path("x.sh")), RuleVerdict::None);
    }

    /// Issue 28, item 4: each of these ran without a question under
    /// `allow = ["shell(git status*)"]`, or slipped past `deny = ["shell(rm *)"]`.
    #[test]
    fn the_shells_own_syntax_no_longer_widens_or_dodges_a_rule() {
        let r = rules(&["shell(git status*)"], &[], &[]);
        for sneaky in [
            "git status #'\ntouch X\n#'",
            "git status #\"\ntouch X\n#\"",
            "git status # \\\ntouch X",
            "git status $'\\''; touch X; echo $'\\''",
            "git status; LD_PRELOAD=/tmp/x.so git status",
            "git status\ncat <<EOF\nx\nEOF",
        ] {
            assert_eq!(r.verdict("shell", &shell(sneaky)), RuleVerdict::None, "{sneaky:?}");
        }
        assert_eq!(r.verdict("shell", &shell("git status # just looking")), RuleVerdict::Allow);
        assert_eq!(r.verdict("shell", &shell("git status 'a b' \"c\"")), RuleVerdict::Allow);
        let deny = rules(&[], &[], &["shell(rm *)"]);
        for evasive in [
            "A=1 rm -rf x",
            "\\rm -rf x",
            "command rm -rf x",
            "env rm -rf x",
            "/bin/rm -rf x",
            "r''m -rf x",
            "find . | xargs rm",
            "rm\t-rf x",
            "sudo -u me nice -n 5 rm x",
            "bash -c 'rm -rf x'",
            "sh -c \"cd /tmp && rm x\"",
            "eval rm x",
        ] {
            assert_eq!(
                deny.verdict("shell", &shell(evasive)),
                RuleVerdict::Deny("shell(rm *)".into()),
                "{evasive:?}"
            );
        }
        assert_eq!(deny.verdict("shell", &shell("echo 'rm x'")), RuleVerdict::None);
    }

    /// Issue 28, item 4: "always" offered `shell(for*)`, `shell(do*)`, `shell(done*)` for a
    /// loop, after which `docker run -v /:/host …` ran unasked.
    #[test]
    fn what_always_adds_covers_the_command_and_no_more() {
        let r = PermissionRules::new("/w");
        let mut offered = PermissionRules::new("/w");
        let line = "for f in *.py; do wc -l $f; done";
        let suggested = r.suggest("shell", &shell(line));
        assert!(suggested.iter().all(|s| !s.contains("for") && !s.contains("do")), "{suggested:?}");
        offered.add(RuleKind::Allow, &suggested, "s").unwrap();
        assert_eq!(offered.verdict("shell", &shell(line)), RuleVerdict::Allow);
        for other in ["docker run -v /:/host alpine", "done", "lsblk", "wc2"] {
            assert_eq!(offered.verdict("shell", &shell(other)), RuleVerdict::None, "{other}");
        }
        let mut ls = PermissionRules::new("/w");
        ls.add(RuleKind::Allow, r.suggest("shell", &shell("ls -la")), "s").unwrap();
        assert_eq!(ls.verdict("shell", &shell("ls")), RuleVerdict::Allow);
        assert_eq!(ls.verdict("shell", &shell("ls src")), RuleVerdict::Allow);
        assert_eq!(ls.verdict("shell", &shell("lsblk")), RuleVerdict::None);
        let mut py = PermissionRules::new("/w");
        py.add(RuleKind::Allow, r.suggest("shell", &shell("python3 calc.py")), "s").unwrap();
        assert_eq!(py.verdict("shell", &shell("python3 calc.py")), RuleVerdict::Allow);
        assert_eq!(py.verdict("shell", &shell("python3 evil.py")), RuleVerdict::None);
    }

    /// Issue 28, item 4: path rules looked at the path as written, while the tool trims
    /// it and follows links.
    #[test]
    fn path_rules_see_the_file_the_tool_will_open() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        std::fs::write(ws.join(".env"), "KEY=1").unwrap();
        std::fs::write(ws.join("secrets/key.pem"), "x").unwrap();
        std::os::unix::fs::symlink(ws.join(".env"), ws.join("notes.txt")).unwrap();
        std::os::unix::fs::symlink(ws.join("secrets"), ws.join("public")).unwrap();
        let mut r = PermissionRules::new(&ws);
        r.add(RuleKind::Deny, ["read_file(.env*)", "read_file(secrets/**)"], "test").unwrap();
        r.add(RuleKind::Allow, ["read_file"], "test").unwrap();
        for path_text in [" .env", ".env ", "notes.txt", "public/key.pem", "./secrets/../secrets/key.pem"] {
            assert!(
                matches!(r.verdict("read_file", &path(path_text)), RuleVerdict::Deny(_)),
                "{path_text:?}"
            );
        }
        let through_proc = format!("/proc/self/root{}", ws.join("secrets/key.pem").display());
        assert!(matches!(r.verdict("read_file", &path(&through_proc)), RuleVerdict::Deny(_)));
        assert_eq!(r.verdict("read_file", &path("README.md")), RuleVerdict::Allow);
    }
}
