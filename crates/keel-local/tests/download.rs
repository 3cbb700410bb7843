#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Downloading weights against a local HTTP server: fresh, resumed, restarted, checked.

use std::sync::{Arc, Mutex};

use keel_local::LocalError;
use keel_local::download::{download, partial_path};
use keel_testkit::{MockResponse, MockServer};
use sha2::{Digest, Sha256};

fn content() -> Vec<u8> {
    (0..300_000u32).map(|i| (i % 251) as u8).collect()
}

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Serves `bytes`, honouring `Range: bytes=N-` with a 206.
fn serve_ranges(server: &MockServer, bytes: Arc<Vec<u8>>) {
    server.set_handler(move |request| {
        let start: usize = request
            .header("range")
            .and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok())
            .unwrap_or(0);
        let rest = bytes[start.min(bytes.len())..].to_vec();
        let chunks: Vec<Vec<u8>> = rest.chunks(50_000).map(<[u8]>::to_vec).collect();
        let response = MockResponse::chunks(chunks);
        if start > 0 {
            response
                .status(206)
                .header("content-range", &format!("bytes {start}-{}/{}", bytes.len() - 1, bytes.len()))
        } else {
            response
        }
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_download_is_checked_and_moved_into_place() {
    let server = MockServer::start().await;
    let bytes = Arc::new(content());
    serve_ranges(&server, Arc::clone(&bytes));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("models/m.gguf");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut progress = move |have: u64, _total: Option<u64>| log.lock().unwrap().push(have);
    download(&format!("{}/m.gguf", server.base_url()), &dest, Some(&sha(&bytes)), &mut progress)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), *bytes);
    assert!(!partial_path(&dest).exists());
    let seen = seen.lock().unwrap();
    assert_eq!(*seen.last().unwrap(), bytes.len() as u64);
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "progress only grows");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_download_resumes_with_a_range_request() {
    let server = MockServer::start().await;
    let bytes = Arc::new(content());
    let chunks: Vec<Vec<u8>> = bytes.chunks(50_000).map(<[u8]>::to_vec).collect();
    server.push(MockResponse::chunks(chunks).drop_after(2));
    serve_ranges(&server, Arc::clone(&bytes));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let url = format!("{}/m.gguf", server.base_url());
    let err = download(&url, &dest, Some(&sha(&bytes)), &mut |_, _| {}).await.unwrap_err();
    assert!(matches!(err, LocalError::Download(_)), "{err}");
    assert!(err.to_string().contains("run the command again to resume"), "{err}");
    let have = std::fs::metadata(partial_path(&dest)).unwrap().len();
    assert!(have > 0 && have < bytes.len() as u64, "kept {have} bytes");
    download(&url, &dest, Some(&sha(&bytes)), &mut |_, _| {}).await.unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), *bytes);
    let requests = server.requests();
    assert_eq!(requests[1].header("range"), Some(format!("bytes={have}-").as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_ignoring_ranges_makes_it_start_over() {
    let server = MockServer::start().await;
    let bytes = Arc::new(content());
    let full: Vec<Vec<u8>> = bytes.chunks(50_000).map(<[u8]>::to_vec).collect();
    server.set_handler(move |_| MockResponse::chunks(full.clone()));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    std::fs::write(partial_path(&dest), vec![9u8; 1234]).unwrap();
    download(&format!("{}/m.gguf", server.base_url()), &dest, Some(&sha(&bytes)), &mut |_, _| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), *bytes);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checksum_mismatch_deletes_the_file() {
    let server = MockServer::start().await;
    serve_ranges(&server, Arc::new(content()));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let err =
        download(&format!("{}/m.gguf", server.base_url()), &dest, Some(&"0".repeat(64)), &mut |_, _| {})
            .await
            .unwrap_err();
    assert!(matches!(err, LocalError::Checksum(_)), "{err}");
    assert!(!dest.exists() && !partial_path(&dest).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn http_errors_and_unreachable_servers_are_clear() {
    let server = MockServer::start().await;
    server.push(MockResponse::body(404, "text/plain", b"no such file".to_vec()));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("m.gguf");
    let err =
        download(&format!("{}/m.gguf", server.base_url()), &dest, None, &mut |_, _| {}).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 404"), "{err}");
    let url = server.base_url();
    drop(server);
    let err = download(&format!("{url}/m.gguf"), &dest, None, &mut |_, _| {}).await.unwrap_err();
    assert!(err.to_string().contains("Are you offline?"), "{err}");
}
