//! The schema and its migrations, applied in order on connect.

use tokio_postgres::Client;

use crate::db_error;
use keel_session::SessionError;

/// Migrations by version; each runs once, in a transaction, under a lock so two
/// servers starting together do not race.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE keel_sessions (
        id text PRIMARY KEY,
        cwd text NOT NULL,
        created text NOT NULL,
        parent_id text,
        parent_seq bigint,
        modified timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE keel_events (
        session_id text NOT NULL REFERENCES keel_sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        kind text NOT NULL,
        time text NOT NULL,
        payload json NOT NULL,
        PRIMARY KEY (session_id, seq)
    );",
    ),
    // The lease: who writes the session and until when (database time). Replaces the
    // advisory lock on a connection per open session.
    (2, "ALTER TABLE keel_sessions ADD COLUMN lease_owner text, ADD COLUMN lease_expires timestamptz;"),
    // Images the log names by hash (`user/message` and `tool/result` `images`): written
    // before the event that names them, so before the session's row may exist (no
    // foreign key; a session's delete removes them).
    (
        3,
        "CREATE TABLE keel_images (
        session_id text NOT NULL,
        sha256 text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (session_id, sha256)
    );",
    ),
];

/// The advisory lock key that serializes migrations.
const MIGRATION_LOCK: i64 = 0x6b65_656c_0001;

/// Brings the schema up to date.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), SessionError> {
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(db_error)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS keel_migrations (version integer PRIMARY KEY)")
        .await
        .map_err(db_error)?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM keel_migrations", &[])
        .await
        .map_err(db_error)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tracing::info!(version, "applying keel schema migration");
        tx.batch_execute(sql).await.map_err(db_error)?;
        tx.execute("INSERT INTO keel_migrations (version) VALUES ($1)", &[version])
            .await
            .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}
