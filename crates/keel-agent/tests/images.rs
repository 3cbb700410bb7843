#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Images in: a prompt's images and a tool's images reach the model, are logged by hash
//! with their bytes beside the log, come back when the session is reopened, and are
//! refused before anything is logged where the model takes none.

use keel_agent::{
    Agent, AgentError, NullSink, Prompt, PromptError, SessionContext, Tool, ToolContext, ToolError,
    ToolOutput,
};
use keel_llm::{CancellationToken, Image, MAX_IMAGES_PER_MESSAGE, Message, UserMessage};
use keel_session::{JsonlStore, SessionStore, derive_messages};
use keel_testkit::mcp::PNG_BASE64;
use keel_testkit::{ScriptedModel, reply};
use pretty_assertions::assert_eq;

fn png() -> Image {
    Image::from_base64(PNG_BASE64).unwrap()
}

/// A tool that returns a screenshot.
struct Screenshot;

/// Takes a screenshot.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

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

#[tokio::test]
async fn images_reach_the_model_are_logged_by_hash_and_come_back_on_reopen() {
    let model = ScriptedModel::new([reply().call("screenshot", "{}"), reply().text("A red dot, twice.")]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    let agent = Agent::builder(model.clone()).tool(Screenshot).build();
    let prompt = Prompt::text("What is in these?").with_images(vec![png()]);
    let outcome = agent
        .run_turn(&mut session, &SessionContext::default(), prompt, &NullSink, &CancellationToken::new())
        .await;
    assert_eq!(outcome.unwrap().final_text, "A red dot, twice.");
    let id = session.id().to_owned();
    session.close().unwrap();

    // The model saw the prompt's image, then the tool's.
    let requests = model.requests();
    assert_eq!(
        requests[0].messages,
        [Message::User(UserMessage { content: "What is in these?".into(), images: vec![png()] })]
    );
    let Some(Message::ToolResult(result)) = requests[1].messages.last() else { panic!("no tool result") };
    assert_eq!(result.images, [png()]);

    // The log holds references only; the bytes are one file beside it (shared by both).
    let log = std::fs::read_to_string(store.path_of(&id)).unwrap();
    assert!(!log.contains(&PNG_BASE64[..20]), "image bytes in the log");
    assert_eq!(log.matches(&png().sha256).count(), 2);
    let files: Vec<_> = std::fs::read_dir(dir.path().join(format!("{id}.images"))).unwrap().collect();
    assert_eq!(files.len(), 1);

    // Read back, and reopened: the same messages, bytes and all.
    let events = store.read(&id).unwrap();
    let derived = derive_messages(&events).unwrap();
    assert_eq!(derived[..2], requests[1].messages[..2]);
    let reopened = store.open(&id).unwrap();
    assert_eq!(reopened.messages()[..3], requests[1].messages[..]);
    drop(reopened);

    // A fork carries the images; deleting a session removes its image folder.
    let fork = store.fork(&id, None).unwrap();
    let fork_id = fork.id().to_owned();
    drop(fork);
    assert_eq!(store.open(&fork_id).unwrap().messages()[0], requests[0].messages[0]);
    store.delete(&id).unwrap();
    assert!(!dir.path().join(format!("{id}.images")).exists());
    assert!(dir.path().join(format!("{fork_id}.images")).exists());
}

#[tokio::test]
async fn an_image_whose_file_is_gone_is_a_note_not_a_lost_session() {
    let model = ScriptedModel::new([reply().text("ok"), reply().text("still ok")]);
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let mut session = store.create("/work").unwrap();
    let agent = Agent::builder(model.clone()).build();
    let ctx = SessionContext::default();
    let prompt = Prompt::text("look").with_images(vec![png()]);
    agent.run_turn(&mut session, &ctx, prompt, &NullSink, &CancellationToken::new()).await.unwrap();
    let id = session.id().to_owned();
    session.close().unwrap();
    std::fs::remove_dir_all(dir.path().join(format!("{id}.images"))).unwrap();

    let mut session = store.open(&id).unwrap();
    agent.run_turn(&mut session, &ctx, "and now?", &NullSink, &CancellationToken::new()).await.unwrap();
    let Message::User(first) = &model.requests()[1].messages[0] else { panic!("no user message") };
    assert_eq!(first.images, [Image { data: None, ..png() }]);
}

#[tokio::test]
async fn a_model_that_takes_no_images_is_refused_before_anything_is_logged() {
    let model = ScriptedModel::new([reply().text("never sent")]);
    model.set_accepts_images(false);
    let agent = Agent::builder(model.clone()).build();
    let mut session = keel_session::Session::in_memory("/work");
    let before = session.next_seq();
    let prompt = Prompt::text("look").with_images(vec![png()]);
    let err = agent
        .run_turn(&mut session, &SessionContext::default(), prompt, &NullSink, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::Prompt(PromptError::ImagesNotAccepted { model }) if model == "scripted/script"),
        "{err}"
    );
    assert_eq!(session.next_seq(), before);
    assert!(model.requests().is_empty());

    // Too many images, or one without its bytes, are refused the same way.
    model.set_accepts_images(true);
    let many = Prompt::text("look").with_images(vec![png(); MAX_IMAGES_PER_MESSAGE + 1]);
    let err = agent
        .run_turn(&mut session, &SessionContext::default(), many, &NullSink, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Prompt(PromptError::TooManyImages { count }) if count == MAX_IMAGES_PER_MESSAGE + 1),
        "{err}"
    );
    let hollow = Prompt::text("look").with_images(vec![Image { data: None, ..png() }]);
    let err = agent
        .run_turn(&mut session, &SessionContext::default(), hollow, &NullSink, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::Prompt(PromptError::ImageWithoutBytes { .. })), "{err}");
    assert_eq!(session.next_seq(), before);
    assert_eq!(session.projection().turns(), 0);
}
