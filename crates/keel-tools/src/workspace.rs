//! Confinement: every path a tool touches resolves inside the workspace (or a root the
//! user added). `..`, absolute paths and symlinks leading outside are refused. Files are
//! checked where they were actually opened, and writes never follow a symlink swapped
//! in after the check.
//!
//! Only regular files (and folders, for listing) are opened: a FIFO, socket or device is
//! refused by its type before it is opened, and every open is non-blocking and checked
//! again on the opened descriptor, so a FIFO swapped in between cannot hang a tool. A
//! regular file with more than one hard link is refused for writing (unless allowed):
//! its other names may be outside the workspace, where a write would land too.

use keel_agent::ToolErrorKind;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use keel_agent::{ToolContext, ToolError};
use rustix::fs::{AtFlags, Mode, OFlags};

/// How files are opened: never blocking (a FIFO), never becoming the controlling
/// terminal (a tty), never inherited by a command.
const OPEN_FLAGS: OFlags = OFlags::NONBLOCK.union(OFlags::NOCTTY).union(OFlags::CLOEXEC);

/// The folders a call may touch.
#[derive(Debug, Clone)]
pub struct Roots {
    root: PathBuf,
    extra: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    allow_hardlinks: bool,
}

/// True when `path` ends with `/`: it names a folder, never a file to create.
pub fn names_folder(path: &str) -> bool {
    path.trim_end().ends_with('/')
}

/// What a file that is neither regular nor a folder is, for a refusal; `None` for a
/// regular file, a folder or a symlink.
pub fn special_kind(file_type: &std::fs::FileType) -> Option<&'static str> {
    if file_type.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else {
        None
    }
}

fn refuse_special(metadata: &Metadata, path: &str) -> Result<(), ToolError> {
    match special_kind(&metadata.file_type()) {
        Some(kind) => Err(ToolError::new(
            ToolErrorKind::NotARegularFile,
            format!(
                "`{path}` is {kind}, not a regular file; the file tools only open regular files (reading it could block forever or never end)"
            ),
        )),
        None => Ok(()),
    }
}

fn io_error(path: &str, action: &str, error: &io::Error) -> ToolError {
    let kind = match error.kind() {
        io::ErrorKind::NotFound => ToolErrorKind::NotFound,
        io::ErrorKind::PermissionDenied => ToolErrorKind::PermissionDenied,
        _ => ToolErrorKind::IoError,
    };
    ToolError::new(kind, format!("cannot {action} `{path}`: {error}"))
}

impl Roots {
    /// The roots for a call: the workspace, extra writable roots, and read-only roots
    /// (the session's artifacts folder).
    pub fn new(workspace: &Path, extra: &[PathBuf], read_only: &[PathBuf]) -> Result<Roots, ToolError> {
        let root = workspace.canonicalize().map_err(|e| {
            ToolError::new(
                ToolErrorKind::WorkspaceUnavailable,
                format!("the workspace {} is unavailable: {e}", workspace.display()),
            )
        })?;
        let canon =
            |paths: &[PathBuf]| paths.iter().filter_map(|p| p.canonicalize().ok()).collect::<Vec<_>>();
        Ok(Roots { root, extra: canon(extra), read_only: canon(read_only), allow_hardlinks: false })
    }

    /// Roots for a call: the context's workspace and artifacts folder, the configured
    /// extra roots and hard-link setting.
    pub fn for_call(ctx: &ToolContext, config: &crate::ToolsConfig) -> Result<Roots, ToolError> {
        Ok(Roots::new(&ctx.workspace, &config.extra_roots, &[crate::artifacts_dir(ctx)])?
            .allow_hardlinks(config.allow_hardlinks))
    }

    /// Whether writes may go through a file with more than one hard link (default no).
    pub fn allow_hardlinks(mut self, allow: bool) -> Self {
        self.allow_hardlinks = allow;
        self
    }

    /// The workspace root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The writable root `path` (canonical) is in, and `path` relative to it.
    pub fn anchor_for(&self, path: &Path) -> Option<(&Path, PathBuf)> {
        std::iter::once(&self.root)
            .chain(&self.extra)
            .find_map(|root| path.strip_prefix(root).ok().map(|rel| (root.as_path(), rel.to_path_buf())))
            .filter(|(_, rel)| !rel.as_os_str().is_empty())
    }

    /// True when `path` is inside one of keel's own read-only folders (the session's
    /// artifacts: undo copies, long outputs), which are not the project's files.
    pub fn in_read_only_root(&self, path: &Path) -> bool {
        self.read_only.iter().any(|r| path.starts_with(r))
    }

    /// True when `path` (canonical) is inside a root that allows this access.
    pub fn allows(&self, path: &Path, write: bool) -> bool {
        path.starts_with(&self.root)
            || self.extra.iter().any(|r| path.starts_with(r))
            || (!write && self.read_only.iter().any(|r| path.starts_with(r)))
    }

    /// The UTF-8 text of the file at `path`, at most `max` bytes; `Ok(None)` when it does
    /// not exist. Larger files, files with NUL bytes and other encodings are errors
    /// (`file_too_large`, `binary_file`).
    pub fn read_text(&self, path: &str, max: usize) -> Result<Option<String>, ToolError> {
        let (file, _) = match self.open_read(path) {
            Ok(opened) => opened,
            Err(e) if e.kind == ToolErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, max as u64 + 1), &mut bytes)
            .map_err(|e| ToolError::msg(format!("cannot read `{path}`: {e}")))?;
        if bytes.len() > max {
            return Err(ToolError::new(
                ToolErrorKind::FileTooLarge,
                format!("`{path}` is larger than {} KiB", max / 1024),
            ));
        }
        if bytes.contains(&0) {
            return Err(ToolError::new(ToolErrorKind::BinaryFile, format!("`{path}` is not a text file")));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ToolError::new(ToolErrorKind::BinaryFile, format!("`{path}` is not UTF-8 text")))
    }

    /// Refuses a path in (or named) `.git`: the file tools never write git's own files
    /// (a small model "initialised" a repository by writing a file named `.git`, after
    /// which every git command failed); git commands in the shell change them. The
    /// refusal names no git command: naming `git init` there was followed by `git init`
    /// in the next step, for tasks that had nothing to do with git (suite run of
    /// 2026-12-06, bump-version and revert-last-commit). Nor does it say "the task is done
    /// in the project's own files": the 1.5B model gave that sentence as its answer (every
    /// recorded upgrade-dependency run that wrote to `.git`); asked again at those 7 steps,
    /// 3 seeds, it answered 21 of 21 times with it and called change_file 21 of 21 with
    /// "Change the project's own files instead".
    pub fn refuse_git_internals(&self, path: &str) -> Result<(), ToolError> {
        let lexical = self.lexical(path);
        let inside = lexical.strip_prefix(&self.root).unwrap_or(&lexical);
        if inside.components().any(|c| c.as_os_str() == ".git") {
            return Err(ToolError::new(
                ToolErrorKind::GitInternals,
                format!(
                    "`{path}` is git's own data: the file tools do not write it. Change the project's own files instead: git's data changes only through git commands."
                ),
            ));
        }
        Ok(())
    }

    /// `path` joined to the root and normalized without touching the disk.
    pub fn lexical(&self, path: &str) -> PathBuf {
        let joined = self.root.join(path.trim());
        let mut out = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other.as_os_str()),
            }
        }
        out
    }

    /// How to show `path` to the model: relative to the workspace when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }

    fn outside(&self, path: &str) -> ToolError {
        ToolError::new(
            ToolErrorKind::OutsideWorkspace,
            format!(
                "`{path}` is outside the workspace ({}). Only paths inside the workspace can be used; use a relative path such as `src/main.rs`.",
                self.root.display()
            ),
        )
    }

    /// Resolves an existing path (symlinks followed) and checks it is allowed.
    pub fn resolve_existing(&self, path: &str, write: bool) -> Result<PathBuf, ToolError> {
        let lexical = self.lexical(path);
        let canonical = lexical.canonicalize().map_err(|e| io_error(path, "open", &e))?;
        if !self.allows(&canonical, write) {
            return Err(self.outside(path));
        }
        Ok(canonical)
    }

    /// Checks, after opening, that the file really is where we meant (defeats a symlink
    /// swapped in between the check and the open).
    pub fn verify_open(&self, file: &File, path: &str, write: bool) -> Result<(), ToolError> {
        match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            Ok(actual) if !self.allows(&actual, write) => Err(self.outside(path)),
            _ => Ok(()),
        }
    }

    /// Opens an existing file (or folder) for reading, confined. A FIFO, socket or device
    /// is refused, before opening and again on the opened descriptor.
    pub fn open_read(&self, path: &str) -> Result<(File, PathBuf), ToolError> {
        let canonical = self.resolve_existing(path, false)?;
        refuse_special(&std::fs::metadata(&canonical).map_err(|e| io_error(path, "open", &e))?, path)?;
        let fd = rustix::fs::open(&canonical, OFlags::RDONLY | OPEN_FLAGS, Mode::empty())
            .map_err(|e| io_error(path, "open", &e.into()))?;
        let file = File::from(fd);
        self.verify_open(&file, path, false)?;
        refuse_special(&file.metadata().map_err(|e| io_error(path, "open", &e))?, path)?;
        Ok((file, canonical))
    }

    /// Opens a file found while walking an allowed folder (grep), for reading. The name
    /// is not followed if it became a symlink, the opened file must still be inside an
    /// allowed root (a parent folder swapped for a symlink is caught there), and it must
    /// be a regular file. `None` when any of that fails: the walk skips it.
    pub fn open_found(&self, path: &Path) -> Option<File> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OPEN_FLAGS;
        let file = File::from(rustix::fs::open(path, flags, Mode::empty()).ok()?);
        let actual = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
        let regular = file.metadata().ok()?.is_file();
        (regular && self.allows(&actual, false)).then_some(file)
    }

    /// Opens an existing regular file for reading and writing (an edit), confined: no
    /// folder, no special file, no symlink swapped in, no extra hard link unless allowed.
    pub fn open_edit(&self, path: &str) -> Result<(File, PathBuf), ToolError> {
        self.refuse_git_internals(path)?;
        let canonical = self.resolve_existing(path, true)?;
        let before = std::fs::metadata(&canonical).map_err(|e| io_error(path, "open", &e))?;
        if before.is_dir() {
            return Err(folder_error(path));
        }
        refuse_special(&before, path)?;
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OPEN_FLAGS;
        let fd = rustix::fs::open(&canonical, flags, Mode::empty())
            .map_err(|e| io_error(path, "open", &e.into()))?;
        let file = File::from(fd);
        self.verify_open(&file, path, true)?;
        self.check_writable(&file, path)?;
        Ok((file, canonical))
    }

    /// Checks an opened file before writing to it: a regular file, with one link unless
    /// hard links are allowed.
    fn check_writable(&self, file: &File, path: &str) -> Result<Metadata, ToolError> {
        let metadata = file.metadata().map_err(|e| io_error(path, "open", &e))?;
        if metadata.is_dir() {
            return Err(folder_error(path));
        }
        refuse_special(&metadata, path)?;
        if metadata.nlink() > 1 && !self.allow_hardlinks {
            return Err(ToolError::new(
                ToolErrorKind::HardLink,
                format!(
                    "`{path}` has {} hard links: the same file also has other names, possibly outside the workspace, and writing it here would change them too. Refused. To change only this copy, break the link first (in the shell: `cp -p {path} {path}.tmp && mv {path}.tmp {path}`); if the links are intended, the user can set allow_hardlinks = true in keel's config.",
                    metadata.nlink()
                ),
            ));
        }
        Ok(metadata)
    }

    /// Opens `path` for writing, creating parent folders inside the workspace. The final
    /// component is opened relative to the verified parent with `O_NOFOLLOW`, so a
    /// symlink planted after the check is never followed out. Returns the file, its
    /// canonical path, and its size before the write when it already existed (it is not
    /// truncated). Special files and (unless allowed) hard-linked files are refused.
    pub fn open_write(&self, path: &str) -> Result<(File, PathBuf, Option<u64>), ToolError> {
        if names_folder(path) {
            return Err(ToolError::new(
                ToolErrorKind::IsADirectory,
                format!("`{path}` names a folder (it ends with `/`), not a file: name the file to write"),
            ));
        }
        self.refuse_git_internals(path)?;
        let lexical = self.lexical(path);
        let Some(Component::Normal(name)) = lexical.components().next_back() else {
            return Err(ToolError::new(ToolErrorKind::InvalidPath, format!("`{path}` does not name a file")));
        };
        let name = name.to_owned();
        let parent = lexical.parent().map(Path::to_path_buf).unwrap_or_else(|| self.root.clone());
        self.create_dirs(&parent, path)?;
        let parent = parent.canonicalize().map_err(|e| io_error(path, "open the folder of", &e))?;
        if !self.allows(&parent, true) {
            return Err(self.outside(path));
        }
        let dir = File::open(&parent).map_err(|e| io_error(path, "open the folder of", &e))?;
        self.verify_open(&dir, path, true)?;
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OPEN_FLAGS;
        let mode = Mode::from_raw_mode(0o644);
        let fd = match rustix::fs::openat(&dir, &name, flags | OFlags::CREATE | OFlags::EXCL, mode) {
            Ok(fd) => {
                let file = File::from(fd);
                self.check_writable(&file, path)?;
                return Ok((file, parent.join(name), None));
            }
            Err(rustix::io::Errno::EXIST) => {
                // Look before opening: opening a device can do something by itself.
                if let Ok(stat) = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
                    let file_type = rustix::fs::FileType::from_raw_mode(stat.st_mode);
                    if let Some(kind) = special_type_name(file_type) {
                        return Err(ToolError::new(
                            ToolErrorKind::NotARegularFile,
                            format!(
                                "`{path}` is {kind}, not a regular file; write_file only writes regular files"
                            ),
                        ));
                    }
                }
                match rustix::fs::openat(&dir, &name, flags, mode) {
                    Ok(fd) => fd,
                    Err(rustix::io::Errno::ISDIR) => return Err(folder_error(path)),
                    // An existing symlink: write to its target only if that is allowed too.
                    Err(rustix::io::Errno::LOOP) => {
                        return self.open_symlink_target(&parent.join(&name), path);
                    }
                    Err(e) => return Err(io_error(path, "open", &e.into())),
                }
            }
            Err(e) => return Err(io_error(path, "create", &e.into())),
        };
        let file = File::from(fd);
        let metadata = self.check_writable(&file, path)?;
        Ok((file, parent.join(name), Some(metadata.len())))
    }

    /// Opens the target of a symlink found at a name being written, if it is allowed.
    fn open_symlink_target(
        &self,
        link: &Path,
        path: &str,
    ) -> Result<(File, PathBuf, Option<u64>), ToolError> {
        let target = link.canonicalize().map_err(|e| io_error(path, "open", &e))?;
        if !self.allows(&target, true) {
            return Err(self.outside(path));
        }
        refuse_special(&std::fs::metadata(&target).map_err(|e| io_error(path, "open", &e))?, path)?;
        let fd = rustix::fs::open(&target, OFlags::RDWR | OPEN_FLAGS, Mode::empty())
            .map_err(|e| io_error(path, "open", &e.into()))?;
        let file = File::from(fd);
        self.verify_open(&file, path, true)?;
        let metadata = self.check_writable(&file, path)?;
        Ok((file, target, Some(metadata.len())))
    }

    /// Creates the missing folders of `dir`, each checked to stay inside the workspace.
    fn create_dirs(&self, dir: &Path, path: &str) -> Result<(), ToolError> {
        let mut existing = dir.to_path_buf();
        let mut missing = Vec::new();
        while !existing.exists() {
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    missing.push(name.to_owned());
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let mut current = existing.canonicalize().map_err(|e| io_error(path, "open the folder of", &e))?;
        if !self.allows(&current, true) {
            return Err(self.outside(path));
        }
        for name in missing.into_iter().rev() {
            current.push(name);
            match std::fs::create_dir(&current) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error(path, "create the folder of", &e)),
            }
        }
        Ok(())
    }
}

fn folder_error(path: &str) -> ToolError {
    ToolError::new(ToolErrorKind::IsADirectory, format!("`{path}` is a folder, not a file"))
}

fn special_type_name(file_type: rustix::fs::FileType) -> Option<&'static str> {
    use rustix::fs::FileType;
    match file_type {
        FileType::Fifo => Some("a FIFO (named pipe)"),
        FileType::Socket => Some("a socket"),
        FileType::CharacterDevice => Some("a character device"),
        FileType::BlockDevice => Some("a block device"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalizes_dots() {
        let roots =
            Roots { root: PathBuf::from("/w"), extra: vec![], read_only: vec![], allow_hardlinks: false };
        assert_eq!(roots.lexical("a/./b/../c"), PathBuf::from("/w/a/c"));
        assert_eq!(roots.lexical("../x"), PathBuf::from("/x"));
        assert_eq!(roots.lexical("/etc/passwd"), PathBuf::from("/etc/passwd"));
        assert_eq!(roots.display(Path::new("/w/src/a.rs")), "src/a.rs");
        assert_eq!(roots.display(Path::new("/w")), ".");
    }
}
