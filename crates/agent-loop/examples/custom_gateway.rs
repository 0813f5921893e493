//! The loop with a model and a gateway of your own, and no MCP at all.
//!
//! ```text
//! cargo run -p agent-loop --no-default-features --example custom_gateway
//! ```
//!
//! The model is a small scripted one. The gateway keeps its tools and hooks
//! in memory: one tool, `clock__now`, and one `_Stop` hook from a "checker"
//! that objects once. Every hook decision is still the `hooks-core` policy's:
//! the gateway only feeds it inputs and answers the hook calls it asks for.
//! The other hook points (`_SessionStart`, `_PreToolUse`, …) keep the
//! trait's default methods, which answer "nothing".

#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_loop::parse_arguments;
use agent_loop::{
    Agent, AgentEvent, AgentSettings, Emitted, Gateway, Model, ModelError, ModelRequest,
    ModelResponse, ToolCall, ToolDef, ToolOutput, ToolReport, ToolSettings,
};
use async_trait::async_trait;
use hooks_core::{
    AbortReason, AskError, EndReason, HookConfig, HookReply, Injection, Input, Output, ReplyPart,
    ServerName, Session, StopReason, Time, TurnVerdict, UsageError,
};
use tokio_util::sync::CancellationToken;

/// A model that asks for the time and says it is done; when a hook objects,
/// it looks once more.
#[derive(Debug, Default)]
struct Scripted {
    turn: Mutex<usize>,
}

#[async_trait]
impl Model for Scripted {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        *turn += 1;
        let look = |id: &str| {
            vec![ToolCall {
                id: id.into(),
                name: request.tools[0].name.clone(),
                arguments: "{}".into(),
            }]
        };
        let (text, tool_calls) = match *turn {
            1 => ("Let me look at the clock.", look("call-1")),
            2 => ("It is noon. Done.", vec![]),
            3 => ("Looking once more.", look("call-2")),
            _ => ("Still noon. Done.", vec![]),
        };
        let stop = if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Ok(ModelResponse {
            text: text.into(),
            tool_calls,
            stop,
            usage: None,
        })
    }

    fn describe(&self) -> String {
        "a scripted model".into()
    }
}

/// Tools and hooks in memory, on the real policy.
struct InMemory {
    session: Session,
    started: Instant,
    objections_left: usize,
}

impl InMemory {
    fn new() -> InMemory {
        let config = HookConfig::from_values(Some("*"), Some("2500"), Some("3"))
            .expect("the settings are valid");
        let checker = ServerName::new("clock").expect("a valid server name");
        let session = Session::new(config, vec![checker]).expect("one server");
        let mut gateway = InMemory {
            session,
            started: Instant::now(),
            objections_left: 1,
        };
        // The policy asks for the server to start; answer at once.
        gateway.drive();
        gateway
    }

    fn now(&self) -> Time {
        Time::from_epoch(self.started.elapsed())
    }

    /// Acts on every output of the policy. Every hook answers at once here,
    /// so after one pass the answer to the question asked is ready.
    fn drive(&mut self) {
        while let Some(output) = self.session.poll_output() {
            let now = self.now();
            let input = match output {
                Output::StartServer { server } => Input::ServerStarted {
                    server,
                    tools: vec!["now".into(), "_Stop".into()],
                },
                Output::CallHook { call, .. } => {
                    let text = if self.objections_left > 0 {
                        self.objections_left -= 1;
                        "Check the time once more before you finish."
                    } else {
                        ""
                    };
                    let reply = HookReply::Result(vec![ReplyPart::Text(text.into())]);
                    Input::HookReplied { call, reply }
                }
                Output::Event(_) | Output::CancelCall { .. } | Output::KillServer { .. } => {
                    continue;
                }
            };
            self.session
                .handle(now, input)
                .expect("answers to the policy's own outputs are valid");
        }
    }
}

#[async_trait]
impl Gateway for InMemory {
    fn model_tools(&mut self) -> Vec<ToolDef> {
        self.session
            .model_tools()
            .map(|(_, tool)| ToolDef {
                name: tool.qualified.clone(),
                description: Some("The time of day.".into()),
                input_schema: serde_json::json!({"type": "object"}),
            })
            .collect()
    }

    fn begin_prompt(&mut self) -> Result<(), UsageError> {
        let now = self.now();
        self.session.begin_prompt(now)?;
        self.drive();
        Ok(())
    }

    async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
        _cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError> {
        let now = self.now();
        self.session
            .end_turn(now, stop, tool_calls, last_assistant_message)?;
        self.drive();
        Ok(self
            .session
            .take_verdict()
            .expect("the policy decides once every hook has answered"))
    }

    async fn compacted(
        &mut self,
        removed_messages: usize,
        summary: Option<&str>,
        _cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        let now = self.now();
        self.session.compacted(now, removed_messages, summary)?;
        self.drive();
        Ok(self
            .session
            .take_reinjections()
            .expect("the policy decides once every hook has answered"))
    }

    fn abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError> {
        let now = self.now();
        let end = self.session.abort(now, reason)?;
        self.drive();
        Ok(end)
    }

    async fn call_tools(
        &mut self,
        calls: &[ToolCall],
        _settings: &ToolSettings,
        _cancel: &CancellationToken,
    ) -> Vec<ToolReport> {
        calls
            .iter()
            .map(|call| {
                let output = match (parse_arguments(call), self.session.resolve(&call.name)) {
                    (Err(output), _) => output,
                    (Ok(_), Some(_)) => ToolOutput {
                        text: "12:00".into(),
                        is_error: false,
                    },
                    // Hooks and unknown names alike [H3].
                    (Ok(_), None) => ToolOutput::error(format!("unknown tool: {}", call.name)),
                };
                ToolReport {
                    output,
                    latency: Duration::ZERO,
                }
            })
            .collect()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let sink = Arc::new(|event: &Emitted<'_>| match event.event() {
        AgentEvent::AssistantText { text } => println!("model: {text}"),
        AgentEvent::ToolResult { name, text, .. } => println!("  {name} -> {text}"),
        AgentEvent::Injected { server, .. } => println!("  {server} objected; the loop goes on"),
        AgentEvent::PromptEnded { reason, .. } => println!("ended: {reason}"),
        _ => {}
    });
    let mut agent = Agent::new(
        Arc::new(Scripted::default()),
        InMemory::new(),
        AgentSettings::default(),
        sink,
    );
    let outcome = agent
        .run_prompt("What time is it?", &CancellationToken::new())
        .await;
    assert_eq!(outcome.rounds, 4, "look, objected end, look again, end");
    assert_eq!(outcome.reason, hooks_core::EndReason::NoObjection);
    assert_eq!(agent.into_gateway().session.budget_used(), 1);
}
