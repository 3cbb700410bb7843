//! The pure part of keeping a session within its context window: token estimates,
//! which results to prune, where to cut, and the texts the model sees.

use std::collections::{BTreeSet, HashMap};

use keel_llm::{ContentBlock, Message, ToolCall, UserMessage};
use keel_session::PrunedResult;

/// The first line of every summary message, so a later compaction recognises it.
pub const SUMMARY_MARKER: &str =
    "[Context compacted: the earlier part of this conversation was replaced by this summary.]";

/// The last line of every summary message: input joined after it is the user's.
pub const SUMMARY_END: &str = "[End of the summary.]";

/// Delimits the user's own messages carried verbatim in a summary.
const USER_OPEN: &str = "<user-messages>";
const USER_CLOSE: &str = "</user-messages>";

/// A result smaller than this (estimated tokens) is never pruned: its stub would save
/// too little.
const MIN_PRUNED_TOKENS: u64 = 120;

/// Estimated tokens of a text: about 3.5 characters a token for code and English.
pub fn text_tokens(text: &str) -> u64 {
    (text.chars().count() as u64 * 2).div_ceil(7)
}

/// Estimated tokens of one message, its framing included.
pub fn message_tokens(message: &Message) -> u64 {
    let body = match message {
        Message::User(user) => text_tokens(&user.content) + images_tokens(&user.images),
        Message::ToolResult(result) => text_tokens(&result.content) + images_tokens(&result.images),
        Message::Assistant(reply) => reply
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } => text_tokens(text),
                ContentBlock::ToolCall(call) => text_tokens(&call.name) + text_tokens(&call.arguments),
                other => text_tokens(&format!("{other:?}")) / 2,
            })
            .sum(),
    };
    body + 6
}

/// Estimated tokens of images.
fn images_tokens(images: &[keel_llm::Image]) -> u64 {
    images.iter().map(keel_llm::Image::estimated_tokens).sum()
}

/// Estimated tokens of `messages`.
pub fn messages_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The context the next request will use: what the provider last reported plus an
/// estimate of the messages since, or else an estimate of everything (`overhead`: the
/// system prompt and tool definitions).
pub fn context_tokens(messages: &[Message], reported: Option<(u64, usize)>, overhead: u64) -> u64 {
    match reported {
        Some((tokens, covered)) if covered <= messages.len() => {
            tokens + messages_tokens(&messages[covered..])
        }
        _ => overhead + messages_tokens(messages),
    }
}

/// Every call in `messages` by id.
fn calls_by_id(messages: &[Message]) -> HashMap<&str, &ToolCall> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(reply) => Some(reply.tool_calls()),
            _ => None,
        })
        .flatten()
        .map(|call| (call.id.as_str(), call))
        .collect()
}

/// A short description of a call for a stub: the tool and its main argument.
fn describe_call(call: Option<&&ToolCall>, name: &str) -> String {
    let main = call.and_then(|call| {
        let args: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
        ["command", "path", "pattern", "query", "url"]
            .iter()
            .find_map(|key| args.get(*key).and_then(|v| v.as_str()).map(str::to_owned))
    });
    match main {
        Some(main) => {
            let visible: Vec<char> = main.chars().filter(|c| !c.is_control()).collect();
            let mut main: String = visible.iter().take(80).collect();
            if visible.len() > 80 {
                main.push('…');
            }
            format!("{name} `{main}`")
        }
        None => name.to_owned(),
    }
}

fn size_text(chars: usize) -> String {
    if chars >= 10_240 { format!("{} KB", chars / 1024) } else { format!("{chars} characters") }
}

/// Old tool results to replace with stubs: large ones before the most recent
/// `protect` tokens of the conversation, not already stubs. Returns them with the
/// tokens freed.
pub fn prune_plan(messages: &[Message], protect: u64) -> (Vec<PrunedResult>, u64) {
    // The last step (from the last reply on) is always protected: the model has not
    // seen its results yet.
    let last_reply = messages.iter().rposition(|m| matches!(m, Message::Assistant(_))).unwrap_or(0);
    let mut recent = 0;
    let mut protected_from = messages.len();
    for (index, message) in messages.iter().enumerate().rev() {
        recent += message_tokens(message);
        if recent > protect && index < last_reply {
            break;
        }
        protected_from = index;
    }
    let calls = calls_by_id(messages);
    let mut pruned = Vec::new();
    let mut freed = 0;
    for message in &messages[..protected_from] {
        let Message::ToolResult(result) = message else { continue };
        // A result's images go with its text (a screenshot is the bulk of an MCP result).
        let tokens = text_tokens(&result.content) + images_tokens(&result.images);
        if tokens < MIN_PRUNED_TOKENS || result.content.starts_with("[output of ") {
            continue;
        }
        let images = match result.images.len() {
            0 => String::new(),
            1 => " and an image".to_owned(),
            n => format!(" and {n} images"),
        };
        let stub = format!(
            "[output of {} pruned: {}{images}; rerun to see it]",
            describe_call(calls.get(result.call_id.as_str()), &result.name),
            size_text(result.content.len())
        );
        freed += tokens.saturating_sub(text_tokens(&stub));
        pruned.push(PrunedResult { call_id: result.call_id.clone(), stub });
    }
    (pruned, freed)
}

/// Where to cut: the index of the first message kept verbatim, so that what is kept
/// is at most `keep` tokens where possible (at least the last step otherwise). Never
/// a tool result (it stays right after its call), never 0 (something must be
/// summarized). `None` when nothing can be cut.
pub fn cut_index(messages: &[Message], keep: u64) -> Option<usize> {
    let mut kept = 0;
    let mut best = None;
    for index in (1..messages.len()).rev() {
        kept += message_tokens(&messages[index]);
        if matches!(messages[index], Message::ToolResult(_)) {
            continue;
        }
        if kept > keep && best.is_some() {
            break;
        }
        best = Some(index);
    }
    best
}

/// Files the calls in `messages` read and changed, by what each call's tool declares
/// ([`crate::Tool::effect`]); a call whose result is an error touched nothing.
pub fn files_touched(messages: &[Message], tools: &crate::ToolRegistry) -> (Vec<String>, Vec<String>) {
    let failed = failed_calls(messages);
    let mut read = BTreeSet::new();
    let mut changed = BTreeSet::new();
    for call in calls_by_id(messages).values().filter(|call| !failed.contains(call.id.as_str())) {
        match tools.effect_of(call) {
            keel_session::Effect::Reads { path: Some(path) } => read.insert(path),
            keel_session::Effect::Writes { path } => changed.insert(path),
            _ => false,
        };
    }
    (read.into_iter().collect(), changed.into_iter().collect())
}

/// The user's own messages in `messages`, oldest first: those inside an earlier
/// summary are taken from it, the summary itself is not.
pub(crate) fn user_messages(messages: &[Message]) -> Vec<String> {
    let mut texts = Vec::new();
    for message in messages {
        let Message::User(UserMessage { content, .. }) = message else { continue };
        match content.strip_prefix(SUMMARY_MARKER) {
            Some(summary) => {
                let inner = summary
                    .split_once(USER_OPEN)
                    .and_then(|(_, rest)| rest.split_once(USER_CLOSE))
                    .map(|(inner, _)| inner.trim());
                texts.extend(inner.filter(|t| !t.is_empty()).map(str::to_owned));
                // Input that joined the summary message (kept right after it).
                let after = summary.split_once(SUMMARY_END).map(|(_, after)| after.trim());
                texts.extend(after.filter(|t| !t.is_empty()).map(str::to_owned));
            }
            None => texts.push(content.clone()),
        }
    }
    texts
}

/// The user's messages from `messages` that fit in `budget` tokens: the first (the
/// task) always, cut if it must be; then the most recent ones that fit.
fn carried_user_messages(messages: &[Message], budget: u64) -> String {
    let texts = user_messages(messages);
    let Some((first, rest)) = texts.split_first() else { return String::new() };
    let budget_chars = (budget * 7 / 2) as usize;
    let mut first = first.clone();
    if first.chars().count() > budget_chars {
        first = first.chars().take(budget_chars).collect::<String>() + " …[cut to fit]";
    }
    let mut used = text_tokens(&first);
    let mut recent = Vec::new();
    for text in rest.iter().rev() {
        let tokens = text_tokens(text);
        if used + tokens > budget {
            break;
        }
        used += tokens;
        recent.push(text.as_str());
    }
    recent.reverse();
    let skipped = rest.len() - recent.len();
    let mut out = first;
    if skipped > 0 {
        out.push_str(&format!("\n\n[{skipped} later message(s) left out to fit]"));
    }
    for text in recent {
        out.push_str("\n\n");
        out.push_str(text);
    }
    out
}

/// The request for a summary, sent after the older messages (no tools are offered).
pub fn summary_instruction(focus: Option<&str>) -> String {
    let mut text = String::from(
        "Stop working on the task for a moment and do not call any tool. The earlier part of this conversation \
is about to be removed to free space, so write a summary of everything so far that lets you continue the \
task without it. Use exactly these headings:\n\
## Task\nThe user's request in their own words, with every requirement.\n\
## Decisions\nChoices made and why.\n\
## Files read\nPaths, and what matters in each.\n\
## Files changed\nPaths, and what was changed.\n\
## Done\nWhat is finished and checked.\n\
## Remaining\nWhat is left to do.\n\
## Next step\nThe very next action.\n\
Be specific (names of files, functions, commands, error messages, values) and brief: at most 400 words.",
    );
    if let Some(focus) = focus.map(str::trim).filter(|f| !f.is_empty()) {
        text.push_str(&format!("\nPay particular attention to: {focus}"));
    }
    text
}

/// The messages of the summary request: the older part and the instruction (joined to
/// the last message when that is user input, so roles still alternate).
pub fn summary_request(older: &[Message], instruction: &str) -> Vec<Message> {
    let mut messages = older.to_vec();
    match messages.last_mut() {
        Some(Message::User(user)) => {
            user.content.push_str("\n\n");
            user.content.push_str(instruction);
        }
        _ => messages.push(Message::User(UserMessage::text(instruction.to_owned()))),
    }
    messages
}

/// The message that replaces the older part: the marker, the user's messages verbatim
/// (within `user_budget` tokens) and the model's summary or, when there is none, a note
/// of what was dropped.
pub fn summary_message(
    older: &[Message],
    user_budget: u64,
    summary: Result<&str, &str>,
    tools: &crate::ToolRegistry,
) -> String {
    let users = carried_user_messages(older, user_budget);
    let mut text = format!(
        "{SUMMARY_MARKER}\n\nThe user's messages so far, verbatim:\n{USER_OPEN}\n{users}\n{USER_CLOSE}\n\n"
    );
    match summary {
        Ok(summary) => {
            text.push_str("Summary of the work so far:\n");
            text.push_str(summary.trim());
        }
        Err(why) => {
            let (read, changed) = files_touched(older, tools);
            let list = |files: &[String]| if files.is_empty() { "none".to_owned() } else { files.join(", ") };
            text.push_str(&format!(
                "The earlier steps were dropped to fit the context window ({why}). Files read: {}. Files changed: {}. \
Check the current state of files before relying on what you remember.",
                list(&read),
                list(&changed)
            ));
        }
    }
    if let Some(plan) = latest_plan(older, tools) {
        text.push_str(&plan_block(&plan));
    }
    text.push('\n');
    text.push_str(SUMMARY_END);
    text
}

// The plan the agent keeps (`Effect::Plans`), carried over a compaction: the summary
// that replaces the older messages ends with the plan as last set there, so a plan made
// early in a long session outlives the calls that made it.

/// Opens the plan in a summary.
const PLAN_OPEN: &str = "<plan>";
/// Closes it.
const PLAN_CLOSE: &str = "</plan>";

/// The plan as last set in `messages`, as text: by the latest call whose tool declares
/// a plan and that did not fail, or, before any, by an earlier summary that carried one.
pub(crate) fn latest_plan(messages: &[Message], tools: &crate::ToolRegistry) -> Option<String> {
    let failed = failed_calls(messages);
    let mut plan = None;
    for message in messages {
        match message {
            Message::User(user) if user.content.starts_with(SUMMARY_MARKER) => {
                if let Some(carried) = carried_plan(&user.content) {
                    plan = Some(carried.to_owned());
                }
            }
            Message::Assistant(reply) => {
                for call in reply.tool_calls() {
                    if let keel_session::Effect::Plans { steps } = tools.effect_of(call)
                        && !failed.contains(call.id.as_str())
                    {
                        plan = Some(keel_session::plan_text(&steps));
                    }
                }
            }
            _ => {}
        }
    }
    plan
}

/// The lines a summary ends with for `plan`.
pub(crate) fn plan_block(plan: &str) -> String {
    format!(
        "\n\nThe plan as last set (keep it current with the plan tool):\n{PLAN_OPEN}\n{plan}\n{PLAN_CLOSE}"
    )
}

/// The plan a summary carried.
fn carried_plan(summary: &str) -> Option<&str> {
    let (_, rest) = summary.rsplit_once(PLAN_OPEN)?;
    let (plan, _) = rest.split_once(PLAN_CLOSE)?;
    Some(plan.trim()).filter(|plan| !plan.is_empty())
}

/// Whether the call `id` has an error result in `messages`.
/// The ids of the calls in `messages` whose result is an error (they touched nothing
/// and set nothing).
fn failed_calls(messages: &[Message]) -> std::collections::HashSet<&str> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(result) if result.is_error => Some(result.call_id.as_str()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
