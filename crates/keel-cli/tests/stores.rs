#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 31, item 3: one way to open a store, for every mode. `--store` / `KEEL_STORE`
//! name a folder of JSONL files or a PostgreSQL database for print mode, `--continue`
//! and `keel sessions` alike, not only for `keel serve`.

mod common;

use common::*;
use keel_session::{EventKind, JsonlStore, SessionStore};
use keel_testkit::{ChatStream, MockResponse, MockServer};
use pretty_assertions::assert_eq;

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 3).finish("stop").usage(500, 20).response()
}

/// The user messages of a session's log, in order.
fn prompts(events: &[keel_session::Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::UserMessage(m) if m.source == keel_session::InputSource::Prompt => {
                Some(m.text.clone())
            }
            _ => None,
        })
        .collect()
}

/// Runs a turn, continues it and lists the folder's sessions, all in the store `store`
/// names (passed as `--store` or as `KEEL_STORE`); returns the session's id.
async fn turn_continue_and_list(env: &Env, server: &MockServer, store: &str, via_env: bool) -> String {
    let with_store = |command: &mut std::process::Command| {
        if via_env {
            command.env("KEEL_STORE", store);
        } else {
            command.args(["--store", store]);
        }
    };
    server.push(answer("First answer."));
    let mut first = env.keel(&server.base_url());
    with_store(&mut first);
    first.arg("first question");
    let out = output(first).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "First answer.\n");

    server.push(answer("Second answer."));
    let mut again = env.keel(&server.base_url());
    with_store(&mut again);
    again.args(["--continue", "second question"]);
    let out = output(again).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Second answer.\n");
    // The continued request carried the first exchange: it came from this store.
    let body = server.requests().last().unwrap().json();
    let contents: Vec<String> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .map(|m| {
            // The first prompt comes after the workspace's description.
            let content = m["content"].as_str().unwrap_or_default();
            content.rsplit("</environment>\n\n").next().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(contents, vec!["first question", "First answer.", "second question"]);

    let mut list = env.keel(&server.base_url());
    with_store(&mut list);
    list.args(["sessions", "list", "--here"]);
    let out = output(list).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    let rows: Vec<&str> = listing.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{listing}");
    let id = rows[0].split_whitespace().next().unwrap().to_owned();

    let mut show = env.keel(&server.base_url());
    with_store(&mut show);
    show.args(["sessions", "show", &id]);
    let out = output(show).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("> second question"), "{}", text(&out.stdout));
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn a_folder_store_serves_print_mode_continue_and_sessions() {
    let env = Env::new();
    let server = MockServer::start().await;
    let folder = env.root.path().join("team-sessions");
    let id = turn_continue_and_list(&env, &server, &folder.display().to_string(), false).await;
    // Everything went to the named folder; keel's own sessions folder stayed empty.
    let events = JsonlStore::new(&folder).read(&id).unwrap();
    assert_eq!(prompts(&events), vec!["first question", "second question"]);
    assert!(!env.home().join("sessions").exists() || env.store().list().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgresql_store_serves_print_mode_continue_and_sessions() {
    let Some(url) = keel_testkit::prereq::database_url() else { return };
    let env = Env::new();
    let server = MockServer::start().await;
    let id = turn_continue_and_list(&env, &server, &url, true).await;
    let store = keel_store_postgres::PgStore::connect(&url).unwrap();
    assert_eq!(prompts(&store.read(&id).unwrap()), vec!["first question", "second question"]);
    assert!(!env.home().join("sessions").exists() || env.store().list().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_is_a_clear_error() {
    let env = Env::new();
    let server = MockServer::start().await;
    let mut keel = env.keel(&server.base_url());
    // Port 9 on loopback: nothing listens there; connecting is refused at once.
    keel.args(["--store", "postgres://keel@127.0.0.1:9/keel", "hello"]);
    let out = output(keel).await;
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--store"), "{stderr}");
    assert_eq!(server.request_count(), 0, "no model request without a store");
}
