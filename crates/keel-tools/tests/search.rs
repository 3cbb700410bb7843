#![allow(clippy::unwrap_used, clippy::expect_used)]
//! list_files, grep and glob.

mod common;

use keel_agent::ToolErrorKind;
use std::time::{Duration, SystemTime};

use common::*;
use pretty_assertions::assert_eq;
use serde_json::json;

fn tree() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    std::fs::create_dir_all(p.join("src/util")).unwrap();
    std::fs::create_dir_all(p.join("target/debug")).unwrap();
    std::fs::write(p.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(p.join(".hidden"), "secret\n").unwrap();
    std::fs::write(p.join("README.md"), "# Demo\nTODO: write docs\n").unwrap();
    std::fs::write(p.join("src/main.rs"), "fn main() {\n    // TODO: parse args\n    println!(\"hi\");\n}\n")
        .unwrap();
    std::fs::write(
        p.join("src/util/math.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n// todo lowercase\n",
    )
    .unwrap();
    std::fs::write(p.join("target/debug/out.rs"), "TODO ignored\n").unwrap();
    std::fs::write(p.join("run.log"), "TODO ignored\n").unwrap();
    ws
}

#[tokio::test]
async fn list_respects_gitignore_and_hidden_files_and_marks_folders() {
    let ws = tree();
    // A folder at the depth limit says how much it holds (ignored files not counted).
    std::fs::write(ws.path().join("src/util/debug.log"), "ignored\n").unwrap();
    std::fs::create_dir(ws.path().join("src/empty")).unwrap();
    assert_eq!(
        ok(ws.path(), "list_files", json!({})).await,
        "README.md\nsrc/\nsrc/empty/\nsrc/main.rs\nsrc/util/ (1 entry, not shown)"
    );
    assert_eq!(
        ok(ws.path(), "list_files", json!({"path": "src", "depth": 5})).await,
        "src/empty/\nsrc/main.rs\nsrc/util/\nsrc/util/math.rs"
    );
    assert_eq!(
        err(ws.path(), "list_files", json!({"path": "README.md"})).await.kind,
        ToolErrorKind::NotADirectory
    );
}

#[tokio::test]
async fn listing_a_repository_says_where_its_state_is() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git/objects")).unwrap();
    std::fs::write(ws.path().join("a.txt"), "").unwrap();
    let out = ok(ws.path(), "list_files", json!({})).await;
    assert_eq!(
        out,
        "a.txt\n(.git/ is not listed: this is a git repository; run `git status` or `git log` in the shell for its state)"
    );
}

#[tokio::test]
async fn list_is_capped_with_a_count_of_the_rest() {
    let ws = tempfile::tempdir().unwrap();
    for i in 0..450 {
        std::fs::write(ws.path().join(format!("f{i:03}.txt")), "").unwrap();
    }
    let out = ok(ws.path(), "list_files", json!({})).await;
    assert_eq!(out.lines().count(), 401);
    assert!(out.ends_with("[... 50 more entries not shown; list a sub-folder or lower the depth]"), "{out}");
}

#[tokio::test]
async fn grep_reports_file_line_text() {
    let ws = tree();
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "TODO"})).await,
        "README.md:2: TODO: write docs\nsrc/main.rs:2:     // TODO: parse args"
    );
    let insensitive =
        ok(ws.path(), "grep", json!({"pattern": "todo", "case_insensitive": true, "glob": "*.rs"})).await;
    assert_eq!(insensitive, "src/main.rs:2:     // TODO: parse args\nsrc/util/math.rs:2: // todo lowercase");
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "fn \\w+", "path": "src/util"})).await,
        "src/util/math.rs:1: pub fn add(a: i32, b: i32) -> i32 { a + b }"
    );
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "nothing here"})).await,
        "No line in the project folder contains a match for `nothing here`."
    );
    // A small model grepped for a file it had just renamed, read "No matches" as "the
    // file is gone" and renamed it back; the report now says what grep looked at.
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "README\\.md"})).await,
        "No line in the project folder contains a match for `README\\.md`. grep searches inside files; `README.md` is the name of a file or folder, which exists (list_files shows names)."
    );
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "math.rs", "path": "src/util"})).await,
        "No line in `src/util` contains a match for `math.rs`. grep searches inside files; `math.rs` is the name of a file or folder, which exists (list_files shows names)."
    );
    let error = err(ws.path(), "grep", json!({"pattern": "(unclosed"})).await;
    assert_eq!(error.kind, ToolErrorKind::InvalidPattern);
}

/// A small model grepped `src/cli/main.py` for `parse_header` again and again, then
/// answered that main.py defined it: a search that finds nothing where it looked now
/// shows where else in the project the pattern matches (ignore files still respected).
#[tokio::test]
async fn grep_finding_nothing_in_one_place_shows_matches_elsewhere() {
    let ws = tree();
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "TODO", "path": "src/util/math.rs"})).await,
        "No line in `src/util/math.rs` contains a match for `TODO`.\nElsewhere in the project it matches:\nREADME.md:2: TODO: write docs\nsrc/main.rs:2:     // TODO: parse args"
    );
    // The glob still applies; nothing anywhere adds nothing.
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "TODO", "path": "src/util", "glob": "*.md"})).await,
        "No line in `src/util` (files matching `*.md`) contains a match for `TODO`.\nElsewhere in the project it matches:\nREADME.md:2: TODO: write docs"
    );
    // A glob for another language hid the match where the model looked: the report says
    // what the glob left out.
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "TODO", "path": "src", "glob": "*.py"})).await,
        "No line in `src` (files matching `*.py`) contains a match for `TODO`.\nIn files the glob `*.py` leaves out it matches:\nsrc/main.rs:2:     // TODO: parse args"
    );
    assert_eq!(
        ok(ws.path(), "grep", json!({"pattern": "nowhere", "path": "src"})).await,
        "No line in `src` contains a match for `nowhere`."
    );
    // Many matches elsewhere: the first ten and the count.
    std::fs::write(ws.path().join("many.txt"), "hit\n".repeat(30)).unwrap();
    let out = ok(ws.path(), "grep", json!({"pattern": "hit", "path": "src"})).await;
    assert_eq!(out.lines().count(), 13, "{out}");
    assert!(out.ends_with("many.txt:10: hit\n[30 matches in 1 files; only the first 10 shown]"), "{out}");
}

#[tokio::test]
async fn grep_is_capped() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("many.txt"), "hit\n".repeat(500)).unwrap();
    let out = ok(ws.path(), "grep", json!({"pattern": "hit"})).await;
    assert_eq!(out.lines().count(), 201);
    assert!(
        out.ends_with("[500 matches in 1 files; only the first 200 shown. Narrow the pattern, path or glob]"),
        "{out}"
    );
}

#[tokio::test]
async fn glob_lists_newest_first() {
    let ws = tree();
    let old = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(ws.path().join("src/main.rs"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(ok(ws.path(), "glob", json!({"pattern": "**/*.rs"})).await, "src/util/math.rs\nsrc/main.rs");
    assert_eq!(ok(ws.path(), "glob", json!({"pattern": "*.md"})).await, "README.md");
    assert_eq!(ok(ws.path(), "glob", json!({"pattern": "src/*.rs"})).await, "src/main.rs");
    assert_eq!(ok(ws.path(), "glob", json!({"pattern": "*.py"})).await, "No files match `*.py`.");
    assert_eq!(
        err(ws.path(), "glob", json!({"pattern": "../*"})).await.kind,
        ToolErrorKind::OutsideWorkspace
    );
}
