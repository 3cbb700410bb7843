//! Rules a user keeps for one project: `p` and Enter at a permission question. They live in
//! keel's config folder (`project-rules.toml`, by the project's canonical path), never in
//! the repository: a repository must not be able to grant itself permissions.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::layer::ConfigError;

/// The file of kept rules.
pub fn file() -> PathBuf {
    crate::paths::config_dir().join("project-rules.toml")
}

/// The rules kept for one project.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Kept {
    /// Run without asking.
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeptFile {
    #[serde(default)]
    projects: BTreeMap<String, Kept>,
}

/// The key of `workspace` in the file: its canonical path.
fn key(workspace: &Path) -> String {
    workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf()).display().to_string()
}

fn read(path: &Path) -> Result<KeptFile, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| ConfigError::new(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(KeptFile::default()),
        Err(e) => Err(ConfigError::new(format!("cannot read {}: {e}", path.display()))),
    }
}

/// The allow rules kept for `workspace`.
pub fn allowed(workspace: &Path) -> Result<Vec<String>, ConfigError> {
    Ok(read(&file())?.projects.remove(&key(workspace)).unwrap_or_default().allow)
}

/// Adds `rules` to those kept for `workspace` (once each). The file is replaced whole: a
/// new file written beside it, then renamed over it, so a crash leaves the old one and a
/// link at its place is replaced, not followed.
pub fn keep(workspace: &Path, rules: &[String]) -> Result<(), ConfigError> {
    let path = file();
    let mut kept = read(&path)?;
    let entry = kept.projects.entry(key(workspace)).or_default();
    for rule in rules {
        if !entry.allow.contains(rule) {
            entry.allow.push(rule.clone());
        }
    }
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .map_err(|e| ConfigError::new(format!("cannot create {}: {e}", folder.display())))?;
    let fresh = folder.join(format!(".project-rules.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .and_then(|mut out| out.write_all(render(&kept).as_bytes()).and_then(|()| out.sync_all()))
        .and_then(|()| std::fs::rename(&fresh, &path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&fresh);
        ConfigError::new(format!("cannot write {}: {e}", path.display()))
    })
}

/// The file's text. JSON's string escapes are valid in TOML's basic strings.
fn render(kept: &KeptFile) -> String {
    let quote = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    let mut out =
        String::from("# Rules kept with p (and Enter) at keel's permission questions, by project folder.\n");
    for (project, rules) in &kept.projects {
        let allow: Vec<String> = rules.allow.iter().map(|r| quote(r)).collect();
        out.push_str(&format!("\n[projects.{}]\nallow = [{}]\n", quote(project), allow.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_rules_round_trip_per_project_and_odd_characters_survive() {
        let mut kept = KeptFile::default();
        kept.projects.insert(
            "/home/u/a \"quoted\" folder".into(),
            Kept { allow: vec!["shell(cargo test*)".into(), "edit_file(src/**)".into()] },
        );
        kept.projects.insert("/home/u/b".into(), Kept { allow: vec!["shell(echo \\ \t tab)".into()] });
        let text = render(&kept);
        let back: KeptFile = toml::from_str(&text).unwrap();
        assert_eq!(back.projects, kept.projects);
    }
}
