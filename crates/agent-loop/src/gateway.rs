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
    AbortReason, AskError, Carried, EndReason, HookContext, HookText, Injection, Session,
    SessionEndReason, StopReason, ToolGate, ToolUse, TurnVerdict, UsageError,
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
///
/// The hook points beyond `_Stop` and `_PostCompact` have default methods
/// that answer "nothing" (no pairs, every call runs, no notes), so a gateway
/// without hooks implements only the required ones.
#[async_trait]
pub trait Gateway: Send {
    /// The tools to offer the model now; never a hook \[H2\].
    fn model_tools(&mut self) -> Vec<ToolDef>;

    /// A prompt begins.
    fn begin_prompt(&mut self) -> Result<(), UsageError>;

    /// The session's first prompt began \[E1\]: the `_SessionStart` pairs to
    /// add after the prompt, possibly none. `context` gives later hooks
    /// their `session_id` and `cwd` \[K2\]. A cancelled round ends the
    /// prompt: `Err(AskError::Cancelled)` \[T5\].
    async fn session_start(
        &mut self,
        context: HookContext,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        let _ = (context, cancel);
        Ok(Vec::new())
    }

    /// A prompt with this text began \[E2\]: the `_UserPromptSubmit` pairs
    /// to add right after it, possibly none.
    async fn prompt_submitted(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        let _ = (prompt, cancel);
        Ok(Vec::new())
    }

    /// The model asked for these tool calls \[E3\]: one gate per call, in
    /// order. Only calls that resolve to a real tool are asked about
    /// ([`tool_uses`]); the others run (and are answered `unknown tool`).
    async fn gate_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> Result<Vec<ToolGate>, AskError> {
        let _ = cancel;
        Ok(vec![ToolGate::Run; calls.len()])
    }

    /// These tool calls ran with these outputs \[E4\]: per call, the
    /// `_PostToolUse` envelopes to append to its result, possibly none.
    async fn tools_ran(
        &mut self,
        calls: &[ToolCall],
        outputs: &[ToolOutput],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<HookText>>, AskError> {
        let _ = (outputs, cancel);
        Ok(vec![Vec::new(); calls.len()])
    }

    /// The model answered with `stop`, `tool_calls` tool calls and the text
    /// `last_assistant_message`: may the turn end? Runs the `_Stop` round if
    /// the policy calls one \[S1\]-\[S5\]. A cancelled round ends the
    /// prompt: `Err(AskError::Cancelled)` \[T5\].
    async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError>;

    /// The history is about to be compacted \[E5\]: the `_PreCompact` pins,
    /// possibly none, which the summary must keep.
    async fn compacting(&mut self, cancel: &CancellationToken) -> Result<Vec<Injection>, AskError> {
        let _ = cancel;
        Ok(Vec::new())
    }

    /// The history was compacted, removing `removed_messages` messages,
    /// with `summary` after a summary handoff: the `_PostCompact` pairs to
    /// append, possibly none \[P1\]-\[P2\]. A cancelled round ends the
    /// prompt: `Err(AskError::Cancelled)` \[T5\].
    async fn compacted(
        &mut self,
        removed_messages: usize,
        summary: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError>;

    /// The session ends, for `reason` \[E6\]: runs `_SessionEnd`, whose
    /// answers are ignored, within its short deadline.
    async fn end_session(&mut self, reason: SessionEndReason) {
        let _ = reason;
    }

    /// What of the policy a session resumed in another process must carry
    /// over ([`Carried`]: the `_Stop` budget used, the rounds asked, each
    /// server's failures);
    /// `None` (the default) for a gateway without a policy to carry.
    fn carried(&self) -> Option<Carried> {
        None
    }

    /// Continues a saved session's policy state, between prompts
    /// ([`Session::restore`] for a gateway on the `hooks-core` policy). The
    /// default keeps nothing. Servers' failure counts must reach the policy
    /// before its servers start ([`Session::resume`]; `hooks_mcp::Host::resume`),
    /// so a gateway takes them when it is built, not here.
    fn restore(&mut self, carried: &Carried) -> Result<(), UsageError> {
        let _ = carried;
        Ok(())
    }

    /// The tool a model call named `name` would run, for approval
    /// \[U4\]: its server and bare name, or `None` for a name that reaches
    /// no tool (a hook, an unknown name: answered `unknown tool` \[H3\],
    /// never asked about \[U5\]). The default knows no servers and says
    /// every name is a tool, so a gateway that does not say asks about all.
    fn tool_owner(&self, name: &str) -> Option<crate::ToolOwner> {
        Some(crate::ToolOwner {
            server: None,
            tool: name.to_owned(),
        })
    }

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

/// The hook-point view of a turn's tool calls, for a gateway on a
/// `hooks-core` [`Session`]: per call, the [`ToolUse`] to ask `_PreToolUse`
/// and `_PostToolUse` about, or `None` for a call that reaches no server
/// (bad arguments, a hook, an unknown name: \[H3\] calls never reach them).
pub fn tool_uses(session: &Session, calls: &[ToolCall]) -> Vec<Option<ToolUse>> {
    calls
        .iter()
        .map(|call| {
            let arguments = parse_arguments(call).ok()?;
            let (server, bare) = session.resolve(&call.name)?;
            Some(ToolUse {
                server,
                tool: bare.to_owned(),
                arguments: serde_json::Value::Object(arguments),
            })
        })
        .collect()
}

/// Spreads the answers about the asked calls (the `Some`s of `uses`, in
/// order) back over every call; a call not asked about gets `unasked`.
pub fn spread<T: Clone>(uses: &[Option<ToolUse>], answers: Vec<T>, unasked: T) -> Vec<T> {
    let mut answers = answers.into_iter();
    uses.iter()
        .map(|u| match u {
            Some(_) => answers.next().unwrap_or_else(|| unasked.clone()),
            None => unasked.clone(),
        })
        .collect()
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
