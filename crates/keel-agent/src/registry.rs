//! The set of tools offered to the model.

use std::sync::Arc;

use keel_llm::ToolDefinition;

use crate::tool::{DynTool, Tool, typed};

/// Tools by name, in the order they were added (the order the model sees).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn DynTool>>,
    definitions: Arc<[ToolDefinition]>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.iter().map(|t| &t.definition().name)).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a typed tool. A tool with the same name replaces the earlier one.
    pub fn register<T: Tool>(&mut self, tool: T) -> &mut Self {
        self.register_dyn(typed(tool))
    }

    /// Adds an object-safe tool. A tool with the same name replaces the earlier one.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        let name = tool.definition().name.clone();
        if let Some(slot) = self.tools.iter_mut().find(|t| t.definition().name == name) {
            *slot = tool;
        } else {
            self.tools.push(tool);
        }
        self.definitions = self.tools.iter().map(|t| t.definition().clone()).collect();
        self
    }

    /// Finds a tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.iter().find(|t| t.definition().name == name)
    }

    /// The definitions sent to the model.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// Tool names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.definition().name.as_str())
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use crate::tool::{PreparedCall, ToolError};

    struct Fake {
        definition: ToolDefinition,
        read_only: bool,
    }

    impl DynTool for Fake {
        fn definition(&self) -> &ToolDefinition {
            &self.definition
        }
        fn is_read_only(&self) -> bool {
            self.read_only
        }
        fn is_concurrency_safe(&self) -> bool {
            self.read_only
        }
        fn prepare(&self, _arguments: &str) -> Result<PreparedCall, ToolError> {
            Err(ToolError::msg("not runnable"))
        }
    }

    /// read_file (read-only), write_file, edit_file and shell, none runnable.
    pub(crate) fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for (name, read_only) in
            [("read_file", true), ("write_file", false), ("edit_file", false), ("shell", false)]
        {
            let parameters = serde_json::value::RawValue::from_string("{}".into()).unwrap_or_default();
            let definition = ToolDefinition { name: name.into(), description: String::new(), parameters };
            registry.register_dyn(Arc::new(Fake { definition, read_only }));
        }
        registry
    }
}
