//! `glob`: files by name pattern, newest first.

use keel_agent::ToolErrorKind;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::workspace::Roots;

/// Most paths listed.
pub const MAX_PATHS: usize = 200;

/// Arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// e.g. "src/**/*.rs" or "*.md".
    pub pattern: String,
}

/// Finds files by pattern.
#[derive(Debug, Clone)]
pub struct Glob {
    config: Arc<ToolsConfig>,
}

impl Glob {
    /// A glob tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        Glob { config }
    }
}

/// Runs the glob.
pub fn glob(roots: &Roots, args: &GlobArgs) -> Result<String, ToolError> {
    let pattern = args.pattern.trim().trim_start_matches("./");
    if pattern.starts_with('/') || pattern.split('/').any(|part| part == "..") {
        return Err(ToolError::new(
            ToolErrorKind::OutsideWorkspace,
            format!("`{pattern}` must be relative to the workspace, without `..`"),
        ));
    }
    let matcher = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::new(ToolErrorKind::InvalidGlob, format!("invalid glob `{pattern}`: {e}")))?
        .compile_matcher();
    // A pattern without a slash matches names at any depth, like `find -name`.
    let name_only = !pattern.contains('/');
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    for entry in ignore::WalkBuilder::new(roots.root()).require_git(false).git_global(false).build().flatten()
    {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let shown = roots.display(entry.path());
        let hit = matcher.is_match(&shown)
            || (name_only && entry.file_name().to_str().is_some_and(|n| matcher.is_match(n)));
        if hit {
            let modified =
                entry.metadata().ok().and_then(|m| m.modified().ok()).unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((modified, shown));
        }
    }
    if found.is_empty() {
        return Ok(format!("No files match `{pattern}`."));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut out: Vec<String> = found.into_iter().take(MAX_PATHS).map(|(_, p)| p).collect();
    if total > out.len() {
        out.push(format!("[... {} more; narrow the pattern]", total - MAX_PATHS));
    }
    Ok(out.join("\n"))
}

impl Tool for Glob {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Find files by glob pattern, newest first."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn call(
        &self,
        args: GlobArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        crate::confined(Arc::clone(&self.config), ctx, move |roots| glob(roots, &args))
    }
}
