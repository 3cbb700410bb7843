//! HTTP failures mapped to keel's error kinds, with messages that say what to do.

use std::time::Duration;

use serde_json::Value;

use super::body;
use crate::error::{ModelError, ModelErrorKind};

const CONTEXT_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "prompt is too long",
    "exceeds the context",
    "reduce the length",
    "exceed_context_size",
];

fn error_text(error: &Value) -> String {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    truncate(&message, 600)
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The kind an error's name says, for the names the APIs use: Anthropic's error
/// `type` (`overloaded_error`, `rate_limit_error`, …) and OpenAI's string `code`
/// (`rate_limit_exceeded`, `server_error`, `context_length_exceeded`, …).
fn kind_of_name(name: &str) -> Option<ModelErrorKind> {
    Some(match name {
        "rate_limit_error" | "rate_limit_exceeded" | "rate_limited" | "insufficient_quota_retry" => {
            ModelErrorKind::RateLimited
        }
        "overloaded_error"
        | "api_error"
        | "server_error"
        | "internal_error"
        | "server_is_overloaded"
        | "service_unavailable"
        | "timeout_error" => ModelErrorKind::Server,
        "authentication_error" | "permission_error" | "invalid_api_key" | "billing_error" => {
            ModelErrorKind::Auth
        }
        // llama.cpp's llama-server: `{"error": {"code": 400, "type": "exceed_context_size_error",
        // "n_prompt_tokens": …, "n_ctx": …}}`.
        "context_length_exceeded" | "request_too_large" | "exceed_context_size_error" => {
            ModelErrorKind::ContextOverflow
        }
        "invalid_request_error" | "not_found_error" | "invalid_prompt" | "invalid_request" => {
            ModelErrorKind::InvalidRequest
        }
        _ => return None,
    })
}

/// The kind an error object's string `code` or `type` names.
fn named_kind(error: &Value) -> Option<ModelErrorKind> {
    ["code", "type"]
        .iter()
        .filter_map(|field| error.get(*field).and_then(Value::as_str))
        .find_map(kind_of_name)
}

/// Classifies an error object found in a body or a stream event: `{"message", "code"}`
/// (Chat Completions, Responses) or `{"type", "message"}` (Anthropic). A numeric code is
/// an HTTP status; a named code or type is looked up; a context overflow, by its name or
/// its message, is `ContextOverflow` whatever its code.
pub(crate) fn classify_error_object(error: &Value, status: Option<u16>) -> ModelError {
    let message = error_text(error);
    let code = status.or_else(|| {
        error
            .get("code")
            .and_then(|c| c.as_u64().or_else(|| c.as_str().and_then(|s| s.parse().ok())))
            .and_then(|c| u16::try_from(c).ok())
    });
    let named = named_kind(error);
    let kind = match (code, named) {
        (_, Some(ModelErrorKind::ContextOverflow)) => ModelErrorKind::ContextOverflow,
        (Some(429), _) => ModelErrorKind::RateLimited,
        (Some(401 | 403), _) => ModelErrorKind::Auth,
        (Some(400..=499), _) => ModelErrorKind::InvalidRequest,
        (None, Some(kind)) => kind,
        _ => ModelErrorKind::Server,
    };
    let lowered = message.to_lowercase();
    let kind = if CONTEXT_MARKERS.iter().any(|m| lowered.contains(m)) {
        ModelErrorKind::ContextOverflow
    } else {
        kind
    };
    let mut err = ModelError::new(kind, format!("the provider reported an error: {message}"));
    err.status = code;
    err
}

/// Parses `Retry-After` (seconds) or `retry-after-ms`.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) =
        headers.get("retry-after-ms").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok())
    {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<f64>().ok().map(|s| Duration::from_secs_f64(s.max(0.0)))
}

/// What the server said, for a message: the `error` object's text, the start of the
/// body, or what an HTML page is.
fn detail(body: &[u8], html: bool) -> String {
    if html {
        return "an HTML page".to_owned();
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(json) => match json.get("error") {
            Some(error) => error_text(error),
            None => truncate(String::from_utf8_lossy(body).trim(), 600),
        },
        Err(_) => truncate(String::from_utf8_lossy(body).trim(), 600),
    }
}

/// A non-success HTTP response: its status, body (the start of it), content type, the
/// URL it came from, and what API should have been there.
pub(crate) struct Failure<'a> {
    pub status: u16,
    pub body: &'a [u8],
    pub content_type: &'a str,
    pub url: &'a str,
    pub api: &'a str,
}

/// Maps a non-success HTTP response to an error. A web page where the API should be
/// (a 4xx, or a 501) means a wrong URL: it is named so, and not retried.
pub(crate) fn from_status(failure: &Failure<'_>, api_key_env: Option<&str>, provider: &str) -> ModelError {
    let Failure { status, body, content_type, url, api } = *failure;
    let html = body::is_html(content_type, body);
    let detail = detail(body, html);
    let lowered = detail.to_lowercase();
    let overflow_named = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|json| json.get("error").and_then(named_kind))
        .is_some_and(|kind| kind == ModelErrorKind::ContextOverflow);
    let (kind, message) = match status {
        401 | 403 => {
            let fix = match api_key_env {
                Some(var) => format!("set {var} (or KEEL_API_KEY) to a valid API key"),
                None => "set KEEL_API_KEY to a valid API key".to_owned(),
            };
            (
                ModelErrorKind::Auth,
                format!("{provider} rejected the credentials (HTTP {status}): {detail}. Fix: {fix}."),
            )
        }
        400 | 413 if overflow_named || CONTEXT_MARKERS.iter().any(|m| lowered.contains(m)) => (
            ModelErrorKind::ContextOverflow,
            format!("the conversation no longer fits the model's context window (HTTP {status}): {detail}"),
        ),
        429 => (ModelErrorKind::RateLimited, format!("{provider} is rate limiting (HTTP 429): {detail}")),
        400..=499 | 501 if html => {
            (ModelErrorKind::InvalidRequest, body::html_page(api, url, Some(status), body))
        }
        404 => (
            ModelErrorKind::InvalidRequest,
            format!("{provider} answered 404 (wrong base URL or model name?): {detail}"),
        ),
        501 => (
            ModelErrorKind::InvalidRequest,
            format!("{provider} does not implement this request (HTTP 501) at {url}: {detail}"),
        ),
        500..=599 => (ModelErrorKind::Server, format!("{provider} failed (HTTP {status}): {detail}")),
        _ => (
            ModelErrorKind::InvalidRequest,
            format!("{provider} rejected the request (HTTP {status}): {detail}"),
        ),
    };
    ModelError::new(kind, message).with_status(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure<'a>(status: u16, body: &'a [u8], content_type: &'a str) -> Failure<'a> {
        Failure {
            status,
            body,
            content_type,
            url: "http://h/chat/completions",
            api: "an OpenAI-compatible API",
        }
    }

    #[test]
    fn html_pages_and_501_are_wrong_urls_not_server_trouble() {
        let page = b"<html><head><title>Not Found</title></head><body>...</body></html>";
        for (status, content_type) in [(404, "text/html"), (405, ""), (501, "text/html; charset=utf-8")] {
            let err = from_status(&failure(status, page, content_type), None, "x");
            assert_eq!(err.kind, ModelErrorKind::InvalidRequest, "{status}");
            assert!(!err.kind.is_retryable());
            assert!(err.message.contains("an HTML page") && err.message.contains("/v1"), "{}", err.message);
            assert!(err.message.contains("http://h/chat/completions"), "{}", err.message);
        }
        let err = from_status(&failure(501, br#"{"error":{"message":"no"}}"#, "application/json"), None, "x");
        assert_eq!(err.kind, ModelErrorKind::InvalidRequest);
        // A proxy's 502 page is passing trouble: retried, and not pasted into the message.
        let err = from_status(&failure(502, b"<html><body><h1>502 Bad Gateway</h1>", "text/html"), None, "x");
        assert_eq!(err.kind, ModelErrorKind::Server);
        assert!(!err.message.contains("<h1>"), "{}", err.message);
    }

    #[test]
    fn named_error_types_of_every_api_are_classified() {
        let kind = |error: Value| classify_error_object(&error, None).kind;
        assert_eq!(
            kind(serde_json::json!({"type": "overloaded_error", "message": "Overloaded"})),
            ModelErrorKind::Server
        );
        assert_eq!(
            kind(serde_json::json!({"type": "rate_limit_error", "message": "slow"})),
            ModelErrorKind::RateLimited
        );
        assert_eq!(
            kind(serde_json::json!({"code": "rate_limit_exceeded", "message": "slow"})),
            ModelErrorKind::RateLimited
        );
        assert_eq!(
            kind(
                serde_json::json!({"code": "context_length_exceeded", "message": "Your input exceeds the window"})
            ),
            ModelErrorKind::ContextOverflow
        );
        assert_eq!(
            kind(
                serde_json::json!({"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"})
            ),
            ModelErrorKind::ContextOverflow
        );
        assert_eq!(
            kind(serde_json::json!({"type": "authentication_error", "message": "bad key"})),
            ModelErrorKind::Auth
        );
        assert_eq!(kind(serde_json::json!({"code": 502, "message": "upstream"})), ModelErrorKind::Server);
        assert_eq!(kind(serde_json::json!({"message": "something"})), ModelErrorKind::Server);
    }

    #[test]
    fn auth_names_the_variable() {
        let err = from_status(
            &failure(401, br#"{"error":{"message":"Invalid API key"}}"#, "application/json"),
            Some("DEEPSEEK_API_KEY"),
            "deepseek",
        );
        assert_eq!(err.kind, ModelErrorKind::Auth);
        assert!(err.message.contains("DEEPSEEK_API_KEY"), "{}", err.message);
        assert!(err.message.contains("Invalid API key"));
    }

    #[test]
    fn context_overflow_is_typed() {
        let err = from_status(
            &failure(
                400,
                br#"{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens","code":"context_length_exceeded"}}"#,
                "application/json",
            ),
            None,
            "openai",
        );
        assert_eq!(err.kind, ModelErrorKind::ContextOverflow);
        // llama-server names the error; its message says "context size", no marker.
        let llama = from_status(
            &failure(
                400,
                br#"{"error":{"code":400,"message":"request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9412,"n_ctx":8192}}"#,
                "application/json",
            ),
            None,
            "llamacpp",
        );
        assert_eq!(llama.kind, ModelErrorKind::ContextOverflow, "{}", llama.message);
        assert!(llama.message.contains("(9412 tokens)"), "{}", llama.message);
        let streamed = classify_error_object(
            &serde_json::json!({"code": 400, "type": "exceed_context_size_error", "message": "request (9412 tokens) exceeds the available context size"}),
            None,
        );
        assert_eq!(streamed.kind, ModelErrorKind::ContextOverflow);
        let other = from_status(&failure(400, b"bad tool schema", "text/plain"), None, "x");
        assert_eq!(other.kind, ModelErrorKind::InvalidRequest);
        assert_eq!(from_status(&failure(503, b"", ""), None, "x").kind, ModelErrorKind::Server);
    }
}
