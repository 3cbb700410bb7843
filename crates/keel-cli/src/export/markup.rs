//! Markdown written by people and models as HTML that does nothing but show: every piece
//! of text escaped, raw HTML shown as text, links only to `http`, `https` and `mailto`
//! addresses, images shown as links (an export opens offline and fetches nothing).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// `text` with `&`, `<`, `>`, `"` and `'` as entities: safe in element content and in
/// quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Whether a link may point at `url`: web and mail addresses only (no `javascript:`,
/// `data:` or `file:`), compared without case and leading blanks.
fn linkable(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    ["http://", "https://", "mailto:"].iter().any(|scheme| lower.starts_with(scheme))
}

fn heading(level: HeadingLevel) -> &'static str {
    // Headings inside a message stay below the transcript's own (h1, h2).
    match level {
        HeadingLevel::H1 | HeadingLevel::H2 | HeadingLevel::H3 => "h4",
        HeadingLevel::H4 => "h5",
        _ => "h6",
    }
}

/// `markdown` as an HTML fragment.
pub fn to_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::new();
    // Closing tags of open links: `</a>` for a kept link, nothing for a refused one.
    let mut links: Vec<&'static str> = Vec::new();
    let mut headings: Vec<&'static str> = Vec::new();
    let mut table_head = false;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => out.push_str("<p>"),
                Tag::Heading { level, .. } => {
                    let name = heading(level);
                    headings.push(name);
                    out.push_str(&format!("<{name}>"));
                }
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(language) if !language.trim().is_empty() => {
                        let language: String = language
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
                            .collect();
                        out.push_str(&format!("<pre><code class=\"language-{language}\">"));
                    }
                    _ => out.push_str("<pre><code>"),
                },
                Tag::List(Some(start)) => out.push_str(&format!("<ol start=\"{start}\">")),
                Tag::List(None) => out.push_str("<ul>"),
                Tag::Item => out.push_str("<li>"),
                Tag::Table(_) => out.push_str("<table>"),
                Tag::TableHead => {
                    table_head = true;
                    out.push_str("<thead><tr>");
                }
                Tag::TableRow => out.push_str("<tr>"),
                Tag::TableCell => out.push_str(if table_head { "<th>" } else { "<td>" }),
                Tag::Emphasis => out.push_str("<em>"),
                Tag::Strong => out.push_str("<strong>"),
                Tag::Strikethrough => out.push_str("<del>"),
                Tag::Link { dest_url, title, .. } => {
                    if linkable(&dest_url) {
                        out.push_str(&format!(
                            "<a href=\"{}\" title=\"{}\" rel=\"noreferrer noopener\">",
                            escape(&dest_url),
                            escape(&title)
                        ));
                        links.push("</a>");
                    } else {
                        links.push("");
                    }
                }
                Tag::Image { dest_url, .. } => {
                    // Never fetched: the address is shown as a link.
                    out.push_str("[image: ");
                    if linkable(&dest_url) {
                        out.push_str(&format!(
                            "<a href=\"{}\" rel=\"noreferrer noopener\">",
                            escape(&dest_url)
                        ));
                        links.push("</a>]");
                    } else {
                        links.push("]");
                    }
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str("</p>\n"),
                TagEnd::Heading(_) => {
                    let name = headings.pop().unwrap_or("h6");
                    out.push_str(&format!("</{name}>\n"));
                }
                TagEnd::BlockQuote(_) => out.push_str("</blockquote>\n"),
                TagEnd::CodeBlock => out.push_str("</code></pre>\n"),
                TagEnd::List(true) => out.push_str("</ol>\n"),
                TagEnd::List(false) => out.push_str("</ul>\n"),
                TagEnd::Item => out.push_str("</li>\n"),
                TagEnd::Table => out.push_str("</tbody></table>\n"),
                TagEnd::TableHead => {
                    table_head = false;
                    out.push_str("</tr></thead><tbody>");
                }
                TagEnd::TableRow => out.push_str("</tr>"),
                TagEnd::TableCell => out.push_str(if table_head { "</th>" } else { "</td>" }),
                TagEnd::Emphasis => out.push_str("</em>"),
                TagEnd::Strong => out.push_str("</strong>"),
                TagEnd::Strikethrough => out.push_str("</del>"),
                TagEnd::Link | TagEnd::Image => out.push_str(links.pop().unwrap_or("")),
                _ => {}
            },
            Event::Text(text) => out.push_str(&escape(&text)),
            Event::Code(code) => out.push_str(&format!("<code>{}</code>", escape(&code))),
            // Raw HTML is shown, never parsed.
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&escape(&html)),
            Event::SoftBreak => out.push('\n'),
            Event::HardBreak => out.push_str("<br>\n"),
            Event::Rule => out.push_str("<hr>\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(name) => out.push_str(&format!("[^{}]", escape(&name))),
            Event::InlineMath(math) | Event::DisplayMath(math) => out.push_str(&escape(&math)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_html_that_only_shows() {
        let html = to_html(
            "# Title\n\nSome **bold** and `code <b>`.\n\n<script>alert(1)</script>\n\n\
             Inline <img src=x onerror=alert(1)> html.\n\n[ok](https://example.com/?a=\"b\") \
             [bad](javascript:alert(1)) ![pic](https://tracker.example/p.png)\n\n```sh\necho '<x>'\n```\n",
        );
        assert!(!html.contains("<script") && !html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("<h4>Title</h4>") && html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code &lt;b&gt;</code>"), "{html}");
        assert!(html.contains("<a href=\"https://example.com/?a=&quot;b&quot;\""), "{html}");
        assert!(!html.contains("javascript:alert(1)\""), "{html}");
        assert!(html.contains("bad") && html.contains("[image: <a href=\"https://tracker.example/p.png\""));
        assert!(html.contains("<pre><code class=\"language-sh\">echo &#39;&lt;x&gt;&#39;\n</code></pre>"));
    }
}
