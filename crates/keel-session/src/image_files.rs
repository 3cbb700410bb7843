//! Images kept beside a session log: one folder per session (`<id>.images/`), one file
//! per image named by its hash (`<sha256>.<ext>`). The log holds only the reference
//! ([`keel_llm::Image`] without its bytes); reading a session puts the bytes back.
//!
//! Files are written to a fresh temporary name and renamed, so a crash leaves either the
//! whole image or none; nothing here follows a symbolic link; what is read back is
//! checked against its hash, and a missing or altered file leaves the image without its
//! bytes (encoders then tell the model so) rather than failing the whole session.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_llm::{Image, MAX_IMAGE_BYTES};

use crate::error::{SessionError, SessionErrorKind};
use crate::event::Event;

/// The folder of one session's images.
#[derive(Debug, Clone)]
pub(crate) struct ImageFiles {
    dir: PathBuf,
}

impl ImageFiles {
    /// The image folder of the log at `log` (`x.jsonl` → `x.images`).
    pub(crate) fn beside(log: &Path) -> Self {
        ImageFiles { dir: log.with_extension("images") }
    }

    /// The folder.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `data` as `image`'s file, durably, unless it is already there.
    pub(crate) fn put(&self, image: &Image, data: &[u8]) -> Result<(), SessionError> {
        if !image.matches(data) {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("the bytes given for image {} do not match its hash", image.sha256),
            ));
        }
        self.ensure_dir()?;
        let path = self.dir.join(image.file_name());
        if self.read_checked(image).is_some() {
            return Ok(());
        }
        let io = |e: std::io::Error, at: &Path| SessionError::io(e).at_path(at);
        let temp = self.dir.join(format!(".{}.{}.tmp", image.file_name(), std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| io(e, &temp))?;
        let written = file.write_all(data).and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(e, &temp));
        }
        std::fs::rename(&temp, &path).map_err(|e| io(e, &path))?;
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// Puts the bytes back into every image `event` names (those already holding bytes
    /// are left alone).
    pub(crate) fn fill(&self, event: &mut Event) {
        for image in event.kind.images_mut() {
            if image.data.is_none() {
                image.data = self.read_checked(image);
            }
        }
    }

    /// The bytes of `image`, when its file is there, is no link, and matches its hash.
    fn read_checked(&self, image: &Image) -> Option<Arc<[u8]>> {
        if image.bytes > MAX_IMAGE_BYTES as u64 || image.sha256.len() != 64 {
            return None;
        }
        let path = self.dir.join(image.file_name());
        let file = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).ok()?;
        let mut data = Vec::with_capacity(usize::try_from(image.bytes).ok()?);
        file.take(MAX_IMAGE_BYTES as u64 + 1).read_to_end(&mut data).ok()?;
        image.matches(&data).then(|| Arc::from(data))
    }

    /// Creates the folder (private to the user), refusing a link in its place.
    fn ensure_dir(&self) -> Result<(), SessionError> {
        match std::fs::symlink_metadata(&self.dir) {
            Ok(meta) if meta.file_type().is_dir() => Ok(()),
            Ok(_) => Err(SessionError::new(
                SessionErrorKind::Invalid,
                "the session's image folder is not a folder (a link or a file is in its place)",
            )
            .at_path(&self.dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&self.dir)
                    .map_err(|e| SessionError::io(e).at_path(&self.dir))?;
                // The new folder's entry durable too, before an image in it is relied on.
                if let Some(parent) = self.dir.parent()
                    && let Ok(parent) = File::open(parent)
                {
                    let _ = parent.sync_all();
                }
                Ok(())
            }
            Err(e) => Err(SessionError::io(e).at_path(&self.dir)),
        }
    }

    /// Removes the folder and everything in it, if it exists.
    pub(crate) fn remove(&self) -> Result<(), SessionError> {
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(SessionError::io(e).at_path(&self.dir)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, InputSource, UserInput};

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x06\0\0\0";

    fn event_with(image: Image) -> Event {
        Event {
            seq: 1,
            time: String::new(),
            kind: EventKind::UserMessage(UserInput {
                text: "look".into(),
                source: InputSource::Prompt,
                reason: None,
                images: vec![image],
            }),
        }
    }

    #[test]
    fn an_image_kept_beside_a_log_is_put_back_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let files = ImageFiles::beside(&dir.path().join("s1.jsonl"));
        let image = Image::from_bytes(PNG.to_vec()).unwrap();
        files.put(&image, PNG).unwrap();
        files.put(&image, PNG).unwrap();
        let stored = dir.path().join("s1.images").join(image.file_name());
        assert_eq!(std::fs::read(&stored).unwrap(), PNG);

        let mut event = event_with(Image { data: None, ..image.clone() });
        files.fill(&mut event);
        assert_eq!(event.kind.images_mut()[0], image);

        // An altered file is not taken for the image.
        std::fs::write(&stored, b"\x89PNG\r\n\x1a\nother").unwrap();
        let mut event = event_with(Image { data: None, ..image.clone() });
        files.fill(&mut event);
        assert_eq!(event.kind.images_mut()[0].data, None);
    }

    #[test]
    fn a_link_in_place_of_the_folder_or_a_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("s2.images")).unwrap();
        let files = ImageFiles::beside(&dir.path().join("s2.jsonl"));
        let image = Image::from_bytes(PNG.to_vec()).unwrap();
        let err = files.put(&image, PNG).unwrap_err();
        assert_eq!(err.kind, SessionErrorKind::Invalid);
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);

        // A link standing for an image file is not read through either.
        let files = ImageFiles::beside(&dir.path().join("s3.jsonl"));
        std::fs::create_dir(files.dir()).unwrap();
        let target = elsewhere.path().join("real.png");
        std::fs::write(&target, PNG).unwrap();
        std::os::unix::fs::symlink(&target, files.dir().join(image.file_name())).unwrap();
        let mut event = event_with(Image { data: None, ..image });
        files.fill(&mut event);
        assert_eq!(event.kind.images_mut()[0].data, None);
    }

    #[test]
    fn bytes_that_do_not_match_the_reference_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = ImageFiles::beside(&dir.path().join("s4.jsonl"));
        let image = Image::from_bytes(PNG.to_vec()).unwrap();
        assert_eq!(files.put(&image, b"other").unwrap_err().kind, SessionErrorKind::Invalid);
    }
}
