#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Special and huge files (issue 10, item 6): a FIFO, a socket or a device is refused by
//! its type without hanging; a huge file is judged from its first bytes and its metadata,
//! and a page of it never loads the whole file.

mod common;

use keel_agent::ToolErrorKind;
use std::io::Write;
use std::time::{Duration, Instant};

use common::*;
use keel_agent::ToolContext;
use keel_tools::ToolsConfig;
use serde_json::json;

/// Runs a call that must not hang.
async fn within<T>(seconds: u64, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(seconds), future).await.expect("the call hung")
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_fifo_is_refused_by_every_file_tool_without_hanging() {
    let ws = tempfile::tempdir().unwrap();
    mkfifo(&ws.path().join("pipe"));
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        ("edit_file", json!({"path": "pipe", "old_text": "a", "new_text": "b"})),
    ] {
        let error = within(5, err(ws.path(), tool, args)).await;
        assert_eq!(error.kind, ToolErrorKind::NotARegularFile, "{tool}: {}", error.message);
        assert!(error.message.contains("`pipe` is a FIFO (named pipe)"), "{tool}: {}", error.message);
    }
    // grep skips it (it lists only regular files) and does not hang either.
    std::fs::write(ws.path().join("a.txt"), "needle\n").unwrap();
    let found = within(5, ok(ws.path(), "grep", json!({"pattern": "needle"}))).await;
    assert_eq!(found, "a.txt:1: needle");
}

#[tokio::test]
async fn a_socket_and_a_device_are_refused_with_their_type() {
    let ws = tempfile::tempdir().unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(ws.path().join("sock")).unwrap();
    let error = within(5, err(ws.path(), "read_file", json!({"path": "sock"}))).await;
    assert_eq!(error.kind, ToolErrorKind::NotARegularFile);
    assert!(error.message.contains("is a socket"), "{}", error.message);
    // A device in an allowed root: /dev/zero would never end.
    let config = ToolsConfig { extra_roots: vec!["/dev".into()], ..ToolsConfig::default() };
    let error =
        within(5, call_with(config, ToolContext::new(ws.path()), "read_file", &json!({"path": "/dev/zero"})))
            .await
            .unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::NotARegularFile);
    assert!(error.message.contains("is a character device"), "{}", error.message);
}

#[tokio::test]
async fn a_huge_sparse_file_is_called_binary_from_its_first_bytes() {
    let ws = tempfile::tempdir().unwrap();
    let file = std::fs::File::create(ws.path().join("disk.img")).unwrap();
    file.set_len(3 << 30).unwrap(); // 3 GB of holes: reading it all took 13 s
    let started = Instant::now();
    let error = within(10, err(ws.path(), "read_file", json!({"path": "disk.img"}))).await;
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(error.kind, ToolErrorKind::BinaryFile);
    assert_eq!(error.message, "`disk.img` is a binary data (3.0 GB), not text; read_file only shows text");
}

#[tokio::test]
async fn a_page_of_a_huge_text_file_says_where_to_continue() {
    let ws = tempfile::tempdir().unwrap();
    let path = ws.path().join("big.log");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 1..=3000 {
        writeln!(file, "line {i}").unwrap();
    }
    // One 40 MB line: past the page and past what is counted.
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..40 {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(b"\nlast\n").unwrap();
    drop(file);
    let out = within(20, ok(ws.path(), "read_file", json!({"path": "big.log"}))).await;
    assert!(out.starts_with("   1\tline 1\n"), "{}", &out[..100]);
    assert!(
        out.ends_with(
            "[showing lines 1-2000 of a 40.0 MB file (more than 3000 lines); read_file with offset=2001 to continue]\n"
        ),
        "{}",
        &out[out.len() - 200..]
    );
    // The long line itself is cut, and the line after it is found.
    let page = within(20, ok(ws.path(), "read_file", json!({"path": "big.log", "offset": 3001}))).await;
    assert!(page.starts_with("3001\taaaa"), "{}", &page[..100]);
    assert!(page.contains("… [line cut at 2000 characters]\n3002\tlast\n"), "{}", &page[page.len() - 200..]);
    assert!(page.len() < 3000, "{} bytes", page.len());
}

#[tokio::test]
async fn write_file_over_a_huge_file_does_not_read_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::File::create(ws.path().join("huge.bin")).unwrap().set_len(3 << 30).unwrap();
    let started = Instant::now();
    let out =
        within(10, ok(ws.path(), "write_file", json!({"path": "huge.bin", "content": "small\n"}))).await;
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(out, "Overwrote huge.bin (was 3221225472 bytes, now 6 bytes, 1 lines).");
}
