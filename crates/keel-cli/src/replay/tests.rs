//! Replays of sessions recorded by running the agent keel builds (`setup::agent`) with the
//! scripted model: unchanged, they pass; a changed file, a changed recorded result or a
//! changed harness is flagged at its step.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use keel_agent::{NullSink, Prompt, SessionContext};
use keel_llm::{CancellationToken, Image, ModelError, ModelErrorKind, ModelInfo};
use keel_session::{Event, EventKind, JsonlStore, SessionStore};
use keel_testkit::{ReplyBuilder, ScriptedModel, reply};
use keel_tools::{PermissionMode, PermissionPolicy};

use super::workspace::{Scratch, rewind};
use super::{Outcome, Tools, replay};
use crate::config::{Layer, Settings};

fn settings() -> Settings {
    let layer = Layer {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        model: Some("script".into()),
        ..Layer::default()
    };
    let mut settings = crate::config::settings_from(layer, BTreeMap::new(), None, false).unwrap();
    // No launcher probes from the test binary (shell commands are the binary's tests').
    settings.sandbox = keel_sandbox::SandboxSettings::default();
    settings.pid_namespace = false;
    settings
}

struct Recorded {
    workspace: tempfile::TempDir,
    artifacts: tempfile::TempDir,
    events: Vec<Event>,
}

/// Runs one turn per task with the agent keel builds from `settings`, in a workspace with
/// `hello.py` and `notes.txt`.
async fn record(settings: &Settings, turns: &[&str], replies: Vec<ReplyBuilder>) -> Recorded {
    let prompts = turns.iter().map(|t| Prompt::from(*t)).collect();
    record_prompts(settings, prompts, replies).await
}

/// [`record`] with prompts that may carry images.
async fn record_prompts(settings: &Settings, turns: Vec<Prompt>, replies: Vec<ReplyBuilder>) -> Recorded {
    record_and_compact(settings, turns, replies, false).await
}

/// [`record_prompts`], then `/compact` when `compact` says so.
async fn record_and_compact(
    settings: &Settings,
    turns: Vec<Prompt>,
    replies: Vec<ReplyBuilder>,
    compact: bool,
) -> Recorded {
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("hello.py"), "print('hello')\n").unwrap();
    std::fs::write(root.join("notes.txt"), "the greeting should say hi\n").unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new(replies);
    let policy = Arc::new(PermissionPolicy::new(PermissionMode::Auto));
    let (agent, _) = crate::setup::agent(settings, &root, policy, Arc::new(model.clone()));
    let store_dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(store_dir.path());
    let mut session = store.create(&root.display().to_string()).unwrap();
    let ctx = SessionContext::new(&root).artifacts(artifacts.path()).environment("Folder: the project");
    for task in turns {
        agent.run_turn(&mut session, &ctx, task, &NullSink, &CancellationToken::new()).await.unwrap();
    }
    if compact {
        agent.compact(&mut session, &ctx, None, &NullSink, &CancellationToken::new()).await.unwrap();
    }
    assert_eq!(model.remaining(), 0, "the script was used up");
    let events = store.read(session.id()).unwrap();
    Recorded { workspace, artifacts, events }
}

fn info() -> ModelInfo {
    ModelInfo { provider: "scripted".into(), model: "script".into() }
}

/// Replays `events` as `keel replay` does: tools live in a rewound copy, or recorded.
async fn replay_with(settings: &Settings, recorded: &Recorded, events: Vec<Event>, live: bool) -> Outcome {
    let original = recorded.workspace.path().canonicalize().unwrap();
    let scratch = Scratch::new("ws").unwrap();
    if live {
        scratch.copy_from(&original).unwrap();
        let writes = super::script::read(&events).writes;
        let rewound = rewind(&scratch.workspace, &original, recorded.artifacts.path(), &writes);
        assert!(rewound.failed.is_empty(), "{rewound:?}");
    }
    let tools = Tools {
        live,
        workspace: scratch.workspace.clone(),
        artifacts: scratch.artifacts.clone(),
        recorded_artifacts: recorded.artifacts.path().to_owned(),
    };
    replay(events, settings, info(), &tools, &CancellationToken::new()).await.unwrap()
}

fn fix_the_greeting() -> Vec<ReplyBuilder> {
    vec![
        reply()
            .text("Reading first.")
            .call("read_file", r#"{"path":"notes.txt"}"#)
            .call("read_file", r#"{"path":"hello.py"}"#),
        reply().call("edit_file", r#"{"path":"hello.py","old_text":"hello","new_text":"hi"}"#),
        reply().call("read_file", r#"{"path":"hello.py"}"#),
        reply().thinking("It says hi now.").text("Done: it prints hi."),
    ]
}

fn rendered(outcome: &Outcome) -> String {
    super::report(outcome)
}

#[tokio::test]
async fn an_unchanged_session_replays_without_a_difference() {
    let settings = settings();
    let recorded = record(&settings, &["Fix the greeting as notes.txt says", "Thanks, that is all"], {
        let mut replies = fix_the_greeting();
        replies.push(reply().text("You are welcome."));
        replies
    })
    .await;
    // The session changed hello.py; the copy is put back as it was before.
    let root = recorded.workspace.path();
    assert_eq!(std::fs::read_to_string(root.join("hello.py")).unwrap(), "print('hi')\n");
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), true).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
    assert_eq!((outcome.requests, outcome.results, outcome.turns), (5, 4, 2));
    assert_eq!(rendered(&outcome), "no differences: 5 model requests, 4 tool results as recorded");
    // The workspace itself was not touched by the replay.
    assert_eq!(std::fs::read_to_string(root.join("hello.py")).unwrap(), "print('hi')\n");
    // With the recorded results instead of the tools: the same.
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), false).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
}

#[tokio::test]
async fn a_file_that_changed_since_is_flagged_at_the_step_that_read_it() {
    let settings = settings();
    let recorded = record(&settings, &["Fix the greeting as notes.txt says"], fix_the_greeting()).await;
    std::fs::write(recorded.workspace.path().join("notes.txt"), "the greeting should say hey\n").unwrap();
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), true).await;
    let report = rendered(&outcome);
    assert_eq!(outcome.differences.len(), 1, "{report}");
    let first = &outcome.differences[0];
    assert_eq!((first.at.turn, first.at.step), (1, 1), "{report}");
    assert!(first.what.starts_with("result of read_file notes.txt (call_read_file_1)"), "{report}");
    assert!(first.recorded.contains("should say hi") && first.now.contains("should say hey"), "{report}");
    assert!(
        report
            .starts_with("1 difference (4 model requests, 4 tool results replayed):\nturn 1 step 1 (event "),
        "{report}"
    );
}

#[tokio::test]
async fn a_changed_recorded_result_is_flagged_live_and_fed_as_recorded() {
    let settings = settings();
    let recorded = record(&settings, &["Fix the greeting as notes.txt says"], fix_the_greeting()).await;
    // A copy of the log where the edit's recorded result says something else.
    let events: Vec<Event> = recorded
        .events
        .iter()
        .cloned()
        .map(|mut event| {
            if let EventKind::ToolResult(result) = &mut event.kind
                && result.name == "edit_file"
            {
                result.content = "edited hello.py (a recorded result that was changed)".into();
            }
            event
        })
        .collect();
    let outcome = replay_with(&settings, &recorded, events.clone(), true).await;
    let report = rendered(&outcome);
    assert_eq!(outcome.differences.len(), 1, "{report}");
    let first = &outcome.differences[0];
    assert_eq!((first.at.turn, first.at.step), (1, 2), "{report}");
    assert!(first.what.starts_with("result of edit_file hello.py"), "{report}");
    assert!(first.recorded.contains("changed"), "{report}");
    // Recorded results are what the requests were built from: nothing differs.
    let outcome = replay_with(&settings, &recorded, events, false).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
}

#[tokio::test]
async fn a_changed_harness_is_flagged_in_the_requests() {
    let settings = settings();
    let recorded = record(&settings, &["Fix the greeting as notes.txt says"], fix_the_greeting()).await;
    let mut now = settings.clone();
    now.always_call = true;
    let outcome = replay_with(&now, &recorded, recorded.events.clone(), true).await;
    let report = rendered(&outcome);
    let tools = outcome.differences.iter().find(|d| d.what.starts_with("request: tools: added answer"));
    assert!(tools.is_some_and(|d| (d.at.turn, d.at.step) == (1, 1)), "{report}");
    assert!(outcome.differences.iter().any(|d| d.what == "request: system prompt"), "{report}");
}

#[tokio::test]
async fn requests_beside_the_conversation_replay_too() {
    let mut settings = settings();
    settings.tool_profile = keel_tools::profile::ToolProfile::Small;
    settings.finish_check = true;
    let replies = vec![
        keel_testkit::intent("answer", false, false),
        keel_testkit::intent("answer", false, false),
        reply().call("read_file", r#"{"path":"notes.txt"}"#),
        reply().text("It says the greeting should say hi."),
    ];
    let recorded = record(&settings, &["What does notes.txt say?"], replies).await;
    assert!(recorded.events.iter().any(|e| matches!(e.kind, EventKind::ModelAside(_))));
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), true).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
    assert_eq!(outcome.requests, 4);
    // The intent request's prompt as keel writes it now, against the recorded one.
    let changed: Vec<Event> = recorded
        .events
        .iter()
        .cloned()
        .map(|mut event| {
            if let EventKind::ModelAside(aside) = &mut event.kind {
                aside.prompt = aside.prompt.replace("Classify it.", "Classify it, please.");
            }
            event
        })
        .collect();
    let outcome = replay_with(&settings, &recorded, changed, true).await;
    let report = rendered(&outcome);
    assert_eq!(outcome.differences.len(), 1, "{report}");
    assert_eq!(outcome.differences[0].what, "intent request: prompt", "{report}");
    assert!(report.contains("turn 1 before step 1 (event "), "{report}");
}

#[test]
fn the_scratch_folder_is_named_as_the_workspace() {
    let scratch = Scratch::new("proj").unwrap();
    assert_eq!(scratch.workspace.file_name().unwrap(), "proj");
    assert!(!scratch.workspace.starts_with(Path::new("/work")));
}

#[tokio::test]
async fn aborts_errors_and_steering_replay_as_recorded() {
    let settings = settings();
    let workspace = tempfile::tempdir().unwrap();
    let root = workspace.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "say hi\n").unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new([
        // Turn 1: aborted while the reply streams.
        reply().text("Let me think about").hang(),
        // Turn 2: the provider fails.
        reply().fail(keel_llm::ModelError::new(keel_llm::ModelErrorKind::Server, "overloaded")),
        // Turn 3: steered before it starts and while its first step runs.
        reply().delay(std::time::Duration::from_millis(100)).call("read_file", r#"{"path":"notes.txt"}"#),
        reply().text("It says hi."),
    ]);
    let policy = Arc::new(PermissionPolicy::new(PermissionMode::Auto));
    let (agent, _) = crate::setup::agent(&settings, &root, policy, Arc::new(model.clone()));
    let store_dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(store_dir.path());
    let mut session = store.create(&root.display().to_string()).unwrap();
    let ctx = SessionContext::new(&root).artifacts(artifacts.path());
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stop.cancel();
    });
    agent.run_turn(&mut session, &ctx, "Think", &NullSink, &cancel).await.unwrap();
    agent.run_turn(&mut session, &ctx, "Try again", &NullSink, &CancellationToken::new()).await.unwrap();
    ctx.inbox.steer("Be brief.");
    let inbox = ctx.inbox.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        inbox.steer("Only notes.txt.");
    });
    agent
        .run_turn(&mut session, &ctx, "What do the notes say?", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    let events = store.read(session.id()).unwrap();
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, ["aborted", "error", "completed"]);
    let steered = events.iter().filter(
        |e| matches!(&e.kind, EventKind::UserMessage(u) if u.source == keel_session::InputSource::Steer),
    );
    assert_eq!(steered.count(), 2);
    let recorded = Recorded { workspace, artifacts, events };
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), true).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
    assert_eq!((outcome.turns, outcome.requests), (3, 4));
}

#[tokio::test]
async fn a_turn_that_now_stops_sooner_is_flagged() {
    let settings = settings();
    let recorded = record(&settings, &["Fix the greeting as notes.txt says"], fix_the_greeting()).await;
    let mut now = settings.clone();
    now.max_steps = 2;
    let outcome = replay_with(&now, &recorded, recorded.events.clone(), true).await;
    let report = rendered(&outcome);
    let fewer = outcome.differences.iter().find(|d| d.what.starts_with("keel made no more requests"));
    assert!(fewer.is_some_and(|d| (d.at.turn, d.at.step) == (1, 4)), "{report}");
}

#[tokio::test]
async fn a_step_whose_images_were_refused_and_withdrawn_replays_as_recorded() {
    let settings = settings();
    let image = Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let prompt = Prompt::text("What is in this picture?").with_images(vec![image]);
    let refused = ModelError::new(ModelErrorKind::InvalidRequest, "image format not supported");
    let replies = vec![
        reply().fail(refused),
        reply().text("I cannot see the picture; it was withdrawn."),
        reply().text("Still no picture."),
    ];
    let recorded = record_prompts(&settings, vec![prompt, Prompt::text("And now?")], replies).await;
    let withdrawn =
        recorded.events.iter().filter(|e| matches!(e.kind, EventKind::ImagesWithdrawn(_))).count();
    assert_eq!(withdrawn, 1, "the recording has the withdrawal");
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), false).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
    assert_eq!((outcome.requests, outcome.turns), (3, 2));
}

#[tokio::test]
async fn a_summary_whose_images_were_refused_and_withdrawn_replays_as_recorded() {
    let settings = settings();
    let image = Image::from_base64(keel_testkit::mcp::PNG_BASE64).unwrap();
    let prompt = Prompt::text("What is in this picture?").with_images(vec![image]);
    let refused =
        ModelError::new(ModelErrorKind::InvalidRequest, "image format not supported").with_status(400);
    let replies = vec![
        reply().text("A cat."),
        reply().text("Yes, a cat."),
        reply().fail(refused),
        reply().text("The user showed a picture of a cat."),
    ];
    let turns = vec![prompt, Prompt::text("Sure?")];
    let recorded = record_and_compact(&settings, turns, replies, true).await;
    let kinds: Vec<&str> = recorded.events.iter().map(|e| e.kind.type_name()).collect();
    let at = kinds.iter().position(|k| *k == "images/withdrawn").expect("the recording has the withdrawal");
    assert_eq!(kinds[at - 1..=at + 1], ["compaction/start", "images/withdrawn", "compaction/end"]);
    let outcome = replay_with(&settings, &recorded, recorded.events.clone(), false).await;
    assert!(outcome.differences.is_empty(), "{}", rendered(&outcome));
    assert_eq!((outcome.requests, outcome.turns), (4, 2));
}
