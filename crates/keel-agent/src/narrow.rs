//! A tool offered with fewer arguments and a shorter description than it takes: for small
//! models, every optional argument is a chance to get a call wrong.

use std::sync::Arc;

use keel_llm::ToolDefinition;
use serde_json::Value;

use crate::schema;
use crate::tool::{DynTool, PreparedCall};
use crate::tool_error::ToolError;

/// `tool`, offered with only the arguments in `keep` (the others take their defaults)
/// and described as `description`. A call naming any other argument is refused the way
/// an unknown field is.
pub fn narrow(tool: Arc<dyn DynTool>, keep: &[&str], description: &str) -> Arc<dyn DynTool> {
    let mut parameters: Value =
        serde_json::from_str(tool.definition().parameters.get()).unwrap_or(Value::Null);
    let inner_summary = schema::summarize(&parameters);
    if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
        properties.retain(|name, _| keep.contains(&name.as_str()));
    }
    if let Some(Value::Array(required)) = parameters.get_mut("required") {
        required.retain(|name| name.as_str().is_some_and(|n| keep.contains(&n)));
    }
    let properties = schema::property_names(&parameters);
    let summary = schema::summarize(&parameters);
    let definition = ToolDefinition {
        name: tool.definition().name.clone(),
        description: description.to_owned(),
        parameters: serde_json::value::to_raw_value(&parameters)
            .unwrap_or_else(|_| tool.definition().parameters.clone()),
    };
    Arc::new(Narrowed { inner: tool, definition, properties, summary, inner_summary })
}

struct Narrowed {
    inner: Arc<dyn DynTool>,
    definition: ToolDefinition,
    properties: Vec<String>,
    summary: String,
    inner_summary: String,
}

impl DynTool for Narrowed {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn is_read_only(&self) -> bool {
        self.inner.is_read_only()
    }

    fn effect(&self, arguments: &str) -> keel_session::Effect {
        self.inner.effect(arguments)
    }

    fn is_concurrency_safe(&self) -> bool {
        self.inner.is_concurrency_safe()
    }

    fn repeatable(&self) -> bool {
        self.inner.repeatable()
    }

    fn reads_history(&self) -> bool {
        self.inner.reads_history()
    }

    fn prepare(&self, arguments: &str) -> Result<PreparedCall, ToolError> {
        // Unknown fields are checked against the narrowed list first, so the message
        // names only what this tool offers.
        let _: serde_json::Map<String, Value> =
            crate::tool::parse_arguments(&self.definition.name, arguments, &self.properties, &self.summary)?;
        self.inner.prepare(arguments).map_err(|mut error| {
            error.message = error.message.replace(&self.inner_summary, &self.summary);
            error
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolErrorKind;
    use crate::tool::{Tool, ToolContext, ToolOutput, typed};
    use schemars::JsonSchema;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// The command.
        command: String,
        /// Seconds.
        #[serde(default)]
        timeout_secs: Option<u64>,
    }

    struct Run;

    impl Tool for Run {
        type Args = Args;
        fn name(&self) -> &str {
            "run"
        }
        fn description(&self) -> &str {
            "Runs a command with many options."
        }
        async fn call(&self, args: Args, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(format!("{} {:?}", args.command, args.timeout_secs)))
        }
    }

    #[tokio::test]
    async fn only_the_kept_arguments_are_offered_and_accepted() {
        let tool = narrow(typed(Run), &["command"], "Run a command.");
        assert_eq!(tool.definition().description, "Run a command.");
        let schema: Value = serde_json::from_str(tool.definition().parameters.get()).unwrap();
        assert_eq!(schema["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["command"]);
        assert_eq!(schema["required"], serde_json::json!(["command"]));
        let run = tool.prepare(r#"{"command": "ls"}"#).unwrap();
        assert_eq!(run(ToolContext::new(".")).await.unwrap().content, "ls None");
        let refused = tool.prepare(r#"{"command": "ls", "timeout_secs": 5}"#).err().unwrap();
        assert_eq!(refused.kind, ToolErrorKind::InvalidArguments);
        assert!(refused.message.contains("unknown field `timeout_secs`"), "{}", refused.message);
        assert!(refused.message.contains("{command: string (required)}"), "{}", refused.message);
        let wrong = tool.prepare(r#"{"command": 5}"#).err().unwrap();
        assert!(wrong.message.contains("{command: string (required)}"), "{}", wrong.message);
        assert!(!wrong.message.contains("timeout_secs"), "{}", wrong.message);
    }
}
