//! keel's built-in coding tools: `shell`, `read_file`, `write_file`, `edit_file`,
//! `list_files`, `grep`, `glob`, and `update_plan` (the agent's plan). Every path is confined to the workspace (see
//! [`workspace::Roots`]); [`PermissionPolicy`] decides which calls may run.
//!
//! ```
//! use std::sync::Arc;
//! let tools = keel_tools::builtin(Arc::new(keel_tools::ToolsConfig::default()));
//! assert_eq!(tools.names().collect::<Vec<_>>(),
//!            ["shell", "read_file", "write_file", "edit_file", "list_files", "grep", "glob", "update_plan"]);
//! ```

pub mod aids;
pub mod answer;
mod blank_lines;
pub mod change;
pub mod changes;
mod deny_list;
mod deny_net;
mod diffs;
pub mod edit;
pub mod environment;
pub mod glob;
pub mod grep;
pub mod grounded;
mod keyed;
mod leftovers;
pub mod list;
mod loose;
mod near;
mod no_repository;
pub mod output;
pub mod overwrite;
mod pasted;
mod plain;
pub mod plan;
mod policy;
pub mod profile;
pub mod question;
pub mod read;
pub mod renames;
mod repeated;
pub mod rules;
mod sandboxed;
pub mod script;
mod seen;
pub mod shell;
pub mod skills;
mod suggest;
pub mod syntax;
pub mod undo;
pub mod web_fetch;
pub mod workspace;
pub mod write;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_agent::{ToolContext, ToolRegistry};

pub use deny_list::DEFAULT_DENY;
pub use policy::{AskAnswer, AskFn, AskRequest, PermissionMode, PermissionPolicy};

/// Settings shared by the built-in tools.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// Folders outside the workspace that tools may also use.
    pub extra_roots: Vec<PathBuf>,
    /// Default shell timeout (120 s).
    pub shell_timeout: Duration,
    /// Largest timeout a call may ask for (1 h).
    pub shell_max_timeout: Duration,
    /// Between SIGTERM and SIGKILL when stopping a command (2 s).
    pub kill_grace: Duration,
    /// What shell output is shown whole, and how it is cut.
    pub output_limits: output::OutputLimits,
    /// write_file and edit_file change an existing file only after the model has seen
    /// it in the session; the first attempt is refused with the file's content (default on).
    pub read_before_change: bool,
    /// write_file asks once before replacing an existing file with content that keeps
    /// fewer than half of its lines (a fragment written over a whole file); the same
    /// call again goes through (default on).
    pub confirm_overwrite: bool,
    /// write_file and edit_file say when a `.py` or `.json` file no longer parses after
    /// the change (default on; see [`syntax`]).
    pub syntax_check: bool,
    /// write_file and edit_file refuse a change that would leave a `.py` or `.json` file
    /// that parses unparsable, with the parser's message (default off; on for small
    /// models, whose broken edits piled up on a working file).
    pub keep_parsing: bool,
    /// Shell output shows paths under the project folder relative to it (default off; on
    /// for small models, which took the absolute path's last folder in an error message,
    /// `/tmp/…/project/hello.py`, for a subfolder to write into).
    pub relative_output_paths: bool,
    /// read_file (and the read-before-change refusal) shows each line with its number
    /// (default on). Off, the file's text comes as it is: small models copy line numbers
    /// into the files they write and into the sums they compute.
    pub numbered_lines: bool,
    /// Let write_file and edit_file write a file that has more than one hard link
    /// (default no: its other names may be outside the workspace). Reading such a file
    /// is always allowed.
    pub allow_hardlinks: bool,
    /// Environment variables passed to shell commands even though their name or value
    /// looks like a credential (see [`keel_sandbox::secrets::is_secret`]), e.g. `GITHUB_TOKEN`.
    pub env_passthrough: Vec<String>,
    /// The program that launches shell commands so they die with this process and run in
    /// a PID namespace where possible (see [`launch`]); `None` runs `bash -c` directly.
    /// The `keel` binary sets itself here.
    pub launcher: Option<keel_sandbox::launch::Launcher>,
    /// The sandbox shell commands run in (default off; needs `launcher`). Its network
    /// setting also decides whether `web_fetch` is offered.
    pub sandbox: keel_sandbox::SandboxSettings,
    /// `web_fetch`'s addresses, time and size bounds.
    pub web_fetch: web_fetch::WebFetchConfig,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            extra_roots: Vec::new(),
            shell_timeout: Duration::from_secs(120),
            shell_max_timeout: Duration::from_secs(3600),
            kill_grace: Duration::from_secs(2),
            output_limits: output::OutputLimits::default(),
            read_before_change: true,
            confirm_overwrite: true,
            syntax_check: true,
            keep_parsing: false,
            relative_output_paths: false,
            numbered_lines: true,
            allow_hardlinks: false,
            env_passthrough: Vec::new(),
            launcher: None,
            sandbox: keel_sandbox::SandboxSettings::default(),
            web_fetch: web_fetch::WebFetchConfig::default(),
        }
    }
}

/// Every built-in tool, in the order the model sees them.
pub fn builtin(config: Arc<ToolsConfig>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry
        .register(shell::Shell::new(Arc::clone(&config)))
        .register(read::ReadFile::new(Arc::clone(&config)))
        .register(write::WriteFile::new(Arc::clone(&config)))
        .register(edit::EditFile::new(Arc::clone(&config)))
        .register(list::ListFiles::new(Arc::clone(&config)))
        .register(grep::Grep::new(Arc::clone(&config)))
        .register(glob::Glob::new(config))
        .register(plan::UpdatePlan);
    registry
}

/// The name of every tool this crate provides, whichever profile offers it: the
/// built-in tools ([`builtin`]), then `answer`, `change_file`, `web_fetch`, `skill` and
/// `task` (subagents, [`keel_agent::subagent`]).
/// Permission rules are checked against these (and MCP servers' tools).
pub fn tool_names() -> Vec<String> {
    let mut registry = builtin(Arc::new(ToolsConfig::default()));
    registry.register(answer::Answer);
    registry
        .names()
        .chain([change::ChangeFile::NAME, web_fetch::NAME, skills::NAME, keel_agent::subagent::NAME])
        .map(str::to_owned)
        .collect()
}

/// Runs a file tool's work on the blocking pool with the call's confinement roots, and
/// wraps its text as the result.
pub(crate) async fn confined<F>(config: Arc<ToolsConfig>, ctx: keel_agent::ToolContext, work: F) -> ToolResult
where
    F: FnOnce(&workspace::Roots) -> Result<String, keel_agent::ToolError> + Send + 'static,
{
    let roots = workspace::Roots::for_call(&ctx, &config)?;
    let text = tokio::task::spawn_blocking(move || work(&roots))
        .await
        .map_err(|e| keel_agent::ToolError::msg(format!("the tool stopped unexpectedly: {e}")))??;
    Ok(keel_agent::ToolOutput::text(text))
}

type ToolResult = Result<keel_agent::ToolOutput, keel_agent::ToolError>;

/// The folder for files a call keeps (full shell output): the session's artifacts
/// folder, or a per-process temporary folder.
pub fn artifacts_dir(ctx: &ToolContext) -> PathBuf {
    match &ctx.artifacts {
        Some(dir) => dir.to_path_buf(),
        None => shell::fallback_artifacts(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tool a profile may offer, and only those, is in [`tool_names`].
    #[test]
    fn tool_names_are_the_tools_of_every_profile() {
        let names = tool_names();
        let config = Arc::new(ToolsConfig::default());
        let mut offered: Vec<String> = Vec::new();
        for profile in [profile::ToolProfile::Full, profile::ToolProfile::Small] {
            offered.extend(profile::tools(profile, Arc::clone(&config)).names().map(str::to_owned));
        }
        // skill: offered where skills are found (keel-cli's setup).
        // task: offered with the full profile by keel-cli's setup.
        offered.extend([
            "answer".to_owned(),
            "change_file".to_owned(),
            "skill".to_owned(),
            "task".to_owned(),
        ]);
        for name in &offered {
            assert!(names.contains(name), "{name} is missing from {names:?}");
        }
        for name in &names {
            assert!(offered.contains(name), "{name} is offered by no profile");
        }
    }
}
