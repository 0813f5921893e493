//! Test support for the loop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::check_pairing;
use agent_loop::{
    AgentEvent, Emitted, Model, ModelError, ModelRequest, ModelResponse, Sink, ToolCall,
};
use agent_loop::{
    Gateway, ToolReport, ToolSettings, cancelled_output, parse_arguments, spread, tool_uses,
};
use agent_loop::{ToolDef, ToolOutput};
use async_trait::async_trait;
use hooks_core::{
    AbortReason, AskError, EndReason, HookConfig, HookContext, HookPoint, HookReply, HookText,
    Injection, Input, ListedTool, Output, ReplyPart, ServerId, ServerName, Session,
    SessionEndReason, StopReason, Time, ToolGate, ToolRun, TurnVerdict, UsageError,
};
use tokio_util::sync::CancellationToken;

/// How a fake hook answers, call after call (the last repeats).
pub(crate) type HookScript = Vec<Option<&'static str>>;

/// One fake server: its tools, and what its hooks answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct FakeServer {
    pub(crate) name: &'static str,
    pub(crate) tools: Vec<&'static str>,
    /// `None` answers time out (the call never answers).
    pub(crate) stop: Option<HookScript>,
    pub(crate) post_compact: Option<HookScript>,
    /// The other hook points it lists, each with its script; the hook's
    /// schema asks for every input field \[K1\].
    pub(crate) hooks: Vec<(HookPoint, HookScript)>,
}

/// One hook call that reached a fake server.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HookCall {
    pub(crate) hook: HookPoint,
    pub(crate) server: &'static str,
    pub(crate) arguments: serde_json::Map<String, serde_json::Value>,
}

/// A gateway over the real `hooks-core` session whose servers answer at once
/// from scripts, in virtual time. Tool calls answer `ok NAME ARGS`, and a tool
/// named `slow` waits until cancelled.
pub(crate) struct FakeGateway {
    session: Session,
    servers: Vec<FakeServer>,
    calls: BTreeMap<HookPoint, usize>,
    now: Time,
    /// Every tool call that reached a server.
    pub(crate) executed: Arc<Mutex<Vec<String>>>,
    /// Every hook call that reached a server, with its input.
    pub(crate) hook_calls: Arc<Mutex<Vec<HookCall>>>,
}

impl FakeGateway {
    /// Runs the round the question started, answering its calls from the
    /// scripts and jumping to deadlines, until `take` has the answer.
    fn answer<T>(
        &mut self,
        take: fn(&mut Session) -> Option<T>,
        cancel: &CancellationToken,
    ) -> Result<T, AskError> {
        loop {
            let mut pending = Vec::new();
            while let Some(output) = self.session.poll_output() {
                if let Output::CallHook {
                    call,
                    server,
                    hook,
                    arguments,
                    ..
                } = output
                {
                    self.hook_calls.lock().unwrap().push(HookCall {
                        hook,
                        server: self.servers[server.0].name,
                        arguments,
                    });
                    pending.push((call, server, hook));
                }
            }
            if let Some(answer) = take(&mut self.session) {
                return Ok(answer);
            }
            if cancel.is_cancelled() {
                self.session.abort(self.now, AbortReason::Cancelled)?;
                while self.session.poll_output().is_some() {}
                return Err(AskError::Cancelled);
            }
            let mut answered = false;
            for (call, server, hook) in pending {
                if let Some(reply) = self.hook_answer(server, hook) {
                    self.session
                        .handle(self.now, Input::HookReplied { call, reply })?;
                    answered = true;
                }
            }
            if !answered {
                // Jump to the deadline: hanging hooks time out [T1].
                if let Some(deadline) = self.session.poll_timeout() {
                    self.now = deadline;
                    self.session.handle_timeout(deadline);
                }
            }
        }
    }

    pub(crate) fn new(servers: Vec<FakeServer>, allow: Option<&str>, budget: u32) -> FakeGateway {
        let config =
            HookConfig::from_values(allow, Some("1000"), Some(&budget.to_string())).unwrap();
        let names = servers
            .iter()
            .map(|s| ServerName::new(s.name).unwrap())
            .collect();
        let mut session = Session::new(config, names).unwrap();
        while let Some(output) = session.poll_output() {
            if let Output::StartServer { server } = output {
                let spec = &servers[server.0];
                let mut tools: Vec<String> = spec.tools.iter().map(|t| t.to_string()).collect();
                if spec.stop.is_some() {
                    tools.push("_Stop".into());
                }
                if spec.post_compact.is_some() {
                    tools.push("_PostCompact".into());
                }
                let mut tools: Vec<ListedTool> = tools.into_iter().map(ListedTool::from).collect();
                // Each other hook asks for every field of the table [K1].
                let every_field: serde_json::Map<String, serde_json::Value> =
                    hooks_core::InputField::ALL
                        .iter()
                        .map(|f| (f.name().to_owned(), serde_json::json!({})))
                        .collect();
                let schema = serde_json::json!({"type": "object", "properties": every_field});
                for (hook, _) in &spec.hooks {
                    let schema = schema.as_object().unwrap();
                    tools.push(ListedTool::from_schema(hook.tool_name(), schema));
                }
                session
                    .handle(Time::ZERO, Input::ServerStarted { server, tools })
                    .unwrap();
            }
        }
        FakeGateway {
            session,
            servers,
            calls: BTreeMap::new(),
            now: Time::ZERO,
            executed: Arc::default(),
            hook_calls: Arc::default(),
        }
    }

    fn hook_answer(&mut self, server: ServerId, hook: HookPoint) -> Option<HookReply> {
        let spec = &self.servers[server.0];
        let script = match hook {
            HookPoint::Stop => spec.stop.as_ref(),
            HookPoint::PostCompact => spec.post_compact.as_ref(),
            other => spec.hooks.iter().find(|(h, _)| *h == other).map(|(_, s)| s),
        }?;
        let n = self.calls.entry(hook).or_default();
        let step = script.get(*n).or(script.last()).copied().flatten();
        *n += 1;
        step.map(|text| HookReply::Result(vec![ReplyPart::Text(text.to_owned())]))
    }
}

#[async_trait]
impl Gateway for FakeGateway {
    fn model_tools(&mut self) -> Vec<ToolDef> {
        self.session
            .model_tools()
            .map(|(_, t)| ToolDef {
                name: t.qualified.clone(),
                description: None,
                input_schema: serde_json::json!({"type": "object"}),
            })
            .collect()
    }

    fn begin_prompt(&mut self) -> Result<(), UsageError> {
        self.session.begin_prompt(self.now)
    }

    fn carried(&self) -> Option<hooks_core::Carried> {
        Some(self.session.carried())
    }

    fn restore(&mut self, carried: &hooks_core::Carried) -> Result<(), UsageError> {
        self.session.restore(carried)
    }

    async fn session_start(
        &mut self,
        context: HookContext,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.session.session_start(self.now, context)?;
        self.answer(Session::take_session_context, cancel)
    }

    async fn prompt_submitted(
        &mut self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.session.prompt_submitted(self.now, prompt)?;
        self.answer(Session::take_prompt_context, cancel)
    }

    async fn gate_tools(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> Result<Vec<ToolGate>, AskError> {
        let uses = tool_uses(&self.session, calls);
        let asked = uses.iter().flatten().cloned().collect();
        self.session.tools_requested(self.now, asked)?;
        let gates = self.answer(Session::take_tool_gates, cancel)?;
        Ok(spread(&uses, gates, ToolGate::Run))
    }

    async fn tools_ran(
        &mut self,
        calls: &[ToolCall],
        outputs: &[ToolOutput],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<HookText>>, AskError> {
        let uses = tool_uses(&self.session, calls);
        let runs = uses
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
        self.session.tools_ran(self.now, runs)?;
        let notes = self.answer(Session::take_tool_notes, cancel)?;
        Ok(spread(&uses, notes, Vec::new()))
    }

    async fn end_turn(
        &mut self,
        stop: StopReason,
        tool_calls: usize,
        last_assistant_message: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnVerdict, AskError> {
        self.session
            .end_turn(self.now, stop, tool_calls, last_assistant_message)?;
        self.answer(Session::take_verdict, cancel)
    }

    async fn compacting(&mut self, cancel: &CancellationToken) -> Result<Vec<Injection>, AskError> {
        self.session.compacting(self.now)?;
        self.answer(Session::take_pins, cancel)
    }

    async fn compacted(
        &mut self,
        removed_messages: usize,
        summary: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Injection>, AskError> {
        self.session
            .compacted(self.now, removed_messages, summary)?;
        self.answer(Session::take_reinjections, cancel)
    }

    async fn end_session(&mut self, reason: SessionEndReason) {
        if self.session.in_prompt() {
            let _ = self.session.abort(self.now, AbortReason::Failed);
        }
        if self.session.session_end(self.now, reason).is_ok() {
            let _ = self.answer(Session::take_session_end, &CancellationToken::new());
        }
    }

    fn abort(&mut self, reason: AbortReason) -> Result<EndReason, UsageError> {
        let end = self.session.abort(self.now, reason)?;
        while self.session.poll_output().is_some() {}
        Ok(end)
    }

    async fn call_tools(
        &mut self,
        calls: &[ToolCall],
        settings: &ToolSettings,
        cancel: &CancellationToken,
    ) -> Vec<ToolReport> {
        let _ = settings;
        let mut reports = Vec::new();
        for call in calls {
            let output = match (parse_arguments(call), self.session.resolve(&call.name)) {
                (Err(output), _) => output,
                (Ok(_), None) => ToolOutput::error(format!("unknown tool: {}", call.name)),
                (Ok(args), Some((_, bare))) => {
                    self.executed.lock().unwrap().push(call.name.clone());
                    if bare == "slow" {
                        cancel.cancelled().await;
                        cancelled_output()
                    } else {
                        ToolOutput {
                            text: format!("ok {bare} {}", serde_json::Value::Object(args)),
                            is_error: false,
                        }
                    }
                }
            };
            reports.push(ToolReport {
                output,
                latency: Duration::ZERO,
            });
        }
        reports
    }
}

/// A model that replays responses, checks every request it gets, and keeps
/// them. Past its script it ends its turn.
pub(crate) struct Recorder {
    turns: Mutex<std::collections::VecDeque<Result<ModelResponse, ModelError>>>,
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    /// A turn number (from 1) at which the model hangs until cancelled.
    pub(crate) hang_at: Option<usize>,
    /// How long each answer takes (tokio's clock: virtual under paused time).
    pub(crate) latency: std::time::Duration,
}

#[derive(Clone, Debug)]
pub(crate) struct RecordedRequest {
    pub(crate) messages: Vec<agent_loop::Message>,
    pub(crate) tools: Vec<String>,
}

impl Recorder {
    pub(crate) fn new(turns: Vec<ModelResponse>) -> Arc<Recorder> {
        Arc::new(Recorder {
            turns: Mutex::new(turns.into_iter().map(Ok).collect()),
            requests: Mutex::default(),
            hang_at: None,
            latency: std::time::Duration::ZERO,
        })
    }

    pub(crate) fn with(
        turns: Vec<Result<ModelResponse, ModelError>>,
        hang_at: Option<usize>,
    ) -> Arc<Recorder> {
        Arc::new(Recorder {
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::default(),
            hang_at,
            latency: std::time::Duration::ZERO,
        })
    }

    /// A recorder whose every answer takes `latency`.
    pub(crate) fn slow(
        turns: Vec<Result<ModelResponse, ModelError>>,
        latency: std::time::Duration,
    ) -> Arc<Recorder> {
        Arc::new(Recorder {
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::default(),
            hang_at: None,
            latency,
        })
    }
}

#[async_trait]
impl Model for Recorder {
    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        // Every tool call in every request has exactly one result.
        check_pairing(request.messages)
            .unwrap_or_else(|e| panic!("bad history sent to the model: {e}"));
        let n = {
            let mut requests = self.requests.lock().unwrap();
            requests.push(RecordedRequest {
                messages: request.messages.to_vec(),
                tools: request.tools.iter().map(|t| t.name.clone()).collect(),
            });
            requests.len()
        };
        if self.hang_at == Some(n) {
            std::future::pending::<()>().await;
        }
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        self.turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Ok(say("(script over)")))
    }

    fn describe(&self) -> String {
        "recorder".into()
    }
}

/// A turn that ends with text.
pub(crate) fn say(text: &str) -> ModelResponse {
    ModelResponse {
        text: text.into(),
        tool_calls: vec![],
        stop: hooks_core::StopReason::EndTurn,
        usage: None,
    }
}

/// A turn that calls tools `(id, name, arguments)`.
pub(crate) fn call(calls: &[(&str, &str, &str)]) -> ModelResponse {
    ModelResponse {
        text: String::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: args.to_string(),
            })
            .collect(),
        stop: hooks_core::StopReason::ToolUse,
        usage: None,
    }
}

/// A sink that keeps events.
pub(crate) fn recording_sink() -> (Sink, Arc<Mutex<Vec<AgentEvent>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = events.clone();
    (
        Arc::new(move |e: &Emitted<'_>| kept.lock().unwrap().push(e.event().clone())),
        events,
    )
}

/// One scripted answer of the fake API: status, extra headers, body.
pub(crate) type ScriptedAnswer = (u16, Vec<(&'static str, String)>, String);

/// One answer of the fake API.
pub(crate) enum Reply {
    /// Status, extra headers and body, at once.
    Whole(ScriptedAnswer),
    /// 200 with `text/event-stream`: each chunk its own write (the server
    /// yields between them), then the end.
    Stream(Vec<Vec<u8>>, StreamEnd),
}

/// How a streamed answer ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The body ends as it should.
    Close,
    /// Nothing more is ever sent, and the body never ends.
    Hang,
    /// The connection is torn down mid-body.
    Abort,
}

/// `text` as a server's writes, cut at the byte offsets `cuts` (which may
/// fall inside a character).
pub(crate) fn cut(text: &str, cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut from = 0;
    for &at in cuts {
        chunks.push(text.as_bytes()[from..at].to_vec());
        from = at;
    }
    chunks.push(text.as_bytes()[from..].to_vec());
    chunks
}

/// Says when a streamed body is dropped: it ended, or the client went away.
struct DropGuard(tokio::sync::mpsc::UnboundedSender<()>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A fake model API over real HTTP on 127.0.0.1: answers each POST with the
/// next scripted reply and records every request.
pub(crate) struct FakeApi {
    pub(crate) url: String,
    pub(crate) requests: Arc<Mutex<Vec<(axum::http::HeaderMap, serde_json::Value)>>>,
    /// One message each time a streamed body is dropped.
    pub(crate) dropped: tokio::sync::mpsc::UnboundedReceiver<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl FakeApi {
    pub(crate) async fn start(answers: Vec<(u16, String)>) -> FakeApi {
        FakeApi::start_with_headers(
            answers
                .into_iter()
                .map(|(status, body)| (status, vec![], body))
                .collect(),
        )
        .await
    }

    /// Answers that carry response headers too.
    pub(crate) async fn start_with_headers(answers: Vec<ScriptedAnswer>) -> FakeApi {
        FakeApi::start_replies(answers.into_iter().map(Reply::Whole).collect()).await
    }

    /// Replies that may stream.
    pub(crate) async fn start_replies(replies: Vec<Reply>) -> FakeApi {
        use axum::extract::State;
        use axum::http::{HeaderMap, StatusCode};
        type Shared = (
            Arc<Mutex<std::collections::VecDeque<Reply>>>,
            Arc<Mutex<Vec<(HeaderMap, serde_json::Value)>>>,
            tokio::sync::mpsc::UnboundedSender<()>,
        );
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (dropped_tx, dropped) = tokio::sync::mpsc::unbounded_channel();
        let state: Shared = (
            Arc::new(Mutex::new(replies.into())),
            requests.clone(),
            dropped_tx,
        );
        async fn handle(
            State((replies, requests, dropped)): State<Shared>,
            headers: HeaderMap,
            body: String,
        ) -> axum::response::Response {
            use axum::response::IntoResponse;
            let json = serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
            requests.lock().unwrap().push((headers, json));
            let reply = replies.lock().unwrap().pop_front().unwrap_or(Reply::Whole((
                500,
                vec![],
                "script over".into(),
            )));
            match reply {
                Reply::Whole((status, extra, body)) => {
                    let mut response =
                        (StatusCode::from_u16(status).unwrap(), body).into_response();
                    for (name, value) in extra {
                        response.headers_mut().insert(name, value.parse().unwrap());
                    }
                    response
                }
                Reply::Stream(chunks, end) => {
                    let guard = DropGuard(dropped);
                    let state = (chunks.into_iter(), end, guard);
                    let body =
                        futures::stream::unfold(state, |(mut chunks, end, guard)| async move {
                            // A write of its own: hyper flushes what it has when
                            // the body is not ready.
                            tokio::task::yield_now().await;
                            match (chunks.next(), end) {
                                (Some(chunk), _) => {
                                    Some((Ok(axum::body::Bytes::from(chunk)), (chunks, end, guard)))
                                }
                                (None, StreamEnd::Close) => None,
                                (None, StreamEnd::Hang) => {
                                    let _guard = guard;
                                    std::future::pending().await
                                }
                                (None, StreamEnd::Abort) => Some((
                                    Err(std::io::Error::other("torn down")),
                                    (chunks, StreamEnd::Close, guard),
                                )),
                            }
                        });
                    (
                        [("content-type", "text/event-stream")],
                        axum::body::Body::from_stream(body),
                    )
                        .into_response()
                }
            }
        }
        let app = axum::Router::new()
            .fallback(axum::routing::post(handle))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        FakeApi {
            url,
            requests,
            dropped,
            stop,
        }
    }

    pub(crate) fn bodies(&self) -> Vec<serde_json::Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }

    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
    }
}

/// Quick HTTP settings for tests: short backoff, whole answers (the
/// streaming tests turn `stream` on).
pub(crate) fn http_settings() -> agent_loop::providers::HttpSettings {
    agent_loop::providers::HttpSettings {
        timeout: Duration::from_secs(10),
        retries: 2,
        backoff: Duration::from_millis(10),
        max_response_bytes: 1 << 20,
        stream: false,
        idle_timeout: Duration::from_secs(10),
    }
}

/// [`http_settings`] that stream.
pub(crate) fn stream_settings() -> agent_loop::providers::HttpSettings {
    agent_loop::providers::HttpSettings {
        stream: true,
        ..http_settings()
    }
}

/// A token that cancels itself after `ms` milliseconds.
pub(crate) fn cancel_after(ms: u64) -> tokio_util::sync::CancellationToken {
    let cancel = tokio_util::sync::CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        trigger.cancel();
    });
    cancel
}

/// An observer that keeps the records a transcript would hold, in memory.
#[derive(Clone, Default)]
pub(crate) struct Records(pub(crate) Arc<Mutex<Vec<agent_loop::transcript::Record>>>);

impl agent_loop::transcript::SessionObserver for Records {
    fn appended(&mut self, message: &agent_loop::Message) {
        self.push(agent_loop::transcript::Record::Message {
            message: message.clone(),
        });
    }

    fn replaced(&mut self, summary: bool, history: &[agent_loop::Message]) {
        self.push(agent_loop::transcript::Record::Compacted {
            summary,
            history: history.to_vec(),
        });
    }

    fn carried(&mut self, carried: &hooks_core::Carried) {
        self.push(agent_loop::transcript::Record::Policy {
            budget_used: carried.budget_used,
            rounds: carried.rounds,
            failures: carried
                .failures
                .iter()
                .map(|(name, n)| (name.as_str().to_owned(), *n))
                .collect(),
        });
    }

    fn prompt_ended(&mut self, outcome: &agent_loop::PromptOutcome) {
        self.push(agent_loop::transcript::Record::PromptEnded {
            reason: outcome.reason.as_str().to_owned(),
            detail: outcome.detail.clone(),
            rounds: outcome.rounds,
            session: None,
        });
    }
}

impl Records {
    fn push(&self, record: agent_loop::transcript::Record) {
        self.0.lock().unwrap().push(record);
    }

    /// The records as a transcript's bytes, after a header.
    pub(crate) fn transcript(&self) -> Vec<u8> {
        use agent_loop::transcript::{FORMAT_VERSION, Header, Record};
        let header = Record::Header(Header {
            version: FORMAT_VERSION,
            session_id: "s-1".into(),
            cwd: "/work".into(),
            started: "2025-03-01T10:15:02.123Z".into(),
            sprout: "test".into(),
        });
        let mut bytes = Vec::new();
        for record in std::iter::once(&header).chain(self.0.lock().unwrap().iter()) {
            bytes.extend(serde_json::to_vec(record).unwrap());
            bytes.push(b'\n');
        }
        bytes
    }

    /// The session those records read back as.
    pub(crate) fn saved(&self) -> agent_loop::transcript::SavedSession {
        agent_loop::transcript::read_bytes(std::path::Path::new("s-1.jsonl"), &self.transcript())
            .unwrap()
    }
}
