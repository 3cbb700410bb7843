#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Shell commands in the sandbox, through the real launcher (`keel __exec`). Skipped,
//! with the reason printed, where the kernel enforces no Landlock rules.

use std::path::Path;
use std::sync::Arc;

use keel_agent::{ToolContext, ToolOutput};
use keel_sandbox::launch::Launcher;
use keel_sandbox::{SandboxMode, SandboxSettings, Support};
use keel_tools::ToolsConfig;
use serde_json::json;

fn keel() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_keel").into()
}

/// What the kernel enforces, or `None` (and why, printed) when Landlock is missing.
fn supported() -> Option<Support> {
    let out = std::process::Command::new(keel()).args(["__exec", "--probe"]).output().unwrap();
    let support = Support::parse(&String::from_utf8_lossy(&out.stdout));
    if !support.landlock() {
        eprintln!("skipped: this kernel enforces no Landlock rules ({})", support.landlock);
        return None;
    }
    Some(support)
}

async fn shell(mode: SandboxMode, network: Option<bool>, ws: &Path, command: &str) -> ToolOutput {
    shell_hiding(mode, network, ws, command, Vec::new()).await
}

async fn shell_hiding(
    mode: SandboxMode,
    network: Option<bool>,
    ws: &Path,
    command: &str,
    hidden: Vec<std::path::PathBuf>,
) -> ToolOutput {
    shell_with(mode, network, ws, command, hidden, false).await
}

async fn shell_with(
    mode: SandboxMode,
    network: Option<bool>,
    ws: &Path,
    command: &str,
    hidden: Vec<std::path::PathBuf>,
    pid_namespace: bool,
) -> ToolOutput {
    let config = ToolsConfig {
        launcher: Some(Launcher { program: keel(), pid_namespace }),
        sandbox: SandboxSettings { mode, network, auto: false, hidden },
        ..ToolsConfig::default()
    };
    let registry = keel_tools::builtin(Arc::new(config));
    let args = json!({ "command": command }).to_string();
    let prepared = registry.get("shell").unwrap().prepare(&args).unwrap();
    let mut ctx = ToolContext::new(ws);
    ctx.artifacts = Some(Arc::from(ws.join(".keel-artifacts").as_path()));
    prepared(ctx).await.unwrap()
}

struct Scene {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn scene() -> Scene {
    let scene = Scene { ws: tempfile::tempdir().unwrap(), outside: tempfile::tempdir().unwrap() };
    std::fs::write(scene.outside.path().join("keep.txt"), "precious\n").unwrap();
    std::fs::write(scene.ws.path().join("a.txt"), "one\n").unwrap();
    scene
}

/// Issue 28, item 5: a sandboxed command read the serve token (and could read keel's
/// config with its keys), then used it to start an unsandboxed session.
#[tokio::test]
async fn keels_own_folders_are_unreadable_to_commands() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    let home = s.outside.path().join("keel-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("serve-token"), "s3cret-token-0123456789").unwrap();
    let token = home.join("serve-token").display().to_string();
    let out =
        shell_hiding(SandboxMode::ReadOnly, None, s.ws.path(), &format!("cat {token}"), vec![home.clone()])
            .await;
    assert!(out.is_error && !out.content.contains("s3cret"), "{}", out.content);
    // What is beside it stays readable; the same command without hiding reads it.
    let keep = s.outside.path().join("keep.txt").display().to_string();
    let out =
        shell_hiding(SandboxMode::ReadOnly, None, s.ws.path(), &format!("cat {keep}"), vec![home]).await;
    assert_eq!(out.content, "precious\n[exit code: 0]");
    let out = shell(SandboxMode::ReadOnly, None, s.ws.path(), &format!("cat {token}")).await;
    assert!(out.content.contains("s3cret"), "{}", out.content);
}

#[tokio::test]
async fn workspace_write_confines_writes_to_the_workspace_and_tmpdir() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    let outside = s.outside.path().display().to_string();
    let out = shell(SandboxMode::WorkspaceWrite, None, s.ws.path(), &format!("echo x > {outside}/f")).await;
    assert!(out.is_error && out.content.contains("Permission denied"), "{}", out.content);
    assert!(
        out.content.contains("[sandbox: the sandbox lets commands write only inside the project folder"),
        "{}",
        out.content
    );
    assert!(!s.outside.path().join("f").exists());
    let out = shell(SandboxMode::WorkspaceWrite, None, s.ws.path(), &format!("rm -rf {outside}")).await;
    assert!(out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(s.outside.path().join("keep.txt")).unwrap(), "precious\n");
    let out = shell(
        SandboxMode::WorkspaceWrite,
        None,
        s.ws.path(),
        "echo two >> a.txt && mkdir -p sub && echo b > sub/b.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert_eq!(out.content, "t\n[exit code: 0]");
    assert_eq!(std::fs::read_to_string(s.ws.path().join("a.txt")).unwrap(), "one\ntwo\n");
    assert!(s.ws.path().join("sub/b.txt").exists());
}

/// Issue 28, item 3: Landlock does not cover metadata; `chmod`, `touch -d` on a file
/// outside the workspace succeeded. In a command's own namespace everything outside the
/// writable roots is a read-only mount.
#[tokio::test]
async fn metadata_outside_the_workspace_is_read_only_in_a_namespace() {
    if supported().is_none() {
        return;
    }
    if !keel_sandbox::launch::pid_namespace_available().await {
        eprintln!("skipped: this system gives commands no PID (and mount) namespace");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let s = scene();
    let keep = s.outside.path().join("keep.txt");
    let before = std::fs::metadata(&keep).unwrap();
    std::fs::write(s.ws.path().join("run.sh"), "echo ran\n").unwrap();
    let command = format!(
        "chmod 600 {keep}; touch -d 2001-01-01 {keep}; chmod +x run.sh && ./run.sh && echo t > \"$TMPDIR/t\" \
         && touch -d 2001-01-01 \"$TMPDIR/t\" && echo x > /dev/null && echo tmp-ok",
        keep = keep.display()
    );
    let out = shell_with(SandboxMode::WorkspaceWrite, None, s.ws.path(), &command, Vec::new(), true).await;
    assert!(out.content.contains("Read-only file system"), "{}", out.content);
    assert!(
        out.content.contains("ran\ntmp-ok\n"),
        "the workspace, TMPDIR and /dev/null stay writable: {}",
        out.content
    );
    let after = std::fs::metadata(&keep).unwrap();
    assert_eq!(
        (after.permissions().mode(), after.modified().unwrap()),
        (before.permissions().mode(), before.modified().unwrap())
    );
    let script = std::fs::metadata(s.ws.path().join("run.sh")).unwrap();
    assert_ne!(script.permissions().mode() & 0o111, 0);
}

#[tokio::test]
async fn git_and_python_work_in_the_workspace_and_hooks_are_guarded() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    let script = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; \
                  git init -q -b main . && git add a.txt && git commit -qm one && git log --format=%s && \
                  python3 -c 'import pathlib; pathlib.Path(\"p.txt\").write_text(\"py\")' && cat p.txt";
    let out = shell(SandboxMode::WorkspaceWrite, None, s.ws.path(), script).await;
    assert_eq!(out.content, "one\npy\n[exit code: 0]", "{}", out.content);
    let hook = s.ws.path().join(".git/hooks/pre-commit");
    let out = shell(
        SandboxMode::WorkspaceWrite,
        None,
        s.ws.path(),
        "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && git config core.hooksPath evil",
    )
    .await;
    assert!(!hook.exists(), "the added hook was removed");
    let config = std::fs::read_to_string(s.ws.path().join(".git/config")).unwrap();
    assert!(!config.contains("hooksPath"), "{config}");
    assert!(out.content.contains(".git/config, .git/hooks/pre-commit; that was undone"), "{}", out.content);
}

#[tokio::test]
async fn read_only_changes_nothing_in_the_workspace() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    let out =
        shell(SandboxMode::ReadOnly, None, s.ws.path(), "echo x >> a.txt; rm -f a.txt; touch b; cat a.txt")
            .await;
    assert!(out.content.contains("one\n"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(s.ws.path().join("a.txt")).unwrap(), "one\n");
    assert!(!s.ws.path().join("b").exists());
    let out =
        shell(SandboxMode::ReadOnly, None, s.ws.path(), "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"").await;
    assert_eq!(out.content, "t\n[exit code: 0]");
}

#[tokio::test]
async fn network_off_allows_unix_sockets_only() {
    let Some(support) = supported() else { return };
    if !support.seccomp() {
        eprintln!("skipped: no seccomp here ({})", support.seccomp);
        return;
    }
    let s = scene();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2); print(\"connected\")'"
    );
    let unix =
        "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"hi\"); print(b.recv(2).decode())'";
    let off = shell(SandboxMode::WorkspaceWrite, Some(false), s.ws.path(), &connect).await;
    assert!(off.is_error && !off.content.contains("connected"), "{}", off.content);
    assert!(off.content.contains("the network is off"), "{}", off.content);
    let unix_ok = shell(SandboxMode::WorkspaceWrite, Some(false), s.ws.path(), unix).await;
    assert_eq!(unix_ok.content, "hi\n[exit code: 0]");
    let on = shell(SandboxMode::WorkspaceWrite, Some(true), s.ws.path(), &connect).await;
    assert_eq!(on.content, "connected\n[exit code: 0]");
}

#[tokio::test]
async fn deny_list_bypasses_touch_nothing_outside_under_the_sandbox() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    // A scratch HOME: the bypasses of the deny-list aim at it.
    let home = s.outside.path().display().to_string();
    for command in [
        format!("HOME={home}; rm -rf \"$HOME\""),
        format!("HOME={home}; rm -r -f ${{HOME}}/*"),
        format!("HOME={home}; cd ~ && rm -rf *"),
        format!("HOME={home}; find ~ -delete"),
        format!("echo 'rm -rf {home}/keep.txt' | base64 | base64 -d | sh"),
        format!("bash -c 'rm -rf {home}'"),
    ] {
        shell(SandboxMode::WorkspaceWrite, None, s.ws.path(), &command).await;
        assert_eq!(
            std::fs::read_to_string(s.outside.path().join("keep.txt")).unwrap(),
            "precious\n",
            "{command}"
        );
    }
}

#[test]
fn keel_sandbox_reports_what_is_enforced() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(keel())
        .arg("sandbox")
        .env("KEEL_CONFIG_DIR", home.path())
        .env_remove("KEEL_SANDBOX")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("keel sandbox: what this system enforces for shell commands\n"), "{text}");
    assert!(
        text.contains("Landlock (files):") && text.contains("Policies:") && text.contains("In use:"),
        "{text}"
    );
    if supported().is_some() {
        assert!(text.contains("In use: workspace-write (the default), network on"), "{text}");
    }
    let off = std::process::Command::new(keel())
        .arg("sandbox")
        .env("KEEL_SANDBOX", "read-only")
        .env("KEEL_CONFIG_DIR", home.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&off.stdout);
    assert!(text.contains("In use: read-only") || text.contains("read-only was chosen"), "{text}");
}

#[tokio::test]
async fn cargo_builds_in_the_workspace() {
    if supported().is_none() {
        return;
    }
    let s = scene();
    let out = shell(
        SandboxMode::WorkspaceWrite,
        None,
        s.ws.path(),
        "unset CARGO_TARGET_DIR; cargo new -q --vcs none hello && cd hello && cargo run -q --offline",
    )
    .await;
    assert_eq!(out.content, "Hello, world!\n[exit code: 0]", "{}", out.content);
}
