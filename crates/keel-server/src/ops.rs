//! What operators need: `/healthz` (the process answers), `/readyz` (it takes turns and
//! its store answers), `/metrics` (Prometheus text), and a log line per request.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::metrics::Metrics;

/// `GET /healthz`: the process answers.
pub async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// `GET /readyz`: 200 when the server takes turns and its store answers, else 503 (a load
/// balancer sends requests elsewhere).
pub async fn readyz(State(app): State<Arc<AppState>>) -> Response {
    if app.manager.draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response();
    }
    // A cheap question the store must answer: a session that does not exist.
    let store = Arc::clone(app.manager.store());
    let probe = tokio::task::spawn_blocking(move || store.read("keel-readyz-probe").map(drop));
    match tokio::time::timeout(std::time::Duration::from_secs(5), probe).await {
        Ok(Ok(Ok(()))) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Ok(Err(e))) if e.kind == keel_session::SessionErrorKind::NotFound => {
            (StatusCode::OK, "ready\n").into_response()
        }
        Ok(Ok(Err(e))) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("store: {}\n", e.message)).into_response()
        }
        Ok(Err(_)) | Err(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "store: no answer within 5 s\n").into_response()
        }
    }
}

/// `GET /metrics`: Prometheus text exposition.
pub async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let m = app.manager.metrics();
    let (ready, running) = app.manager.counts();
    let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let mut text = String::with_capacity(1024);
    let mut put = |name: &str, kind: &str, help: &str, value: u64| {
        text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"));
    };
    put("keel_sessions_ready", "gauge", "Sessions with an agent ready on this node.", ready as u64);
    put("keel_turns_running", "gauge", "Turns running or waiting in line on this node.", running as u64);
    put("keel_turns_waiting", "gauge", "Turns waiting in line for a slot.", app.manager.waiting() as u64);
    put("keel_turns_started_total", "counter", "Turns started.", get(&m.turns_started));
    put("keel_turns_queued_total", "counter", "Turns that waited in line.", get(&m.turns_queued));
    put(
        "keel_turns_failed_total",
        "counter",
        "Turns stopped because the store failed.",
        get(&m.turns_failed),
    );
    put("keel_turn_milliseconds_total", "counter", "Time spent in turns.", get(&m.turn_ms));
    put("keel_steps_total", "counter", "Steps ended.", get(&m.steps));
    put(
        "keel_step_microseconds_total",
        "counter",
        "Time spent in steps (request, reply, tools).",
        get(&m.step_us),
    );
    put("keel_model_errors_total", "counter", "Turns ended by a model error.", get(&m.model_errors));
    put("keel_model_retries_total", "counter", "Model requests retried.", get(&m.model_retries));
    let store = app.manager.store().stats();
    put("keel_store_commits_total", "counter", "Batches the store committed (PostgreSQL).", store.commits);
    put(
        "keel_store_commit_microseconds_total",
        "counter",
        "Time from handing a batch to the store to its commit.",
        store.commit_us,
    );
    put(
        "keel_store_commit_retries_total",
        "counter",
        "Commits tried again: the store was unreachable.",
        store.retries,
    );
    put("keel_store_commit_errors_total", "counter", "Commits that failed for good.", store.errors);
    put("keel_http_requests_total", "counter", "HTTP requests answered.", get(&m.requests));
    put("keel_http_server_errors_total", "counter", "HTTP answers with a 5xx status.", get(&m.server_errors));
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Logs a line per request (method, route, status, time) and counts it. The path's
/// session id is kept; query strings and bodies are not logged.
pub async fn log_requests(State(app): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let metrics = app.manager.metrics();
    Metrics::bump(&metrics.requests);
    if response.status().is_server_error() {
        Metrics::bump(&metrics.server_errors);
    }
    tracing::info!(%method, path = %path, status, ms = started.elapsed().as_millis() as u64, "request");
    response
}

/// Raises the soft limit on open files to the hard one: a running turn holds a few
/// descriptors (its model connection, its log file, its tools' pipes, a client's
/// stream), and the usual soft limit of 1024 runs out near 250 sessions. Returns the
/// limit in force.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return limit.current;
    }
    match setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum }) {
        Ok(()) => getrlimit(Resource::Nofile).current,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-files limit");
            limit.current
        }
    }
}

/// Gives memory freed by forgotten sessions back to the system. glibc keeps freed memory in
/// its per-thread arenas, so a server's resident size would stay at its peak after a burst
/// of sessions (measured: 287 MB before, 247 MB with every session forgotten, on JSONL).
/// Elsewhere a no-op.
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim takes no pointers, only releases memory glibc holds free, and
        // is MT-Safe (glibc manual); it cannot touch memory in use.
        unsafe {
            malloc_trim(0);
        }
    }
}
