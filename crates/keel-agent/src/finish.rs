//! Finish, not describe: a turn-stopping rule for models that stop too early.
//!
//! Small models often end a turn by showing a change in a code block without making it,
//! by declaring success on a task whose check they never ran, or by explaining a failed
//! tool call to the user instead of fixing it. When a turn is about to end that way,
//! [`FinishCheck`] asks once (per kind, at most twice a turn) to carry it out; the request
//! is logged as a `user/message` from a hook, so the model sees exactly what the log says.

use std::collections::HashMap;

use futures::future::BoxFuture;
use keel_llm::Message;

use crate::hook_points::Nudge;
use crate::hooks::{Hooks, TurnStopping};

/// How the request begins when the final answer shows code but nothing was changed; the
/// task follows, quoted.
pub const DESCRIBED_NOT_DONE: &str = "You described a change instead of making it.";

/// Sent when files were changed and the task asks for a check that was not run since.
pub const NOT_VERIFIED: &str = "You have not run anything since your last change. Run the check the task asks \
for (the script, the tests or the command) to confirm the change works, then answer with the result.";

/// How the request begins when the turn's last tool call failed before any change was
/// made for a task that asks for one; the error and the task follow.
pub const GAVE_UP: &str = "Your last tool call failed:";

/// How the request begins when the final answer repeats an example answer from the
/// instructions (small models copy the worked example when they are lost); the task
/// follows, quoted.
pub const COPIED_EXAMPLE: &str = "That answer is the example from your instructions, not about this task.";

/// Most requests in one turn.
const MAX_NUDGES: usize = 2;

/// The rule, as [`Hooks`]. What each call did is what its tool declares
/// ([`crate::Tool::effect`]): a call that runs a command counts as running a check, any
/// other call that is not read-only as a change.
#[derive(Debug, Clone, Default)]
pub struct FinishCheck {
    /// Example answers of the instructions, normalized ([`normalized`]).
    example_answers: Vec<String>,
}

/// What the turn did, read from its messages.
#[derive(Debug, Default)]
struct Activity {
    /// A call of a changing tool (not a check tool) succeeded.
    changed: bool,
    /// A check tool ran after the last successful change.
    checked_since_change: bool,
    /// Any call of a tool that is not read-only succeeded (changes and checks).
    acted: bool,
    /// The first line of the last result, when that result was an error.
    last_error: Option<String>,
    /// Requests already made this turn, by their first words.
    asked: Vec<&'static str>,
}

impl FinishCheck {
    /// The rule.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names answers that the instructions show as examples: a final answer that repeats
    /// one is asked about once.
    pub fn example_answers(mut self, texts: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        self.example_answers =
            texts.into_iter().map(|t| normalized(t.as_ref())).filter(|t| t.len() >= 12).collect();
        self
    }

    fn copies_an_example(&self, answer: &str) -> bool {
        let answer = normalized(answer);
        self.example_answers.iter().any(|example| answer.contains(example.as_str()))
    }

    fn activity(&self, state: &TurnStopping<'_>) -> Activity {
        let mut activity = Activity::default();
        // A turn concluded by a tool (`answer`) ends with that tool's result; the call
        // to judge is the one before it.
        let concluding = match (state.concluded, state.messages.last()) {
            (true, Some(Message::ToolResult(result))) => Some(result.call_id.as_str()),
            _ => None,
        };
        let mut failed: HashMap<&str, bool> = HashMap::new();
        for message in state.messages {
            if let Message::ToolResult(result) = message {
                failed.insert(result.call_id.as_str(), result.is_error);
            }
        }
        for message in state.messages.iter().skip(1) {
            match message {
                Message::User(user) => {
                    for kind in [DESCRIBED_NOT_DONE, NOT_VERIFIED, GAVE_UP, COPIED_EXAMPLE] {
                        if user.content.contains(kind) {
                            activity.asked.push(kind);
                        }
                    }
                }
                Message::Assistant(reply) => {
                    for call in reply.tool_calls() {
                        // A tool not on offer did nothing.
                        let effect = match state.tools.get(&call.name) {
                            Some(_) => state.tools.effect_of(call),
                            None => keel_session::Effect::Reads { path: None },
                        };
                        let succeeded = failed.get(call.id.as_str()) == Some(&false);
                        if effect == keel_session::Effect::Runs {
                            activity.checked_since_change = true;
                            activity.acted |= succeeded;
                        } else if !effect.read_only() && succeeded {
                            activity.changed = true;
                            activity.acted = true;
                            activity.checked_since_change = false;
                        }
                    }
                }
                Message::ToolResult(result) if Some(result.call_id.as_str()) == concluding => {}
                // A refusal on principle (`.git`, outside the workspace, denied) is no
                // mistake to fix: "make it again" would push toward what was refused.
                Message::ToolResult(result) => {
                    let refused =
                        state.failures.iter().any(|(id, kind)| *id == result.call_id && kind.is_refusal());
                    activity.last_error = (result.is_error && !refused).then(|| error_gist(&result.content));
                }
            }
        }
        activity
    }

    /// What to ask before the turn ends, if anything, with the evidence it acts on. The
    /// task's intent ([`crate::intent`]) decides what the task asks for; where it is
    /// unknown, the rules that need it stay silent. No request says a task is undone when
    /// a change was made, or pushes toward work the task did not ask for.
    pub fn nudge(&self, state: &TurnStopping<'_>) -> Option<Nudge> {
        let activity = self.activity(state);
        if activity.asked.len() >= MAX_NUDGES {
            return None;
        }
        let asked = |kind| activity.asked.contains(&kind);
        let (task, intent) = (state.task(), state.intent);
        if !asked(COPIED_EXAMPLE) && self.copies_an_example(state.final_text) {
            return Some(Nudge::new(
                format!(
                    "{COPIED_EXAMPLE} The task: \"{task}\". If it is not done, do it now with your tools; then answer \
                     with what you found or did for this task."
                ),
                "finish_check/copied_example: the final answer repeats an example answer of the instructions",
            ));
        }
        // "Nothing was changed" holds only when no call that could change anything
        // succeeded: a command that ran (`git revert HEAD`) changes files without a
        // changing tool's effect.
        if let Some(error) = &activity.last_error
            && !asked(GAVE_UP)
            && intent.asks_for_change()
            && !activity.acted
        {
            let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
            return Some(Nudge::new(
                format!(
                    "{GAVE_UP} {error} Nothing was changed for the task yet: \"{task}\". Fix the call (the error says \
                     how) and make it again now."
                ),
                "finish_check/gave_up: the last call failed, no call that could change anything succeeded this turn \
                 (a changing tool or a command), and the task asks for a change (turn/intent)",
            ));
        }
        if !activity.acted
            && !asked(DESCRIBED_NOT_DONE)
            && intent.asks_for_change()
            && has_code_block(state.final_text)
        {
            return Some(Nudge::new(
                format!(
                    "{DESCRIBED_NOT_DONE} The task: \"{task}\". Call your tools now to make the change (do not \
                     describe it), then check the result."
                ),
                "finish_check/described_not_done: the final answer shows code, no call acted this turn, and the task \
                 asks for a change (turn/intent)",
            ));
        }
        if activity.changed
            && !activity.checked_since_change
            && !asked(NOT_VERIFIED)
            && intent.names_a_check()
        {
            return Some(Nudge::new(
                NOT_VERIFIED,
                "finish_check/not_verified: a change was made and nothing ran after it, and the task asks for a \
                 check (turn/intent)",
            ));
        }
        None
    }
}

/// Most characters of a failed call's error quoted in a request.
const MAX_ERROR_CHARS: usize = 600;

/// What a failed result says, in a line: its first line, and its last one when that
/// differs (shell errors end with the cause: git's `no changes added to commit (use
/// "git add" …)` came after `On branch main`). keel's own closing lines (`[exit code:
/// 1]`, `[keel: …]`) are not the cause.
fn error_gist(content: &str) -> String {
    let mut lines = content.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let last = lines.rfind(|l| !l.starts_with("[exit code") && !l.starts_with("[keel"));
    // Each cut on its own, so a long first line cannot push the cause out.
    let clip = |line: &str| line.chars().take(MAX_ERROR_CHARS / 2).collect::<String>();
    match last {
        Some(last) if last != first => format!("{} … {}", clip(first), clip(last)),
        _ => clip(first),
    }
}

/// Lowercase letters and digits only, so quoting and punctuation do not hide a copy.
fn normalized(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// A fenced code block with at least one line in it.
fn has_code_block(text: &str) -> bool {
    let mut parts = text.split("```");
    parts.next();
    while let (Some(inside), Some(_after)) = (parts.next(), parts.next()) {
        if inside.lines().skip(1).any(|l| !l.trim().is_empty()) {
            return true;
        }
    }
    false
}

impl Hooks for FinishCheck {
    fn turn_stopping<'a>(&'a self, state: TurnStopping<'a>) -> BoxFuture<'a, Option<Nudge>> {
        let nudge = self.nudge(&state);
        Box::pin(async move { nudge })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage, UserMessage};
    use keel_session::{TaskIntent, Wants};

    use crate::ToolErrorKind;

    const CHANGE: TaskIntent =
        TaskIntent { wants: Some(Wants::Change), check: Some(false), layout: Some(false) };
    const CHANGE_CHECKED: TaskIntent =
        TaskIntent { wants: Some(Wants::Change), check: Some(true), layout: Some(false) };
    const ANSWER: TaskIntent =
        TaskIntent { wants: Some(Wants::Answer), check: Some(false), layout: Some(false) };
    const UNKNOWN: TaskIntent = TaskIntent { wants: None, check: None, layout: None };

    fn user(text: &str) -> Message {
        Message::User(UserMessage::text(text))
    }

    fn call(id: &str, name: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new(id, name, "{}"))],
            ..AssistantMessage::default()
        })
    }

    fn result(id: &str, is_error: bool) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: "t".into(),
            content: "r".into(),
            is_error,
            images: Vec::new(),
        })
    }

    /// The nudge for a task of `intent`, reduced to its kind.
    fn nudge_for(intent: TaskIntent, messages: &[Message], final_text: &str) -> Option<&'static str> {
        let tools = crate::registry::tests_support::registry();
        let ctx = crate::SessionContext::default();
        let mut state = TurnStopping::new(1, final_text, messages, &tools, &ctx);
        state.intent = intent;
        let text = FinishCheck::new().example_answers([EXAMPLE]).nudge(&state)?.text;
        Some(
            [DESCRIBED_NOT_DONE, NOT_VERIFIED, GAVE_UP, COPIED_EXAMPLE]
                .into_iter()
                .find(|k| text.starts_with(k))
                .unwrap_or("?"),
        )
    }

    fn state<'a>(
        intent: TaskIntent,
        final_text: &'a str,
        messages: &'a [Message],
        tools: &'a crate::ToolRegistry,
        ctx: &'a crate::SessionContext,
    ) -> TurnStopping<'a> {
        let mut state = TurnStopping::new(1, final_text, messages, tools, ctx);
        state.intent = intent;
        state
    }

    #[test]
    fn a_change_shown_but_not_made_is_asked_for_once() {
        let turn = [user("Fix the bug in a.py"), call("1", "read_file"), result("1", false)];
        let answer = "Change line 3 to:\n```python\nreturn a + b\n```";
        assert_eq!(nudge_for(CHANGE, &turn, answer), Some(DESCRIBED_NOT_DONE));
        let (tools, ctx) = (crate::registry::tests_support::registry(), crate::SessionContext::default());
        let nudge = FinishCheck::new().nudge(&state(CHANGE, answer, &turn, &tools, &ctx)).unwrap();
        assert!(nudge.text.contains("The task: \"Fix the bug in a.py\"."), "{}", nudge.text);
        assert!(nudge.reason.starts_with("finish_check/described_not_done: "), "{}", nudge.reason);
        let mut asked = turn.to_vec();
        asked.push(user(&nudge.text));
        assert_eq!(nudge_for(CHANGE, &asked, answer), None);
        // A failed write is no change either (and is asked about first).
        let failed = [
            user("Fix it"),
            call("1", "write_file"),
            result("1", true),
            call("2", "read_file"),
            result("2", false),
        ];
        assert_eq!(nudge_for(CHANGE, &failed, answer), Some(DESCRIBED_NOT_DONE));
        // Plain answers are left alone.
        assert_eq!(nudge_for(CHANGE, &turn, "The bug is on line 3."), None);
        assert_eq!(nudge_for(CHANGE, &turn, "Inline `code` only"), None);
    }

    /// Regression: a question answered with a list of files in a code block was asked to
    /// "make the change" (find-todos, llama-server run 1). What the task wants is its
    /// intent, in any language; unknown, nothing is asked.
    #[test]
    fn a_question_answered_in_a_code_block_is_left_alone() {
        let turn = [user("哪个文件定义了 parse_header？"), call("1", "grep"), result("1", false)];
        assert_eq!(nudge_for(ANSWER, &turn, "```\nlib/cache.py\nmain.py\n```"), None);
        assert_eq!(nudge_for(UNKNOWN, &turn, "```\nlib/cache.py\n```"), None);
        // A change request phrased as a question is a change request.
        let asked = [user("Can you fix the bug in a.py?"), call("1", "read_file"), result("1", false)];
        assert_eq!(
            nudge_for(CHANGE, &asked, "Change line 3:\n```python\nreturn a + b\n```"),
            Some(DESCRIBED_NOT_DONE)
        );
    }

    #[test]
    fn a_change_never_checked_is_asked_to_be_run_when_the_task_asks_for_a_check() {
        let changed = [user("Fix stats.py, then run the tests."), call("1", "edit_file"), result("1", false)];
        assert_eq!(nudge_for(CHANGE_CHECKED, &changed, "Fixed."), Some(NOT_VERIFIED));
        let mut checked = changed.to_vec();
        checked.extend([call("2", "shell"), result("2", false)]);
        assert_eq!(nudge_for(CHANGE_CHECKED, &checked, "Fixed."), None);
        // A change after the check needs another check.
        checked.extend([call("3", "write_file"), result("3", false)]);
        assert_eq!(nudge_for(CHANGE_CHECKED, &checked, "Fixed."), Some(NOT_VERIFIED));
        // Regression (issue 29): a question that mentioned the tests drew "You have not run
        // anything", and the model went on to git add, commit and push. No check asked for,
        // or not known to be: nothing asked.
        assert_eq!(nudge_for(CHANGE, &changed, "Done."), None);
        assert_eq!(nudge_for(UNKNOWN, &changed, "Done."), None);
    }

    #[test]
    fn a_failed_last_call_before_any_change_is_asked_to_be_fixed_once() {
        let turn = [user("Commit the changes"), call("1", "shell"), result("1", true)];
        assert_eq!(nudge_for(CHANGE, &turn, "You need to stage the files first."), Some(GAVE_UP));
        let (tools, ctx) = (crate::registry::tests_support::registry(), crate::SessionContext::default());
        let nudge = FinishCheck::new().nudge(&state(CHANGE, "x", &turn, &tools, &ctx)).unwrap();
        assert_eq!(
            nudge.text,
            "Your last tool call failed: r Nothing was changed for the task yet: \"Commit the changes\". Fix the call (the error says how) and make it again now."
        );
        let mut asked = turn.to_vec();
        asked.extend([user(&nudge.text), call("2", "shell"), result("2", true)]);
        assert_eq!(nudge_for(CHANGE, &asked, "Still failing."), None);
        // At most two requests a turn.
        let mut busy = vec![user("Fix a.py"), user(&format!("{DESCRIBED_NOT_DONE} x")), user(NOT_VERIFIED)];
        busy.extend([call("1", "shell"), result("1", true)]);
        assert_eq!(nudge_for(CHANGE, &busy, "gave up"), None);
    }

    /// Regression (issue 29): config.ini was changed in step 1, then a `git status` detour
    /// failed (not a repository); "The task is not done … make it again now" sent the model
    /// to `git init` and `git commit` for 600 s. A question whose command failed (pytest
    /// exits 1 on "Why does the test fail?") is no failure of the task either.
    #[test]
    fn a_failed_detour_after_the_change_or_in_a_question_is_not_called_undone() {
        let detour = [
            user("Set the timeout in config.ini to 30"),
            call("1", "edit_file"),
            result("1", false),
            call("2", "shell"),
            result("2", true),
        ];
        assert_eq!(nudge_for(CHANGE, &detour, "Done: timeout is 30."), None);
        let question = [user("Why does the test fail?"), call("1", "shell"), result("1", true)];
        assert_eq!(nudge_for(ANSWER, &question, "The helper rounds down."), None);
        assert_eq!(nudge_for(UNKNOWN, &question, "The helper rounds down."), None);
        // Regression (suite run of 2026-12-06, revert-last-commit): `git revert HEAD`
        // made the change; a later `git commit` failed ("nothing to commit"), and "Nothing
        // was changed for the task yet … make it again now" had the model revert the
        // revert. A command that succeeded may have changed the project.
        let reverted = [
            user("Revert the last commit."),
            call("1", "shell"),
            result("1", false),
            call("2", "shell"),
            result("2", true),
        ];
        assert_eq!(nudge_for(CHANGE, &reverted, "Reverted the last commit."), None);
    }

    /// Regression (suite run full-p1, upgrade-dependency): change_file on `.git` with
    /// `rm -rf .git` was refused (the file tools do not touch `.git`), and "Fix the call …
    /// and make it again now" pushed the model back at what was refused. A refusal on
    /// principle is no mistake to fix; a mistake in the same place still is.
    #[test]
    fn a_refusal_on_principle_is_not_asked_to_be_made_again() {
        let turn = [user("Upgrade requests to 2.32"), call("1", "change_file"), result("1", true)];
        let (tools, ctx) = (crate::registry::tests_support::registry(), crate::SessionContext::default());
        for kind in [ToolErrorKind::GitInternals, ToolErrorKind::OutsideWorkspace, ToolErrorKind::Denied] {
            let failures = [("1".to_owned(), kind)];
            let mut refused = state(CHANGE, "Done.", &turn, &tools, &ctx);
            refused.failures = &failures;
            assert_eq!(FinishCheck::new().nudge(&refused), None, "{kind:?}");
        }
        let failures = [("1".to_owned(), ToolErrorKind::NoMatch)];
        let mut mistaken = state(CHANGE, "Done.", &turn, &tools, &ctx);
        mistaken.failures = &failures;
        let nudge = FinishCheck::new().nudge(&mistaken).map(|n| n.text);
        assert!(nudge.as_deref().is_some_and(|t| t.starts_with(GAVE_UP)), "{nudge:?}");
    }

    #[test]
    fn the_gist_of_an_error_is_its_first_and_last_lines() {
        let git = "On branch main\nChanges not staged for commit:\n\tmodified:   README.md\n\nno changes added to commit (use \"git add\" and/or \"git commit -a\")\n[exit code: 1]";
        assert_eq!(
            error_gist(git),
            "On branch main … no changes added to commit (use \"git add\" and/or \"git commit -a\")"
        );
        assert_eq!(error_gist("\n  old_text was not found.  \n"), "old_text was not found.");
        assert_eq!(error_gist("boom\n[exit code: 2]\n[keel: same call 3 times]"), "boom");
        assert_eq!(error_gist(""), "");
        let long = format!("{}\nthe cause", "x".repeat(2000));
        assert!(error_gist(&long).ends_with(" … the cause"), "{}", error_gist(&long));
    }

    /// With the `answer` tool, the answer's own result comes last: the failed call
    /// before it still counts (the 1.5B model answered "updated" right after an edit
    /// that failed, and was not asked to fix it).
    #[test]
    fn a_failed_call_right_before_a_concluding_answer_is_asked_to_be_fixed() {
        let turn = [
            user("Bump the version"),
            call("1", "edit_file"),
            result("1", true),
            call("2", "answer"),
            result("2", false),
        ];
        let (tools, ctx) = (crate::registry::tests_support::registry(), crate::SessionContext::default());
        let mut state = state(CHANGE, "r", &turn, &tools, &ctx);
        assert_eq!(
            FinishCheck::new().nudge(&state),
            None,
            "not concluded: the answer's result is the last call"
        );
        state.concluded = true;
        let nudge = FinishCheck::new().nudge(&state).unwrap();
        assert!(nudge.text.starts_with(GAVE_UP), "{}", nudge.text);
    }

    const EXAMPLE: &str = "app.py now prints Hi; I ran it to check.";

    #[test]
    fn an_answer_copied_from_the_instructions_example_is_asked_about_once() {
        let turn = [user("Remove the debug prints from app.py"), call("1", "edit_file"), result("1", false)];
        assert_eq!(
            nudge_for(UNKNOWN, &turn, "app.py now prints Hi; I ran it to check."),
            Some(COPIED_EXAMPLE)
        );
        assert_eq!(
            nudge_for(UNKNOWN, &turn, "Done: App.py now prints \"Hi\" - I ran it to check!"),
            Some(COPIED_EXAMPLE)
        );
        let tools = crate::registry::tests_support::registry();
        let ctx = crate::SessionContext::default();
        let state = TurnStopping::new(1, EXAMPLE, &turn, &tools, &ctx);
        let text = FinishCheck::new().example_answers([EXAMPLE]).nudge(&state).unwrap().text;
        assert_eq!(
            text,
            "That answer is the example from your instructions, not about this task. The task: \"Remove the debug \
             prints from app.py\". If it is not done, do it now with your tools; then answer with what you found or \
             did for this task."
        );
        let mut asked = turn.to_vec();
        asked.push(user(&text));
        assert_eq!(nudge_for(UNKNOWN, &asked, EXAMPLE), None);
        // An answer of its own is left alone, and without examples nothing is a copy.
        assert_eq!(nudge_for(CHANGE, &turn, "app.py no longer prints DEBUG lines."), None);
        assert_eq!(FinishCheck::new().nudge(&state), None);
    }

    #[test]
    fn a_shell_command_counts_as_acting() {
        let ran = [user("What does calc.py print?"), call("1", "shell"), result("1", false)];
        assert_eq!(nudge_for(UNKNOWN, &ran, "It prints:\n```\n42\n```"), None);
        assert_eq!(nudge_for(CHANGE, &ran, "It prints:\n```\n42\n```"), None);
    }
}
