//! Landlock and seccomp, applied to the calling thread (and everything it starts).

use std::collections::BTreeMap;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use super::Policy;
use crate::error::{ConfineError, ConfineErrorKind};

/// The Landlock ABI whose rights are asked for; older kernels get what they support
/// (best effort, reported).
const TARGET: ABI = ABI::V6;

/// Applies `policy`'s file-system rules (Landlock) and, with the network off, the socket
/// filter (seccomp). Returns notes on what is only partly enforced.
pub(super) fn enforce(policy: &Policy) -> Result<Vec<String>, ConfineError> {
    let mut notes = Vec::new();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        // Folder listings everywhere; file contents everywhere but the hidden folders.
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::ReadDir)))
        .and_then(|r| r.add_rules(path_beneath_rules(readable(&policy.hidden), AccessFs::from_read(TARGET))))
        .and_then(|r| r.add_rules(path_beneath_rules(&policy.writable, AccessFs::from_all(TARGET))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            ConfineError::new(ConfineErrorKind::Files, format!("Landlock refused the rules: {e}"))
        })?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced => {
            notes.push(format!("file rules partly enforced ({})", describe(status.landlock)))
        }
        RulesetStatus::NotEnforced => {
            return Err(ConfineError::new(
                ConfineErrorKind::Unsupported,
                format!("the kernel enforces no file rules ({})", describe(status.landlock)),
            ));
        }
    }
    if !policy.network {
        deny_network()?;
    }
    Ok(notes)
}

/// The folders and files whose contents may be read: everything but `hidden`, as the
/// entries around each hidden folder on the way down from `/` (Landlock grants, it does
/// not deny, so `/` minus a folder is its siblings at every level).
pub(super) fn readable(hidden: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut roots = vec![std::path::PathBuf::from("/")];
    for hide in hidden.iter().filter(|h| h.is_absolute() && h.exists()) {
        let mut next = Vec::new();
        for root in roots {
            carve(root, hide, &mut next);
        }
        roots = next;
    }
    roots
}

fn carve(root: std::path::PathBuf, hide: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    if root == hide || root.starts_with(hide) {
        return;
    }
    if !hide.starts_with(&root) {
        out.push(root);
        return;
    }
    let Some(step) = hide.strip_prefix(&root).ok().and_then(|rest| rest.components().next()) else { return };
    let toward = root.join(step);
    let Ok(entries) = std::fs::read_dir(&root) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == toward {
            carve(path, hide, out);
        } else {
            out.push(path);
        }
    }
}

fn describe(status: LandlockStatus) -> String {
    match status {
        LandlockStatus::NotEnabled => "Landlock is built in but not enabled at boot".into(),
        LandlockStatus::NotImplemented => "this kernel has no Landlock (Linux 5.13 or later needed)".into(),
        LandlockStatus::Available { effective_abi, .. } => format!("Landlock ABI {}", effective_abi as i32),
    }
}

/// Only Unix sockets: `socket`/`socketpair` of another family and `io_uring_setup` fail
/// with `EACCES`.
fn deny_network() -> Result<(), ConfineError> {
    let network = |message: String| ConfineError::new(ConfineErrorKind::Network, message);
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| network(format!("no seccomp filter for {}: {e}", std::env::consts::ARCH)))?;
    let not_unix = || {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)
            .and_then(|c| SeccompRule::new(vec![c]))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for syscall in [libc::SYS_socket, libc::SYS_socketpair] {
        rules.insert(syscall, vec![not_unix().map_err(|e| network(e.to_string()))?]);
    }
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EACCES as u32), arch)
            .map_err(|e| network(format!("cannot build the network filter: {e}")))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| network(format!("cannot compile the network filter: {e}")))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| network(format!("cannot install the network filter (seccomp): {e}")))
}

/// What this system enforces: one line per mechanism (`landlock: …`, `seccomp: …`).
/// Confines the calling process: run it in a throwaway child (`keel __exec --probe`).
pub fn probe() -> String {
    let landlock = match Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_all(TARGET))))
        .and_then(|r| r.restrict_self())
    {
        Ok(status) => {
            let level = match status.ruleset {
                RulesetStatus::FullyEnforced => "full",
                RulesetStatus::PartiallyEnforced => "partial",
                RulesetStatus::NotEnforced => "none",
            };
            format!("landlock: {level} ({})", describe(status.landlock))
        }
        Err(e) => format!("landlock: none ({e})"),
    };
    let seccomp = match deny_network() {
        Ok(()) => "seccomp: full (network filter installed)".to_owned(),
        Err(e) => format!("seccomp: none ({e})"),
    };
    format!("{landlock}\n{seccomp}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_hidden_folder_is_carved_out_of_what_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for folder in [
            "home/.local/share/keel",
            "home/.local/bin",
            "home/project",
            "home/.config/keel",
            "home/.config/git",
        ] {
            std::fs::create_dir_all(base.join(folder)).unwrap();
        }
        let hidden = [base.join("home/.local/share/keel"), base.join("home/.config/keel")];
        let roots = readable(&hidden);
        for root in &roots {
            assert!(
                !hidden.iter().any(|h| root.starts_with(h) || h == root),
                "{root:?} reveals a hidden folder"
            );
        }
        for visible in ["home/project", "home/.local/bin", "home/.config/git"] {
            assert!(
                roots.iter().any(|r| base.join(visible).starts_with(r)),
                "{visible} must stay readable: {roots:?}"
            );
        }
        assert!(roots.contains(&PathBuf::from("/usr")) || !PathBuf::from("/usr").exists());
        assert_eq!(readable(&[]), vec![PathBuf::from("/")]);
    }
}
