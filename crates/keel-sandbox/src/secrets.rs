//! Which environment variables hold credentials, by name or by value: removed from the
//! environment of shell commands and MCP servers unless the user passes them through.

/// True for variables whose name says they hold a credential: keel's own settings, keys
/// (`*_KEY`, `*_APIKEY`), tokens (`*_TOKEN`, `*_PAT`), passwords, secrets, DSNs, webhook
/// URLs, credentials, cookies, private keys.
pub fn is_secret_var(name: &str) -> bool {
    const SUFFIXES: &[&str] = &[
        "_KEY",
        "_APIKEY",
        "_TOKEN",
        "_PAT",
        "_DSN",
        "_PASSWORD",
        "_PASSWD",
        "_PASS",
        "_PWD",
        "_AUTH",
        "_COOKIE",
    ];
    const NAMES: &[&str] = &["API_KEY", "TOKEN", "PASSWORD", "SSHPASS"];
    const PARTS: &[&str] = &["SECRET", "PASSWORD", "WEBHOOK", "CREDENTIAL", "PRIVATE_KEY"];
    let upper = name.to_ascii_uppercase();
    upper.starts_with("KEEL_")
        || PARTS.iter().any(|p| upper.contains(p))
        || SUFFIXES.iter().any(|s| upper.ends_with(s))
        || NAMES.contains(&upper.as_str())
        || ["OPENAI_", "ANTHROPIC_", "DEEPSEEK_", "OPENROUTER_"].iter().any(|p| upper.starts_with(p))
}

/// True for a value holding a URL with a password in it (`scheme://user:pass@host`), as
/// in `DATABASE_URL` or a proxy setting: a scheme (letters, digits, `+.-`, with a letter),
/// `://`, then an authority with a `:` that ends at an `@` before any `/?#` or blank.
/// (A scan, not a regular expression: this runs for every variable of every command's
/// environment, and compiling the expression cost more than the first command's start.)
pub fn has_url_credentials(value: &str) -> bool {
    let bytes = value.as_bytes();
    let is_scheme = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-');
    let mut from = 0;
    while let Some(found) = value[from..].find("://") {
        let at = from + found;
        let scheme = bytes[..at].iter().rev().take_while(|b| is_scheme(**b));
        let has_letter = scheme.clone().any(u8::is_ascii_alphabetic);
        if has_letter {
            let rest = &value[at + 3..];
            let end = rest.find(|c: char| matches!(c, '/' | '?' | '#' | '@') || c.is_whitespace());
            if let Some(end) = end
                && rest[end..].starts_with('@')
                && rest[..end].contains(':')
            {
                return true;
            }
        }
        from = at + 1;
    }
    false
}

/// True for a value shaped like a well-known service's token (`sk-…`, `ghp_…`,
/// `github_pat_…`, `xoxb-…`, `AKIA…`, `glpat-…`), whatever the variable is called.
pub fn looks_like_token(value: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "sk-",
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "AKIA",
        "ASIA",
        "glpat-",
        "hf_",
    ];
    let value = value.trim();
    value.len() >= 20 && !value.contains(char::is_whitespace) && PREFIXES.iter().any(|p| value.starts_with(p))
}

/// True for a variable removed from shell commands' environment: a credential by its name
/// ([`is_secret_var`]) or by its value ([`has_url_credentials`], [`looks_like_token`]).
pub fn is_secret(name: &str, value: &str) -> bool {
    is_secret_var(name) || has_url_credentials(value) || looks_like_token(value)
}

#[cfg(test)]
mod tests {
    use super::has_url_credentials;

    /// The scan answers as the expression it replaced,
    /// `[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@`, on every value built from
    /// the pieces that matter to it.
    #[test]
    fn the_scan_agrees_with_the_expression_it_replaced() {
        let Ok(regex) = regex::Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@") else {
            panic!("the reference expression compiles");
        };
        const PIECES: &[&str] =
            &["a", "1", "+", "://", ":", "@", "/", "?", "#", " ", "\u{a0}", "é", "x", ":/"];
        let mut checked = 0;
        let mut values = vec![String::new()];
        for _ in 0..5 {
            let mut next = Vec::new();
            for value in &values {
                for piece in PIECES {
                    let longer = format!("{value}{piece}");
                    assert_eq!(has_url_credentials(&longer), regex.is_match(&longer), "{longer:?}");
                    checked += 1;
                    next.push(longer);
                }
            }
            values = next;
        }
        assert!(checked > 500_000, "{checked}");
    }

    #[test]
    fn urls_with_and_without_a_password() {
        for yes in ["postgres://me:secret@db/app", "x https://u:p@h", "git+ssh://a:b@c", "s3://:k@b"] {
            assert!(has_url_credentials(yes), "{yes}");
        }
        for no in
            ["https://example.com/a:b@c", "://u:p@h", "postgres://me@db", "1://u:p@h", "https://u:p h@x"]
        {
            assert!(!has_url_credentials(no), "{no}");
        }
    }
}
