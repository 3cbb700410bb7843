//! `edit_file`: exact search and replace, with helpful failures and a diff.

use std::future::Future;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::workspace::Roots;

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File path.
    pub path: String,
    /// The exact text to replace, including indentation; enough lines to be unique.
    pub old_text: String,
    /// The replacement text.
    pub new_text: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Edits files in place.
#[derive(Debug, Clone)]
pub struct EditFile {
    config: Arc<ToolsConfig>,
}

impl EditFile {
    /// An edit tool with these settings.
    pub fn new(config: Arc<ToolsConfig>) -> Self {
        EditFile { config }
    }
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why `old` was not found, with the closest text in the file.
fn not_found_hint(content: &str, old: &str, path: &str) -> String {
    let lines: Vec<&str> = content.lines().collect();
    let wanted: Vec<String> = old.lines().map(squash).filter(|l| !l.is_empty()).collect();
    let mut message = format!("old_text was not found in `{path}`.");
    if wanted.is_empty() {
        return message;
    }
    // Same text except for whitespace?
    for start in 0..lines.len() {
        if squash(lines[start]).is_empty() {
            continue;
        }
        let mut i = start;
        let mut matched = 0;
        while i < lines.len() && matched < wanted.len() {
            let line = squash(lines[i]);
            if line.is_empty() {
                i += 1;
                continue;
            }
            if line != wanted[matched] {
                break;
            }
            matched += 1;
            i += 1;
        }
        if matched == wanted.len() {
            let exact = lines[start..i].join("\n");
            message.push_str(&format!(
                " Lines {}-{} match it except for whitespace or indentation; their exact text is:\n{exact}",
                start + 1,
                i
            ));
            return message;
        }
    }
    // Otherwise the lines most like the first line of old_text.
    let first = &wanted[0];
    if lines.len() <= 20_000 {
        let mut scored: Vec<(f32, usize)> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| (similar::TextDiff::from_chars(first.as_str(), squash(l).as_str()).ratio(), n))
            .filter(|(ratio, _)| *ratio >= 0.5)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        if !scored.is_empty() {
            message.push_str(" The most similar lines are:");
            for (_, n) in scored.iter().take(3) {
                message.push_str(&format!("\n{:>5}\t{}", n + 1, lines[*n]));
            }
        }
    }
    message.push_str("\nRead the file again and copy old_text exactly.");
    message
}

/// A compact unified diff of the change.
fn diff(before: &str, after: &str, path: &str) -> String {
    let diff = similar::TextDiff::from_lines(before, after);
    let text = diff.unified_diff().context_radius(2).header(path, path).to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() > 80 {
        format!("{}\n[... diff cut: {} more lines ...]", lines[..80].join("\n"), lines.len() - 80)
    } else {
        text.trim_end().to_owned()
    }
}

/// Applies the edit to `path` under `roots`; returns the report for the model.
pub fn edit(roots: &Roots, args: &EditArgs) -> Result<String, ToolError> {
    if args.old_text.is_empty() {
        return Err(ToolError::new(
            "invalid_arguments",
            "old_text is empty; use write_file to create or replace a whole file",
        ));
    }
    if args.old_text == args.new_text {
        return Err(ToolError::new(
            "invalid_arguments",
            "old_text and new_text are the same; nothing would change",
        ));
    }
    let canonical = roots.resolve_existing(&args.path, true).map_err(|e| {
        if e.code == "not_found" {
            ToolError::new("not_found", crate::suggest::missing_path_message(roots, &args.path))
        } else {
            e
        }
    })?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&canonical)
        .map_err(|e| ToolError::msg(format!("cannot open `{}`: {e}", args.path)))?;
    roots.verify_open(&file, &args.path, true)?;
    let io = |e: std::io::Error| ToolError::msg(format!("cannot edit `{}`: {e}", args.path));
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    let content = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(
            "not_utf8",
            format!("`{}` is not valid UTF-8 text; edit_file only edits text", args.path),
        )
    })?;
    // Keep the file's line endings: a model writes `\n` even in a CRLF file.
    let crlf = content.contains("\r\n");
    let convert =
        |text: &str| if crlf && !text.contains('\r') { text.replace('\n', "\r\n") } else { text.to_owned() };
    let old = convert(&args.old_text);
    let new = convert(&args.new_text);
    let positions: Vec<usize> = content.match_indices(&old).map(|(i, _)| i).collect();
    match positions.len() {
        0 => return Err(ToolError::new("no_match", not_found_hint(&content, &args.old_text, &args.path))),
        n if n > 1 && !args.replace_all => {
            let lines: Vec<String> = positions.iter().map(|p| line_of(&content, *p).to_string()).collect();
            return Err(ToolError::new(
                "ambiguous_match",
                format!(
                    "old_text occurs {n} times in `{}` (lines {}). Include more surrounding lines to make it unique, or set replace_all to change every occurrence.",
                    args.path,
                    lines.join(", ")
                ),
            ));
        }
        _ => {}
    }
    let updated =
        if args.replace_all { content.replace(&old, &new) } else { content.replacen(&old, &new, 1) };
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(updated.as_bytes()).map_err(io)?;
    let shown = roots.display(&canonical);
    let first_line = line_of(&content, positions[0]);
    let count = if args.replace_all { positions.len() } else { 1 };
    let plural = if count == 1 { "" } else { "s" };
    Ok(format!(
        "Edited {shown}: {count} replacement{plural} (first at line {first_line}).\n{}",
        diff(&content, &updated, &shown)
    ))
}

impl Tool for EditFile {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace exact text in a file; old_text must match exactly once (or set replace_all)."
    }

    fn call(
        &self,
        args: EditArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        let check = self.config.read_before_change;
        crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            if check {
                crate::seen::require(roots, &state, &args.path, "edit_file")?;
            }
            edit(roots, &args)
        })
    }
}
