#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 32, item 5: `keel` on a terminal with no model configured names `--local` (the
//! README's first command) besides the keys; a build with the embedded model offers to
//! run it now, one without says how to install one that has it.

mod common;
#[path = "common/pty.rs"]
mod pty;

use common::*;
use keel_testkit::MockServer;

/// Runs `keel ARGS` unconfigured on a terminal, answering `answer` if the offer comes;
/// returns the exit code and the screen.
async fn first_contact(env: &Env, args: &str, answer: &'static str) -> (Option<i32>, String) {
    let server = MockServer::start().await;
    let url = server.base_url();
    drop(server); // nothing listens: no model can be fetched
    let mut keel = env.keel_unconfigured();
    keel.env("KEEL_MODELS_DIR", env.root.path().join("models")).env("HF_ENDPOINT", url);
    let script = pty::under_script(&keel, args);
    tokio::task::spawn_blocking(move || {
        let mut terminal = pty::Terminal::start(script);
        terminal.wait_for("no model is configured", 1);
        if cfg!(feature = "local") {
            terminal.wait_for("Run the local model now? [y/N]", 1);
            terminal.keys(answer);
        }
        let status = terminal.child.wait().unwrap();
        (status.code(), pty::plain(&terminal.text()))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_model_names_local_and_offers_to_run_it_when_built_in() {
    if !pty::available() {
        return;
    }
    let env = Env::new();
    for args in ["", "hi"] {
        let (code, screen) = first_contact(&env, args, "\r").await;
        assert_eq!(code, Some(2), "keel {args}: {screen}");
        assert!(screen.contains("keel --local \"your task\""), "{screen}");
        assert!(screen.contains("export ANTHROPIC_API_KEY="), "{screen}");
        // The walkthrough of issue 32: the install command wrapped mid-word at 100
        // columns; the size of the download was said only after the yes.
        assert!(screen.lines().all(|l| l.chars().count() < 100), "{screen}");
        if cfg!(feature = "local") {
            assert!(screen.contains("It runs qwen2.5-coder-"), "{screen}");
            assert!(
                screen.contains(" MB into ") && screen.contains("Run the local model now? [y/N]"),
                "{screen}"
            );
        } else {
            assert!(!screen.contains("[y/N]"), "no offer this build cannot keep: {screen}");
            assert!(
                screen
                    .lines()
                    .any(|l| l.trim() == "cargo install --locked --path crates/keel-cli --features local"),
                "how to get it, on a line of its own: {screen}"
            );
        }
    }
    if cfg!(feature = "local") {
        // Yes runs keel again with --local: here it finds no model and cannot fetch one.
        let (code, screen) = first_contact(&env, "hi", "y\r").await;
        assert_eq!(code, Some(2), "{screen}");
        assert!(screen.contains("keel models pull"), "{screen}");
    }
}
