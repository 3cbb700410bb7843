//! One sandboxed shell call: its policy, its private TMPDIR, and the git guard around it.

use keel_agent::ToolErrorKind;
use std::path::{Path, PathBuf};

use keel_agent::{ToolError, ToolOutput};

use crate::ToolsConfig;
use keel_sandbox::{GitGuard, Policy, SandboxMode};

/// A call prepared for the sandbox.
pub(crate) struct Prepared {
    /// What the command may do.
    pub policy: Policy,
    /// Its private temporary folder (TMPDIR), removed after the call.
    pub tmp: PathBuf,
    git: Option<GitGuard>,
}

impl Prepared {
    /// Prepares a call in `workspace`; `None` when the sandbox is off. A sandbox that
    /// cannot be set up is an error: the command must not run unconfined.
    pub(crate) async fn new(
        config: &ToolsConfig,
        workspace: &Path,
        artifacts: &Path,
        call_id: &str,
    ) -> Result<Option<Prepared>, ToolError> {
        if config.sandbox.mode == SandboxMode::Off {
            return Ok(None);
        }
        let Some(launcher) = &config.launcher else {
            if config.sandbox.auto {
                return Ok(None);
            }
            return Err(ToolError::new(
                ToolErrorKind::SandboxUnavailable,
                "the sandbox needs keel's launcher (ToolsConfig::launcher), so the command was not run",
            ));
        };
        // A default sandbox applies where the system enforces it; a chosen one always
        // (the launcher then refuses to run what it cannot confine).
        if config.sandbox.auto
            && !keel_sandbox::launch::sandbox_support(&launcher.program).await.enforces(&config.sandbox)
        {
            return Ok(None);
        }
        let tmp = artifacts.join(format!("tmp-{call_id}"));
        std::fs::create_dir_all(&tmp).map_err(|e| {
            ToolError::new(
                ToolErrorKind::SandboxUnavailable,
                format!("cannot create the command's TMPDIR {}: {e}", tmp.display()),
            )
        })?;
        let policy = Policy::resolve(&config.sandbox, workspace, &tmp, &config.extra_roots);
        let Some(policy) = policy else { return Ok(None) };
        let git = (policy.mode == SandboxMode::WorkspaceWrite).then(|| GitGuard::take(workspace)).flatten();
        Ok(Some(Prepared { policy, tmp, git }))
    }

    /// After the command: undoes changes to git's hooks and config, removes the TMPDIR,
    /// and tells the model what the sandbox did.
    pub(crate) fn finish(self, output: &mut ToolOutput) {
        let mut notes = Vec::new();
        if let Some(git) = &self.git {
            let restored = git.restore();
            if !restored.is_empty() {
                notes.push(format!(
                    "[sandbox: the command changed {}; that was undone, because git hooks and config run commands outside the sandbox. Ask the user to make such changes.]",
                    restored.join(", ")
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
        let denied = ["Permission denied", "Operation not permitted", "Read-only file system"]
            .iter()
            .any(|needle| output.content.contains(needle));
        if output.is_error && denied {
            let scope = match self.policy.mode {
                SandboxMode::ReadOnly => {
                    "this session's sandbox is read-only: commands may write only to $TMPDIR"
                }
                _ => {
                    "the sandbox lets commands write only inside the project folder, $TMPDIR and the folders the user allowed (allowed_roots); a cache outside (cargo's, npm's) can live in the project (CARGO_HOME=.cargo, npm_config_cache=.npm)"
                }
            };
            let network = if self.policy.network { "" } else { "; the network is off" };
            notes.push(format!(
                "[sandbox: {scope}{network}. A write elsewhere fails with \"Permission denied\" or \"Read-only file system\".]"
            ));
        }
        for note in notes {
            output.content.push('\n');
            output.content.push_str(&note);
        }
    }
}
