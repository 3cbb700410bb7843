//! Per-session memory that tools keep between calls, such as which files the model has
//! seen. It lives in the session's [`SessionContext`](crate::SessionContext), so tools
//! shared by many sessions keep each session's memory apart. It is not logged: after a
//! resume it starts empty, and tools must work from that (ask again, read again).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Typed slots, one per type, each created on first use.
#[derive(Default)]
pub struct ToolState {
    slots: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
}

impl ToolState {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the slot of type `T` (created with `T::default()` on first use).
    pub fn with<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut slots = match self.slots.lock() {
            Ok(slots) => slots,
            Err(poisoned) => poisoned.into_inner(),
        };
        let slot = slots.entry(TypeId::of::<T>()).or_insert_with(|| Box::new(T::default()));
        match slot.downcast_mut::<T>() {
            Some(value) => f(value),
            // Unreachable: the slot for TypeId::of::<T>() always holds a T.
            None => f(&mut T::default()),
        }
    }
}

impl std::fmt::Debug for ToolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.slots.lock().map(|s| s.len()).unwrap_or_default();
        f.debug_struct("ToolState").field("slots", &count).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_typed_and_kept() {
        let state = ToolState::new();
        state.with(|seen: &mut Vec<String>| seen.push("a".into()));
        state.with(|count: &mut u32| *count += 2);
        assert_eq!(state.with(|seen: &mut Vec<String>| seen.clone()), vec!["a"]);
        assert_eq!(state.with(|count: &mut u32| *count), 2);
    }
}
