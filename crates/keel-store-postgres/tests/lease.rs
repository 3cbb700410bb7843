#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One writer per session across nodes (the lease), against a real PostgreSQL
//! (`KEEL_TEST_DATABASE_URL`; skipped with a note when unset).

use std::time::{Duration, Instant};

use keel_session::{EventKind, Session, SessionErrorKind, SessionStore};
use keel_store_postgres::{PgOptions, PgStore};
use keel_testkit::store::{record_crashed_turn, record_turn};

fn url() -> Option<String> {
    keel_testkit::prereq::database_url()
}

/// Runs SQL on a connection of its own.
fn sql(url: &str, query: &str, id: &str) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.execute(query, &[&id]).await.unwrap()
    })
}

/// A node `ttl` long leases.
fn node(url: &str, ttl_ms: u64) -> PgStore {
    PgStore::connect_with(url, PgOptions::default().with_lease_ttl(Duration::from_millis(ttl_ms))).unwrap()
}

/// Opens `id` on `store`, waiting while it is `Locked` (up to 10 s).
fn open_when_free(store: &PgStore, id: &str) -> (Session, Duration) {
    let started = Instant::now();
    loop {
        match store.open(id) {
            Ok(session) => return (session, started.elapsed()),
            Err(e) if e.kind == SessionErrorKind::Locked && started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("the session must become free: {e}"),
        }
    }
}

fn late_result(call_seq: u64) -> EventKind {
    EventKind::ToolResult(keel_session::ToolResultData {
        call_id: "x1".into(),
        name: "shell".into(),
        source_seq: call_seq,
        content: "late".into(),
        is_error: false,
        error_code: None,
        concludes_turn: false,
        duration_ms: None,
        change: None,
        images: Vec::new(),
    })
}

fn check_seqs(store: &PgStore, id: &str) -> usize {
    let seqs: Vec<u64> = store.read(id).unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    seqs.len()
}

/// A node killed with -9 stops renewing: its lease outlives it until it expires, then
/// another node opens the session and repairs the interrupted turn.
#[test]
fn a_dead_node_loses_the_session_when_its_lease_expires_and_another_resumes_it_repaired() {
    let Some(url) = url() else { return };
    let node_a = node(&url, 1_000);
    let node_b = node(&url, 1_000);
    let mut session = node_a.create("/work/lease").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    record_crashed_turn(&mut session, "crash");
    session.sync().unwrap();
    assert_eq!(node_b.open(&id).unwrap_err().kind, SessionErrorKind::Locked);

    // Node A's process dies: its runtime stops at once, nothing is released.
    drop(node_a);
    assert_eq!(node_b.open(&id).unwrap_err().kind, SessionErrorKind::Locked, "the lease outlives the node");
    let (mut resumed, waited) = open_when_free(&node_b, &id);
    assert!(waited < Duration::from_secs(3), "free once the lease expired, waited {waited:?}");
    let report = resumed.repair().unwrap();
    assert_eq!((report.outcome_unknown, report.not_started), (1, 1));
    keel_session::validate(resumed.messages()).unwrap();
    record_turn(&mut resumed, "after the failover");
    resumed.close().unwrap();
    drop(session);
    check_seqs(&node_b, &id);
}

/// A node that stalled past its lease (a pause, a partition) and was taken over fails
/// on its next commit with "being run elsewhere", and writes nothing.
#[test]
fn a_writer_whose_lease_was_taken_over_fails_instead_of_forking_history() {
    let Some(url) = url() else { return };
    let node_a = node(&url, 30_000);
    let node_b = node(&url, 30_000);
    let mut session = node_a.create("/work/takeover").unwrap();
    let id = session.id().to_owned();
    let call_seq = record_crashed_turn(&mut session, "crash");
    session.sync().unwrap();
    // Node A stalls until its lease is past.
    sql(&url, "UPDATE keel_sessions SET lease_expires = now() - interval '1 second' WHERE id = $1", &id);
    let mut theirs = node_b.open(&id).unwrap();
    theirs.repair().unwrap();
    record_turn(&mut theirs, "the new writer");
    theirs.sync().unwrap();
    let before = check_seqs(&node_b, &id);

    // Node A wakes up and writes.
    session.append(late_result(call_seq)).unwrap();
    let err = session.sync().unwrap_err();
    assert_eq!(
        (err.kind, err.message),
        (
            SessionErrorKind::Locked,
            format!(
                "session {id} is being run elsewhere: this node's lease on it expired or was taken over; this writer stopped"
            )
        )
    );
    assert!(session.append(late_result(call_seq)).is_err(), "a failed writer writes nothing more");
    drop(session);
    assert_eq!(check_seqs(&node_b, &id), before, "nothing of node A's is in the log");
    theirs.close().unwrap();
}

/// While a store holds a session, its renewals keep the lease (many lease lengths
/// later nobody else can open it, and its writes go through); close frees it at once.
#[test]
fn leases_are_renewed_while_held_and_released_on_close() {
    let Some(url) = url() else { return };
    let node_a = node(&url, 600);
    let node_b = node(&url, 600);
    let mut session = node_a.create("/work/renew").unwrap();
    let id = session.id().to_owned();
    std::thread::sleep(Duration::from_millis(2_000));
    assert_eq!(node_b.open(&id).unwrap_err().kind, SessionErrorKind::Locked);
    record_turn(&mut session, "still mine");
    session.sync().unwrap();
    session.close().unwrap();
    node_b.open(&id).unwrap().close().unwrap();
    node_b.delete(&id).unwrap();
}

/// A lease that expired (renewals failed to reach the database in time) fails its
/// writer even when nobody took the session: a lost lease is never silent.
#[test]
fn a_lost_lease_fails_the_writer_even_when_nobody_took_it() {
    let Some(url) = url() else { return };
    let store = node(&url, 600);
    let mut session = store.create("/work/lost").unwrap();
    let id = session.id().to_owned();
    sql(&url, "UPDATE keel_sessions SET lease_expires = now() - interval '1 second' WHERE id = $1", &id);
    // The next renewal (every 200 ms) finds it gone.
    std::thread::sleep(Duration::from_millis(500));
    let err = match session.append(EventKind::TurnStart(keel_session::TurnStart { turn: 1 })) {
        Err(e) => e,
        Ok(_) => session.sync().unwrap_err(),
    };
    assert_eq!(
        (err.kind, err.message),
        (
            SessionErrorKind::Locked,
            format!(
                "session {id} is being run elsewhere: this node's lease on it expired or was taken over; this writer stopped"
            )
        )
    );
    assert_eq!(store.read(&id).unwrap().len(), 1, "only the header");
    drop(session);
}

/// A store holding many sessions uses its few pooled connections, not one per session.
#[test]
fn many_open_sessions_share_a_few_connections() {
    let Some(url) = url() else { return };
    let app = format!("keel-pool-test-{}", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PgStore::connect_with(
        &format!("{url}{sep}application_name={app}"),
        PgOptions::default().with_pool_size(3),
    )
    .unwrap();
    let mut sessions = Vec::new();
    for i in 0..60 {
        let mut session = store.create(&format!("/work/pool{i}")).unwrap();
        record_turn(&mut session, "hello");
        session.sync().unwrap();
        sessions.push(session);
    }
    let connections = sql(&url, "SELECT 1 FROM pg_stat_activity WHERE application_name = $1", &app);
    assert_eq!(connections, 3);
    for session in sessions {
        let id = session.id().to_owned();
        session.close().unwrap();
        store.delete(&id).unwrap();
    }
}

/// A writer whose seq was taken by someone else (a stale writer) fails with "being run
/// elsewhere" and writes nothing more.
#[test]
fn a_stale_writer_fails_instead_of_forking_history() {
    let Some(url) = url() else { return };
    let store = PgStore::connect(&url).unwrap();
    let mut session = store.create("/work/stale").unwrap();
    let id = session.id().to_owned();
    session.sync().unwrap();
    // Someone writes seq 1 behind the lock's back.
    sql(
        &url,
        "INSERT INTO keel_events (session_id, seq, kind, time, payload) \
         VALUES ($1, 1, 'turn/start', '2026-01-01T00:00:00Z', '{\"turn\":1}')",
        &id,
    );
    // The writer commits in the background, so its failure may surface at any append
    // after the first, or at the sync.
    let mut appended = Ok(0);
    for i in 0..3 {
        appended = session.append(if i == 0 {
            EventKind::TurnStart(keel_session::TurnStart { turn: 1 })
        } else {
            EventKind::UserMessage(keel_session::UserInput {
                text: "mine".into(),
                source: Default::default(),
                reason: None,
                images: Vec::new(),
            })
        });
        if appended.is_err() {
            break;
        }
    }
    let err = match appended {
        Err(e) => e,
        Ok(_) => session.sync().unwrap_err(),
    };
    assert_eq!(err.kind, SessionErrorKind::Locked);
    assert!(err.message.contains("being run elsewhere"), "{err}");
    let later = session.append(EventKind::TurnStart(keel_session::TurnStart { turn: 2 }));
    assert!(later.is_err(), "a failed writer writes nothing more");
    drop(session);
    assert_eq!(store.read(&id).unwrap().len(), 2, "only the header and the other writer's event");
}

/// Figures, not a check: events appended per second with a sync every 10 events (as a
/// step does) and with one sync at the end. `cargo test -p keel-store-postgres --test
/// lease -- --ignored --nocapture`
#[test]
#[ignore]
fn append_rate() {
    let Some(url) = url() else { return };
    let store = PgStore::connect(&url).unwrap();
    for (label, every) in [("sync every 11 events (a turn)", 11usize), ("one sync at the end", usize::MAX)] {
        let mut session = store.create("/work/rate").unwrap();
        let started = Instant::now();
        let turns = 500;
        for i in 0..turns {
            record_turn(&mut session, "go");
            if every != usize::MAX || i + 1 == turns {
                session.sync().unwrap();
            }
        }
        let elapsed = started.elapsed();
        let events = turns * 11;
        println!(
            "postgres append, {label}: {events} events in {:.0} ms = {:.0} events/s",
            elapsed.as_secs_f64() * 1e3,
            events as f64 / elapsed.as_secs_f64()
        );
        session.close().unwrap();
    }
}

/// Deadlocks detected by the server so far in this database.
fn deadlocks(url: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.execute("SELECT pg_stat_force_next_flush()", &[]).await.ok();
        let row = client
            .query_one("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()", &[])
            .await
            .unwrap();
        row.get(0)
    })
}

/// Renewals (every held row in one statement) and grouped commits (many rows in one
/// statement) lock rows in the same order: running both hard never deadlocks. And a
/// renewal meeting a close does not turn the close into a "lease lost" error.
#[test]
fn renewals_and_grouped_commits_do_not_deadlock() {
    let Some(url) = url() else { return };
    // Renewals every 20 ms, so they meet many grouped commits; a lease of 5 s, so a
    // loaded machine's stalls do not expire it (a 600 ms lease failed under a
    // workspace test run). The check is the server's deadlock count.
    let options = PgOptions::default()
        .with_lease_ttl(Duration::from_secs(5))
        .with_renew_every(Duration::from_millis(20));
    let store = PgStore::connect_with(&url, options).unwrap();
    let before = deadlocks(&url);
    std::thread::scope(|scope| {
        for t in 0..8 {
            let store = &store;
            scope.spawn(move || {
                let mut sessions: Vec<Session> =
                    (0..5).map(|i| store.create(&format!("/work/dl{t}-{i}")).unwrap()).collect();
                for turn in 0..16 {
                    for session in &mut sessions {
                        record_turn(session, &format!("turn {turn}"));
                    }
                    for session in &mut sessions {
                        session.sync().unwrap();
                    }
                }
                for session in sessions {
                    let id = session.id().to_owned();
                    session.close().unwrap();
                    assert_eq!(check_seqs(store, &id), 1 + 16 * 11);
                }
            });
        }
    });
    // Statistics reach the view within a second.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(deadlocks(&url), before);
}
