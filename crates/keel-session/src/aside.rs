//! Model requests beside the conversation (`model/aside`) and the turn's intent
//! (`turn/intent`): "model-visible means logged" holds for every request keel makes,
//! not only the loop's.

use serde::{Deserialize, Serialize};

use keel_llm::{AssistantMessage, ToolChoice, ToolDefinition};

/// Data of `model/aside`: one request made beside the conversation and its reply. The
/// request is whole (system prompt, the one user message, tools, tool choice,
/// temperature), so it can be sent again from the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelAside {
    /// What it was for (`intent`, `change_file`, `answer`, …).
    pub purpose: String,
    /// The tool call it was made for, when a tool made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The system prompt.
    pub system: String,
    /// The one user message.
    pub prompt: String,
    /// The tools offered (usually none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// Whether tools could, had to or could not be called.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The sampling temperature asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<serde_json::Number>,
    /// The cap on the reply's tokens asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The reply, with its usage; `None` when the request failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<AssistantMessage>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wants {
    /// Files changed (or created, or a command that changes something).
    Change,
    /// Only an answer: nothing should change.
    Answer,
    /// A change and an answer.
    Both,
}

/// Data of `turn/intent`: what the turn's task asks for, each part `None` when it could
/// not be told (rules that act on certainty then leave the turn alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskIntent {
    /// A change, an answer, or both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wants: Option<Wants>,
    /// The task asks to run something to check the work (tests, the script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<bool>,
    /// The task is about layout: blank lines, whitespace, indentation or line endings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<bool>,
}

impl TaskIntent {
    /// Sure the task wants files changed, and only that (a task that wants a change
    /// and an answer may have been read so by a model unsure which: the rules that push
    /// toward a change leave it alone).
    pub fn asks_for_change(&self) -> bool {
        self.wants == Some(Wants::Change)
    }

    /// Sure the task wants files changed, with or without an answer: what a rule needs
    /// that asks only when nothing changed (a task that wants a file and an answer is not
    /// done without the file).
    pub fn wants_a_change(&self) -> bool {
        matches!(self.wants, Some(Wants::Change | Wants::Both))
    }

    /// Sure the task wants only an answer.
    pub fn is_question(&self) -> bool {
        self.wants == Some(Wants::Answer)
    }

    /// Sure the task asks for a check to be run.
    pub fn names_a_check(&self) -> bool {
        self.check == Some(true)
    }

    /// Sure the task is about layout.
    pub fn about_layout(&self) -> bool {
        self.layout == Some(true)
    }
}

/// What a tool call does, as its tool declares it: read by the rules that would otherwise
/// match tool names (compaction's file list, the fresh-start note, undo, the finish
/// checks, the question guard), so a new tool (or an MCP tool with annotations) is
/// handled without touching them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Effect {
    /// Reads only; `path` when it reads one file.
    Reads {
        /// The file read, as the call named it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// Writes the file at `path` (its content: undo can put it back).
    Writes {
        /// The file written, as the call named it.
        path: String,
    },
    /// Runs a command: may change anything, and counts as running a check.
    Runs,
    /// Delivers the turn's answer.
    Concludes,
    /// Sets the plan the agent keeps; changes nothing in the project.
    Plans {
        /// The whole plan as it now stands.
        steps: Vec<crate::plan::PlanStep>,
    },
    /// Reads a resource over the network (a GET of `url`): changes nothing here, but
    /// reaches outside the machine.
    Fetches {
        /// The URL, as the call named it.
        url: String,
    },
    /// Changes something else, or says nothing of what it does. A kind this keel does
    /// not know (written by a newer one) reads as this.
    #[serde(other)]
    Other,
}

impl Effect {
    /// Whether the call changes nothing.
    pub fn read_only(&self) -> bool {
        matches!(
            self,
            Effect::Reads { .. } | Effect::Concludes | Effect::Plans { .. } | Effect::Fetches { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Effect;

    /// A log written by a newer keel, whose tools declare effects this one does not
    /// know, still loads: the unknown kind reads as `Other`.
    #[test]
    fn an_unknown_effect_kind_reads_as_other() {
        let read = |json: &str| serde_json::from_str::<Effect>(json).unwrap();
        assert_eq!(read(r#"{"kind": "teleports", "to": "mars"}"#), Effect::Other);
        assert_eq!(read(r#"{"kind": "writes", "path": "a.txt"}"#), Effect::Writes { path: "a.txt".into() });
        assert_eq!(read(r#"{"kind": "other"}"#), Effect::Other);
    }
}
