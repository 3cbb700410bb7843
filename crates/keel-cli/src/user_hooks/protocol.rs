//! What a hook answers, read as Claude Code reads it. Exit 0: stdout may be JSON
//! (`decision`, `reason`, `continue`, `stopReason`, `systemMessage`,
//! `hookSpecificOutput.permissionDecision` / `permissionDecisionReason` /
//! `additionalContext`), or for `UserPromptSubmit` and `SessionStart` plain text that is
//! context; other plain text is ignored. Exit 2: a block, stderr the reason. Any other
//! end is a failure, reported and otherwise ignored.

use keel_session::{HookOutcome, HookVerdict};
use serde::Deserialize;

use super::config::Event;
use super::run::{Ended, Output, STDOUT_LIMIT};

/// What one run decided, understood for its event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Its decision (`Stop` for `continue: false`).
    pub decision: Option<HookVerdict>,
    /// The reason of a decision: for the model (deny, block after a call, continue) or the
    /// user (a blocked prompt, a stop).
    pub reason: Option<String>,
    /// Context for the model.
    pub context: Option<String>,
    /// Something for the user alone (`systemMessage`, a notification's stderr).
    pub note: Option<String>,
}

/// Why a run's answer is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// How it went wrong.
    pub outcome: HookOutcome,
    /// What happened, for the user.
    pub error: String,
}

impl Broken {
    fn new(outcome: HookOutcome, error: impl Into<String>) -> Broken {
        Broken { outcome, error: error.into() }
    }
}

/// The JSON a hook may print on exit 0; fields it does not know are ignored, as by
/// Claude Code.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Printed {
    #[serde(rename = "continue")]
    go_on: Option<bool>,
    stop_reason: Option<String>,
    system_message: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<Specific>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    additional_context: Option<String>,
}

/// Reads `output` as `event`'s answer.
pub fn understand(event: Event, output: &Output) -> Result<Answer, Broken> {
    let stderr = || Some(output.stderr.trim().to_owned()).filter(|s| !s.is_empty());
    match &output.ended {
        Ended::NotStarted(why) => Err(Broken::new(HookOutcome::Failed, format!("could not start: {why}"))),
        Ended::TimedOut(limit) => Err(Broken::new(
            HookOutcome::TimedOut,
            format!("did not finish within {} s and was stopped", limit.as_secs()),
        )),
        Ended::TooLarge => Err(Broken::new(
            HookOutcome::BadOutput,
            format!("wrote more than {} KiB to stdout and was stopped", STDOUT_LIMIT / 1024),
        )),
        Ended::Exited(2) => Ok(blocked(event, stderr())),
        Ended::Exited(0) => printed(event, &output.stdout),
        Ended::Exited(code) => {
            let tail = stderr().map(|s| format!(": {}", last_lines(&s))).unwrap_or_default();
            Err(Broken::new(HookOutcome::Failed, format!("exited with status {code}{tail}")))
        }
    }
}

/// Exit 2: stderr is the reason; what it blocks depends on the event.
fn blocked(event: Event, stderr: Option<String>) -> Answer {
    let decision = match event {
        Event::PreToolUse => HookVerdict::Deny,
        Event::PostToolUse | Event::UserPromptSubmit => HookVerdict::Block,
        Event::Stop => HookVerdict::Continue,
        // Nothing to block: the user sees stderr.
        Event::SessionStart | Event::PreCompact => return Answer { note: stderr, ..Answer::default() },
    };
    Answer { decision: Some(decision), reason: stderr, ..Answer::default() }
}

/// Exit 0: JSON, or plain text (context for the prompt events, else ignored).
fn printed(event: Event, stdout: &[u8]) -> Result<Answer, Broken> {
    let Ok(text) = std::str::from_utf8(stdout) else {
        return Err(Broken::new(HookOutcome::BadOutput, "its output is not UTF-8 text"));
    };
    let text = text.trim();
    if text.is_empty() {
        return Ok(Answer::default());
    }
    if !text.starts_with('{') {
        return Ok(match event {
            Event::UserPromptSubmit | Event::SessionStart => Answer {
                decision: Some(HookVerdict::Context),
                context: Some(text.to_owned()),
                ..Answer::default()
            },
            _ => Answer::default(),
        });
    }
    let printed: Printed = serde_json::from_str(text).map_err(|e| {
        Broken::new(
            HookOutcome::BadOutput,
            format!("its output is not the JSON a hook answers ({e}): {}", clip(text)),
        )
    })?;
    decide(event, printed).map_err(|why| Broken::new(HookOutcome::BadOutput, why))
}

fn decide(event: Event, printed: Printed) -> Result<Answer, String> {
    let specific = printed.hook_specific_output.unwrap_or_default();
    let mut answer =
        Answer { note: printed.system_message, context: specific.additional_context, ..Answer::default() };
    if answer.context.is_some() {
        answer.decision = Some(HookVerdict::Context);
    }
    let decision = printed.decision.as_deref();
    match (event, decision) {
        (_, None) => {}
        (Event::PreToolUse, Some("approve")) => answer.decision = Some(HookVerdict::Allow),
        (Event::PreToolUse, Some("block")) => answer.decision = Some(HookVerdict::Deny),
        (Event::PostToolUse | Event::UserPromptSubmit, Some("block")) => {
            answer.decision = Some(HookVerdict::Block)
        }
        (Event::Stop, Some("block")) => answer.decision = Some(HookVerdict::Continue),
        (_, Some(other)) => {
            return Err(format!("`decision: {other:?}` is not one a {} hook gives", event.as_str()));
        }
    }
    answer.reason = printed.reason;
    if event == Event::PreToolUse
        && let Some(permission) = specific.permission_decision.as_deref()
    {
        answer.decision = Some(match permission {
            "allow" => HookVerdict::Allow,
            "deny" => HookVerdict::Deny,
            "ask" => HookVerdict::Ask,
            other => return Err(format!("`permissionDecision: {other:?}` must be allow, deny or ask")),
        });
        answer.reason = specific.permission_decision_reason.or(answer.reason);
    }
    if event == Event::Stop && answer.decision == Some(HookVerdict::Continue) && answer.reason.is_none() {
        return Err("`decision: \"block\"` of a Stop hook needs a `reason` (what to do next)".to_owned());
    }
    if printed.go_on == Some(false) {
        answer.decision = Some(HookVerdict::Stop);
        answer.reason = printed.stop_reason.or(answer.reason);
    }
    Ok(answer)
}

/// The last lines of a failed hook's stderr, for a one-line report.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    clip(&tail)
}

/// At most 300 characters of `text`.
fn clip(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    fn out(ended: Ended, stdout: &str, stderr: &str) -> Output {
        Output { ended, stdout: stdout.as_bytes().to_vec(), stderr: stderr.into(), took: Duration::ZERO }
    }

    fn ok(event: Event, stdout: &str) -> Answer {
        understand(event, &out(Ended::Exited(0), stdout, "")).unwrap()
    }

    fn broken(event: Event, output: Output) -> Broken {
        understand(event, &output).unwrap_err()
    }

    #[test]
    fn exit_2_blocks_with_stderr_as_the_reason() {
        let deny =
            understand(Event::PreToolUse, &out(Ended::Exited(2), "{\"ignored\":1}", "no pushes\n")).unwrap();
        assert_eq!((deny.decision, deny.reason.as_deref()), (Some(HookVerdict::Deny), Some("no pushes")));
        let go_on = understand(Event::Stop, &out(Ended::Exited(2), "", "run the tests")).unwrap();
        assert_eq!(go_on.decision, Some(HookVerdict::Continue));
        let note = understand(Event::SessionStart, &out(Ended::Exited(2), "", "hello")).unwrap();
        assert_eq!((note.decision, note.note.as_deref()), (None, Some("hello")));
    }

    #[test]
    fn json_decisions_are_read_per_event() {
        let allow = ok(
            Event::PreToolUse,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "pushes need a look"}}"#,
        );
        assert_eq!(
            (allow.decision, allow.reason.as_deref()),
            (Some(HookVerdict::Ask), Some("pushes need a look"))
        );
        assert_eq!(ok(Event::PreToolUse, r#"{"decision": "approve"}"#).decision, Some(HookVerdict::Allow));
        let post =
            ok(Event::PostToolUse, r#"{"hookSpecificOutput": {"additionalContext": "lint: 2 warnings"}}"#);
        assert_eq!(
            (post.decision, post.context.as_deref()),
            (Some(HookVerdict::Context), Some("lint: 2 warnings"))
        );
        let stop = ok(Event::Stop, r#"{"decision": "block", "reason": "tests fail"}"#);
        assert_eq!(
            (stop.decision, stop.reason.as_deref()),
            (Some(HookVerdict::Continue), Some("tests fail"))
        );
        let halt = ok(Event::PostToolUse, r#"{"continue": false, "stopReason": "enough"}"#);
        assert_eq!((halt.decision, halt.reason.as_deref()), (Some(HookVerdict::Stop), Some("enough")));
        let prompt = ok(Event::UserPromptSubmit, "The time is 10:00.\n");
        assert_eq!(prompt.context.as_deref(), Some("The time is 10:00."));
        assert_eq!(ok(Event::PreToolUse, "checked\n"), Answer::default(), "plain text is ignored here");
        assert_eq!(ok(Event::Stop, ""), Answer::default());
    }

    #[test]
    fn broken_runs_say_what_went_wrong() {
        let garbage = broken(Event::PreToolUse, out(Ended::Exited(0), "{\"decision\": oops", ""));
        assert_eq!(garbage.outcome, HookOutcome::BadOutput);
        assert!(garbage.error.contains("not the JSON a hook answers"), "{}", garbage.error);
        let wrong = broken(
            Event::PreToolUse,
            out(Ended::Exited(0), r#"{"hookSpecificOutput": {"permissionDecision": "maybe"}}"#, ""),
        );
        assert!(wrong.error.contains("must be allow, deny or ask"), "{}", wrong.error);
        let typed = broken(Event::Stop, out(Ended::Exited(0), r#"{"decision": 3}"#, ""));
        assert_eq!(typed.outcome, HookOutcome::BadOutput);
        let reasonless = broken(Event::Stop, out(Ended::Exited(0), r#"{"decision": "block"}"#, ""));
        assert!(reasonless.error.contains("needs a `reason`"), "{}", reasonless.error);
        let crashed = broken(Event::Stop, out(Ended::Exited(1), "", "line 1\nTraceback\nKeyError: 'x'\n"));
        assert_eq!(crashed.outcome, HookOutcome::Failed);
        assert_eq!(crashed.error, "exited with status 1: line 1 / Traceback / KeyError: 'x'");
        let slow = broken(Event::Stop, out(Ended::TimedOut(Duration::from_secs(2)), "", ""));
        assert_eq!(
            (slow.outcome, slow.error.as_str()),
            (HookOutcome::TimedOut, "did not finish within 2 s and was stopped")
        );
        assert_eq!(broken(Event::Stop, out(Ended::TooLarge, "", "")).outcome, HookOutcome::BadOutput);
        let binary = Output { stdout: vec![0xff, 0xfe], ..out(Ended::Exited(0), "", "") };
        assert_eq!(broken(Event::PostToolUse, binary).outcome, HookOutcome::BadOutput);
    }
}
