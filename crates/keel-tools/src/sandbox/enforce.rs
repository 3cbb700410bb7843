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

/// The Landlock ABI whose rights are asked for; older kernels get what they support
/// (best effort, reported).
const TARGET: ABI = ABI::V6;

/// Applies `policy`'s file-system rules (Landlock) and, with the network off, the socket
/// filter (seccomp). Returns notes on what is only partly enforced.
pub(super) fn enforce(policy: &Policy) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(TARGET))))
        .and_then(|r| r.add_rules(path_beneath_rules(&policy.writable, AccessFs::from_all(TARGET))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("Landlock refused the rules: {e}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => {}
        RulesetStatus::PartiallyEnforced => {
            notes.push(format!("file rules partly enforced ({})", describe(status.landlock)))
        }
        RulesetStatus::NotEnforced => {
            return Err(format!("the kernel enforces no file rules ({})", describe(status.landlock)));
        }
    }
    if !policy.network {
        deny_network()?;
    }
    Ok(notes)
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
fn deny_network() -> Result<(), String> {
    let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for {}: {e}", std::env::consts::ARCH))?;
    let not_unix = || {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)
            .and_then(|c| SeccompRule::new(vec![c]))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for syscall in [libc::SYS_socket, libc::SYS_socketpair] {
        rules.insert(syscall, vec![not_unix().map_err(|e| e.to_string())?]);
    }
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EACCES as u32), arch)
            .map_err(|e| format!("cannot build the network filter: {e}"))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("cannot compile the network filter: {e}"))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| format!("cannot install the network filter (seccomp): {e}"))
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
