//! `[permissions]` in the config file (top level and profiles) and `keel permissions`.

use std::collections::BTreeMap;
use std::path::Path;

use keel_tools::rules::{PermissionRules, Rule, RuleError, RuleKind};

use crate::cli::Cli;
use crate::config::layer::{ConfigError, FileConfig, PermissionsTable};

/// One configured rule and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfiguredRule {
    /// Its list.
    pub kind: RuleKind,
    /// The rule as written.
    pub rule: String,
    /// `config.toml [permissions]`, `config.toml [profiles.NAME.permissions]`.
    pub source: String,
}

/// The rules of the file's top level and of the profile in use, in that order.
pub fn configured(file: &FileConfig, profile: Option<&str>) -> Vec<ConfiguredRule> {
    let path = crate::paths::config_file();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut out = Vec::new();
    let mut add = |table: &PermissionsTable, source: String| {
        for (kind, rules) in
            [(RuleKind::Deny, &table.deny), (RuleKind::Ask, &table.ask), (RuleKind::Allow, &table.allow)]
        {
            for rule in rules {
                out.push(ConfiguredRule { kind, rule: rule.clone(), source: source.clone() });
            }
        }
    };
    if let Some(table) = &file.defaults.permissions {
        add(table, format!("{name} [permissions]"));
    }
    if let Some(profile) = profile
        && let Some(table) = file.profiles.get(profile).and_then(|p| p.permissions.as_ref())
    {
        add(table, format!("{name} [profiles.{profile}.permissions]"));
    }
    out
}

/// `configured` and the rules kept for `workspace` with `p` at a question
/// ([`crate::project_rules`]), which come last.
pub fn with_kept(
    configured: &[ConfiguredRule],
    workspace: &Path,
) -> Result<Vec<ConfiguredRule>, ConfigError> {
    let source = format!("{} (this project)", crate::project_rules::file().display());
    let kept = crate::project_rules::allowed(workspace)?;
    let kept =
        kept.into_iter().map(|rule| ConfiguredRule { kind: RuleKind::Allow, rule, source: source.clone() });
    Ok(configured.iter().cloned().chain(kept).collect())
}

/// The rules for a run in `workspace`; a rule that does not parse is a config error.
pub fn rules(configured: &[ConfiguredRule], workspace: &Path) -> Result<PermissionRules, ConfigError> {
    let mut rules = PermissionRules::new(workspace);
    for rule in configured {
        rules
            .add(rule.kind, [&rule.rule], &rule.source)
            .map_err(|e| ConfigError::new(format!("{e} (in {})", rule.source)))?;
    }
    Ok(rules)
}

/// Refuses a rule that names no tool keel has: none of keel's own tools
/// ([`keel_tools::tool_names`]) and none of a configured MCP server's (`servers`: the
/// config file's and `--mcp-config`'s). The message names the nearest tool or server and
/// the known ones. A rule that does not parse is refused as by [`rules`].
pub fn check_tools(
    configured: &[ConfiguredRule],
    servers: &BTreeMap<String, keel_mcp::ServerConfig>,
) -> Result<(), ConfigError> {
    let tools = keel_tools::tool_names();
    let prefixes: Vec<String> = servers.keys().map(|name| keel_mcp::name::server_prefix(name)).collect();
    for rule in configured {
        let parsed =
            Rule::parse(&rule.rule).map_err(|e| ConfigError::new(format!("{e} (in {})", rule.source)))?;
        if !parsed.could_name(&tools, &prefixes) {
            let reason = unknown_tool(parsed.tool(), &tools, servers);
            let error = RuleError { rule: rule.rule.clone(), reason };
            return Err(ConfigError::new(format!("{error} (in {})", rule.source)));
        }
    }
    Ok(())
}

/// Why `tool` (a rule's tool name) names no tool, with the nearest and the known ones.
fn unknown_tool(tool: &str, tools: &[String], servers: &BTreeMap<String, keel_mcp::ServerConfig>) -> String {
    let near = |word: &str, names: &[&str]| match crate::near::nearest(word, names) {
        Some(near) => format!(" (did you mean `{near}`?)"),
        None => String::new(),
    };
    let names: Vec<&str> = servers.keys().map(String::as_str).collect();
    if let Some(rest) = tool.strip_prefix(keel_mcp::name::PREFIX) {
        let server = rest.split("__").next().unwrap_or(rest);
        if names.is_empty() {
            return format!(
                "no MCP server is configured, so no tool is named `{tool}`; an MCP tool's rule is \
                 mcp__SERVER__TOOL, for a server in [mcp_servers.SERVER] or --mcp-config"
            );
        }
        if servers.keys().any(|name| keel_mcp::name::sanitize(name) == server) {
            return format!(
                "no tool is named `{tool}`: an MCP tool's name is mcp__SERVER__TOOL; \
                 `mcp__{server}__*` names every tool of {server}"
            );
        }
        return format!(
            "no MCP server `{server}` is configured{}; MCP servers: {}",
            near(server, &names),
            names.join(", ")
        );
    }
    let own: Vec<&str> = tools.iter().map(String::as_str).collect();
    let what = if tool.contains(['*', '?']) { "no tool's name matches" } else { "no tool is named" };
    let servers_too = if names.is_empty() {
        String::new()
    } else {
        format!(", and mcp__SERVER__TOOL for the tools of MCP servers {}", names.join(", "))
    };
    format!("{what} `{tool}`{}; keel's tools: {}{servers_too}", near(tool, &own), own.join(", "))
}

/// `keel permissions`: the mode and every rule in force, with where it came from.
pub fn command(cli: &Cli) -> anyhow::Result<u8> {
    let (file, profile, mode, deny) = match crate::config::file::permission_sources(cli) {
        Ok(found) => found,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let workspace = std::env::current_dir()?;
    let configured = match with_kept(&configured(&file, profile.as_deref()), &workspace) {
        Ok(all) => all,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let checked = crate::config::file::mcp_servers(cli)
        .and_then(|servers| check_tools(&configured, &servers))
        .and_then(|()| rules(&configured, &workspace));
    if let Err(e) = checked {
        errln!("keel: {e}");
        return Ok(crate::exit::USAGE);
    }
    crate::out::print(&report(&configured, mode.as_deref(), &deny));
    Ok(crate::exit::OK)
}

/// The text of `keel permissions`.
pub fn report(configured: &[ConfiguredRule], mode: Option<&str>, extra_deny: &[String]) -> String {
    let mut out = format!(
        "mode: {}\n",
        mode.unwrap_or("ask in interactive mode, auto in print mode (--permission, KEEL_PERMISSION, `permission` in config)")
    );
    out.push_str(
        "order: deny beats ask beats allow; a compound shell command is allowed only if every part is\n",
    );
    if configured.is_empty() {
        out.push_str(&format!(
            "rules: none (add a [permissions] table to {}, e.g. allow = [\"shell(cargo test*)\"])\n",
            crate::paths::config_file().display()
        ));
    } else {
        out.push_str("rules:\n");
        let width = configured.iter().map(|r| r.rule.chars().count()).max().unwrap_or(0);
        for rule in configured {
            out.push_str(&format!("  {:<5}  {:<width$}  {}\n", rule.kind.as_str(), rule.rule, rule.source));
        }
    }
    out.push_str(&format!(
        "built in: {} deny patterns for destructive shell commands (rm of ~ or /, force push, mkfs, …), in every mode\n",
        keel_tools::DEFAULT_DENY.len() + 1
    ));
    for pattern in extra_deny {
        out.push_str(&format!("  deny (regex)  {pattern}  config `deny`\n"));
    }
    out.push_str("[a]lways in a permission question adds its offered rule for the rest of the run; p and Enter keeps it for this folder");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_come_from_the_top_level_and_the_profile_with_their_sources() {
        let file = FileConfig::parse(
            r#"
model = "m"
[permissions]
allow = ["shell(cargo test*)"]
deny = ["read_file(.env*)"]
[profiles.work]
model = "w"
[profiles.work.permissions]
ask = ["shell(git push*)"]
"#,
            Path::new("config.toml"),
        )
        .unwrap();
        let found = configured(&file, Some("work"));
        let shown: Vec<(&str, &str)> = found.iter().map(|r| (r.kind.as_str(), r.rule.as_str())).collect();
        assert_eq!(
            shown,
            [("deny", "read_file(.env*)"), ("allow", "shell(cargo test*)"), ("ask", "shell(git push*)")]
        );
        assert!(found[2].source.ends_with("[profiles.work.permissions]"), "{:?}", found[2]);
        assert_eq!(configured(&file, None).len(), 2);
        let text = report(&found, Some("ask"), &[]);
        assert!(text.contains("mode: ask") && text.contains("ask    shell(git push*)"), "{text}");
        let bad =
            vec![ConfiguredRule { kind: RuleKind::Allow, rule: "shell(x".into(), source: "here".into() }];
        assert!(rules(&bad, Path::new("/w")).unwrap_err().message.contains("(in here)"));
    }

    fn checked(rules: &[&str], servers: &[&str]) -> Result<(), String> {
        let configured: Vec<ConfiguredRule> = rules
            .iter()
            .map(|rule| ConfiguredRule { kind: RuleKind::Deny, rule: (*rule).into(), source: "here".into() })
            .collect();
        let servers =
            servers.iter().map(|name| ((*name).to_owned(), keel_mcp::ServerConfig::default())).collect();
        check_tools(&configured, &servers).map_err(|e| e.message)
    }

    #[test]
    fn a_rule_for_an_unknown_tool_is_refused_with_the_nearest_and_the_known_ones() {
        let known = ["shell(ls)", "read_file(.env*)", "*_file(secrets/**)", "answer", "change_file", "glob"];
        assert_eq!(checked(&known, &[]), Ok(()));
        assert_eq!(checked(&["mcp__github__*", "mcp__my_docs__search"], &["github", "my docs"]), Ok(()));
        let tools = keel_tools::tool_names().join(", ");
        assert_eq!(
            checked(&["shel(ls)"], &[]).unwrap_err(),
            format!(
                "permission rule `shel(ls)`: no tool is named `shel` (did you mean `shell`?); \
                 keel's tools: {tools} (in here)"
            )
        );
        assert_eq!(
            checked(&["edit"], &["github"]).unwrap_err(),
            format!(
                "permission rule `edit`: no tool is named `edit`; keel's tools: {tools}, and \
                 mcp__SERVER__TOOL for the tools of MCP servers github (in here)"
            )
        );
        assert_eq!(
            checked(&["mcp__githb__*"], &["github", "docs"]).unwrap_err(),
            "permission rule `mcp__githb__*`: no MCP server `githb` is configured (did you mean \
             `github`?); MCP servers: docs, github (in here)"
        );
        assert!(checked(&["mcp__github__*"], &[]).unwrap_err().contains("no MCP server is configured"));
        assert!(
            checked(&["mcp__github"], &["github"]).unwrap_err().contains("`mcp__github__*` names every tool")
        );
        assert!(checked(&["nothing*"], &[]).unwrap_err().contains("no tool's name matches `nothing*`"));
        assert!(checked(&["shell(x"], &[]).unwrap_err().contains("closing parenthesis"));
    }
}
