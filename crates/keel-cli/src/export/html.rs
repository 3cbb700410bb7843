//! The transcript as one self-contained HTML page: inline CSS, no script, no fetched
//! resource (a Content-Security-Policy says so to the browser as well), everything from
//! the log escaped. Reasoning, asides and tool calls are folded in `<details>`; a call's
//! summary line says what it did and how it went.

use crate::render::format::{short_args, thousands};

use super::markup::{escape, to_html};
use super::transcript::{
    Block, Bounded, Call, Transcript, compaction_line, dollars, source_label, tokens, total_cost,
};

const STYLE: &str = "
:root{color-scheme:light dark;--fg:#1d1f23;--bg:#fff;--muted:#6a6f78;--line:#d8dbe0;--code:#f4f5f7;
--you:#eef4ff;--ok:#1a7f37;--bad:#cf222e;--add:#e6ffec;--del:#ffebe9}
@media (prefers-color-scheme:dark){:root{--fg:#e4e6ea;--bg:#15171a;--muted:#9aa0a8;--line:#33373d;
--code:#1f2226;--you:#1c2633;--ok:#3fb950;--bad:#f85149;--add:#12361f;--del:#3d1518}}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);
font:15px/1.55 system-ui,-apple-system,'Segoe UI',sans-serif}
main{max-width:60rem;margin:0 auto;padding:1.5rem 1rem 4rem}
h1{font-size:1.4rem;margin:0 0 .5rem}h2{font-size:1.15rem;margin:2.2rem 0 .8rem;
padding-top:1rem;border-top:1px solid var(--line)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem;margin:0;color:var(--muted)}
dl.facts dt{font-weight:600}dl.facts dd{margin:0}
.msg{margin:.8rem 0;padding:.6rem .9rem;border-radius:8px}.msg .who{font-weight:600;font-size:.85rem;
color:var(--muted);margin-bottom:.2rem}.user{background:var(--you)}.assistant{border-left:3px solid var(--line)}
.msg>.body>:first-child{margin-top:0}.msg>.body>:last-child{margin-bottom:0}
pre{background:var(--code);padding:.6rem .8rem;border-radius:6px;overflow-x:auto;margin:.4rem 0;
white-space:pre-wrap;word-break:break-word}code{font:13px/1.45 ui-monospace,'SF Mono',Menlo,Consolas,monospace}
p code,li code,td code{background:var(--code);padding:.05rem .3rem;border-radius:4px}
details{margin:.5rem 0;border:1px solid var(--line);border-radius:8px;padding:.3rem .8rem}
details>summary{cursor:pointer;color:var(--muted)}details[open]>summary{margin-bottom:.4rem}
details.call>summary{color:var(--fg)}.tool{font-weight:600}.ok{color:var(--ok)}.bad{color:var(--bad)}
.note,.end{color:var(--muted);font-size:.9rem;margin:.5rem 0}.cut{color:var(--muted);font-style:italic;margin:.2rem 0}
.error{border:1px solid var(--bad);border-radius:8px;padding:.4rem .8rem;margin:.6rem 0}
.diff .add{background:var(--add)}.diff .del{background:var(--del)}
.label{font-size:.8rem;color:var(--muted);margin:.5rem 0 0}table{border-collapse:collapse}
td,th{border:1px solid var(--line);padding:.2rem .5rem}blockquote{margin:.4rem 0;padding-left:.8rem;
border-left:3px solid var(--line);color:var(--muted)}
figure{margin:.5rem 0}figure img{max-width:100%;max-height:32rem;border:1px solid var(--line);border-radius:6px}
figcaption{font-size:.8rem;color:var(--muted)}
";

/// The transcript as an HTML document.
pub fn render(transcript: &Transcript) -> String {
    let id = transcript.header.as_ref().map(|h| h.id.as_str()).unwrap_or("");
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">\n");
    out.push_str(&format!(
        "<title>keel session {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        escape(id)
    ));
    out.push_str(&format!("<h1>keel session <code>{}</code></h1>\n<dl class=\"facts\">\n", escape(id)));
    if let Some(header) = &transcript.header {
        fact("created", &escape(&header.created), &mut out);
        fact("folder", &format!("<code>{}</code>", escape(&header.cwd)), &mut out);
        if let Some(parent) = &header.parent {
            fact(
                "forked from",
                &format!("<code>{}</code> at event {}", escape(&parent.id), parent.seq),
                &mut out,
            );
        }
    }
    if !transcript.models.is_empty() {
        let models: Vec<String> = transcript
            .models
            .iter()
            .map(|(provider, model)| format!("{} ({})", escape(model), escape(provider)))
            .collect();
        fact("model", &models.join(", "), &mut out);
    }
    fact("tokens", &escape(&tokens(&transcript.usage)), &mut out);
    fact("cost", &escape(&total_cost(transcript.cost)), &mut out);
    out.push_str("</dl>\n");
    let mut in_turn = false;
    for block in &transcript.blocks {
        if let Block::TurnStart { turn } = block {
            if in_turn {
                out.push_str("</section>\n");
            }
            in_turn = true;
            out.push_str(&format!("<section class=\"turn\" id=\"turn-{turn}\">\n<h2>Turn {turn}</h2>\n"));
            continue;
        }
        block_into(block, &mut out);
    }
    if in_turn {
        out.push_str("</section>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn fact(name: &str, value_html: &str, out: &mut String) {
    out.push_str(&format!("<dt>{name}</dt><dd>{value_html}</dd>\n"));
}

fn block_into(block: &Block, out: &mut String) {
    match block {
        Block::Model { provider, model, tools, profile } => {
            let profile = profile.as_deref().map(|p| format!(", profile {}", escape(p))).unwrap_or_default();
            let tools = if tools.is_empty() { "none".to_owned() } else { escape(&tools.join(", ")) };
            out.push_str(&format!(
                "<p class=\"note\">Model {} ({}){profile}; tools: {tools}</p>\n",
                escape(model),
                escape(provider)
            ));
        }
        Block::TurnStart { .. } => {}
        Block::User { text, source, reason, images } => {
            let label = match (source_label(*source), reason) {
                (None, _) => "You".to_owned(),
                (Some(label), Some(reason)) => format!("You ({label}: {})", escape(reason)),
                (Some(label), None) => format!("You ({label})"),
            };
            if source_label(*source) == Some("environment") {
                details(&label, &pre(text, ""), "", out);
            } else {
                message("user", &label, text, out);
            }
            out.push_str(&images_html(images));
        }
        Block::Reasoning { text } => {
            details("Reasoning", &format!("<div class=\"body\">{}</div>", to_html(text)), "", out)
        }
        Block::Answer { text } => message("assistant", "keel", text, out),
        Block::Call(call) => call_into(call, out),
        Block::Aside { purpose, prompt, reply, error } => {
            let mut body = format!("<p class=\"label\">Request</p>{}", pre(prompt, ""));
            match error {
                Some(error) => body.push_str(&format!("<p class=\"bad\">Failed: {}</p>", escape(error))),
                None => body.push_str(&format!("<p class=\"label\">Reply</p>{}", pre(reply, ""))),
            }
            details(&format!("Request beside the conversation ({})", escape(purpose)), &body, "", out);
        }
        Block::Note { text } => out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(text))),
        Block::Compaction { reason, end } => {
            let line = escape(&compaction_line(*reason, end.as_ref()));
            match end.as_ref().filter(|e| !e.summary.is_empty()) {
                Some(end) => details(&line, &pre(&end.summary, ""), "", out),
                None => out.push_str(&format!("<p class=\"note\">{line}</p>\n")),
            }
        }
        Block::TurnEnd { turn, reason, message, usage, cost } => {
            let error = reason.as_str() == "error";
            if let Some(message) = message.as_deref().filter(|_| error) {
                out.push_str(&format!(
                    "<div class=\"error\"><strong>Error</strong>{}</div>\n",
                    pre(message, "")
                ));
            }
            let message = match message {
                Some(message) if !error => format!(": {}", escape(message)),
                _ => String::new(),
            };
            out.push_str(&format!(
                "<p class=\"end\">Turn {turn} {}{message} · {} · {}</p>\n",
                escape(reason.as_str()),
                escape(&tokens(usage)),
                escape(&dollars(*cost))
            ));
        }
    }
}

/// Images shown inline (the document stays self-contained); one whose bytes are gone is
/// named instead.
fn images_html(images: &[keel_llm::Image]) -> String {
    images
        .iter()
        .map(|image| match image.data_url() {
            Some(url) => format!(
                "<figure><img src=\"{url}\" alt=\"{0}\"><figcaption>{0}</figcaption></figure>\n",
                escape(&image.describe())
            ),
            None => format!(
                "<p class=\"note\">image {} (its file is no longer beside the session)</p>\n",
                escape(&image.describe())
            ),
        })
        .collect()
}

fn message(class: &str, who: &str, markdown: &str, out: &mut String) {
    out.push_str(&format!(
        "<div class=\"msg {class}\"><div class=\"who\">{who}</div><div class=\"body\">{}</div></div>\n",
        to_html(markdown)
    ));
}

fn details(summary_html: &str, body_html: &str, class: &str, out: &mut String) {
    let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
    out.push_str(&format!("<details{class}><summary>{summary_html}</summary>\n{body_html}\n</details>\n"));
}

fn pre(text: &str, class: &str) -> String {
    let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
    format!("<pre{class}><code>{}</code></pre>", escape(text.trim_end_matches('\n')))
}

fn bounded(text: &Bounded) -> String {
    let mut html = pre(&text.head, "");
    if let Some(cut) = &text.cut {
        html.push_str(&format!(
            "<p class=\"cut\">… {} (the whole result is in the session log) …</p>{}",
            escape(cut),
            pre(&text.tail, "")
        ));
    }
    html
}

fn diff(text: &str) -> String {
    let mut html = String::from("<pre class=\"diff\"><code>");
    for line in text.lines() {
        let class = match line.as_bytes().first() {
            Some(b'+') => "add",
            Some(b'-') => "del",
            _ => "",
        };
        if class.is_empty() {
            html.push_str(&format!("{}\n", escape(line)));
        } else {
            html.push_str(&format!("<span class=\"{class}\">{}\n</span>", escape(line)));
        }
    }
    html.push_str("</code></pre>");
    html
}

fn call_into(call: &Call, out: &mut String) {
    let (mark, class) = match &call.result {
        Some(result) if result.is_error => ("✗", "bad"),
        Some(_) => ("✓", "ok"),
        None => ("…", ""),
    };
    let summary = call.result.as_ref().map(|r| format!(" — {}", escape(&r.summary))).unwrap_or_default();
    let head = format!(
        "<span class=\"{class}\">{mark}</span> <span class=\"tool\">{}</span> <code>{}</code>{summary}",
        escape(&call.name),
        escape(&short_args(&call.name, &call.raw_arguments))
    );
    let mut body = String::new();
    if !call.arguments.trim().is_empty() && call.arguments.trim() != "{}" {
        body.push_str(&format!("<p class=\"label\">Arguments</p>{}", pre(&call.arguments, "")));
    }
    match &call.result {
        None => body.push_str("<p class=\"note\">no result logged</p>"),
        Some(result) => {
            let mut facts = Vec::new();
            if let Some(code) = &result.error_code {
                facts.push(format!("error <code>{}</code>", escape(code)));
            }
            if let Some(ms) = result.duration_ms {
                facts.push(crate::render::format::duration(std::time::Duration::from_millis(ms)));
            }
            let facts = if facts.is_empty() { String::new() } else { format!(" ({})", facts.join(", ")) };
            body.push_str(&format!("<p class=\"label\">Result{facts}</p>{}", bounded(&result.content)));
            body.push_str(&images_html(&result.images));
            if let Some(change) = &result.change {
                body.push_str(&format!(
                    "<p class=\"label\">{} <code>{}</code> (+{} −{})</p>{}",
                    if change.created { "Created" } else { "Changed" },
                    escape(&change.path),
                    thousands(u64::from(change.added)),
                    thousands(u64::from(change.removed)),
                    diff(&change.diff)
                ));
                if change.cut_lines > 0 {
                    body.push_str(&format!(
                        "<p class=\"cut\">{} more diff lines not logged</p>",
                        thousands(u64::from(change.cut_lines))
                    ));
                }
            }
        }
    }
    // A call that changed a file is open: its diff is what matters.
    let open = call.result.as_ref().is_some_and(|r| r.change.is_some());
    let open = if open { " open" } else { "" };
    out.push_str(&format!(
        "<details class=\"call\" id=\"call-{}\"{open}><summary>{head}</summary>\n{body}\n</details>\n",
        escape(&anchor(&call.id))
    ));
}

/// A call id as an element id: letters, digits, `-` and `_` only.
fn anchor(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
