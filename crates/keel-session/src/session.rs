//! A live session: the writer that owns its log plus the projection folded from it.

use keel_llm::Message;

use crate::error::SessionError;
use crate::event::{Event, EventKind, FORMAT_VERSION, ParentRef, SessionHeader, SpawnRef};
use crate::projection::Projection;
use crate::repair::{self, RepairReport};
use crate::time::now_rfc3339;

/// Where a session's events are persisted: the JSONL file, PostgreSQL, memory.
///
/// `append` is called on the loop's path and must not wait for durability: a file writer
/// writes through (no user-space buffer), a database writer hands the event to its
/// writer task. Durability is [`EventWriter::sync`] (blocking) or
/// [`EventWriter::sync_work`] (what an async caller should do instead of blocking).
pub trait EventWriter: Send + Sync {
    /// Hands one event to the store, in order. A crash may lose events not yet synced,
    /// never reorder them. An error here (or from an earlier hand-off) means the session
    /// can no longer be written.
    fn append(&mut self, event: &Event) -> Result<(), SessionError>;

    /// Makes everything appended so far durable (fsync, commit), blocking the thread.
    fn sync(&mut self) -> Result<(), SessionError>;

    /// How to make everything appended so far durable without blocking an async
    /// executor. The writer decides (the loop no longer inspects the runtime): inline
    /// (call [`EventWriter::sync`]), a job for a blocking thread, or a future to await.
    fn sync_work(&mut self) -> SyncWork {
        SyncWork::Inline
    }

    /// Makes everything durable and releases the session (its lock or lease), so
    /// another writer may open it. Appending after `close` fails. Dropping a writer
    /// without closing releases it too, as far as the store can (a process that dies
    /// releases it as well).
    fn close(&mut self) -> Result<(), SessionError> {
        self.sync()
    }

    /// Asks to be told, with [`DurableNotify`], the last seq of each batch that becomes
    /// durable (a database commit), so others are shown only what the store keeps.
    /// `false` (the default) means an event is as durable as the store promises once
    /// `append` returns (a file written through), and nothing will be notified.
    fn watch_durable(&mut self, notify: DurableNotify) -> bool {
        drop(notify);
        false
    }

    /// Keeps an image's bytes beside the log, durably, before the event naming it is
    /// appended (the log holds only its reference). A store that cannot keep images
    /// refuses, and the event is not appended.
    fn put_image(&mut self, image: &keel_llm::Image, data: &[u8]) -> Result<(), SessionError> {
        let _ = (image, data);
        Err(SessionError::new(
            crate::SessionErrorKind::Unavailable,
            "this session store does not keep images",
        ))
    }
}

/// A callback for [`EventWriter::watch_durable`]: the last seq now durable. Called from
/// the writer's own thread or task, in seq order, so it must be cheap.
pub type DurableNotify = std::sync::Arc<dyn Fn(u64) + Send + Sync>;

/// A sync to run on a blocking thread; see [`SyncWork::Blocking`].
pub type SyncJob = Box<dyn FnOnce() -> Result<(), SessionError> + Send>;

/// A sync to await; see [`SyncWork::Wait`].
pub type SyncFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), SessionError>> + Send>>;

/// What an async caller does to make a session durable; see [`EventWriter::sync_work`].
#[non_exhaustive]
pub enum SyncWork {
    /// Call [`Session::sync`] on this thread (cheap, or the writer has nothing better).
    Inline,
    /// Run this job on a blocking thread (an fsync that may take a while).
    Blocking(SyncJob),
    /// Await this future (a writer task acknowledges when everything is committed).
    Wait(SyncFuture),
}

impl std::fmt::Debug for SyncWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SyncWork::Inline => "SyncWork::Inline",
            SyncWork::Blocking(_) => "SyncWork::Blocking",
            SyncWork::Wait(_) => "SyncWork::Wait",
        })
    }
}

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

    /// Nothing is kept; the session's memory holds the bytes while it lives.
    fn put_image(&mut self, _image: &keel_llm::Image, _data: &[u8]) -> Result<(), SessionError> {
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

    /// The events keep the bytes in memory.
    fn put_image(&mut self, _image: &keel_llm::Image, _data: &[u8]) -> Result<(), SessionError> {
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
        Self::start(id, cwd, parent, None, writer)
    }

    /// Starts a child session on `writer`: its header cites the parent's call that
    /// started it (`spawned_by`).
    pub fn create_spawned(
        id: String,
        cwd: &str,
        spawned_by: SpawnRef,
        writer: Box<dyn EventWriter>,
    ) -> Result<Session, SessionError> {
        Self::start(id, cwd, None, Some(spawned_by), writer)
    }

    fn start(
        id: String,
        cwd: &str,
        parent: Option<ParentRef>,
        spawned_by: Option<SpawnRef>,
        writer: Box<dyn EventWriter>,
    ) -> Result<Session, SessionError> {
        let mut session = Session { id: id.clone(), writer, projection: Projection::new(), next_seq: 0 };
        session.append(EventKind::SessionHeader(SessionHeader {
            version: FORMAT_VERSION,
            id,
            created: now_rfc3339(),
            cwd: cwd.to_owned(),
            parent,
            spawned_by,
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
            spawned_by: None,
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
        for image in event.kind.images() {
            if let Some(data) = &image.data {
                self.writer.put_image(image, data)?;
            }
        }
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

    /// How an async caller makes everything appended so far durable without blocking
    /// its executor; see [`EventWriter::sync_work`].
    pub fn sync_work(&mut self) -> SyncWork {
        self.writer.sync_work()
    }

    /// Asks the writer to report durable seqs; see [`EventWriter::watch_durable`].
    pub fn watch_durable(&mut self, notify: DurableNotify) -> bool {
        self.writer.watch_durable(notify)
    }

    /// Makes everything durable and releases the session (its file lock, its database
    /// lease), so another writer may open it at once. Blocks like [`Session::sync`]; an
    /// async caller runs it on a blocking thread.
    pub fn close(mut self) -> Result<(), SessionError> {
        self.writer.close()
    }

    /// Appends an event that already has its seq and time, as a store copying a log does
    /// (fork). Checked like any append; the seq must be after the last one.
    pub fn append_copy(&mut self, event: Event) -> Result<(), SessionError> {
        self.append_event(event, |_| {})
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
