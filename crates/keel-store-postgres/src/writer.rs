//! One writer per open session: a task holding the session's lease, fed by a channel.
//! `append` hands the event over and returns; the task hands what has arrived to the
//! store's committer in batches, in order, one batch at a time; a sync is acknowledged
//! once everything before it is committed. Images named by a batch are kept first, in
//! one statement that checks the lease as a commit does. A commit or an image put that
//! fails because the database cannot be reached is retried with backoff while the lease
//! can still hold; after each commit the session's durable seq is reported to whoever
//! watches it.

use std::sync::Arc;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel_session::{DurableNotify, Event, EventWriter, SessionError, SessionErrorKind, SyncWork};
use tokio::sync::{mpsc, oneshot};

use crate::commit::{Committer, Failed};
use crate::lease::{Failure, Hold, Leases, fail, failure_of, lost};
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
    /// An image's bytes, kept before the event naming it (it comes first in the channel).
    Image(String, Arc<[u8]>),
    Append(Row),
    Sync(Ack),
    Close(Ack),
    Watch(DurableNotify),
}

/// The first wait before a failed commit is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two tries of a commit.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

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

    fn watch_durable(&mut self, notify: DurableNotify) -> bool {
        self.send(Msg::Watch(notify)).is_ok()
    }

    /// Handed to the writer task ahead of the event that names the image: it is inserted
    /// before that event's batch is committed.
    fn put_image(&mut self, image: &keel_llm::Image, data: &[u8]) -> Result<(), SessionError> {
        if !image.matches(data) {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("the bytes given for image {} do not match its hash", image.sha256),
            ));
        }
        self.send(Msg::Image(image.sha256.clone(), Arc::from(data)))
    }
}

/// The writer task: commit batches in order, acknowledge syncs, release the lease on
/// close, or when every handle is gone (the session was dropped).
async fn run(leases: Arc<Leases>, committer: Committer, hold: Hold, mut rx: mpsc::UnboundedReceiver<Msg>) {
    let id = hold.id.as_str();
    let mut watcher: Option<DurableNotify> = None;
    while let Some(first) = rx.recv().await {
        let mut rows = Vec::new();
        let mut images = Vec::new();
        let mut acks = Vec::new();
        let mut close = None;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Append(row) => rows.push(row),
                Msg::Image(sha256, data) => images.push((sha256, data)),
                Msg::Sync(ack) => acks.push(ack),
                Msg::Close(ack) => {
                    close = Some(ack);
                    break;
                }
                Msg::Watch(notify) => watcher = Some(notify),
            }
            if rows.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        // A lost lease (noticed by the renewal task) or an earlier failure stops it.
        let last = rows.last().and_then(|row| u64::try_from(row.seq).ok());
        if failure_of(&hold.failure).is_none()
            && let Err(e) = put_images_retrying(&leases, &hold, &images).await
        {
            tracing::warn!(session = %id, error = %e, "keeping an image in PostgreSQL failed");
            fail(&hold.failure, e.kind, e.message);
        }
        if failure_of(&hold.failure).is_none() && !rows.is_empty() {
            let started = Instant::now();
            let committed = commit_retrying(&leases, &committer, &hold, rows).await;
            let stats = &leases.stats;
            let counter = if committed.is_ok() { &stats.commits } else { &stats.errors };
            counter.fetch_add(1, Ordering::Relaxed);
            stats.commit_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            match committed {
                Ok(()) => {
                    if let (Some(notify), Some(seq)) = (&watcher, last) {
                        notify(seq);
                    }
                }
                Err(e) => {
                    tracing::warn!(session = %id, error = %e, "appending to PostgreSQL failed");
                    fail(&hold.failure, e.kind, e.message);
                }
            }
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

/// Tries a write again while the database cannot be reached: with backoff, for as long
/// as the lease lasts (past that another node may have taken the session over), and not
/// once the lease is known to be lost.
struct Retry<'a> {
    leases: &'a Leases,
    hold: &'a Hold,
    deadline: Instant,
    backoff: Duration,
}

impl<'a> Retry<'a> {
    fn new(leases: &'a Leases, hold: &'a Hold) -> Self {
        Retry { leases, hold, deadline: Instant::now() + leases.ttl, backoff: FIRST_BACKOFF }
    }

    /// The writer's failure, when its lease was lost meanwhile (the renewal noticed):
    /// the writer stops.
    fn still_held(&self) -> Result<(), SessionError> {
        failure_of(&self.hold.failure).map_or(Ok(()), Err)
    }

    /// After a try of `what` failed with `error`: waits and returns `Ok` when it may be
    /// tried again (the database was unavailable and the lease still lasts), else gives
    /// `error` back.
    async fn again(&mut self, what: &str, error: SessionError) -> Result<(), SessionError> {
        if error.kind != SessionErrorKind::Unavailable || Instant::now() + self.backoff > self.deadline {
            return Err(error);
        }
        tracing::warn!(session = %self.hold.id, error = %error, retry_in_ms = self.backoff.as_millis() as u64, "the database is unavailable; {what} will be tried again");
        self.leases.stats.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Ok(())
    }
}

/// Keeps images' bytes, tried again as a commit is ([`Retry`]).
async fn put_images_retrying(
    leases: &Leases,
    hold: &Hold,
    images: &[(String, Arc<[u8]>)],
) -> Result<(), SessionError> {
    if images.is_empty() {
        return Ok(());
    }
    let mut retry = Retry::new(leases, hold);
    loop {
        retry.still_held()?;
        match put_images(leases, &hold.id, images).await {
            Ok(()) => return Ok(()),
            Err(error) => retry.again("keeping the images", error).await?,
        }
    }
}

/// Keeps images' bytes (content-addressed: a second copy changes nothing) in one
/// statement, if this store still holds the session's lease, as a commit checks it: the
/// session's row is locked (`FOR SHARE`, so a takeover waits for this statement) and
/// the images are inserted only from it. Without the lease nothing is written.
async fn put_images(leases: &Leases, id: &str, images: &[(String, Arc<[u8]>)]) -> Result<(), SessionError> {
    let sha256: Vec<&str> = images.iter().map(|(sha256, _)| sha256.as_str()).collect();
    let data: Vec<&[u8]> = images.iter().map(|(_, data)| &data[..]).collect();
    let client = leases.pool.get().await?;
    let row = client
        .query_one(
            "WITH l AS (
                SELECT id FROM keel_sessions
                WHERE id = $1 AND lease_owner = $4 AND lease_expires > now()
                FOR SHARE
             ), i AS (
                INSERT INTO keel_images (session_id, sha256, data)
                SELECT l.id, u.sha256, u.data FROM l, unnest($2::text[], $3::bytea[]) AS u(sha256, data)
                ON CONFLICT DO NOTHING
             )
             SELECT count(*) FROM l",
            &[&id, &sha256, &data, &leases.owner],
        )
        .await
        .map_err(crate::db_error)?;
    match row.try_get::<_, i64>(0).map_err(crate::db_error)? {
        0 => Err(lost(id)),
        _ => Ok(()),
    }
}

/// Commits `rows`, tried again while the database is unreachable ([`Retry`]). After a
/// failed try the batch may have been committed all the same (the connection dropped
/// before the answer), so the next try first asks how far the log goes.
async fn commit_retrying(
    leases: &Leases,
    committer: &Committer,
    hold: &Hold,
    mut rows: Vec<Row>,
) -> Result<(), SessionError> {
    let mut retry = Retry::new(leases, hold);
    let first = rows.first().map_or(0, |row| row.seq);
    let mut tried = false;
    loop {
        retry.still_held()?;
        let outcome = if tried {
            match leases.committed_through(&hold.id).await {
                Ok(Some(last)) if last >= first => return Ok(()),
                Ok(_) => committer.commit(&hold.id, rows).await,
                Err(e) => Err((e, rows)),
            }
        } else {
            committer.commit(&hold.id, rows).await
        };
        let (error, back): Failed = match outcome {
            Ok(()) => return Ok(()),
            Err(failed) => failed,
        };
        if back.is_empty() {
            return Err(error);
        }
        retry.again("the commit", error).await?;
        rows = back;
        tried = true;
    }
}
