//! A linear pass over HTML's tags, for the pages the converter must not get: html5ever's
//! tree builder checks scopes down the stack of open elements at every tag, so a page
//! nesting elements tens of thousands deep takes minutes to parse (40,000 nested
//! `<div><span>` took 25 s), and builds anew, in every later paragraph, each formatting
//! element an ancestor's end tag left open. [`shape`] measures both before the page is
//! parsed; [`plain_text`] is what a page past the limits is shown as instead.

/// Elements that have no end tag.
const VOID: &[&str] = &[
    "area", "base", "basefont", "bgsound", "br", "col", "command", "embed", "frame", "hr", "image", "img",
    "input", "keygen", "link", "meta", "param", "source", "track", "wbr",
];

/// Elements whose end tag may be left out (the parser closes them at the next sibling):
/// counting them would take a page of unclosed `<p>` or `<li>` for a deep one.
const OPTIONAL_END: &[&str] = &[
    "html", "head", "body", "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option",
    "optgroup", "colgroup", "caption", "rb", "rt", "rtc", "rp",
];

/// Elements whose content is raw text up to their end tag (no tags inside).
const RAW: &[&str] =
    &["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript"];

/// Elements that start a new line in [`plain_text`].
const BLOCK: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tr",
    "ul",
];

/// One tag: its name (lower case), whether it closes, whether it closes itself, and where
/// the text after it starts.
struct Tag {
    name: String,
    end: bool,
    self_closing: bool,
    after: usize,
}

/// The tag that starts at `at` (a `<`), or `None` when the `<` starts no tag (text) —
/// comments, doctypes and processing instructions are skipped as `Some` with no name.
fn tag_at(bytes: &[u8], at: usize) -> Option<Tag> {
    let rest = &bytes[at..];
    if rest.starts_with(b"<!--") {
        let after = find(bytes, at + 4, b"-->").map_or(bytes.len(), |end| end + 3);
        return Some(Tag { name: String::new(), end: false, self_closing: true, after });
    }
    if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
        let after = memchr::memchr(b'>', &bytes[at..]).map_or(bytes.len(), |end| at + end + 1);
        return Some(Tag { name: String::new(), end: false, self_closing: true, after });
    }
    let end = rest.get(1) == Some(&b'/');
    let start = at + 1 + usize::from(end);
    let name_len = bytes[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'-').count();
    if name_len == 0 || !bytes[start].is_ascii_alphabetic() {
        return None;
    }
    let name = String::from_utf8_lossy(&bytes[start..start + name_len]).to_ascii_lowercase();
    // The tag ends at the first `>` outside a quoted attribute value.
    let mut quote = None;
    let mut i = start + name_len;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (None, b'"' | b'\'') => quote = Some(bytes[i]),
            (Some(q), b) if b == q => quote = None,
            (None, b'>') => break,
            _ => {}
        }
        i += 1;
    }
    let self_closing = i > 0 && i < bytes.len() && bytes[i - 1] == b'/';
    Some(Tag { name, end, self_closing, after: (i + 1).min(bytes.len()) })
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= bytes.len() {
        return None;
    }
    memchr::memmem::find(&bytes[from..], needle).map(|at| from + at)
}

/// Where the raw text of a `name` element that starts at `from` ends: at its end tag, or
/// the end of the page.
fn raw_end(bytes: &[u8], from: usize, name: &str) -> usize {
    let close = format!("</{name}");
    let mut at = from;
    while let Some(found) = find_ignoring_case(bytes, at, close.as_bytes()) {
        let next = bytes.get(found + close.len());
        if next.is_none_or(|b| !b.is_ascii_alphanumeric()) {
            return found;
        }
        at = found + close.len();
    }
    bytes.len()
}

fn find_ignoring_case(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let mut at = from;
    while let Some(found) = find(bytes, at, b"</") {
        if bytes.len() >= found + needle.len()
            && bytes[found..found + needle.len()].eq_ignore_ascii_case(needle)
        {
            return Some(found);
        }
        at = found + 2;
    }
    None
}

/// Walks the tags of `html` in order, calling `visit` with each and the text before it.
fn walk(html: &str, mut visit: impl FnMut(&str, Option<&Tag>)) {
    let bytes = html.as_bytes();
    let mut at = 0;
    let mut text_from = 0;
    while let Some(offset) = memchr::memchr(b'<', &bytes[at..]) {
        let lt = at + offset;
        let Some(tag) = tag_at(bytes, lt) else {
            at = lt + 1;
            continue;
        };
        visit(&html[text_from..lt], Some(&tag));
        at = tag.after;
        if !tag.end && !tag.self_closing && RAW.contains(&tag.name.as_str()) {
            at = raw_end(bytes, at, &tag.name);
        }
        text_from = at;
    }
    visit(&html[text_from.min(html.len())..], None);
}

/// Elements html5ever keeps on its list of active formatting elements, and opens again
/// after an ancestor's end tag closed them implicitly.
const FORMATTING: &[&str] =
    &["a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"];

/// Start tags before which the parser does not open the active formatting elements again
/// (the HTML standard's block elements and the tags handled as the head's); every other
/// start tag, and any text, does.
const NO_REOPEN: &[&str] = &[
    "address",
    "article",
    "aside",
    "base",
    "basefont",
    "bgsound",
    "blockquote",
    "body",
    "caption",
    "center",
    "col",
    "colgroup",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frame",
    "frameset",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hgroup",
    "hr",
    "html",
    "iframe",
    "li",
    "link",
    "listing",
    "main",
    "menu",
    "meta",
    "nav",
    "noembed",
    "noframes",
    "noscript",
    "ol",
    "p",
    "plaintext",
    "pre",
    "script",
    "search",
    "section",
    "style",
    "summary",
    "table",
    "tbody",
    "td",
    "template",
    "textarea",
    "tfoot",
    "th",
    "thead",
    "title",
    "tr",
    "ul",
];

/// What makes a page slow to parse, as far as a linear pass can see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// How deep it nests elements that need an end tag (stray end tags ignored), at most
    /// the cap it was measured with: an upper bound of the parsed tree's depth.
    pub depth: usize,
    /// How many times the parser opens a formatting element again: one left open when an
    /// ancestor closed (`<div><b>x</div>`) stays on its list of active formatting
    /// elements and is opened anew, nested, at the next text or inline tag — in every
    /// later paragraph that closes it again.
    pub reopened: usize,
}

/// The [`Shape`] of `html`, measured up to `depth_cap` and `reopen_cap`: linear in the
/// page's length times the caps.
pub fn shape(html: &str, depth_cap: usize, reopen_cap: usize) -> Shape {
    let mut open: Vec<String> = Vec::new();
    // Formatting elements closed by an ancestor's end tag, still on the parser's list.
    let mut leaked: Vec<String> = Vec::new();
    // Inside `<svg>` and `<math>`, `<x/>` closes itself; elsewhere HTML ignores the `/`
    // (`<div/>` opens a div), so it is counted as open.
    let mut foreign = 0usize;
    let mut shape = Shape::default();
    walk(html, |text, tag| {
        if shape.depth >= depth_cap || shape.reopened >= reopen_cap {
            return;
        }
        let reopens = |tag: &Tag| !tag.end && !tag.name.is_empty() && !NO_REOPEN.contains(&tag.name.as_str());
        if !leaked.is_empty() && (!text.is_empty() || tag.is_some_and(reopens)) {
            shape.reopened += leaked.len();
            foreign += leaked.iter().filter(|o| is_foreign(o)).count();
            open.append(&mut leaked);
            shape.depth = shape.depth.max(open.len());
        }
        let Some(tag) = tag else { return };
        let name = tag.name.as_str();
        if name.is_empty() || VOID.contains(&name) || OPTIONAL_END.contains(&name) {
            return;
        }
        if tag.end {
            if let Some(at) = open.iter().rposition(|o| o == name) {
                leaked.extend(open[at + 1..].iter().filter(|o| FORMATTING.contains(&o.as_str())).cloned());
                foreign -= open[at..].iter().filter(|o| is_foreign(o)).count();
                open.truncate(at);
            } else if let Some(at) = leaked.iter().rposition(|o| o == name) {
                leaked.remove(at);
            }
        } else if !(tag.self_closing && foreign > 0) {
            foreign += usize::from(is_foreign(name));
            open.push(tag.name.clone());
            shape.depth = shape.depth.max(open.len());
        }
    });
    shape
}

fn is_foreign(name: &str) -> bool {
    name == "svg" || name == "math"
}

/// The text of `html` without its tags, scripts and styles: a line per block, whitespace
/// collapsed, the common character references decoded.
pub fn plain_text(html: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let flush = |line: &mut String, out: &mut String| {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words.is_empty() {
            out.push_str(&words.join(" "));
            out.push('\n');
        }
        line.clear();
    };
    walk(html, |text, tag| {
        line.push_str(&unescape(text));
        line.push(' ');
        if tag.is_some_and(|t| BLOCK.contains(&t.name.as_str())) || tag.is_none() {
            flush(&mut line, &mut out);
        }
    });
    flush(&mut line, &mut out);
    out.trim_end().to_owned()
}

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`, `&apos;`, `&nbsp;` and numeric references.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(semi) = rest[..rest.len().min(12)].find(';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nesting(html: &str, cap: usize) -> usize {
        shape(html, cap, usize::MAX).depth
    }

    #[test]
    fn nesting_counts_elements_that_need_an_end_tag() {
        assert_eq!(nesting("<p>a<p>b<p>c", 300), 0);
        assert_eq!(nesting("<div><div><span>x</span></div></div>", 300), 3);
        assert_eq!(nesting("<ul><li>a<li>b<ul><li>c</ul></ul>", 300), 2);
        assert_eq!(nesting("<div><br><img src=x><input/><div/></div>", 300), 2);
        assert_eq!(nesting(&"<div/>".repeat(300), 1000), 300);
        assert_eq!(nesting(&format!("<svg>{}</svg>", "<path d='M0'/>".repeat(300)), 1000), 1);
        assert_eq!(nesting("<script>if (a<b) { '<div><div><div>' }</script><b>x</b>", 300), 1);
        assert_eq!(nesting("<!-- <div><div> --><a title='>'>x</a>", 300), 1);
        assert_eq!(nesting("</div></div><i>x", 300), 1);
        assert_eq!(nesting(&"<div>".repeat(5000), 300), 300);
        assert_eq!(nesting("a < b and 3<4", 300), 0);
    }

    #[test]
    fn formatting_left_open_is_counted_each_time_it_is_opened_again() {
        // The b closed by `</div>` is opened again at "y": once.
        assert_eq!(shape("<div><b>x</div><p>y</p>", 300, 300), Shape { depth: 2, reopened: 1 });
        // Closed by its own end tag, or never left open: never.
        assert_eq!(shape("<div><b>x</b></div><p>y</p>", 300, 300).reopened, 0);
        assert_eq!(shape("<div><b>x</div></b><p>y</p>", 300, 300).reopened, 0);
        // Left open inside the first paragraph, it is opened in every later one (which
        // closes it again): html5ever builds 255 elements per `<div>` here.
        let many: String = (0..255).map(|n| format!("<b id={n}>")).collect();
        let page = format!("<div>{many}x</div>{}", "<div><img></div>".repeat(1000));
        let measured = shape(&page, 300, 4096);
        assert!(measured.reopened >= 4096, "{measured:?}");
        assert!(
            shape(&format!("<div>{many}x</div>{}", "<div>y</div>".repeat(1000)), 300, 4096).reopened >= 4096
        );
    }
}
