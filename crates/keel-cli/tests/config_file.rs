#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The config file's mistakes, as the `keel` binary answers them: an unknown key at its
//! own line with the nearest valid key; a permission rule for a tool keel does not have.

mod common;

use common::*;
use pretty_assertions::assert_eq;

/// `keel ARGS` with `config` as the config file: its exit code and stderr.
async fn run_with(env: &Env, config: &str, args: &[&str]) -> (Option<i32>, String) {
    std::fs::write(env.root.path().join("config/config.toml"), config).unwrap();
    let mut keel = env.keel("http://127.0.0.1:9/v1");
    keel.args(args);
    let out = output(keel).await;
    (out.status.code(), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_key_is_named_at_its_line_with_the_nearest_key() {
    let env = Env::new();
    let path = env.root.path().join("config/config.toml");
    let (code, stderr) = run_with(&env, "provider = \"llamacpp\"\n\nmodle = \"x\"\n", &["hi"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!("keel: {}:3: unknown key `modle` (did you mean `model`?)", path.display())
    );
    let config = "[profiles.work]\nmodel = \"m\"\n\n[profiles.work.permissions]\nalow = [\"shell(ls)\"]\n\n\
                  [pricing.m]\ninput = 1\noutput = 2\ncahced = 0.5\n\n[mcp_servers.docs]\nurl = \"http://x\"\nheaderz = {}\n";
    let (code, stderr) = run_with(&env, config, &["permissions"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    let shown = path.display();
    assert_eq!(
        stderr.trim_end(),
        format!(
            "keel: {shown}:5: unknown key `alow` in [profiles.work.permissions] (did you mean `allow`?)\n\
             {shown}:10: unknown key `cahced` in [pricing.m] (did you mean `cached`?)\n\
             {shown}:14: unknown key `headerz` in [mcp_servers.docs] (did you mean `headers`?)"
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_with_nothing_close_lists_the_valid_keys_and_a_bad_value_its_line() {
    let env = Env::new();
    let (code, stderr) = run_with(&env, "[permissions]\nallow = []\nnever = []\n", &["permissions"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.ends_with(":3: unknown key `never` in [permissions]; valid keys: allow, ask, deny\n"),
        "{stderr}"
    );
    // A top-level value of the wrong type is shown at its own line, not the file's first.
    let (code, stderr) = run_with(&env, "model = \"m\"\nmax_steps = \"ten\"\n", &["hi"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("line 2, column 13") && stderr.contains("expected u32"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_config_file_is_checked_the_same_way() {
    let env = Env::new();
    let extra = env.root.path().join("servers.toml");
    std::fs::write(&extra, "[mcp_servers.fs]\ncomand = \"npx\"\n").unwrap();
    let extra_arg = extra.to_string_lossy().into_owned();
    let (code, stderr) = run_with(&env, "", &["--mcp-config", &extra_arg, "hi"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!("keel: {extra_arg}:2: unknown key `comand` in [mcp_servers.fs] (did you mean `command`?)")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rule_for_an_unknown_tool_is_a_usage_error_and_a_servers_tool_is_not() {
    let env = Env::new();
    let config = "[permissions]\nallow = [\"shell(cargo test*)\", \"shel(ls)\"]\n";
    for args in [&["hi"][..], &["permissions"]] {
        let (code, stderr) = run_with(&env, config, args).await;
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("keel: permission rule `shel(ls)`: no tool is named `shel` (did you mean `shell`?); keel's tools: shell, read_file,"),
            "{stderr}"
        );
        assert!(stderr.trim_end().ends_with("(in config.toml [permissions])"), "{stderr}");
    }
    let config =
        "[mcp_servers.github]\ncommand = \"npx\"\n[permissions]\ndeny = [\"mcp__github__delete_*\"]\n";
    let (code, stderr) = run_with(&env, config, &["permissions"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let config = "[permissions]\ndeny = [\"mcp__github__delete_*\"]\n";
    let (code, stderr) = run_with(&env, config, &["permissions"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no MCP server is configured"), "{stderr}");
}
