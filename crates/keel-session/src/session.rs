//! A live session: the writer that owns its log plus the projection folded from it.

use keel_llm::Message;

use crate::error::SessionError;
use crate::event::{Event, EventKind, FORMAT_VERSION, ParentRef, SessionHeader};
use crate::projection::Projection;
use crate::repair::{self, RepairReport};
use crate::time::now_rfc3339;

/// Where a session's events are persisted. Implemented by the JSONL store; a SQLite or
/// PostgreSQL store would implement it too.
pub trait EventWriter: Send {
    /// Persists one event. Must be written through (not held in a user-space buffer)
    /// before returning, so a crash loses at most the event being written.
    fn append(&mut self, event: &Event) -> Result<(), SessionError>;

    /// Makes everything appended so far durable (fsync).
    fn sync(&mut self) -> Result<(), SessionError>;

    /// The same as [`EventWriter::sync`], detached so it can run on another thread
    /// (the agent loop runs it on tokio's blocking pool, so a slow disk does not stall
    /// other sessions). `None` means "sync inline".
    fn detached_sync(&self) -> Option<SyncJob> {
        None
    }
}

/// A sync to run elsewhere; see [`EventWriter::detached_sync`].
pub type SyncJob = Box<dyn FnOnce() -> Result<(), SessionError> + Send>;

/// A writer that keeps nothing (`--no-session`).
#[derive(Debug, Default)]
pub struct NullWriter;

impl EventWriter for NullWriter {
    fn append(&mut self, _event: &Event) -> Result<(), SessionError> {
        Ok(())
    }

    fn sync(&mut self) -> Result<(), SessionError> {
        Ok(())
    }
}

/// A writer that keeps events in memory, shared with whoever holds the other handle.
#[derive(Debug, Default, Clone)]
pub struct MemoryWriter {
    events: std::sync::Arc<std::sync::Mutex<Vec<Event>>>,
}

impl MemoryWriter {
    /// A new, empty in-memory log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of every event appended so far.
    pub fn events(&self) -> Vec<Event> {
        match self.events.lock() {
            Ok(events) => events.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl EventWriter for MemoryWriter {
    fn append(&mut self, event: &Event) -> Result<(), SessionError> {
        match self.events.lock() {
            Ok(mut events) => events.push(event.clone()),
            Err(poisoned) => poisoned.into_inner().push(event.clone()),
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), SessionError> {
        Ok(())
    }
}

/// An open session: append events, read the derived history.
///
/// The session is the single writer of its log. Every appended event goes to the writer
/// first and is then folded into the projection, so what the model is sent is always
/// what the log says (invariant 1).
pub struct Session {
    id: String,
    writer: Box<dyn EventWriter>,
    projection: Projection,
    next_seq: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("next_seq", &self.next_seq)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Starts a new session on `writer`, writing its header.
    pub fn create(
        id: String,
        cwd: &str,
        parent: Option<ParentRef>,
        writer: Box<dyn EventWriter>,
    ) -> Result<Session, SessionError> {
        let mut session = Session { id: id.clone(), writer, projection: Projection::new(), next_seq: 0 };
        session.append(EventKind::SessionHeader(SessionHeader {
            version: FORMAT_VERSION,
            id,
            created: now_rfc3339(),
            cwd: cwd.to_owned(),
            parent,
        }))?;
        session.sync()?;
        Ok(session)
    }

    /// A session kept only in memory, e.g. for `--no-session` or tests.
    pub fn in_memory(cwd: &str) -> Session {
        let mut session = Session {
            id: crate::new_session_id(),
            writer: Box::new(NullWriter),
            projection: Projection::new(),
            next_seq: 0,
        };
        let header = EventKind::SessionHeader(SessionHeader {
            version: FORMAT_VERSION,
            id: session.id.clone(),
            created: now_rfc3339(),
            cwd: cwd.to_owned(),
            parent: None,
        });
        session.projection.fold(Event { seq: 0, time: now_rfc3339(), kind: header });
        session.next_seq = 1;
        session
    }

    /// Resumes a session from an already-folded projection (used by stores).
    pub fn resume(id: String, projection: Projection, writer: Box<dyn EventWriter>) -> Session {
        let next_seq = projection.last_seq().map_or(0, |seq| seq + 1);
        Session { id, writer, projection, next_seq }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Appends an event, returning its seq.
    pub fn append(&mut self, kind: EventKind) -> Result<u64, SessionError> {
        self.append_observed(kind, |_| {})
    }

    /// Appends an event and lets `observe` see it before it is folded in (the agent loop
    /// forwards it to its sink this way without a copy).
    pub fn append_observed(
        &mut self,
        kind: EventKind,
        observe: impl FnOnce(&Event),
    ) -> Result<u64, SessionError> {
        let seq = self.next_seq;
        let event = Event { seq, time: now_rfc3339(), kind };
        self.append_event(event, observe)?;
        Ok(seq)
    }

    pub(crate) fn append_event(
        &mut self,
        event: Event,
        observe: impl FnOnce(&Event),
    ) -> Result<(), SessionError> {
        if event.seq < self.next_seq {
            return Err(SessionError::new(
                crate::SessionErrorKind::Invalid,
                format!("event seq {} is not after {}", event.seq, self.next_seq.saturating_sub(1)),
            ));
        }
        // The same check as loading: an event that would make the log invalid is never
        // written.
        self.projection
            .check(&event)
            .map_err(|e| SessionError { kind: crate::SessionErrorKind::Invalid, ..e })?;
        self.writer.append(&event)?;
        self.next_seq = event.seq + 1;
        observe(&event);
        self.projection.fold(event);
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> Result<(), SessionError> {
        self.writer.sync()
    }

    /// A job that makes everything appended so far durable when run, for running off an
    /// async executor; `None` when the writer only syncs inline (call [`Session::sync`]).
    pub fn detached_sync(&self) -> Option<SyncJob> {
        self.writer.detached_sync()
    }

    /// The model-visible conversation.
    pub fn messages(&self) -> &[Message] {
        self.projection.messages()
    }

    /// Everything derived from the log.
    pub fn projection(&self) -> &Projection {
        &self.projection
    }

    /// The seq the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Closes an interrupted turn (invariant 5) and syncs. A no-op on a clean log.
    pub fn repair(&mut self) -> Result<RepairReport, SessionError> {
        self.repair_observed(|_| {})
    }

    /// Like [`Session::repair`], showing each appended closer to `observe`.
    pub fn repair_observed(&mut self, mut observe: impl FnMut(&Event)) -> Result<RepairReport, SessionError> {
        if !self.projection.needs_repair() {
            return Ok(RepairReport::default());
        }
        let (events, report) = repair::closers(&self.projection);
        for kind in events {
            self.append_observed(kind, &mut observe)?;
        }
        self.sync()?;
        Ok(report)
    }
}
