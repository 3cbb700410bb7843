//! `answer`: the model's final answer, as a tool call that ends the turn. With every
//! step required to call a tool (`AgentConfig::always_call`), this is how a model stops;
//! a small model then never narrates where it should act.

use keel_agent::ToolErrorKind;
use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `answer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerArgs {
    /// The answer for the user: what you found or did.
    pub text: String,
}

/// What the answer tools tell the model.
pub(crate) const DESCRIPTION: &str =
    "Finish: give the user your final answer (what you found or did). Call it only when the task is done.";

/// Ends the turn with an answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Answer;

impl Tool for Answer {
    type Args = AnswerArgs;

    fn name(&self) -> &str {
        "answer"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effect(&self, _arguments: &serde_json::Value) -> keel_agent::Effect {
        keel_agent::Effect::Concludes
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: AnswerArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        says_something(&args.text)?;
        Ok(ToolOutput::text(args.text).concluding())
    }
}

/// Refuses an answer that is empty or says nothing.
pub(crate) fn says_something(text: &str) -> Result<(), ToolError> {
    if text.trim().is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "the answer is empty; say what you found or did",
        ));
    }
    // A placeholder (`...`, `-`) says nothing: the 1.5B model answered "..." after
    // writing a file, and the turn ended with that.
    if !text.chars().any(char::is_alphanumeric) {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "the answer `{}` says nothing; say what you found or did",
                text.trim().chars().take(40).collect::<String>()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(text: &str) -> Result<ToolOutput, ToolError> {
        Answer.call(AnswerArgs { text: text.to_owned() }, ToolContext::new(".")).await
    }

    #[tokio::test]
    async fn an_answer_must_say_something() {
        let done = answer("feature/login-form").await.unwrap();
        assert_eq!(done.content, "feature/login-form");
        assert!(done.concludes_turn);
        for empty in ["", "  \n"] {
            assert_eq!(
                answer(empty).await.unwrap_err().message,
                "the answer is empty; say what you found or did"
            );
        }
        let error = answer(" ... ").await.unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
        assert_eq!(error.message, "the answer `...` says nothing; say what you found or did");
        assert!(answer("42").await.is_ok());
        // A long placeholder is not echoed whole.
        let long = answer(&"-".repeat(5000)).await.unwrap_err().message;
        assert!(long.len() < 120, "{long}");
    }
}
