//! `edit_file`: exact search and replace, with helpful failures and a diff.

use crate::output::clip_line;
use keel_agent::ToolErrorKind;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::{Tool, ToolContext, ToolError, ToolOutput, ToolState};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::undo::Keeper;
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

fn texts(args: &EditArgs) -> crate::repeated::Texts<'_> {
    crate::repeated::Texts { old: &args.old_text, new: &args.new_text }
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

/// How many times `needle` occurs in `text`, and the lines of the first 20.
fn occurrences(text: &str, needle: &str) -> (usize, Vec<usize>) {
    let mut count = 0;
    let mut lines = Vec::new();
    let (mut line, mut scanned) = (1, 0);
    for (at, _) in text.match_indices(needle) {
        count += 1;
        if lines.len() < 20 {
            line += memchr::memchr_iter(b'\n', &text.as_bytes()[scanned..at]).count();
            scanned = at;
            lines.push(line);
        }
    }
    (count, lines)
}

fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Largest file edit_file edits. Larger files are refused before they are read.
pub const MAX_EDIT_BYTES: u64 = 10 * 1024 * 1024;
/// Time the not-found hint may take; past it the hint says less.
const HINT_BUDGET: Duration = Duration::from_millis(1500);
/// Characters of a line compared when looking for similar lines.
const HINT_LINE_CHARS: usize = 400;
/// Lines looked at for similar lines.
const HINT_MAX_LINES: usize = 20_000;
/// Characters of one line shown in a hint or a diff.
const SHOWN_LINE_CHARS: usize = 500;

/// Why `old` was not found, with the closest text in the file. The work is bounded:
/// lines are compared on at most `HINT_LINE_CHARS` characters, at most
/// `HINT_MAX_LINES` lines, within `HINT_BUDGET`.
fn not_found_hint(content: &str, old: &str, new: &str, path: &str, numbered: bool) -> String {
    let deadline = Instant::now() + HINT_BUDGET;
    let mut message = format!("old_text was not found in `{path}`.");
    if let Some(near) = crate::near::near_edit(content, old, new, deadline) {
        let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
        message.push_str(&format!(
            " Line {} is almost the same: `{}`. To make your change there, call: edit_file {{\"path\": {}, \"old_text\": {}, \"new_text\": {}}}",
            near.line,
            clip_line(&near.old_text, SHOWN_LINE_CHARS),
            quoted(path),
            quoted(&near.old_text),
            quoted(&near.new_text),
        ));
        return message;
    }
    let wanted: Vec<String> = old.lines().map(squash).filter(|l| !l.is_empty()).collect();
    if !wanted.is_empty() {
        let lines: Vec<&str> = content.lines().collect();
        let squashed: Vec<String> = lines.iter().map(|l| squash(l)).collect();
        if let Some(hint) = whitespace_match(&lines, &squashed, &wanted, deadline)
            .or_else(|| similar_lines(&lines, &squashed, &wanted[0], deadline, numbered))
        {
            message.push_str(&hint);
        }
    }
    message.push_str("\nRead the file again and copy old_text exactly.");
    message
}

/// Lines equal to `wanted` except for whitespace, with their exact text.
fn whitespace_match(
    lines: &[&str],
    squashed: &[String],
    wanted: &[String],
    deadline: Instant,
) -> Option<String> {
    for start in 0..lines.len() {
        if start % 1024 == 0 && Instant::now() > deadline {
            break;
        }
        if squashed[start] != wanted[0] {
            continue;
        }
        let mut i = start;
        let mut matched = 0;
        while i < lines.len() && matched < wanted.len() {
            if squashed[i].is_empty() {
                i += 1;
                continue;
            }
            if squashed[i] != wanted[matched] {
                break;
            }
            matched += 1;
            i += 1;
        }
        if matched == wanted.len() {
            let exact: Vec<String> = lines[start..i].iter().map(|l| clip_line(l, SHOWN_LINE_CHARS)).collect();
            return Some(format!(
                " Lines {}-{} match it except for whitespace or indentation; their exact text is:\n{}",
                start + 1,
                i,
                exact.join("\n")
            ));
        }
    }
    None
}

/// The three lines most like `first` (similarity at least 0.5), numbered like read_file
/// when `numbered`.
fn similar_lines(
    lines: &[&str],
    squashed: &[String],
    first: &str,
    deadline: Instant,
    numbered: bool,
) -> Option<String> {
    if lines.len() > HINT_MAX_LINES {
        return None;
    }
    let first: String = first.chars().take(HINT_LINE_CHARS).collect();
    let first_len = first.chars().count();
    let mut scored: Vec<(f32, usize)> = Vec::new();
    for (n, line) in squashed.iter().enumerate() {
        if Instant::now() > deadline {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let line: String = line.chars().take(HINT_LINE_CHARS).collect();
        let len = line.chars().count();
        // The ratio is at most 2·min/(a+b): below 0.5 when one is over 3 times the other.
        if len > 3 * first_len || first_len > 3 * len {
            continue;
        }
        let ratio = similar::TextDiff::configure()
            .deadline(deadline)
            .diff_chars(first.as_str(), line.as_str())
            .ratio();
        if ratio >= 0.5 {
            scored.push((ratio, n));
        }
    }
    if scored.is_empty() {
        return None;
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut hint = String::from(" The most similar lines are:");
    for (_, n) in scored.iter().take(3) {
        let line = clip_line(lines[*n], SHOWN_LINE_CHARS);
        if numbered {
            hint.push_str(&format!("\n{:>5}\t{line}", n + 1));
        } else {
            hint.push_str(&format!("\n{line}"));
        }
    }
    Some(hint)
}

/// A compact unified diff of the change (at most 80 lines, long lines cut).
pub(crate) fn diff(before: &str, after: &str, path: &str) -> String {
    let deadline = Instant::now() + HINT_BUDGET;
    let diff = similar::TextDiff::configure().deadline(deadline).diff_lines(before, after);
    let text = diff.unified_diff().context_radius(2).header(path, path).to_string();
    let lines: Vec<String> = text.lines().map(|l| clip_line(l, SHOWN_LINE_CHARS)).collect();
    if lines.len() > 80 {
        format!("{}\n[... diff cut: {} more lines ...]", lines[..80].join("\n"), lines.len() - 80)
    } else {
        lines.join("\n")
    }
}

fn too_big(path: &str, size: u64, after_edit: bool) -> ToolError {
    let size = crate::read::human_size(size);
    let limit = crate::read::human_size(MAX_EDIT_BYTES);
    let what = if after_edit {
        format!("the edit would make `{path}` {size}")
    } else {
        format!("`{path}` is {size}")
    };
    ToolError::new(
        ToolErrorKind::FileTooLarge,
        format!(
            "{what}; edit_file edits files up to {limit}. Change it with a command in the shell instead (sed, or a short script), or write_file a smaller file."
        ),
    )
}

/// Applies the edit to `path` under `roots`; returns the report for the model.
pub fn edit(roots: &Roots, args: &EditArgs) -> Result<String, ToolError> {
    edit_kept(roots, args, None)
}

/// [`edit`], keeping the file as it was for undo before changing it when `keep` is given.
pub fn edit_kept(roots: &Roots, args: &EditArgs, keep: Option<&Keeper>) -> Result<String, ToolError> {
    let checks = crate::syntax::Checks { warn: false, keep_parsing: false };
    edit_in_session(roots, args, keep, None, checks, true)
}

/// [`edit_kept`]; with the session's `state`, an insertion the session has made and
/// whose text is still in the file is not made again (see [`crate::repeated`]).
fn edit_in_session(
    roots: &Roots,
    args: &EditArgs,
    keep: Option<&Keeper>,
    state: Option<&ToolState>,
    checks: crate::syntax::Checks,
    numbered: bool,
) -> Result<String, ToolError> {
    if args.old_text.is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "old_text is empty; use write_file to create or replace a whole file",
        ));
    }
    if args.old_text == args.new_text {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "old_text and new_text are the same; nothing would change",
        ));
    }
    let (mut file, canonical) = roots.open_edit(&args.path).map_err(|e| {
        if e.kind == ToolErrorKind::NotFound {
            ToolError::new(ToolErrorKind::NotFound, crate::suggest::missing_path_message(roots, &args.path))
        } else {
            e
        }
    })?;
    let io = |e: std::io::Error| ToolError::msg(format!("cannot edit `{}`: {e}", args.path));
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_EDIT_BYTES {
        return Err(too_big(&args.path, size, false));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // A file growing meanwhile is still cut at the limit.
    (&file).take(MAX_EDIT_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(too_big(&args.path, bytes.len() as u64, false));
    }
    let content = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(
            ToolErrorKind::NotUtf8,
            format!("`{}` is not valid UTF-8 text; edit_file only edits text", args.path),
        )
    })?;
    if let Some(state) = state
        && crate::repeated::made_before(state, &canonical, texts(args))
        && let Some(start) = content.find(args.new_text.as_str())
    {
        return Ok(crate::repeated::report(&roots.display(&canonical), line_at(&content, start)));
    }
    // Kept for undo before any path below can change the file (a failed edit's copy is
    // never used: undo takes only calls that succeeded).
    if let Some(keeper) = keep
        && let Err(e) = keeper.keep(&canonical, Some(&file))
    {
        tracing::warn!("cannot keep `{}` for undo: {e}", args.path);
    }
    // Keep the file's line endings: a model writes `\n` even in a CRLF file.
    let crlf = content.contains("\r\n");
    let convert =
        |text: &str| if crlf && !text.contains('\r') { text.replace('\n', "\r\n") } else { text.to_owned() };
    let old = convert(&args.old_text);
    let new = convert(&args.new_text);
    let (count, first_lines) = occurrences(&content, &old);
    match count {
        0 if !args.replace_all => {
            return match crate::loose::loose_match(&content, &old) {
                Some(range) => {
                    let updated = spliced(&content, &range, &new);
                    let note = checks.change(&args.path, || Some(content.clone()), &updated, roots.root())?;
                    let report = write_loose(file, &content, range, &updated, roots, &canonical, &args.path)?;
                    if let Some(keeper) = keep {
                        keeper.written(&roots.display(&canonical), updated.as_bytes());
                    }
                    Ok(report + note.as_deref().unwrap_or(""))
                }
                None => match already_there(&content, &new) {
                    Some(line) => Err(ToolError::new(
                        ToolErrorKind::NoMatch,
                        already_there_report(&roots.display(&canonical), line),
                    )),
                    None => Err(ToolError::new(
                        ToolErrorKind::NoMatch,
                        not_found_hint(&content, &args.old_text, &args.new_text, &args.path, numbered),
                    )),
                },
            };
        }
        0 => {
            return Err(ToolError::new(
                ToolErrorKind::NoMatch,
                not_found_hint(&content, &args.old_text, &args.new_text, &args.path, numbered),
            ));
        }
        n if n > 1 && !args.replace_all => {
            let mut lines: Vec<String> = first_lines.iter().map(usize::to_string).collect();
            if n > first_lines.len() {
                lines.push("…".to_owned());
            }
            return Err(ToolError::new(
                ToolErrorKind::AmbiguousMatch,
                format!(
                    "old_text occurs {n} times in `{}` (lines {}). Include more surrounding lines to make it unique, or set replace_all to change every occurrence.",
                    args.path,
                    lines.join(", ")
                ),
            ));
        }
        _ => {}
    }
    let count = if args.replace_all { count } else { 1 };
    let new_size = content.len() as u64 + (count as u64).saturating_mul(new.len() as u64)
        - (count as u64) * (old.len() as u64);
    if new_size > MAX_EDIT_BYTES {
        return Err(too_big(&args.path, new_size, true));
    }
    let updated =
        if args.replace_all { content.replace(&old, &new) } else { content.replacen(&old, &new, 1) };
    let note = checks.change(&args.path, || Some(content.clone()), &updated, roots.root())?;
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(updated.as_bytes()).map_err(io)?;
    if let Some(keeper) = keep {
        keeper.written(&roots.display(&canonical), updated.as_bytes());
    }
    if let Some(state) = state {
        crate::repeated::note(state, &canonical, texts(args));
        crate::renames::record(state, &content, &updated);
    }
    let shown = roots.display(&canonical);
    let first_line = first_lines.first().copied().unwrap_or(1);
    let plural = if count == 1 { "" } else { "s" };
    let leftovers = crate::leftovers::note(roots, "edit_file", &canonical, &shown, &content, &updated)
        .unwrap_or_default();
    Ok(format!(
        "Edited {shown}: {count} replacement{plural} (first at line {first_line}).\n{}{}{leftovers}",
        diff(&content, &updated, &shown),
        note.as_deref().unwrap_or("")
    ))
}

/// `content` with `range` replaced by `new`.
fn spliced(content: &str, range: &std::ops::Range<usize>, new: &str) -> String {
    format!("{}{new}{}", &content[..range.start], &content[range.end..])
}

/// Shorter new texts ("}", "pass") are too common to say the change is there.
const MIN_PRESENT_CHARS: usize = 8;

/// The line at which `content` already holds `new` (exactly, or but for whitespace and
/// quote marks), when old_text was not found: small models repeat an edit that has
/// been made, and "old_text was not found" sent them into a loop of retries.
fn already_there(content: &str, new: &str) -> Option<usize> {
    if new.trim().chars().count() < MIN_PRESENT_CHARS {
        return None;
    }
    let start = content.find(new).or_else(|| crate::loose::loose_match(content, new).map(|r| r.start))?;
    Some(line_at(content, start))
}

/// The 1-based line of byte `offset` in `content`.
fn line_at(content: &str, offset: usize) -> usize {
    content[..offset].matches('\n').count() + 1
}

/// The error for [`already_there`]: nothing was changed. It may be an earlier edit's
/// result, or a misremembered old_text; it is never reported as done.
fn already_there_report(shown: &str, line: usize) -> String {
    format!(
        "Nothing changed: old_text is not in `{shown}`, and your new_text is already there (at line {line}). If that line is the change you meant, it is made already (for example by one of your earlier edits): do not repeat it. Otherwise read the file and send old_text exactly as it is now."
    )
}

/// Replaces the loosely matched `range` of `content` with `new` (see
/// [`crate::loose`]) and says so, showing the text that was there.
fn write_loose(
    mut file: std::fs::File,
    content: &str,
    range: std::ops::Range<usize>,
    updated: &str,
    roots: &Roots,
    canonical: &std::path::Path,
    path: &str,
) -> Result<String, ToolError> {
    let io = |e: std::io::Error| ToolError::msg(format!("cannot edit `{path}`: {e}"));
    if updated.len() as u64 > MAX_EDIT_BYTES {
        return Err(too_big(path, updated.len() as u64, true));
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(updated.as_bytes()).map_err(io)?;
    let shown = roots.display(canonical);
    let line = line_at(content, range.start);
    Ok(format!(
        "Edited {shown}: 1 replacement at line {line}. old_text was not in the file exactly; it matched this text, which differs only in whitespace or quote marks:\n{}\n{}",
        clip_line(&content[range], SHOWN_LINE_CHARS),
        diff(content, updated, &shown)
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

    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        match keel_agent::path_argument(arguments) {
            Some(path) => keel_agent::Effect::Writes { path },
            None => keel_agent::Effect::Other,
        }
    }

    fn call(
        &self,
        args: EditArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let state = Arc::clone(&ctx.state);
        let check = self.config.read_before_change;
        let numbered = self.config.numbered_lines;
        let keeper = Keeper::for_call(&ctx);
        let witness = keeper.clone();
        let checks = crate::syntax::Checks::of(&self.config);
        let edited = crate::confined(Arc::clone(&self.config), ctx, move |roots| {
            if check {
                let quote = crate::seen::Quote { text: &args.old_text, every: args.replace_all };
                crate::seen::require(roots, &state, &args.path, "edit_file", numbered, Some(quote))?;
            }
            // A call already in the replaced text is the file's own.
            if let Some(call) = crate::pasted::call_in(&args.path, &args.new_text)
                && !args.old_text.contains(call)
            {
                return Err(ToolError::new(
                    ToolErrorKind::CallAsContent,
                    crate::pasted::call_refusal(&args.path, call),
                ));
            }
            edit_in_session(roots, &args, Some(&keeper), Some(&state), checks, numbered)
        });
        async move { Ok(edited.await?.with_change(witness.change())) }
    }
}
