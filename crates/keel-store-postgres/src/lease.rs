//! One writer per session across machines: a lease in the session's row
//! (`lease_owner`, `lease_expires`, database time), taken on open or create, renewed for
//! every session a store holds by one statement per tick, released on close, delete and
//! when a writer is dropped. A process that dies (kill -9) stops renewing; its leases
//! expire and another node takes the session over. Every commit checks the lease in
//! its statement, so a writer whose lease expired or was taken fails instead of writing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use keel_session::{SessionError, SessionErrorKind};

use crate::db_error;
use crate::pool::Pool;

/// The first failure of a writer, kept so every later append and sync reports it; the
/// renewal task sets it when a lease is lost.
pub(crate) type Failure = Arc<Mutex<Option<(SessionErrorKind, String)>>>;

/// Sets `failure` unless it holds one already (the first one is the cause).
pub(crate) fn fail(failure: &Failure, kind: SessionErrorKind, message: String) {
    let mut slot = match failure.lock() {
        Ok(slot) => slot,
        Err(poisoned) => poisoned.into_inner(),
    };
    if slot.is_none() {
        *slot = Some((kind, message));
    }
}

/// The failure recorded in `failure`, if any.
pub(crate) fn failure_of(failure: &Failure) -> Option<SessionError> {
    let guard = match failure.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.as_ref().map(|(kind, message)| SessionError::new(*kind, message.clone()))
}

/// "Being run elsewhere", the error of a session someone else holds.
pub(crate) fn locked(id: &str) -> SessionError {
    SessionError::new(
        SessionErrorKind::Locked,
        format!(
            "session {id} is being run elsewhere (another keel holds it); wait for it to finish, or fork it"
        ),
    )
}

/// The error of a writer whose lease is gone.
pub(crate) fn lost(id: &str) -> SessionError {
    SessionError::new(
        SessionErrorKind::Locked,
        format!(
            "session {id} is being run elsewhere: this node's lease on it expired or was taken over; this writer stopped"
        ),
    )
}

/// The outcome of a statement on session `id`'s row that reports how many rows it
/// `affected` and whether the row `exists`: held by someone else, or not there at all.
fn row_outcome(id: &str, affected: i64, exists: bool) -> Result<(), SessionError> {
    match (affected, exists) {
        (1.., _) => Ok(()),
        (_, true) => Err(locked(id)),
        (_, false) => Err(SessionError::new(SessionErrorKind::NotFound, format!("no session `{id}`"))),
    }
}

/// A session this store holds.
struct Held {
    /// Tells this hold from an earlier one of the same session.
    generation: u64,
    /// False while the lease is being taken.
    acquired: bool,
    failure: Failure,
}

/// The store's commit counters (see [`keel_session::StoreStats`]).
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) commits: AtomicU64,
    pub(crate) commit_us: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) errors: AtomicU64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> keel_session::StoreStats {
        keel_session::StoreStats {
            commits: self.commits.load(Ordering::Relaxed),
            commit_us: self.commit_us.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What a store's writers share: the pool, who this store is, and its leases.
pub(crate) struct Leases {
    pub(crate) pool: Pool,
    /// This store's owner name in `lease_owner`.
    pub(crate) owner: String,
    pub(crate) ttl: Duration,
    held: Mutex<HashMap<String, Held>>,
    generation: AtomicU64,
    /// Commit counters of the store's writers.
    pub(crate) stats: Stats,
}

/// A hold on a session: which one, and where its writer's failure goes.
#[derive(Clone)]
pub(crate) struct Hold {
    pub(crate) id: String,
    pub(crate) generation: u64,
    pub(crate) failure: Failure,
}

impl Leases {
    /// Leases of a store with owner name `owner`.
    pub(crate) fn new(pool: Pool, owner: String, ttl: Duration) -> Self {
        Leases {
            pool,
            owner,
            ttl,
            held: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            stats: Stats::default(),
        }
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        match self.held.lock() {
            Ok(held) => held,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The lease's length in seconds, as the statements take it.
    pub(crate) fn ttl_secs(&self) -> f64 {
        self.ttl.as_secs_f64()
    }

    /// Claims `id` in this store (before taking its lease), so two writers of one store
    /// cannot race for it; `Locked` when this store holds it already.
    fn claim(&self, id: &str) -> Result<Hold, SessionError> {
        let mut held = self.held();
        if held.contains_key(id) {
            return Err(locked(id));
        }
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let failure = Failure::default();
        held.insert(id.to_owned(), Held { generation, acquired: false, failure: Arc::clone(&failure) });
        Ok(Hold { id: id.to_owned(), generation, failure })
    }

    /// Forgets `hold` (after its lease was released or never taken).
    pub(crate) fn forget(&self, hold: &Hold) {
        let mut held = self.held();
        if held.get(&hold.id).is_some_and(|h| h.generation == hold.generation) {
            held.remove(&hold.id);
        }
    }

    fn mark_acquired(&self, hold: &Hold) {
        if let Some(h) = self.held().get_mut(&hold.id)
            && h.generation == hold.generation
        {
            h.acquired = true;
        }
    }

    /// Creates session `id`'s row with this store's lease on it; `None` when the id is
    /// taken, here or in the database (the caller picks another).
    pub(crate) async fn create(
        &self,
        id: &str,
        cwd: &str,
        parent: Option<(&str, i64)>,
    ) -> Result<Option<Hold>, SessionError> {
        let Ok(hold) = self.claim(id) else { return Ok(None) };
        let client = self.pool.get().await;
        let inserted = match client {
            Ok(client) => client
                .execute(
                    "INSERT INTO keel_sessions (id, cwd, created, parent_id, parent_seq, lease_owner, lease_expires)
                     VALUES ($1, $2, '', $3, $4, $5, now() + make_interval(secs => $6))
                     ON CONFLICT (id) DO NOTHING",
                    &[&id, &cwd, &parent.map(|p| p.0), &parent.map(|p| p.1), &self.owner, &self.ttl_secs()],
                )
                .await
                .map_err(db_error),
            Err(e) => Err(e),
        };
        match inserted {
            Ok(1) => {
                self.mark_acquired(&hold);
                Ok(Some(hold))
            }
            Ok(_) => {
                self.forget(&hold);
                Ok(None)
            }
            Err(e) => {
                self.forget(&hold);
                Err(e)
            }
        }
    }

    /// Takes the lease of existing session `id`: free, expired, or this store's own.
    /// `Locked` when someone else holds it, `NotFound` when there is no such session.
    pub(crate) async fn acquire(&self, id: &str) -> Result<Hold, SessionError> {
        let hold = self.claim(id)?;
        let result = self.take(id).await;
        match result {
            Ok(()) => {
                self.mark_acquired(&hold);
                Ok(hold)
            }
            Err(e) => {
                self.forget(&hold);
                Err(e)
            }
        }
    }

    async fn take(&self, id: &str) -> Result<(), SessionError> {
        let client = self.pool.get().await?;
        let row = client
            .query_one(
                "WITH t AS (
                    UPDATE keel_sessions SET lease_owner = $2, lease_expires = now() + make_interval(secs => $3)
                    WHERE id = $1 AND (lease_owner IS NULL OR lease_expires < now() OR lease_owner = $2)
                    RETURNING id
                 )
                 SELECT (SELECT count(*) FROM t), EXISTS (SELECT 1 FROM keel_sessions WHERE id = $1)",
                &[&id, &self.owner, &self.ttl_secs()],
            )
            .await
            .map_err(db_error)?;
        row_outcome(id, row.get(0), row.get(1))
    }

    /// Gives `hold`'s lease back and forgets it.
    pub(crate) async fn release(&self, hold: &Hold) -> Result<(), SessionError> {
        let result = match self.pool.get().await {
            Ok(client) => client
                .execute(
                    "UPDATE keel_sessions SET lease_owner = NULL, lease_expires = NULL
                     WHERE id = $1 AND lease_owner = $2",
                    &[&hold.id, &self.owner],
                )
                .await
                .map(drop)
                .map_err(db_error),
            Err(e) => Err(e),
        };
        // Forgotten only now: until the row is released, this store's own open would
        // take it back and the release would then drop the new lease.
        self.forget(hold);
        result
    }

    /// Deletes session `id` unless someone holds it.
    pub(crate) async fn delete(&self, id: &str) -> Result<(), SessionError> {
        let hold = self.claim(id)?;
        let result = self.delete_row(id).await;
        self.forget(&hold);
        result
    }

    async fn delete_row(&self, id: &str) -> Result<(), SessionError> {
        let client = self.pool.get().await?;
        let row = client
            .query_one(
                "WITH d AS (
                    DELETE FROM keel_sessions
                    WHERE id = $1 AND (lease_owner IS NULL OR lease_expires < now() OR lease_owner = $2)
                    RETURNING id
                 ), images AS (
                    DELETE FROM keel_images WHERE session_id IN (SELECT id FROM d)
                 )
                 SELECT (SELECT count(*) FROM d), EXISTS (SELECT 1 FROM keel_sessions WHERE id = $1)",
                &[&id, &self.owner],
            )
            .await
            .map_err(db_error)?;
        row_outcome(id, row.get(0), row.get(1))
    }

    /// The last seq stored of session `id`, if this store still holds its lease (`Locked`
    /// when not): after a commit whose answer was lost, whether it went through.
    pub(crate) async fn committed_through(&self, id: &str) -> Result<Option<i64>, SessionError> {
        let client = self.pool.get().await?;
        let row = client
            .query_one(
                "SELECT (SELECT max(seq) FROM keel_events WHERE session_id = $1),
                        EXISTS (SELECT 1 FROM keel_sessions
                                WHERE id = $1 AND lease_owner = $2 AND lease_expires > now())",
                &[&id, &self.owner],
            )
            .await
            .map_err(db_error)?;
        let held: bool = row.try_get(1).map_err(db_error)?;
        if !held {
            return Err(lost(id));
        }
        row.try_get(0).map_err(db_error)
    }

    /// Renews every lease this store holds in one statement; a lease that was not
    /// renewed (expired, or taken by another node) fails its writer.
    pub(crate) async fn renew(&self) -> Result<usize, SessionError> {
        let snapshot: Vec<(String, u64)> = self
            .held()
            .iter()
            .filter(|(_, h)| h.acquired)
            .map(|(id, h)| (id.clone(), h.generation))
            .collect();
        if snapshot.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = snapshot.iter().map(|(id, _)| id.as_str()).collect();
        let client = self.pool.get().await?;
        let rows = client
            .query(
                // Rows locked in id order (`k`), as grouped commits lock them: two
                // statements taking many rows in different orders could deadlock.
                "WITH k AS (
                    SELECT id FROM keel_sessions
                    WHERE id = ANY($1) AND lease_owner = $2 AND lease_expires > now()
                    ORDER BY id FOR UPDATE
                 )
                 UPDATE keel_sessions s SET lease_expires = now() + make_interval(secs => $3)
                 FROM k WHERE s.id = k.id
                 RETURNING s.id",
                &[&ids, &self.owner, &self.ttl_secs()],
            )
            .await
            .map_err(db_error)?;
        let renewed: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
        let held = self.held();
        for (id, generation) in &snapshot {
            if renewed.contains(id) {
                continue;
            }
            if let Some(h) = held.get(id)
                && h.generation == *generation
            {
                tracing::warn!(session = %id, "the lease on this session was lost");
                let e = lost(id);
                fail(&h.failure, e.kind, e.message);
            }
        }
        Ok(renewed.len())
    }
}

/// Renews the store's leases every `period` until the store is dropped.
pub(crate) async fn renew_forever(leases: Weak<Leases>, period: Duration) {
    let mut ticks = tokio::time::interval(period.max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(leases) = leases.upgrade() else { return };
        if let Err(e) = leases.renew().await {
            // Retried next tick; a lease that expires meanwhile fails its writer then.
            tracing::warn!(error = %e, "renewing session leases failed");
        }
    }
}

/// A name for this store in `lease_owner`: the process id and 64 random bits.
pub(crate) fn owner_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    format!("{}-{:016x}", std::process::id(), hasher.finish())
}
