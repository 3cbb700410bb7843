//! Commits, grouped across sessions. Every writer hands its batch to the store's
//! committer and waits; the committer commits whatever batches have arrived, of any
//! number of sessions, in one statement (one transaction, one WAL flush, one pass of
//! PostgreSQL's commit-time NOTIFY lock, which serializes notifying transactions), up
//! to two statements in flight. Each session's lease is checked in that statement; a
//! session whose lease is gone gets `Locked` and nothing of it is written, the others
//! commit. When the grouped statement fails (a stale writer's seq exists already), each
//! batch is committed on its own, so only the culprit fails.

use std::collections::HashMap;
use std::sync::Arc;

use keel_session::{SessionError, SessionErrorKind};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::db_error;
use crate::lease::{Leases, lost};
use crate::rows::Row;

/// Most events in one grouped statement.
const MAX_GROUP_EVENTS: usize = 4096;
/// Grouped statements in flight at once.
const IN_FLIGHT: usize = 2;

/// A batch that was not committed: why, and its rows back (to retry them).
pub(crate) type Failed = (SessionError, Vec<Row>);

/// One session's batch and who waits for it.
struct Job {
    id: String,
    rows: Vec<Row>,
    done: oneshot::Sender<Result<(), Failed>>,
}

impl Job {
    fn answer(self, result: Result<(), SessionError>) {
        let _ = self.done.send(result.map_err(|e| (e, self.rows)));
    }
}

/// The store's committer: hand it a session's batch and wait for the commit.
#[derive(Clone)]
pub(crate) struct Committer {
    tx: mpsc::UnboundedSender<Job>,
}

impl Committer {
    /// Starts the committer of a store on `runtime`.
    pub(crate) fn start(leases: Arc<Leases>, runtime: &tokio::runtime::Handle) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(run(leases, rx));
        Committer { tx }
    }

    /// Commits session `id`'s `rows` (grouped with other sessions' batches); on failure
    /// the rows come back with the error.
    pub(crate) async fn commit(&self, id: &str, rows: Vec<Row>) -> Result<(), Failed> {
        let (done, wait) = oneshot::channel();
        let stopped = || SessionError::new(SessionErrorKind::Io, "the PostgreSQL store's committer stopped");
        if let Err(mpsc::error::SendError(job)) = self.tx.send(Job { id: id.to_owned(), rows, done }) {
            return Err((stopped(), job.rows));
        }
        wait.await.map_err(|_| (stopped(), Vec::new()))?
    }
}

async fn run(leases: Arc<Leases>, mut rx: mpsc::UnboundedReceiver<Job>) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // Wait for a free slot first: batches keep arriving meanwhile and join the group.
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else { return };
        let mut events = first.rows.len();
        let mut jobs = vec![first];
        while events < MAX_GROUP_EVENTS {
            match rx.try_recv() {
                Ok(job) => {
                    events += job.rows.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let leases = Arc::clone(&leases);
        tokio::spawn(async move {
            commit_jobs(&leases, jobs).await;
            drop(permit);
        });
    }
}

/// Commits `jobs` and answers each.
async fn commit_jobs(leases: &Leases, jobs: Vec<Job>) {
    if jobs.len() > 1 {
        match commit_group(leases, &jobs).await {
            Ok(mut committed) => {
                for job in jobs {
                    let result = match committed.remove(job.id.as_str()) {
                        Some(n) if n == job.rows.len() => Ok(()),
                        _ => Err(lost(&job.id)),
                    };
                    job.answer(result);
                }
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, sessions = jobs.len(), "a grouped commit failed; committing each alone")
            }
        }
    }
    for job in jobs {
        let result = commit_one(leases, &job.id, &job.rows).await;
        job.answer(result);
    }
}

/// Commits several sessions' batches in one statement; the events inserted per session
/// whose lease holds (absent: lease gone, nothing written for it).
async fn commit_group(leases: &Leases, jobs: &[Job]) -> Result<HashMap<String, usize>, SessionError> {
    let events: usize = jobs.iter().map(|j| j.rows.len()).sum();
    let mut sids = Vec::with_capacity(events);
    let mut seqs = Vec::with_capacity(events);
    let mut kinds = Vec::with_capacity(events);
    let mut times = Vec::with_capacity(events);
    let mut payloads = Vec::with_capacity(events);
    let (mut ids, mut created, mut has_header, mut last) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for job in jobs {
        for row in &job.rows {
            sids.push(job.id.as_str());
            seqs.push(row.seq);
            kinds.push(row.kind);
            times.push(row.time.as_str());
            payloads.push(row.payload.as_str());
        }
        let header = job.rows.iter().find_map(|r| r.header.as_ref());
        ids.push(job.id.as_str());
        created.push(header.map(|h| h.created.as_str()).unwrap_or_default());
        has_header.push(header.is_some());
        last.push(job.rows.last().map_or(0, |r| r.seq));
    }
    let client = leases.pool.get().await?;
    // As `commit_one`, for many sessions: `k` checks each lease and locks the rows in id
    // order (as the renewal does, so the two never deadlock), `l` updates them, the
    // events of those sessions only are inserted, and each of them is notified.
    let rows = client
        .query(
            "WITH h AS (
                SELECT * FROM unnest($6::text[], $7::text[], $8::bool[], $9::bigint[])
                    AS h(sid, created, has_header, last_seq)
             ), k AS (
                SELECT id FROM keel_sessions
                WHERE id = ANY($6) AND lease_owner = $10 AND lease_expires > now()
                ORDER BY id FOR UPDATE
             ), l AS (
                UPDATE keel_sessions s
                SET modified = now(), created = CASE WHEN h.has_header THEN h.created ELSE s.created END
                FROM h, k
                WHERE s.id = h.sid AND s.id = k.id
                RETURNING s.id, h.last_seq
             ), e AS (
                INSERT INTO keel_events (session_id, seq, kind, time, payload)
                SELECT u.sid, u.seq, u.kind, u.time, u.payload::json
                FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[])
                    AS u(sid, seq, kind, time, payload)
                JOIN l ON l.id = u.sid
                RETURNING session_id
             )
             SELECT l.id, (SELECT count(*) FROM e WHERE e.session_id = l.id),
                    pg_notify('keel_events', l.id || ':' || l.last_seq::text)
             FROM l",
            &[&sids, &seqs, &kinds, &times, &payloads, &ids, &created, &has_header, &last, &leases.owner],
        )
        .await
        .map_err(db_error)?;
    let mut committed = HashMap::with_capacity(rows.len());
    for row in rows {
        let id: String = row.try_get(0).map_err(db_error)?;
        let n: i64 = row.try_get(1).map_err(db_error)?;
        committed.insert(id, usize::try_from(n).unwrap_or(0));
    }
    Ok(committed)
}

/// Commits `rows` in one statement (so one transaction), if this store still holds the
/// session's lease. A lease gone, or a seq that exists already, means another writer got
/// there: this one fails instead of forking history.
async fn commit_one(leases: &Leases, id: &str, rows: &[Row]) -> Result<(), SessionError> {
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

#[cfg(test)]
mod tests {
    //! Against a real PostgreSQL (`KEEL_TEST_DATABASE_URL`; skipped when unset).

    use super::*;
    use crate::PgStore;
    use keel_session::{Event, EventKind, SessionStore, TurnStart};

    fn job(id: &str, seq: u64) -> (Job, oneshot::Receiver<Result<(), Failed>>) {
        let event = Event {
            seq,
            time: "2026-12-01T00:00:00.000Z".into(),
            kind: EventKind::TurnStart(TurnStart { turn: 1 }),
        };
        let row = crate::rows::to_row(&event, &mut Vec::new()).unwrap();
        let (done, wait) = oneshot::channel();
        (Job { id: id.to_owned(), rows: vec![row], done }, wait)
    }

    /// Commits one group of `(session, seq)` batches; each session's result.
    fn group(store: &PgStore, batches: &[(&str, u64)]) -> Vec<Result<(), SessionErrorKind>> {
        let (jobs, waits): (Vec<_>, Vec<_>) = batches.iter().map(|(id, seq)| job(id, *seq)).unzip();
        let leases = Arc::clone(&store.inner.leases);
        store
            .block(async move {
                commit_jobs(&leases, jobs).await;
                let mut out = Vec::new();
                for wait in waits {
                    out.push(wait.await.unwrap().map_err(|(e, _)| e.kind));
                }
                Ok(out)
            })
            .unwrap()
    }

    #[test]
    fn a_group_commits_the_sessions_it_may_and_fails_only_the_others() {
        let Some(url) = keel_testkit::prereq::database_url() else { return };
        let store = PgStore::connect(&url).unwrap();
        let other = PgStore::connect(&url).unwrap();
        let sessions: Vec<_> = (0..3).map(|i| store.create(&format!("/work/group{i}")).unwrap()).collect();
        let ids: Vec<String> = sessions.iter().map(|s| s.id().to_owned()).collect();
        let (a, b, c) = (ids[0].as_str(), ids[1].as_str(), ids[2].as_str());
        let len = |id: &str| other.read(id).unwrap().len();

        // Everyone holds its lease: one statement commits all three.
        assert_eq!(group(&store, &[(a, 1), (b, 1), (c, 1)]), vec![Ok(()), Ok(()), Ok(())]);
        assert_eq!((len(a), len(b), len(c)), (2, 2, 2));

        // c's lease was taken over: c fails, nothing of it is written; a and b commit.
        drop(other.block({
            let (leases, c) = (Arc::clone(&other.inner.leases), c.to_owned());
            async move {
                let client = leases.pool.get().await?;
                client
                    .execute("UPDATE keel_sessions SET lease_owner = 'someone-else' WHERE id = $1", &[&c])
                    .await
                    .map_err(db_error)
            }
        }));
        assert_eq!(
            group(&store, &[(a, 2), (b, 2), (c, 2)]),
            vec![Ok(()), Ok(()), Err(SessionErrorKind::Locked)]
        );
        assert_eq!((len(a), len(b), len(c)), (3, 3, 2));

        // a's seq 3 exists already (a stale writer): the group fails, each batch is then
        // committed alone, and only a fails.
        assert_eq!(group(&store, &[(a, 3)]), vec![Ok(())]);
        assert_eq!(group(&store, &[(a, 3), (b, 3)]), vec![Err(SessionErrorKind::Locked), Ok(())]);
        assert_eq!((len(a), len(b), len(c)), (4, 4, 2));
        drop(sessions);
    }
}
