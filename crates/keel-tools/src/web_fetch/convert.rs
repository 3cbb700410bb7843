//! What a response's body becomes for the model: HTML as Markdown (htmd), JSON
//! pretty-printed, other text as it is; anything else refused by its type.

use std::rc::Rc;

use markup5ever_rcdom::{Handle, Node, NodeData};

/// How a body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An HTML page, converted to Markdown.
    Html,
    /// JSON, shown pretty-printed when it parses.
    Json,
    /// Any other text, shown as it is.
    Text,
}

impl Kind {
    /// How the result names what it shows.
    pub fn shown_as(self) -> &'static str {
        match self {
            Kind::Html => "converted to Markdown",
            Kind::Json => "JSON",
            Kind::Text => "text",
        }
    }
}

/// The media type of a `Content-Type` value, lower case, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// How a body of `media_type` is read; `None` for a type that is not text (refused), and
/// for no type at all (the body decides: [`sniff`]).
pub fn kind_of(media_type: &str) -> Option<Kind> {
    match media_type {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        "application/json" | "text/json" => Some(Kind::Json),
        t if t.ends_with("+json") => Some(Kind::Json),
        t if t.starts_with("text/") => Some(Kind::Text),
        "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml" => Some(Kind::Text),
        t if t.ends_with("+xml") => Some(Kind::Text),
        _ => None,
    }
}

/// How a body that came without a type is read, from its first bytes: `None` when it is
/// not text.
pub fn sniff(body: &[u8]) -> Option<Kind> {
    let head = &body[..body.len().min(8192)];
    if looks_binary(head) {
        return None;
    }
    let text = String::from_utf8_lossy(head);
    let start = text.trim_start_matches('\u{feff}').trim_start().to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Some(Kind::Html)
    } else if start.starts_with('{') || start.starts_with('[') {
        Some(Kind::Json)
    } else {
        Some(Kind::Text)
    }
}

/// Whether the first bytes hold what text never does (a NUL byte).
pub fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(8192)].contains(&0)
}

/// The body as text, by the `charset` of its `Content-Type` (UTF-8 unless it names a
/// Latin-1 one); a byte-order mark is dropped, bytes that are not UTF-8 become U+FFFD.
pub fn decode(body: &[u8], content_type: &str) -> String {
    let charset = content_type
        .split(';')
        .skip(1)
        .filter_map(|param| param.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("charset"))
        .map(|(_, value)| value.trim().trim_matches('"').to_ascii_lowercase());
    let latin1 = matches!(
        charset.as_deref(),
        Some(
            "iso-8859-1" | "latin1" | "iso_8859-1" | "l1" | "windows-1252" | "cp1252" | "us-ascii" | "ascii"
        )
    );
    if latin1 {
        // Windows-1252 differs from Latin-1 only in 0x80–0x9F, mostly punctuation.
        return body.iter().map(|b| char::from(*b)).collect();
    }
    let body = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
    String::from_utf8_lossy(body).into_owned()
}

/// JSON pretty-printed, or the text as it is when it does not parse.
pub fn json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|value| serde_json::to_string_pretty(&value).ok())
        .unwrap_or_else(|| text.to_owned())
}

/// Elements whose content is never text for a reader: left out whole.
const SKIPPED: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object", "embed",
];

/// Elements deeper than this are flattened to their text: the converter walks the tree
/// recursively, and a hostile page nests elements by the hundred thousand to overflow
/// the stack. Real pages stay far above it (Wikipedia articles nest about 25 deep).
pub const MAX_DEPTH: usize = 80;

/// A page that nests this deep is shown as plain text: html5ever's tree builder takes
/// time quadratic in the depth.
pub const MAX_SHAPE: usize = 256;
/// A page whose formatting elements are opened again this often is shown as plain text:
/// each time costs the parser as many new elements (a sloppy page opens a stray `<b>` in
/// every later paragraph; a hostile one hundreds in each).
pub const MAX_REOPENED: usize = 4096;

/// An HTML page as Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The `<title>`, whitespace collapsed, if the page has one.
    pub title: Option<String>,
    /// The page nests too deep to be converted: `markdown` is its plain text.
    pub plain: bool,
    /// The page as Markdown: links and images made absolute against `base`, inline
    /// (`data:`) images left out, scripts, styles and the head left out.
    pub markdown: String,
}

/// Converts `html`, fetched from `base`, to Markdown.
pub fn html_to_markdown(html: &str, base: &url::Url) -> Page {
    let shape = super::scan::shape(html, MAX_SHAPE, MAX_REOPENED);
    if shape.depth >= MAX_SHAPE || shape.reopened >= MAX_REOPENED {
        return Page { title: None, plain: true, markdown: super::scan::plain_text(html) };
    }
    let converter = htmd::HtmlToMarkdown::builder().skip_tags(SKIPPED.to_vec()).build();
    let tree = match converter.html_to_tree(html) {
        Ok(tree) => tree,
        // The parser reads from a string and never fails; keep the text rather than nothing.
        Err(_) => return Page { title: None, plain: true, markdown: super::scan::plain_text(html) },
    };
    let title = title(&tree);
    prepare(&tree, base);
    let markdown = converter.tree_to_markdown(&tree);
    Page { title, plain: false, markdown: tidy(&markdown) }
}

fn element_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

fn skipped(node: &Node) -> bool {
    element_name(node).is_some_and(|name| SKIPPED.contains(&name))
}

/// The text of the first `<title>`, whitespace collapsed, at most 200 characters.
fn title(tree: &Handle) -> Option<String> {
    let mut stack = vec![Rc::clone(tree)];
    while let Some(node) = stack.pop() {
        if element_name(&node) == Some("title") {
            let mut text = String::new();
            for child in node.children.borrow().iter() {
                if let NodeData::Text { contents } = &child.data {
                    text.push_str(&contents.borrow());
                }
            }
            let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            return (!text.is_empty()).then(|| text.chars().take(200).collect());
        }
        let children = node.children.borrow();
        stack.extend(children.iter().rev().cloned());
    }
    None
}

/// Readies the tree for the converter, without recursion: links and image sources made
/// absolute, inline images dropped, and elements below [`MAX_DEPTH`] replaced by their
/// text.
fn prepare(tree: &Handle, base: &url::Url) {
    let mut stack = vec![(Rc::clone(tree), 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if skipped(&node) {
            continue;
        }
        if let NodeData::Element { name, attrs, .. } = &node.data {
            let attribute = match &*name.local {
                "a" => Some("href"),
                "img" => Some("src"),
                _ => None,
            };
            if let Some(attribute) = attribute {
                for attr in attrs.borrow_mut().iter_mut().filter(|a| &*a.name.local == attribute) {
                    let value = attr.value.trim().to_owned();
                    if value.len() > 5 && value[..5].eq_ignore_ascii_case("data:") {
                        attr.value = String::from("data:,").into();
                    } else if let Ok(absolute) = base.join(&value)
                        && matches!(absolute.scheme(), "http" | "https")
                    {
                        attr.value = String::from(absolute).into();
                    }
                }
            }
        }
        if depth >= MAX_DEPTH {
            flatten(&node);
            continue;
        }
        let children = node.children.borrow();
        stack.extend(children.iter().map(|child| (Rc::clone(child), depth + 1)));
    }
}

/// Replaces everything under `node` with the text nodes under it, in document order.
fn flatten(node: &Handle) {
    let mut texts = Vec::new();
    let mut stack: Vec<Handle> = node.children.borrow().iter().rev().cloned().collect();
    while let Some(next) = stack.pop() {
        if skipped(&next) {
            continue;
        }
        if matches!(next.data, NodeData::Text { .. }) {
            texts.push(next);
            continue;
        }
        let children = next.children.borrow();
        stack.extend(children.iter().rev().cloned());
    }
    for text in &texts {
        text.parent.set(Some(Rc::downgrade(node)));
    }
    // The old subtree is dropped here, iteratively (`markup5ever_rcdom`'s `Drop`).
    *node.children.borrow_mut() = texts;
}

/// No runs of more than one blank line, no trailing spaces.
fn tidy(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank = 0;
    for line in markdown.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_matches('\n').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn base() -> url::Url {
        url::Url::parse("https://docs.example/guide/intro.html").unwrap()
    }

    #[test]
    fn html_becomes_markdown_with_absolute_links_and_no_scripts() {
        let html = r#"<!doctype html><html><head><title> The
            Guide </title><style>body { color: red }</style><script>alert("x")</script></head>
            <body><h1>Install</h1><p>Run <code>cargo add keel</code>, then read <a href="../api/">the API</a>
            or <a href="https://other.example/x">elsewhere</a>.</p>
            <ul><li>one</li><li>two</li></ul>
            <script>window.secret = 1</script><noscript>enable js</noscript>
            <img alt="logo" src="data:image/png;base64,AAAA"><img alt="chart" src="/img/chart.png">
            <pre><code>fn main() {}</code></pre></body></html>"#;
        let page = html_to_markdown(html, &base());
        assert_eq!(page.title.as_deref(), Some("The Guide"));
        let md = page.markdown;
        assert!(md.starts_with("# Install"), "{md}");
        assert!(md.contains("Run `cargo add keel`, then read [the API](https://docs.example/api/)"), "{md}");
        assert!(md.contains("[elsewhere](https://other.example/x)"), "{md}");
        assert!(md.contains("*   one") || md.contains("- one") || md.contains("* one"), "{md}");
        assert!(md.contains("![chart](https://docs.example/img/chart.png)"), "{md}");
        assert!(md.contains("fn main() {}"), "{md}");
        for absent in ["alert", "secret", "color: red", "enable js", "base64", "The Guide"] {
            assert!(!md.contains(absent), "{absent} in {md}");
        }
    }

    /// A page nested a hundred thousand deep is shown as plain text at once (html5ever
    /// took 25 s for 40,000 levels); one under the limit converts, flattened below
    /// `MAX_DEPTH`, without overflowing a small stack.
    #[test]
    fn deep_nesting_is_flattened_not_recursed() {
        let deep = |depth: usize| {
            format!("<p>top</p>{}deep text{}<p>after</p>", "<div>".repeat(depth), "</div>".repeat(depth))
        };
        let started = std::time::Instant::now();
        let page = html_to_markdown(&deep(100_000), &base());
        assert!(
            page.plain && started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(page.markdown, "top\ndeep text\nafter");
        let many: String = (0..255).map(|n| format!("<b id={n}>")).collect();
        let leaky = format!("<div>{many}x</div>{}", "<div>y</div>".repeat(100));
        assert!(html_to_markdown(&leaky, &base()).plain);
        let html = deep(MAX_SHAPE - 10);
        let page = std::thread::Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || html_to_markdown(&html, &base()))
            .unwrap()
            .join()
            .unwrap();
        assert!(!page.plain);
        assert_eq!(page.markdown, "top\n\ndeep text\n\nafter");
    }

    #[test]
    fn types_and_bodies_are_read_by_what_they_are() {
        assert_eq!(kind_of(&media_type("text/html; charset=utf-8")), Some(Kind::Html));
        assert_eq!(kind_of(&media_type("Application/JSON")), Some(Kind::Json));
        assert_eq!(kind_of("application/vnd.api+json"), Some(Kind::Json));
        assert_eq!(kind_of("text/markdown"), Some(Kind::Text));
        assert_eq!(kind_of("application/atom+xml"), Some(Kind::Text));
        for binary in ["image/png", "application/pdf", "application/octet-stream", "application/zip", ""] {
            assert_eq!(kind_of(binary), None, "{binary}");
        }
        assert_eq!(sniff(b"  <!DOCTYPE html><p>x"), Some(Kind::Html));
        assert_eq!(sniff(b"{\"a\": 1}"), Some(Kind::Json));
        assert_eq!(sniff(b"plain words"), Some(Kind::Text));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0"), None);
        assert_eq!(decode(b"caf\xe9", "text/plain; charset=ISO-8859-1"), "café");
        assert_eq!(decode(b"\xef\xbb\xbfcaf\xc3\xa9", "text/plain"), "café");
        assert_eq!(decode(b"a\xffb", "text/plain; charset=utf-8"), "a\u{fffd}b");
        assert_eq!(json("{\"a\":[1,2]}"), "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
        assert_eq!(json("{not json"), "{not json");
    }
}
