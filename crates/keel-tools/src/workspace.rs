//! Confinement: every path a tool touches resolves inside the workspace (or a root the
//! user added). `..`, absolute paths and symlinks leading outside are refused. Files are
//! checked where they were actually opened, and writes never follow a symlink swapped
//! in after the check.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use keel_agent::{ToolContext, ToolError};
use rustix::fs::{Mode, OFlags};

/// The folders a call may touch.
#[derive(Debug, Clone)]
pub struct Roots {
    root: PathBuf,
    extra: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
}

fn io_error(path: &str, action: &str, error: &io::Error) -> ToolError {
    let code = match error.kind() {
        io::ErrorKind::NotFound => "not_found",
        io::ErrorKind::PermissionDenied => "permission_denied",
        _ => "io_error",
    };
    ToolError::new(code, format!("cannot {action} `{path}`: {error}"))
}

impl Roots {
    /// The roots for a call: the workspace, extra writable roots, and read-only roots
    /// (the session's artifacts folder).
    pub fn new(workspace: &Path, extra: &[PathBuf], read_only: &[PathBuf]) -> Result<Roots, ToolError> {
        let root = workspace.canonicalize().map_err(|e| {
            ToolError::new(
                "workspace_unavailable",
                format!("the workspace {} is unavailable: {e}", workspace.display()),
            )
        })?;
        let canon =
            |paths: &[PathBuf]| paths.iter().filter_map(|p| p.canonicalize().ok()).collect::<Vec<_>>();
        Ok(Roots { root, extra: canon(extra), read_only: canon(read_only) })
    }

    /// Roots from a tool context plus configured extra roots.
    pub fn for_call(ctx: &ToolContext, extra: &[PathBuf]) -> Result<Roots, ToolError> {
        Roots::new(&ctx.workspace, extra, &[crate::artifacts_dir(ctx)])
    }

    /// The workspace root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when `path` (canonical) is inside a root that allows this access.
    pub fn allows(&self, path: &Path, write: bool) -> bool {
        path.starts_with(&self.root)
            || self.extra.iter().any(|r| path.starts_with(r))
            || (!write && self.read_only.iter().any(|r| path.starts_with(r)))
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
            "outside_workspace",
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

    /// Opens an existing file for reading, confined.
    pub fn open_read(&self, path: &str) -> Result<(File, PathBuf), ToolError> {
        let canonical = self.resolve_existing(path, false)?;
        let file = File::open(&canonical).map_err(|e| io_error(path, "open", &e))?;
        self.verify_open(&file, path, false)?;
        Ok((file, canonical))
    }

    /// Opens `path` for writing, creating parent folders inside the workspace. The final
    /// component is opened relative to the verified parent with `O_NOFOLLOW`, so a
    /// symlink planted after the check is never followed out. Returns the file, its
    /// canonical path, and whether it already existed (it is not truncated).
    pub fn open_write(&self, path: &str) -> Result<(File, PathBuf, bool), ToolError> {
        let lexical = self.lexical(path);
        let Some(Component::Normal(name)) = lexical.components().next_back() else {
            return Err(ToolError::new("invalid_path", format!("`{path}` does not name a file")));
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
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mode = Mode::from_raw_mode(0o644);
        let (fd, existed) = match rustix::fs::openat(&dir, &name, flags | OFlags::CREATE | OFlags::EXCL, mode)
        {
            Ok(fd) => (fd, false),
            Err(rustix::io::Errno::EXIST) => match rustix::fs::openat(&dir, &name, flags, mode) {
                Ok(fd) => (fd, true),
                Err(rustix::io::Errno::ISDIR) => {
                    return Err(ToolError::new(
                        "is_a_directory",
                        format!("`{path}` is a folder, not a file"),
                    ));
                }
                // An existing symlink: write to its target only if that is allowed too.
                Err(rustix::io::Errno::LOOP) => {
                    let target = parent.join(&name).canonicalize().map_err(|e| io_error(path, "open", &e))?;
                    if !self.allows(&target, true) {
                        return Err(self.outside(path));
                    }
                    let file = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&target)
                        .map_err(|e| io_error(path, "open", &e))?;
                    self.verify_open(&file, path, true)?;
                    return Ok((file, target, true));
                }
                Err(e) => return Err(io_error(path, "open", &e.into())),
            },
            Err(e) => return Err(io_error(path, "create", &e.into())),
        };
        let file = File::from(fd);
        if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(ToolError::new("is_a_directory", format!("`{path}` is a folder, not a file")));
        }
        Ok((file, parent.join(name), existed))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalizes_dots() {
        let roots = Roots { root: PathBuf::from("/w"), extra: vec![], read_only: vec![] };
        assert_eq!(roots.lexical("a/./b/../c"), PathBuf::from("/w/a/c"));
        assert_eq!(roots.lexical("../x"), PathBuf::from("/x"));
        assert_eq!(roots.lexical("/etc/passwd"), PathBuf::from("/etc/passwd"));
        assert_eq!(roots.display(Path::new("/w/src/a.rs")), "src/a.rs");
        assert_eq!(roots.display(Path::new("/w")), ".");
    }
}
