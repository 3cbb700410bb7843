//! What a response body is: server-sent events, one JSON document (a server that
//! ignores `stream: true`), an HTML page (a wrong base URL), or something else, judged
//! by its content type and first bytes, and errors that name it.

use crate::error::{ModelError, ModelErrorKind};

use super::ApiNames;
use super::limits::empty_reply_error;

/// How much of a body's start is kept to describe it in an error.
const HEAD_BYTES: usize = 512;

/// What a body looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    /// Server-sent events, or anything that may be (decided at the end).
    Sse,
    /// One JSON document.
    Json,
    /// A web page.
    Html,
}

/// The media type of a `Content-Type` value, lower-cased, without parameters.
fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// The first byte that is not whitespace (or a byte-order mark).
fn first_byte(bytes: &[u8]) -> Option<u8> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// Judges a body by its content type, else by its first byte: `{` or `[` is JSON, `<`
/// is HTML, anything else is given to the SSE parser. `None` while only whitespace has
/// arrived.
pub(crate) fn sniff(content_type: &str, bytes: &[u8]) -> Option<BodyKind> {
    match media_type(content_type).as_str() {
        "text/event-stream" => return Some(BodyKind::Sse),
        "text/html" | "application/xhtml+xml" => return Some(BodyKind::Html),
        _ => {}
    }
    Some(match first_byte(bytes)? {
        b'{' | b'[' => BodyKind::Json,
        b'<' => BodyKind::Html,
        _ => BodyKind::Sse,
    })
}

/// The start of a body as one line of text for a message.
fn sample(head: &[u8]) -> String {
    let text = String::from_utf8_lossy(head);
    let mut line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 160 {
        line = line.chars().take(160).collect::<String>() + "…";
    }
    line
}

/// The `<title>` of an HTML page, if its start has one.
fn title(head: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(head);
    let lower = text.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = sample(text[start..end].as_bytes());
    (!title.is_empty()).then_some(title)
}

/// An HTML page where `api` should be; `status` when it came with an error status.
pub(crate) fn html_page(api: &str, url: &str, status: Option<u16>, head: &[u8]) -> String {
    let mut what = String::from("an HTML page");
    match (status, title(head)) {
        (Some(status), Some(title)) => what.push_str(&format!(" (HTTP {status}, “{title}”)")),
        (Some(status), None) => what.push_str(&format!(" (HTTP {status})")),
        (None, Some(title)) => what.push_str(&format!(" (“{title}”)")),
        (None, None) => {}
    }
    format!("the server answered with {what}, not {api} at {url}; the base URL usually ends in /v1")
}

/// Whether an error body is a web page.
pub(crate) fn is_html(content_type: &str, body: &[u8]) -> bool {
    sniff(content_type, body) == Some(BodyKind::Html)
}

enum Mode {
    /// Nothing but whitespace yet.
    Sniff,
    Sse,
    Json(Vec<u8>),
    Html,
}

/// Where a piece of the body goes.
pub(crate) enum Route {
    /// Only whitespace so far: nothing to do.
    Wait,
    /// To the SSE decoder.
    Sse,
    /// Kept, to be parsed whole at the end.
    Buffered,
    /// The JSON document is larger than the bound.
    TooLarge,
    /// It is a web page.
    Html,
}

/// The shape of one body as it arrives.
pub(crate) struct Shape {
    content_type: String,
    head: Vec<u8>,
    mode: Mode,
    names: ApiNames,
}

impl Shape {
    /// A body of `names`' API served with `content_type` (empty when there was none).
    pub fn new(content_type: &str, names: ApiNames) -> Self {
        let mode = if media_type(content_type) == "text/event-stream" { Mode::Sse } else { Mode::Sniff };
        Shape { content_type: content_type.to_owned(), head: Vec::new(), mode, names }
    }

    /// Takes the next piece of the body; a JSON document is kept up to `cap` bytes.
    /// Only the start of a web page is kept.
    pub fn route(&mut self, bytes: &[u8], cap: usize) -> Route {
        if self.head.len() < HEAD_BYTES {
            let take = bytes.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        if let Mode::Sniff = self.mode {
            // Everything before was whitespace: this piece holds the first byte.
            self.mode = match sniff(&self.content_type, bytes) {
                None => return Route::Wait,
                Some(BodyKind::Html) => Mode::Html,
                Some(BodyKind::Json) => Mode::Json(Vec::new()),
                Some(BodyKind::Sse) => Mode::Sse,
            };
        }
        match &mut self.mode {
            Mode::Json(document) if document.len() + bytes.len() > cap => Route::TooLarge,
            Mode::Json(document) => {
                document.extend_from_slice(bytes);
                Route::Buffered
            }
            Mode::Html => Route::Html,
            Mode::Sse | Mode::Sniff => Route::Sse,
        }
    }

    /// True once the body showed itself a web page.
    pub fn is_html(&self) -> bool {
        matches!(self.mode, Mode::Html)
    }

    /// True once as much of the body's start is kept as an error shows.
    pub fn head_is_full(&self) -> bool {
        self.head.len() >= HEAD_BYTES
    }

    /// The JSON document, when the body was one.
    pub fn json(&self) -> Option<&[u8]> {
        match &self.mode {
            Mode::Json(document) => Some(document),
            _ => None,
        }
    }

    /// True when nothing but whitespace arrived.
    pub fn is_empty(&self) -> bool {
        matches!(self.mode, Mode::Sniff)
    }

    /// Why a body from which no message came is not a reply: named for what it was.
    pub fn blank_error(&self, url: &str, events: u64) -> ModelError {
        let invalid = |message: String| ModelError::new(ModelErrorKind::InvalidResponse, message);
        match &self.mode {
            Mode::Sniff => empty_reply_error(),
            Mode::Html => invalid(html_page(self.names.api, url, None, &self.head)),
            Mode::Json(_) => invalid(format!(
                "the server answered with JSON that is not {}, so {url} may not be {}; the base URL usually \
                 ends in /v1. It began: “{}”",
                self.names.document,
                self.names.api,
                sample(&self.head)
            )),
            Mode::Sse if events > 0 => invalid(format!(
                "the server's stream ended without a message: its {events} events carried no text, tool \
                 call, finish reason or usage"
            )),
            Mode::Sse if self.looks_like_sse() => empty_reply_error(),
            Mode::Sse => {
                let content_type =
                    if self.content_type.is_empty() { "no content type" } else { self.content_type.as_str() };
                invalid(format!(
                    "the server answered with a body that is neither server-sent events nor JSON \
                     ({content_type}), not {} at {url}; the base URL usually ends in /v1. It began: “{}”",
                    self.names.api,
                    sample(&self.head)
                ))
            }
        }
    }

    /// An event-stream content type, or a first line that is an SSE comment or field.
    fn looks_like_sse(&self) -> bool {
        if media_type(&self.content_type) == "text/event-stream" {
            return true;
        }
        let start = self.head.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(self.head.len());
        let rest = &self.head[start..];
        rest.starts_with(b":")
            || [&b"data"[..], b"event", b"id", b"retry"].iter().any(|f| rest.starts_with(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_by_type_then_by_first_byte() {
        assert_eq!(sniff("text/event-stream; charset=utf-8", b"{"), Some(BodyKind::Sse));
        assert_eq!(sniff("Text/HTML", b"data: x"), Some(BodyKind::Html));
        assert_eq!(sniff("application/json", b"\n  {\"a\":1}"), Some(BodyKind::Json));
        assert_eq!(sniff("application/json", b"data: {}"), Some(BodyKind::Sse));
        assert_eq!(sniff("", b"\xef\xbb\xbf<!DOCTYPE html>"), Some(BodyKind::Html));
        assert_eq!(sniff("text/plain", b"Not Found"), Some(BodyKind::Sse));
        assert_eq!(sniff("", b" \r\n"), None);
    }

    #[test]
    fn html_pages_are_named_with_their_title() {
        let page = b"<!doctype html><html><head><TITLE>\n  404 Not Found </title>";
        assert_eq!(
            html_page("an OpenAI-compatible API", "http://h/chat/completions", Some(404), page),
            "the server answered with an HTML page (HTTP 404, “404 Not Found”), not an OpenAI-compatible \
             API at http://h/chat/completions; the base URL usually ends in /v1"
        );
        assert!(
            html_page("an API", "u", None, b"<html><title></title>")
                .starts_with("the server answered with an HTML page, not")
        );
    }
}
