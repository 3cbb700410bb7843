//! keel's session store in PostgreSQL.
//!
//! - Tables `keel_sessions` and `keel_events` (`PRIMARY KEY (session_id, seq)`), created
//!   by migrations on connect ([`PgStore::connect`]).
//! - One writer per session across machines: opening or creating a session takes a
//!   lease in its row (owner and expiry, database time), renewed by one statement per
//!   tick for every session the store holds, released by
//!   [`keel_session::Session::close`]; a process that dies stops renewing and its leases
//!   expire ([`PgOptions::lease_ttl`]). Every commit checks the lease.
//! - Statements go through a small pool of pipelined connections: a store needs a few
//!   connections however many sessions it holds.
//! - Appends go to a writer task per session ([`PgWriter`]) and are committed in order;
//!   a sync waits until everything before it is committed, so an event acknowledged as
//!   durable is. An insert whose seq exists already fails: a stale writer never forks
//!   history.
//! - The store owns a small tokio runtime, so its blocking [`SessionStore`] methods and
//!   blocking syncs work from any thread, inside an async runtime or not, without
//!   deadlocking a current-thread executor. Async callers run them on a blocking thread.

mod commit;
mod lease;
mod listen;
mod options;
mod pool;
mod rows;
mod schema;
mod tls;
mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{StreamExt, pin_mut};
use keel_session::{
    ChangeNotify, Event, EventKind, MAX_SIGNAL_BYTES, ParentRef, Projection, Session, SessionError,
    SessionErrorKind, SessionStore, SessionSummary, SignalNotify, SpawnRef,
};
use tokio_postgres::config::SslMode;
use tokio_postgres::{Client, Config};

use crate::lease::Leases;
use crate::pool::Pool;
pub use options::PgOptions;
pub use writer::PgWriter;

/// Errors of PostgreSQL as session errors (kind `Io`), with the server's message.
pub(crate) fn db_error(e: tokio_postgres::Error) -> SessionError {
    let kind = if transient(&e) { SessionErrorKind::Unavailable } else { SessionErrorKind::Io };
    let message = match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {}", db.message()),
        None => {
            // The causes too (a TLS handshake's says which certificate check failed).
            let mut message = format!("PostgreSQL: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message
        }
    };
    SessionError::new(kind, message).caused_by(e)
}

/// Whether `e` says the database cannot be reached now rather than that the statement is
/// wrong: a lost or refused connection, or a server that is shutting down, starting or
/// out of connections (SQLSTATE class 08, 57P01–57P03, 53300).
fn transient(e: &tokio_postgres::Error) -> bool {
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300");
    }
    if e.is_closed() {
        return true;
    }
    // A network failure, not a refused certificate (also an I/O error, of kind
    // InvalidData) or a bad configuration.
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return matches!(
                io.kind(),
                ConnectionRefused
                    | ConnectionReset
                    | ConnectionAborted
                    | NotConnected
                    | BrokenPipe
                    | UnexpectedEof
                    | TimedOut
                    | HostUnreachable
                    | NetworkUnreachable
                    | AddrNotAvailable
                    | Interrupted
            );
        }
        source = cause.source();
    }
    false
}

/// Sessions in a PostgreSQL database.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    /// The pool, this store's owner name and the leases it holds (writers share it).
    leases: Arc<Leases>,
    /// Commits the writers' batches, grouped across sessions.
    committer: commit::Committer,
    /// Called on each commit notice; the listener starts with the first watcher.
    watchers: std::sync::Mutex<Vec<ChangeNotify>>,
    /// Called on each signal (`keel_signals`); the listener starts with the first watcher.
    signal_watchers: std::sync::Mutex<Vec<SignalNotify>>,
    /// Whether the listener runs.
    listening: std::sync::atomic::AtomicBool,
}

impl Inner {
    fn watchers(&self) -> Vec<ChangeNotify> {
        match self.watchers.lock() {
            Ok(w) => w.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn signal_watchers(&self) -> Vec<SignalNotify> {
        match self.signal_watchers.lock() {
            Ok(w) => w.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, so it is safe inside another runtime.
            runtime.shutdown_background();
        }
    }
}

impl PgStore {
    /// Starts the listener for commit notices and signals, once.
    fn listen(&self) {
        if !self.inner.listening.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.inner.handle.spawn(listen::run(Arc::downgrade(&self.inner)));
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("host", &self.inner.leases.pool.config().get_hosts())
            .field("dbname", &self.inner.leases.pool.config().get_dbname())
            .field("owner", &self.inner.leases.owner)
            .field("tls", &self.inner.leases.pool.tls().enabled())
            .finish_non_exhaustive()
    }
}

fn invalid(message: String) -> SessionError {
    SessionError::new(SessionErrorKind::Invalid, message)
}

/// Ids are what keel makes (`20261130-051926-3fa9c1`): short, `[A-Za-z0-9_-]`.
fn check_id(id: &str) -> Result<(), SessionError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(invalid(format!("`{id}` is not a session id"))) }
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, TLS with
    /// `?sslmode=require|verify-ca|verify-full`) with the options of the environment
    /// ([`PgOptions::from_env`]), applies migrations, and checks the connection.
    pub fn connect(url: &str) -> Result<PgStore, SessionError> {
        Self::connect_with(url, PgOptions::from_env()?)
    }

    /// Connects to `url` with `options`, applies migrations, and checks the connection.
    pub fn connect_with(url: &str, options: PgOptions) -> Result<PgStore, SessionError> {
        let split = tls::split_url(url)?;
        let mut config: Config =
            split.url.parse().map_err(|e| invalid(format!("not a PostgreSQL URL: {e}")))?;
        let ca_file = split.root_cert.or_else(|| options.ca_file.as_ref().map(|p| p.display().to_string()));
        // `host=… sslmode=require` (not a URL) asks for TLS too.
        let mode = match (split.mode, config.get_ssl_mode()) {
            (tls::Mode::Plain, SslMode::Require) => tls::Mode::VerifyChain,
            (tls::Mode::Plain, _) => {
                config.ssl_mode(SslMode::Disable);
                tls::Mode::Plain
            }
            (mode, _) => mode,
        };
        let tls = tls::Tls::new(mode, ca_file.as_deref())?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.keepalives(true).keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("keel");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("keel-pg")
            .enable_all()
            .build()
            .map_err(|e| {
                SessionError::new(SessionErrorKind::Io, format!("cannot start the store's runtime: {e}"))
            })?;
        let handle = runtime.handle().clone();
        let pool = Pool::new(config, tls, options.pool_size);
        let leases = Arc::new(Leases::new(pool, lease::owner_name(), options.lease_ttl));
        let committer = commit::Committer::start(Arc::clone(&leases), &handle);
        let store = PgStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                handle,
                leases: Arc::clone(&leases),
                committer,
                watchers: std::sync::Mutex::new(Vec::new()),
                signal_watchers: std::sync::Mutex::new(Vec::new()),
                listening: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        store.block(async move {
            // Migrations run in a transaction, on a connection not shared yet, which
            // then joins the pool.
            let mut client = leases.pool.connect().await?;
            schema::migrate(&mut client).await?;
            leases.pool.adopt(client).await;
            Ok(())
        })?;
        let period = options.renew_every.unwrap_or(options.lease_ttl / 3);
        store.inner.handle.spawn(lease::renew_forever(Arc::downgrade(&store.inner.leases), period));
        Ok(store)
    }

    /// Runs `work` on the store's runtime and waits for it (from any thread).
    fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, SessionError>> + Send + 'static,
    ) -> Result<T, SessionError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.inner.handle.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv().map_err(|_| SessionError::new(SessionErrorKind::Io, "the PostgreSQL store stopped"))?
    }

    fn create_with(&self, cwd: &str, parent: Option<ParentRef>) -> Result<Session, SessionError> {
        self.create_drawing(cwd, parent, None, keel_session::new_session_id)
    }

    /// [`PgStore::create_with`] with ids from `draw` (a test draws a taken one).
    fn create_drawing(
        &self,
        cwd: &str,
        parent: Option<ParentRef>,
        spawned_by: Option<SpawnRef>,
        mut draw: impl FnMut() -> String + Send + 'static,
    ) -> Result<Session, SessionError> {
        let leases = Arc::clone(&self.inner.leases);
        let cwd_owned = cwd.to_owned();
        let parent_row = parent.as_ref().map(|p| (p.id.clone(), i64::try_from(p.seq).unwrap_or(i64::MAX)));
        let hold = self.block(async move {
            // Ids are partly random: a taken one (vanishingly rare) is drawn again.
            for _ in 0..8 {
                let id = draw();
                let parent = parent_row.as_ref().map(|(pid, seq)| (pid.as_str(), *seq));
                if let Some(hold) = leases.create(&id, &cwd_owned, parent).await? {
                    return Ok(hold);
                }
            }
            Err(SessionError::new(SessionErrorKind::Io, "could not draw a free session id"))
        })?;
        let id = hold.id.clone();
        let writer = PgWriter::start(
            Arc::clone(&self.inner.leases),
            self.inner.committer.clone(),
            hold,
            &self.inner.handle,
        );
        match spawned_by {
            Some(spawned_by) => Session::create_spawned(id, cwd, spawned_by, Box::new(writer)),
            None => Session::create(id, cwd, parent, Box::new(writer)),
        }
    }

    /// The full id for an id or a unique prefix of one.
    fn resolve(&self, id: &str) -> Result<String, SessionError> {
        check_id(id)?;
        let inner = Arc::clone(&self.inner);
        let id = id.to_owned();
        self.block(async move {
            let rows = with_shared(&inner, |client| {
                let id = id.clone();
                async move {
                    client
                        .query(
                            "SELECT id FROM keel_sessions WHERE id = $1 OR starts_with(id, $1) ORDER BY id = $1 DESC LIMIT 3",
                            &[&id],
                        )
                        .await
                }
            })
            .await?;
            let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
            match ids.as_slice() {
                [] => Err(SessionError::new(SessionErrorKind::NotFound, format!("no session `{id}`"))),
                [only] => Ok(only.clone()),
                [first, ..] if *first == id => Ok(first.clone()),
                _ => Err(invalid(format!("`{id}` matches several sessions; give more of the id"))),
            }
        })
    }
}

/// Runs `query` on a pooled connection.
async fn with_shared<T, F, Fut>(inner: &Inner, query: F) -> Result<T, SessionError>
where
    F: Fn(Arc<Client>) -> Fut,
    Fut: Future<Output = Result<T, tokio_postgres::Error>>,
{
    let client = inner.leases.pool.get().await?;
    query(client).await.map_err(db_error)
}

/// Every event of session `id` (not locked), checked like a load.
async fn read_events(inner: &Inner, id: &str) -> Result<Vec<Event>, SessionError> {
    let rows = with_shared(inner, |client| async move {
        client
            .query(
                "SELECT seq, kind, time, payload::text FROM keel_events WHERE session_id = $1 ORDER BY seq",
                &[&id],
            )
            .await
    })
    .await?;
    let mut projection = Projection::new();
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let event = rows::from_row(row.get(0), row.get(1), row.get(2), row.get(3))?;
        projection.apply(event.clone())?;
        events.push(event);
    }
    if events.is_empty() {
        return Err(SessionError::new(SessionErrorKind::NotFound, format!("no session `{id}`")));
    }
    fill_images(inner, id, &mut events).await?;
    Ok(events)
}

/// Puts the bytes back into the images `events` name; one whose row is missing or does
/// not match its hash stays without bytes (the model is told so).
async fn fill_images(inner: &Inner, id: &str, events: &mut [Event]) -> Result<(), SessionError> {
    if events.iter().all(|e| e.kind.images().is_empty()) {
        return Ok(());
    }
    let rows = with_shared(inner, |client| async move {
        client.query("SELECT sha256, data FROM keel_images WHERE session_id = $1", &[&id]).await
    })
    .await?;
    let kept: std::collections::HashMap<String, Vec<u8>> =
        rows.iter().map(|row| (row.get::<_, String>(0), row.get::<_, Vec<u8>>(1))).collect();
    for image in events.iter_mut().flat_map(|e| e.kind.images_mut()) {
        if image.data.is_none() {
            image.data =
                kept.get(&image.sha256).filter(|data| image.matches(data)).map(|data| Arc::from(&data[..]));
        }
    }
    Ok(())
}

/// Every session's summary, from one streamed query.
async fn list_all(inner: &Inner) -> Result<Vec<SessionSummary>, SessionError> {
    let sessions = with_shared(inner, |client| async move {
        client.query("SELECT id, extract(epoch FROM modified)::float8 FROM keel_sessions", &[]).await
    })
    .await?;
    let mut modified = std::collections::HashMap::new();
    for row in &sessions {
        let secs: f64 = row.get(1);
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs.max(0.0));
        modified.insert(row.get::<_, String>(0), time);
    }
    let client = with_shared(inner, |client| async move { Ok(client) }).await?;
    let stream = client
        .query_raw(
            "SELECT session_id, seq, kind, time, payload::text FROM keel_events ORDER BY session_id, seq",
            std::iter::empty::<&str>(),
        )
        .await
        .map_err(db_error)?;
    pin_mut!(stream);
    let mut out = Vec::new();
    let mut current: Option<(String, Projection, u64, bool)> = None;
    let finish = |current: Option<(String, Projection, u64, bool)>, out: &mut Vec<SessionSummary>| {
        if let Some((id, projection, events, ok)) = current
            && ok
        {
            let time = modified.get(&id).copied().unwrap_or(SystemTime::UNIX_EPOCH);
            out.push(SessionSummary::from_projection(id, &projection, time, events));
        }
    };
    while let Some(row) = stream.next().await {
        let row = row.map_err(db_error)?;
        let id: String = row.get(0);
        if current.as_ref().is_none_or(|(cur, ..)| *cur != id) {
            finish(current.take(), &mut out);
            current = Some((id, Projection::new(), 0, true));
        }
        if let Some((_, projection, events, ok)) = current.as_mut() {
            // One unreadable session must not hide the others.
            *ok = *ok
                && rows::from_row(row.get(1), row.get(2), row.get(3), row.get(4))
                    .and_then(|event| projection.apply(event))
                    .is_ok();
            *events += 1;
        }
    }
    finish(current.take(), &mut out);
    out.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| b.id.cmp(&a.id)));
    Ok(out)
}

impl SessionStore for PgStore {
    fn create(&self, cwd: &str) -> Result<Session, SessionError> {
        self.create_with(cwd, None)
    }

    fn create_spawned(&self, cwd: &str, spawned_by: SpawnRef) -> Result<Session, SessionError> {
        self.create_drawing(cwd, None, Some(spawned_by), keel_session::new_session_id)
    }

    fn open(&self, id: &str) -> Result<Session, SessionError> {
        let id = self.resolve(id)?;
        let inner = Arc::clone(&self.inner);
        let (hold, events) = self.block(async move {
            let hold = inner.leases.acquire(&id).await?;
            // Read after the lease is taken: nobody else appends from here on.
            match read_events(&inner, &id).await {
                Ok(events) => Ok((hold, events)),
                Err(e) => {
                    if let Err(release) = inner.leases.release(&hold).await {
                        tracing::warn!(session = %id, error = %release, "releasing a lease failed");
                    }
                    Err(e)
                }
            }
        })?;
        // The writer owns the lease from here: dropping it on an error releases it.
        let writer = PgWriter::start(
            Arc::clone(&self.inner.leases),
            self.inner.committer.clone(),
            hold,
            &self.inner.handle,
        );
        let session_id = match events.first().map(|e| &e.kind) {
            Some(EventKind::SessionHeader(header)) => header.id.clone(),
            _ => {
                return Err(SessionError::new(
                    SessionErrorKind::Corrupt,
                    "the log does not start with its header",
                ));
            }
        };
        let mut projection = Projection::new();
        for event in events {
            projection.apply(event)?;
        }
        Ok(Session::resume(session_id, projection, Box::new(writer)))
    }

    fn fork(&self, id: &str, at: Option<u64>) -> Result<Session, SessionError> {
        let events = self.read(id)?;
        let (parent_id, cwd) = match events.first().map(|e| &e.kind) {
            Some(EventKind::SessionHeader(header)) => (header.id.clone(), header.cwd.clone()),
            _ => {
                return Err(SessionError::new(
                    SessionErrorKind::Corrupt,
                    "the log does not start with its header",
                ));
            }
        };
        let last = events.last().map_or(0, |e| e.seq);
        let at = at.unwrap_or(last);
        if at > last {
            return Err(invalid(format!("session {parent_id} ends at seq {last}; cannot fork at {at}")));
        }
        let mut session = self.create_with(&cwd, Some(ParentRef { id: parent_id, seq: at }))?;
        for event in events.into_iter().skip(1).take_while(|e| e.seq <= at) {
            session.append_copy(event)?;
        }
        session.sync()?;
        session.repair()?;
        Ok(session)
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let inner = Arc::clone(&self.inner);
        self.block(async move { list_all(&inner).await })
    }

    fn read(&self, id: &str) -> Result<Vec<Event>, SessionError> {
        let id = self.resolve(id)?;
        let inner = Arc::clone(&self.inner);
        self.block(async move { read_events(&inner, &id).await })
    }

    fn read_after(&self, id: &str, after: u64) -> Result<Vec<Event>, SessionError> {
        // The full id (followers know it): no prefix lookup on every read.
        check_id(id)?;
        let id = id.to_owned();
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let inner = Arc::clone(&self.inner);
        self.block(async move {
            let rows = with_shared(&inner, |client| {
                let id = id.clone();
                async move {
                    client
                        .query(
                            "SELECT seq, kind, time, payload::text FROM keel_events
                             WHERE session_id = $1 AND seq > $2 ORDER BY seq",
                            &[&id, &after],
                        )
                        .await
                }
            })
            .await?;
            let mut events = rows
                .into_iter()
                .map(|row| rows::from_row(row.get(0), row.get(1), row.get(2), row.get(3)))
                .collect::<Result<Vec<_>, _>>()?;
            fill_images(&inner, &id, &mut events).await?;
            Ok(events)
        })
    }

    fn watch(&self, notify: ChangeNotify) -> bool {
        match self.inner.watchers.lock() {
            Ok(mut w) => w.push(notify),
            Err(poisoned) => poisoned.into_inner().push(notify),
        }
        self.listen();
        true
    }

    fn signal(&self, id: &str, message: &str) -> Result<bool, SessionError> {
        check_id(id)?;
        if message.len() > MAX_SIGNAL_BYTES {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("a signal has at most {MAX_SIGNAL_BYTES} bytes (this one has {})", message.len()),
            ));
        }
        let payload = format!("{id}:{message}");
        let leases = Arc::clone(&self.inner.leases);
        self.block(async move {
            let client = leases.pool.get().await?;
            client
                .execute("SELECT pg_notify($1, $2)", &[&listen::SIGNALS, &payload])
                .await
                .map_err(db_error)?;
            Ok(true)
        })
    }

    fn stats(&self) -> keel_session::StoreStats {
        self.inner.leases.stats.snapshot()
    }

    fn watch_signals(&self, notify: SignalNotify) -> bool {
        match self.inner.signal_watchers.lock() {
            Ok(mut w) => w.push(notify),
            Err(poisoned) => poisoned.into_inner().push(notify),
        }
        self.listen();
        true
    }

    fn delete(&self, id: &str) -> Result<(), SessionError> {
        let id = self.resolve(id)?;
        let inner = Arc::clone(&self.inner);
        // Only a session nobody is writing can go.
        self.block(async move { inner.leases.delete(&id).await })
    }
}

#[cfg(test)]
mod tests {
    //! Against a real PostgreSQL (`KEEL_TEST_DATABASE_URL`; see `keel_testkit::prereq`).

    use super::*;

    /// Issue 30, item 7: a drawn id that is taken is drawn again (it once failed the create
    /// with `session_locked`).
    #[test]
    fn a_taken_id_is_drawn_again() {
        let Some(url) = keel_testkit::prereq::database_url() else { return };
        let store = PgStore::connect(&url).unwrap();
        let taken = store.create("/work/first").unwrap();
        let taken_id = taken.id().to_owned();
        let draws = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&draws);
        let again = taken_id.clone();
        let second = store
            .create_drawing("/work/second", None, None, move || {
                match counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                    0 => again.clone(),
                    _ => keel_session::new_session_id(),
                }
            })
            .unwrap();
        assert_ne!(second.id(), taken_id);
        assert_eq!(draws.load(std::sync::atomic::Ordering::SeqCst), 2);
        let summaries = store.list().unwrap();
        let folder = |id: &str| summaries.iter().find(|s| s.id == id).map(|s| s.cwd.clone());
        assert_eq!(folder(&taken_id).as_deref(), Some("/work/first"), "the taken session is untouched");
        drop((taken, second));
    }
}
