//! Shell commands in a sandbox: Landlock for the file system and a seccomp filter for the
//! network, set up by the launcher (`keel __exec`, see [`launch`]) on itself right
//! before it starts `bash`, so every process of the command inherits them. No root, no
//! setuid helper, no container, no `unsafe` in keel.
//!
//! Policies ([`SandboxMode`]):
//! - `read-only`: everything may be read and run; nothing may be written but `/dev/null`
//!   and the command's private TMPDIR.
//! - `workspace-write`: also the workspace and the configured extra roots
//!   (`allowed_roots`). Nothing else outside: not the package managers' caches (a
//!   command could change code the user runs later, unsandboxed: cargo's registry
//!   sources, npm's `_npx`), not keel's own files (its sessions, config, the engine's
//!   libraries). A build that needs a cache outside gets it through `allowed_roots`, or
//!   keeps one in the project (`CARGO_HOME=.cargo`, `npm_config_cache=.npm`).
//! - `off`: no sandbox.
//!
//! Network off (the default under `read-only`) allows only Unix sockets: `socket()` and
//! `socketpair()` for any other family fail with `EACCES`, and `io_uring` (which can open
//! sockets) is unavailable.
//!
//! Honest enforcement: Landlock can grant, not deny, so no sub-folder of a writable folder
//! can be kept read-only by the kernel. Git's hooks and `.git/config` (both run commands
//! later, outside the sandbox) are guarded instead by [`GitGuard`]: what a command changes
//! there is undone after it, and the result says so. If the kernel enforces nothing (no
//! Landlock), or the seccomp filter cannot be installed, the command does not run: the
//! launcher refuses with the reason, unless the mode is `off`. Landlock does not cover
//! file metadata (`chmod`, `chown`, times): where a command gets its own PID and mount
//! namespace, every mount outside the writable roots is read-only there
//! ([`protect_metadata`]); elsewhere metadata outside the roots is not protected.

//!
//! This crate also holds what confinement is built from, for the coding tools, MCP
//! servers and `keel serve` alike: the launcher ([`launch`]), writes that never follow
//! a symlink ([`anchored`]), and which environment variables are credentials
//! ([`secrets`]).

pub mod anchored;
#[cfg(target_os = "linux")]
mod enforce;
mod error;
mod git_guard;
pub mod launch;
#[cfg(target_os = "linux")]
mod mounts;
pub mod secrets;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use error::{ConfineError, ConfineErrorKind};
pub use git_guard::GitGuard;

/// Exit code of a launcher that refused to run a command it could not confine.
pub const REFUSED: i32 = 126;

/// How much of the system a shell command may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxMode {
    /// No sandbox.
    Off,
    /// Nothing writable but `/dev/null` and a private TMPDIR.
    ReadOnly,
    /// The workspace and a few folders writable.
    WorkspaceWrite,
}

impl SandboxMode {
    /// `off`, `read-only` or `workspace-write`.
    pub fn parse(text: &str) -> Option<SandboxMode> {
        match text {
            "off" => Some(SandboxMode::Off),
            "read-only" => Some(SandboxMode::ReadOnly),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            _ => None,
        }
    }

    /// The name used in config and flags.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
        }
    }

    /// Whether commands may use the network when the user did not say.
    pub fn default_network(self) -> bool {
        !matches!(self, SandboxMode::ReadOnly)
    }
}

/// The sandbox settings of the shell tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// The policy.
    pub mode: SandboxMode,
    /// Network access; `None` is the mode's default.
    pub network: Option<bool>,
    /// The mode is a default, not the user's choice: it applies only where the system
    /// enforces it (probed once); elsewhere commands run unconfined. A mode the user chose
    /// is never dropped: a command it cannot confine does not run.
    pub auto: bool,
    /// Folders commands may not read (keel's own: its config with keys, its sessions, the
    /// serve token). Folders that hold a writable root are not hidden.
    pub hidden: Vec<PathBuf>,
}

impl Default for SandboxSettings {
    /// Off: a library user opts in (the `keel` binary defaults to workspace-write where
    /// the kernel enforces it).
    fn default() -> Self {
        SandboxSettings { mode: SandboxMode::Off, network: None, auto: false, hidden: Vec::new() }
    }
}

/// How far this system enforces each mechanism, read from a probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock: `full`, `partial` or `none`, with the reason.
    pub landlock: String,
    /// The network filter: `full` or `none`, with the reason.
    pub seccomp: String,
}

impl Support {
    /// Reads the output of `keel __exec --probe`.
    pub fn parse(text: &str) -> Support {
        let line = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name).map(|rest| rest.trim().to_owned()))
                .unwrap_or_else(|| "none (no answer from the probe)".to_owned())
        };
        Support { landlock: line("landlock:"), seccomp: line("seccomp:") }
    }

    /// True when file rules are enforced at least in part.
    pub fn landlock(&self) -> bool {
        self.landlock.starts_with("full") || self.landlock.starts_with("partial")
    }

    /// True when the network filter can be installed.
    pub fn seccomp(&self) -> bool {
        self.seccomp.starts_with("full")
    }

    /// Whether a command under `settings` would run confined.
    pub fn enforces(&self, settings: &SandboxSettings) -> bool {
        let network_off = !settings.network.unwrap_or(settings.mode.default_network());
        self.landlock() && (!network_off || self.seccomp())
    }
}

/// What one command may do, resolved from the settings for its call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The mode (never `Off` here).
    pub mode: SandboxMode,
    /// Network access.
    pub network: bool,
    /// Folders (and files) the command may write.
    pub writable: Vec<PathBuf>,
    /// Folders the command may not read.
    pub hidden: Vec<PathBuf>,
}

impl Policy {
    /// The policy for a command in `workspace` with a private `tmp` and `extra` roots;
    /// `None` when the sandbox is off.
    pub fn resolve(
        settings: &SandboxSettings,
        workspace: &Path,
        tmp: &Path,
        extra: &[PathBuf],
    ) -> Option<Policy> {
        if settings.mode == SandboxMode::Off {
            return None;
        }
        let mut writable = vec![PathBuf::from("/dev/null"), tmp.to_path_buf()];
        if settings.mode == SandboxMode::WorkspaceWrite {
            writable.push(workspace.to_path_buf());
            writable.extend(extra.iter().cloned());
        }
        writable.sort();
        writable.dedup();
        let hidden = settings
            .hidden
            .iter()
            .filter(|h| !writable.iter().chain([&workspace.to_path_buf()]).any(|w| w.starts_with(h)))
            .cloned()
            .collect();
        Some(Policy {
            mode: settings.mode,
            network: settings.network.unwrap_or(settings.mode.default_network()),
            writable,
            hidden,
        })
    }

    /// The launcher arguments that carry this policy.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--sandbox".into(), self.mode.as_str().into()];
        args.push(if self.network { "--net-on" } else { "--net-off" }.into());
        for path in &self.writable {
            args.push("--write".into());
            args.push(path.clone().into_os_string());
        }
        for path in &self.hidden {
            args.push("--hide".into());
            args.push(path.clone().into_os_string());
        }
        args
    }

    /// Reads a policy from launcher flags; `flag` is the current one, `rest` what follows.
    /// Returns whether `flag` was one of the sandbox's.
    pub(crate) fn parse_flag(
        policy: &mut Option<Policy>,
        flag: &str,
        rest: &mut dyn Iterator<Item = &OsString>,
    ) -> Option<bool> {
        if !matches!(flag, "--sandbox" | "--net-on" | "--net-off" | "--write" | "--hide") {
            return Some(false);
        }
        let policy = policy.get_or_insert_with(|| Policy {
            mode: SandboxMode::ReadOnly,
            network: false,
            writable: Vec::new(),
            hidden: Vec::new(),
        });
        match flag {
            "--sandbox" => policy.mode = SandboxMode::parse(rest.next()?.to_str()?)?,
            "--net-on" => policy.network = true,
            "--net-off" => policy.network = false,
            "--hide" => policy.hidden.push(PathBuf::from(rest.next()?)),
            _ => policy.writable.push(PathBuf::from(rest.next()?)),
        }
        Some(true)
    }
}

/// Confines this process (and what it starts) to `policy`; `Err` says why it could not,
/// and then nothing must run. On success, the notes say what is only partly enforced.
#[cfg(target_os = "linux")]
pub fn enforce(policy: &Policy) -> Result<Vec<String>, ConfineError> {
    enforce::enforce(policy)
}

/// No sandbox outside Linux: refused.
#[cfg(not(target_os = "linux"))]
pub fn enforce(_policy: &Policy) -> Result<Vec<String>, ConfineError> {
    Err(ConfineError::new(ConfineErrorKind::Unsupported, "the sandbox needs Linux (Landlock and seccomp)"))
}

/// In a mount namespace of its own (PID 1 of a command's PID namespace): makes every
/// mount read-only but `policy`'s writable roots, so that file metadata outside them
/// (`chmod`, `chown`, times, extended attributes), which Landlock does not cover, cannot
/// be changed either. `Err` says what could not be done.
#[cfg(target_os = "linux")]
pub fn protect_metadata(policy: &Policy) -> Result<(), ConfineError> {
    mounts::read_only_outside(&policy.writable)
}

/// Not Linux: nothing to protect with.
#[cfg(not(target_os = "linux"))]
pub fn protect_metadata(_policy: &Policy) -> Result<(), ConfineError> {
    Err(ConfineError::new(ConfineErrorKind::Unsupported, "needs Linux"))
}

/// What this system enforces, probed in a child process by `keel sandbox`.
#[cfg(target_os = "linux")]
pub use enforce::probe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_resolve_and_round_trip_through_launcher_flags() {
        let settings = SandboxSettings {
            mode: SandboxMode::WorkspaceWrite,
            network: None,
            auto: false,
            hidden: vec![PathBuf::from("/home/u/.config/keel"), PathBuf::from("/")],
        };
        let policy =
            Policy::resolve(&settings, Path::new("/w"), Path::new("/t"), &[PathBuf::from("/x")]).unwrap();
        assert!(policy.network);
        // Issue 28, item 3: the package caches (and keel's own folders) were writable.
        assert_eq!(
            policy.writable,
            ["/dev/null", "/t", "/w", "/x"].map(PathBuf::from).to_vec(),
            "the workspace, the command's TMPDIR, the allowed roots: nothing else"
        );
        assert_eq!(
            policy.hidden,
            [PathBuf::from("/home/u/.config/keel")],
            "a folder holding a root stays visible"
        );
        let args = policy.to_args();
        let mut parsed = None;
        let mut iter = args.iter();
        while let Some(flag) = iter.next() {
            assert_eq!(Policy::parse_flag(&mut parsed, flag.to_str().unwrap(), &mut iter), Some(true));
        }
        assert_eq!(parsed, Some(policy));
        let read_only =
            SandboxSettings { mode: SandboxMode::ReadOnly, network: None, auto: false, hidden: Vec::new() };
        let policy = Policy::resolve(&read_only, Path::new("/w"), Path::new("/t"), &[]).unwrap();
        assert!(!policy.network);
        assert_eq!(policy.writable, vec![PathBuf::from("/dev/null"), PathBuf::from("/t")]);
        assert_eq!(Policy::resolve(&SandboxSettings::default(), Path::new("/w"), Path::new("/t"), &[]), None);
    }
}
