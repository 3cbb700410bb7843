//! The keys the config file may hold, taken from the types that read it, and the check
//! that answers an unknown key at its own line with the nearest valid one.
//!
//! serde's derive hands every struct's field names to `Deserializer::deserialize_struct`;
//! [`fields`] runs a deserializer that records them and stops, so the valid keys are
//! always the fields that exist, never a list kept by hand.

use std::cell::Cell;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use toml::de::{DeTable, DeValue};

use super::layer::{
    ConfigError, FileTables, Layer, McpFile, PermissionsTable, Price, SubagentsTable, WebFetchTable,
};

/// The field names serde's derive gives `T` (aliases and renames included, skipped fields
/// not); empty for a type that is not read as a struct.
pub fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let found = Cell::new(&[][..]);
    // The recorder always stops with an error: the fields are what it leaves behind.
    let _ = T::deserialize(Recorder(&found));
    found.get()
}

/// A deserializer that records the fields of the struct asked for and reads nothing.
struct Recorder<'a>(&'a Cell<&'static [&'static str]>);

/// How [`Recorder`] stops.
#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Recorder<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stop> {
        self.0.set(fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The keys of the config file's top level: its tables and `profile`, then every
/// setting of a [`Layer`].
pub fn top_level() -> Vec<&'static str> {
    let mut keys = fields::<FileTables>().to_vec();
    keys.extend(fields::<Layer>());
    keys
}

/// A kind of table in the config file (or an `--mcp-config` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// The config file's top level.
    File,
    /// A `[profiles.NAME]` table.
    Profile,
    /// A `[pricing.MODEL]` table.
    Price,
    /// A `[permissions]` table.
    Permissions,
    /// A `[web_fetch]` table.
    WebFetch,
    /// A `[subagents]` table.
    Subagents,
    /// A `[mcp_servers.NAME]` table.
    Server,
    /// The `[hooks]` table: its keys are the events.
    Hooks,
    /// An `--mcp-config` file's top level.
    McpFile,
}

/// What a key of a table holds, when its keys are checked too.
enum Inner {
    /// One table of this kind.
    One(Table),
    /// Tables of this kind by name (`[profiles.NAME]`).
    Named(Table),
}

impl Table {
    fn keys(self) -> Vec<&'static str> {
        match self {
            Table::File => top_level(),
            Table::Profile => fields::<Layer>().to_vec(),
            Table::Price => fields::<Price>().to_vec(),
            Table::Permissions => fields::<PermissionsTable>().to_vec(),
            Table::WebFetch => fields::<WebFetchTable>().to_vec(),
            Table::Subagents => fields::<SubagentsTable>().to_vec(),
            Table::Server => fields::<keel_mcp::ServerConfig>().to_vec(),
            Table::Hooks => crate::user_hooks::Event::names(),
            Table::McpFile => fields::<McpFile>().to_vec(),
        }
    }

    fn inner(self, key: &str) -> Option<Inner> {
        match (self, key) {
            (Table::File, "profiles") => Some(Inner::Named(Table::Profile)),
            (Table::File, "pricing") => Some(Inner::Named(Table::Price)),
            (Table::File, "mcp_servers") | (Table::McpFile, "mcp_servers" | "mcpServers") => {
                Some(Inner::Named(Table::Server))
            }
            (Table::File | Table::Profile, "permissions") => Some(Inner::One(Table::Permissions)),
            (Table::File | Table::Profile, "web_fetch") => Some(Inner::One(Table::WebFetch)),
            (Table::File | Table::Profile, "subagents") => Some(Inner::One(Table::Subagents)),
            (Table::File, "hooks") => Some(Inner::One(Table::Hooks)),
            _ => None,
        }
    }
}

/// Every unknown key of the config file `doc` (the text of `path`), each at its line
/// with the nearest valid key; `Ok` when there is none.
pub fn check_file(doc: &DeTable<'_>, text: &str, path: &Path) -> Result<(), ConfigError> {
    check(doc, Table::File, text, path)
}

/// Every unknown key of an `--mcp-config` file, as [`check_file`].
pub fn check_mcp_file(doc: &DeTable<'_>, text: &str, path: &Path) -> Result<(), ConfigError> {
    check(doc, Table::McpFile, text, path)
}

fn check(doc: &DeTable<'_>, kind: Table, text: &str, path: &Path) -> Result<(), ConfigError> {
    let mut found = Vec::new();
    walk(doc, kind, &mut Vec::new(), &mut found);
    if found.is_empty() {
        return Ok(());
    }
    // Tables are walked in key order: the file's own order reads better.
    found.sort_by_key(|(offset, _)| *offset);
    let lines: Vec<String> = found
        .iter()
        .map(|(offset, message)| format!("{}:{}: {message}", path.display(), line_of(text, *offset)))
        .collect();
    Err(ConfigError::new(lines.join("\n")))
}

/// Adds to `found` each unknown key of `table` (a table of `kind` at `at`) and of the
/// tables inside it: where the key starts and what to say of it.
fn walk(table: &DeTable<'_>, kind: Table, at: &mut Vec<String>, found: &mut Vec<(usize, String)>) {
    let valid = kind.keys();
    for (key, value) in table {
        let name = key.get_ref().as_ref();
        if !valid.contains(&name) {
            found.push((key.span().start, unknown(name, &header(at), &valid)));
            continue;
        }
        let DeValue::Table(inner) = value.get_ref() else { continue };
        at.push(name.to_owned());
        match kind.inner(name) {
            Some(Inner::One(kind)) => walk(inner, kind, at, found),
            Some(Inner::Named(kind)) => {
                for (named, value) in inner {
                    if let DeValue::Table(table) = value.get_ref() {
                        at.push(named.get_ref().as_ref().to_owned());
                        walk(table, kind, at, found);
                        at.pop();
                    }
                }
            }
            None => {}
        }
        at.pop();
    }
}

/// `profiles.work`, `pricing."gpt-4.1"`: a table's name as its header writes it.
fn header(at: &[String]) -> String {
    let bare = |part: &str| {
        !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let parts: Vec<String> =
        at.iter().map(|part| if bare(part) { part.clone() } else { format!("{part:?}") }).collect();
    parts.join(".")
}

/// The message for the unknown `key` in the table named `table` (empty: the top level).
fn unknown(key: &str, table: &str, valid: &[&str]) -> String {
    let place = if table.is_empty() { String::new() } else { format!(" in [{table}]") };
    match crate::near::nearest(key, valid) {
        Some(near) => format!("unknown key `{key}`{place} (did you mean `{near}`?)"),
        None => format!("unknown key `{key}`{place}; valid keys: {}", valid.join(", ")),
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn field_names_come_from_the_types() {
        assert_eq!(fields::<PermissionsTable>(), ["allow", "ask", "deny"]);
        assert_eq!(fields::<Price>(), ["input", "cached", "output"]);
        assert_eq!(fields::<FileTables>(), ["profile", "profiles", "pricing", "mcp_servers", "hooks"]);
        let layer = fields::<Layer>();
        assert!(layer.contains(&"model") && layer.contains(&"compact_keep"), "{layer:?}");
        assert!(fields::<keel_mcp::ServerConfig>().contains(&"type"), "the renamed field");
        assert!(fields::<String>().is_empty());
    }

    /// Whether README.md shows `key`: in backticks, or set or opened as a table in a TOML
    /// example (`key = …`, `[key]`, `[key.NAME]`).
    fn documented(readme: &str, key: &str) -> bool {
        let set = |line: &str| line.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='));
        let opened = |line: &str| {
            line.strip_prefix('[')
                .map(|header| header.trim_start_matches('['))
                .and_then(|header| header.strip_prefix(key))
                .is_some_and(|rest| rest.starts_with([']', '.']))
        };
        readme.contains(&format!("`{key}`"))
            || readme.lines().map(str::trim_start).any(|line| set(line) || opened(line))
    }

    /// Issue 31: keys were added to `Layer` (`seed`, `environment`, `always_call`, …) that
    /// the README never named.
    #[test]
    fn every_key_of_the_config_file_is_in_the_readme() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
        let readme = std::fs::read_to_string(&path).unwrap();
        let mut keys = top_level();
        keys.extend(fields::<Price>());
        keys.extend(fields::<PermissionsTable>());
        keys.extend(fields::<WebFetchTable>());
        keys.extend(fields::<SubagentsTable>());
        let missing: Vec<&str> = keys.into_iter().filter(|key| !documented(&readme, key)).collect();
        assert!(
            missing.is_empty(),
            "config keys README.md does not name (add them to its Configuration section): {missing:?}"
        );
        assert!(!documented("`models` and model_x = 1", "model"));
        assert!(documented("[pricing.\"m\"]", "pricing") && documented("  cached = 0.1", "cached"));
    }

    #[test]
    fn only_close_keys_are_suggested() {
        let keys = top_level();
        assert_eq!(crate::near::nearest("modle", &keys), Some("model"));
        assert_eq!(crate::near::nearest("temprature", &keys), Some("temperature"));
        assert_eq!(crate::near::nearest("max_setps", &keys), Some("max_steps"));
        assert_eq!(crate::near::nearest("profile", &keys), Some("profile"));
        assert_eq!(crate::near::nearest("colour", &keys), None);
        assert_eq!(crate::near::nearest("xyz", &["api"]), None, "three letters need more than one edit");
    }

    fn problems(text: &str) -> String {
        let doc = DeTable::parse(text).unwrap();
        check_file(doc.get_ref(), text, Path::new("config.toml")).unwrap_err().message
    }

    #[test]
    fn unknown_keys_are_answered_at_their_line() {
        assert_eq!(
            problems("provider = \"llamacpp\"\n\nmodle = \"x\"\n"),
            "config.toml:3: unknown key `modle` (did you mean `model`?)"
        );
        assert_eq!(
            problems("[profiles.work]\nmodel = \"m\"\ntemprature = 0.2\n"),
            "config.toml:3: unknown key `temprature` in [profiles.work] (did you mean `temperature`?)"
        );
        assert_eq!(
            problems("[pricing.\"gpt-4.1\"]\ninput = 1\noutput = 2\ncahced = 0.5\n"),
            "config.toml:4: unknown key `cahced` in [pricing.\"gpt-4.1\"] (did you mean `cached`?)"
        );
        assert_eq!(
            problems("[permissions]\nallow = []\nnever = [\"shell\"]\n"),
            "config.toml:3: unknown key `never` in [permissions]; valid keys: allow, ask, deny"
        );
        assert_eq!(
            problems("[profiles.a.permissions]\nalow = []\n"),
            "config.toml:2: unknown key `alow` in [profiles.a.permissions] (did you mean `allow`?)"
        );
        assert_eq!(
            problems("[mcp_servers.github]\ncommand = \"npx\"\nargz = []\n"),
            "config.toml:3: unknown key `argz` in [mcp_servers.github] (did you mean `args`?)"
        );
        assert_eq!(
            problems("[[hooks.PreToolUs]]\nhooks = []\n"),
            "config.toml:1: unknown key `PreToolUs` in [hooks] (did you mean `PreToolUse`?)"
        );
        assert_eq!(
            problems("modle = 1\n[profiles.a]\nmodle = 2\n"),
            "config.toml:1: unknown key `modle` (did you mean `model`?)\n\
             config.toml:3: unknown key `modle` in [profiles.a] (did you mean `model`?)"
        );
    }

    #[test]
    fn the_web_fetch_table_is_checked_too() {
        assert_eq!(fields::<WebFetchTable>(), ["allow_private", "private_hosts"]);
        assert_eq!(
            problems("[profiles.docs.web_fetch]\nprivate_host = [\"localhost\"]\n"),
            "config.toml:2: unknown key `private_host` in [profiles.docs.web_fetch] (did you mean `private_hosts`?)"
        );
    }

    #[test]
    fn the_subagents_table_is_checked_too() {
        assert_eq!(fields::<SubagentsTable>(), ["max_steps", "tokens", "session_tokens", "timeout_secs"]);
        assert_eq!(
            problems("[subagents]\nmax_step = 10\n"),
            "config.toml:2: unknown key `max_step` in [subagents] (did you mean `max_steps`?)"
        );
    }

    #[test]
    fn a_dotted_key_and_free_tables_are_read_right() {
        let text = "profiles.work.modle = \"x\"\n[mcp_servers.a]\nenv = { ANY_NAME = \"1\" }\n";
        assert_eq!(
            problems(text),
            "config.toml:1: unknown key `modle` in [profiles.work] (did you mean `model`?)"
        );
        let fine = "model = \"m\"\n[mcp_servers.a]\nurl = \"http://x\"\nhttp_headers = { X = \"1\" }\n";
        let doc = DeTable::parse(fine).unwrap();
        assert!(check_file(doc.get_ref(), fine, Path::new("c")).is_ok());
    }
}
