//! Tools in a replay: the recorded result of each call instead of running it
//! (`--tools recorded`, and always for MCP tools and `web_fetch`: no server is started,
//! nothing is fetched), and the user's recorded answers to permission questions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_agent::{DynTool, PreparedCall, ToolError, ToolErrorKind, ToolOutput, ToolRegistry};
use keel_llm::ToolDefinition;
use keel_session::ToolResultData;
use keel_tools::{AskAnswer, AskFn, AskRequest};

use super::script::RecordedCall;

/// Recorded results by call id.
pub type Results = Arc<HashMap<String, ToolResultData>>;

/// The results the recording has, by call id.
pub fn results(calls: &HashMap<String, RecordedCall>) -> Results {
    Arc::new(calls.iter().filter_map(|(id, call)| Some((id.clone(), call.result.clone()?))).collect())
}

/// The recorded result of call `id`, as the tool would return it.
fn recorded(results: &Results, id: &str) -> Result<ToolOutput, ToolError> {
    let Some(result) = results.get(id) else {
        return Err(ToolError::new(
            ToolErrorKind::NotStarted,
            "keel replay: the recording has no result for this call",
        ));
    };
    match result.error_code.as_deref() {
        Some(code) if result.is_error && code != "tool_error" => {
            Err(ToolError::new(ToolErrorKind::parse(code), result.content.clone()))
        }
        _ => Ok(ToolOutput {
            content: result.content.clone(),
            is_error: result.is_error,
            concludes_turn: result.concludes_turn,
            change: result.change.clone(),
            images: result.images.clone(),
            ..ToolOutput::default()
        }),
    }
}

/// A tool of keel's whose calls are checked as keel checks them now (unknown fields,
/// wrong types), then answered with the recorded result instead of running.
struct FromLog {
    tool: Arc<dyn DynTool>,
    results: Results,
}

impl DynTool for FromLog {
    fn definition(&self) -> &ToolDefinition {
        self.tool.definition()
    }

    fn is_read_only(&self) -> bool {
        self.tool.is_read_only()
    }

    fn is_concurrency_safe(&self) -> bool {
        self.tool.is_concurrency_safe()
    }

    fn repeatable(&self) -> bool {
        self.tool.repeatable()
    }

    fn reads_history(&self) -> bool {
        self.tool.reads_history()
    }

    fn effect(&self, arguments: &str) -> keel_session::Effect {
        self.tool.effect(arguments)
    }

    fn prepare(&self, arguments: &str) -> Result<PreparedCall, ToolError> {
        // Never run: only its arguments are checked.
        drop(self.tool.prepare(arguments)?);
        let results = Arc::clone(&self.results);
        Ok(Box::new(move |ctx| Box::pin(async move { recorded(&results, &ctx.call_id) })))
    }
}

/// A tool the recording offered that keel does not have here (an MCP server's): its
/// definition as recorded, its results from the recording.
struct Recorded {
    definition: ToolDefinition,
    results: Results,
}

impl DynTool for Recorded {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn is_concurrency_safe(&self) -> bool {
        false
    }

    fn prepare(&self, _arguments: &str) -> Result<PreparedCall, ToolError> {
        let results = Arc::clone(&self.results);
        Ok(Box::new(move |ctx| Box::pin(async move { recorded(&results, &ctx.call_id) })))
    }
}

/// keel's tools that reach the network: answered from the recording even when the others
/// run (a replay is deterministic and fetches nothing).
const NETWORK_TOOLS: &[&str] = &["web_fetch"];

/// The tools of a replay: keel's own (`from_log`: answered from the recording instead of
/// run; those that reach the network always are), then the recording's MCP tools (`mcp`),
/// always answered from the recording (their servers are not started).
pub fn registry(
    own: &ToolRegistry,
    mcp: &[ToolDefinition],
    results: &Results,
    from_log: bool,
) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for name in own.names() {
        let Some(tool) = own.get(name) else { continue };
        let tool = if from_log || NETWORK_TOOLS.contains(&name) {
            Arc::new(FromLog { tool: Arc::clone(tool), results: Arc::clone(results) }) as Arc<dyn DynTool>
        } else {
            Arc::clone(tool)
        };
        registry.register_dyn(tool);
    }
    for definition in mcp {
        if registry.get(&definition.name).is_none() {
            registry.register_dyn(Arc::new(Recorded {
                definition: definition.clone(),
                results: Arc::clone(results),
            }));
        }
    }
    registry
}

/// How the user answered the question about a call, read from its recorded result.
fn answer(result: Option<&ToolResultData>) -> AskAnswer {
    let Some(result) = result.filter(|r| r.error_code.as_deref() == Some("denied")) else {
        return AskAnswer::Allow;
    };
    let content = result.content.as_str();
    if !content.starts_with("The user declined `") {
        // Refused by a rule or the mode, not by the user: the policy refuses it again.
        return AskAnswer::Allow;
    }
    if content.contains("` and stopped the turn.") {
        return AskAnswer::DenyAndStop;
    }
    if let Some((_, words)) = content.split_once("` and said instead:\n") {
        let words = words.strip_suffix("\nDo what they said.").unwrap_or(words);
        return AskAnswer::DenyWithWords(words.to_owned());
    }
    AskAnswer::Deny
}

/// Answers permission questions as the user answered them in the recording: each
/// question takes the first recorded call of that tool with those arguments not yet
/// asked about; a call the recording never asked about is allowed.
pub fn ask_from_log(calls: &HashMap<String, RecordedCall>, order: &[String]) -> AskFn {
    let asked: Vec<(String, String, AskAnswer)> = order
        .iter()
        .filter_map(|id| calls.get(id))
        .map(|call| (call.name.clone(), call.arguments.clone(), answer(call.result.as_ref())))
        .collect();
    let asked = Arc::new(Mutex::new(asked.into_iter().map(Some).collect::<Vec<_>>()));
    Arc::new(move |request: AskRequest| {
        let mut asked = match asked.lock() {
            Ok(asked) => asked,
            Err(poisoned) => poisoned.into_inner(),
        };
        let found = asked.iter_mut().find(|slot| {
            slot.as_ref()
                .is_some_and(|(name, arguments, _)| *name == request.tool && *arguments == request.arguments)
        });
        let answer = found.and_then(Option::take).map_or(AskAnswer::Allow, |(_, _, answer)| answer);
        Box::pin(async move { answer })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(content: &str) -> ToolResultData {
        ToolResultData {
            call_id: "c".into(),
            name: "shell".into(),
            source_seq: 1,
            content: content.into(),
            is_error: true,
            error_code: Some("denied".into()),
            concludes_turn: false,
            duration_ms: None,
            change: None,
            images: Vec::new(),
        }
    }

    #[test]
    fn the_users_answers_are_read_back_from_the_refusals() {
        assert_eq!(answer(None), AskAnswer::Allow);
        assert_eq!(answer(Some(&denied("The user declined `shell`. Do not retry it."))), AskAnswer::Deny);
        assert_eq!(
            answer(Some(&denied("The user declined `shell` and stopped the turn."))),
            AskAnswer::DenyAndStop
        );
        assert_eq!(
            answer(Some(&denied(
                "The user declined `shell` and said instead:\nuse make\nDo what they said."
            ))),
            AskAnswer::DenyWithWords("use make".into())
        );
        assert_eq!(answer(Some(&denied("`shell` was not run: keel is in read-only mode"))), AskAnswer::Allow);
    }
}
