//! One writer per open session: a task holding the session's lease, fed by a channel.
//! `append` hands the event over and returns; the task hands what has arrived to the
//! store's committer in batches, in order, one batch at a time; a sync is acknowledged
//! once everything before it is committed.

use std::sync::Arc;

use keel_session::{Event, EventWriter, SessionError, SessionErrorKind, SyncWork};
use tokio::sync::{mpsc, oneshot};

use crate::commit::Committer;
use crate::lease::{Failure, Hold, Leases, fail, failure_of};
use crate::rows::{Row, to_row};

/// Most events of one session handed to the committer at once.
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
    pub(crate) fn start(
        leases: Arc<Leases>,
        committer: Committer,
        hold: Hold,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let failure = Arc::clone(&hold.failure);
        let id = hold.id.clone();
        runtime.spawn(run(leases, committer, hold, rx));
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
async fn run(leases: Arc<Leases>, committer: Committer, hold: Hold, mut rx: mpsc::UnboundedReceiver<Msg>) {
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
            && let Err(e) = committer.commit(id, rows).await
        {
            tracing::warn!(session = %id, error = %e, "appending to PostgreSQL failed");
            fail(&hold.failure, e.kind, e.message);
        }
        let result = || failure_of(&hold.failure).map_or(Ok(()), Err);
        for ack in acks {
            ack.send(result());
        }
        if let Some(ack) = close {
            // The outcome before the release: a renewal running meanwhile no longer
            // finds the lease and would mark it lost.
            let outcome = result();
            let released = leases.release(&hold).await;
            ack.send(outcome.and(released));
            return;
        }
    }
    if let Err(e) = leases.release(&hold).await {
        tracing::warn!(session = %id, error = %e, "releasing the lease of a dropped session failed");
    }
}
