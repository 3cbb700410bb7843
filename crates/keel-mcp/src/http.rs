//! The streamable-HTTP transport of a server: reqwest with rustls (ring), the bearer token
//! and headers from the configuration.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::config::ServerConfig;
use crate::error::{McpError, McpErrorKind};

/// Same-origin 307/308 redirects only (they keep the method and body; another origin
/// would get the session and headers), at most 10.
fn redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt.previous().first().is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
        if same_origin && keeps_body && attempt.previous().len() <= 10 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// The value of environment variable `name`, which server `server`'s settings name.
fn variable(server: &str, name: &str) -> Result<String, McpError> {
    let not_set = || McpError::new(McpErrorKind::Variable, server, format!("{name} is not set"));
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Ok(value),
        Ok(_) => Err(not_set()),
        Err(e) => Err(not_set().caused_by(e)),
    }
}

/// The headers of every request: `http_headers`, then `env_http_headers` (values from
/// the environment).
fn headers(server: &str, config: &ServerConfig) -> Result<HashMap<HeaderName, HeaderValue>, McpError> {
    let mut headers = HashMap::new();
    let from_env =
        config.env_http_headers.iter().map(|(name, var)| Ok::<_, McpError>((name, variable(server, var)?)));
    let fixed = config.http_headers.iter().map(|(name, value)| Ok((name, value.clone())));
    let bad = |message: String| McpError::new(McpErrorKind::Config, server, message);
    for pair in fixed.chain(from_env) {
        let (name, value) = pair?;
        let header = HeaderName::try_from(name.as_str())
            .map_err(|e| bad(format!("`{name}` is not a valid header name")).caused_by(e))?;
        let value = HeaderValue::try_from(value)
            .map_err(|e| bad(format!("the value of header `{name}` is not valid")).caused_by(e))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The transport for server `config.url`.
pub(crate) fn transport(
    server: &str,
    config: &ServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let url = config.url.clone().unwrap_or_default();
    // ring, as keel-llm: installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(0)
        .redirect(redirects());
    if url.starts_with("http://") {
        // No system certificates to load for plain HTTP.
        builder = builder.tls_certs_only(Vec::new());
    }
    let client = builder.build().map_err(|e| {
        McpError::new(McpErrorKind::Start, server, format!("cannot build the HTTP client: {e}")).caused_by(e)
    })?;
    let mut transport_config =
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers(server, config)?);
    if let Some(var) = &config.bearer_token_env_var {
        transport_config = transport_config.auth_header(variable(server, var)?);
    }
    Ok(StreamableHttpClientTransport::with_client(client, transport_config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_variable_and_a_bad_header_say_their_kind() {
        let mut config = ServerConfig::http("http://127.0.0.1:9/mcp");
        config.bearer_token_env_var = Some("KEEL_TEST_NEVER_SET_7F3A".into());
        let Err(error) = transport("s", &config) else { panic!("an unset token variable is an error") };
        assert_eq!(error.kind, McpErrorKind::Variable);
        assert_eq!(error.message, "KEEL_TEST_NEVER_SET_7F3A is not set");
        assert!(error.cause().is_some_and(|cause| cause.is::<std::env::VarError>()));
        let mut config = ServerConfig::http("http://127.0.0.1:9/mcp");
        config.http_headers = [("bad header".to_owned(), "v".to_owned())].into();
        let Err(error) = transport("s", &config) else { panic!("a bad header name is an error") };
        assert_eq!(error.kind, McpErrorKind::Config);
        assert_eq!(error.message, "`bad header` is not a valid header name");
    }
}
