#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Read before changing: an existing file is changed only after the model has seen it.

mod common;

use common::call_with;
use keel_agent::ToolContext;
use keel_agent::ToolErrorKind;
use keel_tools::ToolsConfig;
use serde_json::json;

#[tokio::test]
async fn an_unseen_file_is_shown_instead_of_changed_then_the_retry_works() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.toml"), "[server]\nport = 3000\n").unwrap();
    // One context: one session's memory.
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    let refused =
        call("edit_file", json!({"path": "config.toml", "old_text": "port = 80", "new_text": "port = 8080"}))
            .await
            .unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::NotRead);
    assert_eq!(
        refused.message,
        "`config.toml` was not changed: read a file before changing it. Its content is:\n1\t[server]\n2\tport = 3000\nCall edit_file again with old_text copied exactly from these lines (without the line numbers)."
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("config.toml")).unwrap(), "[server]\nport = 3000\n");
    call("edit_file", json!({"path": "config.toml", "old_text": "port = 3000", "new_text": "port = 8080"}))
        .await
        .unwrap();
    // A file read, or written by the model, counts as seen; a new file needs nothing.
    std::fs::write(ws.path().join("b.txt"), "old").unwrap();
    call("read_file", json!({"path": "b.txt"})).await.unwrap();
    call("write_file", json!({"path": "b.txt", "content": "new"})).await.unwrap();
    call("write_file", json!({"path": "c.txt", "content": "1"})).await.unwrap();
    call("write_file", json!({"path": "c.txt", "content": "2"})).await.unwrap();
    // Another session has seen nothing.
    let other = ToolContext::new(ws.path());
    let refused =
        call_with(ToolsConfig::default(), other, "write_file", &json!({"path": "c.txt", "content": "3"}))
            .await
            .unwrap_err();
    assert!(
        refused.message.contains("call write_file again with the complete new content"),
        "{}",
        refused.message
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("c.txt")).unwrap(), "2");
}

#[tokio::test]
async fn without_line_numbers_the_refusal_shows_the_file_as_it_is() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.toml"), "[server]\nport = 3000\n").unwrap();
    let config = ToolsConfig { numbered_lines: false, ..ToolsConfig::default() };
    let args = json!({"path": "config.toml", "old_text": "port = 80", "new_text": "port = 8080"});
    let refused = call_with(config, ToolContext::new(ws.path()), "edit_file", &args).await.unwrap_err();
    assert_eq!(
        refused.message,
        "`config.toml` was not changed: read a file before changing it. Its content is:\n[server]\nport = 3000\nCall edit_file again with old_text copied exactly from these lines."
    );
}

#[tokio::test]
async fn a_long_unseen_file_must_be_read_first() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("big.txt"), "line\n".repeat(5000)).unwrap();
    let ctx = ToolContext::new(ws.path());
    let refused = call_with(
        ToolsConfig::default(),
        ctx.clone(),
        "edit_file",
        &json!({"path": "big.txt", "old_text": "line", "new_text": "x"}),
    )
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("It is long; read the part you need with read_file first."),
        "{}",
        refused.message
    );
    assert!(refused.message.len() < 400);
    // Not shown, so still unseen: the retry is refused too, until it is read.
    let again = call_with(
        ToolsConfig::default(),
        ctx.clone(),
        "edit_file",
        &json!({"path": "big.txt", "old_text": "line", "new_text": "x", "replace_all": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(again.kind, ToolErrorKind::NotRead);
    call_with(ToolsConfig::default(), ctx.clone(), "read_file", &json!({"path": "big.txt", "limit": 5}))
        .await
        .unwrap();
    call_with(
        ToolsConfig::default(),
        ctx,
        "edit_file",
        &json!({"path": "big.txt", "old_text": "line", "new_text": "x", "replace_all": true}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_edit_quoting_the_unseen_file_exactly_goes_through_and_a_guess_does_not() {
    let ws = tempfile::tempdir().unwrap();
    let source = "from billing import calc_total\n\nprint(calc_total([1, 2]))\nport = 8000\n";
    std::fs::write(ws.path().join("main.py"), source).unwrap();
    let ctx = ToolContext::new(ws.path());
    let edit = |old: &str, new: &str, every: bool| {
        let args = json!({"path": "main.py", "old_text": old, "new_text": new, "replace_all": every});
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, "edit_file", &args).await }
    };
    // Part of a longer number is a guess, not a quote: refused, and the file is shown.
    let guess = edit("port = 80", "port = 90", false).await.unwrap_err();
    assert_eq!(guess.kind, ToolErrorKind::NotRead);
    assert_eq!(std::fs::read_to_string(ws.path().join("main.py")).unwrap(), source);

    let other = ToolContext::new(ws.path());
    let edit_unseen = |old: &str, new: &str, every: bool| {
        let args = json!({"path": "main.py", "old_text": old, "new_text": new, "replace_all": every});
        let ctx = other.clone();
        async move { call_with(ToolsConfig::default(), ctx, "edit_file", &args).await }
    };
    // Twice in the file without replace_all: which one is meant is a guess.
    assert_eq!(
        edit_unseen("calc_total", "compute_total", false).await.unwrap_err().kind,
        ToolErrorKind::NotRead
    );
    let other = ToolContext::new(ws.path());
    let args = json!({"path": "main.py", "old_text": "calc_total", "new_text": "compute_total", "replace_all": true});
    let done = call_with(ToolsConfig::default(), other.clone(), "edit_file", &args).await.unwrap();
    assert!(done.content.starts_with("Edited main.py: 2 replacements"), "{}", done.content);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("main.py")).unwrap(),
        "from billing import compute_total\n\nprint(compute_total([1, 2]))\nport = 8000\n"
    );
    // Only the quoted text was seen: replacing the whole file is still refused.
    let write = json!({"path": "main.py", "content": "print(1)\n"});
    assert_eq!(
        call_with(ToolsConfig::default(), other, "write_file", &write).await.unwrap_err().kind,
        ToolErrorKind::NotRead
    );
    // One whole-line quote, once in the file.
    let args = json!({"path": "main.py", "old_text": "port = 8000", "new_text": "port = 9000"});
    call_with(ToolsConfig::default(), ToolContext::new(ws.path()), "edit_file", &args).await.unwrap();
    assert!(std::fs::read_to_string(ws.path().join("main.py")).unwrap().ends_with("port = 9000\n"));
}

/// The 1.5B model ran `sort names.txt`, then had the write of the sorted lines refused as
/// unseen and lost its way (suite, sort-lines).
#[tokio::test]
async fn a_file_a_shell_command_printed_whole_counts_as_seen() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("names.txt"), "mallory\nalice\n\nbob\n").unwrap();
    std::fs::write(ws.path().join("other.txt"), "one\ntwo\n").unwrap();
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    // Named but not shown: still unseen.
    call("shell", json!({"command": "wc -l other.txt; head -n 1 other.txt"})).await.unwrap();
    let refused = call("write_file", json!({"path": "other.txt", "content": "three\n"})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::NotRead);
    // Every line printed (in any order): seen.
    call("shell", json!({"command": "sort 'names.txt'"})).await.unwrap();
    call("write_file", json!({"path": "names.txt", "content": "alice\nbob\nmallory\n"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(ws.path().join("names.txt")).unwrap(), "alice\nbob\nmallory\n");
}
