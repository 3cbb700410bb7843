//! llama.cpp's libraries, carried inside keel and written to its cache on first use, and
//! the choice of CPU kernels among them.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{EngineError, EngineErrorKind};
use super::llama::{self, Api, Backend};
use crate::engine::kernels::Kernels;
use crate::engine::protocol::{KernelReport, VariantScore};

/// One embedded library.
pub(crate) struct EmbeddedFile {
    /// Its file name.
    pub name: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
    /// Their SHA-256.
    pub sha256: &'static str,
    /// A CPU kernel module (else a core library).
    pub variant: bool,
}

include!(concat!(env!("OUT_DIR"), "/engine_libs.rs"));

/// The core libraries, in load order.
pub(crate) fn core() -> Vec<&'static str> {
    FILES.iter().filter(|f| !f.variant).map(|f| f.name).collect()
}

/// Features whose kernels are known to crash on some machines: such a variant runs only
/// where a self-test of it passed (`keel models check`).
const GATED: &[(&str, &str)] =
    &[("AMX_INT8", "llama.cpp's AMX kernels crash on Q4_K weights on some Xeons (llama.cpp issue 20824)")];

/// Where this build's libraries live: `<keel cache>/engine/<build id>`, written there
/// (checked against their hashes) when missing; a private folder under the temporary
/// folder when the cache cannot be written.
pub(crate) fn extract() -> Result<PathBuf, EngineError> {
    let root = crate::models::keel_cache_dir().join("engine");
    let dir = root.join(BUILD_ID);
    if complete(&dir) {
        return Ok(dir);
    }
    match write_all(&root).and_then(|fresh| settle(fresh, &dir)) {
        Ok(()) => {
            prune(&root);
            Ok(dir)
        }
        Err(cache_error) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let private =
                std::env::temp_dir().join(format!("keel-engine-{BUILD_ID}-{}-{nanos}", std::process::id()));
            write_all_in(&private).map_err(|e| {
                EngineError::new(
                    EngineErrorKind::Libraries,
                    format!(
                        "cannot write the engine's libraries to {} ({cache_error}) nor to {} ({e})",
                        dir.display(),
                        private.display()
                    ),
                )
            })?;
            Ok(private)
        }
    }
}

/// Whether `dir` holds every library at its size.
fn complete(dir: &Path) -> bool {
    FILES.iter().all(|file| {
        std::fs::symlink_metadata(dir.join(file.name))
            .is_ok_and(|m| m.is_file() && m.len() == file.bytes.len() as u64)
    })
}

/// What went wrong writing `path`: the path and the system's words.
fn at(path: &Path, error: std::io::Error) -> EngineError {
    EngineError::new(EngineErrorKind::Libraries, format!("{}: {error}", path.display()))
}

/// Writes every library into a new folder under `root`; returns it.
fn write_all(root: &Path) -> Result<PathBuf, EngineError> {
    std::fs::create_dir_all(root).map_err(|e| at(root, e))?;
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let fresh = root.join(format!(".{}-{}-{nanos}", BUILD_ID, std::process::id()));
    write_all_in(&fresh)?;
    Ok(fresh)
}

/// Creates `dir` (it must not exist: never a folder someone else made) and writes every
/// library into it, each checked against its hash.
fn write_all_in(dir: &Path) -> Result<(), EngineError> {
    std::fs::create_dir(dir).map_err(|e| at(dir, e))?;
    for file in FILES {
        let digest: String = Sha256::digest(file.bytes).iter().map(|b| format!("{b:02x}")).collect();
        if digest != file.sha256 {
            return Err(EngineError::new(
                EngineErrorKind::Libraries,
                format!("the embedded {} does not match its hash", file.name),
            ));
        }
        let path = dir.join(file.name);
        let mut out =
            std::fs::OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| at(&path, e))?;
        out.write_all(file.bytes).map_err(|e| at(&path, e))?;
        out.sync_all().map_err(|e| at(&path, e))?;
    }
    Ok(())
}

/// Moves a freshly written folder into place; another process that got there first wins.
fn settle(fresh: PathBuf, dir: &Path) -> Result<(), EngineError> {
    if dir.exists() && !complete(dir) {
        // A folder left half written by an older keel: replace it.
        let _ = std::fs::remove_dir_all(dir);
    }
    match std::fs::rename(&fresh, dir) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&fresh);
            if complete(dir) { Ok(()) } else { Err(at(dir, e)) }
        }
    }
}

/// Removes other builds' libraries unused for a week, and folders left half written an
/// hour ago or more (a keel that still runs an older build writes its own again).
fn prune(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let age = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok());
        let keep_for = if name.starts_with('.') { 3_600 } else { 7 * 86_400 };
        let is_build = name.trim_start_matches('.').len() >= BUILD_ID.len();
        if name != BUILD_ID
            && is_build
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && age.is_some_and(|age| age.as_secs() > keep_for)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn variant_name(file: &str) -> &str {
    file.trim_start_matches("libggml-cpu-").trim_end_matches(".so")
}

/// Every kernel module of this build with llama.cpp's score of it on this CPU, best
/// first; an error when none loads at all (a system library they need is missing).
pub(crate) fn scores(dir: &Path) -> Result<Vec<(&'static str, i32)>, EngineError> {
    let mut scored = Vec::new();
    let mut first_error = None;
    for file in FILES.iter().filter(|f| f.variant) {
        match llama::score(&dir.join(file.name)) {
            Ok(score) => scored.push((file.name, score)),
            Err(e) => {
                first_error.get_or_insert(e);
                scored.push((file.name, 0));
            }
        }
    }
    if let Some(error) = first_error
        && scored.iter().all(|(_, score)| *score == 0)
    {
        return Err(EngineError::new(
            EngineErrorKind::Kernels,
            format!("no CPU kernel module of the engine loads: {error}"),
        ));
    }
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    Ok(scored)
}

/// Why a variant with `features` is gated, if it is.
fn gate(features: &[String]) -> Option<&'static str> {
    GATED.iter().find(|(feature, _)| features.iter().any(|f| f == feature)).map(|(_, why)| *why)
}

/// Registers the kernels `kernels` asks for: the best variant this CPU runs (gated ones
/// only when named in `allowed`; none for [`Kernels::Safe`]), or exactly `force`.
/// Returns what was loaded; weights are repacked unless `kernels` is safe.
pub(crate) fn choose(
    api: &'static Api,
    dir: &Path,
    kernels: Kernels,
    allowed: &[String],
    force: Option<&str>,
) -> Result<KernelReport, EngineError> {
    let mut order: Vec<(&str, i32)> = scores(dir)?.into_iter().filter(|(_, score)| *score > 0).collect();
    if let Some(force) = force {
        order.retain(|(file, _)| variant_name(file) == force);
        if order.is_empty() {
            return Err(EngineError::new(
                EngineErrorKind::Kernels,
                format!("the kernel variant `{force}` is not in this build or does not run on this CPU"),
            ));
        }
    }
    let mut kept_off = Vec::new();
    for (file, _) in order {
        let name = variant_name(file);
        let Some(backend) = Backend::load(api, &dir.join(file))? else { continue };
        let features = backend.features();
        if let Some(why) = gate(&features)
            && force.is_none()
            && (kernels == Kernels::Safe || !allowed.iter().any(|a| a == name))
        {
            backend.unload();
            kept_off.push(format!("{name}: {why}; `keel models check` tests it on this machine"));
            continue;
        }
        let features = features
            .into_iter()
            .filter(|f| !matches!(f.as_str(), "OPENMP" | "LLAMAFILE" | "REPACK"))
            .collect();
        return Ok(KernelReport {
            asked: kernels,
            variant: name.to_owned(),
            features,
            repack: kernels != Kernels::Safe,
            safe_because: None,
            kept_off,
        });
    }
    Err(EngineError::new(EngineErrorKind::Kernels, "none of the engine's CPU kernels runs on this CPU"))
}

/// Every variant with its score and whether it is gated (learned by registering it for
/// a moment), for `keel models`.
pub(crate) fn survey(api: &'static Api, dir: &Path) -> Result<Vec<VariantScore>, EngineError> {
    Ok(scores(dir)?
        .into_iter()
        .map(|(file, score)| {
            let gated = score > 0
                && Backend::load(api, &dir.join(file)).ok().flatten().is_some_and(|backend| {
                    let gated = gate(&backend.features()).is_some();
                    backend.unload();
                    gated
                });
            VariantScore { name: variant_name(file).to_owned(), score, gated }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_carries_core_libraries_and_kernel_variants() {
        assert_eq!(core(), vec!["libggml-base.so.0", "libggml.so.0", "libllama.so.0"]);
        assert!(FILES.iter().filter(|f| f.variant).count() >= 2, "one variant is no choice");
        assert_eq!(BUILD_ID.len(), 16);
    }

    #[test]
    fn amx_is_gated_and_the_rest_is_not() {
        assert!(gate(&["AVX2".into(), "AMX_INT8".into()]).is_some());
        assert_eq!(gate(&["AVX2".into(), "AVX512".into()]), None);
        assert_eq!(variant_name("libggml-cpu-sapphirerapids.so"), "sapphirerapids");
    }
}
