#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every escape is refused: `..`, absolute paths, symlinks out, symlinked parents, and a
//! symlink planted where a new file will be written.

mod common;

use keel_agent::ToolErrorKind;
use std::os::unix::fs::symlink;
use std::sync::Arc;

use common::*;
use keel_agent::ToolContext;
use keel_tools::ToolsConfig;
use serde_json::json;

struct Setup {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn setup() -> Setup {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    std::fs::write(ws.path().join("inside.txt"), "fine\n").unwrap();
    Setup { ws, outside }
}

#[tokio::test]
async fn dot_dot_is_refused_for_every_tool() {
    let s = setup();
    let rel = format!("../{}/secret.txt", s.outside.path().file_name().unwrap().to_str().unwrap());
    for (tool, args) in [
        ("read_file", json!({"path": rel})),
        ("write_file", json!({"path": rel, "content": "x"})),
        ("edit_file", json!({"path": rel, "old_text": "top", "new_text": "x"})),
        ("list_files", json!({"path": ".."})),
        ("grep", json!({"pattern": "secret", "path": ".."})),
    ] {
        let error = err(s.ws.path(), tool, args).await;
        assert_eq!(error.kind, ToolErrorKind::OutsideWorkspace, "{tool}: {}", error.message);
    }
    assert_eq!(std::fs::read_to_string(s.outside.path().join("secret.txt")).unwrap(), "top secret\n");
}

#[tokio::test]
async fn absolute_paths_outside_are_refused_and_inside_are_fine() {
    let s = setup();
    let error = err(s.ws.path(), "read_file", json!({"path": "/etc/passwd"})).await;
    assert_eq!(error.kind, ToolErrorKind::OutsideWorkspace);
    assert!(error.message.contains("is outside the workspace"));
    let inside = s.ws.path().join("inside.txt").canonicalize().unwrap();
    assert_eq!(ok(s.ws.path(), "read_file", json!({"path": inside})).await, "1\tfine\n");
}

#[tokio::test]
async fn a_symlink_pointing_out_is_refused() {
    let s = setup();
    symlink(s.outside.path().join("secret.txt"), s.ws.path().join("link.txt")).unwrap();
    assert_eq!(
        err(s.ws.path(), "read_file", json!({"path": "link.txt"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert_eq!(
        err(s.ws.path(), "write_file", json!({"path": "link.txt", "content": "pwned"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert_eq!(
        err(s.ws.path(), "edit_file", json!({"path": "link.txt", "old_text": "top", "new_text": "x"}))
            .await
            .kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert_eq!(std::fs::read_to_string(s.outside.path().join("secret.txt")).unwrap(), "top secret\n");
    // A symlink that stays inside is followed.
    symlink(s.ws.path().join("inside.txt"), s.ws.path().join("alias.txt")).unwrap();
    assert_eq!(ok(s.ws.path(), "read_file", json!({"path": "alias.txt"})).await, "1\tfine\n");
}

#[tokio::test]
async fn a_symlinked_parent_folder_is_refused() {
    let s = setup();
    symlink(s.outside.path(), s.ws.path().join("out")).unwrap();
    assert_eq!(
        err(s.ws.path(), "read_file", json!({"path": "out/secret.txt"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert_eq!(
        err(s.ws.path(), "write_file", json!({"path": "out/new.txt", "content": "x"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert_eq!(
        err(s.ws.path(), "write_file", json!({"path": "out/deeper/new.txt", "content": "x"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
    assert!(!s.outside.path().join("new.txt").exists());
    assert!(!s.outside.path().join("deeper").exists());
    assert_eq!(
        err(s.ws.path(), "list_files", json!({"path": "out"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
}

#[tokio::test]
async fn a_symlink_planted_at_a_new_files_name_is_not_followed() {
    // The target does not exist, so a check-then-create writer would see "no file here"
    // and create the file outside through the link.
    let s = setup();
    let target = s.outside.path().join("created-through-link.txt");
    symlink(&target, s.ws.path().join("new.txt")).unwrap();
    let error = err(s.ws.path(), "write_file", json!({"path": "new.txt", "content": "x"})).await;
    assert!(matches!(error.kind, ToolErrorKind::OutsideWorkspace | ToolErrorKind::NotFound), "{error:?}");
    assert!(!target.exists(), "a file was created outside the workspace");
}

#[tokio::test]
async fn widened_roots_are_allowed() {
    let s = setup();
    let config = ToolsConfig { extra_roots: vec![s.outside.path().to_path_buf()], ..ToolsConfig::default() };
    let path = s.outside.path().join("secret.txt");
    let out = call_with(config.clone(), ToolContext::new(s.ws.path()), "read_file", &json!({"path": path}))
        .await
        .unwrap();
    assert_eq!(out.content, "1\ttop secret\n");
    let new = s.outside.path().join("made.txt");
    call_with(config, ToolContext::new(s.ws.path()), "write_file", &json!({"path": new, "content": "ok"}))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(new).unwrap(), "ok");
    let _ = Arc::new(());
}

/// Issue 10, item 8: a hard link inside the workspace to a file outside was read,
/// written and edited.
#[tokio::test]
async fn writes_through_a_hard_link_are_refused_unless_allowed() {
    let s = setup();
    let outside = s.outside.path().join("secret.txt");
    if std::fs::hard_link(&outside, s.ws.path().join("link.txt")).is_err() {
        eprintln!("skipped: the temporary folders are on different file systems");
        return;
    }
    let error = err(s.ws.path(), "write_file", json!({"path": "link.txt", "content": "pwned"})).await;
    assert_eq!(error.kind, ToolErrorKind::HardLink);
    assert!(
        error.message.starts_with("`link.txt` has 2 hard links: the same file also has other names"),
        "{}",
        error.message
    );
    assert!(error.message.contains("allow_hardlinks = true"), "{}", error.message);
    let error =
        err(s.ws.path(), "edit_file", json!({"path": "link.txt", "old_text": "top", "new_text": "x"})).await;
    assert_eq!(error.kind, ToolErrorKind::HardLink);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "top secret\n");
    // Reading is allowed (see docs/architecture.md: a link cannot come from a checkout,
    // and pnpm stores or local clones link files on purpose).
    assert_eq!(ok(s.ws.path(), "read_file", json!({"path": "link.txt"})).await, "1\ttop secret\n");
    // The user can allow it.
    let config = ToolsConfig { allow_hardlinks: true, read_before_change: false, ..ToolsConfig::default() };
    call_with(
        config,
        ToolContext::new(s.ws.path()),
        "write_file",
        &json!({"path": "link.txt", "content": "ok\n"}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "ok\n");
}

/// Issue 10, item 9: grep searched by path after the walk checked it, so a file swapped
/// for a symlink in between was followed out (7 of 480 tries leaked).
#[tokio::test(flavor = "multi_thread")]
async fn grep_never_follows_a_file_swapped_for_a_symlink() {
    let s = setup();
    std::fs::write(s.outside.path().join("secret.txt"), "needle outside\n").unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (ws, outside, stop) =
            (s.ws.path().to_path_buf(), s.outside.path().join("secret.txt"), Arc::clone(&stop));
        std::thread::spawn(move || {
            let (file, staged) = (ws.join("a.txt"), ws.join(".staged"));
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(&staged, "needle inside\n").unwrap();
                std::fs::rename(&staged, &file).unwrap();
                let _ = std::fs::remove_file(&staged);
                symlink(&outside, &staged).unwrap();
                std::fs::rename(&staged, &file).unwrap();
            }
        })
    };
    let mut leaks = 0;
    for _ in 0..500 {
        if let Ok(out) = call(s.ws.path(), "grep", json!({"pattern": "needle"})).await
            && out.content.contains("outside")
        {
            leaks += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(leaks, 0, "grep read the file outside {leaks} times out of 500");
}
