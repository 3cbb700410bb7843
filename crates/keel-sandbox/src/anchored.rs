//! File operations keel makes on its own behalf (putting back git's files after a
//! command, undo) below a folder it trusts, never following a symbolic link anywhere in
//! the path: each folder is opened relative to the one before with `O_NOFOLLOW`, and the
//! last step is `unlinkat`/`openat` on that folder's descriptor. A command that swaps a
//! folder for a link to `~` between keel's check and keel's write gets an error, never a
//! write or a delete outside.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Flags for every open: no following, no inheriting, no blocking, no controlling tty.
const BASE: OFlags = OFlags::NOFOLLOW.union(OFlags::CLOEXEC).union(OFlags::NONBLOCK).union(OFlags::NOCTTY);
const DIR: OFlags = OFlags::DIRECTORY.union(OFlags::RDONLY).union(BASE);

/// A trusted folder, and operations on paths below it.
#[derive(Debug)]
pub struct Anchored {
    root: OwnedFd,
}

/// What is at a path (without following a link there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link.
    Link,
    /// A FIFO, socket or device.
    Other,
}

fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Link,
        _ => Kind::Other,
    }
}

impl Anchored {
    /// Anchors at `root` (which keel trusts; links above and at it are followed once).
    pub fn open(root: &Path) -> io::Result<Anchored> {
        let fd = rustix::fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Anchored { root: fd })
    }

    /// The folder holding `rel` (each step opened without following a link; `create`
    /// makes missing folders) and the last component's name.
    fn parent(&self, rel: &Path, create: bool) -> io::Result<(OwnedFd, OsString)> {
        let mut names: Vec<&OsStr> = Vec::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => names.push(name),
                Component::CurDir => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("`{}` is not a plain path below the folder", rel.display()),
                    ));
                }
            }
        }
        let Some(last) = names.pop() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
        };
        let mut dir = rustix::io::dup(&self.root)?;
        for name in names {
            let next = match rustix::fs::openat(&dir, name, DIR, Mode::empty()) {
                Err(rustix::io::Errno::NOENT) if create => {
                    rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755))?;
                    rustix::fs::openat(&dir, name, DIR, Mode::empty())?
                }
                other => other?,
            };
            dir = next;
        }
        Ok((dir, last.to_owned()))
    }

    /// What is at `rel`; `None` when nothing is (or a folder on the way is missing).
    pub fn kind(&self, rel: &Path) -> io::Result<Option<Kind>> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(kind_of(FileType::from_raw_mode(stat.st_mode)))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The bytes and permission bits of the regular file at `rel` (at most `max` bytes:
    /// more is an error); `None` when there is none. A link there is an error.
    pub fn read(&self, rel: &Path, max: u64) -> io::Result<Option<(Vec<u8>, u32)>> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let fd = match rustix::fs::openat(&dir, &name, OFlags::RDONLY | BASE, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let stat = rustix::fs::fstat(&fd)?;
        if kind_of(FileType::from_raw_mode(stat.st_mode)) != Kind::File {
            return Err(io::Error::other(format!("`{}` is not a regular file", rel.display())));
        }
        let mut bytes = Vec::new();
        File::from(fd).take(max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(io::Error::other(format!("`{}` is larger than {max} bytes", rel.display())));
        }
        Ok(Some((bytes, stat.st_mode & 0o7777)))
    }

    /// The names in the folder at `rel` (empty when there is none).
    pub fn list(&self, rel: &Path) -> io::Result<Vec<OsString>> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let fd = match rustix::fs::openat(&dir, &name, DIR, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e.into()),
        };
        entries(fd)
    }

    /// Removes whatever is at `rel` (a folder with everything in it; a link itself, never
    /// what it points to). `Ok(false)` when nothing was there.
    pub fn remove(&self, rel: &Path) -> io::Result<bool> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        remove_at(&dir, &name, 0)
    }

    /// Puts a regular file with `bytes` and permission bits `mode` at `rel`, in place of
    /// whatever is there (folders on the way are made; nothing on the way is followed).
    pub fn replace(&self, rel: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel, true)?;
        remove_at(&dir, &name, 0)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | BASE;
        let fd = rustix::fs::openat(&dir, &name, flags, Mode::from_raw_mode(mode & 0o777))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        file.flush()
    }
}

/// The names in an open folder, without `.` and `..`.
fn entries(fd: OwnedFd) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    let mut dir = rustix::fs::Dir::read_from(&fd)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_owned());
        }
    }
    Ok(names)
}

/// Removes `name` in `dir`: a folder's contents first, depth-first, each level opened
/// without following links. `Ok(false)` when nothing was there.
fn remove_at(dir: &OwnedFd, name: &OsStr, depth: usize) -> io::Result<bool> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => return Ok(true),
        Err(rustix::io::Errno::NOENT) => return Ok(false),
        Err(rustix::io::Errno::ISDIR | rustix::io::Errno::PERM) => {}
        Err(e) => return Err(e.into()),
    }
    if depth > 64 {
        return Err(io::Error::other("folders nested too deep to remove"));
    }
    let sub = rustix::fs::openat(dir, name, DIR, Mode::empty())?;
    for entry in entries(rustix::io::dup(&sub)?)? {
        remove_at(&sub, &entry, depth + 1)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_below_the_anchor_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim.txt"), "keep").unwrap();
        std::fs::write(root.join("d/victim.txt"), "mine").unwrap();
        let anchored = Anchored::open(&root).unwrap();
        assert_eq!(anchored.read(Path::new("d/victim.txt"), 100).unwrap().unwrap().0, b"mine");
        // A command swaps `d` for a link to the outside folder.
        std::fs::remove_dir_all(root.join("d")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("d")).unwrap();
        assert!(anchored.remove(Path::new("d/victim.txt")).is_err());
        assert!(anchored.replace(Path::new("d/victim.txt"), b"x", 0o644).is_err());
        assert!(anchored.read(Path::new("d/victim.txt"), 100).is_err());
        assert_eq!(anchored.list(Path::new("d")).unwrap(), Vec::<OsString>::new());
        assert_eq!(std::fs::read_to_string(outside.join("victim.txt")).unwrap(), "keep");
        // The link itself is removed, not what it points to.
        assert_eq!(anchored.kind(Path::new("d")).unwrap(), Some(Kind::Link));
        assert!(anchored.remove(Path::new("d")).unwrap());
        assert!(outside.join("victim.txt").exists());
        assert!(anchored.remove(Path::new("../outside/victim.txt")).is_err());
    }

    #[test]
    fn replace_and_remove_handle_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        let anchored = Anchored::open(dir.path()).unwrap();
        std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
        std::fs::write(dir.path().join("a/b/c/f"), "x").unwrap();
        anchored.replace(Path::new("a/b"), b"now a file", 0o750).unwrap();
        assert_eq!(anchored.read(Path::new("a/b"), 100).unwrap(), Some((b"now a file".to_vec(), 0o750)));
        anchored.replace(Path::new("new/deep/file"), b"y", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("new/deep/file")).unwrap(), "y");
        assert!(anchored.remove(Path::new("new")).unwrap());
        assert!(!anchored.remove(Path::new("new")).unwrap());
        assert_eq!(anchored.kind(Path::new("new")).unwrap(), None);
        assert!(anchored.read(Path::new("missing/x"), 1).unwrap().is_none());
        assert!(anchored.read(Path::new("a/b"), 3).is_err(), "larger than the bound");
    }
}
