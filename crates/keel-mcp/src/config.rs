//! How an MCP server is configured: Codex's `[mcp_servers.NAME]` tables, so a Codex
//! configuration can be pasted as it is (the JSON `mcpServers` form of other tools reads
//! too: `headers` and `type` are accepted).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{McpError, McpErrorKind};

/// Default time a server gets to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One server's settings. Either `command` (a program keel starts and talks to over its
/// stdin and stdout) or `url` (a streamable-HTTP endpoint).
///
/// ```
/// let config: keel_mcp::ServerConfig = serde_json::from_value(serde_json::json!({
///     "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
///     "tool_timeout_sec": 30,
/// })).unwrap();
/// assert!(config.validate("files").is_ok());
/// assert_eq!(config.tool_timeout(), std::time::Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program to start (stdio servers).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set in its environment (on top of keel's, with credentials removed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of keel's environment passed on although they look like credentials
    /// (e.g. `GITHUB_TOKEN`).
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// The folder it runs in (default: keel's).
    pub cwd: Option<PathBuf>,
    /// The streamable-HTTP endpoint (HTTP servers).
    pub url: Option<String>,
    /// The variable holding a bearer token sent as `Authorization: Bearer …`.
    pub bearer_token_env_var: Option<String>,
    /// Headers sent with every request.
    #[serde(default, alias = "headers")]
    pub http_headers: BTreeMap<String, String>,
    /// Headers whose values come from keel's environment: header name → variable name.
    #[serde(default)]
    pub env_http_headers: BTreeMap<String, String>,
    /// Seconds the server gets to start and list its tools (default 30).
    pub startup_timeout_sec: Option<f64>,
    /// The same in milliseconds (older Codex configurations).
    pub startup_timeout_ms: Option<u64>,
    /// Seconds one tool call may take (default 60).
    pub tool_timeout_sec: Option<f64>,
    /// `false` leaves the server out (default true).
    pub enabled: Option<bool>,
    /// `true`: keel refuses to start without this server.
    #[serde(default)]
    pub required: bool,
    /// Only these tools are offered.
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are not offered.
    pub disabled_tools: Option<Vec<String>>,
    /// `stdio`, `http` or `streamable-http` (JSON configurations of other tools; the
    /// transport follows from `command` or `url` anyway).
    #[serde(rename = "type")]
    pub transport_type: Option<String>,
    /// A stdio server's sandbox, as for shell commands: `read-only`, `workspace-write`
    /// (its `cwd` writable, or keel's folder) or `off` (default).
    pub sandbox: Option<String>,
    /// Network access under the sandbox (default: the mode's, off for `read-only`).
    pub network: Option<bool>,
}

impl ServerConfig {
    /// A stdio server running `command` with `args`.
    pub fn stdio(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ServerConfig {
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            ..ServerConfig::default()
        }
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig { url: Some(url.into()), ..ServerConfig::default() }
    }

    /// Checks the settings make sense for server `name`.
    pub fn validate(&self, name: &str) -> Result<(), McpError> {
        let bad = |message: String| Err(McpError::new(McpErrorKind::Config, name, message));
        if name.trim().is_empty() {
            return bad("the server needs a name".into());
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => return bad("set either `command` (stdio) or `url` (HTTP), not both".into()),
            (None, None) => {
                return bad("set `command` (a stdio server) or `url` (a streamable-HTTP server)".into());
            }
            (Some(command), None) if command.trim().is_empty() => return bad("`command` is empty".into()),
            (Some(_), None) => {
                if self.bearer_token_env_var.is_some()
                    || !self.http_headers.is_empty()
                    || !self.env_http_headers.is_empty()
                {
                    return bad("`bearer_token_env_var` and HTTP headers need a `url`".into());
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return bad(format!("the url `{url}` must start with http:// or https://"));
                }
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.env_vars.is_empty()
                    || self.cwd.is_some()
                {
                    return bad("`args`, `env`, `env_vars` and `cwd` need a `command`".into());
                }
            }
        }
        if let Some(mode) = &self.sandbox {
            if keel_sandbox::SandboxMode::parse(mode).is_none() {
                return bad(format!("unknown sandbox `{mode}` (read-only, workspace-write or off)"));
            }
            if self.command.is_none() {
                return bad("`sandbox` applies to stdio servers (a `command`)".into());
            }
        }
        match self.transport_type.as_deref() {
            None | Some("stdio" | "http" | "streamable-http" | "streamable_http") => {}
            Some("sse") => {
                return bad(
                    "the old SSE transport is not supported; use the server's streamable-HTTP URL".into()
                );
            }
            Some(other) => return bad(format!("unknown transport type `{other}` (stdio or http)")),
        }
        for (key, value) in
            [("startup_timeout_sec", self.startup_timeout_sec), ("tool_timeout_sec", self.tool_timeout_sec)]
        {
            if value.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return bad(format!("`{key}` must be a positive number of seconds"));
            }
        }
        Ok(())
    }

    /// Whether the server is used.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// The time the server gets to start and list its tools.
    pub fn startup_timeout(&self) -> Duration {
        match (self.startup_timeout_sec, self.startup_timeout_ms) {
            (Some(secs), _) => seconds(secs, DEFAULT_STARTUP_TIMEOUT),
            (None, Some(ms)) => Duration::from_millis(ms.max(1)),
            (None, None) => DEFAULT_STARTUP_TIMEOUT,
        }
    }

    /// The time one tool call may take.
    pub fn tool_timeout(&self) -> Duration {
        self.tool_timeout_sec.map_or(DEFAULT_TOOL_TIMEOUT, |secs| seconds(secs, DEFAULT_TOOL_TIMEOUT))
    }

    /// Whether the server's tool `tool` is offered (`enabled_tools`, `disabled_tools`).
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools.as_ref().is_none_or(|only| only.iter().any(|t| t == tool))
            && self.disabled_tools.as_ref().is_none_or(|not| !not.iter().any(|t| t == tool))
    }

    /// A short description: `stdio: npx -y pkg` or `http: https://…`.
    pub fn describe(&self) -> String {
        match (&self.command, &self.url) {
            (Some(command), _) => {
                let mut text = format!("stdio: {command}");
                for arg in &self.args {
                    text.push(' ');
                    text.push_str(arg);
                }
                text
            }
            (None, Some(url)) => format!("http: {url}"),
            (None, None) => "not configured".to_owned(),
        }
    }
}

fn seconds(secs: f64, default: Duration) -> Duration {
    Duration::try_from_secs_f64(secs).ok().filter(|d| !d.is_zero()).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn parse(value: serde_json::Value) -> ServerConfig {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_codex_table_reads_whole() {
        let config = parse(json!({
            "command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "x"}, "env_vars": ["HOME"], "cwd": "/tmp",
            "startup_timeout_sec": 10, "tool_timeout_sec": 2.5,
            "enabled_tools": ["a", "b"], "disabled_tools": ["b"], "required": true,
        }));
        assert_eq!(
            config,
            ServerConfig {
                command: Some("npx".into()),
                args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
                env: [("GITHUB_TOKEN".to_owned(), "x".to_owned())].into(),
                env_vars: vec!["HOME".into()],
                cwd: Some("/tmp".into()),
                startup_timeout_sec: Some(10.0),
                tool_timeout_sec: Some(2.5),
                enabled_tools: Some(vec!["a".into(), "b".into()]),
                disabled_tools: Some(vec!["b".into()]),
                required: true,
                ..ServerConfig::default()
            }
        );
        assert_eq!(config.validate("github"), Ok(()));
        assert_eq!(config.startup_timeout(), Duration::from_secs(10));
        assert_eq!(config.tool_timeout(), Duration::from_millis(2500));
        assert_eq!((config.offers("a"), config.offers("b"), config.offers("c")), (true, false, false));
        assert_eq!(config.describe(), "stdio: npx -y @modelcontextprotocol/server-github");
        let http = parse(json!({"url": "https://example.com/mcp", "bearer_token_env_var": "DOCS_TOKEN",
                                "http_headers": {"X-Team": "core"}, "startup_timeout_ms": 500}));
        assert_eq!(http.validate("docs"), Ok(()));
        assert_eq!(http.startup_timeout(), Duration::from_millis(500));
        assert_eq!(http.tool_timeout(), DEFAULT_TOOL_TIMEOUT);
        // The JSON form of other tools.
        let claude = parse(json!({"type": "http", "url": "http://localhost:1/mcp", "headers": {"A": "b"}}));
        assert_eq!(claude.http_headers.get("A").map(String::as_str), Some("b"));
        assert_eq!(claude.validate("c"), Ok(()));
    }

    #[test]
    fn contradictions_are_refused_with_what_to_do() {
        let cases = [
            (json!({}), "set `command` (a stdio server) or `url` (a streamable-HTTP server)"),
            (
                json!({"command": "a", "url": "http://x"}),
                "set either `command` (stdio) or `url` (HTTP), not both",
            ),
            (json!({"url": "ftp://x"}), "the url `ftp://x` must start with http:// or https://"),
            (
                json!({"url": "http://x", "args": ["a"]}),
                "`args`, `env`, `env_vars` and `cwd` need a `command`",
            ),
            (
                json!({"command": "a", "http_headers": {"a": "b"}}),
                "`bearer_token_env_var` and HTTP headers need a `url`",
            ),
            (
                json!({"command": "a", "tool_timeout_sec": 0}),
                "`tool_timeout_sec` must be a positive number of seconds",
            ),
            (
                json!({"url": "http://x", "type": "sse"}),
                "the old SSE transport is not supported; use the server's streamable-HTTP URL",
            ),
        ];
        for (value, message) in cases {
            let error = parse(value.clone()).validate("s").unwrap_err();
            assert_eq!(error, McpError::new(McpErrorKind::Config, "s", message), "{value}");
        }
        let typo = serde_json::from_value::<ServerConfig>(json!({"command": "a", "argz": []})).unwrap_err();
        assert!(typo.to_string().contains("unknown field `argz`"), "{typo}");
    }
}
