//! `change_file`: a file changed by a model call of its own, for small models.
//!
//! A small model writes code well in a plain reply and badly inside a JSON string: it
//! escapes quotes twice, copies line numbers and template tags into the text, and uses
//! `old_text`/`new_text` as "this line and what follows". With change_file it says in
//! words what to change; keel then asks the same model, in a separate plain request (the
//! task, the change, other files the task names, the file itself), for the file's whole
//! new content in one code block, checks it as write_file does, writes it, and returns
//! the diff. Aider's "whole file" edit format, found best for weak models, works the
//! same way.

use std::future::Future;
use std::sync::Arc;

use keel_agent::{Tool, ToolContext, ToolError, ToolErrorKind, ToolOutput};
use keel_llm::{ModelClient, Usage};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::ToolsConfig;
use crate::blank_lines::LayoutAsked;
use crate::undo::Keeper;
use crate::workspace::Roots;

mod bare;
mod beside;
mod command;
mod echoed;
mod elsewhere;
mod folder;
mod held;
mod moved;
mod prompt;
mod setting;
mod unchanged;

pub(crate) use prompt::fence_for;
use prompt::{Inputs, code_block, editor_prompt, fence_len, related_files};
use unchanged::{Changed, Unchanged};

/// Most lines of a file change_file rewrites (its whole text is generated again).
const MAX_LINES: usize = 200;
/// Most bytes of a file change_file rewrites.
const MAX_BYTES: usize = 16 * 1024;
/// Most other files the editor is shown, and most bytes of each.
const MAX_RELATED: usize = 3;
const MAX_RELATED_BYTES: usize = 8 * 1024;
/// Temperatures of the editor's attempts: it mostly copies, and must copy faithfully; a
/// reply that changed nothing or broke the file is asked for again, hotter (the same
/// prompt at the same temperature and seed would come back the same), and told what was
/// wrong with the first when that can be said ([`Unchanged::Refused`]'s `retry`).
const EDITOR_TEMPERATURES: [f32; 2] = [0.2, 0.7];
/// Lines of a new file shown in the report.
const SHOWN_NEW_LINES: usize = 40;

/// Arguments of `change_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeArgs {
    /// File path; a missing file is created.
    pub path: String,
    /// What to change in the file, in words (or the text to put in a new file).
    pub change: String,
}

/// Changes files through a plain request to the model (see the module docs).
pub struct ChangeFile {
    config: Arc<ToolsConfig>,
    model: Arc<dyn ModelClient>,
}

impl ChangeFile {
    /// The tool's name.
    pub const NAME: &'static str = "change_file";

    /// A change tool that asks `model` for new file contents.
    pub fn new(config: Arc<ToolsConfig>, model: Arc<dyn ModelClient>) -> Self {
        ChangeFile { config, model }
    }
}

/// The report for a created file: its first lines.
fn created_report(shown: &str, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut report = format!("Created {shown} ({} lines):\n", lines.len());
    for line in lines.iter().take(SHOWN_NEW_LINES) {
        report.push_str(line);
        report.push('\n');
    }
    if lines.len() > SHOWN_NEW_LINES {
        report.push_str(&format!("[... {} more lines]\n", lines.len() - SHOWN_NEW_LINES));
    }
    report
}

impl Tool for ChangeFile {
    type Args = ChangeArgs;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn description(&self) -> &str {
        "Change a file, or create it: say in words what to change."
    }

    fn effect(&self, arguments: &serde_json::Value) -> keel_agent::Effect {
        match keel_agent::path_argument(arguments) {
            Some(path) => keel_agent::Effect::Writes { path },
            None => keel_agent::Effect::Other,
        }
    }

    fn call(
        &self,
        args: ChangeArgs,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let config = Arc::clone(&self.config);
        let model = Arc::clone(&self.model);
        async move {
            if args.change.trim().is_empty() {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    "change is empty: say what to change in the file.",
                ));
            }
            let roots = Roots::for_call(&ctx, &config)?;
            // The path is checked first: a command aimed outside the project is refused
            // as outside, not answered with "call shell with it".
            let (path, change) = (args.path.clone(), args.change.clone());
            let job = match gather(roots.clone(), args, ctx.task.clone()).await {
                Ok(job) => Arc::new(job),
                Err(e) if e.kind == ToolErrorKind::IsADirectory => {
                    let refusal = blocking(move || folder::refusal(&roots, &path, &change)).await?;
                    return Err(ToolError::new(e.kind, refusal));
                }
                Err(e) => return Err(e),
            };
            if let Some(command) = command::shell_command(&job.args.path, &job.args.change) {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    command::refusal(
                        &job.args.path,
                        command,
                        ctx.task.as_deref(),
                        job.inputs.current.is_some(),
                    ),
                ));
            }
            if let Some(written) = command::writes_elsewhere(&job.args.path, &job.args.change) {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    command::elsewhere_refusal(&job.args.path, job.args.change.trim(), written),
                ));
            }
            if bare::only_names(&job.args.path, &job.args.change) {
                return Err(ToolError::new(
                    ToolErrorKind::InvalidArguments,
                    bare::refusal(&job.args.path, &job.args.change),
                ));
            }
            // Only a file that exists can be renamed (for a new one the words stay the editor's).
            let (path, change) = (job.args.path.clone(), job.args.change.clone());
            if job.inputs.current.is_some()
                && let Some(refusal) = blocking(move || moved::renaming(&roots, &path, &change)).await?
            {
                return Err(ToolError::new(ToolErrorKind::InvalidArguments, refusal));
            }
            let named = job.inputs.related.iter().map(|(name, _)| name.as_str());
            if let Some(refusal) = beside::check(&job.args.path, job.inputs.current.is_some(), named) {
                return Err(refusal);
            }
            // A new file whose words echo plain text into it holds that text (`echoed`).
            if job.inputs.current.is_none()
                && let Some(text) = echoed::content(&job.args.path, &job.args.change)
            {
                return job.write(text, None, &ctx).await;
            }
            // Settings the file already has need no editor: asked, it changed others.
            if job.inputs.current.as_deref().is_some_and(|old| setting::in_place(&job.args.change, old)) {
                return Ok(ToolOutput::text(held::report(&job.args.path)));
            }
            let prompt = editor_prompt(ctx.task.as_deref(), &job.args, &job.inputs);
            // Unless the task is about layout, blank lines the editor reflowed and the
            // file's line endings are put back.
            let layout = LayoutAsked::of(ctx.intent);
            let asked_before = Refusals::key(&prompt, layout);
            if let Some(why) =
                ctx.state.with(|refusals: &mut Refusals| refusals.0.get(&asked_before).cloned())
            {
                return Ok(ToolOutput::error(format!("{why}{ASKED_BEFORE}")));
            }
            let checks = crate::syntax::Checks::of(&config);
            let (output, refused) = edit(&job, model.as_ref(), &prompt, layout, checks, &ctx).await?;
            if refused && output.is_error {
                ctx.state
                    .with(|refusals: &mut Refusals| refusals.remember(asked_before, output.content.clone()));
            }
            Ok(output)
        }
    }
}

/// Asks the editor for the file's new content (a second time, hotter, when the first
/// reply is not used) and writes the first reply that passes [`Job::vet`]. The flag is
/// true when every reply was refused (not when a request failed).
async fn edit(
    job: &Arc<Job>,
    model: &dyn ModelClient,
    prompt: &str,
    layout: LayoutAsked,
    checks: crate::syntax::Checks,
    ctx: &ToolContext,
) -> Result<(ToolOutput, bool), ToolError> {
    let mut usage = Usage::default();
    let mut refusal = Unchanged::Same;
    let mut asides = Vec::new();
    for temperature in EDITOR_TEMPERATURES {
        let prompt = match &refusal {
            Unchanged::Refused { retry: Some(retry), .. } => format!("{prompt}\n\n{retry}"),
            _ => prompt.to_owned(),
        };
        let asked =
            crate::plain::ask(model, ChangeFile::NAME, prompt, temperature, ctx.cancel.child_token()).await;
        asides.push(asked.aside);
        let (reply, spent) = match asked.result {
            Ok(replied) => replied,
            Err(e) => {
                let failed = ToolOutput::error(format!(
                    "The file was not changed: the model request for its new content failed ({e})."
                ));
                return Ok((failed.with_usage(usage).with_asides(asides), false));
            }
        };
        usage += spent;
        let vetting = Arc::clone(job);
        match blocking(move || vetting.vet(&reply, checks, layout)).await? {
            Ok((new, note)) => {
                return Ok((job.write(new, note, ctx).await?.with_usage(usage).with_asides(asides), false));
            }
            // An unchanged reply to words the file already holds is right: asked again,
            // hotter, the editor invents a change (`held`).
            Err(Unchanged::Same) if job.holds_words() => {
                refusal = Unchanged::Held;
                break;
            }
            Err(why) => refusal = why,
        }
    }
    // The answer stats the file and the words' names (`moved`, `changes`): off the
    // async thread, as every other file access of the tool.
    let (answering, ctx) = (Arc::clone(job), ctx.clone());
    let output = blocking(move || answering.unchanged(refusal, &ctx)).await?;
    Ok((output.with_usage(usage).with_asides(asides), true))
}

/// Added to a refusal given again without asking the editor.
const ASKED_BEFORE: &str = "\n[keel: this change_file call is the same as an earlier one, on the same file, and was refused then for this reason; the editor was not asked again. Say the change differently, or look at the file or the error first.]";

/// Most refusals remembered; past it the memory starts again.
const MAX_REFUSALS: usize = 64;

/// The editor's refusals in this session, by a hash of everything it was shown (the
/// prompt: task, change, other files, the file) and the layout asked for. A 1.5B model
/// made the same refused call nine times in a row, and each time the editor wrote the
/// same whole file twice over (add-cli-flag, embedded route: 600 s, the time limit).
#[derive(Debug, Default)]
struct Refusals(std::collections::HashMap<u64, String>);

impl Refusals {
    fn key(prompt: &str, layout: LayoutAsked) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        (prompt, layout).hash(&mut hasher);
        hasher.finish()
    }

    fn remember(&mut self, key: u64, refusal: String) {
        if self.0.len() >= MAX_REFUSALS {
            self.0.clear();
        }
        self.0.insert(key, refusal);
    }
}

/// One change: where, what, and what the editor is shown.
struct Job {
    roots: Roots,
    args: ChangeArgs,
    inputs: Inputs,
    task: Option<Arc<str>>,
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::msg(format!("the tool stopped unexpectedly: {e}")))
}

/// Checks the path and reads the file and the other files the task names.
async fn gather(roots: Roots, args: ChangeArgs, task: Option<Arc<str>>) -> Result<Job, ToolError> {
    blocking(move || {
        writable(&roots, &args.path)?;
        let current = roots.read_text(&args.path, MAX_BYTES).map_err(too_long_hint)?;
        if let Some(text) = &current
            && text.lines().count() > MAX_LINES
        {
            return Err(too_long_hint(ToolError::new(
                ToolErrorKind::FileTooLarge,
                format!("`{}` has {} lines", args.path, text.lines().count()),
            )));
        }
        let mut about = args.change.clone();
        if let Some(task) = &task {
            about.push('\n');
            about.push_str(task);
        }
        let related = related_files(&roots, &about, &args.path);
        Ok(Job { roots, args, inputs: Inputs { current, related }, task })
    })
    .await?
}

impl Job {
    /// Writes vetted content; a failed write is an error result for the model.
    async fn write(
        self: &Arc<Self>,
        new: String,
        note: Option<String>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let keeper = Keeper::for_call(ctx);
        let witness = keeper.clone();
        let state = Arc::clone(&ctx.state);
        let job = Arc::clone(self);
        let written = blocking(move || {
            write_new(&job.roots, &job.args, job.inputs.current.as_deref(), &new, Some(&keeper), &state)
                .map(|report| report + note.as_deref().unwrap_or(""))
        })
        .await?;
        Ok(match written {
            Ok(report) => ToolOutput::text(report).with_change(witness.change()),
            Err(e) => ToolOutput::error(e.message),
        })
    }

    /// Checks the editor's reply: one whole code block, different from the file (blank
    /// lines it reflowed and the file's `\r\n` line endings put back unless `layout` asks
    /// for them), no tool call pasted in, and parsing where the file parsed. Returns the
    /// new text and a warning note, or why not.
    fn vet(
        &self,
        reply: &str,
        checks: crate::syntax::Checks,
        layout: LayoutAsked,
    ) -> Result<(String, Option<String>), Unchanged> {
        let (path, inputs, root) = (&self.args.path, &self.inputs, self.roots.root());
        let nested = inputs.current.as_deref().is_some_and(|t| t.lines().any(|l| fence_len(l) >= 3));
        let Some(new) = code_block(reply, nested) else {
            return Err(Unchanged::Refused {
                why: format!(
                    "`{path}` was not changed: the new content did not come back as one whole code block. Call change_file again, saying plainly what to change."
                ),
                retry: Some(format!(
                    "Your earlier reply did not hold the file in one whole code block. Reply with the complete new content of `{path}` in one code block."
                )),
            });
        };
        let new = match inputs.current.as_deref() {
            Some(old) => layout.keep(old, new),
            None => new,
        };
        if inputs.current.as_deref() == Some(new.as_str()) {
            return Err(Unchanged::Same);
        }
        if let Some(old) = inputs.current.as_deref()
            && let Some((kept, of)) = fragment(old, &new)
        {
            return Err(Unchanged::Refused {
                why: format!(
                    "`{path}` was not changed: its new content came back with {kept} of the file's {of} lines, a part of the file instead of all of it. Call change_file again saying what to change; to delete most of a file on purpose, use the shell."
                ),
                retry: Some(format!(
                    "Your earlier reply held {kept} of the file's {of} lines. Reply with the complete new content of `{path}`, every line of it, in one code block."
                )),
            });
        }
        if let Some(old) = inputs.current.as_deref()
            && let Some(missed) = setting::missed(&self.args.change, old, &new)
        {
            return Err(Unchanged::Refused { why: missed.refusal(path), retry: Some(missed.retry(path)) });
        }
        if let Some(old) = inputs.current.as_deref()
            && let Some(changed) = setting::stray(&self.args.change, old, &new)
        {
            let (why, retry) = setting::stray_refusal(path, &self.args.change, &changed);
            return Err(Unchanged::Refused { why, retry: Some(retry) });
        }
        if let Some(old) = inputs.current.as_deref()
            && let Some(why) = elsewhere::check(path, self.task.as_deref(), old, &new, &inputs.related)
        {
            return Err(Unchanged::Refused { why, retry: None });
        }
        if let Some(call) = crate::pasted::call_in(path, &new) {
            return Err(Unchanged::Refused { why: crate::pasted::call_refusal(path, call), retry: None });
        }
        let note = checks.judge(path, || inputs.current.clone(), &new, root).map_err(|problem| {
            Unchanged::Refused {
                why: crate::syntax::refusal(path, &problem),
                retry: Some(format!(
                    "With your earlier reply `{path}` would not parse ({}). Reply with the complete new content of `{path}` in one code block, making the change in a way that parses.",
                    crate::syntax::clipped(&problem)
                )),
            }
        })?;
        Ok((new, note))
    }
}

/// Files shorter than this (in non-blank lines) may lose any share of them in a change.
const FRAGMENT_MIN_LINES: usize = 10;

/// `Some((kept, of))` when `new` keeps under a third of `old`'s non-blank lines: the
/// editor answered with the part it changed, not the whole file (written, it would
/// lose the rest).
fn fragment(old: &str, new: &str) -> Option<(usize, usize)> {
    let lines = |text: &str| text.lines().filter(|line| !line.trim().is_empty()).count();
    let (of, kept) = (lines(old), lines(new));
    (of >= FRAGMENT_MIN_LINES && kept * 3 < of).then_some((kept, of))
}

/// Writes the vetted content and reports the change as a diff (or a new file's lines).
fn write_new(
    roots: &Roots,
    args: &ChangeArgs,
    old: Option<&str>,
    new: &str,
    keeper: Option<&Keeper>,
    state: &keel_agent::ToolState,
) -> Result<String, ToolError> {
    crate::write::write_kept(roots, &args.path, new, keeper)?;
    crate::seen::mark(roots, state, &args.path);
    if let Ok(canonical) = roots.resolve_existing(&args.path, false) {
        state.with(|changed: &mut Changed| changed.0.insert(canonical));
    }
    let canonical = roots.resolve_existing(&args.path, false).ok();
    let shown = canonical.as_ref().map_or_else(|| args.path.clone(), |c| roots.display(c));
    Ok(match old {
        Some(old) => {
            let leftovers = canonical
                .and_then(|c| crate::leftovers::note(roots, ChangeFile::NAME, &c, &shown, old, new))
                .unwrap_or_default();
            let left_in_file = crate::leftovers::partly_removed(&args.change, old, new).unwrap_or_default();
            crate::renames::record(state, old, new);
            format!("Changed {shown}:\n{}{left_in_file}{leftovers}", crate::edit::diff(old, new, &shown))
        }
        None => created_report(&shown, new),
    })
}

/// Refuses, before the model is asked, a path the file could not be written to.
fn writable(roots: &Roots, path: &str) -> Result<(), ToolError> {
    let folder = || {
        ToolError::new(
            ToolErrorKind::IsADirectory,
            format!(
                "`{path}` is a folder: change_file changes one file; name a file (list_files shows them)."
            ),
        )
    };
    if crate::workspace::names_folder(path) {
        return Err(folder());
    }
    roots.refuse_git_internals(path)?;
    match roots.resolve_existing(path, true) {
        Ok(canonical) if canonical.is_dir() => Err(folder()),
        Ok(_) => Ok(()),
        Err(e) if e.kind == ToolErrorKind::NotFound => {
            let lexical = roots.lexical(path);
            let inside = lexical
                .parent()
                .and_then(|p| p.ancestors().find(|a| a.exists()))
                .and_then(|a| a.canonicalize().ok());
            match inside {
                Some(existing) if roots.allows(&existing, true) && !path.trim().is_empty() => Ok(()),
                _ => Err(ToolError::new(
                    ToolErrorKind::OutsideWorkspace,
                    format!(
                        "`{path}` is outside the project folder: change_file changes files inside it (use a relative path)."
                    ),
                )),
            }
        }
        Err(e) => Err(e),
    }
}

/// A file too long to rewrite: say what to use instead.
fn too_long_hint(error: ToolError) -> ToolError {
    if error.kind != ToolErrorKind::FileTooLarge {
        return error;
    }
    ToolError::new(
        ToolErrorKind::FileTooLarge,
        format!(
            "{}; change_file rewrites files of at most {MAX_LINES} lines and {} KiB. Change it with a command in the shell instead (sed -i, or a short python3 script).",
            error.message,
            MAX_BYTES / 1024
        ),
    )
}
