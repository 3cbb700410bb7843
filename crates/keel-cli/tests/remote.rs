#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel --remote URL "task"` against the real `keel serve` and the mock model server:
//! print mode, JSON mode, a wrong token, an unknown session, no server.

mod common;
#[path = "common/pty.rs"]
mod pty;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{Env, output, text};
use keel_session::SessionStore;
use keel_testkit::{ChatStream, MockServer};
use serde_json::Value;

const TOKEN: &str = "remote-test-token-0123456789";

/// `keel serve` on a free port; its address. The caller waits for it (`stop`).
fn serve(env: &Env, model: &MockServer) -> (Child, String) {
    let mut command = env.keel(&model.base_url());
    command.args(["serve", "--listen", "127.0.0.1:0"]).env("KEEL_SERVE_TOKEN", TOKEN);
    let (child, address, _) = common::spawn_serve(command);
    (child, format!("http://{address}"))
}

fn stop(child: Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let mut child = child;
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_print_and_json_modes_run_a_turn_on_the_server() {
    let model = MockServer::start().await;
    model.push(
        ChatStream::new()
            .tool_call("c1", "read_file", r#"{"path":"hello.py"}"#, 2)
            .tool_call("c2", "write_file", r#"{"path":"notes.txt","content":"one\ntwo\n"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    model.push(ChatStream::new().text("It prints hello.", 3).finish("stop").response());
    model.push(ChatStream::new().text("Still hello.", 3).finish("stop").response());
    let env = Env::new();
    let (server, url) = serve(&env, &model);

    // Print mode: the answer on stdout, a summary on stderr.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "what does hello.py print?"]);
    let out = output(command).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(stdout, "It prints hello.\n");
    assert!(stderr.contains("completed") && stderr.contains("2 tool calls"), "{stderr}");
    // As a local run: the tool line when the call finishes (issue 30, item 9), and under a
    // write its diff (logged with the result on the server, so it crosses the wire).
    assert!(
        stderr.lines().any(|l| l.contains("✓") && l.contains("read_file") && l.contains("→")),
        "{stderr}"
    );
    assert!(
        stderr.contains("notes.txt (new): +2 -0\n      @@ -0,0 +1,2 @@\n      +one\n      +two"),
        "{stderr}"
    );

    // JSON mode, continuing that session: `keel --json` lines, then keel/done.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).env("KEEL_REMOTE", &url).args(["--json", "-c", "and now?"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn/start"), "only this turn's events: {kinds:?}");
    assert!(kinds.contains(&"delta/text") && kinds.contains(&"turn/end"), "{kinds:?}");
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "keel/done");
    assert_eq!(done["data"]["reason"], "completed");
    assert_eq!(done["data"]["final_text"], "Still hello.");
    assert_eq!(done["data"]["steps"], 1);
    assert_eq!(done["data"]["exit_code"], 0);
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.len(), 1, "--continue reused the session");
    assert_eq!(done["data"]["session_id"].as_str(), Some(sessions[0].id.as_str()));

    // A wrong token: one clear line, exit 1.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", "wrong").args(["--remote", &url, "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("401") && stderr.contains("KEEL_SERVE_TOKEN"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // An unknown session: 404, exit 1.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "--resume", "nosuchsession", "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("404"), "{}", text(&out.stderr));
    stop(server);

    // No server: exit 1, no panic.
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cannot reach") && !stderr.contains("panicked"), "{stderr}");
}

/// `keel --remote URL` without a task: the interactive mode. Answers stream, the server's
/// permission question is asked and answered here, the diff shows, local-only commands
/// say so, and the session carries from line to line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_interactive_mode_runs_turns_and_answers_questions() {
    assert!(pty::has_script(), "util-linux `script` (a pseudo-terminal) is needed");
    let model = MockServer::start().await;
    model.push(
        ChatStream::new()
            .tool_call("c1", "write_file", r#"{"path":"notes.txt","content":"one\n"}"#, 2)
            .finish("tool_calls")
            .response(),
    );
    model.push(ChatStream::new().text("Wrote notes.txt.", 3).finish("stop").response());
    model.push(ChatStream::new().text("Still there.", 3).finish("stop").response());
    let env = Env::new();
    let (server, url) = serve(&env, &model);
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN);
    let script = pty::under_script(&command, &format!("--remote {url} --permission ask"));
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line("write the notes");
        terminal.wait_for("allow write_file?", 1);
        terminal.type_line("y");
        terminal.wait_for("completed", 1);
        terminal.type_line("/undo");
        terminal.wait_for("not available with --remote", 1);
        terminal.type_line("and now?");
        terminal.wait_for("completed", 2);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    assert!(terminal.child.wait().unwrap().success());
    let screen = pty::plain(&terminal.text());
    if let Some(dir) = std::env::var_os("KEEL_SCREEN_DIR") {
        std::fs::write(std::path::Path::new(&dir).join("remote.txt"), &screen).unwrap();
    }
    assert_eq!(std::fs::read_to_string(env.workspace().join("notes.txt")).unwrap(), "one\n");
    for shown in [
        "allow write_file?\n    notes.txt  (in the server's workspace)\n    @@ -0,0 +1 @@\n    +one",
        "Wrote notes.txt.",
        "notes.txt (new): +1 -0",
        "Still there.",
        "to come back to this session",
    ] {
        assert!(screen.contains(shown), "{shown:?} in:\n{screen}");
    }
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.len(), 1, "one session for both lines");
    let turns = env
        .store()
        .read(&sessions[0].id)
        .unwrap()
        .iter()
        .filter(|e| matches!(e.kind, keel_session::EventKind::TurnStart(_)))
        .count();
    assert_eq!(turns, 2);
    stop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_aborts_the_remote_turn_and_exits_130() {
    let model = MockServer::start().await;
    model.push(ChatStream::new().text("Let me think about", 1).finish("stop").response().stall_after(2));
    let env = Env::new();
    let (server, url) = serve(&env, &model);
    let mut command = env.keel_unconfigured();
    command
        .env("KEEL_SERVE_TOKEN", TOKEN)
        .args(["--remote", &url, "long task"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let started = std::time::Instant::now();
    while model.request_count() == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "the server never asked the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("aborted"), "{stderr}");
    stop(server);
    let events = env.session_events();
    assert!(
        matches!(&events.last().unwrap().kind, keel_session::EventKind::TurnEnd(end) if end.reason == keel_session::TurnEndReason::Aborted),
        "{:?}",
        events.last()
    );
}

/// A first message the server refuses (its line of turns is full: 503) leaves no session
/// behind: the run made the session for that message and deletes it. A fake server,
/// since the real one refuses a new session's first message only under load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_first_message_leaves_no_session_on_the_server() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = std::sync::Arc::clone(&requests);
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let (mut tcp, seen) = (tcp.unwrap(), std::sync::Arc::clone(&seen));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(tcp.try_clone().unwrap());
                let (mut head, mut length) = (Vec::new(), 0usize);
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    head.push(line.trim().to_owned());
                }
                reader.read_exact(&mut vec![0; length]).unwrap();
                let request = head[0].rsplit_once(' ').unwrap().0.to_owned();
                seen.lock().unwrap().push(request.clone());
                let (status, body) = match request.as_str() {
                    "POST /v1/sessions" => ("201 Created", r#"{"id": "fake-2"}"#),
                    "GET /v1/sessions/fake-2/events" => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
                        tcp.write_all(head.as_bytes()).unwrap();
                        std::thread::sleep(Duration::from_secs(30));
                        return;
                    }
                    "POST /v1/sessions/fake-2/messages" => (
                        "503 Service Unavailable",
                        r#"{"error": {"code": "busy", "message": "too many turns wait in line"}}"#,
                    ),
                    "DELETE /v1/sessions/fake-2" => ("204 No Content", ""),
                    _ => ("404 Not Found", r#"{"error": {"code": "not_found", "message": "no"}}"#),
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                tcp.write_all(answer.as_bytes()).unwrap();
            });
        }
    });
    let env = Env::new();
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", &url, "hi"]);
    let out = output(command).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("503") && stderr.contains("too many turns wait in line"), "{stderr}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(
        requests,
        [
            "POST /v1/sessions",
            "GET /v1/sessions/fake-2/events",
            "POST /v1/sessions/fake-2/messages",
            "DELETE /v1/sessions/fake-2"
        ]
    );
}

/// What the fake server saw of the event stream requests: each one's `Last-Event-ID`.
type Resumed = std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>;

/// A fake `keel serve` for one new session whose stream is cut after seq `cut` (as the
/// real one cuts off a client that fell too far behind); a request resuming with
/// `Last-Event-ID` gets the events after it.
/// The fake server cuts the stream after seq `cut`; then answers `restarting` reopens with
/// 503, as a server that is being restarted behind a proxy, before it serves the rest.
fn cutting_server(events: Vec<keel_session::Event>, cut: u64, restarting: usize) -> (String, Resumed) {
    use std::io::{Read, Write};
    let away = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(restarting));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let resumed = Resumed::default();
    let posted = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let seen = std::sync::Arc::clone(&resumed);
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let (mut tcp, events, seen, posted) =
                (tcp.unwrap(), events.clone(), std::sync::Arc::clone(&seen), std::sync::Arc::clone(&posted));
            let away = std::sync::Arc::clone(&away);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(tcp.try_clone().unwrap());
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    head.push(line.trim().to_owned());
                }
                let header = |name: &str| {
                    head.iter().find_map(|h| {
                        let (n, v) = h.split_once(':')?;
                        n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
                    })
                };
                let length: usize = header("content-length").map_or(0, |n| n.parse().unwrap());
                reader.read_exact(&mut vec![0; length]).unwrap();
                let answer = |status: &str, body: &str| {
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let request = head[0].clone();
                if request.starts_with("POST /v1/sessions/fake-1/messages ") {
                    *posted.0.lock().unwrap() = true;
                    posted.1.notify_all();
                    tcp.write_all(answer("202 Accepted", "{}").as_bytes()).unwrap();
                } else if request.starts_with("POST /v1/sessions ") {
                    tcp.write_all(answer("201 Created", r#"{"id": "fake-1", "folder": "/w"}"#).as_bytes())
                        .unwrap();
                } else if request.starts_with("GET /v1/sessions/fake-1/events ")
                    && header("last-event-id").is_some()
                    && away.load(std::sync::atomic::Ordering::SeqCst) > 0
                {
                    away.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    seen.lock().unwrap().push(Some("503".to_owned()));
                    let body = r#"{"error": {"code": "stopping", "message": "the server is shutting down"}}"#;
                    tcp.write_all(answer("503 Service Unavailable", body).as_bytes()).unwrap();
                } else if request.starts_with("GET /v1/sessions/fake-1/events ") {
                    let last = header("last-event-id");
                    seen.lock().unwrap().push(last.clone());
                    tcp.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
                    )
                    .unwrap();
                    let after: Option<u64> = last.map(|l| l.parse().unwrap());
                    if after.is_none() {
                        let mut done = posted.0.lock().unwrap();
                        while !*done {
                            done = posted.1.wait(done).unwrap();
                        }
                    }
                    for event in &events {
                        let wanted = match after {
                            None => event.seq <= cut,
                            Some(after) => event.seq > after,
                        };
                        if wanted {
                            let data = serde_json::to_string(event).unwrap();
                            tcp.write_all(format!("id: {}\ndata: {data}\n\n", event.seq).as_bytes()).unwrap();
                        }
                    }
                    // Then the cut (or the end, once the turn ended): the connection closes.
                } else {
                    tcp.write_all(
                        answer("404 Not Found", r#"{"error": {"code": "x", "message": "x"}}"#).as_bytes(),
                    )
                    .unwrap();
                }
            });
        }
    });
    (url, resumed)
}

/// A real turn's events, as the server would send them.
fn recorded_turn() -> Vec<keel_session::Event> {
    let dir = tempfile::tempdir().unwrap();
    let store = keel_session::JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    keel_testkit::store::record_turn(&mut session, "hi");
    let id = session.id().to_owned();
    session.close().unwrap();
    store.read(&id).unwrap()
}

/// `keel --remote URL --json hi` (it must succeed): its lines, and the events it should have
/// printed (all but the header).
async fn remote_json_lines(url: &str, events: &[keel_session::Event]) -> (Vec<Value>, Vec<Value>) {
    let env = Env::new();
    let mut command = env.keel_unconfigured();
    command.env("KEEL_SERVE_TOKEN", TOKEN).args(["--remote", url, "--json", "hi"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let expected: Vec<Value> = events.iter().skip(1).map(|e| serde_json::to_value(e).unwrap()).collect();
    (lines, expected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_event_stream_is_resumed_after_the_last_event_seen() {
    let events = recorded_turn();
    let (url, resumed) = cutting_server(events.clone(), 3, 0);

    let (lines, expected) = remote_json_lines(&url, &events).await;
    assert_eq!(lines[..lines.len() - 1], expected[..], "every event once, in order, across the cut");
    let done = lines.last().unwrap();
    assert_eq!(
        (&done["type"], &done["data"]["reason"]),
        (&Value::from("keel/done"), &Value::from("completed"))
    );
    assert_eq!(*resumed.lock().unwrap(), vec![None, Some("3".to_owned())]);
}

/// A server that is restarting (503 to the reconnects) is waited for: the stream resumes
/// once it is back, with every event once (issue 30, item 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_waits_for_a_restarting_server_and_resumes() {
    let events = recorded_turn();
    let (url, resumed) = cutting_server(events.clone(), 3, 3);

    let (lines, expected) = remote_json_lines(&url, &events).await;
    assert_eq!(lines[..lines.len() - 1], expected[..], "every event once, in order, across the restart");
    let answered: Vec<Option<String>> = resumed.lock().unwrap().clone();
    assert_eq!(
        answered,
        vec![None, Some("503".into()), Some("503".into()), Some("503".into()), Some("3".into())],
        "three refused reopens, then the resume after seq 3"
    );
}
