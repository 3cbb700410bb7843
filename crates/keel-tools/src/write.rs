//! `write_file`: create or overwrite a file.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::undo::Keeper;
use crate::workspace::Roots;

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path; missing folders are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// Writes whole files.
#[derive(Debug, Clone)]
pub struct WriteFile {
    config: Arc<ToolsConfig>,
}

impl WriteFile {
    /// A write tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        WriteFile { config }
    }
}

/// Writes `content` to `path` under `roots`; returns the report for the model.
pub fn write(roots: &Roots, path: &str, content: &str) -> Result<String, ToolError> {
    write_kept(roots, path, content, None)
}

/// [`write`], keeping the file as it was for undo first when `keep` is given.
pub fn write_kept(
    roots: &Roots,
    path: &str,
    content: &str,
    keep: Option<&Keeper>,
) -> Result<String, ToolError> {
    // The old size comes from the file's metadata: an old file is read only for undo.
    let (mut file, canonical, before) = roots.open_write(path)?;
    if let Some(keeper) = keep
        && let Err(e) = keeper.keep(&canonical, before.is_some().then_some(&file))
    {
        tracing::warn!("cannot keep `{path}` for undo: {e}");
    }
    let io = |e: std::io::Error| ToolError::msg(format!("cannot write `{path}`: {e}"));
    file.set_len(0).map_err(io)?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0)).map_err(io)?;
    file.write_all(content.as_bytes()).map_err(io)?;
    let lines = content.lines().count();
    let shown = roots.display(&canonical);
    Ok(match before {
        None => format!("Created {shown} ({} bytes, {lines} lines).", content.len()),
        Some(old) => {
            format!("Overwrote {shown} (was {old} bytes, now {} bytes, {lines} lines).", content.len())
        }
    })
}

impl Tool for WriteFile {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create a file, or replace a file's whole content. For small changes to an existing file use edit_file."
    }

    fn call(
        &self,
        args: WriteArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        let check = self.config.read_before_change;
        let keeper = ctx.artifacts.as_ref().map(|dir| Keeper::new(dir, &ctx.call_id));
        crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            if check {
                crate::seen::require(roots, &state, &args.path, "write_file")?;
            }
            let report = write_kept(roots, &args.path, &args.content, keeper.as_ref())?;
            crate::seen::mark(roots, &state, &args.path);
            Ok(report)
        })
    }
}
