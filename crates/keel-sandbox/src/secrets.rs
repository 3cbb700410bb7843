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
/// in `DATABASE_URL` or a proxy setting.
pub fn has_url_credentials(value: &str) -> bool {
    static URL: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*:[^/?#@\s]*@").ok()
    });
    URL.as_ref().is_some_and(|url| url.is_match(value))
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
