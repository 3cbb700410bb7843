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
    let Ok(url) = std::env::var("KEEL_TEST_DATABASE_URL") else {
        eprintln!("skipped: KEEL_TEST_DATABASE_URL is not set (scripts/pg-test-cluster starts a database)");
        return None;
    };
    Some(Arc::new(PgStore::connect(&url).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_run_a_session_in_exactly_one() {
    let (Some(store_a), Some(store_b)) = (store(), store()) else { return };
    let a = start_with(
        ScriptedModel::new([reply().text("from a").delay(Duration::from_millis(200))]),
        Some(store_a),
        4,
    )
    .await;
    // Nodes of one deployment serve the same folders (a session is only shown under a root).
    let b =
        start_idle(ScriptedModel::new([reply().text("from b")]), Some(store_b), 4, IDLE, Some(a.folder()))
            .await;
    let id = a.session(json!({})).await;
    // B is another node: the session is running on A, so B refuses to run it.
    let (status, body) = b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "session_locked");
    assert!(body["error"]["message"].as_str().unwrap().contains("being run elsewhere"), "{body}");
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await.0, 202);
    a.wait_idle(&id).await;
    // B sees the session in the shared store, and what A wrote.
    let (status, shown) = b.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!((shown["turns"].as_u64(), shown["open"].as_bool()), (Some(1), Some(false)));
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

/// A session idle on one node is released, and the other node runs it; the first gets
/// it back later. Nothing is lost or forked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_released_so_another_node_can_run_it() {
    let (Some(store_a), Some(store_b)) = (store(), store()) else { return };
    let idle = Duration::from_millis(150);
    let a = start_idle(
        ScriptedModel::new([reply().text("a1"), reply().text("a3")]),
        Some(store_a),
        4,
        idle,
        None,
    )
    .await;
    // B serves A's folder too (nodes share the workspaces, e.g. over a network disk).
    let b =
        start_idle(ScriptedModel::new([reply().text("b2")]), Some(store_b), 4, idle, Some(a.folder())).await;
    let id = a.session(json!({})).await;
    a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "one"})).await;
    a.wait_idle(&id).await;
    let (status, body) = b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "two"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("session_locked")), "held by A: {body}");
    released("A", &a, &id).await;
    assert_eq!(b.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "two"})).await.0, 202);
    b.wait_idle(&id).await;
    released("B", &b, &id).await;
    assert_eq!(a.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "three"})).await.0, 202);
    a.wait_idle(&id).await;
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

/// Waits until `node` no longer holds session `id`.
async fn released(name: &str, node: &common::TestServer, id: &str) {
    for _ in 0..200 {
        if node.get(&format!("/v1/sessions/{id}")).await.1["open"] == false {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} did not release the idle session");
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
    assert!(sse.next().await.is_none(), "the followed stream ends with the turn");
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
    assert!(resumed.next().await.is_none());
}
