#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One writer per session across nodes, against a real PostgreSQL
//! (`KEEL_TEST_DATABASE_URL`; skipped with a note when unset).

use std::time::{Duration, Instant};

use keel_session::{SessionErrorKind, SessionStore};
use keel_store_postgres::PgStore;
use keel_testkit::store::{record_crashed_turn, record_turn};

fn url() -> Option<String> {
    let url = std::env::var("KEEL_TEST_DATABASE_URL").ok();
    if url.is_none() {
        eprintln!("skipped: KEEL_TEST_DATABASE_URL is not set (scripts/pg-test-cluster starts a database)");
    }
    url
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

/// A node whose connection dies (kill -9, network cut) loses the session at once:
/// another node opens it, repairs the interrupted turn, and the old writer's later
/// appends fail instead of forking history.
#[test]
fn a_dead_node_loses_the_session_and_another_resumes_it_repaired() {
    let Some(url) = url() else { return };
    let node_a = PgStore::connect(&url).unwrap();
    let node_b = PgStore::connect(&url).unwrap();
    let mut session = node_a.create("/work/lease").unwrap();
    let id = session.id().to_owned();
    record_turn(&mut session, "first");
    let call_seq = record_crashed_turn(&mut session, "crash");
    session.sync().unwrap();
    assert_eq!(node_b.open(&id).unwrap_err().kind, SessionErrorKind::Locked);

    // Node A's connections die, as when its process is killed.
    let killed = sql(
        &url,
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND objid = (hashtextextended($1, 1801807212) & 4294967295)::oid",
        &id,
    );
    assert_eq!(killed, 1, "the lock holder's backend is found");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut resumed = loop {
        match node_b.open(&id) {
            Ok(session) => break session,
            Err(e) if e.kind == SessionErrorKind::Locked && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("node B must get the session: {e}"),
        }
    };
    let report = resumed.repair().unwrap();
    assert_eq!((report.outcome_unknown, report.not_started), (1, 1));
    keel_session::validate(resumed.messages()).unwrap();

    // Node A does not know yet; its next write fails and says why.
    let result = keel_session::EventKind::ToolResult(keel_session::ToolResultData {
        call_id: "x1".into(),
        name: "shell".into(),
        source_seq: call_seq,
        content: "late".into(),
        is_error: false,
        error_code: None,
        concludes_turn: false,
        duration_ms: None,
    });
    let err = match session.append(result) {
        Err(e) => e,
        Ok(_) => session.sync().unwrap_err(),
    };
    assert!(matches!(err.kind, SessionErrorKind::Io | SessionErrorKind::Locked), "{err}");
    drop(session);
    record_turn(&mut resumed, "after the failover");
    resumed.close().unwrap();
    let events = node_b.read(&id).unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
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
    record_turn(&mut session, "mine");
    let err = session.sync().unwrap_err();
    assert_eq!(err.kind, SessionErrorKind::Locked);
    assert!(err.message.contains("being run elsewhere"), "{err}");
    let later = session.append(keel_session::EventKind::TurnStart(keel_session::TurnStart { turn: 2 }));
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
