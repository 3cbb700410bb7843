#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel serve` on the PostgreSQL store (`KEEL_TEST_DATABASE_URL`; skipped with a note
//! when unset): two servers on one database, 100 clients on one session.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{start_idle, start_with};
use keel_session::SessionStore;
use keel_store_postgres::PgStore;
use keel_testkit::{ScriptedModel, reply};
use serde_json::json;

/// The default idle-close of the test servers.
const IDLE: Duration = Duration::from_secs(60);

fn store() -> Option<Arc<dyn SessionStore>> {
    let url = keel_testkit::prereq::database_url()?;
    Some(Arc::new(PgStore::connect(&url).unwrap()))
}

/// Any node serves any request: while A runs a turn, B refuses a second one, shows it
/// running and forwards an abort to A; once the turn ends, B runs the next at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_serve_any_request_for_any_session() {
    let (Some(store_a), Some(store_b)) = (store(), store()) else { return };
    let a = start_with(ScriptedModel::new([reply().text("from a").hang()]), Some(store_a), 4).await;
    // Nodes of one deployment serve the same folders (a session is only shown under a root).
    let b =
        start_idle(ScriptedModel::new([reply().text("from b")]), Some(store_b), 4, IDLE, Some(a.folder()))
            .await;
    let id = a.session(json!({})).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await.0, 202);
    while a.model.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // B: a second turn is refused while A runs one; B shows it running.
    let (status, body) = b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("session_locked")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("another node"), "{body}");
    let (status, shown) = b.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!((status, shown["running"].as_bool()), (200, Some(true)), "{shown}");
    // B forwards an abort to A, which ends its turn.
    let (status, body) = b.post(&format!("/v1/sessions/{id}/abort"), json!({})).await;
    assert_eq!(status, 202, "{body}");
    a.wait_idle(&id).await;
    // The turn's end lets the session go: B runs the next turn at once.
    let (status, body) = b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "again"})).await;
    assert_eq!(status, 202, "{body}");
    b.wait_idle(&id).await;
    let events = a.store.read(&id).unwrap();
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    let ends: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            keel_session::EventKind::TurnEnd(end) => Some(format!("{:?}", end.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, ["Aborted", "Completed"], "{events:?}");
    // No turn runs anywhere now: an abort on either node says so.
    let (status, body) = a.post(&format!("/v1/sessions/{id}/abort"), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_turn")), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_clients_on_one_session_see_every_event_once_in_order() {
    let Some(store) = store() else { return };
    let model = ScriptedModel::new([
        reply().call("bump", "{}").delay(Duration::from_millis(100)),
        reply().text("all done").delay(Duration::from_millis(100)),
    ]);
    let server = Arc::new(start_with(model, Some(store), 4).await);
    let id = server.session(json!({})).await;
    let mut clients = Vec::new();
    for _ in 0..100 {
        clients.push(server.events(&id, None).await);
    }
    server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await;
    let mut tasks = Vec::new();
    for mut sse in clients {
        tasks.push(tokio::spawn(async move {
            let events = sse.until("turn/end").await;
            events.into_iter().filter_map(|e| e.id.map(|id| (id, e.data))).collect::<Vec<_>>()
        }));
    }
    server.wait_idle(&id).await;
    let stored: Vec<serde_json::Value> =
        server.store.read(&id).unwrap().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    for task in tasks {
        let seen = task.await.unwrap();
        let seqs: Vec<u64> = seen.iter().map(|(id, _)| *id).collect();
        assert_eq!(seqs, (0..stored.len() as u64).collect::<Vec<_>>());
        for (seq, data) in &seen {
            assert_eq!(data, &stored[*seq as usize]);
        }
    }
    // A late client resuming in the middle gets the rest from PostgreSQL.
    let mut late = server.events(&id, Some(3)).await;
    let rest = late.until("turn/end").await;
    let seqs: Vec<u64> = rest.iter().filter_map(|e| e.id).collect();
    assert_eq!(seqs, (4..stored.len() as u64).collect::<Vec<_>>());
}

/// A session is let go when its turn ends, so turns alternate between nodes without
/// waiting for an idle timeout. Nothing is lost or forked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_alternate_between_nodes_without_waiting() {
    let (Some(store_a), Some(store_b)) = (store(), store()) else { return };
    let a = start_with(ScriptedModel::new([reply().text("a1"), reply().text("a3")]), Some(store_a), 4).await;
    // B serves A's folder too (nodes share the workspaces, e.g. over a network disk).
    let b =
        start_idle(ScriptedModel::new([reply().text("b2")]), Some(store_b), 4, IDLE, Some(a.folder())).await;
    let id = a.session(json!({})).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "one"})).await.0, 202);
    a.wait_idle(&id).await;
    let started = std::time::Instant::now();
    assert_eq!(b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "two"})).await.0, 202);
    b.wait_idle(&id).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "three"})).await.0, 202);
    a.wait_idle(&id).await;
    assert!(started.elapsed() < Duration::from_secs(10), "no idle timeout in between");
    let events = a.store.read(&id).unwrap();
    assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64));
    let answers: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            keel_session::EventKind::AssistantMessage(m) => Some(m.text()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["a1", "b2", "a3"], "three turns on two nodes, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_another_node_follows_the_turn_exactly() {
    let (Some(store_a), Some(store_b)) = (store(), store()) else { return };
    let model = ScriptedModel::new([
        reply().call("bump", "{}").delay(Duration::from_millis(300)),
        reply().text("all done").delay(Duration::from_millis(300)),
        reply().text("again").delay(Duration::from_millis(300)),
    ]);
    let a = start_with(model, Some(store_a), 4).await;
    let b = start_idle(ScriptedModel::new([]), Some(store_b), 4, IDLE, Some(a.folder())).await;
    let id = a.session(json!({})).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await.0, 202);
    // A runs the turn; B follows it through the database.
    let mut sse = b.events(&id, None).await;
    let started = std::time::Instant::now();
    let seen = tokio::time::timeout(Duration::from_secs(20), sse.until("turn/end")).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    a.wait_idle(&id).await;
    let stored: Vec<serde_json::Value> =
        a.store.read(&id).unwrap().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    let logged: Vec<(u64, serde_json::Value)> =
        seen.into_iter().map(|e| (e.id.expect("only logged events"), e.data)).collect();
    let seqs: Vec<u64> = logged.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (0..stored.len() as u64).collect::<Vec<_>>(), "every event once, in order");
    for (seq, data) in &logged {
        assert_eq!(data, &stored[*seq as usize]);
    }
    // A client resuming on B after seq 2 gets the rest of the log, then the next turn.
    let mut resumed = b.events(&id, Some(2)).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "again"})).await.0, 202);
    let seen = tokio::time::timeout(Duration::from_secs(20), resumed.until("turn/end")).await.unwrap();
    let mut seqs: Vec<u64> = seen.iter().map(|e| e.id.unwrap()).collect();
    if seqs.len() < stored.len() {
        // The first `turn/end` was the old turn's: the stream goes on to the new one.
        let more = tokio::time::timeout(Duration::from_secs(20), resumed.until("turn/end")).await.unwrap();
        seqs.extend(more.iter().map(|e| e.id.unwrap()));
    }
    a.wait_idle(&id).await;
    let total = a.store.read(&id).unwrap().len() as u64;
    assert_eq!(seqs, (3..total).collect::<Vec<_>>());
}

/// A TCP relay to the database that the test can cut: while down, every connection is
/// closed and new ones are dropped at once, as when PostgreSQL restarts.
struct Relay {
    url: String,
    down: Arc<std::sync::atomic::AtomicBool>,
    cut: Arc<tokio::sync::Notify>,
}

impl Relay {
    async fn start(database_url: &str) -> Relay {
        // postgres://user@host:port/db?…
        let authority = database_url.split("://").nth(1).unwrap().split('/').next().unwrap();
        let address = authority.rsplit('@').next().unwrap();
        let (host, port) = address.rsplit_once(':').expect("the test database URL names host:port");
        let (host, port) = (host.to_owned(), port.to_owned());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay_port = listener.local_addr().unwrap().port();
        let url = database_url.replacen(&format!(":{port}"), &format!(":{relay_port}"), 1);
        assert_ne!(url, database_url, "the database URL names its port");
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cut = Arc::new(tokio::sync::Notify::new());
        let (flag, notify) = (Arc::clone(&down), Arc::clone(&cut));
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let upstream = format!("{host}:{port}");
                let notify = Arc::clone(&notify);
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        () = notify.notified() => {}
                    }
                });
            }
        });
        Relay { url, down, cut }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.cut.notify_waiters();
        }
    }
}

/// A database outage of a few seconds in the middle of a turn: the turn waits for the
/// database and completes, a client sees every event exactly once and only what was
/// committed, and the next message works at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_loses_no_session() {
    let Some(database_url) = keel_testkit::prereq::database_url() else { return };
    let relay = Relay::start(&database_url).await;
    let store: Arc<dyn SessionStore> = Arc::new(PgStore::connect(&relay.url).unwrap());
    let model = ScriptedModel::new([
        reply().call("bump", "{}").delay(Duration::from_millis(300)),
        reply().text("done despite the outage").delay(Duration::from_millis(300)),
        reply().text("and after it"),
    ]);
    let server = start_with(model, Some(store), 4).await;
    let id = server.session(json!({})).await;
    let mut sse = server.events(&id, None).await;
    assert_eq!(server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await.0, 202);
    while server.model.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    relay.set_down(true);
    tokio::time::sleep(Duration::from_secs(5)).await;
    relay.set_down(false);
    let seen = tokio::time::timeout(Duration::from_secs(30), sse.until("turn/end")).await.unwrap();
    let end = seen.last().unwrap();
    assert_eq!(end.data["data"]["reason"], "completed", "{end:?}");
    server.wait_idle(&id).await;
    let stored: Vec<serde_json::Value> =
        server.store.read(&id).unwrap().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    let logged: Vec<(u64, serde_json::Value)> =
        seen.into_iter().filter_map(|e| e.id.map(|seq| (seq, e.data))).collect();
    let seqs: Vec<u64> = logged.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, (0..stored.len() as u64).collect::<Vec<_>>(), "every event once, in order");
    for (seq, data) in &logged {
        assert_eq!(data, &stored[*seq as usize], "what the client saw is what was committed");
    }
    let stats = server.store.stats();
    assert!(
        stats.retries > 0 && stats.commits > 0 && stats.errors == 0,
        "commits waited out the outage: {stats:?}"
    );
    let (status, body) = server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "more"})).await;
    assert_eq!(status, 202, "{body}");
    server.wait_idle(&id).await;
    let metrics =
        server.client.get(format!("{}/metrics", server.url)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("keel_store_commit_retries_total "), "{metrics}");
    assert!(!metrics.contains("keel_store_commit_retries_total 0\n"), "{metrics}");
}
