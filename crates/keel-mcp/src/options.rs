//! Settings shared by the servers of a manager.

use std::path::PathBuf;

/// Settings shared by the servers of a manager.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The program implementing [`keel_sandbox::launch`] (the `keel` binary): stdio
    /// servers are started through it so they die with this process even on `kill -9`.
    /// `None` starts them directly; they are then stopped when the manager is dropped
    /// (or shut down), which a `kill -9` of this process skips.
    pub launcher: Option<PathBuf>,
    /// Stdio servers run in a PID namespace of their own (through the launcher, where the
    /// system allows it): a process they start with `setsid` dies with them too.
    pub pid_namespace: bool,
    /// Folders a sandboxed server may not read (keel's own files).
    pub hidden: Vec<PathBuf>,
    /// The client name sent in the handshake.
    pub client_name: String,
    /// The client version sent in the handshake.
    pub client_version: String,
    /// The runtime the connections and calls run on (default: the one `start` is called
    /// on). A program whose runtime thread blocks between turns (an interactive prompt)
    /// gives one on a thread of its own, living as long as the program: stdio servers
    /// started through the launcher die when the thread that started them ends.
    pub runtime: Option<tokio::runtime::Handle>,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            launcher: None,
            pid_namespace: false,
            hidden: Vec::new(),
            client_name: "keel".to_owned(),
            client_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime: None,
        }
    }
}
