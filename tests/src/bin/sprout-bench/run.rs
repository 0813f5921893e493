//! Figure 13: `sprout run --json` from process start to exit, for a prompt
//! the model ends at once, with N instant `_Stop` servers from `.mcp.json`
//! and hooks on: what a script or CI job that runs one prompt pays.

use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use sprout_tests::Scratch;

use crate::acp::Surface;
use crate::{Stats, stats};

/// `reps` runs (after one that warms up) with `n` servers.
pub(crate) fn start_to_exit(surface: &Surface, n: usize, reps: usize) -> Result<Stats, String> {
    let scratch = Scratch::new(&format!("bench-run-{n}"));
    if n > 0 {
        let servers: serde_json::Map<String, Value> = (0..n)
            .map(|i| {
                (
                    format!("s{i}"),
                    json!({"command": surface.fixture, "args": ["--hooks", "_Stop", "--stop", "empty"]}),
                )
            })
            .collect();
        std::fs::write(
            scratch.0.join(".mcp.json"),
            json!({"mcpServers": servers}).to_string(),
        )
        .map_err(|e| e.to_string())?;
        // The project's servers are trusted once, as a person would [U2]:
        // each run then checks that trust, as every run does.
        let trusted = surface
            .command(&["trust", "--yes"], &[], &scratch.0)
            .output()
            .map_err(|e| format!("cannot run sprout trust: {e}"))?;
        if !trusted.status.success() {
            return Err(format!(
                "sprout trust failed: {}",
                String::from_utf8_lossy(&trusted.stderr)
            ));
        }
    }
    let env = [("MCP_HOOK_SERVERS", "*".to_owned())];
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..=reps {
        surface.model.call_tools("", 0);
        let mut command = surface.command(&["run", "--json", "bench"], &env, &scratch.0);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let output = command
            .output()
            .map_err(|e| format!("cannot run sprout: {e}"))?;
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let events: Vec<Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let up = events.iter().filter(|e| e["event"] == "server_up").count();
        let hook_calls = events
            .iter()
            .filter(|e| e["event"] == "hook_called" && e["outcome"] == "empty")
            .count();
        let ended = events.iter().find(|e| e["event"] == "prompt_ended");
        if !output.status.success() || up != n || hook_calls != n || ended.is_none() {
            return Err(format!(
                "sprout run with {n} server(s) exited {} with {up} server(s) up and {hook_calls} empty hook answer(s), ended {ended:?}; stderr:\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        if rep > 0 {
            samples.push(took);
        }
    }
    Ok(stats(samples))
}
