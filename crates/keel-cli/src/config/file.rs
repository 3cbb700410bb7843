//! Reading the configuration's files: the config file (every key checked against the
//! settings' types first, see [`crate::config::keys`]) and `--mcp-config` files.

use std::collections::BTreeMap;
use std::path::Path;

use keel_tools::PermissionMode;
use serde::Deserialize;
use toml::Spanned;
use toml::de::DeTable;

use crate::cli::Cli;
use crate::config::layer::{ConfigError, FileConfig, FileTables, Layer, McpFile, layers};

impl FileConfig {
    /// Reads the config file's `text` (`path` names it in messages). An unknown key is
    /// refused at its line with the nearest valid key ([`crate::config::keys`]); a value of the
    /// wrong type at its line and column.
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        let at = |e| located(e, text, path);
        let doc = DeTable::parse(text).map_err(at)?;
        crate::config::keys::check_file(doc.get_ref(), text, path)?;
        let span = doc.span();
        let own = crate::config::keys::fields::<FileTables>();
        let (tables, settings): (DeTable<'_>, DeTable<'_>) =
            doc.into_inner().into_iter().partition(|(key, _)| own.contains(&key.get_ref().as_ref()));
        let FileTables { profile, profiles, pricing, mcp_servers, hooks } =
            FileTables::deserialize(toml::Deserializer::from(Spanned::new(span.clone(), tables)))
                .map_err(at)?;
        let defaults =
            Layer::deserialize(toml::Deserializer::from(Spanned::new(span, settings))).map_err(at)?;
        Ok(FileConfig { profile, defaults, profiles, pricing, mcp_servers, hooks })
    }
}

impl McpFile {
    /// Reads an `--mcp-config` file written in TOML (`path` names it in messages); an
    /// unknown key is refused at its line with the nearest valid key, as in the config
    /// file.
    pub fn parse_toml(text: &str, path: &Path) -> Result<McpFile, ConfigError> {
        let at = |e| located(e, text, path);
        let doc = DeTable::parse(text).map_err(at)?;
        crate::config::keys::check_mcp_file(doc.get_ref(), text, path)?;
        McpFile::deserialize(toml::Deserializer::from(doc)).map_err(at)
    }
}

/// A TOML error in `text` (of `path`), shown with its line, column and the line itself.
fn located(mut error: toml::de::Error, text: &str, path: &Path) -> ConfigError {
    error.set_input(Some(text));
    ConfigError::new(format!("{}: {error}", path.display()))
}

/// Reads the config file, if there is one.
pub fn load_file() -> Result<FileConfig, ConfigError> {
    let path = crate::paths::config_file();
    match std::fs::read_to_string(&path) {
        Ok(text) => FileConfig::parse(&text, &path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileConfig::default()),
        Err(e) => Err(ConfigError::new(format!("cannot read {}: {e}", path.display()))),
    }
}

/// What `keel permissions` shows, without a model: the file, the profile in use, the
/// mode if one is set, and the extra `deny` regexes.
pub type PermissionSources = (FileConfig, Option<String>, Option<String>, Vec<String>);

/// Reads what `keel permissions` shows (see [`PermissionSources`]).
pub fn permission_sources(cli: &Cli) -> Result<PermissionSources, ConfigError> {
    let file = load_file()?;
    let (layer, profile) = layers(cli, &file)?;
    if let Some(text) = &layer.permission
        && PermissionMode::parse(text).is_none()
    {
        return Err(ConfigError::new(format!("--permission must be auto, ask or read-only (got `{text}`)")));
    }
    Ok((file, profile, layer.permission, layer.deny.unwrap_or_default()))
}

/// The MCP servers of this run: the config file's, then each `--mcp-config` file's (a
/// name given again replaces the earlier server).
pub fn mcp_servers(cli: &Cli) -> Result<BTreeMap<String, keel_mcp::ServerConfig>, ConfigError> {
    with_mcp_files(load_file()?.mcp_servers, cli)
}

pub(crate) fn with_mcp_files(
    mut servers: BTreeMap<String, keel_mcp::ServerConfig>,
    cli: &Cli,
) -> Result<BTreeMap<String, keel_mcp::ServerConfig>, ConfigError> {
    for path in &cli.mcp_config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(format!("--mcp-config {}: {e}", path.display())))?;
        let json = path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        let file: McpFile = if json {
            serde_json::from_str(&text).map_err(|e| ConfigError::new(format!("{}: {e}", path.display())))?
        } else {
            McpFile::parse_toml(&text, path)?
        };
        servers.extend(file.mcp_servers);
    }
    for (name, server) in &servers {
        server.validate(name).map_err(|e| ConfigError::new(e.to_string()))?;
    }
    Ok(servers)
}
