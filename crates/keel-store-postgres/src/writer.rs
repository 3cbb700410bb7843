//! One writer per open session: a task owning the session's connection (which holds its
//! advisory lock), fed by a channel. `append` hands the event over and returns; the
//! task commits what has arrived in batches, in order; a sync is acknowledged once
//! everything before it is committed.

use std::sync::{Arc, Mutex};

use keel_session::{Event, EventWriter, SessionError, SessionErrorKind, SyncWork};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;

use crate::db_error;
use crate::rows::{Row, to_row};

/// Most events committed in one statement.
const MAX_BATCH: usize = 512;

/// Who waits for an acknowledgement.
enum Ack {
    Async(oneshot::Sender<Result<(), SessionError>>),
    Blocking(std::sync::mpsc::SyncSender<Result<(), SessionError>>),
}

impl Ack {
    fn send(self, result: Result<(), SessionError>) {
        match self {
            Ack::Async(tx) => drop(tx.send(result)),
            Ack::Blocking(tx) => drop(tx.send(result)),
        }
    }
}

enum Msg {
    Append(Row),
    Sync(Ack),
    Close(Ack),
}

/// The first failure, kept so every later append and sync reports it.
type Failure = Arc<Mutex<Option<(SessionErrorKind, String)>>>;

fn failure_of(failure: &Failure) -> Option<SessionError> {
    let guard = match failure.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.as_ref().map(|(kind, message)| SessionError::new(*kind, message.clone()))
}

/// Appends a session's events to PostgreSQL through its writer task.
pub struct PgWriter {
    id: String,
    tx: mpsc::UnboundedSender<Msg>,
    failure: Failure,
    line: Vec<u8>,
    closed: bool,
}

impl std::fmt::Debug for PgWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWriter").field("id", &self.id).field("closed", &self.closed).finish_non_exhaustive()
    }
}

impl PgWriter {
    /// Starts the writer task for session `id` on `runtime`; `client` holds the lock.
    pub(crate) fn start(id: String, client: Client, lock_key: i64, runtime: &tokio::runtime::Handle) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let failure: Failure = Arc::default();
        runtime.spawn(run(id.clone(), client, lock_key, rx, Arc::clone(&failure)));
        PgWriter { id, tx, failure, line: Vec::with_capacity(4096), closed: false }
    }

    fn send(&self, msg: Msg) -> Result<(), SessionError> {
        self.tx.send(msg).map_err(|_| {
            failure_of(&self.failure).unwrap_or_else(|| {
                SessionError::new(SessionErrorKind::Io, format!("the writer of session {} stopped", self.id))
            })
        })
    }

    fn wait(&self, close: bool) -> Result<(), SessionError> {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        let ack = Ack::Blocking(ack);
        self.send(if close { Msg::Close(ack) } else { Msg::Sync(ack) })?;
        done.recv().map_err(|_| {
            SessionError::new(SessionErrorKind::Io, format!("the writer of session {} stopped", self.id))
        })?
    }
}

impl EventWriter for PgWriter {
    fn append(&mut self, event: &Event) -> Result<(), SessionError> {
        if self.closed {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("session {} was closed", self.id),
            ));
        }
        if let Some(e) = failure_of(&self.failure) {
            return Err(e);
        }
        let row = to_row(event, &mut self.line)?;
        self.send(Msg::Append(row))
    }

    fn sync(&mut self) -> Result<(), SessionError> {
        self.wait(false)
    }

    fn sync_work(&mut self) -> SyncWork {
        let (ack, done) = oneshot::channel();
        let sent = self.send(Msg::Sync(Ack::Async(ack)));
        let id = self.id.clone();
        SyncWork::Wait(Box::pin(async move {
            sent?;
            done.await.map_err(|_| {
                SessionError::new(SessionErrorKind::Io, format!("the writer of session {id} stopped"))
            })?
        }))
    }

    fn close(&mut self) -> Result<(), SessionError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.wait(true)
    }
}

/// The writer task: commit batches in order, acknowledge syncs, release on close. When
/// every handle is gone (the session was dropped) the connection closes, which releases
/// the lock.
async fn run(
    id: String,
    client: Client,
    lock_key: i64,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    failure: Failure,
) {
    let mut failed: Option<(SessionErrorKind, String)> = None;
    while let Some(first) = rx.recv().await {
        let mut rows = Vec::new();
        let mut acks = Vec::new();
        let mut close = None;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Append(row) => rows.push(row),
                Msg::Sync(ack) => acks.push(ack),
                Msg::Close(ack) => {
                    close = Some(ack);
                    break;
                }
            }
            if rows.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if failed.is_none()
            && !rows.is_empty()
            && let Err(e) = commit(&client, &id, &rows).await
        {
            tracing::warn!(session = %id, error = %e, "appending to PostgreSQL failed");
            failed = Some((e.kind, e.message.clone()));
            match failure.lock() {
                Ok(mut slot) => *slot = failed.clone(),
                Err(poisoned) => *poisoned.into_inner() = failed.clone(),
            }
        }
        let result = || match &failed {
            Some((kind, message)) => Err(SessionError::new(*kind, message.clone())),
            None => Ok(()),
        };
        for ack in acks {
            ack.send(result());
        }
        if let Some(ack) = close {
            let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&lock_key]).await;
            ack.send(result().and(unlocked.map(drop).map_err(db_error)));
            return;
        }
    }
}

/// Commits `rows` in one transaction. A seq that exists already means another writer
/// got there: this one fails instead of forking history.
async fn commit(client: &Client, id: &str, rows: &[Row]) -> Result<(), SessionError> {
    let mut seqs = Vec::with_capacity(rows.len());
    let mut kinds = Vec::with_capacity(rows.len());
    let mut times = Vec::with_capacity(rows.len());
    let mut payloads = Vec::with_capacity(rows.len());
    for row in rows {
        seqs.push(row.seq);
        kinds.push(row.kind);
        times.push(row.time.as_str());
        payloads.push(row.payload.as_str());
    }
    let header = rows.iter().find_map(|r| r.header.as_ref());
    let (parent_id, parent_seq) = match header.and_then(|h| h.parent.as_ref()) {
        Some((pid, pseq)) => (Some(pid.as_str()), Some(*pseq)),
        None => (None, None),
    };
    // One statement, so one transaction: the session row (with the header), the events,
    // the modified time, and a notice to followers (`NOTIFY keel_events, 'id:last_seq'`,
    // delivered at commit).
    let result = client
        .execute(
            "WITH s AS (
                INSERT INTO keel_sessions (id, cwd, created, parent_id, parent_seq)
                SELECT $1, $6, $7, $8, $9 WHERE $10
             ), e AS (
                INSERT INTO keel_events (session_id, seq, kind, time, payload)
                SELECT $1, u.seq, u.kind, u.time, u.payload::json
                FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, kind, time, payload)
             ), m AS (
                UPDATE keel_sessions SET modified = now() WHERE id = $1
             )
             SELECT pg_notify('keel_events', $1 || ':' || ($11::bigint)::text)",
            &[
                &id,
                &seqs,
                &kinds,
                &times,
                &payloads,
                &header.map(|h| h.cwd.as_str()).unwrap_or_default(),
                &header.map(|h| h.created.as_str()).unwrap_or_default(),
                &parent_id,
                &parent_seq,
                &header.is_some(),
                &seqs.last().copied().unwrap_or_default(),
            ],
        )
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
            Err(SessionError::new(
                SessionErrorKind::Locked,
                format!(
                    "session {id} is being run elsewhere: events from seq {} exist already; this writer stopped",
                    seqs.first().copied().unwrap_or_default()
                ),
            ))
        }
        Err(e) => Err(db_error(e)),
    }
}
