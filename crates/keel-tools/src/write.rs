//! `write_file`: create or overwrite a file.

use keel_agent::ToolErrorKind;
use std::collections::HashSet;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput, ToolState};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::overwrite;
use crate::pasted::{self, DiffContent};
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
    let shown = roots.display(&canonical);
    if let Some(keeper) = keep {
        keeper.written(&shown, content.as_bytes());
    }
    let lines = content.lines().count();
    Ok(match before {
        None => format!("Created {shown} ({} bytes, {lines} lines).", content.len()),
        Some(old) => {
            format!("Overwrote {shown} (was {old} bytes, now {} bytes, {lines} lines).", content.len())
        }
    })
}

/// Most bytes of an existing file compared with the new content.
const MAX_COMPARED_BYTES: u64 = 1024 * 1024;

/// Contents the model has insisted on, per file and old content: a second identical
/// write over an unchanged file goes through.
#[derive(Debug, Default)]
struct Insisted(HashSet<(PathBuf, u64)>);

/// Refuses, once per file and content, a write that would drop most of an existing
/// text file's lines (see [`overwrite::drops_most`]).
fn confirm_overwrite(roots: &Roots, state: &ToolState, path: &str, content: &str) -> Result<(), ToolError> {
    let Ok(canonical) = roots.resolve_existing(path, true) else { return Ok(()) };
    if !canonical.is_file() {
        return Ok(());
    }
    // A guard, not a gate: a file that cannot be read (write-only) is written as asked.
    let Ok((file, _)) = roots.open_read(path) else { return Ok(()) };
    let mut old = Vec::new();
    if file.take(MAX_COMPARED_BYTES + 1).read_to_end(&mut old).is_err()
        || old.len() as u64 > MAX_COMPARED_BYTES
        || old.contains(&0)
    {
        return Ok(());
    }
    let Some(dropped) = overwrite::drops_most(&String::from_utf8_lossy(&old), content) else { return Ok(()) };
    // Insisting confirms this content over this state of the file: once the file has
    // changed (the model appended in between), the same write is asked about again.
    let mut hasher = DefaultHasher::new();
    content.hash(&mut hasher);
    old.hash(&mut hasher);
    let key = (canonical.clone(), hasher.finish());
    if !state.with(|insisted: &mut Insisted| insisted.0.insert(key)) {
        return Ok(());
    }
    Err(ToolError::new(
        ToolErrorKind::WouldDrop,
        overwrite::refusal(&roots.display(&canonical), path, content, &dropped),
    ))
}

impl Tool for WriteFile {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create a file, or replace a file's whole content. For small changes to an existing file use edit_file."
    }

    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        match keel_agent::path_argument(arguments) {
            Some(path) => keel_agent::Effect::Writes { path },
            None => keel_agent::Effect::Other,
        }
    }

    fn call(
        &self,
        args: WriteArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        let check = self.config.read_before_change;
        let numbered = self.config.numbered_lines;
        let keeper = Keeper::for_call(&ctx);
        let witness = keeper.clone();
        let confirm = self.config.confirm_overwrite;
        let checks = crate::syntax::Checks::of(&self.config);
        let written = crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            if check {
                crate::seen::require(roots, &state, &args.path, "write_file", numbered, None)?;
            }
            let (content, unwrapped) = match overwrite::unwrapped(&args.path, &args.content) {
                Some((body, wrapper)) => (body, Some(wrapper)),
                None => (args.content.as_str(), None),
            };
            let shown = || match roots.resolve_existing(&args.path, false) {
                Ok(canonical) => roots.display(&canonical),
                Err(_) => args.path.clone(),
            };
            if let Some(call) = pasted::call_in(&args.path, content) {
                return Err(ToolError::new(
                    ToolErrorKind::CallAsContent,
                    pasted::call_refusal(&shown(), call),
                ));
            }
            if let Some(verdict) = pasted::diff(&args.path, content, || {
                roots.read_text(&args.path, MAX_COMPARED_BYTES as usize).ok().flatten()
            }) {
                let shown = shown();
                let report = pasted::diff_report(&shown, &verdict);
                return match verdict {
                    DiffContent::AlreadyMade => Ok(report),
                    DiffContent::NotMade => Err(ToolError::new(ToolErrorKind::DiffContent, report)),
                };
            }
            let note = checks.change(
                &args.path,
                || crate::syntax::current_text(roots, &args.path),
                content,
                roots.root(),
            )?;
            if confirm {
                confirm_overwrite(roots, &state, &args.path, content)?;
            }
            let mut report = write_kept(roots, &args.path, content, Some(&keeper))?;
            if let Some(wrapper) = unwrapped {
                report
                    .push_str(&format!(" Removed {wrapper} around your content (not part of a code file)."));
            }
            crate::seen::mark(roots, &state, &args.path);
            if let Some(note) = note {
                report.push_str(&note);
            }
            Ok(report)
        });
        async move { Ok(written.await?.with_change(witness.change())) }
    }
}
