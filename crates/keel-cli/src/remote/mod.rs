//! `keel --remote URL "task"`: one turn on a running `keel serve`, in print or JSON mode
//! (without a task, the interactive mode of [`interactive`]).
//!
//! Creates a session for the current folder (or reuses one with `--continue` /
//! `--resume`), opens its event stream, then posts the message, and reads events until
//! the turn's `turn/end`. JSON mode prints each event line as the server sent it (they are
//! `keel --json` lines) and a `keel/done` line; print mode shows progress on stderr and
//! the answer on stdout. Ctrl-C aborts the turn on the server. The server is not trusted:
//! answers and events are bounded and every failure is one line on stderr.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_agent::{AgentEvent, Sink, TurnOutcome};
use keel_llm::sse::{SseEvent, SseParser};
use keel_llm::{CancellationToken, ModelEvent};
use keel_session::{Event, EventKind, TurnEndReason};
use serde_json::{Value, json};

use crate::cli::Cli;
use crate::exit;
use crate::print_mode::exit_code;
use crate::render::Terminal;
use crate::render::json::JsonLines;
use crate::{setup, signals};

pub mod interactive;

/// The largest JSON answer read (create, list, show, errors).
const ANSWER_BYTES: usize = 1 << 20;
/// The largest single event on the stream.
const EVENT_BYTES: usize = 16 << 20;
/// The most read from one event stream in all.
const STREAM_BYTES: usize = 1 << 30;
/// Nothing (not even a heartbeat, sent every 10 s) for this long: the server is gone.
const IDLE: Duration = Duration::from_secs(60);
/// How long an aborted turn may take to end on the server.
const ABORT_WAIT: Duration = Duration::from_secs(30);
/// Reconnections to a stream cut off without progress in between before giving up.
const RESUMES: u32 = 5;
/// How long a cut stream waits for a server that is away (restarting: refused
/// connections, 502/503/504) before giving up.
const RECONNECT: Duration = Duration::from_secs(60);

/// A failure, said in one line.
type Failed = String;

/// A server and its token.
struct Remote {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// The token: `KEEL_SERVE_TOKEN`, else the one `keel serve` keeps on this machine.
fn token() -> String {
    if let Ok(token) = std::env::var("KEEL_SERVE_TOKEN")
        && !token.trim().is_empty()
    {
        return token.trim().to_owned();
    }
    std::fs::read_to_string(crate::paths::keel_home().join("serve-token"))
        .map(|t| t.trim().to_owned())
        .unwrap_or_default()
}

impl Remote {
    fn new(url: &str) -> Result<Self, Failed> {
        let base = url.trim().trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base).to_owned();
        let parsed = reqwest::Url::parse(&base).map_err(|e| format!("--remote `{url}` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("--remote `{url}`: use an http:// or https:// URL"));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30));
        if parsed.scheme() == "http" {
            builder = builder.tls_certs_only(Vec::new());
        }
        let http = builder.build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Remote { http, base, token: token() })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1{path}", self.base)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Failed> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("cannot reach the server at {}: {e}", self.base))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let body = read_capped(response, ANSWER_BYTES).await.unwrap_or_default();
        let message = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "(no JSON error)".to_owned());
        Err(match status {
            401 => {
                "the server refused the token (401): set KEEL_SERVE_TOKEN to the token `keel serve` printed"
                    .to_owned()
            }
            404 => format!("not found on the server (404): {message}"),
            409 => format!("the server refused (409): {message}"),
            _ => format!("the server answered {status}: {message}"),
        })
    }

    /// A JSON answer to `request`.
    async fn json(&self, request: reqwest::RequestBuilder) -> Result<Value, Failed> {
        let response = self.send(request).await?;
        let body = read_capped(response, ANSWER_BYTES).await?;
        if body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&body).map_err(|_| "the server's answer is not JSON".to_owned())
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, Failed> {
        let request =
            self.http.post(self.url(path)).header("content-type", "application/json").body(body.to_string());
        self.json(request).await
    }

    /// Deletes session `id`, as well as it can (a failure leaves an empty session).
    async fn delete_session(&self, id: &str) {
        let _ = self.json(self.http.delete(self.url(&format!("/sessions/{id}")))).await;
    }

    async fn get(&self, path: &str) -> Result<Value, Failed> {
        self.json(self.http.get(self.url(path))).await
    }
}

/// At most `limit` bytes of `response`'s body.
async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Failed> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading the server's answer: {e}"))? {
        if body.len() + chunk.len() > limit {
            return Err(format!("the server's answer is longer than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The session to use and the last event seq already in it (none for a new one).
async fn session(remote: &Remote, cli: &Cli) -> Result<(String, Option<u64>), Failed> {
    let folder = setup::workspace(cli).map_err(|e| e.message)?;
    let existing = if let Some(id) = &cli.resume {
        Some(id.clone())
    } else if cli.continue_latest {
        let list = remote.get("/sessions").await?;
        let folder = folder.to_string_lossy();
        let latest = list["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["folder"].as_str() == Some(&*folder))
            .max_by_key(|s| s["modified_ms"].as_u64().unwrap_or(0))
            .and_then(|s| s["id"].as_str().map(str::to_owned));
        Some(latest.ok_or_else(|| format!("no session of {folder} on the server to continue"))?)
    } else {
        None
    };
    if let Some(id) = existing {
        let shown = remote.get(&format!("/sessions/{}", path_part(&id)?)).await?;
        let last = shown["events"].as_u64().and_then(|n| n.checked_sub(1));
        return Ok((id, last));
    }
    let mut spec = json!({"folder": folder});
    for (key, value) in [
        ("model", &cli.model),
        ("profile", &cli.profile),
        ("permission", &cli.permission),
        ("sandbox", &cli.sandbox),
    ] {
        if let Some(value) = value {
            spec[key] = json!(value);
        }
    }
    let created = remote.post("/sessions", &spec).await?;
    let id = created["id"].as_str().ok_or("the server's answer has no session id")?;
    Ok((path_part(id)?.to_owned(), None))
}

/// `id` if it is safe in a URL path.
fn path_part(id: &str) -> Result<&str, Failed> {
    if !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        Ok(id)
    } else {
        Err(format!("`{id}` is not a session id"))
    }
}

/// What the turn did, from its events.
#[derive(Debug, Default)]
struct Turn {
    started: bool,
    steps: u32,
    tool_calls: u32,
    /// The turn's calls by id (from `tool/call`), to show each when its result comes.
    calls: std::collections::HashMap<String, keel_llm::ToolCall>,
    final_text: String,
    end: Option<keel_session::TurnEnd>,
    /// The seq of the last logged event seen, to resume a cut stream after it.
    last_seq: Option<u64>,
}

impl Turn {
    /// The outcome of the turn that ended with `end`, for the summary line.
    fn outcome(&self, end: keel_session::TurnEnd) -> TurnOutcome {
        TurnOutcome {
            turn: end.turn,
            reason: end.reason,
            message: end.message,
            final_text: self.final_text.clone(),
            steps: self.steps,
            tool_calls: self.tool_calls,
            usage: end.usage,
        }
    }

    fn logged(&mut self, event: &Event) {
        match &event.kind {
            EventKind::TurnStart(_) => *self = Turn { started: true, ..Turn::default() },
            _ if !self.started => {}
            EventKind::StepStart(_) => self.steps += 1,
            EventKind::ToolCall(call) => {
                let call = keel_llm::ToolCall {
                    id: call.call_id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    item_id: None,
                };
                self.calls.insert(call.id.clone(), call);
            }
            EventKind::AssistantMessage(message) => self.final_text = message.text(),
            EventKind::ToolResult(result) => {
                self.tool_calls += 1;
                if result.concludes_turn {
                    self.final_text = result.content.clone();
                }
            }
            EventKind::TurnEnd(end) => self.end = Some(end.clone()),
            _ => {}
        }
        self.last_seq = Some(event.seq);
    }
}

/// Runs `task` on the server `cli.remote` names and returns the exit code.
pub async fn run(cli: &Cli, task: String) -> anyhow::Result<u8> {
    let json = cli.json.then(JsonLines::new);
    let fail = |message: String| -> anyhow::Result<u8> {
        errln!("keel: {message}");
        if let Some(out) = &json {
            out.write_value(&json!({"type": "keel/error", "data": {"message": message}}));
        }
        Ok(exit::ERROR)
    };
    let url = cli.remote.as_deref().unwrap_or_default();
    let remote = match Remote::new(url) {
        Ok(remote) => remote,
        Err(e) => return fail(e),
    };
    let (id, after) = match session(&remote, cli).await {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    let terminal = Arc::new(Terminal::new(false));
    let started = Instant::now();
    let turn = match one_turn(&remote, &id, after, task, json.as_ref(), &terminal).await {
        Ok(turn) => turn,
        Err(TurnFailure::Refused(e)) => {
            if after.is_none() {
                // This run made the session for its message: a refused message leaves none.
                remote.delete_session(&id).await;
            }
            return fail(e);
        }
        Err(TurnFailure::Failed(e)) => return fail(e),
    };
    let Some(end) = turn.end.clone() else { return fail("the turn did not end".to_owned()) };
    let code = exit_code(end.reason);
    match &json {
        Some(out) => out.write_value(&json!({
            "type": "keel/done",
            "data": {
                "session_id": id,
                "reason": end.reason.as_str(),
                "message": end.message,
                "final_text": turn.final_text,
                "steps": turn.steps,
                "tool_calls": turn.tool_calls,
                "usage": end.usage,
                "exit_code": code,
            }
        })),
        None => {
            if matches!(
                end.reason,
                TurnEndReason::Completed | TurnEndReason::MaxSteps | TurnEndReason::Looping
            ) && !turn.final_text.is_empty()
            {
                crate::render::print_answer(&turn.final_text);
            }
            terminal.summary_with_cost(&turn.outcome(end), started.elapsed(), None, None);
        }
    }
    Ok(code)
}

/// Why a turn did not run to its end.
enum TurnFailure {
    /// The server refused the message: no turn started.
    Refused(Failed),
    /// The turn started, and following it failed.
    Failed(Failed),
}

/// Runs `task` as a turn of session `id` (whose last event seq is `after`): opens the
/// event stream first, so no event of the turn is missed, posts the message, and follows
/// the turn to its end; Ctrl-C aborts it on the server.
async fn one_turn(
    remote: &Remote,
    id: &str,
    after: Option<u64>,
    task: String,
    json: Option<&JsonLines>,
    terminal: &Arc<Terminal>,
) -> Result<Turn, TurnFailure> {
    let stream = open_stream(remote, id, after).await.map_err(TurnFailure::Refused)?;
    remote
        .post(&format!("/sessions/{id}/messages"), &json!({"text": task}))
        .await
        .map_err(TurnFailure::Refused)?;
    let cancel = CancellationToken::new();
    let interrupts = signals::during_turn(&cancel);
    let ticker = json.is_none().then(|| crate::print_mode::ticker(Arc::clone(terminal)));
    let result = follow(remote, id, (stream, after), json, terminal, &cancel).await;
    drop(interrupts);
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    if result.is_err() {
        terminal.stop_spinner();
    }
    result.map_err(TurnFailure::Failed)
}

/// Reconnections of a cut stream: at most `RESUMES` in a row without a new logged
/// event in between.
struct Resumes {
    count: u32,
    /// The last seq seen when the stream was last reopened.
    at: Option<u64>,
}

impl Resumes {
    /// How long to wait before reopening after `cut`, or `cut` itself when it keeps
    /// happening without progress.
    fn again(&mut self, last_seq: Option<u64>, cut: Failed) -> Result<Duration, Failed> {
        if last_seq != self.at {
            self.count = 0;
        }
        self.count += 1;
        self.at = last_seq;
        if self.count > RESUMES {
            return Err(cut);
        }
        Ok(Duration::from_millis(100 * u64::from(self.count)))
    }
}

/// Opens session `id`'s event stream, resuming after seq `after` (`Last-Event-ID`).
async fn open_stream(remote: &Remote, id: &str, after: Option<u64>) -> Result<reqwest::Response, Failed> {
    remote.send(events_request(remote, id, after)).await
}

/// The request for session `id`'s event stream after seq `after` (without the token).
fn events_request(remote: &Remote, id: &str, after: Option<u64>) -> reqwest::RequestBuilder {
    let request =
        remote.http.get(remote.url(&format!("/sessions/{id}/events"))).header("accept", "text/event-stream");
    match after {
        Some(after) => request.header("last-event-id", after.to_string()),
        None => request,
    }
}

/// Reopens the stream after a cut, waiting with backoff while the server is away (a
/// restart: refused connections, 502/503/504) for up to [`RECONNECT`].
async fn reopen_stream(
    remote: &Remote,
    id: &str,
    after: Option<u64>,
    terminal: Option<&Terminal>,
) -> Result<reqwest::Response, Failed> {
    let started = Instant::now();
    let mut wait = Duration::from_millis(200);
    let mut told = false;
    loop {
        let request = events_request(remote, id, after).bearer_auth(&remote.token);
        let away = match request.send().await {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => matches!(response.status().as_u16(), 502..=504),
            Err(e) => e.is_connect() || e.is_timeout(),
        };
        if !away || started.elapsed() >= RECONNECT {
            // Once more through the usual path, for its error message.
            return open_stream(remote, id, after).await;
        }
        if let Some(terminal) = terminal
            && !told
        {
            terminal.line("keel: the server is away (restarting?); reconnecting…");
            told = true;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// Reads the stream until the turn ends; Ctrl-C (`cancel`) aborts it on the server. A
/// stream that ends or breaks before the turn does (the server cuts off a client that
/// fell too far behind) is reopened after the last logged event seen: logged events
/// resume exactly, live ones (deltas) of the gap are lost.
async fn follow(
    remote: &Remote,
    id: &str,
    (mut stream, after): (reqwest::Response, Option<u64>),
    json: Option<&JsonLines>,
    terminal: &Terminal,
    cancel: &CancellationToken,
) -> Result<Turn, Failed> {
    let mut parser = SseParser::with_max_event_bytes(EVENT_BYTES);
    let mut turn = Turn { last_seq: after, ..Turn::default() };
    let mut resumes = Resumes { count: 0, at: after };
    let mut total = 0usize;
    let mut aborted_at: Option<Instant> = None;
    let mut events = Vec::new();
    loop {
        let wait = match aborted_at {
            Some(at) => ABORT_WAIT.saturating_sub(at.elapsed()),
            None => IDLE,
        };
        let chunk = tokio::select! {
            chunk = tokio::time::timeout(wait, stream.chunk()) => chunk,
            () = cancel.cancelled(), if aborted_at.is_none() => {
                aborted_at = Some(Instant::now());
                if json.is_none() {
                    terminal.line("keel: aborting the turn on the server…");
                }
                // 409: the turn already ended; its `turn/end` is on the way.
                if let Err(e) = remote.post(&format!("/sessions/{id}/abort"), &json!({})).await
                    && !e.contains("(409)")
                {
                    return Err(e);
                }
                continue;
            }
        };
        let chunk = match chunk {
            Ok(Ok(Some(chunk))) => Ok(chunk),
            Ok(Ok(None)) => Err("the server ended the event stream before the turn ended".to_owned()),
            Ok(Err(e)) => Err(format!("reading the event stream: {e}")),
            Err(_) if aborted_at.is_some() => {
                return Err("the server did not end the aborted turn".to_owned());
            }
            Err(_) => return Err(format!("the server sent nothing for {} s", IDLE.as_secs())),
        };
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(cut) => {
                tokio::time::sleep(resumes.again(turn.last_seq, cut)?).await;
                stream = reopen_stream(remote, id, turn.last_seq, json.is_none().then_some(terminal)).await?;
                parser = SseParser::with_max_event_bytes(EVENT_BYTES);
                continue;
            }
        };
        total += chunk.len();
        if total > STREAM_BYTES {
            return Err(format!("the event stream passed {STREAM_BYTES} bytes"));
        }
        parser.feed(&chunk, &mut events).map_err(|e| e.to_string())?;
        for event in events.drain(..) {
            handle(remote, id, &event, &mut turn, json, terminal).await?;
            if turn.end.is_some() {
                return Ok(turn);
            }
        }
    }
}

/// One event of the stream.
async fn handle(
    remote: &Remote,
    id: &str,
    sse: &SseEvent,
    turn: &mut Turn,
    json: Option<&JsonLines>,
    terminal: &Terminal,
) -> Result<(), Failed> {
    if sse.data.is_empty() {
        return Ok(());
    }
    let value: Value = serde_json::from_str(&sse.data)
        .map_err(|_| "the server sent an event that is not JSON".to_owned())?;
    let kind = value["type"].as_str().unwrap_or_default().to_owned();
    let logged =
        value.get("seq").is_some().then(|| serde_json::from_value::<Event>(value.clone()).ok()).flatten();
    if let Some(out) = json
        && kind != "session/header"
    {
        if sse.data.contains('\n') {
            out.write_value(&value);
        } else {
            outln!("{}", sse.data);
        }
    }
    if let Some(event) = &logged {
        turn.logged(event);
        if json.is_none() {
            terminal.emit(&AgentEvent::Logged(event));
            // The tool line a local run prints when a call finishes.
            if let EventKind::ToolResult(result) = &event.kind {
                let call = turn.calls.get(&result.call_id).cloned().unwrap_or_else(|| keel_llm::ToolCall {
                    id: result.call_id.clone(),
                    name: result.name.clone(),
                    arguments: String::new(),
                    item_id: None,
                });
                let duration = Duration::from_millis(result.duration_ms.unwrap_or(0));
                terminal.emit(&AgentEvent::ToolFinished { step: turn.steps, call: &call, result, duration });
            }
        }
        return Ok(());
    }
    let text = || value["data"]["text"].as_str().unwrap_or_default().to_owned();
    match kind.as_str() {
        "keel/error" => {
            let message = value["data"]["message"].as_str().unwrap_or("the server failed");
            return Err(format!("the server stopped the turn: {message}"));
        }
        "permission/ask" => {
            let tool = value["data"]["tool"].as_str().unwrap_or("a tool");
            let (answer, message) = if json.is_none() && terminal.streams_text() {
                let arguments = value["data"]["arguments"].as_str().unwrap_or_default();
                interactive::ask(terminal, tool, arguments).await
            } else {
                // Print and JSON modes cannot answer: deny, as an unanswered question would.
                if json.is_none() {
                    terminal.line(&format!(
                        "keel: the server asks to run {tool}; --remote cannot answer: denied"
                    ));
                }
                ("deny", None)
            };
            let mut answer = json!({"id": value["data"]["id"], "answer": answer});
            if let Some(message) = message {
                answer["message"] = json!(message);
            }
            remote.post(&format!("/sessions/{id}/permission"), &answer).await?;
        }
        "tool/started" if json.is_none() => {
            let call_id = value["data"]["call_id"].as_str().unwrap_or_default();
            if let Some(call) = turn.calls.get(call_id).cloned() {
                terminal.emit(&AgentEvent::ToolStarted { step: turn.steps, call: &call });
            }
        }
        "model/retry" if json.is_none() => {
            let data = &value["data"];
            let number = |key: &str| data[key].as_u64().unwrap_or_default();
            terminal.emit(&AgentEvent::Model(&ModelEvent::Retrying {
                attempt: u32::try_from(number("attempt")).unwrap_or(u32::MAX),
                max_retries: u32::try_from(number("max_retries")).unwrap_or(u32::MAX),
                delay: Duration::from_millis(number("delay_ms")),
                reason: data["reason"].as_str().unwrap_or_default().to_owned(),
            }));
        }
        "turn/queued" if json.is_none() => {
            let place = value["data"]["place"].as_u64().unwrap_or_default();
            terminal.line(&format!("keel: the server is busy; this turn waits in line (place {place})"));
        }
        "delta/text" if json.is_none() => {
            terminal.emit(&AgentEvent::Model(&ModelEvent::TextDelta(text())));
        }
        "delta/thinking" if json.is_none() => {
            terminal.emit(&AgentEvent::Model(&ModelEvent::ThinkingDelta(text())));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts with progress in between are retried without end; five in a row without a
    /// new event give up with the cut's own message.
    #[test]
    fn resumes_give_up_after_five_cuts_without_progress() {
        let mut resumes = Resumes { count: 0, at: None };
        let waits: Vec<_> = (0..5).map(|_| resumes.again(Some(3), "cut".into())).collect();
        assert_eq!(
            waits,
            vec![
                Ok(Duration::from_millis(100)),
                Ok(Duration::from_millis(200)),
                Ok(Duration::from_millis(300)),
                Ok(Duration::from_millis(400)),
                Ok(Duration::from_millis(500)),
            ]
        );
        assert_eq!(resumes.again(Some(3), "cut".into()), Err("cut".to_owned()));
        assert_eq!(resumes.again(Some(7), "cut".into()), Ok(Duration::from_millis(100)), "progress resets");
    }
}
