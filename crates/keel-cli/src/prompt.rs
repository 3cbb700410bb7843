//! The system prompt: short, precise, plus `AGENTS.md` when present.

use std::path::Path;

use keel_tools::profile::ToolProfile;

/// Most bytes of one AGENTS.md that are included.
const MAX_AGENTS_BYTES: usize = 32 * 1024;

/// The base system prompt for a tool profile. It names no folder (the environment block
/// in the first message does), so it is the same in every project and its evaluation can
/// be reused.
pub fn base(profile: ToolProfile) -> &'static str {
    match profile {
        ToolProfile::Small => {
            "You are a coding agent working in the user's project folder (see the environment block). Use paths relative to it.
Work in steps, one tool call at a time: look at a file before you change it, change it with a tool (do not just show the change), then check it (run the script or the tests).
Tool results are for you, not for the user: after each one, call the next tool until the task is done. Then answer briefly with what you found or did."
        }
        _ => {
            "You are keel, a coding agent working in the user's project folder (see the environment block). Use paths relative to it. The file tools cannot reach outside it; shell commands run with the user's rights, so keep them inside it too.
Act only through tool calls (never write a call as text), leaving out optional arguments you do not need. Call independent read-only tools together.
Failures are reported: shell output ends with [exit code: N] (0 is success); other tools return an error that says what to fix.
Inspect before changing anything, make the smallest correct change, verify it (run the tests if there are any), then answer briefly with what you found or did."
        }
    }
}

fn read_capped(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.len() <= MAX_AGENTS_BYTES {
        return Some(text.to_owned());
    }
    let mut end = MAX_AGENTS_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!("{}\n[AGENTS.md cut at {MAX_AGENTS_BYTES} bytes]", &text[..end]))
}

/// The full system prompt: the base, then the user's and the workspace's AGENTS.md.
pub fn system_prompt(workspace: &Path, profile: ToolProfile) -> String {
    let mut prompt = base(profile).to_owned();
    if let Some(user) = read_capped(&crate::paths::config_dir().join("AGENTS.md")) {
        prompt.push_str("\n\n# The user's instructions (~/.config/keel/AGENTS.md)\n");
        prompt.push_str(&user);
    }
    if let Some(project) = read_capped(&workspace.join("AGENTS.md")) {
        prompt.push_str("\n\n# Project instructions (AGENTS.md)\n");
        prompt.push_str(&project);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_agents_md_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let without = system_prompt(dir.path(), ToolProfile::Full);
        assert!(without.contains("[exit code: N]"));
        assert!(without.len() < 1000, "keep the prompt short: {} bytes", without.len());
        std::fs::write(dir.path().join("AGENTS.md"), "Run `make test` before finishing.\n").unwrap();
        let with = system_prompt(dir.path(), ToolProfile::Full);
        assert!(
            with.ends_with("# Project instructions (AGENTS.md)\nRun `make test` before finishing."),
            "{with}"
        );
    }
}
