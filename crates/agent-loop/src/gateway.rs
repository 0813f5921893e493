//! The loop's boundary to tools and hooks: [`Gateway`], and its
//! implementation for [`hooks_mcp::Host`].
//!
//! The trait lets the loop's tests run against an in-memory gateway (the real
//! `hooks-core` policy with scripted hook answers) while the product runs the
//! real MCP host.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use hooks_core::{Decision, Input, UsageError};
use hooks_mcp::{Host, ModelToolDef, ToolOutput};
use tokio_util::sync::CancellationToken;

use crate::message::ToolCall;

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
    /// The tools to offer the model now; never a hook [H2].
    fn model_tools(&mut self) -> Vec<ModelToolDef>;

    /// A prompt begins.
    fn begin_prompt(&mut self) -> Result<(), UsageError>;

    /// Feeds a question to the policy and runs whatever round it starts.
    async fn decide(
        &mut self,
        input: Input,
        cancel: &CancellationToken,
    ) -> Result<Decision, UsageError>;

    /// Runs one turn's tool calls, at most `settings.concurrency` at once,
    /// and returns one report per call, in call order. A call to a hook or to
    /// an unknown tool is answered `unknown tool: NAME` and sent nowhere
    /// [H3]. On cancellation, unfinished calls are answered as cancelled.
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

#[async_trait]
impl Gateway for Host {
    fn model_tools(&mut self) -> Vec<ModelToolDef> {
        Host::model_tools(self)
    }

    fn begin_prompt(&mut self) -> Result<(), UsageError> {
        Host::begin_prompt(self)
    }

    async fn decide(
        &mut self,
        input: Input,
        cancel: &CancellationToken,
    ) -> Result<Decision, UsageError> {
        Host::decide(self, input, cancel).await
    }

    async fn call_tools(
        &mut self,
        calls: &[ToolCall],
        settings: &ToolSettings,
        cancel: &CancellationToken,
    ) -> Vec<ToolReport> {
        let mut reports: Vec<Option<ToolReport>> = vec![None; calls.len()];
        let mut ready = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            let started = Instant::now();
            let prepared = match parse_arguments(call) {
                Ok(arguments) => self
                    .prepare_tool_call(&call.name, cancel)
                    .await
                    .map(|p| (p, arguments)),
                Err(output) => Err(output),
            };
            match prepared {
                Ok(prepared) => ready.push((i, prepared, started)),
                Err(output) => {
                    reports[i] = Some(ToolReport {
                        output,
                        latency: started.elapsed(),
                    })
                }
            }
        }
        let mut queue = ready.into_iter();
        let mut running = FuturesUnordered::new();
        let spawn = |(i, (prepared, arguments), started): (
            usize,
            (hooks_mcp::PreparedCall, JsonObject),
            Instant,
        )| {
            let timeout = settings.timeout;
            async move { (i, prepared.run(arguments, timeout).await, started.elapsed()) }
        };
        for next in queue.by_ref().take(settings.concurrency.max(1)) {
            running.push(spawn(next));
        }
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                finished = running.next() => match finished {
                    Some((i, output, latency)) => {
                        reports[i] = Some(ToolReport { output, latency });
                        if let Some(next) = queue.next() {
                            running.push(spawn(next));
                        }
                    }
                    None => break,
                },
            }
        }
        reports
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| ToolReport {
                    output: cancelled_output(),
                    latency: Duration::ZERO,
                })
            })
            .collect()
    }
}
