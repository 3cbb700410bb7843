//! `web_fetch(pattern)` rules: a pattern is a URL with `*` (and `?`) in it, matched part
//! by part against the URL the call names, so a `*` in the host never reaches into the
//! path (`https://*.rust-lang.org/*` does not match `https://evil.example/x.rust-lang.org/`).
//!
//! - `https://docs.rs/*`: that scheme, that host on its default port, any path.
//! - `docs.rs`, `*.rust-lang.org`: any scheme, any path; `localhost:*` any port.
//! - `https://docs.rs/serde/*`: paths under `/serde/` (the query is part of the path).
//!
//! The URL is read as `web_fetch` reads it (host lower case, a default port dropped, the
//! fragment dropped), and its path also with percent-escapes decoded (`/%61dmin` is
//! `/admin` to the server): deny and ask rules match either form, allow rules must match
//! both.

use super::command::wildcard;

/// A URL pattern of a `web_fetch` rule.
#[derive(Debug, Clone)]
pub(super) struct UrlPattern {
    /// `http` or `https`; `None` for any.
    scheme: Option<String>,
    /// `host` or `host:port`, with `*` and `?`.
    authority: String,
    /// The path (and query), with `*` and `?`; `None` for any.
    path: Option<String>,
}

impl UrlPattern {
    /// Reads `https://host/path*`, `host`, `host:port/path` (`*` anywhere).
    pub(super) fn parse(pattern: &str) -> Result<UrlPattern, &'static str> {
        let (scheme, rest) = match pattern.split_once("://") {
            Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
            None => (None, pattern),
        };
        if scheme.as_deref().is_some_and(|s| !matches!(s, "http" | "https" | "*")) {
            return Err("a web_fetch pattern's scheme is http, https or *");
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], Some(rest[at..].to_owned())),
            None => (rest, None),
        };
        if authority.is_empty()
            || authority.contains(['@', '?', '#'])
            || authority.contains(char::is_whitespace)
        {
            return Err("expected a URL pattern such as https://docs.rs/* or docs.rs");
        }
        Ok(UrlPattern {
            scheme: scheme.filter(|s| s != "*"),
            authority: authority.to_ascii_lowercase(),
            path: path.filter(|p| p != "/*"),
        })
    }

    /// Whether the pattern matches this form of a URL.
    pub(super) fn matches(&self, form: &UrlForm) -> bool {
        self.scheme.as_ref().is_none_or(|scheme| *scheme == form.scheme)
            && wildcard(&self.authority, &form.authority)
            && self.path.as_ref().is_none_or(|path| wildcard(path, &form.path))
    }
}

/// A URL as the rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UrlForm {
    scheme: String,
    /// The host (IPv6 in brackets, no final dot), and `:port` when it is not the
    /// scheme's.
    authority: String,
    /// The path, and `?query` when there is one.
    path: String,
}

/// The forms of the URL `text` names: as `web_fetch` reads it, and with its path's
/// percent-escapes decoded when that differs. Empty when it is not an http(s) URL.
pub(super) fn forms(text: &str) -> Vec<UrlForm> {
    let Ok(url) = ::url::Url::parse(text.trim()) else { return Vec::new() };
    if !matches!(url.scheme(), "http" | "https") {
        return Vec::new();
    }
    let Some(host) = url.host_str() else { return Vec::new() };
    let host = host.trim_end_matches('.');
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let form = UrlForm { scheme: url.scheme().to_owned(), authority, path };
    let decoded = percent_decoded(&form.path);
    let mut forms = vec![form.clone()];
    if decoded != form.path {
        forms.push(UrlForm { path: decoded, ..form });
    }
    forms
}

/// `text` with `%XX` escapes decoded (bytes that are not UTF-8 become U+FFFD).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[at] == b'%'
            && let (Some(high), Some(low)) =
                (bytes.get(at + 1).and_then(|b| hex(*b)), bytes.get(at + 2).and_then(|b| hex(*b)))
        {
            out.push((high * 16 + low) as u8);
            at += 3;
            continue;
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rule "always" adds for a fetch of `text`: its scheme and host, any path
/// (`web_fetch(https://docs.rs/*)`); none for a URL web_fetch would not fetch.
pub(super) fn suggest(tool: &str, text: &str) -> Vec<String> {
    forms(text)
        .first()
        .map(|form| vec![format!("{tool}({}://{}/*)", form.scheme, form.authority)])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, url: &str) -> bool {
        let pattern = UrlPattern::parse(pattern).unwrap();
        forms(url).iter().any(|form| pattern.matches(form))
    }

    #[test]
    fn patterns_match_scheme_host_and_path_apart() {
        for (pattern, url) in [
            ("https://docs.rs/*", "https://docs.rs/serde/latest/serde/"),
            ("https://docs.rs/*", "https://DOCS.rs"),
            ("https://docs.rs/*", "https://docs.rs:443/x#frag"),
            ("docs.rs", "http://docs.rs/a?b=c"),
            ("*.rust-lang.org", "https://doc.rust-lang.org/std/"),
            ("https://*.rust-lang.org/std/*", "https://doc.rust-lang.org/std/vec/"),
            ("localhost:*", "http://localhost:8000/"),
            ("http://[::1]:*/*", "http://[::1]:3000/x"),
            ("https://docs.rs/serde/*", "https://docs.rs/serde/?search=x"),
            ("*://docs.rs/*", "http://docs.rs./x"),
        ] {
            assert!(matches(pattern, url), "{pattern} should match {url}");
        }
        for (pattern, url) in [
            ("https://docs.rs/*", "http://docs.rs/"),
            ("https://docs.rs/*", "https://docs.rs.evil.example/"),
            ("https://docs.rs/*", "https://docs.rs@evil.example/"),
            ("https://docs.rs/*", "https://evil.example/https://docs.rs/"),
            ("https://docs.rs/*", "https://docs.rs:8443/"),
            ("https://*.rust-lang.org/*", "https://evil.example/x.rust-lang.org/"),
            ("*.rust-lang.org", "https://rust-lang.org/"),
            ("docs.rs", "file:///docs.rs"),
            ("docs.rs", "not a url"),
            ("https://docs.rs/serde/*", "https://docs.rs/tokio/"),
        ] {
            assert!(!matches(pattern, url), "{pattern} should not match {url}");
        }
        for bad in ["ftp://x/*", "", "user@host/*", "https:///x"] {
            assert!(UrlPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_escaped_path_is_also_seen_decoded() {
        assert!(matches("https://site.example/admin/*", "https://site.example/%61dmin/x"));
        assert_eq!(forms("https://site.example/%61dmin").len(), 2);
        assert_eq!(forms("https://site.example/admin").len(), 1);
        assert_eq!(percent_decoded("a%2Fb%zz%4"), "a/b%zz%4");
    }

    #[test]
    fn rules_decide_by_the_url_and_deny_beats_allow() {
        use crate::rules::{PermissionRules, RuleKind, RuleVerdict};
        let mut rules = PermissionRules::new("/w");
        rules
            .add(RuleKind::Allow, ["web_fetch(https://docs.rs/*)", "web_fetch(*.rust-lang.org)"], "t")
            .unwrap();
        rules.add(RuleKind::Ask, ["web_fetch(https://docs.rs/private/*)"], "t").unwrap();
        rules.add(RuleKind::Deny, ["web_fetch(*.evil.example)"], "t").unwrap();
        let call = |url: &str| rules.verdict("web_fetch", &serde_json::json!({ "url": url }).to_string());
        assert_eq!(call("https://docs.rs/serde"), RuleVerdict::Allow);
        assert_eq!(call("https://doc.rust-lang.org/std/"), RuleVerdict::Allow);
        assert_eq!(
            call("https://docs.rs/private/x"),
            RuleVerdict::Ask("web_fetch(https://docs.rs/private/*)".into())
        );
        assert_eq!(
            call("https://docs.rs/%70rivate/x"),
            RuleVerdict::Ask("web_fetch(https://docs.rs/private/*)".into())
        );
        assert_eq!(call("https://a.evil.example/"), RuleVerdict::Deny("web_fetch(*.evil.example)".into()));
        assert_eq!(call("http://docs.rs/serde"), RuleVerdict::None);
        assert_eq!(call("not a url"), RuleVerdict::None);
        let mut any = PermissionRules::new("/w");
        any.add(RuleKind::Allow, ["web_fetch"], "t").unwrap();
        assert_eq!(any.verdict("web_fetch", r#"{"url": "https://x.example/"}"#), RuleVerdict::Allow);
        assert!(crate::rules::Rule::parse("web_fetch(ftp://x)").is_err());
        // What "always" offers allows the site and nothing else.
        let mut offered = PermissionRules::new("/w");
        let suggested = offered.suggest("web_fetch", r#"{"url": "https://docs.rs/serde"}"#);
        offered.add(RuleKind::Allow, &suggested, "s").unwrap();
        assert_eq!(offered.verdict("web_fetch", r#"{"url": "https://docs.rs/tokio"}"#), RuleVerdict::Allow);
        assert_eq!(
            offered.verdict("web_fetch", r#"{"url": "https://docs.rs.evil.example/"}"#),
            RuleVerdict::None
        );
    }

    #[test]
    fn always_offers_the_site() {
        assert_eq!(suggest("web_fetch", "https://docs.rs/serde/latest"), ["web_fetch(https://docs.rs/*)"]);
        assert_eq!(suggest("web_fetch", "http://localhost:8000/x"), ["web_fetch(http://localhost:8000/*)"]);
        assert!(suggest("web_fetch", "file:///etc/passwd").is_empty());
    }
}
