#![allow(clippy::unwrap_used, clippy::expect_used)]
//! write_file guards: a fragment written over a whole file is refused once; a code fence
//! around a code file's content is removed.

mod common;

use common::call_with;
use keel_agent::ToolContext;
use keel_agent::ToolErrorKind;
use keel_tools::ToolsConfig;
use serde_json::json;

const TEXTUTIL: &str =
    "def shout(text):\n    return text.upper()\n\n\ndef word_count(text):\n    return len(text.split())\n";

#[tokio::test]
async fn a_fragment_over_a_file_is_refused_once_and_the_suggested_edit_appends() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("textutil.py"), TEXTUTIL).unwrap();
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    call("read_file", json!({"path": "textutil.py"})).await.unwrap();
    let fragment = "def reverse_words(text):\n    return \" \".join(reversed(text.split()))\n";
    let refused = call("write_file", json!({"path": "textutil.py", "content": fragment})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldDrop);
    assert_eq!(
        refused.message,
        "`textutil.py` was not changed: write_file replaces the whole file, and your content keeps only 0 of its 4 lines. It would delete `def shout(text):`, `return text.upper()`, `def word_count(text):` and more.\n\
         To add your lines at the end of the file, call: edit_file {\"path\": \"textutil.py\", \"old_text\": \"    return len(text.split())\", \"new_text\": \"    return len(text.split())\\n\\ndef reverse_words(text):\\n    return \\\" \\\".join(reversed(text.split()))\"}\n\
         To change part of the file, use edit_file with old_text copied from it. If you do mean to replace the whole file, call write_file again with the same content."
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("textutil.py")).unwrap(), TEXTUTIL);

    // The suggested call, as the model would copy it, appends.
    let suggested = refused.message.split("call: edit_file ").nth(1).unwrap().lines().next().unwrap();
    let args: serde_json::Value = serde_json::from_str(suggested).unwrap();
    call("edit_file", args.clone()).await.unwrap();
    let appended = format!("{TEXTUTIL}\n{fragment}").trim_end_matches('\n').to_owned() + "\n";
    assert_eq!(std::fs::read_to_string(ws.path().join("textutil.py")).unwrap(), appended);
    // The model made that same append six times; the repeat now changes nothing.
    let again = call("edit_file", args).await.unwrap();
    assert_eq!(
        again.content,
        "No change: you made this exact edit before, and the text it added is in `textutil.py` (from line 6). Making it again would add the same text a second time. Go on with the next step of the task."
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("textutil.py")).unwrap(), appended);
    // Then it wrote the fragment again, over the changed file: asked again, not written.
    let refused = call("write_file", json!({"path": "textutil.py", "content": fragment})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldDrop);
    assert_eq!(std::fs::read_to_string(ws.path().join("textutil.py")).unwrap(), appended);

    // Insisting with the same content replaces the file.
    std::fs::write(ws.path().join("old.py"), TEXTUTIL).unwrap();
    call("read_file", json!({"path": "old.py"})).await.unwrap();
    let refused = call("write_file", json!({"path": "old.py", "content": "x = 1\n"})).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldDrop);
    call("write_file", json!({"path": "old.py", "content": "x = 1\n"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(ws.path().join("old.py")).unwrap(), "x = 1\n");
}

#[tokio::test]
async fn rewrites_that_keep_the_file_and_new_files_pass() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("names.txt"), "carol\nalice\nbob\n").unwrap();
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    call("read_file", json!({"path": "names.txt"})).await.unwrap();
    call("write_file", json!({"path": "names.txt", "content": "alice\nbob\ncarol\n"})).await.unwrap();
    call("write_file", json!({"path": "new.py", "content": "a = 1\n"})).await.unwrap();
    // With the guard off, a fragment goes through at once.
    let config = ToolsConfig { confirm_overwrite: false, ..ToolsConfig::default() };
    call_with(config, ctx.clone(), "write_file", &json!({"path": "names.txt", "content": "dave\n"}))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(ws.path().join("names.txt")).unwrap(), "dave\n");
}

#[tokio::test]
async fn a_fence_around_code_is_removed_and_said() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(ws.path());
    let content = "<pre><code>print(\"hi\")\n</code></pre>";
    let out = call_with(
        ToolsConfig::default(),
        ctx.clone(),
        "write_file",
        &json!({"path": "hi.py", "content": content}),
    )
    .await
    .unwrap();
    assert_eq!(
        out.content,
        "Created hi.py (12 bytes, 1 lines). Removed <pre><code> tags around your content (not part of a code file)."
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("hi.py")).unwrap(), "print(\"hi\")\n");
    // In Markdown a fence is content.
    let fenced = "```\ncode\n```\n";
    call_with(ToolsConfig::default(), ctx, "write_file", &json!({"path": "notes.md", "content": fenced}))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(ws.path().join("notes.md")).unwrap(), fenced);
}

/// The 1.5B model changed the port with edit_file, then wrote the diff edit_file showed
/// as config.toml's content, insisting past the would-drop refusal (suite, config-value).
#[tokio::test]
async fn a_diff_written_as_content_is_never_the_file() {
    let ws = tempfile::tempdir().unwrap();
    let config = "# settings\n[server]\nhost = \"127.0.0.1\"\nport = 3000\nworkers = 4\n";
    std::fs::write(ws.path().join("config.toml"), config).unwrap();
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    let diff = "--- config.toml\n@@ -2,4 +2,4 @@\n [server]\n host = \"127.0.0.1\"\n-port = 3000\n+port = 8080\n workers = 4\n";
    call("read_file", json!({"path": "config.toml"})).await.unwrap();
    // Not made yet: refused, every time, with what write_file takes.
    for _ in 0..2 {
        let refused = call("write_file", json!({"path": "config.toml", "content": diff})).await.unwrap_err();
        assert_eq!(refused.kind, ToolErrorKind::DiffContent);
        assert_eq!(
            refused.message,
            "`config.toml` was not changed: your content is a diff, not the file's text. To change part of the file, call edit_file with old_text copied from the file and new_text; write_file takes the complete new text."
        );
    }
    assert_eq!(std::fs::read_to_string(ws.path().join("config.toml")).unwrap(), config);
    // Made by an edit: the copied diff is answered "no change needed" and changes nothing.
    call("edit_file", json!({"path": "config.toml", "old_text": "port = 3000", "new_text": "port = 8080"}))
        .await
        .unwrap();
    let fixed = std::fs::read_to_string(ws.path().join("config.toml")).unwrap();
    let report = call("write_file", json!({"path": "config.toml", "content": diff})).await.unwrap();
    assert_eq!(
        report.content,
        "No change needed: `config.toml` already has the change your diff shows, so it was left as it is. (write_file takes the whole text of a file, not a diff.)"
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("config.toml")).unwrap(), fixed);
    // A patch file holds a diff.
    call("write_file", json!({"path": "port.patch", "content": diff})).await.unwrap();
    assert_eq!(std::fs::read_to_string(ws.path().join("port.patch")).unwrap(), diff);
}

/// The 1.5B model wrote `{{"name": "reverse_words", "arguments": {}}}` as textutil.py's
/// content and appended it with edit_file, over and over (suite, add-function).
#[tokio::test]
async fn a_tool_call_as_a_files_text_is_refused_by_both_tools() {
    let ws = tempfile::tempdir().unwrap();
    let source = "def word_count(text):\n    return len(text.split())\n";
    std::fs::write(ws.path().join("textutil.py"), source).unwrap();
    let ctx = ToolContext::new(ws.path());
    let call = |name: &'static str, args: serde_json::Value| {
        let ctx = ctx.clone();
        async move { call_with(ToolsConfig::default(), ctx, name, &args).await }
    };
    call("read_file", json!({"path": "textutil.py"})).await.unwrap();
    let pasted = r#"{{"name": "reverse_words", "arguments": {}}}"#;
    let write = call("write_file", json!({"path": "textutil.py", "content": pasted})).await.unwrap_err();
    assert_eq!(write.kind, ToolErrorKind::CallAsContent);
    let edit = call(
        "edit_file",
        json!({"path": "textutil.py", "old_text": "    return len(text.split())", "new_text": format!("    return len(text.split())\n\n{pasted}")}),
    )
    .await
    .unwrap_err();
    assert_eq!(edit.kind, ToolErrorKind::CallAsContent);
    assert_eq!(
        edit.message,
        format!(
            "`textutil.py` was not changed: your text holds a tool call (`{pasted}`), which is not text for a file. Put the file's own text there (for a code file, the code itself); to use a tool, call it."
        )
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("textutil.py")).unwrap(), source);
    // A new file too; but JSON data may hold such an object.
    let new = call("write_file", json!({"path": "new.py", "content": pasted})).await.unwrap_err();
    assert_eq!(new.kind, ToolErrorKind::CallAsContent);
    call("write_file", json!({"path": "call.json", "content": r#"{"name": "f", "arguments": {}}"#}))
        .await
        .unwrap();
}
