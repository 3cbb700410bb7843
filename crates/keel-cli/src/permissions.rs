//! `[permissions]` in the config file (top level and profiles) and `keel permissions`.

use std::path::Path;

use keel_tools::rules::{PermissionRules, RuleKind};

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

/// The rules for a run in `workspace`; a rule that does not parse is a config error.
pub fn rules(configured: &[ConfiguredRule], workspace: &Path) -> Result<PermissionRules, ConfigError> {
    let mut rules = PermissionRules::new(workspace);
    for rule in configured {
        rules
            .add(rule.kind, [&rule.rule], &rule.source)
            .map_err(|e| ConfigError(format!("{e} (in {})", rule.source)))?;
    }
    Ok(rules)
}

/// `keel permissions`: the mode and every rule in force, with where it came from.
pub fn command(cli: &Cli) -> anyhow::Result<u8> {
    let (file, profile, mode, deny) = match crate::config::layer::permission_sources(cli) {
        Ok(found) => found,
        Err(e) => {
            errln!("keel: {e}");
            return Ok(crate::exit::USAGE);
        }
    };
    let workspace = std::env::current_dir()?;
    let configured = configured(&file, profile.as_deref());
    if let Err(e) = rules(&configured, &workspace) {
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
    out.push_str("[a]lways in a permission question adds its offered rule for the rest of the run");
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
        assert!(rules(&bad, Path::new("/w")).unwrap_err().0.contains("(in here)"));
    }
}
