//! The HTTP machinery every wire API shares. A provider is an encoder (history →
//! request body) and a decoder (events → [`ModelEvent`](crate::ModelEvent)s); the
//! transport owns the rest of a request's life:
//!
//! - the reqwest client (rustls with ring; no CA loading for plain `http://`), the
//!   endpoint and headers, parsed once;
//! - retries of 429, 5xx (not 501), connection errors and idle timeouts while nothing
//!   has streamed, honouring `Retry-After` (capped), else jittered exponential backoff;
//! - the idle timer (output is progress; keep-alives, empty chunks and status events are not), the
//!   response deadline and the finish grace ([`clock`]);
//! - size bounds on output, events and bodies ([`DecodeLimits`]);
//! - what a body is (SSE, one JSON document, a web page) and errors that say what to
//!   do: the key variable on 401/403, context overflow, "wrong base URL?" for a 404, a
//!   501 or an HTML page ([`errors`], [`body`]);
//! - draining a finished body so the connection returns to the pool.

mod backoff;
mod body;
mod clock;
pub(crate) mod errors;
pub(crate) mod escapes;
mod events;
pub(crate) mod limits;
pub(crate) mod models;
mod run;

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::client::ModelStream;
use crate::config::{ProviderConfig, RequestLife};
use crate::error::{ModelError, ModelErrorKind};
use crate::message::ModelInfo;

pub(crate) use events::{Decode, EventStream, Events};
pub use limits::DecodeLimits;
pub(crate) use limits::{CALL_COST, OutputMeter, human_bytes};

/// How an API names itself and its reply in messages about a body that is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApiNames {
    /// `an OpenAI-compatible API`, `an Anthropic Messages API`, …
    pub api: &'static str,
    /// What a whole JSON reply should be: `a chat completion (no choices)`, …
    pub document: &'static str,
}

/// Where the key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key as the value of this header (`x-api-key`).
    Header(&'static str),
}

/// The rules of one request's life, from the provider's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The provider and model, stamped on every message as its origin.
    pub origin: ModelInfo,
    /// The variable that holds the key, named in authentication errors.
    pub api_key_env: Option<String>,
    /// Streamed replies (default) or whole ones.
    pub stream: bool,
    /// Retries and time bounds.
    pub life: RequestLife,
    /// Tool calls written as text become real calls.
    pub text_tool_calls: bool,
    /// Calls written as text are held back from the streamed text (on with
    /// `text_tool_calls`, and for a caller that reads such calls itself).
    pub hide_call_text: bool,
    /// Text before a tool call is kept as reasoning.
    pub thoughts_as_reasoning: bool,
    /// Size bounds.
    pub limits: DecodeLimits,
    /// The API's names.
    pub names: ApiNames,
}

/// One endpoint of one provider: an HTTP client, the URL, the headers and the
/// settings. Cheap to clone; clones share the connection pool.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    settings: Settings,
}

fn config_error(message: String) -> ModelError {
    ModelError::new(ModelErrorKind::Config, message)
}

/// `config`'s headers, the API's own and the key, parsed once.
pub(crate) fn headers(
    config: &ProviderConfig,
    auth: Auth,
    api_headers: &[(&'static str, String)],
) -> Result<HeaderMap, ModelError> {
    let mut map = HeaderMap::new();
    let mut insert = |name: &str, value: &str| -> Result<(), ModelError> {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| config_error(format!("the header name `{name}` is not valid: {e}")))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|e| config_error(format!("the value of header `{name}` is not valid: {e}")))?;
        value.set_sensitive(
            name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("x-api-key"),
        );
        map.insert(header, value);
        Ok(())
    };
    insert("content-type", "application/json")?;
    if config.stream {
        insert("accept", "text/event-stream")?;
    }
    if let Some(key) = config.api_key.as_deref().filter(|k| !k.is_empty()) {
        match auth {
            Auth::Bearer => insert("authorization", &format!("Bearer {key}"))?,
            Auth::Header(name) => insert(name, key)?,
        }
    }
    for (name, value) in api_headers {
        insert(name, value)?;
    }
    for (name, value) in &config.headers {
        insert(name, value)?;
    }
    Ok(map)
}

/// An HTTP client for the server at `url`: rustls on ring (not aws-lc: no cmake, quick
/// to build), keel's user agent, and, for plain HTTP (a local server), none of the
/// system's CA certificates, whose loading costs milliseconds and memory at every start,
/// and a new connection for every request. llama.cpp's llama-server closes the
/// connection after every streamed reply while its headers say keep-alive; a request
/// sent on the reused connection got no answer and was retried (28 of a suite run's
/// ~500 requests). Without TLS a new connection costs ~0.2 ms of keel's time per request
/// on loopback (keel-bench task) and one round trip on a network.
pub(crate) fn http_client(url: &str, connect_timeout: Duration) -> reqwest::ClientBuilder {
    // Installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(connect_timeout);
    if url.starts_with("http://") {
        builder.tls_certs_only(Vec::new()).pool_max_idle_per_host(0)
    } else {
        builder
    }
}

impl Transport {
    /// The transport for `config`'s endpoint, its key sent as `auth`, with the API's
    /// own headers (after the key, before the config's, which win).
    pub fn new(
        config: &ProviderConfig,
        auth: Auth,
        api_headers: &[(&'static str, String)],
        names: ApiNames,
    ) -> Result<Self, ModelError> {
        Self::at(config, &config.endpoint(), auth, api_headers, names)
    }

    /// [`Transport::new`] for an endpoint of the caller's choosing (an API whose path is
    /// not under `config.base_url`, as llama.cpp's `/completion` beside its `/v1`).
    pub fn at(
        config: &ProviderConfig,
        endpoint: &str,
        auth: Auth,
        api_headers: &[(&'static str, String)],
        names: ApiNames,
    ) -> Result<Self, ModelError> {
        config.validate()?;
        let http = http_client(endpoint, config.life.idle_timeout.min(Duration::from_secs(30)))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| config_error(format!("cannot build the HTTP client: {e}")))?;
        let endpoint = reqwest::Url::parse(endpoint).map_err(|e| {
            config_error(format!("the base URL `{}` is not a valid URL: {e}", config.base_url))
        })?;
        let settings = Settings {
            origin: ModelInfo { provider: config.provider.clone(), model: config.model.clone() },
            api_key_env: config.api_key_env.clone(),
            stream: config.stream,
            life: config.life,
            text_tool_calls: config.text_tool_calls,
            hide_call_text: config.text_tool_calls,
            thoughts_as_reasoning: config.thoughts_as_reasoning,
            limits: config.decode_limits(),
            names,
        };
        Ok(Transport { http, endpoint, headers: headers(config, auth, api_headers)?, settings })
    }

    /// This transport, holding calls written as text back from the streamed text even
    /// though it does not read them itself (its caller does).
    pub(crate) fn hiding_call_text(mut self) -> Self {
        self.settings.hide_call_text = true;
        self
    }

    /// The settings in use.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        self.endpoint.as_str()
    }

    /// A `GET` of `url` on this transport's client, with its key (not its content
    /// headers).
    pub fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let mut headers = self.headers.clone();
        headers.remove(reqwest::header::CONTENT_TYPE);
        headers.remove(reqwest::header::ACCEPT);
        self.http.get(url).headers(headers)
    }

    fn request(&self, body: Bytes) -> reqwest::RequestBuilder {
        self.http.post(self.endpoint.clone()).headers(self.headers.clone()).body(body)
    }

    /// Sends `body` and streams the reply decoded by a fresh `decoder()` per attempt.
    /// `tools` are the names on offer, for tool calls written as text.
    pub fn stream<'a>(
        &'a self,
        body: Bytes,
        tools: Vec<&'a str>,
        decoder: Box<dyn Fn() -> Box<dyn Decode> + Send + 'a>,
        cancel: CancellationToken,
    ) -> ModelStream<'a> {
        let run = run::Run::new(self, body, tools, decoder, cancel);
        Box::pin(futures::stream::unfold(run, run::Run::next))
    }
}

/// The last tool set a client encoded and its encoding: the same tools go out with
/// every request, and comparing them is far cheaper than escaping every description
/// again.
#[derive(Debug, Default)]
pub(crate) struct ToolsCache {
    last: std::sync::Mutex<
        Option<(Vec<crate::client::ToolDefinition>, std::sync::Arc<serde_json::value::RawValue>)>,
    >,
}

impl ToolsCache {
    /// The encoding of `tools`, by `encode` when they changed.
    pub fn get(
        &self,
        tools: &[crate::client::ToolDefinition],
        encode: impl FnOnce(
            &[crate::client::ToolDefinition],
        ) -> serde_json::Result<Box<serde_json::value::RawValue>>,
    ) -> serde_json::Result<std::sync::Arc<serde_json::value::RawValue>> {
        let mut last = match self.last.lock() {
            Ok(last) => last,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((defs, json)) = last.as_ref()
            && defs.as_slice() == tools
        {
            return Ok(std::sync::Arc::clone(json));
        }
        let json: std::sync::Arc<serde_json::value::RawValue> = std::sync::Arc::from(encode(tools)?);
        *last = Some((tools.to_vec(), std::sync::Arc::clone(&json)));
        Ok(json)
    }
}

/// A response's `Content-Type`, empty when it has none (or none in ASCII).
pub(crate) fn content_type(headers: &HeaderMap) -> String {
    headers.get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A stream that fails at once (a request that could not be encoded).
pub(crate) fn failed<'a>(error: ModelError) -> ModelStream<'a> {
    Box::pin(futures::stream::once(async move { Err(error) }))
}
