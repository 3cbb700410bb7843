#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `--local` and `keel models` in a build without (or with) the embedded engine: the
//! paths that need no weights.

mod common;

use common::*;
use keel_testkit::{MockResponse, MockServer};

fn with_models_dir(env: &Env, command: &mut std::process::Command) {
    command.env("KEEL_MODELS_DIR", env.root.path().join("models"));
}

#[tokio::test(flavor = "multi_thread")]
async fn offline_with_nothing_cached_names_the_file_and_the_command() {
    let env = Env::new();
    let server = MockServer::start().await;
    let url = server.base_url();
    drop(server); // nothing listens: as good as offline
    let mut keel = env.keel_unconfigured();
    with_models_dir(&env, &mut keel);
    keel.env("HF_ENDPOINT", url).args(["--local", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf is not in"), "{stderr}");
    assert!(stderr.contains("keel models pull qwen2.5-coder-1.5b"), "{stderr}");
    assert!(stderr.contains("--local-model PATH"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_mode_keeps_stderr_quiet_while_fetching() {
    let env = Env::new();
    let server = MockServer::start().await;
    let url = server.base_url();
    drop(server);
    let mut keel = env.keel_unconfigured();
    with_models_dir(&env, &mut keel);
    keel.env("HF_ENDPOINT", url).args(["--json", "--local", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), "", "JSON mode writes nothing to stderr");
    let line: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(line["type"], "keel/error");
    assert!(line["data"]["message"].as_str().unwrap().contains("keel models pull"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_is_not_gguf_is_a_clear_error() {
    let env = Env::new();
    let fake = env.root.path().join("model.gguf");
    std::fs::write(&fake, "this is not a model").unwrap();
    let mut keel = env.keel_unconfigured();
    keel.args(["--local-model", fake.to_str().unwrap(), "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not a GGUF model file"), "{}", text(&out.stderr));
    let mut keel = env.keel_unconfigured();
    keel.args(["--local-model", "/no/such/file.gguf", "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no model file at /no/such/file.gguf"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn models_lists_the_cache_and_pull_verifies_the_checksum() {
    let env = Env::new();
    let models = env.root.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::write(models.join("mine.gguf"), b"GGUF....").unwrap();
    let mut keel = env.keel_unconfigured();
    with_models_dir(&env, &mut keel);
    keel.arg("models");
    let out = output(keel).await;
    let listing = text(&out.stdout);
    assert!(listing.contains("mine.gguf"), "{listing}");
    assert!(listing.contains("qwen2.5-coder-1.5b") && listing.contains("default for --local"), "{listing}");

    // A mirror serving the wrong bytes: the checksum catches it and nothing is kept.
    let server = MockServer::start().await;
    server.set_handler(|_| MockResponse::body(200, "application/octet-stream", vec![7u8; 4096]));
    let mut keel = env.keel_unconfigured();
    with_models_dir(&env, &mut keel);
    keel.env("HF_ENDPOINT", server.base_url()).args(["models", "pull", "qwen2.5-coder-0.5b"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("expected 1d9614638d"), "{}", text(&out.stderr));
    assert!(!models.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").exists());
    assert!(server.requests()[0].path.ends_with(
        "/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    ));
}

#[cfg(not(feature = "local"))]
#[tokio::test(flavor = "multi_thread")]
async fn without_the_feature_local_explains_how_to_get_it() {
    let env = Env::new();
    let gguf = env.root.path().join("tiny.gguf");
    keel_local::gguf::write_test_file(
        &gguf,
        &[("tokenizer.chat_template", keel_local::gguf::MetaValue::Str("{{ messages }}".into()))],
    )
    .unwrap();
    let mut keel = env.keel_unconfigured();
    keel.args(["--local-model", gguf.to_str().unwrap(), "hi"]);
    let out = output(keel).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--features local"), "{}", text(&out.stderr));
}
