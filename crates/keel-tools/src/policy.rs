//! The permission policy: which calls run, decided per call before the tool starts.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_agent::{HookDecision, Hooks, ToolCallRequest};

use crate::deny_list::DenyList;
use crate::rules::{PermissionRules, RuleKind, RuleVerdict};

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    /// Every call runs without asking. The file tools stay confined to the workspace;
    /// shell commands run with the user's rights, anywhere the user can reach. The
    /// deny-list only refuses common spellings of destructive commands: a net for
    /// accidents, not a sandbox.
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

    /// `auto`, `ask` or `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::ReadOnly => "read-only",
        }
    }
}

/// The user's answer to a permission question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskAnswer {
    /// Run this call.
    Allow,
    /// Run this call, and add the request's suggested rules to the allow list for the
    /// rest of the run (`shell(git status)`, `edit_file(src/**)`).
    AllowAlways,
    /// Do not run it; the turn goes on.
    Deny,
    /// Do not run it and stop the turn.
    DenyAndStop,
    /// Do not run it; the turn goes on with what the user said to do instead, which the
    /// model gets with the refusal.
    DenyWithWords(String),
}

/// What the user is asked about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AskRequest {
    /// The tool name.
    pub tool: String,
    /// The raw arguments.
    pub arguments: String,
    /// The rules "always" would add to the allow list.
    pub suggested: Vec<String>,
    /// The `ask` rule that made this call ask, if one did.
    pub rule: Option<String>,
    /// Why keel asks when no rule made it: a user's hook asked, with this reason.
    pub reason: Option<String>,
}

impl AskRequest {
    /// A request for a call of `tool` with raw `arguments`, suggesting no rule.
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Self {
        AskRequest {
            tool: tool.into(),
            arguments: arguments.into(),
            suggested: Vec::new(),
            rule: None,
            reason: None,
        }
    }
}

/// Asks the user (the CLI implements it with a prompt).
pub type AskFn = Arc<dyn Fn(AskRequest) -> BoxFuture<'static, AskAnswer> + Send + Sync>;

/// Decides each call: the deny-list for shell commands, then the rules (deny, ask,
/// allow), then the mode.
pub struct PermissionPolicy {
    mode: PermissionMode,
    /// Compiled on the first shell call.
    deny: DenyList,
    ask: Option<AskFn>,
    /// The configured rules plus those "always" added.
    rules: Mutex<PermissionRules>,
    stop_on_deny: bool,
}

impl std::fmt::Debug for PermissionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionPolicy")
            .field("mode", &self.mode)
            .field("deny", &self.deny.patterns().collect::<Vec<_>>())
            .field("stop_on_deny", &self.stop_on_deny)
            .finish_non_exhaustive()
    }
}

impl PermissionPolicy {
    /// A policy in `mode` with the default deny-list ([`DEFAULT_DENY`], plus `rm` of the
    /// home folder spelled out as `$HOME` holds it).
    pub fn new(mode: PermissionMode) -> Self {
        PermissionPolicy {
            mode,
            deny: DenyList::builtin(),
            ask: None,
            rules: Mutex::new(PermissionRules::default()),
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
            self.deny.add(p.as_ref())?;
        }
        Ok(self)
    }

    /// Sets the question callback used in `ask` mode.
    pub fn with_ask(mut self, ask: AskFn) -> Self {
        self.ask = Some(ask);
        self
    }

    /// The question callback, if there is a way to ask (a user's hook that asks about a
    /// call asks through it).
    pub fn asker(&self) -> Option<AskFn> {
        self.ask.clone()
    }

    /// Sets the permission rules (see [`crate::rules`]).
    pub fn with_rules(mut self, rules: PermissionRules) -> Self {
        self.rules = Mutex::new(rules);
        self
    }

    /// The rules now in force: the configured ones and those "always" added.
    pub fn rules(&self) -> PermissionRules {
        self.rules.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn verdict(&self, tool: &str, arguments: &str) -> RuleVerdict {
        match self.rules.lock() {
            Ok(rules) => rules.verdict(tool, arguments),
            Err(poisoned) => poisoned.into_inner().verdict(tool, arguments),
        }
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

    /// Why the deny net refuses a shell command, if it does: a shape seen on the parsed
    /// command, or the deny pattern it matches.
    pub fn denied_pattern(&self, command: &str) -> Option<&str> {
        if let Some(why) = crate::deny_net::refused(command) {
            return Some(why);
        }
        self.deny.matching(command)
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
        let verdict = self.verdict(&call.name, &call.arguments);
        let read_only_refusal = || {
            self.deny(format!(
                "`{}` was not run: keel is in read-only mode, so only tools that read run. Describe the change instead, or ask the user to allow changes.",
                call.name
            ))
        };
        match verdict {
            RuleVerdict::Deny(rule) => {
                return self.deny(format!(
                    "`{}` was not run: the user's permission rule `deny: {rule}` refuses it. Do not try to work around this; find another way or ask the user.",
                    call.name
                ));
            }
            RuleVerdict::Ask(_) if self.mode == PermissionMode::ReadOnly && !request.read_only => {
                return read_only_refusal();
            }
            RuleVerdict::Ask(rule) => return self.ask_user(request, Some(rule)).await,
            // Rules widen ask mode; read-only mode stays read-only.
            RuleVerdict::Allow if self.mode != PermissionMode::ReadOnly => return HookDecision::Allow,
            _ => {}
        }
        if request.read_only {
            return HookDecision::Allow;
        }
        match self.mode {
            PermissionMode::Auto => HookDecision::Allow,
            PermissionMode::ReadOnly => read_only_refusal(),
            PermissionMode::Ask => self.ask_user(request, None).await,
        }
    }

    /// Asks the user about a call; "always" adds the suggested rules.
    async fn ask_user(&self, request: ToolCallRequest<'_>, rule: Option<String>) -> HookDecision {
        let call = request.call;
        let Some(ask) = &self.ask else {
            return self
                .deny(format!("`{}` needs the user's permission and there is no way to ask.", call.name));
        };
        let suggested = self.rules.lock().map(|r| r.suggest(&call.name, &call.arguments)).unwrap_or_default();
        let question = AskRequest {
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            suggested,
            rule,
            reason: None,
        };
        let suggested = question.suggested.clone();
        match ask(question).await {
            AskAnswer::Allow => HookDecision::Allow,
            AskAnswer::AllowAlways => {
                if let Ok(mut rules) = self.rules.lock() {
                    // Suggested rules always parse; a failure only means asking again.
                    let _ = rules.add(RuleKind::Allow, &suggested, "this session ([a]lways)");
                }
                HookDecision::Allow
            }
            AskAnswer::Deny => self.deny(format!(
                "The user declined `{}`. Do not retry it; ask what they want instead.",
                call.name
            )),
            AskAnswer::DenyAndStop => HookDecision::DenyAndStop {
                reason: format!("The user declined `{}` and stopped the turn.", call.name),
            },
            AskAnswer::DenyWithWords(words) => self.deny(format!(
                "The user declined `{}` and said instead:\n{}\nDo what they said.",
                call.name,
                words.trim()
            )),
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

    /// Every shape of issue 10 that ran, and a few more spellings of each.
    const DENIED: &[&str] = &[
        "rm -rf /",
        "rm -rf / ",
        "sudo rm -fr ~",
        "rm -r -f /*",
        "cd x && rm -rf $HOME",
        "rm -rf \"$HOME\"",
        "rm -rf '$HOME'",
        "rm -rf ${HOME}",
        "rm -rf \"${HOME}\"/",
        "rm -rf \"$HOME\"/*",
        "rm -rf ~/*",
        "rm ~/*",
        "rm -rf ~/",
        "rm -rf -- ~",
        "rm -rf --no-preserve-root /",
        "rm -rf build ~",
        "/bin/rm -rf ~",
        "\\rm -rf ~",
        "bash -c \"rm -rf ~\"",
        "sh -c 'rm -rf $HOME'",
        "eval \"rm -rf /*\"",
        "(rm -rf ~)",
        "cd ~ && rm -rf *",
        "cd $HOME; rm -rf .",
        "cd && rm -rf *",
        "cd / && rm -rf ./*",
        "find ~ -delete",
        "find / -name '*' -delete",
        "find $HOME -type f -exec rm -f {} +",
        "find -L \"$HOME\" -delete",
        "echo cm0gLXJmIH4K | base64 -d | sh",
        "base64 --decode payload.txt | bash",
        "cat x | base64 -D | sudo zsh",
        "git push --force origin main",
        "git push -f",
        "git push -fu origin main",
        "git push --force-with-lease",
        "git push origin +main",
        "git push origin +HEAD:main",
        "git -C repo push --force",
        "kill -9 -1",
        "kill -KILL -1",
        "kill -s KILL -1",
        "kill -- -1",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda",
        ":(){ :|:& };:",
        "sudo reboot",
        "echo x > /dev/sda",
        "chmod -R 777 /",
        "sudo chown -R me ~",
        // Issue 28, item 16.
        "rm -rf ~//",
        "rm -rf ~/./",
        "rm -rf -- \"${HOME:?}\"",
        "H=~; rm -rf $H",
        "find ~ | xargs rm -rf",
        "git push --mirror",
    ];

    /// Ordinary commands the net must not catch.
    const ALLOWED: &[&str] = &[
        "rm -rf build",
        "rm -rf build/",
        "rm -rf ./target",
        "rm file.txt",
        "rm -rf /tmp/keel-test",
        "rm -rf ~/.cache/pip",
        "rm -rf \"$HOME/.cache/pip\"",
        "rm -f $HOMEDIR/x",
        "rm -rf \"$dir\"/*",
        "docker run --rm ubuntu ls /",
        "cd build && rm -rf *",
        "cd /tmp && rm -rf *",
        "find . -name '*.pyc' -delete",
        "find ~/projects -name x",
        "find / -name '*.so' 2>/dev/null",
        "base64 -d in.b64 > out.bin",
        "base64 -d x | shasum",
        "git push origin main",
        "git push -u origin feature-fix",
        "git push --follow-tags",
        "git push origin HEAD",
        "kill -1 1234",
        "kill -9 12345",
        "kill %1",
        "kill $P",
        "kill $P; ps aux | head -1",
        "ls /",
        "cat /etc/hostname",
        "echo shutdown-notes.md",
        "dd if=a of=b",
        "chmod -R u+w build",
    ];

    #[test]
    fn default_deny_list_catches_each_shape_and_spares_ordinary_commands() {
        let policy = PermissionPolicy::new(PermissionMode::Auto);
        for bad in DENIED {
            assert!(policy.denied_pattern(bad).is_some(), "should deny {bad:?}");
        }
        for fine in ALLOWED {
            assert!(
                policy.denied_pattern(fine).is_none(),
                "should allow {fine:?}: {:?}",
                policy.denied_pattern(fine)
            );
        }
    }

    #[test]
    fn the_home_folder_spelled_out_is_denied_too() {
        let Some(home) = std::env::var("HOME").ok().filter(|h| h.len() > 1) else { return };
        let policy = PermissionPolicy::new(PermissionMode::Auto);
        for bad in [format!("rm -rf {home}"), format!("rm -rf \"{home}/\""), format!("rm -rf {home}/*")] {
            assert!(policy.denied_pattern(&bad).is_some(), "should deny {bad:?}");
        }
        assert!(policy.denied_pattern(&format!("rm -rf {home}/project/build")).is_none());
    }
}
