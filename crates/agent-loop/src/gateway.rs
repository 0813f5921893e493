//! The loop's boundary to tools and hooks: [`Gateway`], and the plain data
//! that crosses it ([`ToolDef`], [`ToolOutput`], [`ToolReport`]).
//!
//! The trait lets the loop run against any tools and hooks: the real MCP host
//! (`hooks_mcp::Host`, with the default `mcp` feature), an in-memory gateway
//! on the `hooks-core` policy in tests, or one of your own. Nothing here
//! depends on MCP.

use std::time::Duration;

use async_trait::async_trait;
use hooks_core::{
    AbortReason, AskError, EndReason, Injection, StopReason, TurnVerdict, UsageError,
};
use tokio_util::sync::CancellationToken;

use crate::message::ToolCall;

/// A tool as the model is offered it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    /// Its name as the model sees it (`S__T` for an MCP tool \[N2\]).
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// Its JSON Schema for arguments.
    pub input_schema: serde_json::Value,
}

/// What a tool call produced, as the model will read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text of the result.
    pub text: String,
    /// Whether it is an error result (the model is told so).
    pub is_error: bool,
}

impl ToolOutput {
    /// An error result with this text.
    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// A JSON object, as tool arguments are.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// How tool calls run.
#[derive(Clone, Debug)]
pub struct ToolSettings {
    /// Deadline of one tool call.
    pub timeout: Duration,
    /// Tool calls of one turn that run at once.
    pub concurrency: usize,
}

impl Default for ToolSettings {
    fn default() -> Self {
        ToolSettings {
            timeout: Duration::from_secs(120),
            concurrency: 4,
        }
    }
}

/// One finished tool call.
#[derive(Clone, Debug)]
pub struct ToolReport {
    /// What the model will read.
    pub output: ToolOutput,
    /// How long it took.
    pub latency: Duration,
}

/// Tools and hooks, as the loop sees them.
#[async_trait]
pub trait Gateway: Send {
    /// The tools to offer the model now; never a hook \[H2\].
    fn model_tools(&mut self) -> Vec<ToolDef>;

    /// A prompt begins.
    fn begin_prompt(&mut self) -> Result<(), UsageError>;

    /// The model answered with `stop` and `tool_calls` tool calls: may the
    /// turn end? Runs the `_Stop` round if the policy calls one \[S1\]-\[S5\].
    /// A cancelled round ends the prompt: `Err(AskError::Cancelled)` \[T5\].
    async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError>;

    /// The history was compacted, removing `removed_messages` messages:
    /// the `_PostCompact` pairs to append, possibly none \[P1\]-\[P2\]. A
    /// cancelled round ends the prompt: `Err(AskError::Cancelled)` \[T5\].
    async fn compacted(
        &mut self,
        removed_messages: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError>;

    /// Ends the prompt on the loop's behalf; returns why it ended \[S5\].
    fn abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError>;

    /// Runs one turn's tool calls, at most `settings.concurrency` at once,
    /// and returns one report per call, in call order. A call to a hook or to
    /// an unknown tool is answered `unknown tool: NAME` and sent nowhere
    /// \[H3\]. On cancellation, unfinished calls are answered as cancelled.
    async fn call_tools(
        &mut self,
        calls: &[ToolCall],
        settings: &ToolSettings,
        cancel: &CancellationToken,
    ) -> Vec<ToolReport>;
}

/// Parses a model's tool arguments: a JSON object, or an error result.
pub fn parse_arguments(call: &ToolCall) -> Result<JsonObject, ToolOutput> {
    let text = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(other) => Err(ToolOutput::error(format!(
            "the arguments of {} must be a JSON object, not {other}",
            call.name
        ))),
        Err(e) => Err(ToolOutput::error(format!(
            "the arguments of {} are not valid JSON: {e}",
            call.name
        ))),
    }
}

/// The result given to a call the prompt's cancellation cut short.
pub fn cancelled_output() -> ToolOutput {
    ToolOutput::error("the prompt was cancelled before this tool call finished")
}
