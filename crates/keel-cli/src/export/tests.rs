use std::collections::BTreeMap;

use keel_session::Event;
use serde_json::json;

use super::{Format, render};

/// A session with every kind of block an export shows, and hostile text from a tool, the
/// model and the user.
pub(crate) fn events() -> Vec<Event> {
    let long: String = (1..=300).map(|n| format!("test line {n} ok\n")).collect();
    let lines = [
        json!({"type": "session/header", "data": {"version": 3, "id": "20260101-000000-abcdef012345", "created": "2026-01-01T00:00:00.000Z", "cwd": "/work/demo"}}),
        json!({"type": "request/header", "data": {"provider": "deepseek", "model": "deepseek-chat", "system_prompt": "Be brief.", "tools": []}}),
        json!({"type": "turn/start", "data": {"turn": 1}}),
        json!({"type": "user/message", "data": {"text": "cwd: /work/demo", "source": "context"}}),
        json!({"type": "user/message", "data": {"text": "Fix <b>it</b> & run the tests"}}),
        json!({"type": "step/start", "data": {"step": 1}}),
        json!({"type": "assistant/message", "data": {
            "content": [
                {"type": "thinking", "text": "The file </details><script>alert('t')</script> first."},
                {"type": "text", "text": "Reading.\n\n<script>alert('a')</script> [x](javascript:alert(1))"},
                {"type": "tool_call", "id": "call_1", "name": "read_file", "arguments": "{\"path\":\"app.py\"}"},
                {"type": "tool_call", "id": "call_2", "name": "edit_file", "arguments": "{\"path\":\"app.py\",\"old\":\"a\",\"new\":\"b\"}"}
            ],
            "finish_reason": "tool_use",
            "usage": {"input_tokens": 1000000, "output_tokens": 1000, "cached_tokens": 500000}}}),
        json!({"type": "tool/call", "data": {"call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"app.py\"}"}}),
        json!({"type": "tool/result", "data": {"call_id": "call_1", "name": "read_file", "source_seq": 7, "content": "<script>alert(\"pwned\")</script>\n```\n</details>", "duration_ms": 3}}),
        json!({"type": "tool/call", "data": {"call_id": "call_2", "name": "edit_file", "arguments": "{}"}}),
        json!({"type": "tool/result", "data": {"call_id": "call_2", "name": "edit_file", "source_seq": 7, "content": "edited app.py",
            "change": {"path": "app.py", "added": 1, "removed": 1, "diff": "@@ -1 +1 @@\n-<a>\n+<b onload=x()>\n"}}}),
        json!({"type": "step/end", "data": {"step": 1}}),
        json!({"type": "step/start", "data": {"step": 2}}),
        json!({"type": "assistant/message", "data": {
            "content": [{"type": "tool_call", "id": "call_3", "name": "shell", "arguments": "{\"command\":\"pytest\"}"}],
            "usage": {"input_tokens": 10, "output_tokens": 5}}}),
        json!({"type": "hook/run", "data": {"event": "PreToolUse", "command": "./guard.sh", "tool": "shell", "call_id": "call_3", "outcome": "ok", "exit_code": 0, "duration_ms": 4, "decision": "allow", "reason": "<tests> are fine"}}),
        json!({"type": "tool/call", "data": {"call_id": "call_3", "name": "shell", "arguments": "{\"command\":\"pytest\"}"}}),
        json!({"type": "tool/result", "data": {"call_id": "call_3", "name": "shell", "source_seq": 14, "content": long, "is_error": true, "error_code": "tool_error"}}),
        json!({"type": "step/end", "data": {"step": 2}}),
        json!({"type": "compaction/start", "data": {"reason": "threshold", "instruction": "Summarize."}}),
        json!({"type": "compaction/end", "data": {"outcome": "compacted", "summary": "[Summary]\n<i>done</i>", "first_kept_seq": 12, "tokens_before": 9000, "tokens_after": 2000}}),
        json!({"type": "turn/end", "data": {"turn": 1, "reason": "error", "message": "model request failed (server): <boom>"}}),
    ];
    lines
        .iter()
        .enumerate()
        .map(|(seq, line)| {
            let mut line = line.clone();
            line["seq"] = json!(seq);
            line["time"] = json!("2026-01-01T00:00:00.000Z");
            Event::parse(&line.to_string()).unwrap()
        })
        .collect()
}

#[test]
fn the_html_export_shows_every_step_and_runs_nothing() {
    let html = render(&events(), Format::Html, &BTreeMap::new());
    let lower = html.to_lowercase();
    // Nothing from the log becomes markup: no script, no handler, no javascript: link.
    assert!(!lower.contains("<script"), "{html}");
    assert!(!lower.contains("<b onload") && !lower.contains("href=\"javascript"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"), "{html}");
    assert!(html.contains("&lt;/details&gt;"), "a tool's </details> stays text");
    // Self-contained: no external resource, and the browser is told so.
    for fetch in ["src=", "<link", "@import", "url("] {
        assert!(!lower.contains(fetch), "{fetch} in {html}");
    }
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    // Every step: the prompt, the reasoning (folded), the answer, each call with its
    // arguments and result, the diff, the compaction, the error, the cost.
    assert!(html.contains("Fix &lt;b&gt;it&lt;/b&gt; &amp; run the tests"), "{html}");
    assert!(html.contains("<details><summary>Reasoning</summary>"));
    assert!(html.contains("<span class=\"tool\">read_file</span> <code>app.py</code>"));
    assert!(html.contains("<span class=\"tool\">shell</span> <code>pytest</code>"));
    assert!(html.contains(
        "<span class=\"del\">-&lt;a&gt;\n</span><span class=\"add\">+&lt;b onload=x()&gt;\n</span>"
    ));
    assert!(html.contains("test line 1 ok") && html.contains("test line 300 ok"));
    assert!(!html.contains("test line 150 ok"), "the middle of a long result is cut");
    assert!(html.contains("200 lines (3.3 KB) cut here"), "{html}");
    assert!(
        html.contains("Compaction (the context was getting full): the older part was replaced by a summary")
    );
    assert!(html.contains("model request failed (server): &lt;boom&gt;"));
    assert!(
        html.contains("hook PreToolUse `./guard.sh` for shell: allow (&lt;tests&gt; are fine)"),
        "{html}"
    );
    // deepseek-chat: 0.5M fresh × 0.28 + 0.5M cached × 0.028 + 1000 × 0.42 per million.
    assert!(html.contains("$0.1544"), "{html}");
    // Balanced: every opened details and section is closed.
    assert_eq!(html.matches("<details").count(), html.matches("</details>").count());
    assert_eq!(html.matches("<section").count(), html.matches("</section>").count());
}

#[test]
fn the_markdown_export_folds_reasoning_and_fences_tool_output() {
    let md = render(&events(), Format::Md, &BTreeMap::new());
    assert!(md.starts_with("# keel session `20260101-000000-abcdef012345`\n"), "{md}");
    assert!(
        md.contains("<details><summary>Reasoning</summary>\n\nThe file &lt;/details&gt;&lt;script&gt;"),
        "{md}"
    );
    // The tool's ``` cannot close its block: the fence is longer.
    assert!(md.contains("````text\n<script>alert(\"pwned\")</script>\n```\n</details>\n````\n"), "{md}");
    assert!(md.contains("**✓ `edit_file`** `app.py`"), "{md}");
    assert!(md.contains("```diff\n@@ -1 +1 @@\n-<a>\n+<b onload=x()>\n```"), "{md}");
    assert!(
        md.contains("_… 200 lines (3.3 KB) cut here (the whole result is in the session log) …_"),
        "{md}"
    );
    assert!(md.contains("**Error:**"), "{md}");
    assert!(md.contains("_Turn 1 error · 1,000,010 in (500,000 cached) · 1,005 out · $0.1544_"), "{md}");
}

#[test]
fn the_json_export_keeps_the_events_as_stored() {
    let events = events();
    let text = render(&events, Format::Json, &BTreeMap::new());
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["keel_export"], 1);
    assert_eq!(value["session"]["id"], "20260101-000000-abcdef012345");
    assert_eq!(value["events"].as_array().unwrap().len(), events.len());
    assert_eq!(value["events"][4], serde_json::to_value(&events[4]).unwrap());
    assert_eq!(value["turns"][0]["reason"], "error");
    assert_eq!(value["usage"]["output_tokens"], 1005);
    let cost = value["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.1544249).abs() < 1e-9, "{cost}");
    // A model with no price: tokens, and no cost.
    let unpriced: Vec<Event> = events
        .iter()
        .map(|e| {
            Event::parse(&serde_json::to_string(e).unwrap().replace("deepseek-chat", "my-model")).unwrap()
        })
        .collect();
    let value: serde_json::Value =
        serde_json::from_str(&render(&unpriced, Format::Json, &BTreeMap::new())).unwrap();
    assert!(value["cost_usd"].is_null() && value["turns"][0]["cost_usd"].is_null(), "{value}");
}

/// Issue 34 item 5: the images of a prompt and of a tool's result are in the HTML export
/// (inline, so it still opens offline), and named in the Markdown one.
#[test]
fn images_are_shown_inline_in_html_and_named_in_markdown() {
    let image = keel_llm::Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let hollow = keel_llm::Image { data: None, ..image.clone() };
    let mut events = events();
    for event in &mut events {
        match &mut event.kind {
            keel_session::EventKind::UserMessage(user) if user.text.starts_with("Fix") => {
                user.images = vec![image.clone()]
            }
            keel_session::EventKind::ToolResult(result) if result.call_id == "call_1" => {
                result.images = vec![hollow.clone()]
            }
            _ => {}
        }
    }
    let html = render(&events, Format::Html, &BTreeMap::new());
    assert!(html.contains("img-src data:"), "the page allows its own images");
    assert!(html.contains(&format!("<img src=\"{}\" alt=\"PNG 1×1, 1 KB\">", image.data_url().unwrap())));
    assert!(html.contains("image PNG 1×1, 1 KB (its file is no longer beside the session)"));
    let markdown = render(&events, Format::Md, &BTreeMap::new());
    assert_eq!(markdown.matches("_image: PNG 1×1, 1 KB (sha256 `").count(), 2, "{markdown}");
}
