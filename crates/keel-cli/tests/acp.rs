#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `keel acp` driven by a scripted ACP client (the SDK's client side) over the real
//! binary's stdin and stdout, against the mock model server: a whole turn with a tool
//! call and an answered permission question, a cancelled prompt, and `session/load`
//! replaying the history in a second connection; then the sessions as the terminal sees
//! them. Refusals are checked with hand-written JSON-RPC lines.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, StopReason, TextContent, ToolCallContent, ToolCallStatus,
};
use agent_client_protocol::{Agent, Client, Error, Lines};
use common::Env;
use keel_session::{EventKind, SessionStore};
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// What the client saw: the updates in order, the permission questions, and a signal
/// for each update.
#[derive(Clone, Default)]
struct Seen {
    updates: Arc<Mutex<Vec<SessionUpdate>>>,
    questions: Arc<Mutex<Vec<RequestPermissionRequest>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Seen {
    fn take(&self) -> Vec<SessionUpdate> {
        std::mem::take(&mut *self.updates.lock().unwrap())
    }
}

/// `keel acp` as a child with piped stdin and stdout.
fn spawn(env: &Env, model: &MockServer) -> tokio::process::Child {
    let mut command = tokio::process::Command::from(env.keel(&model.base_url()));
    command
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    command.spawn().unwrap()
}

/// Newline-delimited JSON-RPC over the child's pipes.
fn lines(
    child: &mut tokio::process::Child,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + use<>,
    impl futures::Stream<Item = std::io::Result<String>> + use<>,
> {
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let stdout = BufReader::new(stdout);
    let outgoing = futures::sink::unfold(stdin, |mut stdin, line: String| async move {
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    });
    let incoming = futures::stream::unfold(stdout.lines(), |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(line)) => Some((Ok(line), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// Runs `main` as an ACP client of a fresh `keel acp` that answers every permission
/// question with `answer`; returns what `main` returned once keel has exited.
async fn client<T>(
    env: &Env,
    model: &MockServer,
    seen: &Seen,
    answer: &'static str,
    main: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<T, Error>,
) -> T {
    let mut child = spawn(env, model);
    let transport = lines(&mut child);
    let (updates, questions) = (seen.clone(), seen.clone());
    let result = Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                updates.updates.lock().unwrap().push(notification.update);
                updates.arrived.notify_one();
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                questions.questions.lock().unwrap().push(request);
                let chosen = SelectedPermissionOutcome::new(answer);
                responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Selected(chosen)))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, main)
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "keel acp exited with {status}");
    result
}

fn text(update: &SessionUpdate) -> Option<&str> {
    match update {
        SessionUpdate::AgentMessageChunk(ContentChunk { content: ContentBlock::Text(text), .. })
        | SessionUpdate::UserMessageChunk(ContentChunk { content: ContentBlock::Text(text), .. }) => {
            Some(&text.text)
        }
        _ => None,
    }
}

/// Each update in a few words, for comparing whole sequences: kind, call id, status.
fn outline(updates: &[SessionUpdate]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::UserMessageChunk(_) => Some(format!("user: {}", text(update)?)),
            SessionUpdate::AgentMessageChunk(_) => Some(format!("agent: {}", text(update)?)),
            SessionUpdate::AgentThoughtChunk(_) => Some("thought".to_owned()),
            SessionUpdate::ToolCall(call) => {
                Some(format!("call {} {:?} {}", call.tool_call_id.0, call.status, call.title))
            }
            SessionUpdate::ToolCallUpdate(update) => {
                Some(format!("update {} {:?}", update.tool_call_id.0, update.fields.status?))
            }
            SessionUpdate::Plan(plan) => Some(format!("plan of {}", plan.entries.len())),
            SessionUpdate::UsageUpdate(_) => None,
            other => Some(format!("{other:?}")),
        })
        .collect()
}

fn prompt(session: &str, text: &str) -> PromptRequest {
    PromptRequest::new(session.to_owned(), vec![ContentBlock::Text(TextContent::new(text))])
}

const WRITE: &str = r#"{"path":"notes.txt","content":"one\ntwo\n"}"#;
const PLAN: &str =
    r#"{"plan":[{"step":"write notes","status":"completed"},{"step":"report","status":"in_progress"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_client_runs_a_turn_cancels_one_and_loads_the_session() {
    let model = MockServer::start().await;
    model.push(
        ChatStream::new()
            .tool_call("c1", "write_file", WRITE, 2)
            .tool_call("c2", "update_plan", PLAN, 1)
            .finish("tool_calls")
            .response(),
    );
    model.push(ChatStream::new().text("Wrote notes.txt.", 1).finish("stop").response());
    // The second prompt's reply streams a word, then stalls until cancelled.
    model
        .push(ChatStream::new().text("Let me", 1).text(" think", 1).finish("stop").response().stall_after(2));
    let env = Env::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let seen = Seen::default();

    let (session_id, first, second) = client(&env, &model, &seen, "allow_once", async |cx| {
        let init = cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
        assert_eq!(init.protocol_version, ProtocolVersion::V1);
        assert!(init.agent_capabilities.load_session);
        assert!(init.agent_capabilities.prompt_capabilities.image);
        assert_eq!(init.agent_info.map(|i| i.name), Some("keel".to_owned()));

        let created = cx.send_request(NewSessionRequest::new(&workspace)).block_task().await?;
        let modes = created.modes.unwrap();
        assert_eq!(modes.current_mode_id.0.as_ref(), "ask");
        let ids: Vec<&str> = modes.available_modes.iter().map(|m| m.id.0.as_ref()).collect();
        assert_eq!(ids, ["ask", "auto", "read-only"]);
        let id = created.session_id.0.to_string();

        let first = cx.send_request(prompt(&id, "write notes")).block_task().await?;
        // The second prompt is cancelled once its first words have arrived.
        let pending = cx.send_request(prompt(&id, "and now?"));
        let arrived = seen.arrived.clone();
        let updates = seen.updates.clone();
        tokio::time::timeout(Duration::from_secs(20), async {
            while !updates.lock().unwrap().iter().any(|u| text(u) == Some("Let me")) {
                arrived.notified().await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!("the second reply's first words: {:?}", outline(&updates.lock().unwrap()))
        });
        cx.send_notification(agent_client_protocol::v1::schema::CancelNotification::new(id.clone()))?;
        let second = pending.block_task().await?;
        Ok((id, first.stop_reason, second.stop_reason))
    })
    .await;
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::Cancelled));
    assert_eq!(std::fs::read_to_string(workspace.join("notes.txt")).unwrap(), "one\ntwo\n");

    // The one permission question: the write, by its announced id, with keel's answers.
    let questions = std::mem::take(&mut *seen.questions.lock().unwrap());
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert_eq!(questions[0].tool_call.tool_call_id.0.as_ref(), "c1");
    let kinds: Vec<PermissionOptionKind> = questions[0].options.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways
        ]
    );

    let live = seen.take();
    assert_eq!(
        outline(&live),
        [
            "call c1 Pending write_file: notes.txt",
            "call c2 Pending update_plan",
            "update c1 InProgress",
            "update c1 Completed",
            "update c2 InProgress",
            "update c2 Completed",
            "plan of 2",
            "agent: Wrote notes.txt.",
            "agent: Let me",
        ]
    );
    assert_eq!(live[3], completed_write(&workspace, &live[3]));
    assert_eq!(
        live[6],
        SessionUpdate::Plan(Plan::new(vec![
            PlanEntry::new("write notes", PlanEntryPriority::Medium, PlanEntryStatus::Completed),
            PlanEntry::new("report", PlanEntryPriority::Medium, PlanEntryStatus::InProgress),
        ]))
    );

    // An ordinary keel session: listed, with a completed and an aborted turn.
    let sessions = env.store().list().unwrap();
    assert_eq!(sessions.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [session_id.as_str()]);
    let ends: Vec<&str> = env
        .session_events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect();
    assert_eq!(ends, ["completed", "aborted"]);

    // A second connection loads it: the whole history replayed before the answer.
    let loaded = client(&env, &model, &seen, "allow_once", async |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await?;
        let load = LoadSessionRequest::new(session_id.clone(), &workspace);
        let response = cx.send_request(load).block_task().await?;
        Ok(response.modes.map(|m| m.current_mode_id.0.to_string()))
    })
    .await;
    assert_eq!(loaded.as_deref(), Some("ask"));
    let replayed = seen.take();
    assert_eq!(
        outline(&replayed),
        [
            "user: write notes",
            "call c1 Pending write_file: notes.txt",
            "call c2 Pending update_plan",
            "update c1 Completed",
            "update c2 Completed",
            "plan of 2",
            "agent: Wrote notes.txt.",
            "user: and now?",
            "agent: Let me",
        ]
    );
    assert_eq!(replayed[3], completed_write(&workspace, &replayed[3]));

    // The terminal resumes it: `keel sessions` lists it.
    let out = common::output({
        let mut command = env.keel(&model.base_url());
        command.args(["sessions"]);
        command
    })
    .await;
    assert!(common::text(&out.stdout).contains(&session_id[..8]), "{}", common::text(&out.stdout));
}

/// The write's completed update as expected: its diff (a new file) and its result text.
fn completed_write(workspace: &Path, actual: &SessionUpdate) -> SessionUpdate {
    let SessionUpdate::ToolCallUpdate(update) = actual else { panic!("not a call update: {actual:?}") };
    let content = update.fields.content.clone().unwrap_or_default();
    assert_eq!(content.len(), 2, "{content:?}");
    assert_eq!(content[0], ToolCallContent::Diff(Diff::new(workspace.join("notes.txt"), "one\ntwo\n")));
    assert_eq!(update.fields.status, Some(ToolCallStatus::Completed));
    actual.clone()
}

/// A hand-written JSON-RPC exchange with `keel acp`.
struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Raw {
    fn start(env: &Env, model: &MockServer) -> Raw {
        let mut child = spawn(env, model);
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw { child, stdin, lines }
    }

    async fn send(&mut self, line: &str) {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message that is not a `session/update`.
    async fn answer(&mut self) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line()).await.unwrap();
            let message: Value = serde_json::from_str(&line.unwrap().unwrap()).unwrap();
            if message["method"] != "session/update" {
                return message;
            }
        }
    }

    /// Sends a request and returns its error (code, message); panics on a result.
    async fn error_of(&mut self, request: Value) -> (i64, String) {
        self.send(&request.to_string()).await;
        let answer = self.answer().await;
        assert_eq!(answer["id"], request["id"], "{answer}");
        let error = &answer["error"];
        (error["code"].as_i64().unwrap(), error["message"].as_str().unwrap().to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors_and_the_session_survives() {
    let model = MockServer::start().await;
    model.push(ChatStream::new().text("Working", 1).finish("stop").response().stall_after(2));
    let env = Env::new();
    let workspace = env.workspace().canonicalize().unwrap();
    let mut raw = Raw::start(&env, &model);

    raw.send("{not json").await;
    let answer = raw.answer().await;
    assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32700)));
    raw.send(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"{}\"}}",
        "a".repeat(9 << 20)
    ))
    .await;
    let answer = raw.answer().await;
    assert_eq!(answer["error"]["code"], json!(-32700));
    assert_eq!(
        answer["error"]["data"]["line"],
        json!("(a message of 9437233 bytes: keel takes at most 8388608 bytes in one message)")
    );

    let init = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}});
    raw.send(&init.to_string()).await;
    assert_eq!(raw.answer().await["result"]["agentCapabilities"]["loadSession"], json!(true));
    let unknown = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}});
    assert_eq!(
        raw.error_of(unknown).await,
        (-32602, "no session nope in this connection (session/new or session/load first)".to_owned())
    );
    let relative = json!({"jsonrpc": "2.0", "id": 4, "method": "session/new",
        "params": {"cwd": "relative/path", "mcpServers": []}});
    assert_eq!(
        raw.error_of(relative).await,
        (-32602, "cwd must be an absolute path, not relative/path".to_owned())
    );
    let load_missing = json!({"jsonrpc": "2.0", "id": 5, "method": "session/load",
        "params": {"sessionId": "feedface", "cwd": workspace, "mcpServers": []}});
    assert_eq!(raw.error_of(load_missing).await.0, -32602);

    let new = json!({"jsonrpc": "2.0", "id": 6, "method": "session/new", "params": {"cwd": workspace, "mcpServers": []}});
    raw.send(&new.to_string()).await;
    let id = raw.answer().await["result"]["sessionId"].as_str().unwrap().to_owned();
    let image = json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": id,
        "prompt": [{"type": "text", "text": "see"}, {"type": "image", "data": "aGk=", "mimeType": "image/png"}]}});
    assert_eq!(
        raw.error_of(image).await,
        (-32602, "image 1: not an image keel can send: only PNG, JPEG, GIF and WebP are accepted".to_owned())
    );
    let mode = json!({"jsonrpc": "2.0", "id": 8, "method": "session/set_mode", "params": {"sessionId": id, "modeId": "yolo"}});
    assert_eq!(
        raw.error_of(mode).await,
        (-32602, "no mode `yolo`; keel's modes: ask, auto, read-only".to_owned())
    );

    // A prompt while one runs is refused; the running one is then cancelled.
    let running = json!({"jsonrpc": "2.0", "id": 9, "method": "session/prompt",
        "params": {"sessionId": id, "prompt": [{"type": "text", "text": "work"}]}});
    raw.send(&running.to_string()).await;
    let again = json!({"jsonrpc": "2.0", "id": 10, "method": "session/prompt",
        "params": {"sessionId": id, "prompt": [{"type": "text", "text": "more"}]}});
    assert_eq!(
        raw.error_of(again).await,
        (-32600, format!("session {id} is running a prompt; wait for it or cancel it"))
    );
    let load_open = json!({"jsonrpc": "2.0", "id": 11, "method": "session/load",
        "params": {"sessionId": id, "cwd": workspace, "mcpServers": []}});
    assert_eq!(
        raw.error_of(load_open).await,
        (-32600, format!("session {id} is already open in this connection"))
    );
    raw.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": id}}).to_string())
        .await;
    assert_eq!(raw.answer().await, json!({"jsonrpc": "2.0", "id": 9, "result": {"stopReason": "cancelled"}}));

    drop(raw.stdin);
    let status = tokio::time::timeout(Duration::from_secs(20), raw.child.wait()).await.unwrap().unwrap();
    assert!(status.success());
    let events = env.session_events();
    let ends: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, ["aborted"]);
}
