//! Token budgets for children: each child has its own, and all the children of one
//! parent session draw on a shared one, so N children cannot each spend the whole of it.
//! A child's model is wrapped ([`Budgeted`]): a request is refused once a budget it
//! draws on is spent, and every reply's tokens (prompt and output) are counted in each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use keel_llm::{
    CancellationToken, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo, ModelRequest,
    ModelStream,
};

/// Tokens that may be spent, and those spent so far.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
}

impl Budget {
    /// A budget of `limit` tokens, none spent.
    pub fn new(limit: u64) -> Budget {
        Budget { limit, used: AtomicU64::new(0) }
    }

    /// The tokens allowed.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The tokens spent so far.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The tokens left.
    pub fn left(&self) -> u64 {
        self.limit.saturating_sub(self.used())
    }

    /// Whether nothing is left.
    pub fn spent(&self) -> bool {
        self.left() == 0
    }

    fn spend(&self, tokens: u64) {
        self.used.fetch_add(tokens, Ordering::Relaxed);
    }
}

/// The text a request refused for its budget fails with (the child's turn ends `error`
/// with it).
pub const BUDGET_SPENT: &str = "the subagent's token budget is spent";

/// A model whose requests draw on budgets.
pub(crate) struct Budgeted {
    pub inner: Arc<dyn ModelClient>,
    pub budgets: Vec<Arc<Budget>>,
}

impl ModelClient for Budgeted {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        if let Some(spent) = self.budgets.iter().find(|b| b.spent()) {
            let error = ModelError::new(
                ModelErrorKind::LimitExceeded,
                format!("{BUDGET_SPENT} ({} of {} tokens used)", spent.used(), spent.limit()),
            );
            return Box::pin(futures::stream::iter([Err(error)]));
        }
        let budgets = self.budgets.clone();
        Box::pin(self.inner.stream(request, cancel).inspect(move |event| {
            if let Ok(ModelEvent::Completed(message)) = event {
                let tokens = message.usage.input_tokens + message.usage.output_tokens;
                for budget in &budgets {
                    budget.spend(tokens);
                }
            }
        }))
    }
}
