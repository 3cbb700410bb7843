//! `list_files`: what is in a folder, honouring `.gitignore` and hidden-file rules.

use keel_agent::ToolErrorKind;
use std::future::Future;
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::workspace::Roots;

/// Most entries listed.
pub const MAX_ENTRIES: usize = 400;

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Folder to list (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
    /// How many levels deep to go (default 2).
    #[serde(default)]
    pub depth: Option<usize>,
}

/// Lists folders.
#[derive(Debug, Clone)]
pub struct ListFiles {
    config: Arc<ToolsConfig>,
}

impl ListFiles {
    /// A list tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        ListFiles { config }
    }
}

/// Lists `args.path` under `roots`.
pub fn list(roots: &Roots, args: &ListArgs) -> Result<String, ToolError> {
    let path = args.path.as_deref().filter(|p| !p.trim().is_empty()).unwrap_or(".");
    let dir = roots.resolve_existing(path, false).map_err(|e| {
        if e.kind == ToolErrorKind::NotFound {
            ToolError::new(ToolErrorKind::NotFound, crate::suggest::missing_path_message(roots, path))
        } else {
            e
        }
    })?;
    if !dir.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::NotADirectory,
            format!("`{path}` is a file; use read_file to read it"),
        ));
    }
    let depth = args.depth.unwrap_or(2).clamp(1, 20);
    let mut entries = Vec::new();
    let mut total = 0usize;
    for entry in walker(&dir, depth).flatten() {
        if entry.depth() == 0 {
            continue;
        }
        total += 1;
        if entries.len() < MAX_ENTRIES {
            let mut shown = roots.display(entry.path());
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                shown.push('/');
                // A folder at the depth limit would look empty: say what it holds.
                if entry.depth() == depth {
                    shown.push_str(&inside(entry.path()));
                }
            }
            entries.push(shown);
        }
    }
    let git_note = if dir.join(".git").exists() {
        "\n(.git/ is not listed: this is a git repository; run `git status` or `git log` in the shell for its state)"
    } else {
        ""
    };
    if entries.is_empty() {
        return Ok(format!("{} is empty (or holds only ignored files).{git_note}", roots.display(&dir)));
    }
    let mut out = entries.join("\n");
    if total > entries.len() {
        out.push_str(&format!(
            "\n[... {} more entries not shown; list a sub-folder or lower the depth]",
            total - entries.len()
        ));
    }
    out.push_str(git_note);
    Ok(out)
}

/// A walk of `dir` to `depth` levels, honouring ignore files, without `.git`.
fn walk_builder(dir: &std::path::Path, depth: usize) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .require_git(false)
        .git_global(false)
        .max_depth(Some(depth))
        .filter_entry(|e| e.file_name() != ".git");
    builder
}

/// [`walk_builder`]'s walk, by name.
fn walker(dir: &std::path::Path, depth: usize) -> ignore::Walk {
    walk_builder(dir, depth).sort_by_file_name(|a, b| a.cmp(b)).build()
}

/// Most entries of a folder below the depth limit counted.
const MAX_COUNTED: usize = 100;

/// What a folder at the depth limit holds, as a note: ` (3 entries, not shown)`. Not
/// sorted, so a huge folder is read only as far as the count goes.
fn inside(folder: &std::path::Path) -> String {
    let entries = walk_builder(folder, 1).build().flatten().filter(|e| e.depth() == 1);
    match entries.take(MAX_COUNTED + 1).count() {
        0 => String::new(),
        1 => " (1 entry, not shown)".to_owned(),
        n if n > MAX_COUNTED => format!(" (over {MAX_COUNTED} entries, not shown)"),
        n => format!(" ({n} entries, not shown)"),
    }
}

impl Tool for ListFiles {
    type Args = ListArgs;

    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> &str {
        "List files and folders (folders end in /), skipping what .gitignore ignores."
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn call(
        &self,
        args: ListArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        crate::confined(Arc::clone(&self.config), ctx, move |roots| list(roots, &args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_below_the_limit_is_counted_up_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(inside(dir.path()), "");
        for i in 0..MAX_COUNTED {
            std::fs::write(dir.path().join(format!("{i}.txt")), "").unwrap();
        }
        assert_eq!(inside(dir.path()), format!(" ({MAX_COUNTED} entries, not shown)"));
        std::fs::write(dir.path().join("one-more.txt"), "").unwrap();
        assert_eq!(inside(dir.path()), format!(" (over {MAX_COUNTED} entries, not shown)"));
    }
}
