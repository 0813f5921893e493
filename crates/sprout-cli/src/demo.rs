//! `sprout demo`: the whole idea in one offline run.
//!
//! A scripted model works on a small task with the bundled todo hook server
//! (a real child process: this same binary, `sprout hook-server todo`). It
//! claims to be done too early and `_Stop` objects with the open item; it
//! finishes the work; the context passes the (small) window and is compacted
//! by summary; `_PostCompact` re-injects the todo list; the model ends and
//! nobody objects.

use agent_loop::AgentSettings;
use agent_loop::CompactionSettings;
use hooks_core::{HookConfig, ServerName};
use hooks_mcp::{HostOptions, ServerSpec};

use crate::settings::ConfigProblem;

/// The task the demo gives.
pub(crate) const PROMPT: &str = "Add input validation to the signup form, with tests.";

/// The scripted model's turns: see the module docs for the story.
pub(crate) const SCRIPT: &str = r#"{"text": "I'll plan the work first.", "tool_calls": [{"name": "todo__todo", "arguments": {"items": [{"text": "Validate the email field"}, {"text": "Validate the password length"}, {"text": "Write tests for both checks"}]}}], "usage": {"input_tokens": 850, "output_tokens": 60}}
{"text": "The email and password checks are in place.", "tool_calls": [{"name": "todo__todo", "arguments": {"items": [{"text": "Validate the email field", "done": true}, {"text": "Validate the password length", "done": true}, {"text": "Write tests for both checks"}]}}], "usage": {"input_tokens": 1400, "output_tokens": 80}}
{"text": "The signup form validates its input now. Done!", "usage": {"input_tokens": 1700, "output_tokens": 20}}
{"text": "Right, the tests are still open. Writing them now: both checks have passing tests.", "tool_calls": [{"name": "todo__todo", "arguments": {"items": [{"text": "Validate the email field", "done": true}, {"text": "Validate the password length", "done": true}, {"text": "Write tests for both checks", "done": true}]}}], "usage": {"input_tokens": 3300, "output_tokens": 90}}
{"text": "Summary: the signup form now validates the email field and the password length, and both checks have tests. Every todo item is done; what remains is to report back."}
{"text": "Everything is done: the email and password checks are in place, and both are tested.", "usage": {"input_tokens": 600, "output_tokens": 30}}
"#;

/// The demo's settings: a small context window so that compaction happens.
pub(crate) fn settings() -> AgentSettings {
    AgentSettings {
        compaction: CompactionSettings {
            context_window: 4000,
            threshold: 0.8,
            max_summaries: 3,
        },
        ..AgentSettings::default()
    }
}

/// Hooks on for the todo server, with a deadline generous enough for a busy
/// machine.
pub(crate) fn hook_config() -> HookConfig {
    HookConfig::from_values(Some("todo"), Some("10000"), Some("3")).unwrap_or_default()
}

/// The todo server: this binary, as `sprout hook-server todo`.
pub(crate) fn servers() -> Result<Vec<ServerSpec>, ConfigProblem> {
    let exe = std::env::current_exe().map_err(ConfigProblem::OwnBinary)?;
    // Invariant: "todo" is a valid server name [N1] (the demo tests run it).
    let name = ServerName::new("todo").expect("\"todo\" is a server name");
    Ok(vec![ServerSpec::stdio(
        name,
        exe.to_string_lossy(),
        vec!["hook-server".into(), "todo".into()],
    )])
}

/// Host options for the demo.
pub(crate) fn host_options() -> HostOptions {
    HostOptions::default()
}
