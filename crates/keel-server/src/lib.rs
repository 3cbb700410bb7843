//! `keel serve`: many sessions over HTTP, on any session store.
//!
//! REST + SSE under `/v1` (see `docs/architecture.md` and the README): create, list,
//! show, message (starts a turn), steer, abort, answer a permission question, fork,
//! delete, and `GET /v1/sessions/{id}/events` (server-sent events, resumable with
//! `Last-Event-ID`). Every request needs `Authorization: Bearer <token>`. Turns run in
//! tasks of their own: a client that leaves never stops one.
//!
//! The binary supplies the store and an [`AgentFactory`] (how a session's agent is built
//! from the configuration); [`router`] is the whole HTTP surface.

mod conn;
mod error;
mod factory;
mod follow;
mod hub;
mod live;
mod manager;
pub mod metrics;
pub mod ops;
mod routes;
mod sse;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use keel_session::SessionStore;

pub use error::ApiError;
pub use factory::{AgentFactory, PrepareError, PrepareErrorKind, Prepared, SessionSpec};
pub use hub::{Frame, Hub};
pub use live::Live;
pub use manager::{Limits, Manager, Signal};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The bearer token every request must carry.
    pub token: String,
    /// Workspaces must be inside one of these folders (canonicalized on start).
    pub roots: Vec<PathBuf>,
    /// Turns running at once over all sessions (default: 128 per CPU core); more wait in
    /// line.
    pub max_turns: usize,
    /// Turns that may wait in line (default 4096); beyond, 503 + Retry-After.
    pub max_queued: usize,
    /// Largest request body in bytes (default 1 MiB).
    pub body_limit: usize,
    /// A comment line on every event stream this often (default 10 s).
    pub heartbeat: Duration,
    /// A permission question unanswered this long denies the call (default 5 min).
    pub ask_timeout: Duration,
    /// A session with no turn, no question and no client for this long is closed, so
    /// another process or node can run it (default 60 s); it reopens on the next request.
    pub idle_close: Duration,
    /// A connection must send a request's head within this (default 30 s; also how long
    /// an idle keep-alive connection stays open).
    pub header_timeout: Duration,
    /// A request's body must arrive within this once its head has (default 30 s; 408).
    pub body_timeout: Duration,
    /// A write blocked this long on a client that does not read closes the connection
    /// (default 60 s): an event stream nobody reads does not stay forever.
    pub write_stall: Duration,
    /// Frames an event stream may fall behind the live session before it is cut off; it
    /// resumes with `Last-Event-ID` (default 4096).
    pub sse_buffer: usize,
    /// On shutdown, how long running turns may go on before they are aborted as "the
    /// server is shutting down" (default 30 s). No turn starts meanwhile.
    pub drain_timeout: Duration,
}

impl ServerConfig {
    /// Defaults with `token` and `roots`.
    pub fn new(token: impl Into<String>, roots: Vec<PathBuf>) -> Self {
        ServerConfig {
            token: token.into(),
            roots,
            max_turns: default_max_turns(),
            max_queued: 4096,
            body_limit: 1024 * 1024,
            heartbeat: Duration::from_secs(10),
            ask_timeout: Duration::from_secs(300),
            idle_close: Duration::from_secs(60),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            write_stall: Duration::from_secs(60),
            sse_buffer: hub::DEFAULT_BUFFER,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Shared by every handler.
pub struct AppState {
    /// The sessions.
    pub manager: Manager,
    token: String,
    heartbeat: Duration,
    /// Cancelled when the server stops: event streams end, so connections close.
    stopping: keel_llm::CancellationToken,
    /// Commit notices, for streams of sessions another node runs.
    notices: follow::Notices,
}

/// Commands for turns this node runs, sent by other nodes through the store.
type Signals = tokio::sync::mpsc::UnboundedReceiver<(String, String)>;

/// The server: its router and its sessions.
pub struct Server {
    state: Arc<AppState>,
    body_limit: usize,
    body_timeout: Duration,
    idle_close: Duration,
    drain_timeout: Duration,
    conn: conn::ConnLimits,
    signals: Option<Signals>,
}

impl Server {
    /// A server over `store`, building agents with `factory`. Roots that do not exist
    /// are an error.
    pub fn new(
        config: ServerConfig,
        store: Arc<dyn SessionStore>,
        factory: Arc<dyn AgentFactory>,
    ) -> Result<Server, ApiError> {
        let mut roots = Vec::new();
        for root in &config.roots {
            let canonical = root
                .canonicalize()
                .map_err(|e| ApiError::bad_request(format!("root {}: {e}", root.display())))?;
            roots.push(canonical);
        }
        if config.token.len() < 16 {
            return Err(ApiError::bad_request("the token must have at least 16 characters"));
        }
        let limits = Limits {
            roots,
            max_turns: config.max_turns,
            max_queued: config.max_queued,
            ask_timeout: config.ask_timeout,
            sse_buffer: config.sse_buffer,
        };
        let notices = follow::Notices::watch(store.as_ref());
        let (signal_tx, signal_rx) = tokio::sync::mpsc::unbounded_channel();
        let signals = store
            .watch_signals(Arc::new(move |id: &str, message: &str| {
                let _ = signal_tx.send((id.to_owned(), message.to_owned()));
            }))
            .then_some(signal_rx);
        let manager = Manager::new(store, factory, limits);
        let state = Arc::new(AppState {
            manager,
            token: config.token,
            heartbeat: config.heartbeat,
            stopping: keel_llm::CancellationToken::new(),
            notices,
        });
        let conn =
            conn::ConnLimits { header_timeout: config.header_timeout, write_stall: config.write_stall };
        Ok(Server {
            state,
            body_limit: config.body_limit,
            body_timeout: config.body_timeout,
            idle_close: config.idle_close,
            drain_timeout: config.drain_timeout,
            conn,
            signals,
        })
    }

    /// The shared state (for shutdown and tests).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The HTTP surface.
    pub fn router(&self) -> Router {
        /// A message may carry images: its body may be this large even when the server's
        /// limit for other requests is smaller.
        const MESSAGE_BODY_LIMIT: usize = 8 * 1024 * 1024;
        let v1 = Router::new()
            .route("/sessions", post(routes::create).get(routes::list))
            .route("/sessions/{id}", get(routes::show).delete(routes::delete))
            .route(
                "/sessions/{id}/messages",
                post(routes::message).layer(DefaultBodyLimit::max(self.body_limit.max(MESSAGE_BODY_LIMIT))),
            )
            .route("/sessions/{id}/steer", post(routes::steer))
            .route("/sessions/{id}/abort", post(routes::abort))
            .route("/sessions/{id}/permission", post(routes::permission))
            .route("/sessions/{id}/fork", post(routes::fork))
            .route("/sessions/{id}/events", get(routes::events))
            .route_layer(axum::middleware::from_fn_with_state(Arc::clone(&self.state), auth));
        Router::new()
            .nest("/v1", v1)
            .route("/openapi.json", get(openapi))
            .route("/healthz", get(ops::healthz))
            .route("/readyz", get(ops::readyz))
            .route("/metrics", get(ops::metrics))
            .fallback(not_found)
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&self.state), ops::log_requests))
            .layer(DefaultBodyLimit::max(self.body_limit))
            .layer(axum::Extension(routes::BodyTimeout(self.body_timeout)))
            .with_state(Arc::clone(&self.state))
    }

    /// Serves on `listener` until `shutdown` resolves; then no turn starts, running ones
    /// may finish within the drain timeout and are then aborted, event streams end (their
    /// clients resume elsewhere or after a restart, by `Last-Event-ID`), and the server
    /// returns.
    pub async fn serve(
        mut self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let router = self.router();
        let state = Arc::clone(&self.state);
        let idle = self.idle_close;
        let sweeper = tokio::spawn(async move {
            let mut tick =
                tokio::time::interval((idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(30)));
            loop {
                tick.tick().await;
                if state.manager.close_idle(idle).await > 0 {
                    // Off the executor: trimming a large heap takes a few milliseconds.
                    let _ = tokio::task::spawn_blocking(ops::return_freed_memory).await;
                }
            }
        });
        let forwarder = self.signals.take().map(|mut signals| {
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                while let Some((id, message)) = signals.recv().await {
                    state.manager.on_signal(&id, &message);
                }
            })
        });
        let state = Arc::clone(&self.state);
        let drain = self.drain_timeout;
        let shutdown = async move {
            shutdown.await;
            tracing::info!(grace_s = drain.as_secs_f64(), "stopping: running turns may finish");
            // Clients still connected see the turns end, then their streams end (they
            // never end by themselves; graceful shutdown waits for them).
            state.manager.drain(drain).await;
            state.stopping.cancel();
        };
        let result = conn::serve(listener, router, self.conn, shutdown).await;
        sweeper.abort();
        if let Some(forwarder) = forwarder {
            forwarder.abort();
        }
        self.state.manager.shutdown().await;
        result
    }
}

/// Turns at once by default: a turn mostly waits for its model, and keel's own work per
/// step is well under a millisecond, so many per core.
pub fn default_max_turns() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from) * 128
}

/// Equal in time whatever the input, so the token cannot be guessed byte by byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(app): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(token) if same(token.trim().as_bytes(), app.token.as_bytes()) => next.run(request).await,
        _ => ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (Authorization: Bearer <token>, printed by keel serve)",
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(axum::http::StatusCode::NOT_FOUND, "no_route", "no such endpoint; see /openapi.json")
}

async fn openapi() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], include_str!("openapi.json")).into_response()
}
