//! A session's log read as a transcript: what people read of it, in log order, each
//! call's result beside its call, tokens and cost per turn. The one reading of the log
//! the Markdown and HTML exports share.

use std::collections::{BTreeMap, HashMap};

use keel_llm::{ContentBlock, Usage};
use keel_session::{
    CompactionEnd, CompactionReason, Event, EventKind, FileChange, InputSource, SessionHeader, TurnEndReason,
};

use crate::config::Price;

/// Most lines of a tool result shown from its start, and from its end.
const HEAD_LINES: usize = 80;
const TAIL_LINES: usize = 20;
/// Most bytes of a tool result shown from its start, and from its end.
const HEAD_BYTES: usize = 12 * 1024;
const TAIL_BYTES: usize = 4 * 1024;

/// The transcript of one session.
#[derive(Debug, Default)]
pub struct Transcript {
    /// The session's header, when the log has one.
    pub header: Option<SessionHeader>,
    /// What happened, in order.
    pub blocks: Vec<Block>,
    /// Every model (provider, model) the session's requests went to, in order of first use.
    pub models: Vec<(String, String)>,
    /// Tokens of every request of the session (the conversation's, compactions', asides').
    pub usage: Usage,
    /// Dollars for them; `None` when a model's price is unknown.
    pub cost: Option<f64>,
}

/// One piece of the transcript.
#[derive(Debug)]
pub enum Block {
    /// The requests go to this model from here on.
    Model { provider: String, model: String, tools: Vec<String>, profile: Option<String> },
    /// A turn begins.
    TurnStart { turn: u32 },
    /// Input from the user, or added for them (`source` says which).
    User { text: String, source: InputSource, reason: Option<String>, images: Vec<keel_llm::Image> },
    /// The model's reasoning (folded when shown).
    Reasoning { text: String },
    /// The model's answer text.
    Answer { text: String },
    /// A tool call, with its result once the log has it.
    Call(Call),
    /// A request made beside the conversation (the task's intent, an editor, an answer).
    Aside { purpose: String, prompt: String, reply: String, error: Option<String> },
    /// Something keel did that changes what the model sees (pruning, the task's intent,
    /// an interrupted reply).
    Note { text: String },
    /// The older part of the conversation replaced by a summary (or not).
    Compaction { reason: CompactionReason, end: Option<CompactionEnd> },
    /// A turn ends.
    TurnEnd { turn: u32, reason: TurnEndReason, message: Option<String>, usage: Usage, cost: Option<f64> },
}

/// A tool call and its result.
#[derive(Debug)]
pub struct Call {
    /// The call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments: pretty JSON when they parse, else as the model wrote them.
    pub arguments: String,
    /// The raw arguments, for one-line summaries.
    pub raw_arguments: String,
    /// The result, once logged.
    pub result: Option<CallResult>,
}

/// A tool call's result.
#[derive(Debug)]
pub struct CallResult {
    /// The result's text, bounded.
    pub content: Bounded,
    /// The untouched text's one-line summary.
    pub summary: String,
    /// The call failed.
    pub is_error: bool,
    /// Why, as a code (`not_found`, `denied`, …).
    pub error_code: Option<String>,
    /// Images it returned.
    pub images: Vec<keel_llm::Image>,
    /// How long it ran.
    pub duration_ms: Option<u64>,
    /// What it changed in a file.
    pub change: Option<FileChange>,
}

/// A text cut to a readable size: its start, its end and what was left out between them.
#[derive(Debug, PartialEq, Eq)]
pub struct Bounded {
    /// The start (the whole text when nothing was cut).
    pub head: String,
    /// What was cut, e.g. `412 lines (38.2 KB) cut`; `None` when nothing was.
    pub cut: Option<String>,
    /// The end, after the cut.
    pub tail: String,
}

impl Bounded {
    /// `text`, with its middle cut when it is longer than the bounds.
    pub fn new(text: &str) -> Bounded {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        if lines.len() <= HEAD_LINES + TAIL_LINES && text.len() <= HEAD_BYTES + TAIL_BYTES {
            return Bounded { head: text.to_owned(), cut: None, tail: String::new() };
        }
        let mut head = String::new();
        let mut head_lines = 0;
        for line in &lines {
            if head_lines == HEAD_LINES || head.len() + line.len() > HEAD_BYTES {
                break;
            }
            head.push_str(line);
            head_lines += 1;
        }
        if head_lines == 0 {
            head = prefix(text, HEAD_BYTES).to_owned();
        }
        let mut tail_parts: Vec<&str> = Vec::new();
        let mut tail_len = 0;
        for line in lines[head_lines.max(1)..].iter().rev() {
            if tail_parts.len() == TAIL_LINES || tail_len + line.len() > TAIL_BYTES {
                break;
            }
            tail_len += line.len();
            tail_parts.push(line);
        }
        let tail: String = tail_parts.into_iter().rev().collect();
        let cut_bytes = text.len().saturating_sub(head.len() + tail.len());
        let cut_lines = text[head.len()..text.len() - tail.len()].lines().count();
        let cut = format!(
            "{} {} ({}) cut here",
            crate::render::format::thousands(cut_lines as u64),
            if cut_lines == 1 { "line" } else { "lines" },
            size(cut_bytes)
        );
        Bounded { head, cut: Some(cut), tail }
    }
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `812 bytes`, `38.2 KB`, `4.1 MB`.
pub fn size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{:.1} KB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

/// Tokens and dollars of one turn (or of the session), summed as requests come.
#[derive(Debug, Default, Clone, Copy)]
struct Spend {
    usage: Usage,
    cost: Option<f64>,
    unpriced: bool,
}

impl Spend {
    fn add(&mut self, usage: Usage, model: &str, prices: &BTreeMap<String, Price>) {
        if usage.is_zero() {
            return;
        }
        self.usage += usage;
        match crate::pricing::cost(prices, model, &usage) {
            Some(dollars) => self.cost = Some(self.cost.unwrap_or(0.0) + dollars),
            None => self.unpriced = true,
        }
    }

    fn cost(&self) -> Option<f64> {
        if self.unpriced { None } else { Some(self.cost.unwrap_or(0.0)) }
    }
}

/// Reads `events` as a transcript, with costs from `prices` (the config's over the
/// built-in list).
pub fn read(events: &[Event], prices: &BTreeMap<String, Price>) -> Transcript {
    let mut out = Transcript::default();
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut model = String::new();
    let mut turn = Spend::default();
    let mut total = Spend::default();
    let mut open_compaction: Option<usize> = None;
    for event in events {
        match &event.kind {
            EventKind::SessionHeader(header) => out.header = Some(header.clone()),
            EventKind::RequestHeader(header) => {
                model = header.model.clone();
                let pair = (header.provider.clone(), header.model.clone());
                let changed = !matches!(
                    out.blocks.iter().rev().find_map(|b| match b {
                        Block::Model { provider, model, .. } => Some((provider, model)),
                        _ => None,
                    }),
                    Some((p, m)) if *p == pair.0 && *m == pair.1
                );
                if !out.models.contains(&pair) {
                    out.models.push(pair.clone());
                }
                if changed {
                    out.blocks.push(Block::Model {
                        provider: pair.0,
                        model: pair.1,
                        tools: header.tools.iter().map(|t| t.name.clone()).collect(),
                        profile: header.profile.clone(),
                    });
                }
            }
            EventKind::TurnStart(start) => {
                turn = Spend::default();
                out.blocks.push(Block::TurnStart { turn: start.turn });
            }
            EventKind::UserMessage(user) => out.blocks.push(Block::User {
                text: user.text.clone(),
                source: user.source,
                reason: user.reason.clone(),
                images: user.images.clone(),
            }),
            EventKind::AssistantMessage(message) => {
                let by = message.origin.as_ref().map_or(model.as_str(), |o| o.model.as_str());
                turn.add(message.usage, by, prices);
                total.add(message.usage, by, prices);
                for block in &message.content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            out.blocks.push(Block::Answer { text: text.clone() })
                        }
                        ContentBlock::Thinking { text, .. } if !text.trim().is_empty() => {
                            out.blocks.push(Block::Reasoning { text: text.clone() })
                        }
                        ContentBlock::RedactedThinking { .. } => out.blocks.push(Block::Reasoning {
                            text: "(reasoning the provider keeps encrypted)".to_owned(),
                        }),
                        ContentBlock::ToolCall(call) => {
                            calls.insert(call.id.clone(), out.blocks.len());
                            out.blocks.push(Block::Call(Call {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                arguments: pretty_json(&call.arguments),
                                raw_arguments: call.arguments.clone(),
                                result: None,
                            }));
                        }
                        _ => {}
                    }
                }
                if message.interrupted {
                    out.blocks.push(Block::Note { text: "the reply was cut off here".to_owned() });
                }
            }
            EventKind::ToolResult(result) => {
                let shown = CallResult {
                    content: Bounded::new(&result.content),
                    summary: crate::render::format::short_result(
                        &result.name,
                        &result.content,
                        result.is_error,
                    ),
                    is_error: result.is_error,
                    error_code: result.error_code.clone(),
                    duration_ms: result.duration_ms,
                    change: result.change.clone(),
                    images: result.images.clone(),
                };
                match calls.get(&result.call_id).and_then(|&at| out.blocks.get_mut(at)) {
                    Some(Block::Call(call)) => call.result = Some(shown),
                    _ => out.blocks.push(Block::Call(Call {
                        id: result.call_id.clone(),
                        name: result.name.clone(),
                        arguments: String::new(),
                        raw_arguments: String::new(),
                        result: Some(shown),
                    })),
                }
            }
            EventKind::ModelAside(aside) => {
                let usage = aside.reply.as_ref().map(|r| r.usage).unwrap_or_default();
                turn.add(usage, &model, prices);
                total.add(usage, &model, prices);
                let reply = aside.reply.as_ref().map(reply_text).unwrap_or_default();
                out.blocks.push(Block::Aside {
                    purpose: aside.purpose.clone(),
                    prompt: aside.prompt.clone(),
                    reply,
                    error: aside.error.clone(),
                });
            }
            EventKind::HookRun(run) => out.blocks.push(Block::Note { text: hook_text(run) }),
            EventKind::ImagesWithdrawn(withdrawn) => {
                out.blocks.push(Block::Note { text: withdrawn.describe() })
            }
            EventKind::TurnIntent(intent) => {
                out.blocks.push(Block::Note { text: intent_text(intent) });
            }
            EventKind::ContextPruned(pruned) => out.blocks.push(Block::Note {
                text: format!(
                    "{} old tool {} replaced by stubs to save context (about {} tokens)",
                    pruned.results.len(),
                    if pruned.results.len() == 1 { "result" } else { "results" },
                    crate::render::format::thousands(pruned.tokens_freed)
                ),
            }),
            EventKind::CompactionStart(start) => {
                open_compaction = Some(out.blocks.len());
                out.blocks.push(Block::Compaction { reason: start.reason, end: None });
            }
            EventKind::CompactionEnd(end) => {
                turn.add(end.usage, &model, prices);
                total.add(end.usage, &model, prices);
                match open_compaction.take().and_then(|at| out.blocks.get_mut(at)) {
                    Some(Block::Compaction { end: slot, .. }) => *slot = Some(end.clone()),
                    _ => out.blocks.push(Block::Compaction {
                        reason: CompactionReason::Threshold,
                        end: Some(end.clone()),
                    }),
                }
            }
            EventKind::TurnEnd(end) => out.blocks.push(Block::TurnEnd {
                turn: end.turn,
                reason: end.reason,
                message: end.message.clone(),
                usage: turn.usage,
                cost: turn.cost(),
            }),
            _ => {}
        }
    }
    out.usage = total.usage;
    out.cost = total.cost();
    out
}

/// Arguments as indented JSON when they are JSON, else as written.
fn pretty_json(raw: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_else(|_| raw.to_owned()),
        Err(_) => raw.to_owned(),
    }
}

/// An aside's reply: its text, or its calls' arguments (the intent reading is a call).
fn reply_text(reply: &keel_llm::AssistantMessage) -> String {
    let text = reply.text();
    if !text.trim().is_empty() {
        return text;
    }
    reply.tool_calls().map(|c| format!("{}({})", c.name, c.arguments)).collect::<Vec<_>>().join("\n")
}

/// `hook PreToolUse \`./check.sh\` for shell: deny (not on main)`.
fn hook_text(run: &keel_session::HookRun) -> String {
    let target = run.tool.as_deref().map(|t| format!(" for {t}")).unwrap_or_default();
    let what = if run.failed() {
        let error = run.error.as_deref().map(|e| format!(": {}", crate::render::format::clip(e, 200)));
        format!("{}{}", run.outcome.as_str(), error.unwrap_or_default())
    } else {
        run.decision.map_or("no decision", |d| d.as_str()).to_owned()
    };
    let reason = run.reason.as_deref().map(|r| format!(" ({})", crate::render::format::clip(r, 200)));
    format!("hook {} `{}`{target}: {what}{}", run.event, run.command, reason.unwrap_or_default())
}

fn intent_text(intent: &keel_session::TaskIntent) -> String {
    let wants = match intent.wants {
        Some(keel_session::Wants::Change) => "a change",
        Some(keel_session::Wants::Answer) => "an answer",
        Some(keel_session::Wants::Both) => "a change and an answer",
        None => "something unclear",
    };
    let mut text = format!("keel read the task as asking for {wants}");
    if intent.check == Some(true) {
        text.push_str(", with a check to run");
    }
    if intent.layout == Some(true) {
        text.push_str(", about layout");
    }
    text
}

/// `12,345 in (10,000 cached) · 678 out`.
pub fn tokens(usage: &Usage) -> String {
    use crate::render::format::thousands;
    let cached = if usage.cached_tokens > 0 {
        format!(" ({} cached)", thousands(usage.cached_tokens))
    } else {
        String::new()
    };
    format!("{} in{cached} · {} out", thousands(usage.input_tokens), thousands(usage.output_tokens))
}

/// `$0.0123`, or `cost unknown` when a model's price is not known.
pub fn dollars(cost: Option<f64>) -> String {
    match cost {
        Some(dollars) if dollars >= 1.0 => format!("${dollars:.2}"),
        Some(dollars) => format!("${dollars:.4}"),
        None => "cost unknown".to_owned(),
    }
}

/// The session's cost for its header: `$0.0123`, or why it is unknown.
pub fn total_cost(cost: Option<f64>) -> String {
    match cost {
        Some(_) => dollars(cost),
        None => "unknown (no price for the model: see `[pricing]` in the config)".to_owned(),
    }
}

/// How a user message came in, for a label: `None` for the user's own prompt.
pub fn source_label(source: InputSource) -> Option<&'static str> {
    match source {
        InputSource::Prompt => None,
        InputSource::Steer => Some("steering"),
        InputSource::FollowUp => Some("follow-up"),
        InputSource::Hook => Some("added by a hook"),
        InputSource::Harness => Some("added by keel"),
        InputSource::Context => Some("environment"),
        _ => Some("other"),
    }
}

/// What a compaction did, in one line.
pub fn compaction_line(reason: CompactionReason, end: Option<&CompactionEnd>) -> String {
    use keel_session::CompactionOutcome;
    let why = match reason {
        CompactionReason::Threshold => "the context was getting full",
        CompactionReason::Overflow => "the model said the context no longer fits",
        CompactionReason::Manual => "asked for",
        CompactionReason::Restart => "the turn was stuck and started again",
        _ => "other",
    };
    let Some(end) = end else { return format!("Compaction ({why}): did not finish") };
    let what = match end.outcome {
        CompactionOutcome::Compacted => "the older part was replaced by a summary",
        CompactionOutcome::Dropped => "the older part was dropped",
        CompactionOutcome::Aborted => "nothing changed",
        CompactionOutcome::Restarted => "the conversation started again from the task",
        _ => "other",
    };
    let failure = end.failure.as_deref().map(|f| format!(" ({f})")).unwrap_or_default();
    format!(
        "Compaction ({why}): {what}{failure}; {} → {} tokens",
        crate::render::format::thousands(end.tokens_before),
        crate::render::format::thousands(end.tokens_after)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_keeps_its_start_and_end_and_says_what_was_cut() {
        let text: String = (1..=500).map(|n| format!("line {n}\n")).collect();
        let bounded = Bounded::new(&text);
        assert!(bounded.head.starts_with("line 1\n") && bounded.head.ends_with("line 80\n"));
        assert!(bounded.tail.starts_with("line 481\n") && bounded.tail.ends_with("line 500\n"));
        assert_eq!(bounded.cut.as_deref(), Some("400 lines (3.5 KB) cut here"));
        let short = Bounded::new("ok\n");
        assert_eq!(short, Bounded { head: "ok\n".into(), cut: None, tail: String::new() });
        // One huge line: cut by bytes, on a character boundary.
        let wide = "é".repeat(20_000);
        let bounded = Bounded::new(&wide);
        assert!(bounded.head.len() <= HEAD_BYTES && bounded.cut.is_some());
    }
}
