//! The [`Gateway`] for the MCP host, `hooks_mcp::Host` (the `mcp` feature,
//! on by default): tools and hooks on real MCP servers.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::{FuturesUnordered, StreamExt};
use hooks_core::{
    AbortReason, AskError, EndReason, HookContext, HookText, Injection, SessionEndReason,
    StopReason, ToolGate, ToolRun, TurnVerdict, UsageError,
};
use hooks_mcp::Host;
use tokio_util::sync::CancellationToken;

use crate::event::{AgentEvent, Emitted, Sink};
use crate::gateway::{
    Gateway, JsonObject, ToolDef, ToolOutput, ToolReport, ToolSettings, cancelled_output,
    parse_arguments, spread, tool_uses,
};
use crate::message::ToolCall;

/// Forwards the host's hook events into the loop's event stream \[O2\].
pub fn hook_sink(sink: Sink) -> hooks_mcp::EventSink {
    std::sync::Arc::new(move |event: hooks_core::Event| {
        sink(&Emitted::new(&AgentEvent::Hook(event)));
    })
}

/// The host's tool output as the loop's.
fn output(out: hooks_mcp::ToolOutput) -> ToolOutput {
    ToolOutput {
        text: out.text,
        is_error: out.is_error,
    }
}

#[async_trait]
impl Gateway for Host {
    fn model_tools(&mut self) -> Vec<ToolDef> {
        Host::model_tools(self)
            .into_iter()
            .map(|t| ToolDef {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
            })
            .collect()
    }

    fn begin_prompt(&mut self) -> Result<(), UsageError> {
        Host::begin_prompt(self)
    }

    fn carried(&self) -> Option<hooks_core::Carried> {
        Some(self.session().carried())
    }

    fn restore(&mut self, carried: &hooks_core::Carried) -> Result<(), UsageError> {
        Host::restore(self, carried)
    }

    async fn session_start(
        &mut self,
        context: HookContext,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        Host::session_start(self, context, cancel).await
    }

    async fn prompt_submitted(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        Host::prompt_submitted(self, prompt, cancel).await
    }

    fn tool_owner(&self, name: &str) -> Option<crate::ToolOwner> {
        let session = self.session();
        let (server, bare) = session.resolve(name)?;
        Some(crate::ToolOwner {
            server: Some(session.server_name(server).clone()),
            tool: bare.to_owned(),
        })
    }

    async fn gate_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> Result<Vec<ToolGate>, AskError> {
        let uses = tool_uses(self.session(), calls);
        let asked: Vec<_> = uses.iter().flatten().cloned().collect();
        if asked.is_empty() {
            return Ok(vec![ToolGate::Run; calls.len()]);
        }
        let gates = Host::tools_requested(self, asked, cancel).await?;
        Ok(spread(&uses, gates, ToolGate::Run))
    }

    async fn tools_ran(
        &mut self,
        calls: &[ToolCall],
        outputs: &[ToolOutput],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<HookText>>, AskError> {
        let uses = tool_uses(self.session(), calls);
        let runs: Vec<ToolRun> = uses
            .iter()
            .zip(outputs)
            .filter_map(|(call, output)| {
                Some(ToolRun {
                    call: call.clone()?,
                    output: output.text.clone(),
                    is_error: output.is_error,
                })
            })
            .collect();
        if runs.is_empty() {
            return Ok(vec![Vec::new(); calls.len()]);
        }
        let notes = Host::tools_ran(self, runs, cancel).await?;
        Ok(spread(&uses, notes, Vec::new()))
    }

    async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError> {
        Host::end_turn(self, stop, tool_calls, last_assistant_message, cancel).await
    }

    async fn compacting(&mut self, cancel: &CancellationToken) -> Result<Vec<Injection>, AskError> {
        Host::compacting(self, cancel).await
    }

    async fn compacted(
        &mut self,
        removed_messages: usize,
        summary: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        Host::compacted(self, removed_messages, summary, cancel).await
    }

    async fn end_session(&mut self, reason: SessionEndReason) {
        // `Err` only if the session had ended already: nothing to tell.
        let _ = Host::session_end(self, reason).await;
    }

    fn abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError> {
        Host::abort(self, reason)
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
                    .map(|p| (p, arguments))
                    .map_err(output),
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
            async move {
                let result = prepared.run(arguments, timeout).await;
                (i, output(result), started.elapsed())
            }
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
