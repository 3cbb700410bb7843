//! An MCP server's tool as a keel tool.

use keel_agent::ToolErrorKind;
use std::sync::{Arc, Weak};

use keel_agent::{DynTool, PreparedCall, ToolError, schema};
use keel_llm::ToolDefinition;
use serde_json::{Map, Value};

use futures::future::BoxFuture;
use keel_agent::ToolOutput;
use tokio_util::sync::CancellationToken;

use crate::error::{McpError, McpErrorKind};

/// What a tool needs of its server: a way to call one of its tools by the server's own
/// name. [`crate::server::Server`] implements it; a tool holds it weakly, so a server
/// shut down is not kept alive by the tools the model still has.
pub(crate) trait Remote: Send + Sync {
    /// Calls `tool` with `arguments`; the call stops when the returned future is dropped.
    fn call_tool(
        self: Arc<Self>,
        tool: String,
        arguments: Map<String, Value>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>>;
}

/// One tool of one MCP server, named `mcp__<server>__<tool>`. Its arguments are checked
/// against the server's input schema before the call is sent (see [`crate::schema`]);
/// it is read-only (runs without asking in `ask` mode, offered in `read-only` mode)
/// only when the server marks it `readOnlyHint`.
pub struct McpTool {
    definition: ToolDefinition,
    /// The server's own name for the tool.
    remote: String,
    server_name: String,
    schema: Value,
    summary: String,
    read_only: bool,
    server: Weak<dyn Remote>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.definition.name)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Most tools one server offers: every request carries them all.
pub(crate) const MAX_TOOLS: usize = 128;
/// Largest input schema and description offered (every request carries them).
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 4096;

impl McpTool {
    /// The tool as keel offers it, or why it is not offered (a schema too large to send
    /// with every request: [`McpErrorKind::Tool`]).
    pub(crate) fn new(
        server_name: &str,
        tool: &rmcp::model::Tool,
        server: Weak<dyn Remote>,
    ) -> Result<McpTool, McpError> {
        let mut schema = Value::Object(tool.input_schema.as_ref().clone());
        if let Value::Object(root) = &mut schema {
            // Providers want an object with properties; some servers leave them out.
            if !root.contains_key("properties") {
                root.insert("properties".into(), Value::Object(Map::new()));
            }
            root.entry("type").or_insert_with(|| Value::String("object".into()));
            root.remove("$schema");
        }
        let mut description = tool
            .description
            .as_deref()
            .map(str::to_owned)
            .or_else(|| tool.title.clone())
            .unwrap_or_else(|| format!("The `{}` tool of the MCP server `{server_name}`.", tool.name));
        if let Some((cut, _)) = description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
            description.truncate(cut);
            description.push('…');
        }
        let refused = |message: String| McpError::new(McpErrorKind::Tool, server_name, message);
        let parameters = serde_json::value::to_raw_value(&schema)
            .map_err(|e| refused(format!("its input schema cannot be sent: {e}")).caused_by(e))?;
        if parameters.get().len() > MAX_SCHEMA_BYTES {
            return Err(refused(format!(
                "its input schema is {} KiB; at most {} KiB is sent with every request",
                parameters.get().len() / 1024,
                MAX_SCHEMA_BYTES / 1024
            )));
        }
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
        Ok(McpTool {
            definition: ToolDefinition {
                name: crate::name::tool_name(server_name, &tool.name),
                description,
                parameters,
            },
            remote: tool.name.to_string(),
            server_name: server_name.to_owned(),
            summary: schema::summarize(&schema),
            schema,
            read_only,
            server,
        })
    }

    /// The name the server knows the tool by.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.server_name
    }

    /// Whether it is the same tool as `other` (same definition and hints).
    pub(crate) fn same_as(&self, other: &McpTool) -> bool {
        self.definition == other.definition
            && self.read_only == other.read_only
            && self.remote == other.remote
    }

    fn invalid(&self, problem: String) -> ToolError {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "Invalid arguments for `{}`: {problem}. Expected a JSON object {}.",
                self.definition.name, self.summary
            ),
        )
    }
}

impl DynTool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn is_concurrency_safe(&self) -> bool {
        self.read_only
    }

    fn prepare(&self, arguments: &str) -> Result<PreparedCall, ToolError> {
        let raw = arguments.trim();
        let raw = if raw.is_empty() { "{}" } else { raw };
        let mut value: Value =
            serde_json::from_str(raw).map_err(|e| self.invalid(format!("not valid JSON ({e})")))?;
        crate::schema::drop_null_optionals(&self.schema, &mut value);
        if !value.is_object() {
            return Err(self.invalid(format!("expected an object, got {}", keel_agent::json_kind(&value))));
        }
        if let Some(problem) = crate::schema::check(&self.schema, &value) {
            return Err(self.invalid(problem));
        }
        let Value::Object(map) = value else { return Err(self.invalid("expected an object".to_owned())) };
        let server = self.server.clone();
        let remote = self.remote.clone();
        let server_name = self.server_name.clone();
        Ok(Box::new(move |ctx| {
            Box::pin(async move {
                let Some(server) = server.upgrade() else {
                    return Err(ToolError::new(
                        ToolErrorKind::ServerUnavailable,
                        format!("the MCP server `{server_name}` was shut down"),
                    ));
                };
                server.call_tool(remote, map, ctx.cancel.clone()).await
            })
        }))
    }
}

/// Shares a tool as a [`DynTool`].
pub(crate) fn dyn_tool(tool: &Arc<McpTool>) -> Arc<dyn DynTool> {
    Arc::clone(tool) as Arc<dyn DynTool>
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server that is never there.
    struct Gone;

    impl Remote for Gone {
        fn call_tool(
            self: Arc<Self>,
            _: String,
            _: Map<String, Value>,
            _: CancellationToken,
        ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
            Box::pin(async { Err(ToolError::msg("gone")) })
        }
    }

    fn nowhere() -> Weak<dyn Remote> {
        Weak::<Gone>::new()
    }

    fn tool(name: &str, description: String, schema: Value) -> rmcp::model::Tool {
        let Value::Object(schema) = schema else { panic!("an object") };
        rmcp::model::Tool::new(name.to_owned(), description, Arc::new(schema))
    }

    /// Issue 28, item 11: a 5 MB schema went out with every request.
    #[test]
    fn a_schema_too_large_is_refused_and_a_long_description_cut() {
        let properties: Map<String, Value> = (0..5000)
            .map(|i| {
                (format!("field_{i}"), serde_json::json!({"type": "string", "description": "x".repeat(40)}))
            })
            .collect();
        let big = tool("big", "d".into(), serde_json::json!({"type": "object", "properties": properties}));
        let error = McpTool::new("s", &big, nowhere()).unwrap_err();
        assert_eq!(error.kind, McpErrorKind::Tool);
        assert!(error.message.contains("at most 64 KiB is sent with every request"), "{error}");
        let wordy = tool("wordy", "w".repeat(50_000), serde_json::json!({"type": "object"}));
        let made = McpTool::new("s", &wordy, nowhere()).unwrap();
        assert_eq!(made.definition().description.chars().count(), MAX_DESCRIPTION_CHARS + 1);
    }
}
