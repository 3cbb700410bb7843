#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! A server on a free port with a scripted model, and a small HTTP + SSE client.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use keel_agent::{Agent, SessionContext, Tool, ToolContext, ToolError, ToolOutput};
use keel_server::{AgentFactory, PrepareError, Prepared, Server, ServerConfig, SessionSpec};
use keel_session::{JsonlStore, SessionStore};
use keel_testkit::ScriptedModel;
use keel_tools::{AskFn, PermissionMode, PermissionPolicy};
use serde_json::Value;

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// Arguments of `bump`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct BumpArgs {}

/// A tool that changes something (so `ask` mode asks), and takes a moment.
pub struct Bump;

impl Tool for Bump {
    type Args = BumpArgs;
    fn name(&self) -> &str {
        "bump"
    }
    fn description(&self) -> &str {
        "Bumps the counter."
    }
    async fn call(&self, _args: BumpArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(ToolOutput::text("bumped"))
    }
}

/// Builds every session's agent on the one scripted model; the model name `unreachable`
/// is one the server cannot reach now.
pub struct Factory {
    pub model: ScriptedModel,
}

impl AgentFactory for Factory {
    fn prepare<'a>(
        &'a self,
        spec: &'a SessionSpec,
        _session_id: &'a str,
        _new_session: bool,
        ask: AskFn,
    ) -> BoxFuture<'a, Result<Prepared, PrepareError>> {
        Box::pin(async move {
            if spec.model.as_deref() == Some("unreachable") {
                return Err(PrepareError::unavailable("the model server does not answer"));
            }
            let mode = match spec.permission.as_deref() {
                None => PermissionMode::Auto,
                Some(text) => PermissionMode::parse(text)
                    .ok_or_else(|| PrepareError::invalid(format!("unknown permission mode `{text}`")))?,
            };
            let policy = PermissionPolicy::new(mode).with_ask(ask);
            let agent = Agent::builder(self.model.clone())
                .tool(Bump)
                .tool(keel_tools::plan::UpdatePlan)
                .hooks(policy)
                .build();
            Ok(Prepared { agent, ctx: SessionContext::new(&spec.folder) })
        })
    }
}

pub struct TestServer {
    pub url: String,
    pub root: tempfile::TempDir,
    pub store: Arc<dyn SessionStore>,
    pub model: ScriptedModel,
    pub client: reqwest::Client,
    /// The server's shared state (its sessions and their hubs).
    pub state: Arc<keel_server::AppState>,
    /// Notified: the server stops, as on SIGTERM.
    pub stop: Arc<tokio::sync::Notify>,
    serving: std::sync::Mutex<Option<tokio::task::JoinHandle<std::io::Result<()>>>>,
    _store_dir: Option<tempfile::TempDir>,
}

pub async fn start_with(
    model: ScriptedModel,
    store: Option<Arc<dyn SessionStore>>,
    max_turns: usize,
) -> TestServer {
    start_idle(model, store, max_turns, Duration::from_secs(60), None).await
}

/// A server that closes sessions idle for `idle_close`, allowing `extra_root` too.
pub async fn start_idle(
    model: ScriptedModel,
    store: Option<Arc<dyn SessionStore>>,
    max_turns: usize,
    idle_close: Duration,
    extra_root: Option<PathBuf>,
) -> TestServer {
    start_configured(model, store, extra_root, |config| {
        config.max_turns = max_turns;
        config.idle_close = idle_close;
    })
    .await
}

/// A server with the test defaults changed by `configure`.
pub async fn start_configured(
    model: ScriptedModel,
    store: Option<Arc<dyn SessionStore>>,
    extra_root: Option<PathBuf>,
    configure: impl FnOnce(&mut ServerConfig),
) -> TestServer {
    let root = tempfile::tempdir().unwrap();
    let (store, store_dir) = match store {
        Some(store) => (store, None),
        None => {
            let dir = tempfile::tempdir().unwrap();
            let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()).detached_sync(true));
            (store, Some(dir))
        }
    };
    let mut roots = vec![root.path().to_path_buf()];
    roots.extend(extra_root);
    let mut config = ServerConfig::new(TOKEN, roots);
    config.body_limit = 64 * 1024;
    config.heartbeat = Duration::from_millis(200);
    configure(&mut config);
    let factory = Arc::new(Factory { model: model.clone() });
    let server = Server::new(config, Arc::clone(&store), factory).unwrap();
    let state = Arc::clone(server.state());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    let serving = tokio::spawn(server.serve(listener, async move { stopped.notified().await }));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().tls_certs_only(Vec::new()).build().unwrap();
    TestServer {
        url,
        root,
        store,
        model,
        client,
        state,
        stop,
        serving: std::sync::Mutex::new(Some(serving)),
        _store_dir: store_dir,
    }
}

pub async fn start(model: ScriptedModel) -> TestServer {
    start_with(model, None, 16).await
}

impl TestServer {
    /// Stops the server as SIGTERM does and waits until it has stopped.
    pub async fn shut_down(&self) {
        self.stop.notify_one();
        let serving = self.serving.lock().unwrap().take();
        if let Some(serving) = serving {
            serving.await.unwrap().unwrap();
        }
    }

    pub fn folder(&self) -> PathBuf {
        self.root.path().to_path_buf()
    }

    /// A request with the token; returns (status, JSON body or Null).
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.url)).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Creates a session in the root folder.
    pub async fn session(&self, extra: Value) -> String {
        let mut body = serde_json::json!({"folder": self.folder()});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let (status, value) = self.post("/v1/sessions", body).await;
        assert_eq!(status, 201, "{value}");
        value["id"].as_str().unwrap().to_owned()
    }

    /// Waits until no turn runs in `id`.
    pub async fn wait_idle(&self, id: &str) {
        for _ in 0..500 {
            let (status, value) = self.get(&format!("/v1/sessions/{id}")).await;
            assert_eq!(status, 200, "{value}");
            if value["running"] == false {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the turn did not end");
    }

    /// Opens the event stream, resuming after `after`.
    pub async fn events(&self, id: &str, after: Option<u64>) -> Sse {
        let mut request = self.client.get(format!("{}/v1/sessions/{id}/events", self.url)).bearer_auth(TOKEN);
        if let Some(after) = after {
            request = request.header("last-event-id", after.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Sse { body: Box::pin(response.bytes_stream()), buffer: String::new(), comments: 0 }
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub data: Value,
}

impl SseEvent {
    pub fn kind(&self) -> &str {
        self.data["type"].as_str().unwrap_or_default()
    }
}

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

pub struct Sse {
    body: Body,
    buffer: String,
    pub comments: usize,
}

impl Sse {
    /// The next event (comments are counted, not returned); `None` at the end.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some(SseEvent { id, data: serde_json::from_str(&data).unwrap() });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("SSE stalled")?;
            self.buffer.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    /// Events until (and with) the first of type `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.kind() == kind;
            out.push(event);
            if done {
                return out;
            }
        }
        panic!("the stream ended before a `{kind}` event: {out:?}");
    }
}
