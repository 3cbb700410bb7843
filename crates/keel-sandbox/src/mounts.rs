//! Read-only mounts outside the writable roots, for a command in its own mount namespace
//! (the PID namespace's, see [`crate::launch`]).
//!
//! Landlock confines writes to file *contents* and names, but not metadata: `chmod`,
//! `chown`, `utimensat` and extended attributes on a file outside the writable roots
//! succeed under it. A read-only mount refuses all of them (`EROFS`). So PID 1 of the
//! namespace, before it confines itself with Landlock, remounts every mount it sees
//! read-only (keeping each mount's own `nosuid`/`nodev`/`noexec`/atime flags), then binds
//! each writable root onto itself and makes that bind writable again. Device files stay
//! usable on a read-only mount (`/dev/null`, terminals), and the namespace's mounts are
//! private: nothing of this reaches the rest of the system.
//!
//! Without a mount namespace (creating one needs `CAP_SYS_ADMIN`: root, or a container
//! that allows it) metadata outside the roots is not protected; `keel sandbox` says so.

use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::error::{ConfineError, ConfineErrorKind};

/// One line of `/proc/self/mountinfo`: where a mount is and its per-mount flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    /// The mount point.
    pub point: PathBuf,
    /// The per-mount flags to keep on a remount (`ro`, `nosuid`, `nodev`, `noexec`, atime).
    pub kept: MountFlags,
}

/// Parses `/proc/self/mountinfo` (see proc(5)): the fifth field is the mount point
/// (spaces and backslashes octal-escaped), the sixth the per-mount options.
pub(super) fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some(Mount { point: PathBuf::from(unescape(point)), kept: kept_flags(options) })
        })
        .collect()
}

/// Undoes mountinfo's `\NNN` octal escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn kept_flags(options: &str) -> MountFlags {
    options.split(',').fold(MountFlags::empty(), |flags, option| {
        flags
            | match option {
                "ro" => MountFlags::RDONLY,
                "nosuid" => MountFlags::NOSUID,
                "nodev" => MountFlags::NODEV,
                "noexec" => MountFlags::NOEXEC,
                "noatime" => MountFlags::NOATIME,
                "nodiratime" => MountFlags::NODIRATIME,
                "relatime" => MountFlags::RELATIME,
                _ => MountFlags::empty(),
            }
    })
}

/// Makes every mount read-only but `writable` (absolute, existing paths; others are
/// skipped). `Err` lists what could not be done; the caller decides what that means.
pub(super) fn read_only_outside(writable: &[PathBuf]) -> Result<(), ConfineError> {
    let mounts_error = |message: String| ConfineError::new(ConfineErrorKind::Mounts, message);
    rustix::mount::mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)
        .map_err(|e| mounts_error(format!("cannot make the mounts private: {e}")))?;
    let mut failed = Vec::new();
    let original = mounts()?;
    for mount in &original {
        if let Err(e) = remount(&mount.point, mount.kept | MountFlags::RDONLY) {
            failed.push(format!("{}: {e}", mount.point.display()));
        }
    }
    for root in writable.iter().filter(|root| root.is_absolute() && root.exists()) {
        if let Err(e) = rustix::mount::mount_bind_recursive(root, root) {
            failed.push(format!("{}: {e}", root.display()));
            continue;
        }
        // The bind and the mounts inside it, with the flags they had before (writable
        // again unless they were read-only of their own).
        for mount in mounts()?.iter().filter(|mount| mount.point.starts_with(root)) {
            if let Err(e) = remount(&mount.point, flags_before(&original, &mount.point)) {
                failed.push(format!("{}: {e}", mount.point.display()));
            }
        }
    }
    // The working folder was entered before the binds: enter it again, through them.
    if let Err(e) = std::env::current_dir().and_then(std::env::set_current_dir) {
        failed.push(format!("cannot enter the working folder again: {e}"));
    }
    if failed.is_empty() { Ok(()) } else { Err(mounts_error(failed.join("; "))) }
}

/// The flags of the mount that held `point` before any change: the deepest original
/// mount point on its path.
fn flags_before(original: &[Mount], point: &Path) -> MountFlags {
    original
        .iter()
        .filter(|mount| point.starts_with(&mount.point))
        .max_by_key(|mount| mount.point.components().count())
        .map_or(MountFlags::empty(), |mount| mount.kept)
}

/// The mounts of this process, from `/proc/self/mountinfo`.
fn mounts() -> Result<Vec<Mount>, ConfineError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| {
        ConfineError::new(ConfineErrorKind::Mounts, format!("cannot read /proc/self/mountinfo: {e}"))
    })?;
    Ok(parse_mountinfo(&text))
}

fn remount(point: &Path, flags: MountFlags) -> rustix::io::Result<()> {
    rustix::mount::mount_remount(point, flags | MountFlags::BIND, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_points_and_the_flags_to_keep() {
        let text = "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    23 22 0:5 / /dev rw,nosuid,noexec shared:2 - devtmpfs udev rw\n\
                    24 22 0:40 / /mnt/my\\040disk\\134x ro,nodev - ext4 /dev/sdb1 ro\n\
                    short line\n";
        assert_eq!(
            parse_mountinfo(text),
            vec![
                Mount { point: "/".into(), kept: MountFlags::RELATIME },
                Mount { point: "/dev".into(), kept: MountFlags::NOSUID | MountFlags::NOEXEC },
                Mount { point: "/mnt/my disk\\x".into(), kept: MountFlags::RDONLY | MountFlags::NODEV },
            ]
        );
    }
}
