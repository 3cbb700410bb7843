#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel serve` over real HTTP, with a scripted model: turns, SSE resume, 409, abort,
//! permission questions, auth, hostile input.

mod common;

use std::time::Duration;

use common::{TOKEN, start, start_with};
use keel_session::{EventKind, TurnEndReason};
use keel_testkit::{ScriptedModel, reply};
use serde_json::{Value, json};

fn store_event_values(server: &common::TestServer, id: &str) -> Vec<Value> {
    server.store.read(id).unwrap().iter().map(|e| serde_json::to_value(e).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_with_last_event_id_gets_exactly_the_missed_events() {
    let model = ScriptedModel::new([
        reply().call("bump", "{}").delay(Duration::from_millis(100)),
        reply().text("done").delay(Duration::from_millis(300)),
    ]);
    let server = start(model).await;
    let id = server.session(json!({})).await;
    let mut sse = server.events(&id, None).await;
    let header = sse.next().await.unwrap();
    assert_eq!((header.id, header.kind()), (Some(0), "session/header"));

    let (status, body) =
        server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "bump it"})).await;
    assert_eq!(status, 202, "{body}");
    // Leave in the middle of the turn, right after the tool call is logged.
    let seen = sse.until("tool/call").await;
    let last_seen = seen.iter().filter_map(|e| e.id).max().unwrap();
    assert!(
        seen.iter().any(|e| e.kind() == "delta/tool_call" && e.id.is_none()),
        "live events are streamed too"
    );
    drop(sse);

    // Reconnect while the turn still runs (the second reply takes 300 ms).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut resumed = server.events(&id, Some(last_seen)).await;
    let rest = resumed.until("turn/end").await;
    assert!(rest.iter().any(|e| e.kind() == "delta/text"), "and live events after the resume");
    let logged: Vec<&common::SseEvent> = rest.iter().filter(|e| e.id.is_some()).collect();
    let seqs: Vec<u64> = logged.iter().map(|e| e.id.unwrap()).collect();
    server.wait_idle(&id).await;
    let stored = store_event_values(&server, &id);
    let expected: Vec<u64> = (last_seen + 1..stored.len() as u64).collect();
    assert_eq!(seqs, expected, "exactly the missed events, in order, no duplicates");
    for event in &logged {
        assert_eq!(event.data, stored[event.id.unwrap() as usize], "each event as stored");
    }
    match &server.store.read(&id).unwrap().last().unwrap().kind {
        EventKind::TurnEnd(end) => assert_eq!(end.reason, TurnEndReason::Completed),
        other => panic!("the turn must end completed, not {other:?}"),
    }
}

/// Issue 34: a client is sent the agent's plan, as the effect of the call that set it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_reaches_the_client_as_its_calls_effect() {
    let plan = r#"{"plan":[{"step":"Read","status":"completed"},{"step":"Fix","status":"in_progress"}]}"#;
    let model = ScriptedModel::new([reply().call("update_plan", plan), reply().text("done")]);
    let server = start(model).await;
    let id = server.session(json!({})).await;
    let mut sse = server.events(&id, None).await;
    let (status, body) = server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await;
    assert_eq!(status, 202, "{body}");
    let call = sse.until("tool/call").await.pop().unwrap();
    assert_eq!(
        call.data["data"]["effect"],
        json!({"kind": "plans", "steps": [
            {"step": "Read", "status": "completed"},
            {"step": "Fix", "status": "in_progress"}
        ]})
    );
    sse.until("turn/end").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_mid_turn_does_not_stop_it() {
    let model = ScriptedModel::new([
        reply().call("bump", "{}").delay(Duration::from_millis(200)),
        reply().text("finished without anyone watching").delay(Duration::from_millis(200)),
    ]);
    let server = start(model).await;
    let id = server.session(json!({})).await;
    let mut sse = server.events(&id, None).await;
    server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await;
    sse.until("turn/start").await;
    drop(sse);
    server.wait_idle(&id).await;
    let events = server.store.read(&id).unwrap();
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::ToolResult(r) if r.content == "bumped")));
    match &events.last().unwrap().kind {
        EventKind::TurnEnd(end) => assert_eq!(end.reason, TurnEndReason::Completed),
        other => panic!("the turn must complete, not {other:?}"),
    }
    // The session still works.
    server.model.push(reply().text("again"));
    let (status, _) = server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "more"})).await;
    assert_eq!(status, 202);
    server.wait_idle(&id).await;
    assert_eq!(server.get(&format!("/v1/sessions/{id}")).await.1["turns"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_message_while_a_turn_runs_is_409_and_abort_ends_it() {
    let server = start(ScriptedModel::new([reply().text("never").hang()])).await;
    let id = server.session(json!({})).await;
    let path = format!("/v1/sessions/{id}/messages");
    assert_eq!(server.post(&path, json!({"text": "first"})).await.0, 202);
    let (status, body) = server.post(&path, json!({"text": "second"})).await;
    assert_eq!(status, 409);
    assert_eq!(body["error"]["code"], "turn_running");
    assert_eq!(server.get(&format!("/v1/sessions/{id}")).await.1["running"], true);
    let (status, _) = server.post(&format!("/v1/sessions/{id}/steer"), json!({"text": "hurry"})).await;
    assert_eq!(status, 202);

    assert_eq!(server.post(&format!("/v1/sessions/{id}/abort"), json!({})).await.0, 202);
    server.wait_idle(&id).await;
    match &server.store.read(&id).unwrap().last().unwrap().kind {
        EventKind::TurnEnd(end) => assert_eq!(end.reason, TurnEndReason::Aborted),
        other => panic!("the turn must end aborted, not {other:?}"),
    }
    let (status, body) = server.post(&format!("/v1/sessions/{id}/abort"), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_turn")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_question_is_asked_on_the_stream_and_answered_over_http() {
    let model = ScriptedModel::new([reply().call("bump", "{}"), reply().text("bumped it")]);
    let server = start(model).await;
    let id = server.session(json!({"permission": "ask"})).await;
    let mut sse = server.events(&id, None).await;
    server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "bump"})).await;
    let asked = sse.until("permission/ask").await;
    let question = asked.last().unwrap();
    assert_eq!(question.id, None, "a question is live, not logged");
    assert_eq!(question.data["data"]["tool"], "bump");
    let qid = question.data["data"]["id"].as_u64().unwrap();
    let shown = server.get(&format!("/v1/sessions/{id}")).await.1;
    assert_eq!(shown["question"]["id"], qid);
    let (status, body) = server
        .post(&format!("/v1/sessions/{id}/permission"), json!({"id": qid + 1, "answer": "allow"}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_question")));
    // Issue 32: a client that connects after the question was asked sees it too.
    let mut late = server.events(&id, None).await;
    let seen = late.until("permission/ask").await;
    assert_eq!(seen.last().unwrap().data["data"]["id"], qid);
    let (status, _) =
        server.post(&format!("/v1/sessions/{id}/permission"), json!({"id": qid, "answer": "allow"})).await;
    assert_eq!(status, 204);
    let rest = sse.until("turn/end").await;
    let result = rest.iter().find(|e| e.kind() == "tool/result").unwrap();
    assert_eq!(result.data["data"]["content"], "bumped");
    assert!(result.data["data"].get("is_error").is_none(), "the call ran: {result:?}");
}

/// A no with words: the model gets what the user said to do instead; words go only with
/// `deny`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_with_words_reaches_the_model() {
    let model = ScriptedModel::new([reply().call("bump", "{}"), reply().text("ok, not bumping")]);
    let server = start(model).await;
    let id = server.session(json!({"permission": "ask"})).await;
    let mut sse = server.events(&id, None).await;
    server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "bump"})).await;
    let asked = sse.until("permission/ask").await;
    let qid = asked.last().unwrap().data["data"]["id"].as_u64().unwrap();
    let path = format!("/v1/sessions/{id}/permission");
    let (status, body) = server.post(&path, json!({"id": qid, "answer": "allow", "message": "hm"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    let (status, _) = server
        .post(&path, json!({"id": qid, "answer": "deny", "message": "bump the minor version instead"}))
        .await;
    assert_eq!(status, 204);
    let rest = sse.until("turn/end").await;
    let result = rest.iter().find(|e| e.kind() == "tool/result").unwrap();
    let content = result.data["data"]["content"].as_str().unwrap();
    assert!(content.contains("said instead:\nbump the minor version instead"), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_are_refused() {
    let server = start(ScriptedModel::new([])).await;
    let client = server.client.clone();
    for auth in [None, Some("Bearer wrong-token-0123456789"), Some(TOKEN)] {
        let mut request = client.get(format!("{}/v1/sessions", server.url));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{auth:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let events = client.get(format!("{}/v1/sessions/x/events", server.url)).send().await.unwrap();
    assert_eq!(events.status().as_u16(), 401);
    let spec = client.get(format!("{}/openapi.json", server.url)).send().await.unwrap();
    assert_eq!(spec.status().as_u16(), 200);
    let spec: Value = serde_json::from_str(&spec.text().await.unwrap()).unwrap();
    assert!(spec["paths"]["/v1/sessions/{id}/events"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_gets_clear_json_errors() {
    let server = start(ScriptedModel::new([])).await;
    let outside = tempfile::tempdir().unwrap();
    let (status, body) = server.post("/v1/sessions", json!({"folder": outside.path()})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("forbidden_folder")), "{body}");
    let escape = server.folder().join("..").join("..");
    assert_eq!(server.post("/v1/sessions", json!({"folder": escape})).await.0, 403);
    let (status, body) =
        server.post("/v1/sessions", json!({"folder": server.folder(), "colour": "red"})).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("colour"), "{body}");
    let (status, body) =
        server.post("/v1/sessions", json!({"folder": server.folder(), "permission": "yolo"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    assert_eq!(body["error"]["message"], "unknown permission mode `yolo`");
    // Issue 31, item 5: the factory says whose the failure is; the server's own is 503.
    let response = server
        .client
        .post(format!("{}/v1/sessions", server.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({"folder": server.folder(), "model": "unreachable"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(body["error"]["message"], "the model server does not answer");
    assert!(server.store.list().unwrap().is_empty(), "a session that cannot run is not kept");
    let huge = "x".repeat(100 * 1024);
    let (status, body) = server.post("/v1/sessions/abc/steer", json!({"text": huge})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("bad_body")), "{body}");
    // A message may carry images: its own limit is 8 MiB.
    let (status, body) = server.post("/v1/sessions/abc/messages", json!({"text": huge})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{body}");
    let larger = "x".repeat(8 * 1024 * 1024 + 1);
    let (status, body) = server.post("/v1/sessions/abc/messages", json!({"text": larger})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("bad_body")), "{body}");
    let response = server
        .client
        .post(format!("{}/v1/sessions", server.url))
        .bearer_auth(TOKEN)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let (status, _) = server.post("/v1/sessions/..%2Fetc/messages", json!({"text": "hi"})).await;
    assert_eq!(status, 400);
    let (status, body) =
        server.post("/v1/sessions/20990101-000000-000000/messages", json!({"text": "hi"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{body}");
    let id = server.session(json!({})).await;
    let (status, _) = server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "  "})).await;
    assert_eq!(status, 400);
    let (status, body) = server.post(&format!("/v1/sessions/{id}/steer"), json!({"text": "x"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("no_turn")));
    let response = server
        .client
        .get(format!("{}/v1/sessions/{id}/events", server.url))
        .bearer_auth(TOKEN)
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let (status, body) = server.get(&format!("/v1/sessions/{id}/events?after=soon")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    assert_eq!(server.get("/v2/nothing").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_forked_and_deleted() {
    let server = start(ScriptedModel::new([reply().text("hello")])).await;
    let id = server.session(json!({})).await;
    server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await;
    server.wait_idle(&id).await;
    let (status, body) = server.post(&format!("/v1/sessions/{id}/fork"), json!({"at": 2})).await;
    assert_eq!(status, 201, "{body}");
    let child = body["id"].as_str().unwrap().to_owned();
    let (_, listing) = server.get("/v1/sessions").await;
    let sessions = listing["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    let parent = sessions.iter().find(|s| s["id"] == id.as_str()).unwrap();
    assert_eq!((parent["turns"].as_u64(), parent["open"].as_bool()), (Some(1), Some(true)));
    assert_eq!(parent["first_prompt"], "hi");
    let forked = sessions.iter().find(|s| s["id"] == child.as_str()).unwrap();
    assert_eq!(forked["parent"], json!({"id": id, "seq": 2}));
    assert_eq!(server.call(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"), None).await.0, 204);
    assert_eq!(server.get(&format!("/v1/sessions/{id}")).await.0, 404);
    assert_eq!(server.get("/v1/sessions").await.1["sessions"].as_array().unwrap().len(), 1);
}

/// Issue 28, item 15: the server listed, showed, forked and deleted sessions whose folder
/// is outside `--root` (a CLI session in a shared home, say).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_outside_the_roots_are_nobodys_business() {
    let server = start(ScriptedModel::new([reply().text("hello")])).await;
    let mine = server.session(json!({})).await;
    let elsewhere = tempfile::tempdir().unwrap();
    let outside = server.store.create(&elsewhere.path().display().to_string()).unwrap();
    let id = outside.id().to_owned();
    outside.close().unwrap();
    let (_, listing) = server.get("/v1/sessions").await;
    let ids: Vec<&str> =
        listing["sessions"].as_array().unwrap().iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, [mine.as_str()]);
    assert_eq!(server.get(&format!("/v1/sessions/{id}")).await.0, 404);
    assert_eq!(server.post(&format!("/v1/sessions/{id}/fork"), json!({})).await.0, 404);
    assert_eq!(server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "hi"})).await.0, 404);
    assert_eq!(server.get(&format!("/v1/sessions/{id}/events")).await.0, 404);
    assert_eq!(server.call(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"), None).await.0, 404);
    assert!(server.store.read(&id).is_ok(), "the session is still there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_beyond_the_limit_wait_in_line_and_run_in_order() {
    let model = ScriptedModel::new([reply().text("slow").hang()]);
    let server = start_with(model, None, 1).await;
    let a = server.session(json!({})).await;
    let b = server.session(json!({})).await;
    let (status, body) = server.post(&format!("/v1/sessions/{a}/messages"), json!({"text": "1"})).await;
    assert_eq!((status, body["queued"].clone()), (202, json!(0)));
    while server.model.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // b waits in line: accepted, first in line, its stream told so.
    let mut sse = server.events(&b, None).await;
    let (status, body) = server.post(&format!("/v1/sessions/{b}/messages"), json!({"text": "2"})).await;
    assert_eq!((status, body["queued"].clone()), (202, json!(1)));
    let queued = sse.until("turn/queued").await;
    assert_eq!(queued.last().map(|e| e.data["data"]["place"].clone()), Some(json!(1)));
    let show = server.get(&format!("/v1/sessions/{b}")).await.1;
    assert_eq!(show["running"], true, "a turn in line counts as running: {show}");
    assert_eq!(server.model.requests().len(), 1, "b has not reached the model while a runs");
    server.model.push(reply().text("now"));
    server.post(&format!("/v1/sessions/{a}/abort"), json!({})).await;
    server.wait_idle(&a).await;
    server.wait_idle(&b).await;
    let events = server.store.read(&b).unwrap();
    let answer = events.iter().rev().find_map(|e| match &e.kind {
        keel_session::EventKind::AssistantMessage(m) => Some(m.text()),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("now"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_sends_heartbeats() {
    let server = start(ScriptedModel::new([])).await;
    let id = server.session(json!({})).await;
    let mut sse = server.events(&id, None).await;
    sse.next().await.unwrap();
    // No event comes; the stream ends after heartbeats when the test times out reading.
    let waited = tokio::time::timeout(Duration::from_millis(700), sse.next()).await;
    assert!(waited.is_err(), "no event was expected");
    assert!(sse.comments >= 2, "heartbeats every 200 ms in this test, saw {}", sse.comments);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics_answer_without_a_token() {
    let server = start(ScriptedModel::new([reply().text("hi")])).await;
    let id = server.session(json!({})).await;
    assert_eq!(server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await.0, 202);
    server.wait_idle(&id).await;
    let get = |path: &str| {
        let url = format!("{}{path}", server.url);
        let client = server.client.clone();
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(get("/healthz").await, (200, "ok\n".to_owned()));
    assert_eq!(get("/readyz").await, (200, "ready\n".to_owned()));
    let (status, metrics) = get("/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("keel_turns_started_total 1\n"), "{metrics}");
    assert!(metrics.contains("keel_turns_running 0\n"), "{metrics}");
    assert!(metrics.contains("keel_steps_total 1\n"), "{metrics}");
    assert!(metrics.contains("keel_model_errors_total 0\n"), "{metrics}");
    assert!(metrics.contains("# TYPE keel_http_requests_total counter"), "{metrics}");
    // No route shows the server's paths.
    let (status, body) = server.get("/v1/sessions/20260101-000000-000000000000").await;
    assert_eq!(status, 404);
    assert!(!body.to_string().contains(&server.folder().display().to_string()), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_lets_running_turns_finish_and_starts_no_new_one() {
    let model = ScriptedModel::new([reply().text("finished in time").delay(Duration::from_millis(600))]);
    let server = keel_server_common_drain(model, Duration::from_secs(10)).await;
    let a = server.session(json!({})).await;
    let b = server.session(json!({})).await;
    let mut sse = server.events(&a, None).await;
    assert_eq!(server.post(&format!("/v1/sessions/{a}/messages"), json!({"text": "go"})).await.0, 202);
    while server.model.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop.notify_one();
    // Stopping: no new turn; readiness says so.
    let mut refused = (0, Value::Null);
    for _ in 0..100 {
        refused = server.post(&format!("/v1/sessions/{b}/messages"), json!({"text": "late"})).await;
        if refused.0 == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!((refused.0, refused.1["error"]["code"].as_str()), (503, Some("stopping")), "{:?}", refused.1);
    let events = sse.until("turn/end").await;
    assert_eq!(events.last().unwrap().data["data"]["reason"], "completed");
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_the_drain_timeout_ends_as_the_server_shutting_down() {
    let model = ScriptedModel::new([reply().text("never").hang()]);
    let server = keel_server_common_drain(model, Duration::from_millis(300)).await;
    let a = server.session(json!({})).await;
    assert_eq!(server.post(&format!("/v1/sessions/{a}/messages"), json!({"text": "go"})).await.0, 202);
    while server.model.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.shut_down().await;
    let end = server.store.read(&a).unwrap().into_iter().rev().find_map(|e| match e.kind {
        keel_session::EventKind::TurnEnd(end) => Some(end),
        _ => None,
    });
    let end = end.expect("the turn was ended and logged");
    assert_eq!(
        (format!("{:?}", end.reason), end.message.as_deref()),
        ("Aborted".to_owned(), Some("the server is shutting down"))
    );
}

async fn keel_server_common_drain(model: ScriptedModel, drain: Duration) -> common::TestServer {
    common::start_configured(model, None, None, |config| config.drain_timeout = drain).await
}

/// Issue 34 item 5: a message may carry images; a refused one is a 400 with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_with_images_reaches_the_model_and_bad_images_are_400() {
    let png = keel_testkit::mcp::PNG_BASE64;
    let model = ScriptedModel::new([reply().text("a red dot")]);
    let server = start(model.clone()).await;
    let id = server.session(json!({})).await;
    let messages = format!("/v1/sessions/{id}/messages");
    for (body, why) in [
        (
            json!({"text": "look", "images": [{"data": "aGk="}]}),
            "image 1: not an image keel can send: only PNG, JPEG, GIF and WebP are accepted",
        ),
        (
            json!({"text": "look", "images": [{"data": png, "media_type": "image/jpeg"}]}),
            "image 1 is image/png, not image/jpeg as stated",
        ),
        (
            json!({"text": "look", "images": [{"data": "!!"}]}),
            "image 1: the image's base64 data does not decode",
        ),
    ] {
        let (status, answer) = server.post(&messages, body).await;
        assert_eq!((status, answer["error"]["message"].as_str()), (400, Some(why)), "{answer}");
    }
    let (status, answer) = server
        .post(&messages, json!({"text": "look", "images": [{"data": png, "media_type": "image/png"}]}))
        .await;
    assert_eq!(status, 202, "{answer}");
    server.wait_idle(&id).await;
    let image = keel_llm::Image::from_base64(png).unwrap();
    let Some(keel_llm::Message::User(user)) = model.requests()[0].messages.last().cloned() else {
        panic!("no user message")
    };
    assert_eq!(user.images, [image]);

    // A model that takes no images: refused before the turn starts.
    model.set_accepts_images(false);
    let (status, answer) = server.post(&messages, json!({"text": "again", "images": [{"data": png}]})).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("does not take images"), "{answer}");
}
