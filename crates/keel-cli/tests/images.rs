#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Images in (issue 34 item 5) end to end: `--image` sends the file as an image part of
//! the prompt, keeps it beside the session by hash, and is refused with a clear message
//! where the file is no image or the model takes none.

mod common;
#[path = "common/pty.rs"]
mod pty;

use common::*;
use keel_llm::Image;
use keel_session::{EventKind, SessionStore};
use keel_testkit::mcp::PNG_BASE64;
use keel_testkit::{ChatStream, MockServer};
use pretty_assertions::assert_eq;

fn png() -> Image {
    Image::from_base64(PNG_BASE64).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_flag_sends_the_file_as_an_image_part_and_keeps_it_beside_the_session() {
    let env = Env::new();
    std::fs::write(env.workspace().join("shot.png"), png().data.unwrap()).unwrap();
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("A red dot.", 2).finish("stop").response());
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "What is in this picture?", "--image", "shot.png"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "A red dot.\n");

    let body = server.requests()[0].json();
    let user = body["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "user").unwrap().clone();
    let parts = user["content"].as_array().unwrap();
    assert!(parts[0]["text"].as_str().unwrap().ends_with("What is in this picture?"), "{parts:?}");
    assert_eq!(
        parts[1],
        serde_json::json!({"type": "image_url", "image_url": {"url": png().data_url().unwrap()}})
    );

    let logged: Vec<Image> = env
        .session_events()
        .into_iter()
        .filter_map(|event| match event.kind {
            EventKind::UserMessage(input) => Some(input.images),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(logged, [png()]);
    let id = env.store().list().unwrap()[0].id.clone();
    let kept = env.home().join("sessions").join(format!("{id}.images")).join(png().file_name());
    assert_eq!(std::fs::read(kept).unwrap(), png().data.unwrap().to_vec());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_is_no_image_or_a_model_without_images_is_refused_before_anything_is_sent() {
    let env = Env::new();
    let server = MockServer::start().await;
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "What is this?", "--image", "hello.py"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "keel: --image hello.py: not an image keel can send: only PNG, JPEG, GIF and WebP are accepted"
    );
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "What is this?", "--image", "missing.png"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("keel: --image missing.png: No such file"),
        "{}",
        text(&out.stderr)
    );

    std::fs::write(env.workspace().join("shot.png"), png().data.unwrap()).unwrap();
    std::fs::write(env.root.path().join("config/config.toml"), "images = false\n").unwrap();
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "What is this?", "--image", "shot.png"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "keel: custom/mock-model does not take images; send the prompt without them, or switch to a model that reads images"
    );
    assert!(server.requests().iter().all(|r| r.path != "/v1/chat/completions"), "a request was sent");
    assert!(env.store().list().unwrap().is_empty(), "a session was started");
}

/// A screenshot dropped into the interactive prompt arrives as its quoted path; the line
/// opens with `/` and is still a prompt, not a slash command.
#[tokio::test(flavor = "multi_thread")]
async fn a_pasted_image_path_in_the_interactive_prompt_is_attached() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    let shot = env.workspace().join("my shot.png");
    std::fs::write(&shot, png().data.unwrap()).unwrap();
    let server = MockServer::start().await;
    server.push(ChatStream::new().text("A red dot.", 2).finish("stop").response());
    let args = format!("--base-url {} --model mock-model --permission auto", server.base_url());
    let script = pty::under_script(&env.keel_unconfigured(), &args);
    let line = format!("'{}' what is wrong here?", shot.display());
    let terminal = tokio::task::spawn_blocking(move || {
        let terminal = pty::Terminal::start(script);
        terminal.wait_for("/help for commands", 1);
        terminal.type_line(&line);
        terminal.wait_for("completed", 1);
        terminal.type_line("/quit");
        terminal
    })
    .await
    .unwrap();
    let mut terminal = terminal;
    let status = terminal.child.wait().unwrap();
    assert!(status.success(), "{}", terminal.text());
    assert!(
        pty::plain(&terminal.text()).contains("attached my shot.png (PNG 1×1, 1 KB)"),
        "{}",
        terminal.text()
    );
    let body = server.requests().into_iter().rfind(|r| r.path.ends_with("/chat/completions")).unwrap().json();
    let user = body["messages"].as_array().unwrap().iter().rfind(|m| m["role"] == "user").unwrap().clone();
    assert_eq!(user["content"][1]["image_url"]["url"], png().data_url().unwrap());
}

/// A provider that refuses the image: the answer still comes (the request was tried again
/// without it), and the user is told the image was withdrawn and why, on stderr and as a
/// logged `images/withdrawn` line of `--json`.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_the_provider_refuses_is_withdrawn_with_a_notice() {
    let env = Env::new();
    std::fs::write(env.workspace().join("shot.png"), png().data.unwrap()).unwrap();
    let server = MockServer::start().await;
    server.set_handler(|request| match request.json().to_string().contains("\"image_url\"") {
        true => keel_testkit::MockResponse::json(
            400,
            &serde_json::json!({"error": {"message": "image format not supported", "type": "invalid_request_error"}}),
        ),
        false => ChatStream::new().text("No image came through.", 2).finish("stop").response(),
    });
    let mut keel = env.keel(&server.base_url());
    keel.args(["-p", "What is in this picture?", "--image", "shot.png"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "No image came through.\n");
    assert!(
        text(&out.stderr).contains(
            "1 image withdrawn: the provider refused it (custom rejected the request (HTTP 400): image format not supported)"
        ),
        "{}",
        text(&out.stderr)
    );

    let mut keel = env.keel(&server.base_url());
    keel.args(["--json", "What is in this picture?", "--image", "shot.png"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let withdrawn = json_events(&out.stdout, "images/withdrawn");
    assert_eq!(withdrawn.len(), 1, "{}", text(&out.stdout));
    assert_eq!(withdrawn[0]["data"]["sha256"], serde_json::json!([png().sha256]));
}
