//! The loop's event stream \[O1\], \[O2\]: one stream, shown to a person by the
//! CLI and written as JSON Lines by `--json`.

use std::time::Duration;

use hooks_core::EndReason;
use serde::Serialize;

/// Something the agent did or saw.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A prompt began.
    PromptStarted {
        /// The prompt text.
        prompt: String,
    },
    /// A request goes to the model.
    ModelRequest {
        /// The loop round, from 1.
        round: u32,
        /// Messages in the request.
        messages: usize,
        /// Tools offered.
        tools: usize,
        /// The estimated input size in tokens.
        estimated_tokens: u64,
    },
    /// The model answered.
    ModelResponse {
        /// The loop round.
        round: u32,
        /// Its stop reason, as mapped.
        stop: String,
        /// Tool calls it made.
        tool_calls: usize,
        /// Input tokens, as the provider reported.
        input_tokens: Option<u64>,
        /// Output tokens, as the provider reported.
        output_tokens: Option<u64>,
        /// How long the request took, retries included.
        #[serde(
            rename = "latency_ms",
            serialize_with = "hooks_core::event::ser_duration_ms"
        )]
        latency: Duration,
    },
    /// A piece of the model's text as it arrived, from a model that streams
    /// (`text_delta`). A round's pieces, in order, make its `AssistantText`,
    /// which still follows them once the answer is whole.
    TextDelta {
        /// The piece.
        text: String,
    },
    /// The model's text.
    AssistantText {
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments, as written.
        arguments: String,
    },
    /// A tool call finished.
    ToolResult {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// The result text (capped by the host).
        text: String,
        /// How long it took.
        #[serde(
            rename = "latency_ms",
            serialize_with = "hooks_core::event::ser_duration_ms"
        )]
        latency: Duration,
    },
    /// Hook text was injected as a synthetic call/result pair \[I1\].
    Injected {
        /// `_Stop` or `_PostCompact`.
        hook: String,
        /// The answering server.
        server: String,
        /// The synthetic call's tool name.
        tool_name: String,
        /// The envelope \[I2\].
        content: String,
    },
    /// The history was compacted.
    Compacted {
        /// `summary` or `truncation`.
        kind: &'static str,
        /// Messages removed.
        removed: usize,
        /// Messages before.
        before: usize,
        /// Messages after (before any re-injection).
        after: usize,
        /// Why a summary was not used, if it was not.
        note: Option<String>,
    },
    /// The prompt ended \[S5\].
    PromptEnded {
        /// Why.
        reason: EndReason,
        /// Detail for `error` and similar ends.
        detail: Option<String>,
        /// Model rounds in this prompt.
        rounds: u32,
    },
    /// A hook or policy event from the core \[O1\], serialised as the core's
    /// own event (its names do not clash with the loop's).
    #[serde(untagged)]
    Hook(hooks_core::Event),
}

/// Where the loop sends its events.
pub type Sink = std::sync::Arc<dyn Fn(&AgentEvent) + Send + Sync>;
