#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The engine process as keel sees it, with stand-in engines (small shell scripts that
//! speak the protocol): one that crashes on purpose, one that never loads, one that
//! waits for a cancel. No model file and no llama.cpp needed.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use keel_agent::{Agent, NullSink, Session, SessionContext};
use keel_llm::{
    CancellationToken, FinishReason, Message, ModelClient, ModelErrorKind, ModelEvent, ModelRequest,
    UserMessage,
};
use keel_local::engine::kernels::{KernelMemory, Kernels};
use keel_local::engine::{EngineCommand, LocalConfig, LocalModel};
use keel_local::gguf::{MetaValue, write_test_file};
use keel_session::{EventKind, MemoryWriter, TurnEndReason};
use pretty_assertions::assert_eq;

const LOADED: &str = r#"{"type":"loaded","bos":"","eos":"<|im_end|>","n_ctx":4096,"kernels":{"asked":"auto","variant":"fake","features":["AVX2"],"repack":true},"memory_key":"k1"}"#;
const DONE: &str = r#"{"type":"done","text":"Hello","finish":"stop","stats":{"prompt_tokens":5,"reused_tokens":0,"generated_tokens":1,"prompt_us":1,"generation_us":1,"constrained":false}}"#;

/// An engine that loads, then for each job says "Hel" and crashes with SIGSEGV — with
/// the fast kernels only, or (`always`) with the safe ones too, for its first
/// `crashes` starts (counted in `dir`).
fn crashing_engine(dir: &Path, always: bool, crashes: u32) -> EngineCommand {
    let counter = dir.join("starts");
    let script = format!(
        r#"
read -r hello
n=$(cat '{counter}' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '{counter}'
case "$hello" in *'"kernels":"safe"'*) safe=1 ;; *) safe=0 ;; esac
echo '{LOADED}'
while read -r job; do
  echo '{{"type":"text","text":"Hel"}}'
  if [ $n -le {crashes} ] && {{ [ $safe = 0 ] || [ {always} = 1 ]; }}; then
    echo "ggml_abort: fake crash in a kernel" >&2
    kill -SEGV $$
  fi
  echo '{DONE}'
done
"#,
        counter = counter.display(),
        always = u8::from(always),
    );
    EngineCommand { program: "sh".into(), args: vec!["-c".into(), script.into()] }
}

fn model_file(dir: &Path) -> PathBuf {
    let template =
        std::fs::read_to_string(format!("{}/tests/fixtures/qwen2.5-coder.jinja", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
    let path = dir.join("fake.gguf");
    write_test_file(&path, &[("tokenizer.chat_template", MetaValue::Str(template))]).unwrap();
    path
}

fn config(dir: &Path, engine: EngineCommand) -> LocalConfig {
    let mut config = LocalConfig::new(model_file(dir));
    config.engine = Some(engine);
    config.prefix_cache = None;
    config.kernel_memory = Some(dir.join("kernels.json"));
    config
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::User(UserMessage::text(text))]
}

async fn events(
    model: &LocalModel,
    cancel: CancellationToken,
) -> Vec<Result<ModelEvent, keel_llm::ModelError>> {
    let messages = user("Say hello");
    let request = ModelRequest::new("You are terse.", &messages, &[]);
    model.stream(request, cancel).collect().await
}

fn completed_text(event: &Result<ModelEvent, keel_llm::ModelError>) -> Option<String> {
    match event {
        Ok(ModelEvent::Completed(message)) => Some(message.text()),
        _ => None,
    }
}

#[tokio::test]
async fn a_crash_is_retried_once_with_the_safe_kernels_and_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let model =
        LocalModel::load(config(dir.path(), crashing_engine(dir.path(), false, u32::MAX))).await.unwrap();
    let events = events(&model, CancellationToken::new()).await;
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(matches!(&events[0], Ok(ModelEvent::TextDelta(t)) if t == "Hel"), "{events:?}");
    let Ok(ModelEvent::Retrying { reason, .. }) = &events[1] else { panic!("{events:?}") };
    assert!(reason.contains("crashed (SIGSEGV, kernels fake (AVX2), repack on)"), "{reason}");
    assert!(reason.contains("again with the safe kernels"), "{reason}");
    assert!(matches!(&events[2], Ok(ModelEvent::TextDelta(t)) if t == "Hel"), "{events:?}");
    assert_eq!(completed_text(&events[3]).as_deref(), Some("Hello"));
    let verdict = KernelMemory::at(dir.path().join("kernels.json")).get("k1").expect("remembered");
    assert_eq!(verdict.crashed.as_deref(), Some("SIGSEGV with fake (AVX2), repack on"));
    // The engine now runs the safe set: the next request needs no retry.
    let again = events_of(&model).await;
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(completed_text(&again[1]).as_deref(), Some("Hello"));
    assert_eq!(model.stats().len(), 2);
}

async fn events_of(model: &LocalModel) -> Vec<Result<ModelEvent, keel_llm::ModelError>> {
    events(model, CancellationToken::new()).await
}

#[tokio::test]
async fn a_crash_with_the_safe_kernels_too_is_a_clear_error_and_the_next_request_starts_it_again() {
    let dir = tempfile::tempdir().unwrap();
    // The first two starts crash (fast, then safe); the third works.
    let model = LocalModel::load(config(dir.path(), crashing_engine(dir.path(), true, 2))).await.unwrap();
    let events = events_of(&model).await;
    let Some(Err(error)) = events.last() else { panic!("{events:?}") };
    assert_eq!(error.kind, ModelErrorKind::Server);
    assert!(error.message.contains("crashed (SIGSEGV) also with the safe kernels"), "{}", error.message);
    assert!(error.message.contains("The session is saved"), "{}", error.message);
    assert!(
        error.message.contains("Its last words: ggml_abort: fake crash in a kernel"),
        "{}",
        error.message
    );
    let next = events_of(&model).await;
    assert_eq!(completed_text(next.last().unwrap()).as_deref(), Some("Hello"), "{next:?}");
}

#[tokio::test]
async fn a_turn_whose_engine_crashes_ends_with_the_error_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = LocalModel::load(config(dir.path(), crashing_engine(dir.path(), true, 2))).await.unwrap();
    let agent = Agent::builder(model).system_prompt("You are terse.").max_steps(3).build();
    let log = MemoryWriter::new();
    let mut session = Session::create("s1".into(), "/tmp", None, Box::new(log.clone())).unwrap();
    let context = SessionContext::default();
    let first = agent
        .run_turn(&mut session, &context, "Say hello", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(first.reason, TurnEndReason::Error, "{first:?}");
    let second = agent
        .run_turn(&mut session, &context, "Say hello", &NullSink, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(second.reason, TurnEndReason::Completed, "{second:?}");
    assert_eq!(second.final_text, "Hello");
    let ends: Vec<TurnEndReason> = log
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![TurnEndReason::Error, TurnEndReason::Completed]);
}

#[tokio::test]
async fn an_engine_that_cannot_load_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let refusing = EngineCommand {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            r#"read -r hello; echo '{"type":"failed","kind":"config","message":"cannot load m.gguf: bad tensor"}'"#.into(),
        ],
    };
    let error = LocalModel::load(config(dir.path(), refusing)).await.unwrap_err().to_string();
    assert_eq!(error, "cannot load m.gguf: bad tensor");
    let dying = EngineCommand {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            "read -r hello; echo 'cannot open libggml-base.so.0' >&2; kill -ILL $$".into(),
        ],
    };
    let error = LocalModel::load(config(dir.path(), dying)).await.unwrap_err().to_string();
    assert_eq!(error, "the model engine stopped while starting (SIGILL): cannot open libggml-base.so.0");
    let missing = EngineCommand { program: dir.path().join("no-such-engine"), args: Vec::new() };
    let error = LocalModel::load(config(dir.path(), missing)).await.unwrap_err().to_string();
    assert!(error.starts_with("cannot start the model engine ("), "{error}");
}

#[tokio::test]
async fn a_cancel_stops_the_job_and_the_engine_serves_the_next() {
    let dir = tempfile::tempdir().unwrap();
    // Says "Hel", then waits: a cancel line ends the job; anything else finishes it.
    let script = format!(
        r#"
read -r hello
echo '{LOADED}'
while read -r job; do
  echo '{{"type":"text","text":"Hel"}}'
  case "$job" in *'"prompt":"'*'wait'*) read -r cancel; case "$cancel" in *'"type":"cancel"'*) echo '{{"type":"cancelled"}}' ;; esac ;; *) echo '{DONE}' ;; esac
done
"#
    );
    let engine = EngineCommand { program: "sh".into(), args: vec!["-c".into(), script.into()] };
    let model = LocalModel::load(config(dir.path(), engine)).await.unwrap();
    let cancel = CancellationToken::new();
    let messages = user("wait for me");
    let mut stream = model.stream(ModelRequest::new("", &messages, &[]), cancel.clone());
    assert!(matches!(stream.next().await, Some(Ok(ModelEvent::TextDelta(t))) if t == "Hel"));
    cancel.cancel();
    let Some(Err(error)) = stream.next().await else { panic!("the cancelled job ends with an error") };
    assert_eq!(error.kind, ModelErrorKind::Cancelled);
    assert!(stream.next().await.is_none());
    drop(stream);
    let next = events_of(&model).await;
    assert_eq!(completed_text(next.last().unwrap()).as_deref(), Some("Hello"), "{next:?}");
    assert!(
        matches!(next.last(), Some(Ok(ModelEvent::Completed(m))) if m.finish_reason == FinishReason::Stop)
    );
}

#[test]
fn the_engine_command_is_this_program() {
    let command = EngineCommand::current_exe().unwrap();
    assert_eq!(command.program, std::env::current_exe().unwrap());
    assert_eq!(command.args, vec![std::ffi::OsString::from("__engine")]);
    assert_eq!(LocalConfig::new("m.gguf").kernels, Kernels::Auto);
}
