#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `ToolsConfig::keep_parsing`: a change that would leave a parsing file unparsable is
//! refused; a broken or new file is changed as asked, with the warning.

mod common;

use common::call_with;
use keel_agent::ToolContext;
use keel_agent::ToolErrorKind;
use keel_tools::ToolsConfig;
use pretty_assertions::assert_eq;
use serde_json::json;

fn config(keep_parsing: bool) -> ToolsConfig {
    ToolsConfig { keep_parsing, read_before_change: false, ..ToolsConfig::default() }
}

fn python3() -> bool {
    std::process::Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_write_that_breaks_json_is_refused_and_the_file_kept() {
    let ws = tempfile::tempdir().unwrap();
    let before = "{\"name\": \"app\", \"version\": \"0.3.0\"}\n";
    std::fs::write(ws.path().join("package.json"), before).unwrap();
    let args = json!({"path": "package.json", "content": "{\"name\": \"app\", \"version\": \"0.4.0\",}\n"});
    let refused =
        call_with(config(true), ToolContext::new(ws.path()), "write_file", &args).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldNotParse);
    assert_eq!(
        refused.message,
        "`package.json` was not changed: it parses now, and with this change it would not (key must be a string at line 1 column 36: `{\"name\": \"app\", \"version\": \"0.4.0\",}`). Correct your text and make the call again."
    );
    assert_eq!(std::fs::read_to_string(ws.path().join("package.json")).unwrap(), before);

    // Off (the default for strong models): made, with the warning.
    let made = call_with(config(false), ToolContext::new(ws.path()), "write_file", &args).await.unwrap();
    assert!(made.content.contains("Warning: `package.json` does not parse now"), "{}", made.content);
}

#[tokio::test]
async fn a_broken_or_new_file_is_changed_as_asked() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("broken.json"), "{\"a\": 1,,}").unwrap();
    let args = json!({"path": "broken.json", "old_text": "\"a\": 1", "new_text": "\"a\": 2"});
    let made = call_with(config(true), ToolContext::new(ws.path()), "edit_file", &args).await.unwrap();
    assert!(made.content.starts_with("Edited broken.json"), "{}", made.content);
    assert!(made.content.contains("does not parse now"), "{}", made.content);
    let args = json!({"path": "new.json", "content": "{"});
    let made = call_with(config(true), ToolContext::new(ws.path()), "write_file", &args).await.unwrap();
    assert!(made.content.starts_with("Created new.json"), "{}", made.content);
    assert_eq!(std::fs::read_to_string(ws.path().join("new.json")).unwrap(), "{");
}

#[tokio::test]
async fn an_edit_that_breaks_python_is_refused_exact_or_loose() {
    if !keel_testkit::prereq::available("python3", python3(), "python3") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let before = "def mean(values):\n    return sum(values) / len(values)\n";
    std::fs::write(ws.path().join("stats.py"), before).unwrap();
    let edit = |old: &str, new: &str| json!({"path": "stats.py", "old_text": old, "new_text": new});
    // The 1.5B model's edit: a body on the def line, the old body left below it.
    let args = edit("def mean(values):", "def mean(values): return sum(values) / (len(values) - 1)");
    let refused = call_with(config(true), ToolContext::new(ws.path()), "edit_file", &args).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldNotParse);
    assert!(refused.message.starts_with("`stats.py` was not changed: it parses now"), "{}", refused.message);
    assert!(refused.message.contains("line 2: unexpected indent"), "{}", refused.message);
    // old_text matched loosely (other quotes / whitespace) takes the same check.
    let args = edit("def  mean(values):", "def mean(values:");
    let refused = call_with(config(true), ToolContext::new(ws.path()), "edit_file", &args).await.unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::WouldNotParse, "{}", refused.message);
    assert_eq!(std::fs::read_to_string(ws.path().join("stats.py")).unwrap(), before);
    // A change that parses goes through.
    let args = edit("len(values)\n", "max(len(values), 1)\n");
    call_with(config(true), ToolContext::new(ws.path()), "edit_file", &args).await.unwrap();
    assert!(std::fs::read_to_string(ws.path().join("stats.py")).unwrap().contains("max(len(values), 1)"));
}
