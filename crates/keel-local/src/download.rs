//! Fetching weights: resumable, checksum-verified, with progress.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::LocalError;

/// Progress of a download: bytes so far, total if known.
pub type Progress<'a> = &'a mut (dyn FnMut(u64, Option<u64>) + Send);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The partial file a download resumes from.
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".part");
    dest.with_file_name(name)
}

/// Downloads `url` to `dest`. An existing `dest.part` is resumed with a `Range` request
/// (started over if the server does not honour it). The whole file is checked against
/// `sha256` before it is moved into place; a mismatch deletes the partial file.
pub async fn download(
    url: &str,
    dest: &Path,
    sha256: Option<&str>,
    progress: Progress<'_>,
) -> Result<(), LocalError> {
    let part = partial_path(dest);
    if let Some(dir) = dest.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(|e| LocalError::Io(format!("cannot create {}: {e}", dir.display())))?;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| LocalError::Download(format!("cannot build an HTTP client: {e}")))?;
    // Hash what we already have, so the final check covers the whole file.
    let mut hasher = Sha256::new();
    let mut have = 0u64;
    if let Ok(mut file) = tokio::fs::File::open(&part).await {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).await.map_err(|e| LocalError::Io(e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            have += n as u64;
        }
    }
    let mut request = client.get(url);
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let response = request.send().await.map_err(|e| {
        LocalError::Download(format!(
            "cannot reach {url}: {e}. Are you offline? Use --local-model PATH with a GGUF file you have"
        ))
    })?;
    let status = response.status();
    let resumed = status == reqwest::StatusCode::PARTIAL_CONTENT;
    if !(status.is_success()) {
        return Err(LocalError::Download(format!("{url} answered HTTP {status}")));
    }
    if !resumed && have > 0 {
        // The server ignored the range: start over.
        hasher = Sha256::new();
        have = 0;
    }
    let total = response.content_length().map(|len| len + have);
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(&part)
        .await
        .map_err(|e| LocalError::Io(format!("cannot write {}: {e}", part.display())))?;
    progress(have, total);
    let mut body = response.bytes_stream();
    let streamed: Result<(), LocalError> = async {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), body.next()).await.map_err(|_| {
                LocalError::Download("the download stalled for 60 s; run the command again to resume".into())
            })?;
            let Some(chunk) = next else { return Ok(()) };
            let chunk = chunk.map_err(|e| {
                LocalError::Download(format!("the download broke off ({e}); run the command again to resume"))
            })?;
            hasher.update(&chunk);
            file.write_all(&chunk)
                .await
                .map_err(|e| LocalError::Io(format!("cannot write {}: {e}", part.display())))?;
            have += chunk.len() as u64;
            progress(have, total);
        }
    }
    .await;
    // Whatever happened, what was received is on disk before we return: a resume
    // starts from the file's length, and tokio writes files in the background.
    file.flush().await.map_err(|e| LocalError::Io(e.to_string()))?;
    file.sync_all().await.map_err(|e| LocalError::Io(e.to_string()))?;
    drop(file);
    streamed?;
    if let Some(total) = total
        && have < total
    {
        return Err(LocalError::Download(format!(
            "the download stopped at {have} of {total} bytes; run the command again to resume"
        )));
    }
    let digest = hex(&hasher.finalize());
    if let Some(expected) = sha256
        && !digest.eq_ignore_ascii_case(expected)
    {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(LocalError::Checksum(format!(
            "{} has SHA-256 {digest}, expected {expected}; the file was deleted, download it again",
            dest.display()
        )));
    }
    tokio::fs::rename(&part, dest)
        .await
        .map_err(|e| LocalError::Io(format!("cannot move the file into place: {e}")))?;
    Ok(())
}
