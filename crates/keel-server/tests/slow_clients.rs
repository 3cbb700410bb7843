#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Slow and hostile clients, over raw TCP: a connection that sends no request head, a
//! request whose body never comes, an event stream nobody reads, a subscriber that
//! falls too far behind. None may hold the server's resources for long.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TOKEN, TestServer, start_configured};
use keel_server::Frame;
use keel_testkit::{ScriptedModel, reply};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

fn addr(server: &TestServer) -> SocketAddr {
    server.url.strip_prefix("http://").unwrap().parse().unwrap()
}

/// A connection with a small receive buffer, as a client that reads slowly has.
async fn small_window(server: &TestServer) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(addr(server)).await.unwrap()
}

/// Opens `id`'s event stream on a raw connection and reads nothing.
async fn unread_stream(server: &TestServer, id: &str) -> TcpStream {
    let mut tcp = small_window(server).await;
    let request = format!(
        "GET /v1/sessions/{id}/events HTTP/1.1\r\nHost: keel\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let live = server.state.manager.get(id).unwrap();
    wait_for(|| live.hub.clients() == 1, "the stream subscribes").await;
    tcp
}

async fn wait_for(mut done: impl FnMut() -> bool, what: &str) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.elapsed()
}

/// 200 live-only frames of 64 KiB: far more than the socket buffers hold.
fn flood(server: &TestServer, id: &str) {
    let live = server.state.manager.get(id).unwrap();
    let data: Arc<str> = Arc::from(json!({"type": "flood", "pad": "x".repeat(64 * 1024)}).to_string());
    for _ in 0..200 {
        live.hub.publish(Frame { seq: None, data: Arc::clone(&data) });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_request_head_is_closed_after_the_header_timeout() {
    let server = start_configured(ScriptedModel::new([]), None, None, |config| {
        config.header_timeout = Duration::from_millis(300);
    })
    .await;
    for sent in [&b""[..], b"GET /v1/sessions HTTP/1.1\r\nHost: keel\r\n"] {
        // Timed from before the connection: the server's timer starts when it accepts,
        // which on a loaded machine can be well before this side's write returns (a
        // clock started after the write measured 224 ms against a 300 ms timeout).
        let started = Instant::now();
        let mut tcp = TcpStream::connect(addr(&server)).await.unwrap();
        tcp.write_all(sent).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got))
            .await
            .expect("the server closes the connection")
            .unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250), "not before the timeout: {waited:?}");
        assert_eq!(String::from_utf8_lossy(&got), "", "closed without an answer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_that_never_comes_is_408() {
    let server = start_configured(ScriptedModel::new([]), None, None, |config| {
        config.body_timeout = Duration::from_millis(300);
    })
    .await;
    let mut tcp = TcpStream::connect(addr(&server)).await.unwrap();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: keel\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"fol"
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got))
        .await
        .expect("the server answers and closes")
        .unwrap();
    let text = String::from_utf8(got).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert_eq!(head.lines().next(), Some("HTTP/1.1 408 Request Timeout"), "{text}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": "body_timeout", "message": "the request body did not arrive within 300ms"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_nobody_reads_is_closed_after_the_write_stall_limit() {
    let server = start_configured(ScriptedModel::new([]), None, None, |config| {
        config.write_stall = Duration::from_millis(500);
    })
    .await;
    let id = server.session(json!({})).await;
    let mut tcp = unread_stream(&server, &id).await;
    flood(&server, &id);
    let live = server.state.manager.get(&id).unwrap();
    let waited = wait_for(|| live.hub.clients() == 0, "the unread stream is dropped").await;
    assert!(waited >= Duration::from_millis(400), "dropped by the stall limit, after {waited:?}");
    // What the kernel buffered is still readable; then the connection ends.
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut got))
        .await
        .expect("the connection was closed");
    assert!(
        read.is_ok() || read.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    assert!(got.len() < 200 * 64 * 1024, "the flood was not all sent: {} bytes", got.len());
}

/// Reads a chunked SSE response until its last chunk; the `id:`s and flood frames seen.
async fn read_until_cut(tcp: &mut TcpStream) -> (Vec<u64>, usize, String) {
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while !raw.ends_with(b"\r\n0\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf))
            .await
            .expect("the stream is cut off and ends")
            .unwrap();
        assert!(n > 0, "the connection stays open after the stream ends");
        raw.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let ids = text.lines().filter_map(|l| l.strip_prefix("id: ")?.trim().parse().ok()).collect();
    let floods = text.lines().filter(|l| l.starts_with(r#"data: {"pad""#)).count();
    (ids, floods, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_too_far_behind_is_cut_off_and_resumes_with_exactly_the_missed_events() {
    let model = ScriptedModel::new([reply().call("bump", "{}"), reply().text("done")]);
    let server = start_configured(model, None, None, |config| config.sse_buffer = 8).await;
    let id = server.session(json!({})).await;
    let mut tcp = unread_stream(&server, &id).await;
    flood(&server, &id);
    // A whole turn runs while the client is far behind.
    let (status, body) = server.post(&format!("/v1/sessions/{id}/messages"), json!({"text": "go"})).await;
    assert_eq!(status, 202, "{body}");
    server.wait_idle(&id).await;

    let (ids, floods, text) = read_until_cut(&mut tcp).await;
    assert!(floods < 200, "cut off in the flood, after {floods} frames");
    assert!(!text.contains("turn/end"), "nothing after the cut");
    let last = *ids.last().unwrap();
    assert_eq!(ids, (0..=last).collect::<Vec<_>>(), "what it got before the cut is in order");

    let mut resumed = server.events(&id, Some(last)).await;
    let rest = resumed.until("turn/end").await;
    let stored: Vec<Value> =
        server.store.read(&id).unwrap().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    let got: Vec<(u64, Value)> = rest.iter().map(|e| (e.id.unwrap(), e.data.clone())).collect();
    let expected: Vec<(u64, Value)> =
        stored.iter().enumerate().skip(last as usize + 1).map(|(seq, v)| (seq as u64, v.clone())).collect();
    assert_eq!(got, expected, "exactly the missed events, as stored");
}
