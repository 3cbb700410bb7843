//! `--local` and `keel models`: finding, fetching and loading the embedded model.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use keel_llm::ModelClient;
use keel_local::models::{self, Choice, KnownModel};

use crate::cli::ModelsAction;
use crate::config::{ConfigError, LocalSettings};
use crate::exit;
use crate::render::format::duration;

fn mb(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1_048_576.0)
}

/// Downloads `known` to `dest`, drawing progress on stderr when `show` (JSON mode keeps
/// stderr quiet).
pub async fn fetch(known: &KnownModel, dest: &Path, show: bool) -> Result<(), keel_local::LocalError> {
    if !show {
        return keel_local::download::download(&known.url(), dest, Some(known.sha256), &mut |_, _| {}).await;
    }
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last_draw = Instant::now() - std::time::Duration::from_secs(1);
    let mut last_decile = 0u64;
    errln!(
        "keel: fetching {} ({}) into {}",
        known.file,
        mb(known.size),
        dest.parent().map(|p| p.display().to_string()).unwrap_or_default()
    );
    let mut progress = |have: u64, total: Option<u64>| {
        let total = total.unwrap_or(known.size).max(1);
        let percent = have * 100 / total;
        let rate = have as f64 / started.elapsed().as_secs_f64().max(0.001) / 1_048_576.0;
        if tty {
            if last_draw.elapsed().as_millis() >= 100 || have >= total {
                last_draw = Instant::now();
                err!("\r\x1b[2K  {percent:>3}%  {} / {}  {rate:.1} MB/s", mb(have), mb(total));
                let _ = std::io::stderr().flush();
            }
        } else if percent / 10 > last_decile || have >= total {
            last_decile = percent / 10;
            errln!("  {percent}%  {} / {}", mb(have), mb(total));
        }
    };
    let result = keel_local::download::download(&known.url(), dest, Some(known.sha256), &mut progress).await;
    if tty {
        errln!();
    }
    if result.is_ok() {
        errln!("keel: {} ready ({}, checksum verified)", known.file, duration(started.elapsed()));
    }
    result
}

/// Resolves, fetches if needed, and loads the embedded model.
pub async fn load(settings: &LocalSettings, progress: bool) -> Result<Arc<dyn ModelClient>, ConfigError> {
    let cache = models::cache_dir();
    let path = match models::choose(settings.model.as_deref(), &cache)
        .map_err(|e| ConfigError::new(e.to_string()))?
    {
        Choice::File(path) => path,
        Choice::Download(known, path) => {
            if let Err(e) = fetch(known, &path, progress).await {
                return Err(ConfigError::new(format!(
                    "the local model {} is not in {} and fetching it failed: {e}\nFetch it when online with `keel models pull {}`, or pass --local-model PATH (or set KEEL_LOCAL_MODEL) to a GGUF file you have.",
                    known.file,
                    cache.display(),
                    known.name
                )));
            }
            path
        }
    };
    engine(settings, &path).await
}

#[cfg(feature = "local")]
async fn engine(settings: &LocalSettings, path: &Path) -> Result<Arc<dyn ModelClient>, ConfigError> {
    let mut config = keel_local::engine::LocalConfig::new(path);
    if let Some(n_ctx) = settings.n_ctx {
        config.n_ctx = n_ctx;
    }
    config.threads = settings.threads;
    if let Some(temperature) = settings.temperature {
        config.temperature = temperature;
    }
    if let Some(seed) = settings.seed {
        config.seed = seed as u32;
    }
    config.grammar = settings.grammar;
    if let Some(max_tokens) = settings.max_tokens {
        config.max_tokens = max_tokens;
    }
    config.kernels = settings.kernels;
    config.variant = settings.variant.clone();
    let loaded =
        keel_local::engine::LocalModel::load(config).await.map_err(|e| ConfigError::new(e.to_string()))?;
    if let Some(why) = &loaded.kernels().safe_because {
        errln!(
            "keel: the local model runs the safe kernels (slower): {why}; KEEL_LOCAL_KERNELS=fast tries the fast ones"
        );
    }
    Ok(Arc::new(loaded))
}

#[cfg(not(feature = "local"))]
async fn engine(_settings: &LocalSettings, path: &Path) -> Result<Arc<dyn ModelClient>, ConfigError> {
    keel_local::gguf::read_meta(path).map_err(|e| ConfigError::new(e.to_string()))?;
    Err(ConfigError::new(
        "this keel was built without the embedded model. Install it with:\n  cargo install --locked --path crates/keel-cli --features local\nor run a model server and use --provider llamacpp",
    ))
}

/// `keel models [list|pull|check]`.
pub async fn models_command(action: Option<ModelsAction>) -> anyhow::Result<u8> {
    let cache = models::cache_dir();
    match action.unwrap_or(ModelsAction::List) {
        ModelsAction::Check { model, variant } => check_command(model, variant).await,
        ModelsAction::List => {
            let cached = models::list_cached(&cache);
            outln!("cache: {}", cache.display());
            if cached.is_empty() {
                outln!("  (empty)");
            }
            for model in &cached {
                let known = model.known.map(|k| format!("  [{k}]")).unwrap_or_default();
                outln!(
                    "  {}  {}{known}",
                    model.path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
                    mb(model.size)
                );
            }
            outln!("known models (keel models pull NAME):");
            for known in models::KNOWN {
                let have = cached.iter().any(|c| c.known == Some(known.name));
                let default =
                    if known.name == models::default_model().name { ", default for --local" } else { "" };
                outln!(
                    "  {:<20} {}{default}{}",
                    known.name,
                    mb(known.size),
                    if have { ", cached" } else { "" }
                );
            }
            engine_report().await;
            Ok(exit::OK)
        }
        ModelsAction::Pull { name } => {
            let known = match name.as_deref() {
                None => models::default_model(),
                Some(name) => match models::find(name) {
                    Some(known) => known,
                    None => {
                        let names: Vec<&str> = models::KNOWN.iter().map(|k| k.name).collect();
                        errln!("keel: unknown model `{name}`; known: {}", names.join(", "));
                        return Ok(exit::USAGE);
                    }
                },
            };
            let dest = cache.join(known.file);
            if dest.is_file() {
                outln!("{} is already cached: {}", known.name, dest.display());
                return Ok(exit::OK);
            }
            match fetch(known, &dest, true).await {
                Ok(()) => {
                    outln!("{}", dest.display());
                    Ok(exit::OK)
                }
                Err(e) => {
                    errln!("keel: {e}");
                    Ok(exit::ERROR)
                }
            }
        }
    }
}

/// The kernel setting from the environment (`KEEL_LOCAL_KERNELS`), `auto` when unset.
#[cfg(feature = "local")]
fn kernels_from_env() -> keel_local::engine::kernels::Kernels {
    crate::config::env("KEEL_LOCAL_KERNELS").and_then(|k| k.parse().ok()).unwrap_or_default()
}

/// The engine part of `keel models`: the CPU, the kernels `--local` loads, and what keel
/// remembers about them on this machine.
#[cfg(feature = "local")]
async fn engine_report() {
    use keel_local::engine::kernels::KernelMemory;
    let kernels = kernels_from_env();
    match keel_local::engine::probe(None, kernels).await {
        Ok(probe) => {
            outln!("engine: {} ({})", probe.cpu, probe.cpu_flags.join(" "));
            outln!("  kernels ({kernels}): {}", probe.chosen.describe());
            let runs: Vec<String> = probe
                .variants
                .iter()
                .filter(|v| v.score > 0)
                .map(|v| if v.gated { format!("{} (gated)", v.name) } else { v.name.clone() })
                .collect();
            outln!("  variants this CPU runs, best first: {}", runs.join(", "));
            for off in &probe.chosen.kept_off {
                outln!("  kept off: {off}");
            }
        }
        Err(e) => outln!("engine: cannot start it: {e}"),
    }
    let memory = KernelMemory::at(KernelMemory::default_path());
    for verdict in memory.all() {
        let model =
            std::path::Path::new(&verdict.model).file_name().map(|n| n.to_string_lossy().into_owned());
        let model = model.unwrap_or_else(|| verdict.key.clone());
        if let Some(crash) = &verdict.crashed {
            outln!("  {model}: safe kernels, the fast ones crashed here ({crash})");
        }
        for passed in &verdict.passed {
            outln!("  {model}: {passed} passed its self-test here");
        }
        for failed in &verdict.failed {
            outln!("  {model}: self-test failed: {failed}");
        }
    }
}

#[cfg(not(feature = "local"))]
async fn engine_report() {
    outln!("engine: not built in (cargo install --locked --path crates/keel-cli --features local)");
}

/// `keel models check`: self-tests the gated kernel variants (or `variant`) this CPU
/// runs, with `model`.
#[cfg(feature = "local")]
async fn check_command(model: Option<String>, variant: Option<String>) -> anyhow::Result<u8> {
    let cache = models::cache_dir();
    let path = match models::choose(model.as_deref(), &cache) {
        Ok(Choice::File(path)) => path,
        Ok(Choice::Download(known, _)) => {
            errln!(
                "keel: {} is not in the cache; fetch it with `keel models pull {}`",
                known.file,
                known.name
            );
            return Ok(exit::USAGE);
        }
        Err(e) => {
            errln!("keel: {e}");
            return Ok(exit::USAGE);
        }
    };
    let variants = match variant {
        Some(variant) => vec![variant],
        None => match keel_local::engine::probe(None, kernels_from_env()).await {
            Ok(probe) => {
                probe.variants.into_iter().filter(|v| v.gated && v.score > 0).map(|v| v.name).collect()
            }
            Err(e) => {
                errln!("keel: {e}");
                return Ok(exit::ERROR);
            }
        },
    };
    if variants.is_empty() {
        outln!("no kernels are kept off on this CPU: nothing to check");
        return Ok(exit::OK);
    }
    let config = keel_local::engine::LocalConfig::new(&path);
    let mut all_passed = true;
    for variant in variants {
        errln!("keel: checking {variant} with {} …", path.display());
        match keel_local::engine::check_variant(&config, &variant).await {
            Ok(outcome) => {
                all_passed &= outcome.passed;
                let verdict = if outcome.passed { "passed: --local uses it" } else { "failed: it stays off" };
                outln!("{variant}: {verdict} ({})", outcome.detail);
            }
            Err(e) => {
                errln!("keel: {e}");
                return Ok(exit::ERROR);
            }
        }
    }
    Ok(if all_passed { exit::OK } else { exit::ERROR })
}

#[cfg(not(feature = "local"))]
async fn check_command(_model: Option<String>, _variant: Option<String>) -> anyhow::Result<u8> {
    errln!(
        "keel: this keel was built without the embedded model (cargo install --locked --path crates/keel-cli --features local)"
    );
    Ok(exit::USAGE)
}
