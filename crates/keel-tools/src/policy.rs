//! The permission policy: which calls run, decided per call before the tool starts.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use keel_agent::{HookDecision, Hooks, ToolCallRequest};
use regex::{Regex, RegexSet};

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    /// Everything runs (still confined to the workspace, still subject to the deny-list).
    #[default]
    Auto,
    /// Read-only tools run; others ask the user through the callback.
    Ask,
    /// Only read-only tools run; others are denied.
    ReadOnly,
}

impl PermissionMode {
    /// Parses `auto`, `ask` or `read-only`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "auto" => Some(Self::Auto),
            "ask" => Some(Self::Ask),
            "read-only" | "readonly" | "read_only" => Some(Self::ReadOnly),
            _ => None,
        }
    }
}

/// The user's answer to a permission question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskAnswer {
    /// Run this call.
    Allow,
    /// Run this call and every later call of the same tool without asking.
    AllowAlways,
    /// Do not run it; the turn goes on.
    Deny,
    /// Do not run it and stop the turn.
    DenyAndStop,
}

/// What the user is asked about.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The tool name.
    pub tool: String,
    /// The raw arguments.
    pub arguments: String,
}

/// Asks the user (the CLI implements it with a prompt).
pub type AskFn = Arc<dyn Fn(AskRequest) -> BoxFuture<'static, AskAnswer> + Send + Sync>;

/// Shell commands refused by default.
pub const DEFAULT_DENY: &[&str] = &[
    r"\brm\s+(-\S+\s+)*-\S*[rR]\S*\s+(-\S+\s+)*(--\s+)?(/|/\*|~|~/|\$HOME)(\s|;|&|\||$)",
    r"--no-preserve-root",
    r"\bgit\s+push\b[^;&|]*\s(--force|-f|--force-with-lease)\b",
    r"\bmkfs(\.\w+)?\b",
    r"\bdd\b[^;&|]*\bof=/dev/",
    r">\s*/dev/(sd|nvme|hd|vd)[a-z]",
    r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
    r"(^|[;&|]\s*)(sudo\s+)?(shutdown|reboot|halt|poweroff)\b",
    r"\bchmod\s+(-\S+\s+)*-R\s+\S+\s+/(\s|$)",
];

/// Decides each call: deny-list for shell commands, then the mode.
pub struct PermissionPolicy {
    mode: PermissionMode,
    deny: Vec<String>,
    /// Compiled on the first shell call: compiling costs milliseconds at start-up.
    deny_set: OnceLock<Option<RegexSet>>,
    ask: Option<AskFn>,
    allowed_always: Mutex<HashSet<String>>,
    stop_on_deny: bool,
}

impl std::fmt::Debug for PermissionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionPolicy")
            .field("mode", &self.mode)
            .field("deny", &self.deny)
            .field("stop_on_deny", &self.stop_on_deny)
            .finish_non_exhaustive()
    }
}

impl PermissionPolicy {
    /// A policy in `mode` with the default deny-list.
    pub fn new(mode: PermissionMode) -> Self {
        PermissionPolicy {
            mode,
            deny: DEFAULT_DENY.iter().map(|p| (*p).to_owned()).collect(),
            deny_set: OnceLock::new(),
            ask: None,
            allowed_always: Mutex::new(HashSet::new()),
            stop_on_deny: false,
        }
    }

    /// Replaces the deny-list (regular expressions matched against shell commands).
    pub fn with_deny_patterns<I: IntoIterator<Item = S>, S: AsRef<str>>(
        mut self,
        patterns: I,
    ) -> Result<Self, regex::Error> {
        self.deny.clear();
        self.add_deny_patterns(patterns)
    }

    /// Adds deny patterns to the current list. Each is checked here, so a bad one is an
    /// error at configuration time.
    pub fn add_deny_patterns<I: IntoIterator<Item = S>, S: AsRef<str>>(
        mut self,
        patterns: I,
    ) -> Result<Self, regex::Error> {
        for p in patterns {
            Regex::new(p.as_ref())?;
            self.deny.push(p.as_ref().to_owned());
        }
        self.deny_set = OnceLock::new();
        Ok(self)
    }

    /// Sets the question callback used in `ask` mode.
    pub fn with_ask(mut self, ask: AskFn) -> Self {
        self.ask = Some(ask);
        self
    }

    /// Also stop the turn whenever a call is denied.
    pub fn stop_on_deny(mut self, stop: bool) -> Self {
        self.stop_on_deny = stop;
        self
    }

    /// The mode.
    pub fn mode(&self) -> PermissionMode {
        self.mode
    }

    fn deny(&self, reason: String) -> HookDecision {
        if self.stop_on_deny { HookDecision::DenyAndStop { reason } } else { HookDecision::Deny { reason } }
    }

    /// The deny pattern a shell command matches, if any.
    pub fn denied_pattern(&self, command: &str) -> Option<&str> {
        let set = self.deny_set.get_or_init(|| RegexSet::new(&self.deny).ok()).as_ref()?;
        let index = set.matches(command).iter().next()?;
        self.deny.get(index).map(String::as_str)
    }

    async fn decide(&self, request: ToolCallRequest<'_>) -> HookDecision {
        let call = request.call;
        if call.name == "shell"
            && let Some(command) = serde_json::from_str::<serde_json::Value>(&call.arguments)
                .ok()
                .and_then(|v| v.get("command").and_then(|c| c.as_str()).map(str::to_owned))
            && let Some(pattern) = self.denied_pattern(&command)
        {
            return self.deny(format!(
                "The command was not run: it matches the deny-list pattern `{pattern}`. Do not try to work around this; find a safer way or ask the user."
            ));
        }
        if request.read_only {
            return HookDecision::Allow;
        }
        match self.mode {
            PermissionMode::Auto => HookDecision::Allow,
            PermissionMode::ReadOnly => self.deny(format!(
                "`{}` was not run: keel is in read-only mode, so only tools that read run. Describe the change instead, or ask the user to allow changes.",
                call.name
            )),
            PermissionMode::Ask => {
                let known = self.allowed_always.lock().map(|set| set.contains(&call.name)).unwrap_or(false);
                if known {
                    return HookDecision::Allow;
                }
                let Some(ask) = &self.ask else {
                    return self.deny(format!("`{}` needs the user's permission and there is no way to ask.", call.name));
                };
                let answer = ask(AskRequest { tool: call.name.clone(), arguments: call.arguments.clone() }).await;
                match answer {
                    AskAnswer::Allow => HookDecision::Allow,
                    AskAnswer::AllowAlways => {
                        if let Ok(mut set) = self.allowed_always.lock() {
                            set.insert(call.name.clone());
                        }
                        HookDecision::Allow
                    }
                    AskAnswer::Deny => {
                        self.deny(format!("The user declined `{}`. Do not retry it; ask what they want instead.", call.name))
                    }
                    AskAnswer::DenyAndStop => HookDecision::DenyAndStop {
                        reason: format!("The user declined `{}` and stopped the turn.", call.name),
                    },
                }
            }
        }
    }
}

impl Hooks for PermissionPolicy {
    fn before_tool_call<'a>(&'a self, request: ToolCallRequest<'a>) -> BoxFuture<'a, HookDecision> {
        Box::pin(self.decide(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_deny_list_catches_the_classics_and_spares_ordinary_commands() {
        let policy = PermissionPolicy::new(PermissionMode::Auto);
        for bad in [
            "rm -rf /",
            "rm -rf / ",
            "sudo rm -fr ~",
            "rm -r -f /*",
            "cd x && rm -rf $HOME",
            "git push --force origin main",
            "git push -f",
            "mkfs.ext4 /dev/sda1",
            "dd if=/dev/zero of=/dev/sda",
            ":(){ :|:& };:",
            "sudo reboot",
            "echo x > /dev/sda",
        ] {
            assert!(policy.denied_pattern(bad).is_some(), "should deny {bad:?}");
        }
        for fine in [
            "rm -rf build/",
            "rm -rf ./target",
            "rm file.txt",
            "git push origin main",
            "git push --follow-tags",
            "ls /",
            "cat /etc/hostname",
            "echo shutdown-notes.md",
            "dd if=a of=b",
        ] {
            assert!(policy.denied_pattern(fine).is_none(), "should allow {fine:?}");
        }
    }
}
