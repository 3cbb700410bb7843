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

mod error;
mod factory;
mod follow;
mod hub;
mod live;
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
pub use factory::{AgentFactory, Prepared, SessionSpec};
pub use hub::{Frame, Hub};
pub use live::{Limits, Live, Manager};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The bearer token every request must carry.
    pub token: String,
    /// Workspaces must be inside one of these folders (canonicalized on start).
    pub roots: Vec<PathBuf>,
    /// Turns running at once over all sessions (default 16); beyond, 503 + Retry-After.
    pub max_turns: usize,
    /// Largest request body in bytes (default 1 MiB).
    pub body_limit: usize,
    /// A comment line on every event stream this often (default 10 s).
    pub heartbeat: Duration,
    /// A permission question unanswered this long denies the call (default 5 min).
    pub ask_timeout: Duration,
    /// A session with no turn, no question and no client for this long is closed, so
    /// another process or node can run it (default 60 s); it reopens on the next request.
    pub idle_close: Duration,
}

impl ServerConfig {
    /// Defaults with `token` and `roots`.
    pub fn new(token: impl Into<String>, roots: Vec<PathBuf>) -> Self {
        ServerConfig {
            token: token.into(),
            roots,
            max_turns: 16,
            body_limit: 1024 * 1024,
            heartbeat: Duration::from_secs(10),
            ask_timeout: Duration::from_secs(300),
            idle_close: Duration::from_secs(60),
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

/// The server: its router and its sessions.
pub struct Server {
    state: Arc<AppState>,
    body_limit: usize,
    idle_close: Duration,
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
        let limits = Limits { roots, max_turns: config.max_turns, ask_timeout: config.ask_timeout };
        let notices = follow::Notices::watch(store.as_ref());
        let manager = Manager::new(store, factory, limits);
        let state = Arc::new(AppState {
            manager,
            token: config.token,
            heartbeat: config.heartbeat,
            stopping: keel_llm::CancellationToken::new(),
            notices,
        });
        Ok(Server { state, body_limit: config.body_limit, idle_close: config.idle_close })
    }

    /// The shared state (for shutdown and tests).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The HTTP surface.
    pub fn router(&self) -> Router {
        let v1 = Router::new()
            .route("/sessions", post(routes::create).get(routes::list))
            .route("/sessions/{id}", get(routes::show).delete(routes::delete))
            .route("/sessions/{id}/messages", post(routes::message))
            .route("/sessions/{id}/steer", post(routes::steer))
            .route("/sessions/{id}/abort", post(routes::abort))
            .route("/sessions/{id}/permission", post(routes::permission))
            .route("/sessions/{id}/fork", post(routes::fork))
            .route("/sessions/{id}/events", get(routes::events))
            .route_layer(axum::middleware::from_fn_with_state(Arc::clone(&self.state), auth));
        Router::new()
            .nest("/v1", v1)
            .route("/openapi.json", get(openapi))
            .fallback(not_found)
            .layer(DefaultBodyLimit::max(self.body_limit))
            .with_state(Arc::clone(&self.state))
    }

    /// Serves on `listener` until `shutdown` resolves, then aborts running turns and
    /// closes every session.
    pub async fn serve(
        self,
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
                state.manager.close_idle(idle).await;
            }
        });
        let stopping = self.state.stopping.clone();
        let shutdown = async move {
            shutdown.await;
            // Event streams never end by themselves; graceful shutdown waits for them.
            stopping.cancel();
        };
        // Events are small writes that must leave at once: without TCP_NODELAY, Nagle's
        // algorithm and the client's delayed ACK held each burst ~40 ms.
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY");
            }
        });
        let result = axum::serve(listener, router).with_graceful_shutdown(shutdown).await;
        sweeper.abort();
        self.state.manager.shutdown().await;
        result
    }
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
