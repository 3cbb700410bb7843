//! The sessions a server has ready, and the rules for running their turns: a turn takes
//! the session's lock or lease when it starts and gives it back when it ends; commands for
//! a turn another node runs go to that node through the store; a stopping server lets
//! running turns finish up to a deadline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use keel_llm::CancellationToken;
use keel_session::{Projection, Session, SessionError, SessionErrorKind, SessionStore};
use keel_tools::AskAnswer;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::factory::{AgentFactory, SessionSpec};
use crate::hub::Hub;
use crate::live::{Live, ask_fn, locked, run_turn};
use crate::metrics::Metrics;

/// What the manager needs to know.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Workspaces must be inside one of these (canonical).
    pub roots: Vec<PathBuf>,
    /// Turns running at once, over all sessions; more wait in line.
    pub max_turns: usize,
    /// Turns that may wait in line; beyond, a message gets 503 with `Retry-After`.
    pub max_queued: usize,
    /// How long a permission question waits for an answer before the call is denied.
    pub ask_timeout: Duration,
    /// Frames an event stream may fall behind before it is cut off (it resumes by id).
    pub sse_buffer: usize,
}

/// A command for the turn of a session, sent through the store to whichever node runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Abort the running turn.
    Abort,
    /// Steering text for the running turn.
    Steer(String),
    /// An answer to permission question `id` (any pending one when `None`).
    Answer {
        /// The question.
        id: Option<u64>,
        /// `allow`, `always`, `deny` or `stop`.
        answer: String,
        /// With `deny`: what the user said to do instead, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

/// The sessions this server has ready.
pub struct Manager {
    store: Arc<dyn SessionStore>,
    factory: Arc<dyn AgentFactory>,
    limits: Limits,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Serializes preparing, so two requests for one session build one agent.
    opening: tokio::sync::Mutex<()>,
    turns: Arc<Semaphore>,
    /// Turns waiting in line for one of `turns`.
    waiting: Arc<AtomicUsize>,
    /// Set when the server stops: no new turn starts.
    draining: AtomicBool,
    metrics: Arc<Metrics>,
}

/// Runs blocking store work off the executor.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(ApiError::from),
        Err(e) => Err(ApiError::internal(format!("store task failed: {e}"))),
    }
}

/// Checks an id from a URL: what keel makes, nothing that could be a path.
pub fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(ApiError::bad_request("not a session id")) }
}

/// The 409 of a session whose turn another node or process runs.
fn held_elsewhere() -> ApiError {
    ApiError::conflict(
        "session_locked",
        "another node or process is running a turn of this session; follow its events, steer or abort it, or send the message when it ends",
    )
}

impl Manager {
    /// A manager over `store`, building agents with `factory`.
    pub fn new(store: Arc<dyn SessionStore>, factory: Arc<dyn AgentFactory>, limits: Limits) -> Self {
        let turns = Arc::new(Semaphore::new(limits.max_turns.max(1)));
        Manager {
            store,
            factory,
            limits,
            live: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            turns,
            waiting: Arc::default(),
            draining: AtomicBool::new(false),
            metrics: Arc::default(),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The server's counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether the server is stopping (no turn starts).
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Turns waiting in line.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// The ready session `id`, if this server has it.
    pub fn get(&self, id: &str) -> Option<Arc<Live>> {
        locked(&self.live, |live| live.get(id).cloned())
    }

    /// Whether a session working in `cwd` is this server's business: its folder is under
    /// one of the roots.
    pub fn under_roots(&self, cwd: &str) -> bool {
        self.limits.roots.iter().any(|root| Path::new(cwd).starts_with(root))
    }

    /// Refuses (as not found: its existence is not this client's to know) a session whose
    /// folder is outside the roots, such as a CLI session in a shared home. Returns its
    /// log when it had to read it.
    pub async fn check_in_roots(&self, id: &str) -> Result<Option<Projection>, ApiError> {
        check_id(id)?;
        if self.get(id).is_some() {
            return Ok(None);
        }
        let projection = self.read(id).await?;
        let cwd = projection.header().map(|header| header.cwd.clone());
        if cwd.is_some_and(|cwd| self.under_roots(&cwd)) {
            Ok(Some(projection))
        } else {
            Err(ApiError::not_found(id))
        }
    }

    /// Session `id`'s log, read without holding it.
    pub async fn read(&self, id: &str) -> Result<Projection, ApiError> {
        let store = Arc::clone(&self.store);
        let wanted = id.to_owned();
        let events = blocking(move || store.read(&wanted)).await?;
        let mut projection = Projection::new();
        for event in events {
            projection.apply(event).map_err(ApiError::from)?;
        }
        Ok(projection)
    }

    /// The canonical workspace for `folder`, refused outside the roots.
    pub fn workspace(&self, folder: &Path) -> Result<PathBuf, ApiError> {
        let forbidden = |m: String| ApiError::new(StatusCode::FORBIDDEN, "forbidden_folder", m);
        let canonical = folder
            .canonicalize()
            .map_err(|e| ApiError::bad_request(format!("folder {}: {e}", folder.display())))?;
        if !canonical.is_dir() {
            return Err(ApiError::bad_request(format!("{} is not a folder", folder.display())));
        }
        if !self.limits.roots.iter().any(|root| canonical.starts_with(root)) {
            return Err(forbidden(format!(
                "{} is not under the server's allowed roots (keel serve --root)",
                canonical.display()
            )));
        }
        Ok(canonical)
    }

    /// Builds session `id`'s agent and keeps it ready.
    async fn prepare(&self, id: String, spec: SessionSpec, new_session: bool) -> Result<Arc<Live>, ApiError> {
        let hub = Arc::new(Hub::with_buffer(self.limits.sse_buffer).counting(Arc::clone(&self.metrics)));
        let question = Arc::new(Mutex::new(None));
        let ask = ask_fn(Arc::clone(&hub), Arc::clone(&question), self.limits.ask_timeout);
        let prepared = self.factory.prepare(&spec, &id, new_session, ask).await?;
        let live = Arc::new(Live::new(id.clone(), spec, prepared, hub, question));
        locked(&self.live, |map| map.insert(id, Arc::clone(&live)));
        Ok(live)
    }

    /// Creates a session as `spec` says and keeps it ready.
    pub async fn create(&self, mut spec: SessionSpec) -> Result<Arc<Live>, ApiError> {
        self.refuse_when_draining()?;
        let workspace = self.workspace(&spec.folder)?;
        spec.folder = workspace.clone();
        let store = Arc::clone(&self.store);
        let cwd = workspace.display().to_string();
        // Held only while a turn runs: the new session is let go at once.
        let id = blocking(move || {
            let session = store.create(&cwd)?;
            let id = session.id().to_owned();
            session.close()?;
            Ok(id)
        })
        .await?;
        match self.prepare(id.clone(), spec, true).await {
            Ok(live) => Ok(live),
            Err(e) => {
                // A session nobody can run is not kept.
                let store = Arc::clone(&self.store);
                let _ = blocking(move || store.delete(&id)).await;
                Err(e)
            }
        }
    }

    /// The ready session `id`, prepared from its log if needed.
    pub async fn live(&self, id: &str) -> Result<Arc<Live>, ApiError> {
        if let Some(live) = self.get(id) {
            live.touch();
            return Ok(live);
        }
        let projection = self.check_in_roots(id).await?;
        let _opening = self.opening.lock().await;
        if let Some(live) = self.get(id) {
            live.touch();
            return Ok(live);
        }
        let projection = match projection {
            Some(projection) => projection,
            None => self.read(id).await?,
        };
        let cwd = projection.header().map(|h| h.cwd.clone()).unwrap_or_default();
        let folder = self.workspace(Path::new(&cwd))?;
        let new_session = projection.messages().is_empty();
        self.prepare(id.to_owned(), SessionSpec { folder, ..SessionSpec::default() }, new_session).await
    }

    fn refuse_when_draining(&self) -> Result<(), ApiError> {
        if self.draining() {
            let mut e = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
                "the server is shutting down; retry shortly (another node, or this one restarted)",
            );
            e.retry_after = Some(2);
            return Err(e);
        }
        Ok(())
    }

    /// Starts a turn for `text` (and its images) in a task of its own, holding the session for it; when the
    /// server runs as many turns as it may, the turn waits in line (first come, first
    /// served). Returns its place in line (0: it runs now). 409 while a turn runs (here or
    /// on another node), 503 when the line is full or the server stops.
    pub async fn start_turn(&self, live: &Arc<Live>, text: keel_agent::Prompt) -> Result<usize, ApiError> {
        self.refuse_when_draining()?;
        let cancel = CancellationToken::new();
        if !live.begin_turn(cancel.clone()) {
            return Err(ApiError::conflict(
                "turn_running",
                "a turn is running in this session; steer or abort it",
            ));
        }
        let session = match self.hold(live).await {
            Ok(session) => session,
            Err(e) => {
                live.end_turn();
                return Err(e);
            }
        };
        let (permit, place) = match Arc::clone(&self.turns).try_acquire_owned() {
            Ok(permit) => (Some(permit), 0),
            Err(_) => {
                let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
                if ahead >= self.limits.max_queued {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    live.end_turn();
                    let _ = blocking(move || session.close()).await;
                    let mut e = ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "busy",
                        format!("{ahead} turns wait in line already; retry shortly"),
                    );
                    e.retry_after = Some(1);
                    return Err(e);
                }
                (None, ahead + 1)
            }
        };
        Metrics::bump(&self.metrics.turns_started);
        if place > 0 {
            Metrics::bump(&self.metrics.turns_queued);
            live.hub.publish_value(&serde_json::json!({"type": "turn/queued", "data": {"place": place}}));
        }
        let live = Arc::clone(live);
        let turns = Arc::clone(&self.turns);
        let waiting = Arc::clone(&self.waiting);
        let metrics = Arc::clone(&self.metrics);
        tokio::spawn(async move {
            let permit = match permit {
                Some(permit) => Some(permit),
                None => {
                    // An abort while waiting ends the turn at once (it is logged as aborted).
                    let permit = tokio::select! {
                        permit = turns.acquire_owned() => permit.ok(),
                        () = cancel.cancelled() => None,
                    };
                    waiting.fetch_sub(1, Ordering::AcqRel);
                    permit
                }
            };
            let started = Instant::now();
            let (session, written) = run_turn(&live, session, text, &cancel).await;
            let ms = started.elapsed().as_millis() as u64;
            metrics.turn_ms.fetch_add(ms, Ordering::Relaxed);
            if !written {
                Metrics::bump(&metrics.turns_failed);
            }
            tracing::info!(session = %live.id, ms, written, "turn ended");
            // Let go, so another node or process may run the next turn.
            if let Err(e) = blocking(move || session.close()).await {
                tracing::warn!(session = %live.id, error = %e.message, "releasing a session after its turn failed");
            }
            live.end_turn();
            drop(permit);
        });
        Ok(place)
    }

    /// Opens session `live` from the store for a turn: its lock or lease taken, its
    /// commits reported to its hub.
    async fn hold(&self, live: &Live) -> Result<Session, ApiError> {
        let store = Arc::clone(&self.store);
        let wanted = live.id.clone();
        let opened = blocking(move || {
            let session = store.open(&wanted)?;
            if session.id() != wanted {
                let _ = session.close();
                return Err(SessionError::new(SessionErrorKind::NotFound, format!("no session `{wanted}`")));
            }
            Ok(session)
        })
        .await;
        let mut session = match opened {
            Ok(session) => session,
            Err(e) if e.code == "session_locked" => return Err(held_elsewhere()),
            Err(e) => return Err(e),
        };
        let hub = Arc::clone(&live.hub);
        if session.watch_durable(Arc::new(move |seq| hub.durable_through(seq))) {
            live.hub.defer_until_durable();
        }
        Ok(session)
    }

    /// Applies `signal` to session `id`'s turn: here when it runs here, else through the
    /// store to the node that runs it (its log ends inside a turn). `no_turn` when no turn
    /// runs anywhere.
    pub async fn signal(&self, id: &str, signal: Signal) -> Result<(), ApiError> {
        if let Some(live) = self.get(id)
            && live.running()
        {
            return apply(&live, signal);
        }
        let projection = match self.check_in_roots(id).await? {
            Some(projection) => projection,
            None => self.read(id).await?,
        };
        let no_turn = || ApiError::conflict("no_turn", "no turn is running in this session");
        if projection.open_turn().is_none() {
            return Err(no_turn());
        }
        let message = serde_json::to_string(&signal).map_err(|e| ApiError::internal(e.to_string()))?;
        let store = Arc::clone(&self.store);
        let wanted = id.to_owned();
        if blocking(move || store.signal(&wanted, &message)).await? { Ok(()) } else { Err(no_turn()) }
    }

    /// A signal from another node, for a session whose turn may run here.
    pub fn on_signal(&self, id: &str, message: &str) {
        let Some(live) = self.get(id).filter(|live| live.running()) else { return };
        match serde_json::from_str::<Signal>(message) {
            Ok(signal) => {
                if let Err(e) = apply(&live, signal) {
                    tracing::debug!(session = %id, error = %e.message, "a forwarded command did not apply");
                }
            }
            Err(e) => tracing::warn!(session = %id, error = %e, "an unreadable forwarded command"),
        }
    }

    /// Forgets session `id` (not while a turn runs).
    pub async fn release(&self, id: &str) -> Result<(), ApiError> {
        let Some(live) = self.get(id) else { return Ok(()) };
        if live.running() {
            return Err(ApiError::conflict(
                "turn_running",
                "a turn is running in this session; abort it first",
            ));
        }
        locked(&self.live, |map| map.remove(id));
        Ok(())
    }

    /// Forgets sessions idle for `max` (no turn, no question, no client, untouched), so
    /// their agents (model connections, MCP servers) are freed; they are prepared again
    /// on the next request.
    pub async fn close_idle(&self, max: Duration) -> usize {
        let _opening = self.opening.lock().await;
        locked(&self.live, |map| {
            let before = map.len();
            map.retain(|_, live| !live.idle(max));
            before - map.len()
        })
    }

    /// Sessions ready, and turns running.
    pub fn counts(&self) -> (usize, usize) {
        locked(&self.live, |map| (map.len(), map.values().filter(|live| live.running()).count()))
    }

    /// Stops the server's turns: no new one starts; running ones may finish within
    /// `grace`, then are aborted as "the server is shutting down". Returns once none runs
    /// (or after a last bounded wait for aborted turns to write their end).
    pub async fn drain(&self, grace: Duration) {
        self.draining.store(true, Ordering::Release);
        let deadline = Instant::now() + grace;
        while self.counts().1 > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let running: Vec<Arc<Live>> =
            locked(&self.live, |map| map.values().filter(|live| live.running()).cloned().collect());
        for live in &running {
            let _ = live.abort_because(Some("the server is shutting down"));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.counts().1 > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Forgets every session (after [`Manager::drain`]).
    pub async fn shutdown(&self) {
        self.drain(Duration::ZERO).await;
        locked(&self.live, HashMap::clear);
    }
}

/// Applies `signal` to `live`'s running turn.
fn apply(live: &Live, signal: Signal) -> Result<(), ApiError> {
    match signal {
        Signal::Abort => live.abort(),
        Signal::Steer(text) => live.steer(text),
        Signal::Answer { id, answer, message } => live.answer(id, parse_answer(&answer, message)?),
    }
}

/// Most characters of what a user says instead of a call.
const MESSAGE_LIMIT: usize = 8_000;

/// An answer's word (and, with `deny`, what the user said instead) as the permission
/// policy takes it.
pub(crate) fn parse_answer(answer: &str, message: Option<String>) -> Result<AskAnswer, ApiError> {
    let message = message.filter(|m| !m.trim().is_empty());
    if let Some(message) = &message {
        if answer != "deny" {
            return Err(ApiError::bad_request("a message goes only with the answer `deny`"));
        }
        if message.chars().count() > MESSAGE_LIMIT {
            return Err(ApiError::bad_request(format!("the message is over {MESSAGE_LIMIT} characters")));
        }
    }
    match answer {
        "allow" => Ok(AskAnswer::Allow),
        "always" => Ok(AskAnswer::AllowAlways),
        "deny" => Ok(message.map_or(AskAnswer::Deny, AskAnswer::DenyWithWords)),
        "stop" => Ok(AskAnswer::DenyAndStop),
        other => Err(ApiError::bad_request(format!("answer `{other}`: use allow, always, deny or stop"))),
    }
}
