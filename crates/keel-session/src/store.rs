//! The store trait: where sessions live.

use std::time::SystemTime;

use keel_llm::Usage;

use crate::error::SessionError;
use crate::event::{Event, ParentRef, SpawnRef};
use crate::projection::Projection;
use crate::session::Session;

/// A place that creates, opens, lists and forks sessions: the JSONL store here,
/// PostgreSQL in `keel-store-postgres`. Every store passes the conformance suite in
/// `keel_testkit::store`.
///
/// The methods block (file or network I/O): async code runs them on a blocking thread.
pub trait SessionStore: Send + Sync {
    /// Starts a new session for workspace `cwd`, locked for writing.
    fn create(&self, cwd: &str) -> Result<Session, SessionError>;

    /// Starts a child session for workspace `cwd` whose header cites the parent's call
    /// that started it (a subagent), locked for writing. The default refuses (`Invalid`):
    /// a store that cannot record the link keeps no child sessions.
    fn create_spawned(&self, cwd: &str, spawned_by: SpawnRef) -> Result<Session, SessionError> {
        let _ = (cwd, spawned_by);
        Err(SessionError::new(crate::SessionErrorKind::Invalid, "this store keeps no child sessions"))
    }

    /// Opens an existing session (id or unique id prefix) for writing. Does not repair:
    /// call [`Session::repair`] (the agent loop does so before each turn).
    fn open(&self, id: &str) -> Result<Session, SessionError>;

    /// Branches session `id` at `at` (default: its last event) into a new session whose
    /// header cites the parent. An open turn at the fork point is closed by repair.
    fn fork(&self, id: &str, at: Option<u64>) -> Result<Session, SessionError>;

    /// Every session, most recently changed first. Unreadable logs are skipped.
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;

    /// The id of the most recently changed session of workspace `cwd`, if any, other
    /// than a child session (what `--continue` resumes). The default reads [`Self::list`].
    fn latest_in(&self, cwd: &str) -> Result<Option<String>, SessionError> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|s| s.cwd == cwd && s.spawned_by.is_none())
            .max_by(|a, b| (a.modified, &a.id).cmp(&(b.modified, &b.id)))
            .map(|s| s.id))
    }

    /// All events of a session, read without locking it.
    fn read(&self, id: &str) -> Result<Vec<Event>, SessionError>;

    /// Deletes a session for good. Refused (`Locked`) while it is open for writing.
    fn delete(&self, id: &str) -> Result<(), SessionError>;

    /// The events of session `id` after seq `after`, read without locking it (for
    /// following a session another process runs). The default filters [`Self::read`].
    fn read_after(&self, id: &str, after: u64) -> Result<Vec<Event>, SessionError> {
        let mut events = self.read(id)?;
        events.retain(|e| e.seq > after);
        Ok(events)
    }

    /// Asks to be told when events are committed, by this process or another one:
    /// `notify(session_id, seq)` is called (from a thread of the store's, so it must be
    /// cheap) with the last seq of each committed batch. `false` when the store cannot
    /// tell (the default); followers then poll. Notices may be lost: poll slowly too.
    fn watch(&self, notify: ChangeNotify) -> bool {
        drop(notify);
        false
    }

    /// Sends `message` (at most [`MAX_SIGNAL_BYTES`]) to every process watching signals
    /// on this store, so whichever runs session `id` can act on it (abort, steer, answer a
    /// question). `Ok(false)` when the store cannot carry signals (the default).
    fn signal(&self, id: &str, message: &str) -> Result<bool, SessionError> {
        let _ = (id, message);
        Ok(false)
    }

    /// Asks to be given the messages sent with [`SessionStore::signal`] by any process:
    /// `notify(session_id, message)`, from a thread of the store's. `false` when the store
    /// cannot carry signals (the default). Signals may be lost while reconnecting.
    fn watch_signals(&self, notify: SignalNotify) -> bool {
        drop(notify);
        false
    }

    /// Counters of the store's commits since it was opened (all zero for a store that
    /// keeps none, the default).
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }
}

/// A store's commit counters; see [`SessionStore::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Batches committed.
    pub commits: u64,
    /// Time from handing a batch over to its commit, summed, in microseconds.
    pub commit_us: u64,
    /// Commits tried again because the store could not be reached.
    pub retries: u64,
    /// Commits that failed for good (the session's writer stopped).
    pub errors: u64,
}

/// A callback for [`SessionStore::watch_signals`]: `(session_id, message)`.
pub type SignalNotify = std::sync::Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The largest signal message a store must carry, in bytes.
pub const MAX_SIGNAL_BYTES: usize = 7000;

/// A callback for [`SessionStore::watch`]: `(session_id, last seq committed)`.
pub type ChangeNotify = std::sync::Arc<dyn Fn(&str, u64) + Send + Sync>;

/// One line of a session listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// Creation time, RFC 3339.
    pub created: String,
    /// Last modification of the log.
    pub modified: SystemTime,
    /// The workspace folder.
    pub cwd: String,
    /// The first user message.
    pub first_prompt: Option<String>,
    /// Turns started.
    pub turns: u32,
    /// Tokens used.
    pub usage: Usage,
    /// The parent, when forked.
    pub parent: Option<ParentRef>,
    /// The parent's call that started it, when it is a child session.
    pub spawned_by: Option<SpawnRef>,
    /// Number of events in the log.
    pub events: u64,
    /// The log ends inside a turn: one runs (here or in another process), or one was
    /// interrupted and is closed when the session is next opened.
    pub turn_open: bool,
}

impl SessionSummary {
    /// Builds a summary from a folded log.
    pub fn from_projection(id: String, projection: &Projection, modified: SystemTime, events: u64) -> Self {
        let header = projection.header();
        SessionSummary {
            id,
            created: header.map(|h| h.created.clone()).unwrap_or_default(),
            modified,
            cwd: header.map(|h| h.cwd.clone()).unwrap_or_default(),
            first_prompt: projection.first_prompt().map(str::to_owned),
            turns: projection.turns(),
            usage: projection.usage(),
            parent: header.and_then(|h| h.parent.clone()),
            spawned_by: header.and_then(|h| h.spawned_by.clone()),
            events,
            turn_open: projection.open_turn().is_some(),
        }
    }
}
