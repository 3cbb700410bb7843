//! Sinks for the terminal and for JSON, and the closing summary.

pub mod approval;
pub mod changes;
pub mod diff;
pub mod format;
pub mod json;
pub mod markdown;
pub mod plan;
pub mod safe;
mod status;
mod subagents;

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

use keel_agent::{AgentEvent, Sink, TurnOutcome};
use keel_llm::{ModelEvent, Usage};
use keel_session::{EventKind, TurnEndReason};

use crate::pricing;
use format::{clip, duration, short_args, short_result, thousands};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[derive(Debug, Default)]
struct State {
    /// What the spinner says, while it spins.
    spinning: Option<(String, Instant)>,
    /// The live area (the status line, the plan above it) is on screen and must be
    /// cleared before other output.
    drawn: bool,
    /// How many lines of the live area are above its status line.
    drawn_above: usize,
    /// The plan shown at the foot of a terminal while the turn runs (printed when it ends).
    plan: Vec<keel_session::PlanStep>,
    /// The last call that set the plan, and its number of steps (its line says that
    /// instead of the arguments' JSON).
    plan_call: Option<(String, usize)>,
    /// The plan is kept off the screen while a question waits for its answer.
    plan_hidden: bool,
    frame: usize,
    /// Streamed answer text ended without a newline.
    text_open: bool,
    /// A live preview of the answer, shown when stdout is not a terminal (print mode).
    streamed_chars: usize,
    /// Streamed text held back because it may be a tool call written as text (a small
    /// model's `<tool_call>…` or ```` ```json ```` block): shown only if it was not one.
    held: Option<String>,
    /// Whether anything of this reply was printed yet.
    reply_started: bool,
    /// The line being typed during a turn, drawn after the spinner.
    typed: String,
    /// The last line a running command printed, or of the model's reasoning as it
    /// streams, drawn after the spinner's label.
    live: Option<String>,
    /// The model's reasoning in this reply so far (its last line is `live`), bounded.
    reasoning: String,
    /// When this reply's reasoning began, until the reply shows what it is.
    reasoned: Option<Instant>,
    /// Streamed answer text waiting for its block to end (Markdown rendering).
    markdown: markdown::MarkdownStream,
    /// The subagents running, shown on the status line.
    children: Vec<subagents::Child>,
}

/// The spinner's label before the model's reply shows what it is.
const WAITING: &str = "waiting for the model";

/// Prints a turn's final answer on stdout: rendered as Markdown on a terminal with
/// colors, escapes shown on any terminal, the text as it is into a pipe or file.
pub fn print_answer(text: &str) {
    if markdown::enabled() {
        out!("{}", markdown::render(text, width()));
    } else if std::io::stdout().is_terminal() {
        outln!("{}", safe::plain(text.trim_end()));
    } else {
        outln!("{}", text.trim_end());
    }
}

/// The terminal's width in columns (100 when it cannot be told).
pub fn width() -> usize {
    use std::io::IsTerminal;
    // Without a terminal crossterm falls back to running `tput cols` and `tput lines`: two
    // processes for every tool line (4 ms a step in keel-bench, whose output is no tty).
    if !(std::io::stderr().is_terminal() || std::io::stdout().is_terminal()) {
        return 100;
    }
    crossterm::terminal::size().map(|(w, _)| usize::from(w)).ok().filter(|w| *w >= 20).unwrap_or(100)
}

/// True when text starts like a tool call written as text.
fn may_be_text_call(text: &str) -> bool {
    let start = text.trim_start();
    start.is_empty() || start.starts_with('<') || start.starts_with('{') || start.starts_with("```")
}

/// Progress on stderr: one line per tool call, a spinner while waiting, retries; in
/// interactive mode the answer streams to stdout.
pub struct Terminal {
    color: bool,
    spinner: bool,
    stream_text: bool,
    /// Streamed answers are rendered as Markdown (stdout is a terminal, colors allowed).
    markdown: bool,
    state: Mutex<State>,
}

impl Terminal {
    /// A terminal sink. `stream_text` prints answer text as it arrives (interactive).
    pub fn new(stream_text: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        let color = tty && std::env::var_os("NO_COLOR").is_none();
        Terminal {
            color,
            spinner: tty,
            stream_text,
            markdown: stream_text && markdown::enabled(),
            state: Mutex::new(State::default()),
        }
    }

    /// Stops the spinner (while a question waits for an answer): the plan at the foot
    /// of the screen gives way too, until the spinner starts again.
    pub fn stop_spinner(&self) {
        self.with(|state| state.plan_hidden = true);
        self.spin(None);
    }

    /// `text` dimmed when stderr gets colors.
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    /// Whether answers stream as they come (the interactive mode).
    pub fn streams_text(&self) -> bool {
        self.stream_text
    }

    /// Whether stderr gets colors.
    pub fn color(&self) -> bool {
        self.color
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        match self.state.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// A call set the plan: on a terminal it is redrawn in place at the foot of the
    /// screen; elsewhere it is printed.
    fn plan(&self, steps: &[keel_session::PlanStep]) {
        if self.spinner {
            self.with(|state| {
                state.plan = steps.to_vec();
                self.draw(state);
            });
        } else {
            for line in plan::checklist(steps, |code, text| self.paint(code, text)) {
                self.line(&line);
            }
        }
    }

    /// The turn ended: the plan shown at the foot of the screen is printed as it stands.
    fn settle_plan(&self) {
        let steps = self.with(|state| std::mem::take(&mut state.plan));
        if !steps.is_empty() {
            for line in plan::checklist(&steps, |code, text| self.paint(code, text)) {
                self.line(&line);
            }
        }
    }

    /// Prints a line on stderr (clearing the spinner and closing streamed text first).
    pub fn line(&self, text: &str) {
        self.with(|state| {
            self.clear(state);
            if state.text_open {
                outln!();
                state.text_open = false;
            }
            errln!("{}", safe::styled(text));
        });
    }

    fn spin(&self, label: Option<String>) {
        self.with(|state| match label {
            Some(label) => {
                state.plan_hidden = false;
                let since = state.spinning.as_ref().map(|s| s.1).unwrap_or_else(Instant::now);
                state.spinning = Some((label, since));
            }
            None => {
                state.spinning = None;
                self.clear(state);
            }
        });
    }

    /// Redraws the spinner (called every ~100 ms by a ticker task).
    pub fn tick(&self) {
        if !self.spinner {
            return;
        }
        self.with(|state| {
            if state.spinning.is_some() {
                state.frame = (state.frame + 1) % SPINNER.len();
            }
            self.draw(state);
        });
    }

    /// True when stderr is a terminal the spinner is drawn on.
    pub fn draws(&self) -> bool {
        self.spinner
    }

    /// The line being typed changed: redraw it after the spinner.
    pub fn typing(&self, text: &str) {
        self.with(|state| {
            state.typed = text.to_owned();
            self.draw(state);
        });
    }

    fn text(&self, delta: &str) {
        self.with(|state| {
            if !self.stream_text {
                state.streamed_chars += delta.chars().count();
                return;
            }
            if !state.reply_started {
                let held = state.held.get_or_insert_with(String::new);
                held.push_str(delta);
                if may_be_text_call(held) {
                    return;
                }
                let text = state.held.take().unwrap_or_default();
                self.print_text(state, &text);
                return;
            }
            self.print_text(state, delta);
        });
    }

    fn print_text(&self, state: &mut State, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.markdown {
            state.reply_started = true;
            if let Some(rendered) = state.markdown.push(text, width()) {
                self.show(state, &rendered);
            }
            return;
        }
        if std::io::stdout().is_terminal() {
            self.show(state, &safe::plain(text));
        } else {
            self.show(state, text);
        }
    }

    /// Prints answer text on stdout (the spinner cleared first).
    fn show(&self, state: &mut State, text: &str) {
        state.spinning = None;
        self.clear(state);
        out!("{text}");
        let _ = std::io::stdout().flush();
        state.reply_started = true;
        state.text_open = !text.ends_with('\n');
    }

    /// The reply shows what it is: its reasoning, streamed beside the spinner and gone
    /// with it, leaves a line saying how long it took (the walkthrough of issue 32: the
    /// thoughts vanished and nothing said there had been any).
    fn reasoned(&self) {
        if let Some(since) = self.with(|state| state.reasoned.take()) {
            self.line(&self.paint("2", &format!("  reasoned for {}", duration(since.elapsed()))));
        }
    }

    /// The reply is complete: held text is shown unless it became tool calls.
    fn reply_done(&self, message: &keel_llm::AssistantMessage) {
        self.with(|state| {
            if let Some(held) = state.held.take()
                && !message.has_tool_calls()
            {
                self.print_text(state, &held);
            }
            if self.markdown
                && let Some(rendered) = state.markdown.finish(width())
            {
                self.show(state, &rendered);
            }
            state.reply_started = false;
        });
    }

    /// The closing summary line of a turn.
    pub fn summary(
        &self,
        outcome: &TurnOutcome,
        wall: std::time::Duration,
        model: &str,
        prices: &crate::config::Settings,
        context: Option<keel_agent::ContextUsage>,
    ) {
        let cost = pricing::cost(&prices.pricing, model, &outcome.usage);
        self.summary_with_cost(outcome, wall, cost, context);
    }

    /// The summary line with a known cost (or none).
    pub fn summary_with_cost(
        &self,
        outcome: &TurnOutcome,
        wall: std::time::Duration,
        cost: Option<f64>,
        context: Option<keel_agent::ContextUsage>,
    ) {
        self.spin(None);
        self.settle_plan();
        let (mark, what) = match outcome.reason {
            TurnEndReason::Completed => (self.paint("32", "✓"), "completed".to_owned()),
            TurnEndReason::Aborted => (self.paint("33", "■"), "aborted".to_owned()),
            TurnEndReason::MaxSteps => (self.paint("33", "■"), "step limit reached".to_owned()),
            TurnEndReason::Looping => (self.paint("33", "■"), "stopped: repeating the same calls".to_owned()),
            other => (self.paint("31", "✗"), other.as_str().replace('_', " ")),
        };
        let mut parts = vec![
            format!("{} {}", outcome.steps, if outcome.steps == 1 { "step" } else { "steps" }),
            format!("{} tool {}", outcome.tool_calls, if outcome.tool_calls == 1 { "call" } else { "calls" }),
        ];
        parts.push(usage_text(&outcome.usage));
        if let Some(cost) = cost {
            parts.push(format!("${cost:.4}"));
        }
        parts.push(duration(wall));
        if let Some(context) = context.filter(|c| c.window.is_some()) {
            parts.push(format!("context {}", context_text(context)));
        }
        // Wider than the terminal, it goes on at a separator (not mid-word).
        let lead = format::columns(&format!("✓ {what} · "));
        let mut lines = format::fit_parts(lead, &parts, width().saturating_sub(1)).into_iter();
        self.line(&format!("{mark} {what} · {}", self.paint("2", &lines.next().unwrap_or_default())));
        for line in lines {
            self.line(&format!("  {}", self.paint("2", &line)));
        }
        if let Some(message) = &outcome.message
            && outcome.reason != TurnEndReason::Completed
        {
            self.line(&format!("  {message}"));
        }
    }
}

/// One line saying how a compaction ended.
pub fn compaction_text(end: &keel_session::CompactionEnd) -> String {
    match end.outcome {
        keel_session::CompactionOutcome::Compacted => format!(
            "  context compacted: ~{} → ~{} tokens (older steps summarized)",
            thousands(end.tokens_before),
            thousands(end.tokens_after)
        ),
        keel_session::CompactionOutcome::Dropped => format!(
            "  context compacted: ~{} → ~{} tokens (older steps dropped: {})",
            thousands(end.tokens_before),
            thousands(end.tokens_after),
            end.failure.as_deref().unwrap_or("no usable summary")
        ),
        keel_session::CompactionOutcome::Restarted => {
            "  stuck: starting the task again from your request with a fresh context (files stay as they are)"
                .to_owned()
        }
        _ => match &end.failure {
            Some(why) => format!("  no summary ({why}); the conversation is unchanged"),
            None => "  compaction stopped; the conversation is unchanged".to_owned(),
        },
    }
}

/// `61% of 32k` (or `~12,345 tokens` when the window is unknown).
pub fn context_text(usage: keel_agent::ContextUsage) -> String {
    match (usage.percent(), usage.window) {
        (Some(percent), Some(window)) if window >= 1000 => format!("{percent}% of {}k", window / 1000),
        (Some(percent), Some(window)) => format!("{percent}% of {window}"),
        _ => format!("~{} tokens", thousands(usage.tokens)),
    }
}

/// `1,234 in (1,000 cached, 200 to cache) · 56 out`.
pub fn usage_text(usage: &Usage) -> String {
    let cached = match (usage.cached_tokens, usage.cache_write_tokens) {
        (0, 0) => String::new(),
        (read, 0) => format!(" ({} cached)", thousands(read)),
        (0, written) => format!(" ({} to cache)", thousands(written)),
        (read, written) => format!(" ({} cached, {} to cache)", thousands(read), thousands(written)),
    };
    format!("{} in{cached} · {} out", thousands(usage.input_tokens), thousands(usage.output_tokens))
}

impl Sink for Terminal {
    fn emit(&self, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::Logged(event) => match &event.kind {
                // Before the first step a turn may already ask the model (a small model's
                // intent, a compaction): on a slow local model that was a minute of
                // nothing on the screen.
                EventKind::TurnStart(_) => self.spin(Some(WAITING.into())),
                EventKind::StepStart(_) => {
                    self.with(|s| {
                        s.streamed_chars = 0;
                        s.reasoning.clear();
                        s.reasoned = None;
                        s.live = None;
                    });
                    // Nothing is known of the reply yet: a model that reasons says so
                    // with its first reasoning delta.
                    self.spin(Some(WAITING.into()));
                }
                EventKind::AssistantMessage(message) => {
                    self.reasoned();
                    self.with(|state| state.live = None);
                    self.reply_done(message);
                    self.spin(None);
                    self.with(|state| {
                        if state.text_open {
                            outln!();
                            state.text_open = false;
                        }
                    });
                }
                EventKind::ToolCall(call) => {
                    if let Some(keel_session::Effect::Plans { steps }) = &call.effect {
                        self.with(|state| state.plan_call = Some((call.call_id.clone(), steps.len())));
                        self.plan(steps);
                    }
                }
                EventKind::ContextPruned(pruned) => {
                    self.line(&self.paint(
                        "2",
                        &format!(
                            "  context: {} old tool output(s) pruned (~{} tokens freed)",
                            pruned.results.len(),
                            thousands(pruned.tokens_freed)
                        ),
                    ));
                }
                // Images a provider refused: the model gets notes in their place from now on.
                EventKind::ImagesWithdrawn(withdrawn) => {
                    self.line(&self.paint("33", &format!("  {}", clip(&withdrawn.describe(), 300))));
                }
                EventKind::CompactionStart(start)
                    if start.reason == keel_session::CompactionReason::Restart => {}
                EventKind::CompactionStart(start) => {
                    self.spin(Some(format!(
                        "compacting the context ({} tokens)",
                        thousands(start.tokens_before)
                    )));
                }
                EventKind::CompactionEnd(end) => {
                    self.spin(None);
                    self.line(&self.paint("33", &compaction_text(end)));
                }
                // A user's hook that failed (yellow) or decided something (dim).
                EventKind::HookRun(run) => {
                    if let Some(line) = crate::user_hooks::describe(run) {
                        self.line(&self.paint(if run.failed() { "33" } else { "2" }, &line));
                    }
                }
                EventKind::TurnEnd(_) | EventKind::StepEnd(_) => {
                    self.spin(None);
                    if matches!(event.kind, EventKind::TurnEnd(_)) {
                        self.settle_plan();
                    }
                    self.with(|state| {
                        if state.text_open {
                            outln!();
                            state.text_open = false;
                        }
                    });
                }
                _ => {}
            },
            AgentEvent::Model(ModelEvent::TextDelta(text)) => {
                self.reasoned();
                // The spinner stays until text is actually printed (it may be held).
                self.with(|state| state.live = None);
                self.spin(Some("writing".into()));
                self.text(text);
            }
            AgentEvent::Model(ModelEvent::ThinkingDelta(text)) => {
                // The reasoning streams as one line, its latest, beside the spinner.
                self.with(|state| {
                    state.reasoning.push_str(text);
                    if state.reasoning.len() > 2048 {
                        let cut = state.reasoning.len() - 1024;
                        let cut = (cut..state.reasoning.len())
                            .find(|i| state.reasoning.is_char_boundary(*i))
                            .unwrap_or(0);
                        state.reasoning.drain(..cut);
                    }
                    let last = state.reasoning.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
                    state.live = Some(last.trim().to_owned());
                    state.reasoned.get_or_insert_with(Instant::now);
                });
                self.spin(Some("reasoning".into()));
            }
            AgentEvent::Model(ModelEvent::ToolCallDelta { name: Some(name), .. }) => {
                self.reasoned();
                self.spin(Some(format!("preparing {name}")));
            }
            AgentEvent::Model(ModelEvent::Retrying { attempt, max_retries, delay, reason }) => {
                self.line(&self.paint(
                    "33",
                    &format!(
                        "  retry {attempt}/{max_retries} in {}: {}",
                        duration(*delay),
                        clip(reason, 240)
                    ),
                ));
                self.spin(Some("waiting to retry".into()));
            }
            AgentEvent::Model(_) => {}
            AgentEvent::ToolStarted { call, .. } => {
                self.spin(Some(format!("{} {}", call.name, short_args(&call.name, &call.arguments))));
            }
            AgentEvent::ToolProgress { text, .. } => self.with(|state| state.live = Some((*text).to_owned())),
            AgentEvent::Subagent { call_id, update } => self.subagent(call_id, update),
            AgentEvent::ToolFinished { step, call, result, duration: took } => {
                self.with(|state| state.live = subagents::live(&state.children));
                let mark = if result.is_error { self.paint("31", "✗") } else { self.paint("32", "✓") };
                let planned = self.with(|state| match &state.plan_call {
                    Some((id, steps)) if *id == call.id => Some(*steps),
                    _ => None,
                });
                let args = match planned {
                    Some(steps) => format!("{steps} {}", if steps == 1 { "step" } else { "steps" }),
                    None => short_args(&call.name, &call.arguments),
                };
                // A call refused before it ran (by the user or a rule): the reason's first
                // line, and no output under it. A declined shell call showed the refusal's
                // words for the model as if they were the command's output.
                let refused = result.error_code.as_deref() == Some("denied");
                let summary = if refused {
                    format::first_statement(&result.content)
                } else {
                    short_result(&call.name, &result.content, result.is_error)
                };
                let took = if took.is_zero() { String::new() } else { duration(*took) };
                // One line on the terminal: the summary gives way, never the time.
                let used = format::columns(&format!("{step:>3} ✓ {} {args}  → ", call.name));
                let after = if took.is_empty() { 0 } else { took.len() + 2 };
                let summary = format::fit_summary(&summary, used, after + 1, width());
                let timing = if took.is_empty() { took } else { format!("  {}", self.paint("2", &took)) };
                self.line(&format!(
                    "{step:>3} {mark} {} {args}  → {summary}{timing}",
                    self.paint("1", &call.name)
                ));
                let shown = match &result.change {
                    Some(change) => changes::diff(change, self.color),
                    None if call.name == "shell" && !refused => changes::tail(&result.content),
                    None => Vec::new(),
                };
                for line in shown {
                    self.line(&if line.contains('\x1b') { line } else { self.paint("2", &line) });
                }
                self.spin(Some(WAITING.into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::may_be_text_call;

    #[test]
    fn text_that_may_be_a_call_is_recognised_early() {
        for held in ["", "  ", "<tool", "{\"na", "```json\n{", "\n<tools>"] {
            assert!(may_be_text_call(held), "{held:?}");
        }
        for shown in ["The", "I ran it", "- item"] {
            assert!(!may_be_text_call(shown), "{shown:?}");
        }
    }
}
