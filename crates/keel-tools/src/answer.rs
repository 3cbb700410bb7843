//! `answer`: the model's final answer, as a tool call that ends the turn. With every
//! step required to call a tool (`AgentConfig::always_call`), this is how a model stops;
//! a small model then never narrates where it should act.

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `answer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerArgs {
    /// The answer for the user: what you found (names, numbers and output exactly as the
    /// tools showed them) or did.
    pub text: String,
}

/// Ends the turn with an answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Answer;

impl Tool for Answer {
    type Args = AnswerArgs;

    fn name(&self) -> &str {
        "answer"
    }

    fn description(&self) -> &str {
        "Finish: give the user your final answer (what you found or did). Quote names, numbers and program output exactly as the tools showed them. Call it only when the task is done."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, args: AnswerArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        if args.text.trim().is_empty() {
            return Err(ToolError::new(
                "invalid_arguments",
                "the answer is empty; say what you found or did",
            ));
        }
        Ok(ToolOutput::text(args.text).concluding())
    }
}
