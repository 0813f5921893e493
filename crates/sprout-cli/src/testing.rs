//! For tests of the output \[O2\]: what `sprout` shows a person for an event
//! stream, so a test can hold the human output of a run to the `--json`
//! stream of the same events. Behind the `testing` feature (off by default).
//!
//! ```
//! use agent_loop::AgentEvent;
//!
//! // A line of `sprout run --json`, read back as its event.
//! let line = r#"{"event":"assistant_text","text":"Done."}"#;
//! let event: AgentEvent = serde_json::from_str(line).unwrap();
//! assert_eq!(sprout_cli::testing::human_output(&[event]), "assistant: Done.\n");
//! ```

use agent_loop::AgentEvent;

use crate::render::Renderer;

/// The human output of `events`, in order, as `sprout` writes it to a pipe
/// (no colour, no spinner): the same renderer, fed the same events, as
/// `sprout run` and `sprout demo` use.
pub fn human_output(events: &[AgentEvent]) -> String {
    let mut renderer = Renderer::piped(false, String::new());
    for event in events {
        renderer.show(event);
    }
    renderer.into_out()
}
