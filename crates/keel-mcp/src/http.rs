//! The streamable-HTTP transport of a server: reqwest with rustls (ring), the bearer token
//! and headers from the configuration.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::config::ServerConfig;

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

fn variable(name: &str) -> Result<String, String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| format!("{name} is not set"))
}

/// The headers of every request: `http_headers`, then `env_http_headers` (values from
/// the environment).
fn headers(config: &ServerConfig) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    let mut headers = HashMap::new();
    let from_env = config.env_http_headers.iter().map(|(name, var)| Ok::<_, String>((name, variable(var)?)));
    let fixed = config.http_headers.iter().map(|(name, value)| Ok((name, value.clone())));
    for pair in fixed.chain(from_env) {
        let (name, value) = pair?;
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        let value =
            HeaderValue::try_from(value).map_err(|_| format!("the value of header `{name}` is not valid"))?;
        headers.insert(header, value);
    }
    Ok(headers)
}

/// The transport for server `config.url`.
pub(crate) fn transport(
    _server: &str,
    config: &ServerConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
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
    let client = builder.build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let mut transport_config =
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers(config)?);
    if let Some(var) = &config.bearer_token_env_var {
        transport_config = transport_config.auth_header(variable(var)?);
    }
    Ok(StreamableHttpClientTransport::with_client(client, transport_config))
}
