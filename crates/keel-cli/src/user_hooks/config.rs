//! The `[hooks]` table: Claude Code's hook settings written in TOML,
//! `[[hooks.EVENT]]` with a `matcher` and `hooks = [{ type = "command", command = …,
//! timeout = … }]`, checked and compiled once when the config is read.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::matcher::Matcher;
use crate::config::ConfigError;

/// A hook's timeout when it names none, as Claude Code's.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The events keel runs hooks for, by Claude Code's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// Before a call runs: allow, deny (the model gets the reason) or ask.
    PreToolUse,
    /// After a call ran: context for the model, or feedback it gets.
    PostToolUse,
    /// Before a prompt is sent: block it, or add context.
    UserPromptSubmit,
    /// When a turn would end: go on, with a reason the model gets.
    Stop,
    /// Before a session's first prompt in this keel: context for the model.
    SessionStart,
    /// Before a compaction: told only.
    PreCompact,
}

impl Event {
    /// Every event, in the order the README lists them.
    pub const ALL: [Event; 6] = [
        Event::SessionStart,
        Event::UserPromptSubmit,
        Event::PreToolUse,
        Event::PostToolUse,
        Event::Stop,
        Event::PreCompact,
    ];

    /// The event's name in the config and in a hook's input (`hook_event_name`).
    pub fn as_str(self) -> &'static str {
        match self {
            Event::PreToolUse => "PreToolUse",
            Event::PostToolUse => "PostToolUse",
            Event::UserPromptSubmit => "UserPromptSubmit",
            Event::Stop => "Stop",
            Event::SessionStart => "SessionStart",
            Event::PreCompact => "PreCompact",
        }
    }

    /// Every event's name.
    pub fn names() -> Vec<&'static str> {
        Event::ALL.iter().map(|e| e.as_str()).collect()
    }
}

/// `[[hooks.EVENT]]`: commands for the names a matcher takes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatcherGroup {
    /// Tool names for the tool events (`shell`, `Bash|Edit`, `mcp__github__.*`), the
    /// source for `SessionStart` (`startup`, `resume`), the trigger for `PreCompact`
    /// (`manual`, `auto`); empty, `*` or left out: all. Not read for the others.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The commands.
    pub hooks: Vec<HookCommand>,
}

/// One hook: `{ type = "command", command = "…", timeout = 30 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCommand {
    /// `command` (the only kind keel runs).
    #[serde(rename = "type")]
    pub kind: String,
    /// A bash command line, run in the project folder with the event as JSON on stdin.
    pub command: String,
    /// Seconds before it is stopped (default 60).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// The `[hooks]` table as written: groups by event name.
pub type HooksTable = BTreeMap<String, Vec<MatcherGroup>>;

/// A hook command ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The command line.
    pub command: String,
    /// When it is stopped.
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
struct Group {
    matcher: Matcher,
    commands: Vec<Command>,
}

/// The hooks of the config, checked: the commands by event.
#[derive(Debug, Clone, Default)]
pub struct HookSet {
    groups: BTreeMap<Event, Vec<Group>>,
}

impl HookSet {
    /// Checks and compiles `table`: known events (else the nearest name), `type =
    /// "command"`, a command, a timeout of at least a second, matchers that parse.
    pub fn compile(table: &HooksTable) -> Result<HookSet, ConfigError> {
        let mut set = HookSet::default();
        for (name, groups) in table {
            let Some(event) = Event::ALL.into_iter().find(|e| e.as_str() == name) else {
                let names = Event::names();
                let near = crate::near::nearest(name, &names).map_or_else(
                    || format!("; events: {}", names.join(", ")),
                    |n| format!(" (did you mean `{n}`?)"),
                );
                return Err(ConfigError::new(format!("[hooks]: unknown event `{name}`{near}")));
            };
            for group in groups {
                let matcher = Matcher::parse(group.matcher.as_deref())?;
                let commands = group.hooks.iter().map(|h| command(name, h)).collect::<Result<_, _>>()?;
                set.groups.entry(event).or_default().push(Group { matcher, commands });
            }
        }
        Ok(set)
    }

    /// Whether no hook is configured.
    pub fn is_empty(&self) -> bool {
        self.groups.values().all(|groups| groups.iter().all(|g| g.commands.is_empty()))
    }

    /// The commands for `event` whose matcher takes `name` (every group's when `name` is
    /// `None`), each command line once, in the config's order.
    pub fn commands(&self, event: Event, name: Option<&str>) -> Vec<&Command> {
        let mut found: Vec<&Command> = Vec::new();
        for group in self.groups.get(&event).into_iter().flatten() {
            if name.is_some_and(|name| !group.matcher.matches(name)) {
                continue;
            }
            for command in &group.commands {
                if !found.iter().any(|c| c.command == command.command) {
                    found.push(command);
                }
            }
        }
        found
    }
}

fn command(event: &str, hook: &HookCommand) -> Result<Command, ConfigError> {
    if hook.kind != "command" {
        return Err(ConfigError::new(format!(
            "[hooks] {event}: hook type `{}` is not one keel runs (only `command`)",
            hook.kind
        )));
    }
    if hook.command.trim().is_empty() {
        return Err(ConfigError::new(format!("[hooks] {event}: a hook's command is empty")));
    }
    let timeout = match hook.timeout {
        Some(0) => {
            return Err(ConfigError::new(format!("[hooks] {event}: a timeout must be at least 1 second")));
        }
        Some(seconds) => Duration::from_secs(seconds),
        None => DEFAULT_TIMEOUT,
    };
    Ok(Command { command: hook.command.clone(), timeout })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn table(text: &str) -> HooksTable {
        #[derive(Deserialize)]
        struct File {
            hooks: HooksTable,
        }
        toml::from_str::<File>(text).unwrap().hooks
    }

    #[test]
    fn the_toml_form_of_claude_codes_settings_compiles() {
        let set = HookSet::compile(&table(
            r#"
            [[hooks.PreToolUse]]
            matcher = "Bash"
            hooks = [{ type = "command", command = "check.sh", timeout = 5 }, { type = "command", command = "log.sh" }]

            [[hooks.PreToolUse]]
            matcher = "mcp__.*"
            hooks = [{ type = "command", command = "log.sh" }]

            [[hooks.Stop]]
            hooks = [{ type = "command", command = "tests.sh" }]
            "#,
        ))
        .unwrap();
        assert!(!set.is_empty());
        let shell: Vec<(&str, u64)> = set
            .commands(Event::PreToolUse, Some("shell"))
            .iter()
            .map(|c| (&*c.command, c.timeout.as_secs()))
            .collect();
        assert_eq!(shell, [("check.sh", 5), ("log.sh", 60)]);
        let mcp: Vec<&str> =
            set.commands(Event::PreToolUse, Some("mcp__x__y")).iter().map(|c| &*c.command).collect();
        assert_eq!(mcp, ["log.sh"]);
        assert!(set.commands(Event::PreToolUse, Some("read_file")).is_empty());
        assert_eq!(set.commands(Event::Stop, None).len(), 1);
        assert!(set.commands(Event::PostToolUse, Some("shell")).is_empty());
    }

    #[test]
    fn mistakes_are_refused_with_what_to_write() {
        let error = |text: &str| HookSet::compile(&table(text)).unwrap_err().message;
        assert_eq!(
            error("[[hooks.PreToolUs]]\nhooks = []\n"),
            "[hooks]: unknown event `PreToolUs` (did you mean `PreToolUse`?)"
        );
        assert!(
            error("[[hooks.Stop]]\nhooks = [{ type = \"prompt\", command = \"x\" }]\n")
                .contains("only `command`")
        );
        assert!(
            error("[[hooks.Stop]]\nhooks = [{ type = \"command\", command = \" \" }]\n").contains("empty")
        );
        assert!(
            error("[[hooks.Stop]]\nhooks = [{ type = \"command\", command = \"x\", timeout = 0 }]\n")
                .contains("at least 1 second")
        );
        assert!(error("[[hooks.PreToolUse]]\nmatcher = \"(\"\nhooks = []\n").contains("not a valid regex"));
        assert!(HookSet::compile(&HooksTable::new()).unwrap().is_empty());
    }
}
