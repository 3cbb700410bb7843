//! Evaluated prompt prefixes on disk, so a new process starts from the system prompt and
//! tools another process already evaluated.

use std::path::{Path, PathBuf};

use super::llama::{Context, Token};

/// Evaluated prompt prefixes on disk: llama.cpp state files with their tokens beside
/// them, one folder per model file and context size, at most eight kept.
pub(crate) struct PrefixCache {
    dir: PathBuf,
}

impl PrefixCache {
    const KEEP: usize = 8;
    const MIN_SHARED: usize = 64;

    pub(crate) fn new(root: &Path, model: &Path, n_ctx: u32) -> Option<PrefixCache> {
        let size = std::fs::metadata(model).ok()?.len();
        let stem = model.file_stem()?.to_string_lossy().into_owned();
        let dir = root.join(format!("{stem}-{size}-ctx{n_ctx}"));
        std::fs::create_dir_all(&dir).ok()?;
        Some(PrefixCache { dir })
    }

    fn read_tokens(path: &Path) -> Option<Vec<Token>> {
        let bytes = std::fs::read(path).ok()?;
        Some(bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// The saved state sharing the longest prefix with `tokens`, if long enough.
    pub(crate) fn best(&self, tokens: &[Token]) -> Option<PathBuf> {
        let mut best: Option<(usize, PathBuf)> = None;
        for entry in std::fs::read_dir(&self.dir).ok()?.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "tokens") {
                continue;
            }
            let Some(saved) = Self::read_tokens(&path) else { continue };
            let shared = saved.iter().zip(tokens).take_while(|(a, b)| a == b).count();
            let state = path.with_extension("state");
            if shared >= Self::MIN_SHARED && state.is_file() && best.as_ref().is_none_or(|(n, _)| shared > *n)
            {
                best = Some((shared, state));
            }
        }
        best.map(|(_, path)| path)
    }

    /// Saves the context's state for `tokens` (written to a temporary name, then
    /// renamed, so a crash never leaves a half file under a real name).
    pub(crate) fn save(&self, context: &mut Context<'_>, tokens: &[Token]) {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        tokens.hash(&mut hasher);
        let name = format!("{:016x}", hasher.finish());
        let state = self.dir.join(format!("{name}.state"));
        let temporary = self.dir.join(format!("{name}.state.tmp"));
        if !context.save_state(&temporary, tokens) || std::fs::rename(&temporary, &state).is_err() {
            let _ = std::fs::remove_file(&temporary);
            return;
        }
        let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        let _ = std::fs::write(self.dir.join(format!("{name}.tokens")), bytes);
        self.evict();
    }

    fn evict(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut states: Vec<(std::time::SystemTime, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "state"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        states.sort();
        while states.len() > Self::KEEP {
            let (_, path) = states.remove(0);
            let _ = std::fs::remove_file(path.with_extension("tokens"));
            let _ = std::fs::remove_file(path);
        }
    }
}
