//! `keel sandbox`: what this system enforces for shell commands, policy by policy.

use keel_sandbox::{SandboxMode, SandboxSettings, Support};

/// The report for `support` (and whether PID namespaces work) with `settings` in use.
pub fn report(support: &Support, pid_namespace: bool, settings: &SandboxSettings) -> String {
    let mut out = String::from("keel sandbox: what this system enforces for shell commands\n");
    out.push_str(&format!("  Landlock (files):    {}\n", support.landlock));
    out.push_str(&format!("  seccomp (network):   {}\n", support.seccomp));
    out.push_str(&format!(
        "  PID namespace:       {}\n",
        if pid_namespace {
            "available (commands cannot see keel's process)"
        } else {
            "not available (needs CAP_SYS_ADMIN); keel is non-dumpable instead"
        }
    ));
    out.push_str(&format!(
        "  file metadata:       {}
",
        if pid_namespace {
            "protected (mounts outside the writable folders are read-only in the command's namespace)"
        } else {
            "not protected: chmod, chown and times outside the writable folders (Landlock does not cover them; a namespace would)"
        }
    ));
    let files = |what: &str| {
        if support.landlock.starts_with("full") {
            format!("full: {what}")
        } else if support.landlock() {
            format!("partial ({}): {what}", support.landlock)
        } else {
            "not enforced: this kernel applies no file rules".to_owned()
        }
    };
    out.push_str("Policies:\n");
    out.push_str(&format!(
        "  workspace-write  {}\n                   .git hooks and .git/config: guarded, not by the kernel (a change is undone after each command)\n",
        files("writes only to the project folder, its own TMPDIR and allowed_roots")
    ));
    out.push_str(&format!("  read-only        {}\n", files("writes only to TMPDIR and /dev/null")));
    out.push_str(&format!(
        "  network off      {}\n",
        if support.seccomp() { "full: only Unix sockets" } else { "not enforced: no seccomp filter" }
    ));
    let network = settings.network.unwrap_or(settings.mode.default_network());
    let in_use = match (settings.mode, settings.auto, support.enforces(settings)) {
        (SandboxMode::Off, _, _) => "off: commands run with your rights, unconfined".to_owned(),
        (mode, true, true) => format!("{} (the default), network {}", mode.as_str(), on_off(network)),
        (mode, true, false) => format!(
            "none: the default {} is not enforced here, so commands run unconfined (choose `--sandbox off` to silence this, or a kernel with Landlock)",
            mode.as_str()
        ),
        (mode, false, true) => format!("{}, network {}", mode.as_str(), on_off(network)),
        (mode, false, false) => format!(
            "{} was chosen but cannot be enforced here: shell commands will be refused",
            mode.as_str()
        ),
    };
    out.push_str(&format!("In use: {in_use}\n"));
    out
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// Runs the probes and prints the report.
pub async fn run(cli: &crate::cli::Cli) -> anyhow::Result<u8> {
    let settings = match crate::config::resolve_sandbox(cli) {
        Ok(settings) => settings,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let program = std::env::current_exe()?;
    let support = keel_sandbox::launch::sandbox_support(&program).await;
    let pid_namespace = keel_sandbox::launch::pid_namespace_available().await;
    out!("{}", report(&support, pid_namespace, &settings));
    Ok(crate::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_say_what_is_and_is_not_enforced() {
        let full =
            Support::parse("landlock: full (Landlock ABI 6)\nseccomp: full (network filter installed)\n");
        let auto = SandboxSettings {
            mode: SandboxMode::WorkspaceWrite,
            network: None,
            auto: true,
            hidden: Vec::new(),
        };
        let text = report(&full, false, &auto);
        assert!(text.contains("file metadata:       not protected"), "{text}");
        assert!(report(&full, true, &auto).contains("file metadata:       protected"));
        assert!(text.contains("  workspace-write  full: writes only to the project folder"), "{text}");
        assert!(text.contains("In use: workspace-write (the default), network on"), "{text}");
        let none = Support::parse(
            "landlock: none (this kernel has no Landlock (Linux 5.13 or later needed))\nseccomp: full (x)\n",
        );
        let text = report(&none, false, &auto);
        assert!(text.contains("not enforced: this kernel applies no file rules"), "{text}");
        assert!(text.contains("In use: none: the default workspace-write is not enforced here"), "{text}");
        let chosen =
            SandboxSettings { mode: SandboxMode::ReadOnly, network: None, auto: false, hidden: Vec::new() };
        assert!(report(&none, false, &chosen).contains("read-only was chosen but cannot be enforced here"));
        assert!(report(&full, true, &chosen).contains("In use: read-only, network off"));
    }
}
