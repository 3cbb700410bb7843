//! Images a user attaches: `--image FILE`, and image files whose paths are pasted (or
//! dropped) into the interactive prompt.

use std::io::Read;
use std::path::{Path, PathBuf};

use keel_llm::{Image, ImageError, MAX_IMAGE_BYTES};

use crate::quoted::{Backslash, words};

/// Why a file could not be attached.
#[derive(Debug)]
pub enum AttachError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The bytes are not an image keel sends.
    Image {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        source: ImageError,
    },
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            AttachError::Image { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for AttachError {}

/// Reads `path` as an image: the format is taken from the first bytes, and a file larger
/// than [`MAX_IMAGE_BYTES`] is refused before it is read.
pub fn read(path: &Path) -> Result<Image, AttachError> {
    let read_error = |source| AttachError::Read { path: path.to_owned(), source };
    let image_error = |source| AttachError::Image { path: path.to_owned(), source };
    // Asked before opening: opening a named pipe would wait for a writer.
    let not_a_file = || read_error(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file"));
    if !std::fs::metadata(path).map_err(read_error)?.is_file() {
        return Err(not_a_file());
    }
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    if !meta.is_file() {
        return Err(not_a_file());
    }
    let mut head = Vec::with_capacity(16);
    (&mut file).take(16).read_to_end(&mut head).map_err(read_error)?;
    if head.is_empty() {
        return Err(image_error(ImageError::Empty));
    }
    if keel_llm::ImageType::sniff(&head).is_none() {
        return Err(image_error(ImageError::UnknownFormat));
    }
    if meta.len() > MAX_IMAGE_BYTES as u64 {
        return Err(image_error(ImageError::TooLarge {
            bytes: usize::try_from(meta.len()).unwrap_or(usize::MAX),
        }));
    }
    let mut data = head;
    file.take(MAX_IMAGE_BYTES as u64).read_to_end(&mut data).map_err(read_error)?;
    Image::from_bytes(data).map_err(image_error)
}

/// Reads every `--image` file, in order; the first that fails is the error.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<Image>, AttachError> {
    paths.iter().map(|path| read(path)).collect()
}

/// An image file named in a typed line.
#[derive(Debug)]
pub struct Pasted {
    /// The path as found in the line (unquoted).
    pub path: PathBuf,
    /// The image, or why it could not be attached.
    pub image: Result<Image, AttachError>,
}

/// The image files a line names by an explicit path (`/…`, `~/…`, `./…`, `../…` or a
/// `file://` URL, as a terminal pastes a dropped file: quoted or with escaped spaces).
/// A path that names no file is left alone (it is just text); one that names a file that
/// is not an image is left alone too. A file that looks like an image but cannot be sent
/// (too large) is returned with its error, so the user hears why.
pub fn pasted_in(line: &str, home: Option<&Path>) -> Vec<Pasted> {
    let mut found = Vec::new();
    for word in words(line, Backslash::Escapes) {
        let Some(path) = explicit_path(&word, home) else { continue };
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !meta.is_file() || found.iter().any(|p: &Pasted| p.path == path) {
            continue;
        }
        let image = read(&path);
        let not_an_image = matches!(
            &image,
            Err(AttachError::Image { source: ImageError::UnknownFormat | ImageError::Empty, .. })
        );
        if !not_an_image {
            found.push(Pasted { path, image });
        }
    }
    found
}

/// True when the line opens with the path of an existing file (a dropped screenshot
/// with a question after it): a prompt, not a slash command.
pub fn opens_with_file(line: &str) -> bool {
    words(line, Backslash::Escapes)
        .first()
        .is_some_and(|word| word.starts_with('/') && Path::new(word).is_file())
}

/// The path a word names, when it is written as one.
fn explicit_path(word: &str, home: Option<&Path>) -> Option<PathBuf> {
    if word.starts_with("file://") {
        // A dropped file's URL: escapes decoded, only a local absolute path.
        return reqwest::Url::parse(word).ok()?.to_file_path().ok();
    }
    if let Some(rest) = word.strip_prefix("~/") {
        return home.map(|home| home.join(rest));
    }
    (word.starts_with('/') || word.starts_with("./") || word.starts_with("../")).then(|| PathBuf::from(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x06\0\0\0";

    #[test]
    fn pasted_paths_of_images_are_found_and_other_words_are_text() {
        let dir = tempfile::tempdir().unwrap();
        let shot = dir.path().join("my shot.png");
        std::fs::write(&shot, PNG).unwrap();
        let notes = dir.path().join("notes.txt");
        std::fs::write(&notes, "not an image").unwrap();
        let line = format!(
            "what is wrong in '{}'? see {} and {} and file://{} and /no/such.png",
            shot.display(),
            notes.display(),
            shot.display().to_string().replace(' ', "\\ "),
            shot.display().to_string().replace(' ', "%20"),
        );
        let found = pasted_in(&line, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, shot);
        assert_eq!(found[0].image.as_ref().unwrap().media_type, keel_llm::ImageType::Png);
    }

    #[test]
    fn a_file_too_large_is_reported_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.png");
        let mut data = PNG.to_vec();
        data.resize(MAX_IMAGE_BYTES + 10, 0);
        std::fs::write(&big, &data).unwrap();
        let err = read(&big).unwrap_err();
        assert!(matches!(err, AttachError::Image { source: ImageError::TooLarge { .. }, .. }), "{err}");
        let found = pasted_in(&big.display().to_string(), None);
        assert_eq!(found.len(), 1);
        assert!(found[0].image.is_err());
    }

    #[test]
    fn a_named_pipe_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("shot.png");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let err = read(&fifo).unwrap_err();
        assert!(err.to_string().ends_with("shot.png: not a file"), "{err}");
        assert!(pasted_in(&fifo.display().to_string(), None).is_empty());
    }

    #[test]
    fn a_home_relative_path_needs_a_home() {
        assert_eq!(explicit_path("~/a.png", None), None);
        assert_eq!(explicit_path("~/a.png", Some(Path::new("/h"))), Some(PathBuf::from("/h/a.png")));
        assert_eq!(explicit_path("a.png", None), None);
        assert_eq!(explicit_path("file://relative", None), None);
    }
}
