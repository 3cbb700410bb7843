//! What a tool call changed in a file, for people (the terminal, `keel --remote`, exports):
//! logged with the call's result, never sent to a model.

use serde::{Deserialize, Serialize};

/// A file change: its path, line counts and a unified diff (hunks only, no `---`/`+++`
/// header), bounded by the tool that made it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file, as shown to the model (relative to the workspace when inside it).
    pub path: String,
    /// The call created the file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
    /// Lines added.
    pub added: u32,
    /// Lines removed.
    pub removed: u32,
    /// The unified diff's hunks, possibly cut (see `cut_lines`).
    pub diff: String,
    /// Diff lines left out of `diff` to keep the log small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_lines: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
