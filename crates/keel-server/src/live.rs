//! Sessions a server holds open: each with its agent, context, fan-out hub, running
//! turn and pending permission question. A turn runs in a task of its own, so a client
//! that leaves never stops or wedges it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_agent::{Agent, SessionContext};
use keel_llm::CancellationToken;
use keel_session::{Session, SessionError, SessionStore};
use keel_tools::{AskAnswer, AskFn, AskRequest};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::error::ApiError;
use crate::factory::{AgentFactory, SessionSpec};
use crate::hub::Hub;

/// A permission question waiting for a client's answer.
#[derive(Debug)]
pub struct Question {
    /// Its number (unique in the server).
    pub id: u64,
    /// The tool.
    pub tool: String,
    /// The raw arguments.
    pub arguments: String,
    answer: oneshot::Sender<AskAnswer>,
}

/// A session held open by this server.
pub struct Live {
    /// The session id.
    pub id: String,
    /// The client's choices.
    pub spec: SessionSpec,
    pub(crate) agent: Agent,
    pub(crate) ctx: SessionContext,
    /// The log; `None` once closed. A running turn holds the lock.
    pub(crate) session: tokio::sync::Mutex<Option<Session>>,
    /// Clients' fan-out.
    pub hub: Arc<Hub>,
    /// The running turn's cancel token.
    turn: Mutex<Option<CancellationToken>>,
    question: Arc<Mutex<Option<Question>>>,
    /// When a request last touched the session or its turn ended.
    used: Mutex<std::time::Instant>,
}

fn locked<T, R>(mutex: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
    match mutex.lock() {
        Ok(mut guard) => f(&mut guard),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

impl Live {
    fn touch(&self) {
        locked(&self.used, |used| *used = std::time::Instant::now());
    }

    /// Idle for `max`: no turn, no question, no client streaming, untouched that long.
    fn idle(&self, max: Duration) -> bool {
        !self.running()
            && self.question().is_none()
            && self.hub.clients() == 0
            && locked(&self.used, |used| used.elapsed() >= max)
    }

    /// Whether a turn is running.
    pub fn running(&self) -> bool {
        locked(&self.turn, |t| t.is_some())
    }

    /// The pending permission question: (id, tool, arguments).
    pub fn question(&self) -> Option<(u64, String, String)> {
        locked(&self.question, |q| q.as_ref().map(|q| (q.id, q.tool.clone(), q.arguments.clone())))
    }

    /// Answers the pending question `id` (any, when `None`).
    pub fn answer(&self, id: Option<u64>, answer: AskAnswer) -> Result<(), ApiError> {
        let question = locked(&self.question, |q| match q {
            Some(pending) if id.is_none_or(|id| id == pending.id) => Ok(q.take()),
            Some(pending) => Err(ApiError::conflict(
                "no_question",
                format!("question {} is not pending (question {} is)", id.unwrap_or_default(), pending.id),
            )),
            None => Err(ApiError::conflict("no_question", "no permission question is pending")),
        })?;
        if let Some(question) = question {
            let _ = question.answer.send(answer);
        }
        Ok(())
    }

    /// Queues steering input for the running turn.
    pub fn steer(&self, text: String) -> Result<(), ApiError> {
        if !self.running() {
            return Err(ApiError::conflict("no_turn", "no turn is running; send a message instead"));
        }
        self.ctx.inbox.steer(text);
        Ok(())
    }

    /// Aborts the running turn.
    pub fn abort(&self) -> Result<(), ApiError> {
        match locked(&self.turn, |t| t.clone()) {
            Some(cancel) => {
                cancel.cancel();
                Ok(())
            }
            None => Err(ApiError::conflict("no_turn", "no turn is running")),
        }
    }
}

/// The permission question asked through the hub, answered by `…/permission`.
fn ask_fn(hub: Arc<Hub>, slot: Arc<Mutex<Option<Question>>>, timeout: Duration) -> AskFn {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    Arc::new(move |request: AskRequest| {
        let hub = Arc::clone(&hub);
        let slot = Arc::clone(&slot);
        Box::pin(async move {
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            let (answer, answered) = oneshot::channel();
            let question =
                Question { id, tool: request.tool.clone(), arguments: request.arguments.clone(), answer };
            locked(&slot, |q| *q = Some(question));
            hub.publish_value(&serde_json::json!({
                "type": "permission/ask",
                "data": {"id": id, "tool": request.tool, "arguments": request.arguments}
            }));
            let answer = tokio::time::timeout(timeout, answered).await;
            locked(&slot, |q| {
                if q.as_ref().is_some_and(|q| q.id == id) {
                    *q = None;
                }
            });
            match answer {
                Ok(Ok(answer)) => answer,
                // No answer in time (or the session went away): the call is denied.
                _ => AskAnswer::Deny,
            }
        })
    })
}

/// What the manager needs to know.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Workspaces must be inside one of these (canonical).
    pub roots: Vec<PathBuf>,
    /// Turns running at once, over all sessions.
    pub max_turns: usize,
    /// How long a permission question waits for an answer before the call is denied.
    pub ask_timeout: Duration,
    /// Frames an event stream may fall behind before it is cut off (it resumes by id).
    pub sse_buffer: usize,
}

/// The sessions this server holds open.
pub struct Manager {
    store: Arc<dyn SessionStore>,
    factory: Arc<dyn AgentFactory>,
    limits: Limits,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Serializes opening, so two requests for one session do not race for its lock.
    opening: tokio::sync::Mutex<()>,
    turns: Arc<Semaphore>,
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
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The live session `id`, if held.
    pub fn get(&self, id: &str) -> Option<Arc<Live>> {
        locked(&self.live, |live| live.get(id).cloned())
    }

    /// Whether a session working in `cwd` is this server's business: its folder is under
    /// one of the roots.
    pub fn under_roots(&self, cwd: &str) -> bool {
        self.limits.roots.iter().any(|root| Path::new(cwd).starts_with(root))
    }

    /// Refuses (as not found: its existence is not this client's to know) a session whose
    /// folder is outside the roots, such as a CLI session in a shared home.
    pub async fn check_in_roots(&self, id: &str) -> Result<(), ApiError> {
        check_id(id)?;
        if self.get(id).is_some() {
            return Ok(());
        }
        let store = Arc::clone(&self.store);
        let wanted = id.to_owned();
        let events = blocking(move || store.read(&wanted)).await?;
        let cwd = events.first().and_then(|event| match &event.kind {
            keel_session::EventKind::SessionHeader(header) => Some(header.cwd.clone()),
            _ => None,
        });
        if cwd.is_some_and(|cwd| self.under_roots(&cwd)) { Ok(()) } else { Err(ApiError::not_found(id)) }
    }

    /// The canonical workspace for `folder`, refused outside the roots.
    pub fn workspace(&self, folder: &Path) -> Result<PathBuf, ApiError> {
        let forbidden = |m: String| ApiError::new(axum::http::StatusCode::FORBIDDEN, "forbidden_folder", m);
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

    async fn hold(&self, session: Session, spec: SessionSpec) -> Result<Arc<Live>, ApiError> {
        let hub = Arc::new(Hub::with_buffer(self.limits.sse_buffer));
        let question = Arc::new(Mutex::new(None));
        let ask = ask_fn(Arc::clone(&hub), Arc::clone(&question), self.limits.ask_timeout);
        let id = session.id().to_owned();
        let prepared = self.factory.prepare(&spec, &id, session.messages().is_empty(), ask).await;
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(message) => {
                blocking(move || session.close()).await?;
                return Err(ApiError::bad_request(message));
            }
        };
        let live = Arc::new(Live {
            id: id.clone(),
            spec,
            agent: prepared.agent,
            ctx: prepared.ctx,
            session: tokio::sync::Mutex::new(Some(session)),
            hub,
            turn: Mutex::new(None),
            question,
            used: Mutex::new(std::time::Instant::now()),
        });
        locked(&self.live, |map| map.insert(id, Arc::clone(&live)));
        Ok(live)
    }

    /// Creates a session as `spec` says and holds it.
    pub async fn create(&self, mut spec: SessionSpec) -> Result<Arc<Live>, ApiError> {
        let workspace = self.workspace(&spec.folder)?;
        spec.folder = workspace.clone();
        let store = Arc::clone(&self.store);
        let cwd = workspace.display().to_string();
        let session = blocking(move || store.create(&cwd)).await?;
        let id = session.id().to_owned();
        match self.hold(session, spec).await {
            Ok(live) => Ok(live),
            Err(e) => {
                // A session nobody can run is not kept.
                let store = Arc::clone(&self.store);
                let _ = blocking(move || store.delete(&id)).await;
                Err(e)
            }
        }
    }

    /// The live session `id`, opening (and repairing) it from the store if needed.
    pub async fn open(&self, id: &str) -> Result<Arc<Live>, ApiError> {
        check_id(id)?;
        if let Some(live) = self.get(id) {
            live.touch();
            return Ok(live);
        }
        self.check_in_roots(id).await?;
        let _opening = self.opening.lock().await;
        if let Some(live) = self.get(id) {
            live.touch();
            return Ok(live);
        }
        let store = Arc::clone(&self.store);
        let wanted = id.to_owned();
        let session = blocking(move || {
            let mut session = store.open(&wanted)?;
            if session.id() != wanted {
                let _ = session.close();
                return Err(SessionError::new(
                    keel_session::SessionErrorKind::NotFound,
                    format!("no session `{wanted}`"),
                ));
            }
            session.repair()?;
            Ok(session)
        })
        .await?;
        let cwd = session.projection().header().map(|h| h.cwd.clone()).unwrap_or_default();
        let folder = match self.workspace(Path::new(&cwd)) {
            Ok(folder) => folder,
            Err(e) => {
                blocking(move || session.close()).await?;
                return Err(e);
            }
        };
        self.hold(session, SessionSpec { folder, ..SessionSpec::default() }).await
    }

    /// Starts a turn for `text` in a task of its own. 409 while one runs, 503 beyond
    /// the server's concurrent turns.
    pub fn start_turn(&self, live: &Arc<Live>, text: String) -> Result<(), ApiError> {
        let (cancel, permit) = locked(&live.turn, |turn| {
            if turn.is_some() {
                return Err(ApiError::conflict(
                    "turn_running",
                    "a turn is running in this session; steer or abort it",
                ));
            }
            let permit: OwnedSemaphorePermit = Arc::clone(&self.turns).try_acquire_owned().map_err(|_| {
                let mut e = ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "busy",
                    "the server runs as many turns as it may; retry shortly",
                );
                e.retry_after = Some(5);
                e
            })?;
            let cancel = CancellationToken::new();
            *turn = Some(cancel.clone());
            Ok((cancel, permit))
        })?;
        let live = Arc::clone(live);
        tokio::spawn(async move {
            run_turn(&live, text, &cancel).await;
            live.touch();
            locked(&live.turn, |turn| *turn = None);
            drop(permit);
        });
        Ok(())
    }

    /// Closes and forgets session `id` (not while a turn runs).
    pub async fn release(&self, id: &str) -> Result<(), ApiError> {
        let Some(live) = self.get(id) else { return Ok(()) };
        if live.running() {
            return Err(ApiError::conflict(
                "turn_running",
                "a turn is running in this session; abort it first",
            ));
        }
        locked(&self.live, |map| map.remove(id));
        let session = live.session.lock().await.take();
        if let Some(session) = session {
            blocking(move || session.close()).await?;
        }
        Ok(())
    }

    /// Closes sessions idle for `max` (no turn, no question, no client, untouched), so
    /// their lock goes back to the store: another process or node may run them, and a
    /// database connection is freed. They reopen on the next request.
    pub async fn close_idle(&self, max: Duration) -> usize {
        let idle: Vec<Arc<Live>> =
            locked(&self.live, |map| map.values().filter(|live| live.idle(max)).cloned().collect());
        let mut closed = 0;
        for live in idle {
            // Opening is serialized with this, and a turn starts only on a held session.
            let _opening = self.opening.lock().await;
            let Ok(mut guard) = live.session.try_lock() else { continue };
            let removed = locked(&self.live, |map| {
                // Checked again under the map's lock: a request may have come meanwhile.
                if live.idle(max) && map.get(&live.id).is_some_and(|held| Arc::ptr_eq(held, &live)) {
                    map.remove(&live.id)
                } else {
                    None
                }
            });
            if removed.is_none() {
                continue;
            }
            if let Some(session) = guard.take() {
                match blocking(move || session.close()).await {
                    Ok(()) => closed += 1,
                    Err(e) => {
                        tracing::warn!(session = %live.id, error = %e, "closing an idle session failed")
                    }
                }
            }
        }
        closed
    }

    /// Aborts every turn and closes every session (server shutdown).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Live>> = locked(&self.live, |map| map.drain().map(|(_, live)| live).collect());
        for live in &all {
            let _ = live.abort();
        }
        for live in all {
            // Waits for the turn to end (it holds the lock).
            let session = live.session.lock().await.take();
            if let Some(session) = session
                && let Err(e) = blocking(move || session.close()).await
            {
                tracing::warn!(session = %live.id, error = %e, "closing a session at shutdown failed");
            }
        }
    }
}

async fn run_turn(live: &Live, text: String, cancel: &CancellationToken) {
    let mut guard = live.session.lock().await;
    let Some(session) = guard.as_mut() else {
        let message = "the session was closed as idle just now; send the message again";
        live.hub.publish_value(&serde_json::json!({"type": "keel/error", "data": {"message": message}}));
        return;
    };
    match live.agent.run_turn(session, &live.ctx, text, &*live.hub, cancel).await {
        // The turn ended with a sync: what the hub kept is in the store now.
        Ok(_) => live.hub.durable(),
        Err(e) => {
            tracing::warn!(session = %live.id, error = %e, "a turn stopped: the log could not be written");
            live.hub.publish_value(
                &serde_json::json!({"type": "keel/error", "data": {"message": e.to_string()}}),
            );
        }
    }
}
