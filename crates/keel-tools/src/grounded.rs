//! The small profile's `answer`: a question's answer written from what the tools showed.
//!
//! A small model reads a tool's output and then answers something else: "the product is
//! 42 and the checksum 14" for `product=42 checksum=14`, "no uncommitted changes" right
//! after `git status` printed ` M src/app.py`, the `wc -l` count with the header line.
//! Asked plainly — the turn's latest outputs, then the question, no tools and no JSON — the
//! same 1.5B model quoted the output, named the file and counted 37. So when the task is
//! a question, `answer` asks the model that way and ends the turn with its reply; the
//! model's own draft (the call's `text`) stays in the log beside it. A task whose intent
//! could not be told (the model's two readings disagreed) is treated as a question when
//! nothing in the project changed during the turn: the turn only answered.

use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use keel_llm::{Message, ModelClient, Usage};

use crate::answer::{AnswerArgs, says_something};

/// Most tool outputs shown, the latest ones. Four left out the one that answered: the
/// 1.5B model ran `python3 leaderboard.py`, then read the script, grepped it and read the
/// CSV twice, and the answer written from the last four worked the winner out wrongly
/// ("Bruno with 77 points"); given the command's output too it quoted "Dana with 175
/// points" (replayed on the recorded prompts, issue 29 notes of 2026-12-07).
const MAX_OUTPUTS: usize = 8;
/// Most characters of each output shown.
const MAX_OUTPUT_CHARS: usize = 2000;
/// Most characters of all the outputs shown: an older output that would pass it is left
/// out (a smaller one before it may still fit).
const MAX_EVIDENCE_CHARS: usize = 6000;
/// Temperature of the plain request: it quotes.
const TEMPERATURE: f32 = 0.2;

/// `answer` that writes a question's answer from the turn's tool outputs.
pub struct GroundedAnswer {
    model: Arc<dyn ModelClient>,
}

impl GroundedAnswer {
    /// An answer tool that asks `model` plainly.
    pub fn new(model: Arc<dyn ModelClient>) -> Self {
        GroundedAnswer { model }
    }
}

/// What a call was, for the heading of its output: a shell command as itself.
fn describe(call: &keel_llm::ToolCall) -> String {
    let args: Option<serde_json::Value> = serde_json::from_str(&call.arguments).ok();
    if call.name == "shell"
        && let Some(command) = args.as_ref().and_then(|a| a.get("command")).and_then(|c| c.as_str())
    {
        return format!("`{}`", command.chars().take(200).collect::<String>());
    }
    let arguments: String = call.arguments.chars().take(200).collect();
    format!("{} {arguments}", call.name)
}

/// The environment block and the latest tool outputs of the turn that began with `task`
/// (at most [`MAX_OUTPUTS`], [`MAX_EVIDENCE_CHARS`] in all), oldest first, as (heading,
/// text).
fn evidence(history: &[Message], task: &str) -> Vec<(String, String)> {
    // The turn begins at its prompt (which may share a message with the environment block).
    let start = history
        .iter()
        .rposition(|m| matches!(m, Message::User(u) if u.content.trim_end().ends_with(task.trim())))
        .unwrap_or(0);
    let turn = &history[start..];
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut shown_chars = 0;
    for (index, message) in turn.iter().enumerate().rev() {
        let Message::ToolResult(result) = message else { continue };
        if result.name == "answer" || outputs.len() == MAX_OUTPUTS {
            continue;
        }
        let call = turn[..index].iter().rev().find_map(|m| match m {
            Message::Assistant(a) => a.tool_calls().find(|c| c.id == result.call_id),
            _ => None,
        });
        let heading = format!("Output of {}", call.map_or_else(|| result.name.clone(), describe));
        let text: String = result.content.chars().take(MAX_OUTPUT_CHARS).collect();
        // The same call made again with the same output is shown once, where it was last.
        if outputs.iter().any(|(h, t)| *h == heading && *t == text) {
            continue;
        }
        let chars = text.chars().count();
        if shown_chars + chars > MAX_EVIDENCE_CHARS {
            continue;
        }
        shown_chars += chars;
        outputs.push((heading, text));
    }
    let environment = history.iter().find_map(|m| match m {
        Message::User(u) => {
            let inside = u.content.strip_prefix("<environment>")?;
            let end = inside.find("</environment>")?;
            Some(inside[..end].trim().to_owned())
        }
        _ => None,
    });
    outputs.extend(environment.map(|e| ("The project".to_owned(), e)));
    outputs.reverse();
    outputs
}

/// The plain request: the outputs, then the question.
fn prompt(evidence: &[(String, String)], task: &str) -> String {
    let fence = crate::change::fence_for(evidence.iter().map(|(_, t)| t.as_str()));
    let mut prompt = String::new();
    for (heading, text) in evidence {
        let text = text.trim_end();
        prompt.push_str(&format!("{heading}:\n{fence}\n{text}\n{fence}\n\n"));
    }
    prompt.push_str(&format!("{} Answer from the output above, briefly; quote it exactly.", task.trim()));
    prompt
}

/// Asks the model; `None` when the request fails or the reply is empty. The exchange
/// comes back for the log either way.
async fn ask(
    model: &dyn ModelClient,
    prompt: String,
    ctx: &ToolContext,
) -> (Option<String>, Usage, keel_agent::ModelAside) {
    let asked = crate::plain::ask(model, "answer", prompt, TEMPERATURE, ctx.cancel.child_token()).await;
    match asked.result {
        Ok((text, usage)) => {
            let text = text.trim().to_owned();
            ((!text.is_empty()).then_some(text), usage, asked.aside)
        }
        Err(e) => {
            tracing::warn!("the plain answer request failed: {e}");
            (None, Usage::default(), asked.aside)
        }
    }
}

/// Whether the turn's answer is a question's: the task is sure to want only an answer,
/// or its intent could not be told and nothing in the project changed this turn (so the
/// turn answered, whatever the task was). Any other task's answer says what was done,
/// and the model's draft does that.
async fn answers_a_question(ctx: &ToolContext) -> bool {
    match ctx.intent.wants {
        Some(keel_session::Wants::Answer) => true,
        None => crate::changes::unchanged_this_turn(&ctx.workspace, &ctx.state).await,
        Some(_) => false,
    }
}

impl Tool for GroundedAnswer {
    type Args = AnswerArgs;

    fn name(&self) -> &str {
        "answer"
    }

    fn description(&self) -> &str {
        crate::answer::DESCRIPTION
    }

    fn effect(&self, _arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Concludes
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn reads_history(&self) -> bool {
        true
    }

    async fn call(&self, args: AnswerArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        says_something(&args.text)?;
        let draft = ToolOutput::text(args.text.clone()).concluding();
        let (Some(task), Some(history)) = (ctx.task.as_deref(), ctx.history.as_deref()) else {
            return Ok(draft);
        };
        if !answers_a_question(&ctx).await {
            return Ok(draft);
        }
        let shown = evidence(history, task);
        if !shown.iter().any(|(heading, _)| heading.starts_with("Output of")) {
            return Ok(draft);
        }
        match ask(self.model.as_ref(), prompt(&shown, task), &ctx).await {
            (Some(text), usage, aside) => {
                Ok(ToolOutput::text(text).concluding().with_usage(usage).with_asides(vec![aside]))
            }
            (None, usage, aside) => Ok(draft.with_usage(usage).with_asides(vec![aside])),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage, UserMessage};

    fn call(id: &str, name: &str, arguments: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::ToolCall(ToolCall::new(id, name, arguments))],
            ..AssistantMessage::default()
        })
    }

    fn result(id: &str, name: &str, content: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        })
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage::text(text))
    }

    #[test]
    fn the_evidence_is_the_environment_and_the_turns_latest_outputs() {
        let history = [
            user("<environment>\nGit: branch main\n</environment>\n\nOld task?"),
            call("0", "shell", r#"{"command": "ls"}"#),
            result("0", "shell", "old output"),
            user("What does calc.py print?"),
            call("1", "shell", r#"{"command": "python3 calc.py"}"#),
            result("1", "shell", "product=42\n[exit code: 0]"),
            call("2", "read_file", r#"{"path": "calc.py"}"#),
            result("2", "read_file", "1\tprint(42)"),
            call("3", "shell", r#"{"command": "python3 calc.py"}"#),
            result("3", "shell", "product=42\n[exit code: 0]"),
        ];
        let shown = evidence(&history, "What does calc.py print?");
        assert_eq!(
            shown,
            [
                ("The project".to_owned(), "Git: branch main".to_owned()),
                ("Output of read_file {\"path\": \"calc.py\"}".to_owned(), "1\tprint(42)".to_owned()),
                ("Output of `python3 calc.py`".to_owned(), "product=42\n[exit code: 0]".to_owned()),
            ]
        );
        assert_eq!(
            prompt(&shown[2..], "What does calc.py print?"),
            "Output of `python3 calc.py`:\n```\nproduct=42\n[exit code: 0]\n```\n\nWhat does calc.py print? Answer from the output above, briefly; quote it exactly."
        );
    }

    #[test]
    fn the_evidence_keeps_an_earlier_answering_output_within_its_budget() {
        let mut history = vec![user("what does the script print?")];
        history.push(call("0", "shell", r#"{"command": "python3 board.py"}"#));
        history.push(result("0", "shell", "winner: Dana with 175 points\n[exit code: 0]"));
        for (id, path) in [("1", "board.py"), ("2", "scores.csv"), ("3", "board.py"), ("4", "notes.txt")] {
            history.push(call(id, "read_file", &format!(r#"{{"path": "{path}", "id": {id}}}"#)));
            history.push(result(id, "read_file", &format!("content of {path}")));
        }
        let shown = evidence(&history, "what does the script print?");
        assert_eq!(shown.len(), 5, "{shown:#?}");
        assert_eq!(shown[0].0, "Output of `python3 board.py`");

        // Outputs past the budget are left out, the latest kept; a small older one fits.
        let big = "x".repeat(MAX_OUTPUT_CHARS - 10);
        let mut history = vec![user("What is in the logs?")];
        history.push(call("a", "shell", r#"{"command": "tail -1 small.log"}"#));
        history.push(result("a", "shell", "ok"));
        for id in ["b", "c", "d", "e"] {
            history.push(call(id, "read_file", &format!(r#"{{"path": "{id}.log"}}"#)));
            history.push(result(id, "read_file", &big));
        }
        let shown = evidence(&history, "What is in the logs?");
        let headings: Vec<&str> = shown.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            headings,
            [
                "Output of `tail -1 small.log`",
                "Output of read_file {\"path\": \"c.log\"}",
                "Output of read_file {\"path\": \"d.log\"}",
                "Output of read_file {\"path\": \"e.log\"}"
            ]
        );
    }
}
