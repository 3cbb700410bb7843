//! The model names a server lists, for Tab after `/model ` (issue 32, item 8). The list
//! is asked for once per server, on a thread of its own (the prompt holds keel's runtime
//! thread while it reads keys) and within [`ASK_FOR`], then kept. Until it is in, Tab
//! offers nothing: typing never waits on the network.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_llm::ProviderConfig;

/// How long the server has to list its models.
const ASK_FOR: Duration = Duration::from_secs(5);
/// Most names offered at once.
const MOST_NAMES: usize = 200;

/// Asks a server for its models' names (none when it cannot say).
type Fetch = Arc<dyn Fn(&ProviderConfig) -> Vec<String> + Send + Sync>;

/// The names of the current server's models, shared by the completer and the session.
#[derive(Clone)]
pub struct ModelNames {
    state: Arc<Mutex<State>>,
    fetch: Fetch,
}

#[derive(Default)]
struct State {
    /// The server asked (`None`: the embedded model, which lists nothing).
    server: Option<ProviderConfig>,
    /// Counts changes of server, so that a late answer about an earlier one is dropped.
    generation: u64,
    names: Names,
}

#[derive(Default)]
enum Names {
    #[default]
    NotAsked,
    Asking,
    Known(Vec<String>),
}

impl ModelNames {
    /// Names asked of the server with [`keel_llm::list_models`].
    pub fn new() -> Self {
        ModelNames::with_fetch(Arc::new(ask_server))
    }

    fn with_fetch(fetch: Fetch) -> Self {
        ModelNames { state: Arc::default(), fetch }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The server whose names to offer from now on; the same server keeps its list.
    pub fn serve(&self, server: Option<&ProviderConfig>) {
        let mut state = self.state();
        let same = match (&state.server, server) {
            (Some(a), Some(b)) => same_server(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            state.server = server.cloned();
            state.generation += 1;
            state.names = Names::NotAsked;
        }
    }

    /// Names `server` listed when asked elsewhere (`/model`), kept if it is the current one.
    pub fn learned(&self, server: &ProviderConfig, names: &[String]) {
        let mut state = self.state();
        if state.server.as_ref().is_some_and(|current| same_server(current, server)) {
            state.names = Names::Known(names.to_vec());
        }
    }

    /// The known names that start with `prefix`. The first call for a server starts
    /// asking it and offers nothing, as do the calls made while it answers.
    pub fn complete(&self, prefix: &str) -> Vec<String> {
        let mut state = self.state();
        let Some(server) = state.server.clone() else { return Vec::new() };
        match &state.names {
            Names::Known(names) => {
                return names.iter().filter(|n| n.starts_with(prefix)).take(MOST_NAMES).cloned().collect();
            }
            Names::Asking => return Vec::new(),
            Names::NotAsked => {}
        }
        state.names = Names::Asking;
        let (shared, fetch, generation) =
            (Arc::clone(&self.state), Arc::clone(&self.fetch), state.generation);
        let asked = std::thread::Builder::new().name("keel-model-names".into()).spawn(move || {
            let names = fetch(&server);
            let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
            if state.generation == generation {
                state.names = Names::Known(names);
            }
        });
        if asked.is_err() {
            state.names = Names::Known(Vec::new());
        }
        Vec::new()
    }
}

/// Typing `/model NAME`: the rest of the first listed name that starts with `NAME`, shown
/// dimmed after the cursor (→ takes it, Tab offers them all). Typing `/model ` is also
/// what starts asking the server, so the names are usually in by the first Tab.
pub struct ModelHint {
    names: ModelNames,
    hint: String,
}

impl ModelHint {
    /// Hints from `names`.
    pub fn new(names: ModelNames) -> Self {
        ModelHint { names, hint: String::new() }
    }

    /// The hint for `line` with the cursor at `pos`.
    fn hint_for(&self, line: &str, pos: usize) -> String {
        let Some(prefix) = line.strip_prefix("/model ") else { return String::new() };
        let found = self.names.complete(prefix);
        if pos < line.len() || prefix.is_empty() || prefix.contains(char::is_whitespace) {
            return String::new();
        }
        found.first().and_then(|name| name.strip_prefix(prefix)).unwrap_or_default().to_owned()
    }
}

impl reedline::Hinter for ModelHint {
    fn handle(
        &mut self,
        line: &str,
        pos: usize,
        _history: &dyn reedline::History,
        use_ansi_coloring: bool,
        _cwd: &str,
    ) -> String {
        self.hint = self.hint_for(line, pos);
        if use_ansi_coloring && !self.hint.is_empty() {
            reedline::Color::DarkGray.normal().paint(&self.hint).to_string()
        } else {
            self.hint.clone()
        }
    }

    fn complete_hint(&self) -> String {
        self.hint.clone()
    }

    fn next_hint_token(&self) -> String {
        self.hint.clone()
    }
}

/// The same server: the same address, API and key (the model may differ).
fn same_server(a: &ProviderConfig, b: &ProviderConfig) -> bool {
    a.base_url == b.base_url && a.api == b.api && a.api_key == b.api_key
}

/// [`keel_llm::list_models`] within [`ASK_FOR`], on a runtime of this thread's own.
fn ask_server(config: &ProviderConfig) -> Vec<String> {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    runtime.block_on(async {
        match tokio::time::timeout(ASK_FOR, keel_llm::list_models(config)).await {
            Ok(Ok(names)) => names,
            _ => Vec::new(),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn server(url: &str) -> ProviderConfig {
        ProviderConfig::new(url.to_owned(), "m".to_owned())
    }

    /// Waits until the asking thread has answered.
    fn settled(names: &ModelNames) {
        for _ in 0..200 {
            if !matches!(names.state().names, Names::Asking) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the server was never heard");
    }

    #[test]
    fn names_are_asked_once_per_server_and_never_waited_for() {
        let asked = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&asked);
        let names = ModelNames::with_fetch(Arc::new(move |config: &ProviderConfig| {
            count.fetch_add(1, Ordering::SeqCst);
            if config.base_url.contains("a") {
                vec!["llama3.2:3b".to_owned(), "qwen2.5-coder:1.5b".to_owned(), "qwen2.5-coder:7b".to_owned()]
            } else {
                Vec::new()
            }
        }));
        assert!(names.complete("q").is_empty(), "no server: nothing");
        names.serve(Some(&server("http://a/v1")));
        assert!(names.complete("q").is_empty(), "not asked yet: nothing, and asking starts");
        settled(&names);
        assert_eq!(names.complete("qwen"), ["qwen2.5-coder:1.5b", "qwen2.5-coder:7b"]);
        assert_eq!(names.complete(""), ["llama3.2:3b", "qwen2.5-coder:1.5b", "qwen2.5-coder:7b"]);
        names.serve(Some(&ProviderConfig { model: "other".into(), ..server("http://a/v1") }));
        assert_eq!(names.complete("l"), ["llama3.2:3b"], "another model of the same server: kept");
        assert_eq!(asked.load(Ordering::SeqCst), 1);

        names.serve(Some(&server("http://b/v1")));
        assert!(names.complete("q").is_empty());
        settled(&names);
        assert!(names.complete("q").is_empty(), "a server that lists nothing");
        assert_eq!(asked.load(Ordering::SeqCst), 2, "and is not asked again");
        names.learned(&server("http://b/v1"), &["gpt-5".to_owned()]);
        assert_eq!(names.complete("g"), ["gpt-5"], "a list /model got is kept");
        let hint = ModelHint::new(names.clone());
        assert_eq!(hint.hint_for("/model g", 8), "pt-5");
        assert_eq!(hint.hint_for("/model gpt-5", 12), "");
        assert_eq!(hint.hint_for("/model g", 7), "", "only with the cursor at the end");
        assert_eq!(hint.hint_for("/model ", 7), "");
        assert_eq!(hint.hint_for("fix g", 5), "");
        names.serve(None);
        assert!(names.complete("g").is_empty(), "the embedded model lists nothing");
    }
}
