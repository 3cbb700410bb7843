//! The set of tools offered to the model.

use std::sync::Arc;

use keel_llm::ToolDefinition;

use crate::tool::{DynTool, Tool, typed};

/// Why a tool was not added to a [`ToolRegistry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRegistryErrorKind {
    /// Another tool already has the name; the first one stays.
    Duplicate,
}

/// A tool the registry refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tool named `{name}` is already registered; the new one was refused")]
pub struct ToolRegistryError {
    /// Why.
    pub kind: ToolRegistryErrorKind,
    /// The refused tool's name.
    pub name: String,
}

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

    /// Adds a typed tool. A tool whose name is taken is refused (the first one stays)
    /// with a warning in the log; [`ToolRegistry::try_register_dyn`] says so instead.
    pub fn register<T: Tool>(&mut self, tool: T) -> &mut Self {
        self.register_dyn(typed(tool))
    }

    /// Adds an object-safe tool. A tool whose name is taken is refused (the first one
    /// stays) with a warning in the log; [`ToolRegistry::try_register_dyn`] says so
    /// instead.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        if let Err(error) = self.try_register_dyn(tool) {
            tracing::warn!("{error}");
        }
        self
    }

    /// Adds an object-safe tool, or refuses it when a tool of the same name is already
    /// here: a tool is never replaced silently.
    pub fn try_register_dyn(&mut self, tool: Arc<dyn DynTool>) -> Result<&mut Self, ToolRegistryError> {
        let name = &tool.definition().name;
        if self.get(name).is_some() {
            return Err(ToolRegistryError { kind: ToolRegistryErrorKind::Duplicate, name: name.clone() });
        }
        self.tools.push(tool);
        self.definitions = self.tools.iter().map(|t| t.definition().clone()).collect();
        Ok(self)
    }

    /// Finds a tool by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.iter().find(|t| t.definition().name == name)
    }

    /// What `call` does, as its tool declares it ([`crate::Tool::effect`]); a call of a
    /// tool not here is [`Effect::Other`](keel_session::Effect::Other).
    pub fn effect_of(&self, call: &keel_llm::ToolCall) -> keel_session::Effect {
        self.get(&call.name).map_or(keel_session::Effect::Other, |tool| tool.effect(&call.arguments))
    }

    /// The definitions sent to the model.
    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// The tools for which `keep` holds, in the same order.
    pub fn filtered(&self, mut keep: impl FnMut(&dyn DynTool) -> bool) -> ToolRegistry {
        let tools: Vec<Arc<dyn DynTool>> = self.tools.iter().filter(|t| keep(t.as_ref())).cloned().collect();
        let definitions = tools.iter().map(|t| t.definition().clone()).collect();
        ToolRegistry { tools, definitions }
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
mod tests {
    use super::*;
    use crate::tool::{ToolContext, ToolOutput};
    use crate::tool_error::ToolError;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NoArgs {}

    struct Named(&'static str, &'static str);

    impl Tool for Named {
        type Args = NoArgs;
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            self.1
        }
        async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(self.1))
        }
    }

    #[test]
    fn a_second_tool_of_the_same_name_is_refused_never_replacing_the_first() {
        let mut registry = ToolRegistry::new();
        registry.register(Named("read", "first")).register(Named("read", "second")).register(Named("b", "b"));
        assert_eq!(registry.names().collect::<Vec<_>>(), ["read", "b"]);
        assert_eq!(registry.get("read").unwrap().definition().description, "first");
        assert_eq!(registry.definitions().len(), 2);
        let refused = registry.try_register_dyn(typed(Named("b", "again"))).err().unwrap();
        assert_eq!(refused, ToolRegistryError { kind: ToolRegistryErrorKind::Duplicate, name: "b".into() });
        assert_eq!(refused.to_string(), "a tool named `b` is already registered; the new one was refused");
        assert!(registry.try_register_dyn(typed(Named("c", "c"))).is_ok());
        assert_eq!(registry.names().collect::<Vec<_>>(), ["read", "b", "c"]);
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use crate::tool::PreparedCall;
    use crate::tool_error::ToolError;

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
        fn effect(&self, arguments: &str) -> keel_session::Effect {
            let value = serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
            let path = crate::tool::path_argument(&value);
            match (self.definition.name.as_str(), path) {
                ("read_file", path) => keel_session::Effect::Reads { path },
                ("write_file" | "edit_file", Some(path)) => keel_session::Effect::Writes { path },
                ("shell", _) => keel_session::Effect::Runs,
                _ => keel_session::Effect::Other,
            }
        }
        fn is_concurrency_safe(&self) -> bool {
            self.read_only
        }
        fn prepare(&self, _arguments: &str) -> Result<PreparedCall, ToolError> {
            Err(ToolError::msg("not runnable"))
        }
    }

    /// read_file (read-only), write_file, edit_file and shell, none runnable, with the
    /// effects of the real ones.
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
