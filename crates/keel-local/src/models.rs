//! Known models, the local cache, and choosing the weights for `--local`.

use std::path::{Path, PathBuf};

use crate::LocalError;

/// A model keel knows how to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// Short name (`keel models pull NAME`).
    pub name: &'static str,
    /// File name in the cache.
    pub file: &'static str,
    /// The Hugging Face repository holding it.
    pub repo: &'static str,
    /// SHA-256 of the file.
    pub sha256: &'static str,
    /// Size in bytes.
    pub size: u64,
}

/// The models keel can fetch, smallest first. [`default_model`] picks one by the machine.
pub const KNOWN: &[KnownModel] = &[
    KnownModel {
        name: "qwen2.5-coder-0.5b",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        repo: "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size: 491_400_064,
    },
    KnownModel {
        name: "qwen2.5-coder-1.5b",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        repo: "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size: 1_117_320_768,
    },
    KnownModel {
        name: "qwen2.5-coder-3b",
        file: "qwen2.5-coder-3b-instruct-q4_k_m.gguf",
        repo: "Qwen/Qwen2.5-Coder-3B-Instruct-GGUF",
        sha256: "724fb256bec1ff062b2f65e4569e871ad2e95ab2a3989723d1769c54294730b7",
        size: 2_104_932_800,
    },
    KnownModel {
        name: "qwen2.5-coder-7b",
        file: "qwen2.5-coder-7b-instruct-q4_k_m.gguf",
        repo: "Qwen/Qwen2.5-Coder-7B-Instruct-GGUF",
        sha256: "509287f78cb4d4cf6b3843734733b914b2c158e43e22a7f4bf5e963800894d3c",
        size: 4_683_073_536,
    },
];

impl KnownModel {
    /// The download URL: `$HF_ENDPOINT` (a mirror; default `https://huggingface.co`),
    /// then `/{repo}/resolve/main/{file}`.
    pub fn url(&self) -> String {
        let endpoint = std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty());
        let endpoint = endpoint.as_deref().unwrap_or("https://huggingface.co").trim_end_matches('/');
        format!("{endpoint}/{}/resolve/main/{}", self.repo, self.file)
    }
}

/// The default model for `--local` on this machine (see [`default_for`]).
pub fn default_model() -> &'static KnownModel {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    default_for(total_memory_bytes().unwrap_or(0), cores)
}

/// The largest model a machine runs at a usable speed: 7B with 16 GiB of memory and 8
/// cores, 3B with 8 GiB and 4 cores, else 1.5B (about 25 tokens/s on two cores).
pub fn default_for(memory_bytes: u64, cores: usize) -> &'static KnownModel {
    const GIB: u64 = 1 << 30;
    let name = if memory_bytes >= 16 * GIB && cores >= 8 {
        "qwen2.5-coder-7b"
    } else if memory_bytes >= 8 * GIB && cores >= 4 {
        "qwen2.5-coder-3b"
    } else {
        "qwen2.5-coder-1.5b"
    };
    find(name).unwrap_or(&KNOWN[1])
}

/// Total memory, from `/proc/meminfo` (Linux).
fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Finds a known model by name or file name.
pub fn find(name: &str) -> Option<&'static KnownModel> {
    KNOWN.iter().find(|m| m.name == name || m.file == name)
}

/// The model cache: `$KEEL_MODELS_DIR`, else `$XDG_CACHE_HOME/keel/models`, else
/// `~/.cache/keel/models`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KEEL_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    keel_cache_dir().join("models")
}

/// keel's cache folder: `$XDG_CACHE_HOME/keel`, else `~/.cache/keel`.
pub fn keel_cache_dir() -> PathBuf {
    let base = match std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".cache"),
    };
    base.join("keel")
}

/// A GGUF file in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The known model it is, if any.
    pub known: Option<&'static str>,
}

/// Every `.gguf` file in `dir`, by name.
pub fn list_cached(dir: &Path) -> Vec<CachedModel> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<CachedModel> = entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "gguf"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            CachedModel {
                size: e.metadata().map(|m| m.len()).unwrap_or(0),
                known: KNOWN.iter().find(|k| k.file == name).map(|k| k.name),
                path: e.path(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// What `--local` should load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// A file that is there.
    File(PathBuf),
    /// A known model that must be downloaded first, to this path.
    Download(&'static KnownModel, PathBuf),
}

/// Picks the weights: an explicit path (`--local-model` / `KEEL_LOCAL_MODEL`) must
/// exist; a known model name resolves in the cache; nothing means the default model.
pub fn choose(explicit: Option<&str>, cache: &Path) -> Result<Choice, LocalError> {
    match explicit.filter(|e| !e.trim().is_empty()) {
        Some(spec) => {
            if let Some(known) = find(spec) {
                let path = cache.join(known.file);
                return Ok(if path.is_file() { Choice::File(path) } else { Choice::Download(known, path) });
            }
            let path = PathBuf::from(spec);
            if path.is_file() {
                Ok(Choice::File(path))
            } else {
                let names: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
                Err(LocalError::NotFound(format!(
                    "no model file at {spec} (and it is not a known model name: {})",
                    names.join(", ")
                )))
            }
        }
        None => {
            let known = default_model();
            let path = cache.join(known.file);
            Ok(if path.is_file() { Choice::File(path) } else { Choice::Download(known, path) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_follows_the_machine() {
        const GIB: u64 = 1 << 30;
        assert_eq!(default_for(24 * GIB, 2).name, "qwen2.5-coder-1.5b");
        assert_eq!(default_for(4 * GIB, 16).name, "qwen2.5-coder-1.5b");
        assert_eq!(default_for(8 * GIB, 4).name, "qwen2.5-coder-3b");
        assert_eq!(default_for(15 * GIB, 12).name, "qwen2.5-coder-3b");
        assert_eq!(default_for(32 * GIB, 8).name, "qwen2.5-coder-7b");
        for known in KNOWN {
            assert_eq!(known.sha256.len(), 64, "{}", known.name);
            assert!(known.file.ends_with(".gguf") && known.repo.starts_with("Qwen/"), "{}", known.name);
        }
    }

    #[test]
    fn choosing_the_weights() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            choose(None, dir.path()).unwrap(),
            Choice::Download(default_model(), dir.path().join(default_model().file))
        );
        std::fs::write(dir.path().join(default_model().file), b"GGUF").unwrap();
        assert_eq!(choose(None, dir.path()).unwrap(), Choice::File(dir.path().join(default_model().file)));
        let small = find("qwen2.5-coder-0.5b").unwrap();
        assert_eq!(
            choose(Some("qwen2.5-coder-0.5b"), dir.path()).unwrap(),
            Choice::Download(small, dir.path().join(small.file))
        );
        let own = dir.path().join("mine.gguf");
        std::fs::write(&own, b"GGUF").unwrap();
        assert_eq!(choose(Some(own.to_str().unwrap()), dir.path()).unwrap(), Choice::File(own));
        let err = choose(Some("/nope.gguf"), dir.path()).unwrap_err().to_string();
        assert!(err.contains("no model file at /nope.gguf"), "{err}");
        let cached = list_cached(dir.path());
        assert_eq!(cached.len(), 2);
        assert_eq!(cached.iter().filter(|c| c.known == Some("qwen2.5-coder-1.5b")).count(), 1);
    }
}
