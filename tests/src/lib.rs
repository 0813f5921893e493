//! `sprout-tests`: workspace-level end-to-end tests over real processes.
//!
//! The package holds the `mcp-fixture` binary (a scripted MCP stdio server),
//! the `sprout-bench` binary that `cargo xtask bench` runs, and the
//! integration tests in `tests/`, which run real child processes and serve
//! MCP and model APIs over real HTTP on 127.0.0.1. This library is what those
//! tests share: scratch directories, the fixture's log, and /proc checks.

use std::path::{Path, PathBuf};

/// A scratch directory for one test, removed when dropped.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty directory named for `test` and this process.
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("sprout-test-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the temp dir is writable");
        Scratch(dir)
    }

    /// The path of `name` inside the directory.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The JSON lines of a fixture log (`mcp-fixture --log FILE`) with this
/// `event` (`start`, `call`, `cancelled`, `grandchild`).
pub fn log_events(path: &str, event: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == event)
        .collect()
}

/// The pids a fixture log recorded for `event` (`start` or `grandchild`).
pub fn logged_pids(path: &str, event: &str) -> Vec<u32> {
    log_events(path, event)
        .iter()
        .filter_map(|v| v["pid"].as_u64().map(|p| p as u32))
        .collect()
}

/// Whether a process runs, read from /proc (a zombie runs nothing).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        Err(_) => false,
        Ok(stat) => {
            // The state follows the command name in parentheses.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
    }
}

/// Waits (up to 10 s) until none of `pids` runs; true if so.
pub fn all_gone(pids: &[u32]) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}
