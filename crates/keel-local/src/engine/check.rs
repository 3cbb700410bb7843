//! The self-test of a CPU variant of the kernels (`keel models check`): the variant must
//! load, generate without crashing, and write, greedily, the very reply the trusted
//! kernels write. A gated variant (AMX: it crashes on some machines) runs in `auto` only
//! where its self-test passed; the verdict is kept in the kernel memory.

use futures::StreamExt;
use keel_llm::{
    CancellationToken, Message, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelRequest,
    UserMessage,
};

use super::kernels::{KernelMemory, Kernels};
use super::{LocalConfig, LocalModel};
use crate::LocalError;

/// What a self-test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    /// The variant tested.
    pub variant: String,
    /// The variant it was compared with.
    pub trusted: String,
    /// Whether it passed.
    pub passed: bool,
    /// What happened, for a human.
    pub detail: String,
}

const SYSTEM: &str = "You are a coding assistant.";
const PROMPT: &str = "Write a Python function that returns the sum of a list of numbers.";

/// The greedy reply to the check's prompt, or the model's error.
async fn reply(model: &LocalModel) -> Result<String, ModelError> {
    let messages = vec![Message::User(UserMessage::text(PROMPT))];
    let events: Vec<_> =
        model.stream(ModelRequest::new(SYSTEM, &messages, &[]), CancellationToken::new()).collect().await;
    match events.last() {
        Some(Ok(ModelEvent::Completed(message))) => Ok(message.text()),
        Some(Err(error)) => Err(error.clone()),
        _ => Err(ModelError::new(ModelErrorKind::InvalidResponse, "the reply did not complete")),
    }
}

/// Tests `variant` against the best ungated kernels on `config`'s model, and remembers
/// the verdict (when `config` has a kernel memory).
pub async fn check_variant(config: &LocalConfig, variant: &str) -> Result<CheckOutcome, LocalError> {
    let mut trusted_config = config.clone();
    trusted_config.kernels = Kernels::Fast;
    trusted_config.variant = None;
    trusted_config.temperature = 0.0;
    trusted_config.max_tokens = 24;
    trusted_config.prefix_cache = None;
    let trusted_model = LocalModel::load(trusted_config.clone()).await?;
    let trusted = trusted_model.kernels().variant.clone();
    let key = trusted_model.loaded.memory_key.clone();
    let expected = reply(&trusted_model).await.map_err(|e| {
        LocalError::Engine(format!("the trusted kernels ({trusted}) failed, so nothing can be checked: {e}"))
    })?;
    drop(trusted_model);
    let mut candidate_config = trusted_config;
    candidate_config.variant = Some(variant.to_owned());
    let (passed, detail) = match LocalModel::load(candidate_config).await {
        Err(e) => (false, format!("it did not load: {e}")),
        Ok(candidate) => match reply(&candidate).await {
            Ok(text) if text == expected => (true, format!("it wrote the same reply as {trusted}")),
            Ok(text) => (false, format!("its reply differs from {trusted}'s: {text:?} against {expected:?}")),
            Err(e) => (false, format!("it failed: {e}")),
        },
    };
    if let Some(path) = &config.kernel_memory {
        let model = config.model_path.display().to_string();
        let failure = format!("{variant}: {detail}");
        KernelMemory::at(path)
            .update(&key, |verdict| {
                verdict.model = model;
                verdict.passed.retain(|v| v != variant);
                verdict.failed.retain(|f| !f.starts_with(&format!("{variant}:")));
                if passed {
                    verdict.passed.push(variant.to_owned());
                } else {
                    verdict.failed.push(failure);
                }
            })
            .map_err(|e| LocalError::Io(format!("cannot remember the verdict in {}: {e}", path.display())))?;
    }
    Ok(CheckOutcome { variant: variant.to_owned(), trusted, passed, detail })
}
