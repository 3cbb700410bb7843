#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A provider that refuses an image: the step is tried once more with the images as
//! notes; when that goes through, the images are withdrawn in the log (`images/withdrawn`,
//! before the reply), so later requests and requests rebuilt from the log send the notes.
//! A refusal that has nothing to do with images is reported as it was.

mod common;

use std::time::Duration;

use common::*;
use keel_agent::{
    Agent, AgentConfig, NullSink, Prompt, RecordedEvent, RecordingSink, SessionContext, Tool, ToolContext,
};
use keel_agent::{ToolError, ToolOutput};
use keel_llm::{CancellationToken, HttpClient, Image, Message, ModelError, ModelErrorKind, ProviderConfig};
use keel_llm::{ModelRequest, ToolChoice};
use keel_session::{
    CompactionOutcome, Event, EventKind, ImagesWithdrawn, JsonlStore, SessionStore, TurnEndReason,
};
use keel_testkit::mcp::PNG_BASE64;
use keel_testkit::{ChatStream, HttpRequest, MockResponse, MockServer, ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn png() -> Image {
    Image::from_base64(PNG_BASE64).unwrap()
}

fn note() -> String {
    format!("[an image (image/png, {}) withdrawn: the provider refused it]", png().describe())
}

fn client(server: &MockServer) -> HttpClient {
    let mut config = ProviderConfig::new(server.base_url(), "mock-model");
    config.life.max_retry_delay = Duration::from_millis(20);
    HttpClient::new(config).unwrap()
}

fn has_image(request: &HttpRequest) -> bool {
    request.json().to_string().contains("\"image_url\"")
}

fn refusal(message: &str) -> MockResponse {
    let error = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    MockResponse::json(400, &error)
}

fn answer(text: &str) -> MockResponse {
    ChatStream::new().text(text, 2).finish("stop").usage(30, 4).response()
}

/// The events a sink was shown as logged.
fn logged(sink: &RecordingSink) -> Vec<Event> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            RecordedEvent::Logged(event) => Some(event),
            _ => None,
        })
        .collect()
}

fn withdrawals(events: &[Event]) -> Vec<ImagesWithdrawn> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ImagesWithdrawn(withdrawn) => Some(withdrawn.clone()),
            _ => None,
        })
        .collect()
}

/// The body `client` sends for each request rebuilt from the log: the messages of
/// [`requests_from_log`], the system prompt and tools of the request header in force.
fn bodies_from_log(client: &HttpClient, events: &[Event], id: &str) -> Vec<serde_json::Value> {
    let header = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::RequestHeader(header) => Some(header.clone()),
            _ => None,
        })
        .unwrap();
    requests_from_log(events)
        .iter()
        .map(|messages| {
            let request = ModelRequest::new(&header.system_prompt, messages, &header.tools)
                .tool_choice(ToolChoice::Auto)
                .cache_key(id);
            serde_json::from_slice(&client.request_body(&request).unwrap()).unwrap()
        })
        .collect()
}

#[tokio::test]
async fn an_image_the_provider_refuses_is_withdrawn_and_the_turn_goes_on() {
    let server = MockServer::start().await;
    server.set_handler(|request| match has_image(request) {
        true => refusal("Invalid image: the image format is not supported"),
        false => answer("I cannot see the image, but go on."),
    });
    let model = client(&server);
    let agent = Agent::builder(model.clone()).build();
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let ctx = SessionContext::default();
    let sink = RecordingSink::new();
    let prompt = Prompt::text("What is this?").with_images(vec![png()]);
    let outcome = agent.run_turn(&mut session, &ctx, prompt, &sink, &CancellationToken::new()).await.unwrap();
    assert_eq!(
        (outcome.reason, outcome.final_text.as_str()),
        (TurnEndReason::Completed, "I cannot see the image, but go on.")
    );

    // The refused request carried the image; the one tried again the note.
    let requests = server.requests();
    assert_eq!(requests.iter().map(has_image).collect::<Vec<_>>(), [true, false]);
    assert!(requests[1].json().to_string().contains(&note()), "{}", requests[1].json());

    // The withdrawal is logged before the reply, and the user was shown it.
    let events = store.read(session.id()).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    let at = kinds.iter().position(|k| *k == "images/withdrawn").unwrap();
    assert_eq!(kinds[at - 1..=at + 1], ["step/start", "images/withdrawn", "assistant/message"]);
    let withdrawn = withdrawals(&events);
    assert_eq!(withdrawn.len(), 1);
    assert_eq!(withdrawn[0].sha256, [png().sha256]);
    assert!(
        withdrawn[0].reason.contains("Invalid image: the image format is not supported"),
        "{}",
        withdrawn[0].reason
    );
    assert_eq!(withdrawals(&logged(&sink)), withdrawn, "the sink was not shown the withdrawal");

    // The next turn sends the note, not the image: nothing is refused again.
    let id = session.id().to_owned();
    drop(session);
    let mut session = store.open(&id).unwrap();
    let next =
        agent.run_turn(&mut session, &ctx, "And now?", &NullSink, &CancellationToken::new()).await.unwrap();
    assert_eq!(next.reason, TurnEndReason::Completed);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(!has_image(&requests[2]));
    let Some(Message::User(first)) = session.messages().first() else { panic!("no user message") };
    assert_eq!((first.content.clone(), first.images.len()), (format!("What is this?\n{}", note()), 0));

    // Every request made, the refused one too, is what the log rebuilds.
    let events = store.read(&id).unwrap();
    let sent: Vec<serde_json::Value> = requests.iter().map(HttpRequest::json).collect();
    assert_eq!(sent, bodies_from_log(&model, &events, &id));
}

#[tokio::test]
async fn a_refused_request_without_images_is_reported_as_it_was() {
    let server = MockServer::start().await;
    server.set_handler(|_| refusal("tools.0.function.parameters: invalid schema"));
    let agent = Agent::builder(client(&server)).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), "hello", &sink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Error);
    assert_eq!(
        outcome.message.as_deref(),
        Some(
            "model request failed (invalid_request): custom rejected the request (HTTP 400): tools.0.function.parameters: invalid schema"
        )
    );
    assert_eq!(server.request_count(), 1);
    assert_eq!(withdrawals(&logged(&sink)), []);
}

#[tokio::test]
async fn a_refusal_that_stays_without_the_images_withdraws_nothing() {
    let server = MockServer::start().await;
    server.set_handler(|request| match has_image(request) {
        true => refusal("first refusal, with the image"),
        false => refusal("second refusal, without it"),
    });
    let (session, sink, outcome) = turn_with_an_image(&server).await;
    assert_eq!(outcome.reason, TurnEndReason::Error);
    assert_eq!(
        outcome.message.as_deref(),
        Some(
            "model request failed (invalid_request): custom rejected the request (HTTP 400): first refusal, with the image; tried again without its image, it failed too: custom rejected the request (HTTP 400): second refusal, without it"
        )
    );
    assert_eq!(server.requests().iter().map(has_image).collect::<Vec<_>>(), [true, false]);
    assert_eq!(withdrawals(&logged(&sink)), []);
    let Some(Message::User(first)) = session.messages().first() else { panic!("no user message") };
    assert_eq!(first.images, [png()]);
}

/// A tool that returns a screenshot.
struct Screenshot;

impl Tool for Screenshot {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "screenshot"
    }
    fn description(&self) -> &str {
        "Takes a screenshot."
    }
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput { images: vec![png()], ..ToolOutput::text("[image 1 below]") })
    }
}

/// A tool's screenshot refused mid-turn: every request, the refused one and the one tried
/// again included, is the history the log derives.
#[tokio::test]
async fn requests_around_a_withdrawal_are_exactly_the_derived_history() {
    let refused =
        ModelError::new(ModelErrorKind::InvalidRequest, "the image could not be processed").with_status(400);
    let model = ScriptedModel::new([
        reply().call("screenshot", "{}"),
        reply().fail(refused),
        reply().text("The screenshot did not come through."),
        reply().text("Still no screenshot."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let agent = Agent::builder(model.clone()).tool(Screenshot).build();
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    let outcome = agent.run_turn(&mut session, &ctx, "Take a screenshot", &NullSink, &cancel).await.unwrap();
    assert_eq!(outcome.final_text, "The screenshot did not come through.");
    agent.run_turn(&mut session, &ctx, "Again?", &NullSink, &cancel).await.unwrap();

    let requests = model.requests();
    let events = store.read(session.id()).unwrap();
    assert_eq!(requests.iter().map(|r| r.messages.clone()).collect::<Vec<_>>(), requests_from_log(&events));
    assert_eq!(session.messages(), keel_session::derive_messages(&events).unwrap().as_slice());
    let Some(Message::ToolResult(refused)) = requests[1].messages.last() else { panic!("no tool result") };
    assert_eq!(refused.images, [png()]);
    let Some(Message::ToolResult(retried)) = requests[2].messages.last() else { panic!("no tool result") };
    assert_eq!((retried.content.clone(), retried.images.len()), (format!("[image 1 below]\n{}", note()), 0));
    assert_eq!(withdrawals(&events).len(), 1);
    assert_provider_valid(session.messages());
}

/// One turn asking "What is this?" with an image, against `server`: the session, what
/// its sink was shown, and the outcome.
async fn turn_with_an_image(
    server: &MockServer,
) -> (keel_agent::Session, RecordingSink, keel_agent::TurnOutcome) {
    let agent = Agent::builder(client(server)).build();
    let mut session = keel_agent::Session::in_memory("/w");
    let prompt = Prompt::text("What is this?").with_images(vec![png()]);
    let sink = RecordingSink::new();
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), prompt, &sink, &CancellationToken::new())
        .await
        .unwrap();
    (session, sink, outcome)
}

/// Two turns in `session` (a screenshot, then thanks) and `/compact`, with `model`
/// playing the replies: the compaction's end and what its sink was shown.
async fn screenshot_then_compact(
    model: &ScriptedModel,
    session: &mut keel_agent::Session,
) -> (keel_session::CompactionEnd, RecordingSink) {
    let config = AgentConfig { context_window: Some(100_000), ..AgentConfig::default() };
    let agent = Agent::builder(model.clone()).tool(Screenshot).config(config).build();
    let ctx = SessionContext::default();
    let cancel = CancellationToken::new();
    agent.run_turn(session, &ctx, "Take a screenshot", &NullSink, &cancel).await.unwrap();
    agent.run_turn(session, &ctx, "Thanks", &NullSink, &cancel).await.unwrap();
    let sink = RecordingSink::new();
    let end = agent.compact(session, &ctx, None, &sink, &cancel).await.unwrap().unwrap();
    (end, sink)
}

/// A 404 or a 501 says nothing answers the request at that address: the same request
/// without its images would fail the same, so it is not made.
#[tokio::test]
async fn a_wrong_address_is_not_tried_again_without_the_images() {
    for status in [404u16, 501] {
        let server = MockServer::start().await;
        let error =
            serde_json::json!({"error": {"message": "no such route", "type": "invalid_request_error"}});
        server.set_handler(move |_| MockResponse::json(status, &error));
        let (_, sink, outcome) = turn_with_an_image(&server).await;
        assert_eq!((outcome.reason, server.request_count()), (TurnEndReason::Error, 1), "HTTP {status}");
        assert_eq!(withdrawals(&logged(&sink)), [], "HTTP {status}");
    }
}

/// A compaction's summary request carries the older part's images; refused for them, it
/// is tried once without them, and the images are withdrawn in the log between the
/// compaction's start and end, so the summary is made and later requests send notes.
#[tokio::test]
async fn a_summary_request_refused_for_its_images_is_made_without_them() {
    let refused =
        ModelError::new(ModelErrorKind::InvalidRequest, "the image could not be processed").with_status(400);
    let model = ScriptedModel::new([
        reply().call("screenshot", "{}"),
        reply().text("A login form."),
        reply().text("Noted."),
        reply().fail(refused),
        reply().text("The user asked for a screenshot; it showed a login form."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/w").unwrap();
    let (end, sink) = screenshot_then_compact(&model, &mut session).await;
    assert_eq!((end.outcome, end.failure), (CompactionOutcome::Compacted, None));

    let requests = model.requests();
    let images = |r: &keel_testkit::RecordedRequest| keel_llm::images_sent(&r.messages).len();
    assert_eq!(requests.iter().map(images).collect::<Vec<_>>(), [0, 1, 1, 1, 0]);
    let events = store.read(session.id()).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.type_name()).collect();
    let at = kinds.iter().position(|k| *k == "images/withdrawn").unwrap();
    assert_eq!(kinds[at - 1..=at + 1], ["compaction/start", "images/withdrawn", "compaction/end"]);
    assert_eq!(
        withdrawals(&events),
        [ImagesWithdrawn {
            sha256: vec![png().sha256],
            reason: "the image could not be processed".to_owned()
        }]
    );
    assert_eq!(withdrawals(&logged(&sink)), withdrawals(&events));
    assert!(keel_llm::images_sent(session.messages()).is_empty());
    assert_eq!(session.messages(), keel_session::derive_messages(&events).unwrap().as_slice());
    assert_provider_valid(session.messages());
}

/// Refused with and without its images, the summary request fails with both refusals
/// said, and nothing is withdrawn.
#[tokio::test]
async fn a_summary_request_refused_both_times_says_both() {
    let refused = |message: &str| ModelError::new(ModelErrorKind::InvalidRequest, message).with_status(400);
    let model = ScriptedModel::new([
        reply().call("screenshot", "{}"),
        reply().text("A login form."),
        reply().text("Noted."),
        reply().fail(refused("bad image")),
        reply().fail(refused("bad request")),
    ]);
    let mut session = keel_agent::Session::in_memory("/w");
    let (end, sink) = screenshot_then_compact(&model, &mut session).await;
    assert_eq!(
        (end.outcome, end.failure.as_deref()),
        (
            CompactionOutcome::Aborted,
            Some(
                "the summary request failed: bad image; tried again without its image, it failed too: bad request"
            )
        )
    );
    assert_eq!(model.requests().len(), 5);
    assert_eq!(withdrawals(&logged(&sink)), []);
    assert_eq!(keel_llm::images_sent(session.messages()).len(), 1);
}
