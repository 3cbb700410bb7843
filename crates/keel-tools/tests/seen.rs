#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Read before changing: an existing file is changed only after the model has seen it.

mod common;

use common::call_with;
use keel_agent::ToolContext;
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
    assert_eq!(refused.code, "not_read");
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
    assert_eq!(again.code, "not_read");
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
