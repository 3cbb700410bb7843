#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Calling built-in tools directly.

use std::path::Path;
use std::sync::Arc;

use keel_agent::{ToolContext, ToolError, ToolOutput};
use keel_tools::{ToolsConfig, builtin};

/// Runs tool `name` with raw `args` in `workspace`.
pub async fn call_with(
    config: ToolsConfig,
    ctx: ToolContext,
    name: &str,
    args: &serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let registry = builtin(Arc::new(config));
    let tool = registry.get(name).unwrap();
    let prepared = tool.prepare(&args.to_string())?;
    prepared(ctx).await
}

/// Runs tool `name` with default settings, except that files need not be read before
/// they are changed (each call here is a fresh session; `seen.rs` tests that rule).
pub async fn call(workspace: &Path, name: &str, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let mut ctx = ToolContext::new(workspace);
    ctx.artifacts = Some(Arc::from(workspace.join(".keel-artifacts").as_path()));
    let config = ToolsConfig { read_before_change: false, ..ToolsConfig::default() };
    call_with(config, ctx, name, &args).await
}

/// The text of a successful call.
pub async fn ok(workspace: &Path, name: &str, args: serde_json::Value) -> String {
    match call(workspace, name, args).await {
        Ok(output) => output.content,
        Err(e) => panic!("{name} failed: {} ({})", e.message, e.code()),
    }
}

/// The error of a failed call.
pub async fn err(workspace: &Path, name: &str, args: serde_json::Value) -> ToolError {
    match call(workspace, name, args).await {
        Ok(output) => panic!("{name} should fail, got: {}", output.content),
        Err(e) => e,
    }
}
