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
        .map_err(|e| ConfigError(e.to_string()))?
    {
        Choice::File(path) => path,
        Choice::Download(known, path) => {
            if let Err(e) = fetch(known, &path, progress).await {
                return Err(ConfigError(format!(
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
    let loaded = tokio::task::spawn_blocking(move || keel_local::engine::LocalModel::load(config))
        .await
        .map_err(|e| ConfigError(format!("loading the local model failed: {e}")))?
        .map_err(|e| ConfigError(e.to_string()))?;
    Ok(Arc::new(loaded))
}

#[cfg(not(feature = "local"))]
async fn engine(_settings: &LocalSettings, path: &Path) -> Result<Arc<dyn ModelClient>, ConfigError> {
    keel_local::gguf::read_meta(path).map_err(|e| ConfigError(e.to_string()))?;
    Err(ConfigError(
        "this keel was built without the embedded model. Install it with:\n  cargo install --locked --path crates/keel-cli --features local\nor run a model server and use --provider llamacpp".into(),
    ))
}

/// `keel models [list|pull]`.
pub async fn models_command(action: Option<ModelsAction>) -> anyhow::Result<u8> {
    let cache = models::cache_dir();
    match action.unwrap_or(ModelsAction::List) {
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
