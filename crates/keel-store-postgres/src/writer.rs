//! One writer per open session: a task holding the session's lease, fed by a channel.
//! `append` hands the event over and returns; the task commits what has arrived in
//! batches, in order, on the store's pooled connections; a sync is acknowledged once
//! everything before it is committed.

use std::sync::Arc;

use keel_session::{Event, EventWriter, SessionError, SessionErrorKind, SyncWork};
use tokio::sync::{mpsc, oneshot};

use crate::db_error;
use crate::lease::{Failure, Hold, Leases, fail, failure_of, lost};
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
    /// Starts the writer task of a session this store holds (`hold`) on `runtime`.
    pub(crate) fn start(leases: Arc<Leases>, hold: Hold, runtime: &tokio::runtime::Handle) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let failure = Arc::clone(&hold.failure);
        let id = hold.id.clone();
        runtime.spawn(run(leases, hold, rx));
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

/// The writer task: commit batches in order, acknowledge syncs, release the lease on
/// close, or when every handle is gone (the session was dropped).
async fn run(leases: Arc<Leases>, hold: Hold, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let id = hold.id.as_str();
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
        // A lost lease (noticed by the renewal task) or an earlier failure stops it.
        if failure_of(&hold.failure).is_none()
            && !rows.is_empty()
            && let Err(e) = commit(&leases, id, &rows).await
        {
            tracing::warn!(session = %id, error = %e, "appending to PostgreSQL failed");
            fail(&hold.failure, e.kind, e.message);
        }
        let result = || failure_of(&hold.failure).map_or(Ok(()), Err);
        for ack in acks {
            ack.send(result());
        }
        if let Some(ack) = close {
            let released = leases.release(&hold).await;
            ack.send(result().and(released));
            return;
        }
    }
    if let Err(e) = leases.release(&hold).await {
        tracing::warn!(session = %id, error = %e, "releasing the lease of a dropped session failed");
    }
}

/// Commits `rows` in one statement (so one transaction), if this store still holds the
/// session's lease. A lease gone, or a seq that exists already, means another writer got
/// there: this one fails instead of forking history.
async fn commit(leases: &Leases, id: &str, rows: &[Row]) -> Result<(), SessionError> {
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
    // One statement, so one transaction: the lease checked and the row locked (`l`, so
    // a takeover waits for this commit and then sees its events), the events, the
    // session row (modified time, created from the header), and a notice to followers
    // (`NOTIFY keel_events, 'id:last_seq'`, delivered at commit). Without the lease
    // nothing is written and nothing notified.
    let client = leases.pool.get().await?;
    let result = client
        .query_one(
            "WITH l AS (
                UPDATE keel_sessions
                SET modified = now(), created = CASE WHEN $7 THEN $6 ELSE created END
                WHERE id = $1 AND lease_owner = $8 AND lease_expires > now()
                RETURNING id
             ), e AS (
                INSERT INTO keel_events (session_id, seq, kind, time, payload)
                SELECT l.id, u.seq, u.kind, u.time, u.payload::json
                FROM l, unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, kind, time, payload)
                RETURNING 1
             )
             SELECT (SELECT count(*) FROM e),
                    (SELECT count(*) FROM (SELECT pg_notify('keel_events', l.id || ':' || ($9::bigint)::text) FROM l) n)",
            &[
                &id,
                &seqs,
                &kinds,
                &times,
                &payloads,
                &header.map(|h| h.created.as_str()).unwrap_or_default(),
                &header.is_some(),
                &leases.owner,
                &seqs.last().copied().unwrap_or_default(),
            ],
        )
        .await;
    match result {
        Ok(row) if row.try_get::<_, i64>(0).ok() == i64::try_from(rows.len()).ok() => Ok(()),
        Ok(_) => Err(lost(id)),
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
