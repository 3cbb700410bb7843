//! Where keel keeps things: `$KEEL_HOME` (default: the XDG data folder) and the XDG
//! config folder.

use std::path::PathBuf;

fn home() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

fn xdg(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(path) if path.is_absolute() => path,
        _ => home().join(fallback),
    }
}

/// keel's data folder: `$KEEL_HOME`, else `$XDG_DATA_HOME/keel`, else `~/.local/share/keel`.
pub fn keel_home() -> PathBuf {
    match std::env::var_os("KEEL_HOME") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => xdg("XDG_DATA_HOME", ".local/share").join("keel"),
    }
}

/// Session logs.
pub fn sessions_dir() -> PathBuf {
    keel_home().join("sessions")
}

/// Line-editor history.
pub fn history_file() -> PathBuf {
    keel_home().join("history.txt")
}

/// keel's config folder: `$KEEL_CONFIG_DIR`, else `$XDG_CONFIG_HOME/keel`, else `~/.config/keel`.
pub fn config_dir() -> PathBuf {
    match std::env::var_os("KEEL_CONFIG_DIR") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => xdg("XDG_CONFIG_HOME", ".config").join("keel"),
    }
}

/// The config file.
pub fn config_file() -> PathBuf {
    config_dir().join("config.toml")
}
