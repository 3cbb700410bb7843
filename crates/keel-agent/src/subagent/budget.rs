//! Token budgets for children: each child has its own, and all the children of one
//! parent session draw on a shared one, so N children cannot each spend the whole of it.
//! A child's model is wrapped ([`Budgeted`]): a request is refused once its budget is
//! spent, and every reply's tokens (prompt and output) are counted in it.
//!
//! A child's budget is an allowance taken from the shared one when it starts
//! ([`SharedBudget::take`]): its own limit, or what is left when that is less. It holds
//! the allowance while it runs and gives back what it did not spend when it ends, so
//! children running side by side never hold more than the budget between them. What
//! children spent stays spent for the session: on resume, it is read back from the
//! parent's `task` results ([`spent_in`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use keel_llm::{
    CancellationToken, ModelClient, ModelError, ModelErrorKind, ModelEvent, ModelInfo, ModelRequest,
    ModelStream,
};
use keel_session::{Event, EventKind};
use tokio::sync::Notify;

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

/// The shared budget's accounts.
#[derive(Debug, Default)]
struct Books {
    /// Spent by children that ended (or before a resume).
    spent: u64,
    /// Held by running children: their allowances.
    held: u64,
}

/// The budget the children of one parent session share (the module doc says how).
#[derive(Debug)]
pub struct SharedBudget {
    limit: u64,
    books: Mutex<Books>,
    /// Told when a child gives back what it held.
    given_back: Notify,
}

/// What [`SharedBudget::take`] found.
enum Take {
    Taken(u64),
    /// Nothing is left now, but running children hold some of it.
    Held,
    /// Everything is spent.
    Spent,
}

impl SharedBudget {
    /// A budget of `limit` tokens, of which `spent` are already spent.
    pub fn new(limit: u64, spent: u64) -> SharedBudget {
        SharedBudget { limit, books: Mutex::new(Books { spent, held: 0 }), given_back: Notify::new() }
    }

    /// The tokens allowed.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The tokens spent by the children that ended.
    pub fn spent(&self) -> u64 {
        self.books().spent
    }

    /// The tokens neither spent nor held by a running child.
    pub fn left(&self) -> u64 {
        let books = self.books();
        self.limit.saturating_sub(books.spent.saturating_add(books.held))
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        match self.books.lock() {
            Ok(books) => books,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn try_take(&self, most: u64) -> Take {
        let mut books = self.books();
        let left = self.limit.saturating_sub(books.spent.saturating_add(books.held));
        if left > 0 {
            let taken = most.min(left);
            books.held += taken;
            Take::Taken(taken)
        } else if books.held > 0 {
            Take::Held
        } else {
            Take::Spent
        }
    }

    /// An allowance of at most `most` tokens, taken from what is left; while running
    /// children hold all of that, waits for one to give some back. `None`: the budget is
    /// spent.
    pub async fn take(self: &Arc<Self>, most: u64) -> Option<Allowance> {
        loop {
            let given_back = self.given_back.notified();
            tokio::pin!(given_back);
            given_back.as_mut().enable();
            match self.try_take(most) {
                Take::Taken(tokens) => {
                    return Some(Allowance {
                        shared: Arc::clone(self),
                        budget: Arc::new(Budget::new(tokens)),
                    });
                }
                Take::Spent => return None,
                Take::Held => given_back.await,
            }
        }
    }

    fn settle(&self, held: u64, spent: u64) {
        {
            let mut books = self.books();
            books.held = books.held.saturating_sub(held);
            books.spent = books.spent.saturating_add(spent);
        }
        self.given_back.notify_waiters();
    }
}

/// A running child's part of the shared budget: its own [`Budget`]. Dropped, what the
/// child spent counts as spent and the rest is given back.
#[derive(Debug)]
pub struct Allowance {
    shared: Arc<SharedBudget>,
    budget: Arc<Budget>,
}

impl Allowance {
    /// The child's budget.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }
}

impl Drop for Allowance {
    fn drop(&mut self) {
        self.shared.settle(self.budget.limit(), self.budget.used());
    }
}

/// The text a request refused for its budget fails with (the child's turn ends `error`
/// with it).
pub const BUDGET_SPENT: &str = "the subagent's token budget is spent";

/// A model whose requests draw on a budget.
pub(crate) struct Budgeted {
    pub inner: Arc<dyn ModelClient>,
    pub budget: Arc<Budget>,
}

impl ModelClient for Budgeted {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>, cancel: CancellationToken) -> ModelStream<'a> {
        if self.budget.spent() {
            let error = ModelError::new(
                ModelErrorKind::LimitExceeded,
                format!("{BUDGET_SPENT} ({} of {} tokens used)", self.budget.used(), self.budget.limit()),
            );
            return Box::pin(futures::stream::iter([Err(error)]));
        }
        let budget = Arc::clone(&self.budget);
        Box::pin(self.inner.stream(request, cancel).inspect(move |event| {
            if let Ok(ModelEvent::Completed(message)) = event {
                budget.spend(message.usage.input_tokens + message.usage.output_tokens);
            }
        }))
    }
}

/// The last line of a `task` result: the child's agent, session and what it spent.
pub(crate) fn trailer(agent: &str, session_id: &str, steps: u32, tool_calls: u32, tokens: u64) -> String {
    format!(
        "[subagent {agent}, session {session_id}: {steps} step(s), {tool_calls} tool call(s), {tokens} tokens]"
    )
}

/// The tokens a `task` result's [`trailer`] says its child spent.
fn trailer_tokens(content: &str) -> Option<u64> {
    let line = content.lines().rev().find(|line| !line.trim().is_empty())?.trim();
    let inner = line.strip_prefix("[subagent ")?.strip_suffix(" tokens]")?;
    inner.rsplit(", ").next()?.parse().ok()
}

/// The tokens the children of a session spent, from its log `events`: what its `task`
/// results say (a result without a child, refused or not run, says nothing).
pub fn spent_in(events: &[Event]) -> u64 {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolResult(result) if result.name == super::NAME => trailer_tokens(&result.content),
            _ => None,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_trailer_reads_back_its_tokens() {
        let line = trailer("general", "20260101-000000-abc123", 3, 2, 1_234);
        assert_eq!(trailer_tokens(&line), Some(1_234));
        assert_eq!(
            trailer_tokens(&format!("Operation aborted\nThe subagent stopped…\n\n{line}\n")),
            Some(1_234)
        );
        assert_eq!(trailer_tokens("Not started: the budget is spent."), None);
        assert_eq!(trailer_tokens("[subagent x, session y: about 12 tokens]"), None);
    }

    #[tokio::test]
    async fn allowances_never_hold_more_than_is_left_and_come_back_unspent() {
        let shared = Arc::new(SharedBudget::new(150, 0));
        let a = shared.take(100).await.unwrap();
        let b = shared.take(100).await.unwrap();
        assert_eq!((a.budget().limit(), b.budget().limit(), shared.left()), (100, 50, 0));
        a.budget().spend(30);
        drop(a);
        assert_eq!((shared.spent(), shared.left()), (30, 70));
        // Waiting for what a running child holds, then taking what it gave back.
        let waiting = tokio::spawn({
            let shared = Arc::clone(&shared);
            async move { shared.take(100).await.map(|c| c.budget().limit()) }
        });
        let c = shared.take(100).await.unwrap();
        assert_eq!(c.budget().limit(), 70);
        tokio::task::yield_now().await;
        assert_eq!(waiting.is_finished(), false);
        b.budget().spend(50);
        drop(b);
        drop(c);
        assert_eq!(waiting.await.unwrap(), Some(70));
        assert_eq!(shared.spent(), 80);
    }

    #[tokio::test]
    async fn a_spent_budget_gives_nothing_and_counts_what_was_spent_before() {
        let shared = Arc::new(SharedBudget::new(100, 100));
        assert_eq!(shared.take(10).await.map(|a| a.budget().limit()), None);
        let resumed = Arc::new(SharedBudget::new(100, 60));
        assert_eq!(resumed.take(100).await.map(|a| a.budget().limit()), Some(40));
    }
}
