//! The transcript as Markdown: your messages and the model's answers as they were written
//! (they are Markdown), reasoning and asides folded in `<details>`, everything a tool or
//! a command wrote in fenced code blocks (whose fence is longer than any backtick run
//! inside, so no output can close it early).

use crate::render::format::{short_args, thousands};

use super::transcript::{
    Block, Bounded, Call, Transcript, compaction_line, dollars, source_label, tokens, total_cost,
};

/// The transcript as one Markdown document.
pub fn render(transcript: &Transcript) -> String {
    let mut out = String::new();
    match &transcript.header {
        Some(header) => {
            out.push_str(&format!("# keel session `{}`\n\n", header.id));
            out.push_str(&format!("- created: {}\n", header.created));
            out.push_str(&format!("- folder: `{}`\n", inline_code(&header.cwd)));
            if let Some(parent) = &header.parent {
                out.push_str(&format!("- forked from `{}` at event {}\n", parent.id, parent.seq));
            }
        }
        None => out.push_str("# keel session\n\n"),
    }
    if !transcript.models.is_empty() {
        let models: Vec<String> =
            transcript.models.iter().map(|(provider, model)| format!("{model} ({provider})")).collect();
        out.push_str(&format!("- model: {}\n", models.join(", ")));
    }
    out.push_str(&format!("- tokens: {}\n", tokens(&transcript.usage)));
    out.push_str(&format!("- cost: {}\n", total_cost(transcript.cost)));
    for block in &transcript.blocks {
        out.push('\n');
        block_into(block, &mut out);
    }
    out
}

fn block_into(block: &Block, out: &mut String) {
    match block {
        Block::Model { provider, model, tools, profile } => {
            let profile = profile.as_deref().map(|p| format!(", profile {p}")).unwrap_or_default();
            out.push_str(&format!(
                "_Model {model} ({provider}){profile}; tools: {}_\n",
                if tools.is_empty() { "none".to_owned() } else { tools.join(", ") }
            ));
        }
        Block::TurnStart { turn } => out.push_str(&format!("---\n\n## Turn {turn}\n")),
        Block::User { text, source, reason, images } => {
            let label = match (source_label(*source), reason) {
                (None, _) => "You".to_owned(),
                (Some(label), Some(reason)) => format!("You ({label}: {reason})"),
                (Some(label), None) => format!("You ({label})"),
            };
            if source_label(*source) == Some("environment") {
                details_into(&label, &fenced(text, "text"), out);
            } else {
                out.push_str(&format!("**{label}:**\n\n{}\n", text.trim_end()));
            }
            images_into(images, out);
        }
        Block::Reasoning { text } => details_into("Reasoning", &escape_html(text.trim_end()), out),
        Block::Answer { text } => out.push_str(&format!("**keel:**\n\n{}\n", text.trim_end())),
        Block::Call(call) => call_into(call, out),
        Block::Aside { purpose, prompt, reply, error } => {
            let mut body = format!("Request:\n\n{}\n", fenced(prompt, "text"));
            match error {
                Some(error) => body.push_str(&format!("Failed: {}\n", escape_html(error))),
                None => body.push_str(&format!("Reply:\n\n{}\n", fenced(reply, "text"))),
            }
            details_into(&format!("Request beside the conversation ({purpose})"), &body, out);
        }
        Block::Note { text } => out.push_str(&format!("_{}_\n", escape_html(text))),
        Block::Compaction { reason, end } => {
            let line = compaction_line(*reason, end.as_ref());
            match end.as_ref().filter(|e| !e.summary.is_empty()) {
                Some(end) => details_into(&escape_html(&line), &fenced(&end.summary, "text"), out),
                None => out.push_str(&format!("_{}_\n", escape_html(&line))),
            }
        }
        Block::TurnEnd { turn, reason, message, usage, cost } => {
            if let Some(message) = message.as_deref().filter(|_| reason.as_str() == "error") {
                out.push_str(&format!("**Error:**\n\n{}\n\n", fenced(message, "text")));
            }
            let message = match message {
                Some(message) if reason.as_str() != "error" => format!(": {}", escape_html(message)),
                _ => String::new(),
            };
            out.push_str(&format!(
                "_Turn {turn} {}{message} · {} · {}_\n",
                reason.as_str(),
                tokens(usage),
                dollars(*cost)
            ));
        }
    }
}

/// One line per image: what it is and its hash (the bytes are beside the session; the
/// HTML export shows them).
fn images_into(images: &[keel_llm::Image], out: &mut String) {
    for image in images {
        out.push_str(&format!(
            "\n_image: {} (sha256 `{}`)_\n",
            image.describe(),
            &image.sha256[..12.min(image.sha256.len())]
        ));
    }
}

fn call_into(call: &Call, out: &mut String) {
    let mark = match &call.result {
        Some(result) if result.is_error => "✗",
        Some(_) => "✓",
        None => "…",
    };
    let args = short_args(&call.name, &call.raw_arguments);
    out.push_str(&format!("**{mark} `{}`** {}\n\n", inline_code(&call.name), code_span(&args)));
    if !call.arguments.trim().is_empty() && call.arguments.trim() != "{}" {
        out.push_str(&fenced(&call.arguments, "json"));
        out.push('\n');
    }
    let Some(result) = &call.result else {
        out.push_str("_no result logged_\n");
        return;
    };
    let mut facts = Vec::new();
    if let Some(code) = &result.error_code {
        facts.push(format!("error `{code}`"));
    }
    if let Some(ms) = result.duration_ms {
        facts.push(crate::render::format::duration(std::time::Duration::from_millis(ms)));
    }
    let facts = if facts.is_empty() { String::new() } else { format!(" ({})", facts.join(", ")) };
    out.push_str(&format!("Result{facts}:\n\n"));
    bounded_into(&result.content, "text", out);
    images_into(&result.images, out);
    if let Some(change) = &result.change {
        let verb = if change.created { "created" } else { "changed" };
        out.push_str(&format!(
            "\n{verb} `{}` (+{} −{}):\n\n{}",
            inline_code(&change.path),
            thousands(u64::from(change.added)),
            thousands(u64::from(change.removed)),
            fenced(&change.diff, "diff")
        ));
        if change.cut_lines > 0 {
            out.push_str(&format!(
                "\n_{} more diff lines not logged_\n",
                thousands(u64::from(change.cut_lines))
            ));
        }
    }
}

fn bounded_into(text: &Bounded, language: &str, out: &mut String) {
    out.push_str(&fenced(&text.head, language));
    if let Some(cut) = &text.cut {
        out.push_str(&format!("\n_… {cut} (the whole result is in the session log) …_\n\n"));
        out.push_str(&fenced(&text.tail, language));
    }
}

fn details_into(summary: &str, body: &str, out: &mut String) {
    out.push_str(&format!("<details><summary>{summary}</summary>\n\n{}\n\n</details>\n", body.trim_end()));
}

/// `text` in a fenced code block whose fence no line of `text` can close.
pub fn fenced(text: &str, language: &str) -> String {
    let longest = longest_run(text, '`').max(longest_run(text, '~'));
    let fence = "`".repeat((longest + 1).max(3));
    let body = text.trim_end_matches('\n');
    format!("{fence}{language}\n{body}\n{fence}\n")
}

/// `text` as an inline code span (``` `` a`b `` ```), on one line.
fn code_span(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let text = text.replace('\n', " ");
    let run = longest_run(&text, '`');
    if run == 0 {
        return format!("`{text}`");
    }
    let ticks = "`".repeat(run + 1);
    format!("{ticks} {text} {ticks}")
}

/// Text to go inside an inline code span opened with one backtick: backticks would close it.
fn inline_code(text: &str) -> String {
    text.replace('`', "'").replace('\n', " ")
}

fn longest_run(text: &str, c: char) -> usize {
    let (mut longest, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// `<`, `>` and `&` as entities: prose keel did not write goes into `<details>` and
/// notes, where a stray `</details>` or tag must stay text.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_output_closes_its_fence() {
        let text = "before\n```\nnot the end\n````\nafter";
        let block = fenced(text, "text");
        assert!(block.starts_with("`````text\n") && block.ends_with("\n`````\n"), "{block}");
        assert_eq!(code_span("a`b"), "`` a`b ``");
        assert_eq!(escape_html("</details><b>"), "&lt;/details&gt;&lt;b&gt;");
    }
}
